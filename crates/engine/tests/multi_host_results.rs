//! A multi-host job whose leader left no result: the engine reports the
//! first failing worker host (in host order, 2 before 10), skipping
//! unreadable results and successes, and names the others that failed.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kinetic_core::ports::{ObjectPath, ObjectStore, PutOptions};
use kinetic_engine::{
    Engine, EngineError, EngineSettings, Entrypoint, JobHandle, JobSpec, ResultOptions,
};
use kinetic_testkit::{FakeBackend, MemoryStore, Outcome};
use serde_json::json;

async fn submit(outcome: Outcome) -> (tempfile::TempDir, Arc<MemoryStore>, JobHandle) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("work.py"), "def f():\n    pass\n").unwrap();
    let store = Arc::new(MemoryStore::new());
    let backend = Arc::new(
        FakeBackend::new("fake", store.clone())
            .with_timing(Duration::ZERO, Duration::from_millis(200)),
    );
    backend.push_outcome(outcome);
    let engine = Engine::builder()
        .store(store.clone())
        .backend(backend)
        .default_backend("fake")
        .settings(EngineSettings::default().with_cwd(dir.path()))
        .build()
        .unwrap();
    let handle = engine
        .submit(JobSpec::new(Entrypoint::parse("work:f").unwrap()))
        .await
        .unwrap();
    (dir, store, handle)
}

async fn put(store: &MemoryStore, handle: &JobHandle, name: &str, body: serde_json::Value) {
    let path = ObjectPath::parse(format!("{}/{name}", handle.id().as_str())).unwrap();
    store
        .put(&path, Bytes::from(body.to_string()), PutOptions::default())
        .await
        .unwrap();
}

fn failure(host: u32, message: &str) -> serde_json::Value {
    json!({"protocol": 1, "success": false, "host_index": host,
           "error": {"type": "ValueError", "message": message, "traceback": null, "phase": "execute"}})
}

#[tokio::test]
async fn the_first_failing_host_is_reported_with_the_others() {
    let (_dir, store, handle) = submit(Outcome::Exit(1)).await;
    put(
        &store,
        &handle,
        "result-worker-10.json",
        failure(10, "host ten"),
    )
    .await;
    put(
        &store,
        &handle,
        "result-worker-3.json",
        failure(3, "host three"),
    )
    .await;
    put(
        &store,
        &handle,
        "result-worker-2.json",
        json!("not a result"),
    )
    .await;
    put(
        &store,
        &handle,
        "result-worker-1.json",
        json!({"protocol": 1, "success": true, "host_index": 1, "value": 1}),
    )
    .await;
    put(
        &store,
        &handle,
        "result-worker-x.json",
        failure(7, "badly named"),
    )
    .await;
    let err = handle
        .result(ResultOptions::default().cleanup(false))
        .await
        .unwrap_err();
    let EngineError::Remote { error, host, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(
        (error.type_name.as_str(), error.message.as_str()),
        ("ValueError", "host three")
    );
    let host = host.as_ref().expect("the reporting host");
    assert_eq!((host.host, host.others.as_slice()), (3, &[10][..]));
    // The spec says how many hosts there are (one for this accelerator).
    assert_eq!(host.hosts, Some(1));
    let text = err.to_string();
    assert!(
        text.contains("ValueError: host three (reported by host 3 of 1; other hosts that also reported a failure: 10)"),
        "{text}"
    );
    assert_eq!(err.reporting_host(), Some(host));
}

#[tokio::test]
async fn without_a_failing_worker_the_missing_result_is_the_error() {
    let (_dir, store, handle) = submit(Outcome::Exit(137)).await;
    put(
        &store,
        &handle,
        "result-worker-1.json",
        json!({"protocol": 1, "success": true, "host_index": 1, "value": null}),
    )
    .await;
    let err = handle
        .result(ResultOptions::default().cleanup(false))
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::NoResult { .. }), "{err}");
    assert!(err.reporting_host().is_none());
}

#[tokio::test]
async fn the_leaders_own_failure_names_no_host() {
    let (_dir, store, handle) = submit(Outcome::Fail {
        type_name: "KeyError".into(),
        message: "leader".into(),
    })
    .await;
    put(
        &store,
        &handle,
        "result-worker-2.json",
        failure(2, "worker"),
    )
    .await;
    let err = handle
        .result(ResultOptions::default().cleanup(false))
        .await
        .unwrap_err();
    assert_eq!(err.remote().unwrap().message, "leader");
    assert!(err.reporting_host().is_none());
}
