//! The engine chooses its behaviour from what a backend declares
//! (`BackendCapabilities`), not from its name nor from the errors its calls
//! return: accelerators beyond the declared hosts are refused before
//! anything is uploaded, and cancel, logs and log streaming are refused
//! with a clear error when the backend does not offer them. (Batch polling
//! by capability: `batch_engine::a_backend_without_group_status_is_polled_job_by_job`.)

use std::sync::Arc;

use kinetic_core::ports::{BackendCapabilities, BackendError};
use kinetic_engine::{Engine, EngineError, EngineSettings, Entrypoint, JobSpec, ResultOptions};
use kinetic_testkit::{FakeBackend, MemoryStore, Outcome};
use serde_json::json;

struct World {
    dir: tempfile::TempDir,
    store: MemoryStore,
    fake: FakeBackend,
    engine: Engine,
}

fn world(capabilities: BackendCapabilities) -> World {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("work.py"), "def f():\n    return 1\n").unwrap();
    let store = MemoryStore::new();
    let fake = FakeBackend::new("fake", Arc::new(store.clone())).with_capabilities(capabilities);
    let engine = Engine::builder()
        .settings(EngineSettings::default().with_cwd(dir.path()))
        .store(Arc::new(store.clone()))
        .backend(Arc::new(fake.clone()))
        .default_backend("fake")
        .build()
        .unwrap();
    World {
        dir,
        store,
        fake,
        engine,
    }
}

fn spec() -> JobSpec {
    JobSpec::new(Entrypoint::parse("work:f").unwrap())
}

fn unsupported(err: &EngineError) -> bool {
    err.is_invalid_input()
        && err
            .downcast_ref::<BackendError>()
            .is_some_and(BackendError::is_unsupported)
}

#[tokio::test]
async fn accelerators_beyond_the_declared_hosts_are_refused_before_any_upload() {
    // Single host: a 4-host slice named for this backend is refused.
    let w = world(BackendCapabilities::single_host());
    let err = w
        .engine
        .submit(spec().backend("fake").accelerator("v5litepod-16"))
        .await
        .unwrap_err();
    assert!(unsupported(&err), "{err:?}");
    assert!(err.to_string().contains("spans 4 hosts"), "{err}");
    assert!(w.store.snapshot().is_empty(), "nothing was uploaded");
    assert_eq!(
        w.fake.calls("check"),
        0,
        "refused from the capabilities alone"
    );

    // Up to 4 hosts: that slice goes through, an 8-host one does not.
    let w = world(BackendCapabilities::single_host().with_multi_host(4));
    w.fake.push_outcome(Outcome::Succeed(json!(1)));
    let handle = w
        .engine
        .submit(spec().backend("fake").accelerator("v5litepod-16"))
        .await
        .unwrap();
    assert_eq!(
        handle.result(ResultOptions::default()).await.unwrap(),
        json!(1)
    );
    let err = w
        .engine
        .submit(spec().backend("fake").accelerator("v5litepod-32"))
        .await
        .unwrap_err();
    assert!(unsupported(&err), "{err:?}");
    assert!(err.to_string().contains("at most 4 hosts"), "{err}");
    drop(w.dir);
}

#[tokio::test]
async fn calls_the_backend_does_not_declare_are_refused_with_the_capability_named() {
    let w = world(
        BackendCapabilities::single_host()
            .with_cancel(false)
            .with_logs(false, false),
    );
    w.fake.push_outcome(Outcome::Hang);
    let handle = w.engine.submit(spec()).await.unwrap();
    for (err, capability) in [
        (handle.cancel().await.unwrap_err(), "cancel"),
        (handle.logs().await.unwrap_err(), "logs"),
        (handle.tail(3).await.err().unwrap(), "logs"),
        (handle.follow_logs().await.err().unwrap(), "follow_logs"),
        (
            handle
                .result(ResultOptions::default().stream_logs(Arc::new(|_: &str| {})))
                .await
                .unwrap_err(),
            "follow_logs",
        ),
    ] {
        assert!(unsupported(&err), "{err:?}");
        assert!(err.to_string().contains(capability), "{err}");
    }
    for call in ["cancel", "logs", "follow_logs"] {
        assert_eq!(w.fake.calls(call), 0, "{call} was not asked of the backend");
    }
}
