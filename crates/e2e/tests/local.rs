//! End to end: the engine, the local backend, a directory store and the real
//! runner on the host's python3 run real Python functions.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kinetic_backend_local::{LocalBackend, LocalOptions};
use kinetic_core::env::{EnvEntry, EnvSnapshot};
use kinetic_core::ports::{GetOptions, ObjectStore};
use kinetic_core::status::JobStatus;
use kinetic_engine::{
    Arg, Data, Engine, EngineError, EngineSettings, Entrypoint, JobSpec, ResultOptions,
};
use kinetic_store_gcs::GcsStore;
use serde_json::json;

const WORK_PY: &str = r#"
import json
import os
import sys
import time


def square(x):
    print("squaring %d" % x, flush=True)
    return x * x


def add(a, b=0, *, scale=1):
    return (a + b) * scale


def boom(message):
    raise ValueError(message)


def exit_with(code):
    sys.exit(code)


def list_dir(path):
    out = []
    for root, _dirs, files in os.walk(path):
        for f in files:
            full = os.path.join(root, f)
            with open(full) as fh:
                out.append([os.path.relpath(full, path), fh.read()])
    return sorted(out)


def read_volume(mount):
    mapping = json.loads(os.environ["KINETIC_VOLUMES"])
    return list_dir(mapping[mount])


def env_value_digest(name):
    import hashlib
    return hashlib.sha256(os.environ[name].encode()).hexdigest()


def write_output(name, text):
    out = os.environ["KINETIC_OUTPUT_DIR"]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, name), "w") as fh:
        fh.write(text)
    return [os.environ["KINETIC_JOB_ID"], out]


def topology():
    return {k: os.environ[k] for k in ["KINETIC_NODE_RANK", "KINETIC_NUM_NODES", "KINETIC_NUM_GPUS_PER_NODE"]}


def sleep_forever():
    print("going to sleep", flush=True)
    time.sleep(600)


def not_json():
    return {1, 2}
"#;

struct World {
    dir: tempfile::TempDir,
    store: Arc<dyn ObjectStore>,
    env: EnvSnapshot,
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
        std::fs::write(project.join("data/a.txt"), "alpha").unwrap();
        std::fs::write(project.join("data/sub/b.txt"), "beta").unwrap();
        let store: Arc<dyn ObjectStore> =
            Arc::new(GcsStore::local_dir(&dir.path().join("store")).unwrap());
        let mut env = EnvSnapshot::new();
        env.insert("HOME", dir.path().join("home").to_string_lossy());
        Self { dir, store, env }
    }

    fn project(&self) -> PathBuf {
        self.dir.path().join("home/proj")
    }

    fn engine(&self) -> Engine {
        self.engine_with_env(self.env.clone())
    }

    fn engine_with_env(&self, env: EnvSnapshot) -> Engine {
        self.engine_with(env, 4)
    }

    fn engine_with(&self, env: EnvSnapshot, slots: usize) -> Engine {
        let backend = LocalBackend::new(
            LocalOptions::new(self.dir.path().join("local")).max_concurrent(slots),
            self.store.clone(),
        )
        .unwrap();
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

    /// Every byte of every object in the store, and every file under the
    /// local backend's state, for leak searches.
    fn everything(&self) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        walk(self.dir.path(), &mut out);
        out
    }
}

fn walk(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let ft = entry.file_type().unwrap();
        if ft.is_dir() {
            walk(&path, out);
        } else if ft.is_file() {
            out.push((
                path.display().to_string(),
                std::fs::read(&path).unwrap_or_default(),
            ));
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn returns_the_value_and_streams_logs() {
    let w = World::new();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let options = ResultOptions::default().stream_logs(Arc::new(move |l: &str| {
        sink.lock().unwrap().push(l.to_owned())
    }));
    let value = w
        .engine()
        .run(w.spec("work:square").arg(json!(7)), options)
        .await
        .unwrap();
    assert_eq!(value, json!(49));
    assert!(
        lines.lock().unwrap().iter().any(|l| l == "squaring 7"),
        "{:?}",
        lines.lock().unwrap()
    );
    // A collected job keeps its folder (artifacts go only when asked), with
    // the note that its backend resources were cleaned up.
    let left: Vec<String> = w
        .store
        .list(None)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.path.as_str().to_owned())
        .filter(|p| p.starts_with("job-"))
        .collect();
    assert!(
        left.iter().any(|p| p.ends_with("/result.json"))
            && left.iter().any(|p| p.ends_with("/cleanup.json")),
        "{left:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_entrypoints_kwargs_and_the_default_cleanup() {
    let w = World::new();
    let spec = w
        .spec("./work.py:add")
        .arg(json!(2))
        .kwarg("b", json!(3))
        .kwarg("scale", json!(10));
    assert_eq!(
        w.engine()
            .run(spec, ResultOptions::default())
            .await
            .unwrap(),
        json!(50)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_exception_comes_back_with_its_traceback() {
    let w = World::new();
    let err = w
        .engine()
        .run(
            w.spec("work:boom").arg(json!("it broke")),
            ResultOptions::default(),
        )
        .await
        .unwrap_err();
    let remote = err.remote().expect("a remote error");
    assert_eq!(remote.type_name, "ValueError");
    assert_eq!(remote.message, "it broke");
    assert_eq!(remote.phase.as_deref(), Some("execute"));
    let tb = remote.traceback.as_deref().unwrap();
    assert!(
        tb.contains("in boom") && tb.contains("ValueError: it broke"),
        "{tb}"
    );
    assert!(err.to_string().contains("ValueError: it broke"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sys_exit_zero_is_success_and_other_codes_fail() {
    let w = World::new();
    let engine = w.engine();
    assert_eq!(
        engine
            .run(
                w.spec("work:exit_with").arg(json!(0)),
                ResultOptions::default()
            )
            .await
            .unwrap(),
        json!(null)
    );
    let err = engine
        .run(
            w.spec("work:exit_with").arg(json!(3)),
            ResultOptions::default(),
        )
        .await
        .unwrap_err();
    let remote = err.remote().unwrap();
    assert_eq!(remote.type_name, "SystemExit");
    assert!(remote.message.contains("sys.exit(3)"), "{}", remote.message);
    let err = engine
        .run(w.spec("work:not_json"), ResultOptions::default())
        .await
        .unwrap_err();
    let remote = err.remote().unwrap();
    assert_eq!(remote.type_name, "ResultNotJSON");
    assert!(remote.message.contains("{1, 2}"), "{}", remote.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_as_data_argument_and_as_volume() {
    let w = World::new();
    let engine = w.engine();
    let data = Data::new("data", &w.project()).unwrap();
    let want = json!([["a.txt", "alpha"], ["sub/b.txt", "beta"]]);
    let value = engine
        .run(
            w.spec("work:list_dir").arg(Arg::Data(data.clone())),
            ResultOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(value, want);
    let value = engine
        .run(
            w.spec("work:read_volume")
                .arg(json!("/data"))
                .volume("/data", data.clone()),
            ResultOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(value, want);
    // The data went to the content-addressed cache once, with its marker.
    let hash = kinetic_core::hashing::content_hash(w.project().join("data")).unwrap();
    let marker = kinetic_core::layout::data_marker(&hash);
    w.store.head(&marker).await.expect("the marker is written");
    let cached = w
        .store
        .list(Some(&kinetic_core::layout::data_entry(&hash)))
        .await
        .unwrap();
    assert_eq!(cached.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_capture_required_env_and_secrets_never_stored() {
    let w = World::new();
    let sentinel = "s3ntinel-value-9f8e7d6c";
    let mut env = w.env.clone();
    env.insert("MY_SECRET_TOKEN", sentinel);
    let engine = w.engine_with_env(env);

    // A required variable that is not set fails before anything is uploaded.
    let before = w.store.list(None).await.unwrap().len();
    let err = engine
        .submit(
            w.spec("work:square")
                .arg(json!(1))
                .env(EnvEntry::parse_cli("MISSING_ONE").unwrap())
                .env(EnvEntry::parse_secret("MISSING_TWO").unwrap()),
        )
        .await
        .unwrap_err();
    assert!(
        err.is_invalid_input() && err.downcast_ref::<kinetic_core::env::EnvError>().is_some(),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("MISSING_ONE") && text.contains("MISSING_TWO"),
        "{text}"
    );
    assert_eq!(
        w.store.list(None).await.unwrap().len(),
        before,
        "nothing uploaded"
    );

    // A secret reaches the job's environment and nowhere else.
    let spec = w
        .spec("work:env_value_digest")
        .arg(json!("MY_SECRET_TOKEN"))
        .env(EnvEntry::parse_secret("MY_SECRET_TOKEN").unwrap());
    let handle = engine.submit(spec).await.unwrap();
    let value = handle
        .result(ResultOptions::default().cleanup(false))
        .await
        .unwrap();
    use sha2::Digest;
    assert_eq!(
        value,
        json!(hex::encode(sha2::Sha256::digest(sentinel.as_bytes())))
    );
    let logs = handle.logs().await.unwrap();
    assert!(!logs.contains(sentinel));
    for (path, bytes) in w.everything() {
        assert!(
            !contains(&bytes, sentinel.as_bytes()),
            "the secret leaked into {path}"
        );
    }
    assert!(!format!("{handle:?}").contains(sentinel));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_dir_job_id_and_topology_variables() {
    let w = World::new();
    let engine = w.engine();
    let handle = engine
        .submit(
            w.spec("work:write_output")
                .arg(json!("out.txt"))
                .arg(json!("hello")),
        )
        .await
        .unwrap();
    let value = handle.result(ResultOptions::default()).await.unwrap();
    assert_eq!(value[0], json!(handle.id().as_str()));
    let out_dir = PathBuf::from(value[1].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(out_dir.join("out.txt")).unwrap(),
        "hello"
    );
    let topo = engine
        .run(w.spec("work:topology"), ResultOptions::default())
        .await
        .unwrap();
    assert_eq!(
        topo,
        json!({"KINETIC_NODE_RANK": "0", "KINETIC_NUM_NODES": "1", "KINETIC_NUM_GPUS_PER_NODE": "0"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_a_sleeping_job_and_attach_from_a_new_engine() {
    let w = World::new();
    let handle = w
        .engine()
        .submit(w.spec("work:sleep_forever"))
        .await
        .unwrap();
    let json = handle.to_json();
    // A new engine (as another process would build) attaches by id.
    let other = w.engine();
    let attached = other.attach(handle.id().as_str()).await.unwrap();
    assert_eq!(attached.to_json(), json);
    let from_json = other.handle_from_json(&json).unwrap();
    assert_eq!(from_json.id(), handle.id());
    // Wait for it to run, then cancel from the other engine.
    let mut state = attached.status().await.unwrap();
    for _ in 0..200 {
        if state.status == JobStatus::Running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        state = attached.status().await.unwrap();
    }
    assert_eq!(state.status, JobStatus::Running);
    attached.cancel().await.unwrap();
    let state = handle.status().await.unwrap();
    assert_eq!(state.status, JobStatus::Failed, "{state:?}");
    let err = handle.result(ResultOptions::default()).await.unwrap_err();
    assert!(matches!(err, EngineError::NoResult { .. }), "{err:?}");
    assert!(err.to_string().contains("cancelled"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_leaves_the_job_running() {
    let w = World::new();
    let handle = w
        .engine()
        .submit(w.spec("work:sleep_forever"))
        .await
        .unwrap();
    let err = handle
        .result(ResultOptions::default().timeout(Duration::from_millis(300)))
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::Timeout { .. }), "{err:?}");
    assert!(!handle.status().await.unwrap().status.is_terminal());
    handle.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_jobs_at_once() {
    let w = World::new();
    let engine = w.engine();
    let mut handles = Vec::new();
    for i in 0..6 {
        handles.push(
            engine
                .submit(w.spec("work:square").arg(json!(i)))
                .await
                .unwrap(),
        );
    }
    let listed = engine.list_jobs().await.unwrap();
    assert_eq!(listed.len(), 6);
    let values =
        futures_util::future::join_all(handles.iter().map(|h| h.result(ResultOptions::default())))
            .await;
    let values: Vec<_> = values.into_iter().map(Result::unwrap).collect();
    assert_eq!(values, (0..6).map(|i| json!(i * i)).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_before_upload() {
    let w = World::new();
    let engine = w.engine();
    let err = engine
        .submit(w.spec("work:square").accelerator("l4x2"))
        .await
        .unwrap_err();
    assert!(
        err.is_invalid_input() && err.to_string().contains("GPU"),
        "{err}"
    );
    let err = engine
        .submit(w.spec("work:square").accelerator("v5litepod-4"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("TPU"), "{err}");
    let err = engine
        .submit(w.spec("work:square").accelerator("bogus"))
        .await
        .unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
    let err = engine
        .submit(w.spec("work:square").backend("nope"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unknown backend 'nope'"), "{err}");
    let err = engine.submit(w.spec("missing.py:f")).await.unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
    assert!(w.store.list(None).await.unwrap().is_empty());
    let _ = GetOptions::default();
}

async fn wait_status(
    handle: &kinetic_engine::JobHandle,
    want: JobStatus,
) -> kinetic_core::status::JobState {
    for _ in 0..400 {
        let state = handle.status().await.unwrap();
        if state.status == want {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    handle.status().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_concurrency_limit_queues_jobs_until_a_slot_frees() {
    let w = World::new();
    let engine = w.engine_with(w.env.clone(), 1);
    let first = engine.submit(w.spec("work:sleep_forever")).await.unwrap();
    assert_eq!(
        wait_status(&first, JobStatus::Running).await.status,
        JobStatus::Running
    );
    let second = engine.submit(w.spec("work:sleep_forever")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let state = second.status().await.unwrap();
    assert_eq!(
        state.status,
        JobStatus::Pending,
        "one slot: the second job waits"
    );
    assert_eq!(
        state.reason,
        Some(kinetic_core::status::StatusReason::WaitingForResources)
    );
    first.cancel().await.unwrap();
    assert_eq!(
        wait_status(&second, JobStatus::Running).await.status,
        JobStatus::Running
    );
    second.cancel().await.unwrap();
    assert_eq!(second.status().await.unwrap().status, JobStatus::Failed);
}
