//! End to end on the bucket path: the engine with the local backend, but
//! the store on the fake GCS server. The real runner (on the host's
//! python3) reads `spec.json`, `context.zip` and the data from the fake
//! over the XML API (`KINETIC_GCS_ENDPOINT`, no auth), and writes
//! `result.json` there; the value comes back through the engine.

use std::path::PathBuf;
use std::sync::Arc;

use kinetic_backend_local::{LocalBackend, LocalOptions};
use kinetic_core::env::EnvSnapshot;
use kinetic_core::ports::ObjectStore;
use kinetic_engine::{Arg, Data, Engine, EngineSettings, Entrypoint, JobSpec, ResultOptions};
use kinetic_fake_gcp::{FakeGcs, GcsFault, GcsOp};
use kinetic_store_gcs::{GCS_ENDPOINT_VAR, GcsOptions, GcsStore};
use serde_json::json;

const BUCKET: &str = "proj-kn-kinetic-cluster-jobs";

const WORK_PY: &str = r#"
import os


def summarize(path, factor):
    out = {}
    for root, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            with open(full) as fh:
                out[os.path.relpath(full, path).replace(os.sep, "/")] = len(fh.read()) * factor
    return {"files": out, "output_dir": os.environ["KINETIC_OUTPUT_DIR"]}


def boom():
    raise RuntimeError("remote failure on the bucket path")
"#;

struct World {
    dir: tempfile::TempDir,
    gcs: FakeGcs,
    store: Arc<dyn ObjectStore>,
}

impl World {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("home/proj");
        std::fs::create_dir_all(project.join("data/sub")).unwrap();
        std::fs::write(
            project.join("pyproject.toml"),
            "[project]\nname = \"proj\"\ndependencies = []\n",
        )
        .unwrap();
        std::fs::write(project.join("work.py"), WORK_PY).unwrap();
        for i in 0..5 {
            std::fs::write(project.join(format!("data/f{i}.txt")), "x".repeat(i + 1)).unwrap();
        }
        std::fs::write(project.join("data/sub/deep.txt"), "deep").unwrap();
        let gcs = FakeGcs::with_buckets(&[BUCKET]).unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(
            GcsStore::open(
                &format!("gs://{BUCKET}"),
                &GcsOptions::emulator(&gcs.endpoint()),
            )
            .unwrap(),
        );
        Self { dir, gcs, store }
    }

    fn project(&self) -> PathBuf {
        self.dir.path().join("home/proj")
    }

    fn engine(&self) -> Engine {
        let backend = LocalBackend::new(
            LocalOptions::new(self.dir.path().join("local"))
                .max_concurrent(2)
                .runner_env(GCS_ENDPOINT_VAR, self.gcs.endpoint())
                .runner_env("NO_PROXY", "127.0.0.1,localhost")
                .runner_env("no_proxy", "127.0.0.1,localhost"),
            self.store.clone(),
        )
        .unwrap();
        let mut env = EnvSnapshot::new();
        env.insert("HOME", self.dir.path().join("home").to_string_lossy());
        Engine::builder()
            .store(self.store.clone())
            .backend(Arc::new(backend))
            .env_snapshot(env)
            .settings(EngineSettings::default().with_home(self.dir.path().join("home")))
            .build()
            .unwrap()
    }

    fn spec(&self, entry: &str) -> JobSpec {
        JobSpec::new(Entrypoint::parse(entry).unwrap()).working_dir(self.project())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_function_runs_with_context_data_and_result_on_the_fake_bucket() {
    let w = World::new();
    // Small list pages: the runner follows continuation tokens. A 503 on
    // its first data download: the runner retries it.
    w.gcs.set_page_size(2);
    w.gcs.inject(
        GcsFault::status(503)
            .on(GcsOp::Get)
            .under("default/data-cache/"),
    );
    let data = Data::new("data", &w.project()).unwrap();
    let handle = w
        .engine()
        .submit(w.spec("work:summarize").arg(Arg::Data(data)).arg(json!(10)))
        .await
        .unwrap();
    let job = handle.record().job_id.to_string();
    let value = handle
        .result(ResultOptions::default().cleanup(false))
        .await
        .unwrap();
    assert_eq!(
        value["files"],
        json!({"f0.txt": 10, "f1.txt": 20, "f2.txt": 30, "f3.txt": 40, "f4.txt": 50, "sub/deep.txt": 40})
    );
    assert_eq!(
        value["output_dir"],
        json!(format!("gs://{BUCKET}/outputs/{job}"))
    );

    // The runner's side, as the fake saw it.
    let requests = w.gcs.requests();
    let saw = |op: GcsOp, name: &str| requests.iter().any(|r| r.op == op && r.name == name);
    assert!(
        saw(GcsOp::Get, &format!("{job}/spec.json")),
        "runner read the spec"
    );
    assert!(
        requests
            .iter()
            .any(|r| r.op == GcsOp::Get && r.name.starts_with("contexts/")),
        "runner downloaded the context"
    );
    assert!(
        saw(GcsOp::Put, &format!("{job}/result.json")),
        "runner uploaded the result"
    );
    let data_gets = requests
        .iter()
        .filter(|r| r.op == GcsOp::Get && r.name.starts_with("default/data-cache/"))
        .count();
    assert_eq!(
        data_gets,
        6 + 1,
        "six data files, one of them twice (the 503)"
    );
    assert!(
        requests
            .iter()
            .filter(|r| r.op == GcsOp::List && r.name.starts_with("default/data-cache/"))
            .count()
            >= 3,
        "six objects listed in pages of two"
    );
    let result = w
        .gcs
        .object(BUCKET, &format!("{job}/result.json"))
        .expect("result.json is in the bucket");
    let doc: serde_json::Value = serde_json::from_slice(&result).unwrap();
    assert_eq!(doc["success"], json!(true));
    assert_eq!(
        w.gcs
            .content_type(BUCKET, &format!("{job}/result.json"))
            .as_deref(),
        Some("application/json")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_error_comes_back_and_its_artifacts_stay_in_the_bucket() {
    let w = World::new();
    let engine = w.engine();
    let err = engine
        .run(w.spec("work:boom"), ResultOptions::default())
        .await
        .unwrap_err();
    let remote = err.remote().expect("a remote error");
    assert_eq!(remote.type_name, "RuntimeError");
    assert_eq!(remote.message, "remote failure on the bucket path");
    assert_eq!(remote.phase.as_deref(), Some("execute"));
    assert!(
        w.gcs
            .list_objects(BUCKET)
            .iter()
            .any(|(n, _)| n.ends_with("/result.json")),
        "a failed job's artifacts are kept for inspection"
    );
}
