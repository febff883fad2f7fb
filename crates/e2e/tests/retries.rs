//! One retry layer per call, end to end: a GCS request is retried inside
//! `object_store` (its `RetryConfig`), and what it gives up on reaches the
//! engine's caller as already retried, without the engine — or a backend,
//! or the engine's retry decorator around the backend — trying again.

use std::sync::Arc;
use std::time::Duration;

use kinetic_core::ports::{ObjectStore, StoreError};
use kinetic_core::retry::{Backoff, RetryPolicy};
use kinetic_engine::{Engine, EngineError, EngineSettings, Entrypoint, JobSpec, ResultOptions};
use kinetic_fake_gcp::{FakeGcs, GcsFault, GcsOp};
use kinetic_store_gcs::{GcsOptions, GcsStore, RetrySettings};
use kinetic_testkit::{FakeBackend, Outcome};
use serde_json::json;

const BUCKET: &str = "retry-bucket";

/// Retries inside object_store: two after the first attempt, fast.
fn store_retries() -> RetrySettings {
    RetrySettings::none()
        .max_retries(2)
        .retry_timeout(Duration::from_secs(10))
        .backoff(Duration::from_millis(1), Duration::from_millis(5))
}

struct World {
    _dir: tempfile::TempDir,
    gcs: FakeGcs,
    engine: Engine,
    fake: FakeBackend,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("work.py"), "def f():\n    return 7\n").unwrap();
    let gcs = FakeGcs::with_buckets(&[BUCKET]).unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(
        GcsStore::open(
            &format!("gs://{BUCKET}"),
            &GcsOptions::emulator(&gcs.endpoint()).with_retry(store_retries()),
        )
        .unwrap(),
    );
    let fake = FakeBackend::new("fake", store.clone());
    let engine = Engine::builder()
        .settings(EngineSettings::default().with_cwd(dir.path()))
        .store(store)
        .backend(Arc::new(fake.clone()))
        .default_backend("fake")
        // A generous engine budget: were it applied to store calls, the
        // counts below would show it.
        .retry(RetryPolicy::new(
            5,
            Backoff::new(Duration::from_millis(1), Duration::from_millis(5)),
        ))
        .build()
        .unwrap();
    World {
        _dir: dir,
        gcs,
        engine,
        fake,
    }
}

fn gets_of(gcs: &FakeGcs, name: &str) -> usize {
    gcs.requests()
        .iter()
        .filter(|r| r.op == GcsOp::Get && r.name == name)
        .count()
}

fn assert_retried_store_error(err: &EngineError) {
    assert!(
        matches!(err, EngineError::Unavailable { retried: true, .. }),
        "{err:?}"
    );
    let store = err
        .downcast_ref::<StoreError>()
        .expect("the store's error is kept");
    assert!(store.is_retried(), "{store:?}");
    assert!(
        err.downcast_ref::<kinetic_store_gcs::GoogleError>()
            .is_some_and(|s| s.code == 503),
        "the HTTP answer is kept below it: {err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_error_retried_by_object_store_is_not_retried_by_the_engine() {
    let w = world();
    w.fake.push_outcome(Outcome::Succeed(json!(7)));
    let handle = w
        .engine
        .submit(JobSpec::new(Entrypoint::parse("work:f").unwrap()))
        .await
        .unwrap();
    let job = handle.record().job_id.to_string();

    // Attaching reads handle.json: 1 attempt + 2 retries, all in object_store.
    let record = format!("{job}/handle.json");
    w.gcs
        .inject(GcsFault::status(503).on(GcsOp::Get).under(&record).always());
    let err = w.engine.attach(&job).await.unwrap_err();
    assert_retried_store_error(&err);
    assert_eq!(
        gets_of(&w.gcs, &record),
        3,
        "1 attempt + 2 retries, no more"
    );
    w.gcs.clear_faults();

    // Collecting the result reads result.json: the same, and the engine's
    // grace for a result not written yet does not apply to a 503.
    let result = format!("{job}/result.json");
    w.gcs
        .inject(GcsFault::status(503).on(GcsOp::Get).under(&result).always());
    let err = handle
        .result(ResultOptions::default().cleanup(false))
        .await
        .unwrap_err();
    assert_retried_store_error(&err);
    assert_eq!(
        gets_of(&w.gcs, &result),
        3,
        "1 attempt + 2 retries, no more"
    );
    w.gcs.clear_faults();

    // Once the store answers, the same handle gets the value.
    let value = handle.result(ResultOptions::default()).await.unwrap();
    assert_eq!(value, json!(7));
}
