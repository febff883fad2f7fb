//! The engine takes its settings from `EngineSettings` (resolved by
//! `kinetic_core::settings`), never from the environment it captures job
//! variables from; and it stamps records with its clock.

use std::path::Path;
use std::sync::Arc;

use kinetic_core::env::EnvSnapshot;
use kinetic_core::layout;
use kinetic_core::ports::ObjectStore;
use kinetic_core::protocol::RunnerSpec;
use kinetic_core::record::UtcTimestamp;
use kinetic_engine::{Engine, EngineSettings, Entrypoint, JobHandle, JobSpec};
use kinetic_testkit::{FakeBackend, MemoryStore};

fn project(root: &Path) {
    std::fs::create_dir_all(root.join(".venv")).unwrap();
    std::fs::write(root.join("pyproject.toml"), "[project]\nname = \"p\"\n").unwrap();
    std::fs::write(root.join("work.py"), "def f():\n    return 1\n").unwrap();
    std::fs::write(root.join(".venv/marker"), "x").unwrap();
}

/// An environment that would change everything if the engine read it.
fn hostile_env() -> EnvSnapshot {
    EnvSnapshot::from_pairs([
        ("KINETIC_OUTPUT_DIR", "gs://from-the-environment"),
        ("KINETIC_NO_DEFAULT_EXCLUDES", "1"),
        ("KINETIC_PACKAGE_ROOT", "/no/such/root"),
        ("KINETIC_CONTEXT_SIZE_WARN_MB", "not a number"),
        ("HOME", "/no/such/home"),
    ])
}

fn engine(store: &MemoryStore, settings: EngineSettings) -> Engine {
    Engine::builder()
        .store(Arc::new(store.clone()))
        .backend(Arc::new(FakeBackend::new("fake", Arc::new(store.clone()))))
        .default_backend("fake")
        .env_snapshot(hostile_env())
        .settings(settings)
        .clock(|| UtcTimestamp::from_unix_seconds(1_750_000_000))
        .build()
        .unwrap()
}

async fn runner_spec(store: &MemoryStore, handle: &JobHandle) -> RunnerSpec {
    let bytes = store
        .get(&layout::spec(handle.id()), Default::default())
        .await
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

async fn context_names(store: &MemoryStore, handle: &JobHandle) -> Vec<String> {
    let spec = runner_spec(store, handle).await;
    let mut sha = [0; 32];
    hex::decode_to_slice(&spec.context.sha256, &mut sha).unwrap();
    let bytes = store
        .get(&layout::shared_context(&sha), Default::default())
        .await
        .unwrap();
    let zip = zip::ZipArchive::new(std::io::Cursor::new(bytes.to_vec())).unwrap();
    zip.file_names().map(|n| n.unwrap().into_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_come_from_settings_never_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let proj = home.join("proj");
    project(&proj);
    let store = MemoryStore::new();

    // Defaults: the environment's KINETIC_* values are not settings.
    let plain = engine(&store, EngineSettings::default().with_home(&home));
    let spec = JobSpec::new(Entrypoint::parse("work:f").unwrap()).working_dir(&proj);
    let handle = plain.submit(spec).await.unwrap();
    let r = runner_spec(&store, &handle).await;
    assert_eq!(r.output_dir, store.uri(&layout::outputs(handle.id())));
    assert_eq!(r.plan.package_root, proj.display().to_string());
    assert!(
        !context_names(&store, &handle)
            .await
            .iter()
            .any(|n| n.starts_with(".venv")),
        "default excludes apply"
    );
    assert_eq!(
        handle.record().created_at,
        UtcTimestamp::from_unix_seconds(1_750_000_000)
    );

    // Settings given: they apply, and a missing working directory is the settings' cwd.
    let mut settings = EngineSettings::default().with_home(&home).with_cwd(&proj);
    settings.output_dir = Some("gs://from-settings/out".into());
    settings.default_excludes = false;
    let configured = engine(&store, settings);
    let handle = configured
        .submit(JobSpec::new(Entrypoint::parse("work:f").unwrap()))
        .await
        .unwrap();
    let r = runner_spec(&store, &handle).await;
    assert_eq!(r.output_dir, "gs://from-settings/out");
    assert_eq!(r.plan.package_root, proj.display().to_string());
    assert!(
        context_names(&store, &handle)
            .await
            .iter()
            .any(|n| n == ".venv/marker"),
        "default excludes off"
    );

    // A package root setting replaces detection.
    let mut settings = EngineSettings::default().with_home(&home);
    settings.package_root = Some(home.display().to_string());
    let rooted = engine(&store, settings);
    let handle = rooted
        .submit(JobSpec::new(Entrypoint::parse("work:f").unwrap()).working_dir(&proj))
        .await
        .unwrap();
    assert_eq!(
        runner_spec(&store, &handle).await.plan.package_root,
        home.display().to_string()
    );
}

/// `KINETIC_CLUSTER_INFO`'s cluster facts are the configured cluster's (its
/// zone's region computed), on every backend but the local one, whose jobs
/// run on this host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spec_names_the_configured_cluster_its_cloud_region_and_zone() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let proj = home.join("proj");
    project(&proj);
    let store = MemoryStore::new();
    let settings = EngineSettings::for_cluster("p", "europe-west4-b", "my-cluster", "default")
        .with_home(&home)
        .with_cwd(&proj);
    let handle = engine(&store, settings.clone())
        .submit(JobSpec::new(Entrypoint::parse("work:f").unwrap()))
        .await
        .unwrap();
    let cluster = runner_spec(&store, &handle).await.cluster;
    assert_eq!(
        (
            cluster.cluster_name.as_str(),
            cluster.cloud.as_str(),
            cluster.region.as_deref(),
            cluster.zone.as_deref()
        ),
        (
            "my-cluster",
            "GCP",
            Some("europe-west4"),
            Some("europe-west4-b")
        )
    );
    let local = Engine::builder()
        .store(Arc::new(store.clone()))
        .backend(Arc::new(FakeBackend::new("local", Arc::new(store.clone()))))
        .default_backend("local")
        .env_snapshot(hostile_env())
        .settings(settings)
        .build()
        .unwrap();
    let handle = local
        .submit(JobSpec::new(Entrypoint::parse("work:f").unwrap()))
        .await
        .unwrap();
    let cluster = runner_spec(&store, &handle).await.cluster;
    assert_eq!(
        (
            cluster.cluster_name.as_str(),
            cluster.cloud.as_str(),
            cluster.region,
            cluster.zone
        ),
        ("local", "local", None, None)
    );
}
