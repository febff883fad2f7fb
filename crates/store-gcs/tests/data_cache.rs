//! The engine's content-addressed data cache on a GCS bucket (the fake
//! server): parallel uploads, the marker written last and listing what the
//! entry holds, a hit costing one GET and one LIST, a store that fails
//! midway through an upload, and entries that no longer match their marker
//! repaired.

use std::path::PathBuf;
use std::sync::Arc;

use kinetic_core::cache::DataMarker;
use kinetic_core::env::EnvSnapshot;
use kinetic_core::hashing::content_hash;
use kinetic_core::layout::{data_entry, data_marker};
use kinetic_core::ports::{ObjectPath, ObjectStore};
use kinetic_engine::{Arg, Data, Engine, EngineSettings, Entrypoint, JobSpec};
use kinetic_fake_gcp::{FakeGcs, GcsFault, GcsOp, GcsRequest};
use kinetic_store_gcs::{GcsOptions, GcsStore};
use kinetic_testkit::FakeBackend;

const BUCKET: &str = "proj-kn-kinetic-cluster-jobs";
const FILES: usize = 12;
/// The engine's bound on uploads in flight for one data entry.
const UPLOAD_BOUND: usize = 16;

struct World {
    _dir: tempfile::TempDir,
    project: PathBuf,
    data: PathBuf,
    gcs: FakeGcs,
    store: Arc<dyn ObjectStore>,
    engine: Engine,
}

fn world() -> World {
    world_with(FILES)
}

fn world_with(files: usize) -> World {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("home/proj");
    let data = project.join("data");
    std::fs::create_dir_all(data.join("sub")).unwrap();
    std::fs::write(
        project.join("pyproject.toml"),
        "[project]\nname = \"proj\"\ndependencies = []\n",
    )
    .unwrap();
    std::fs::write(project.join("work.py"), "def f(d):\n    return d\n").unwrap();
    for i in 0..files {
        let rel = if i % 3 == 0 {
            format!("sub/f{i:02}.txt")
        } else {
            format!("f{i:02}.txt")
        };
        std::fs::write(data.join(rel), format!("content {i}\n").repeat(100)).unwrap();
    }
    let gcs = FakeGcs::with_buckets(&[BUCKET]).unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(
        GcsStore::open(
            &format!("gs://{BUCKET}"),
            &GcsOptions::emulator(&gcs.endpoint()),
        )
        .unwrap(),
    );
    let mut env = EnvSnapshot::new();
    env.insert("HOME", dir.path().join("home").to_string_lossy());
    let engine = Engine::builder()
        .store(store.clone())
        .backend(Arc::new(FakeBackend::new("local", store.clone())))
        .env_snapshot(env)
        .settings(EngineSettings::default().with_home(dir.path().join("home")))
        .build()
        .unwrap();
    World {
        _dir: dir,
        project,
        data,
        gcs,
        store,
        engine,
    }
}

impl World {
    fn spec(&self) -> JobSpec {
        JobSpec::new(Entrypoint::parse("work:f").unwrap())
            .working_dir(&self.project)
            .arg(Arg::Data(Data::new("data", &self.project).unwrap()))
    }

    fn marker(&self) -> String {
        data_marker(&content_hash(&self.data).unwrap()).to_string()
    }

    async fn delete(&self, name: &str) {
        let path = ObjectPath::parse(name).unwrap();
        self.store.delete(&path).await.unwrap();
    }

    fn entry(&self) -> String {
        data_entry(&content_hash(&self.data).unwrap()).to_string()
    }

    fn marker_document(&self) -> DataMarker {
        let bytes = self.gcs.object(BUCKET, &self.marker()).expect("a marker");
        DataMarker::from_json(&bytes, &content_hash(&self.data).unwrap()).expect("a listed marker")
    }

    fn cache_objects(&self) -> Vec<String> {
        self.gcs
            .list_objects(BUCKET)
            .into_iter()
            .map(|(n, _)| n)
            .filter(|n| n.starts_with("default/data-cache/"))
            .collect()
    }
}

fn under_default(requests: &[GcsRequest]) -> Vec<&GcsRequest> {
    requests
        .iter()
        .filter(|r| r.name.starts_with("default/"))
        .collect()
}

fn is_data_put(r: &GcsRequest) -> bool {
    r.op == GcsOp::Put && r.name.starts_with("default/data-cache/")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_failing_midway_leaves_no_marker_and_the_next_submit_completes() {
    let w = world();
    // The sixth data object fails, as a store going away mid-upload would.
    w.gcs.inject(
        GcsFault::status(503)
            .on(GcsOp::Put)
            .under("default/data-cache/")
            .after(5),
    );
    let err = w.engine.submit(w.spec()).await.unwrap_err();
    assert!(err.is_retryable(), "a 503 midway is retryable: {err}");
    assert!(
        w.gcs.object(BUCKET, &w.marker()).is_none(),
        "no marker after a failed upload"
    );
    let partial = w.cache_objects();
    assert!(
        partial.len() < FILES,
        "the upload stopped midway: {partial:?}"
    );
    assert!(
        w.gcs
            .list_objects(BUCKET)
            .iter()
            .all(|(n, _)| n.starts_with("default/")),
        "nothing of the failed job is left: {:?}",
        w.gcs.list_objects(BUCKET)
    );

    // The half-written entry is not a hit: everything goes up again, then
    // the marker, last.
    w.gcs.clear_requests();
    w.engine.submit(w.spec()).await.unwrap();
    let requests = w.gcs.requests();
    let data_puts: Vec<usize> = (0..requests.len())
        .filter(|&i| is_data_put(&requests[i]))
        .collect();
    assert_eq!(data_puts.len(), FILES, "every object is uploaded again");
    let marker = w.marker();
    let marker_put = requests
        .iter()
        .position(|r| r.op == GcsOp::Put && r.name == marker)
        .expect("the marker is written");
    assert!(
        data_puts.iter().all(|&i| i < marker_put),
        "the marker is written after every data object"
    );
    assert_eq!(w.cache_objects().len(), FILES);
    // The marker lists exactly what the entry holds.
    let listed = w.marker_document();
    assert_eq!(listed.files.len(), FILES);

    // A hit costs one GET of the marker and one LIST of the entry, and
    // writes nothing.
    w.gcs.clear_requests();
    w.engine.submit(w.spec()).await.unwrap();
    let requests = w.gcs.requests();
    let touched = under_default(&requests);
    assert_eq!(
        touched,
        vec![
            &GcsRequest {
                op: GcsOp::Get,
                bucket: BUCKET.to_owned(),
                name: marker.clone(),
            },
            &GcsRequest {
                op: GcsOp::List,
                bucket: BUCKET.to_owned(),
                name: format!("{}/", w.entry()),
            }
        ],
        "a cache hit is one GET and one LIST"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_that_does_not_match_its_marker_is_repaired() {
    let w = world();
    w.engine.submit(w.spec()).await.unwrap();
    let entry = w.entry();
    let uploads = |w: &World| -> Vec<String> {
        w.gcs
            .requests()
            .into_iter()
            .filter(is_data_put)
            .map(|r| r.name)
            .collect()
    };

    // A killed upload's leftover: a zero-byte object the marker does not
    // list. It is removed, and nothing is uploaded again.
    let stray = format!("{entry}/f01.txt#1");
    w.gcs.put_object(BUCKET, &stray, b"");
    w.gcs.clear_requests();
    w.engine.submit(w.spec()).await.unwrap();
    assert!(
        w.gcs.object(BUCKET, &stray).is_none(),
        "the stray object is gone"
    );
    assert!(uploads(&w).is_empty(), "{:?}", uploads(&w));

    // A file gone, and one edited in the bucket (same size, other bytes):
    // exactly those two go up again, and the marker lists them anew.
    let gone = format!("{entry}/f02.txt");
    let edited = format!("{entry}/f04.txt");
    let original = w.gcs.object(BUCKET, &edited).unwrap();
    w.delete(&gone).await;
    w.gcs
        .put_object(BUCKET, &edited, &vec![b'x'; original.len()]);
    w.gcs.clear_requests();
    w.engine.submit(w.spec()).await.unwrap();
    let mut again = uploads(&w);
    again.sort();
    assert_eq!(again, vec![gone.clone(), edited.clone()]);
    assert_eq!(w.gcs.object(BUCKET, &edited).unwrap(), original);
    assert_eq!(w.marker_document().files.len(), FILES);

    // Kinetic's empty marker over a whole entry: taken as is, and listed
    // from now on.
    w.gcs.put_object(BUCKET, &w.marker(), b"");
    w.gcs.clear_requests();
    w.engine.submit(w.spec()).await.unwrap();
    assert!(uploads(&w).is_empty());
    assert_eq!(w.marker_document().files.len(), FILES);

    // A marker whose data is all gone: the entry is uploaded whole again,
    // instead of failing every later job.
    for (name, _) in w.gcs.list_objects(BUCKET) {
        if name.starts_with(&format!("{entry}/")) {
            w.delete(&name).await;
        }
    }
    w.gcs.clear_requests();
    w.engine.submit(w.spec()).await.unwrap();
    assert_eq!(uploads(&w).len(), FILES);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_marker_write_is_not_a_hit_either() {
    let w = world();
    w.gcs.inject(
        GcsFault::status(503)
            .on(GcsOp::Put)
            .under("default/data-markers/"),
    );
    assert!(w.engine.submit(w.spec()).await.is_err());
    assert_eq!(w.cache_objects().len(), FILES, "the data landed");
    assert!(w.gcs.object(BUCKET, &w.marker()).is_none());
    w.gcs.clear_requests();
    w.engine.submit(w.spec()).await.unwrap();
    assert_eq!(
        w.gcs.requests().iter().filter(|r| is_data_put(r)).count(),
        FILES,
        "without its marker the entry is uploaded again"
    );
    assert!(w.gcs.object(BUCKET, &w.marker()).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_run_in_parallel_within_a_bound() {
    let w = world_with(60);
    // Each request takes 50 ms, so uploads that run side by side overlap.
    w.gcs.set_latency(std::time::Duration::from_millis(50));
    w.engine.submit(w.spec()).await.unwrap();
    assert_eq!(w.cache_objects().len(), 60);
    let peak = w.gcs.max_in_flight();
    assert!(
        (2..=UPLOAD_BOUND).contains(&peak),
        "data uploads run in parallel, at most {UPLOAD_BOUND} at once: peak {peak}"
    );
}
