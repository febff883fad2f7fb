//! A content-addressed context: a single job's archive lives at
//! `contexts/{sha256}.zip`, is uploaded only when the store lacks it, and
//! the engine's context cache reuses the archive of an unchanged project
//! instead of packing it again.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use kinetic_core::layout;
use kinetic_core::ports::ObjectStore;
use kinetic_core::protocol::{ExtractLimits, RunnerSpec};
use kinetic_engine::layers::FaultyStore;
use kinetic_engine::{CleanupOptions, Engine, EngineSettings, Entrypoint, JobHandle, JobSpec};
use kinetic_testkit::{FakeBackend, MemoryStore};

/// A project whose files were last changed an hour ago.
fn project(root: &Path) {
    std::fs::create_dir_all(root.join("pkg")).unwrap();
    std::fs::write(root.join("pyproject.toml"), "[project]\nname = \"p\"\n").unwrap();
    std::fs::write(root.join("work.py"), "def f():\n    return 1\n").unwrap();
    std::fs::write(root.join("pkg/data.txt"), "x".repeat(10_000)).unwrap();
    for f in ["pyproject.toml", "work.py", "pkg/data.txt"] {
        set_mtime(&root.join(f), hour_ago());
    }
}

fn hour_ago() -> SystemTime {
    SystemTime::now() - Duration::from_secs(3600)
}

fn set_mtime(path: &Path, t: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

struct World {
    _dir: tempfile::TempDir,
    proj: PathBuf,
    cache: PathBuf,
    store: FaultyStore,
    engine: Engine,
}

fn world() -> World {
    world_with(tempfile::tempdir().unwrap(), ExtractLimits::default())
}

/// A world in `dir` (whose cache an earlier world may have filled) whose
/// engine packs within `limits`.
fn world_with(dir: tempfile::TempDir, limits: ExtractLimits) -> World {
    let home = dir.path().join("home");
    let proj = home.join("proj");
    if !proj.exists() {
        project(&proj);
    }
    let cache = dir.path().join("cache");
    let mut settings = EngineSettings::default().with_home(&home).with_cwd(&proj);
    settings.context_cache = Some(cache.clone());
    settings.extract_limits = limits;
    let memory = MemoryStore::new();
    let store = FaultyStore::new(Arc::new(memory.clone()));
    let engine = Engine::builder()
        .store(Arc::new(store.clone()))
        .backend(Arc::new(FakeBackend::new("fake", Arc::new(memory))))
        .default_backend("fake")
        .settings(settings)
        .build()
        .unwrap();
    World {
        _dir: dir,
        proj,
        cache,
        store,
        engine,
    }
}

impl World {
    async fn submit(&self) -> JobHandle {
        self.engine
            .submit(JobSpec::new(Entrypoint::parse("work:f").unwrap()))
            .await
            .unwrap()
    }

    async fn spec(&self, handle: &JobHandle) -> RunnerSpec {
        let bytes = self
            .store
            .get(&layout::spec(handle.id()), Default::default())
            .await
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    /// Context uploads so far: the context is the only file-backed upload
    /// of these jobs (spec and record are written from memory).
    fn context_uploads(&self) -> u64 {
        self.store.faults().calls("put_file")
    }

    /// The cached archives, with their inode (a re-pack writes a new file).
    fn cached_archives(&self) -> Vec<(PathBuf, u64)> {
        use std::os::unix::fs::MetadataExt as _;
        let mut zips: Vec<(PathBuf, u64)> = std::fs::read_dir(&self.cache)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "zip"))
            .map(|p| {
                let ino = std::fs::metadata(&p).unwrap().ino();
                (p, ino)
            })
            .collect();
        zips.sort();
        zips
    }
}

fn key_of(spec: &RunnerSpec) -> kinetic_core::ports::ObjectPath {
    let mut sha = [0; 32];
    hex::decode_to_slice(&spec.context.sha256, &mut sha).unwrap();
    layout::shared_context(&sha)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_project_is_neither_repacked_nor_uploaded_again() {
    let w = world();
    let first = w.submit().await;
    let first_spec = w.spec(&first).await;
    assert_eq!(w.context_uploads(), 1);
    let key = key_of(&first_spec);
    assert_eq!(first_spec.context.uri, w.store.uri(&key));
    let archives = w.cached_archives();
    assert_eq!(archives.len(), 1, "{archives:?}");

    let second = w.submit().await;
    let second_spec = w.spec(&second).await;
    assert_ne!(first.id(), second.id());
    assert_eq!(w.context_uploads(), 1, "nothing uploaded again");
    assert_eq!(second_spec.context, first_spec.context);
    assert_eq!(w.cached_archives(), archives, "nothing packed again");

    // The stored archive is the one the spec names, byte for byte.
    let stored = w.store.get(&key, Default::default()).await.unwrap();
    let sha = kinetic_core::hashing::file_sha256(&archives[0].0).unwrap();
    assert_eq!(hex::encode(sha), first_spec.context.sha256);
    assert_eq!(std::fs::read(&archives[0].0).unwrap(), stored.to_vec());

    // Cleaning one job up leaves the context the other still names.
    first.cleanup(CleanupOptions::default()).await.unwrap();
    assert!(w.store.head(&layout::spec(first.id())).await.is_err());
    assert!(w.store.head(&key).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_file_makes_a_new_context() {
    let w = world();
    let first = w.spec(&w.submit().await).await;

    std::fs::write(w.proj.join("work.py"), "def f():\n    return 2\n").unwrap();
    set_mtime(&w.proj.join("work.py"), hour_ago());
    let second = w.spec(&w.submit().await).await;
    assert_ne!(second.context.sha256, first.context.sha256);
    assert_eq!(w.context_uploads(), 2);

    // Same size, and the old mtime put back: the change is still seen.
    let path = w.proj.join("work.py");
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    std::fs::write(&path, "def f():\n    return 3\n").unwrap();
    set_mtime(&path, mtime);
    let third = w.spec(&w.submit().await).await;
    assert_ne!(third.context.sha256, second.context.sha256);
    assert_eq!(w.context_uploads(), 3);
    for spec in [&first, &second, &third] {
        assert!(w.store.head(&key_of(spec)).await.is_ok());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_freshly_changed_file_is_checked_by_content() {
    let w = world();
    // Changed just now: the record cannot trust file times alone.
    let path = w.proj.join("work.py");
    std::fs::write(&path, "def f():\n    return 4\n").unwrap();
    let first = w.spec(&w.submit().await).await;
    let second = w.spec(&w.submit().await).await;
    assert_eq!(second.context, first.context, "same content: reused");
    assert_eq!(w.context_uploads(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_submits_of_one_project_upload_once() {
    let w = world();
    let (a, b, c) = tokio::join!(w.submit(), w.submit(), w.submit());
    let specs = [w.spec(&a).await, w.spec(&b).await, w.spec(&c).await];
    assert!(specs.iter().all(|s| s.context == specs[0].context));
    assert_eq!(w.context_uploads(), 1);
    assert_eq!(w.cached_archives().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_the_store_lost_is_uploaded_again() {
    let w = world();
    let first = w.spec(&w.submit().await).await;
    w.store.delete(&key_of(&first)).await.unwrap();
    let second = w.spec(&w.submit().await).await;
    assert_eq!(second.context, first.context);
    assert_eq!(w.context_uploads(), 2);
    assert!(w.store.head(&key_of(&first)).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_archive_beyond_the_extraction_limits_is_refused_too() {
    let first = world();
    first.submit().await;
    assert_eq!(first.cached_archives().len(), 1);
    // The same project and cache, with a limit the archive's entries pass.
    let World { _dir, .. } = first;
    let again = world_with(_dir, ExtractLimits::new(1 << 30, 2, 200));
    let err = again
        .engine
        .submit(JobSpec::new(Entrypoint::parse("work:f").unwrap()))
        .await
        .expect_err("a cached archive of more entries than the limit");
    assert!(err.to_string().contains("would refuse to extract"), "{err}");
    assert_eq!(again.context_uploads(), 0, "nothing uploaded");
}
