//! Testing code that embeds the engine, without a cloud or Python: an
//! engine over the testkit's in-memory store and fake backend, each job's
//! outcome scripted, and infrastructure failures injected with the
//! fault-injecting decorator that lives beside the `Backend` port (and
//! absorbed, up to a budget, by the engine's retry decorator).
//!
//! ```text
//! cargo run -p kinetic-testkit --example testing
//! ```

use std::sync::Arc;
use std::time::Duration;

use kinetic_core::ports::BackendError;
use kinetic_core::retry::{Backoff, RetryPolicy};
use kinetic_engine::layers::FaultyBackend;
use kinetic_engine::{Engine, EngineError, Entrypoint, JobSpec, ResultOptions};
use kinetic_testkit::{FakeBackend, MemoryStore, Outcome};
use serde_json::json;

/// The code under test: runs `work:square` and says how it went.
async fn square_report(engine: &Engine, project: &std::path::Path, x: i64) -> String {
    let spec = JobSpec::new(Entrypoint::parse("work:square").expect("a valid entrypoint"))
        .arg(json!(x))
        .working_dir(project);
    match engine.run(spec, ResultOptions::default()).await {
        Ok(value) => format!("square({x}) = {value}"),
        Err(EngineError::Remote { error, .. }) => {
            format!("square({x}) raised {}: {}", error.type_name, error.message)
        }
        Err(e @ EngineError::Unavailable { .. }) => {
            format!("square({x}) could not run yet, try again later: {e}")
        }
        Err(e) => format!("square({x}) failed: {e}"),
    }
}

#[tokio::main]
pub(crate) async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A project for the engine to package (the fake never runs it).
    let project = tempfile::tempdir()?;
    std::fs::write(
        project.path().join("work.py"),
        "def square(x):\n    return x * x\n",
    )?;

    // The fakes: a store the test can look into, a backend whose jobs end
    // as scripted, wrapped so that its calls can be made to fail.
    let store = MemoryStore::new();
    let fake = FakeBackend::new("fake", Arc::new(store.clone()));
    let backend = FaultyBackend::new(Arc::new(fake.clone()));
    // The engine retries failed backend calls (three attempts here, a few
    // milliseconds apart, so that the example runs fast).
    let retries = RetryPolicy::new(
        3,
        Backoff::new(Duration::from_millis(5), Duration::from_millis(20)),
    );
    let engine = Engine::builder()
        .store(Arc::new(store.clone()))
        .backend(Arc::new(backend.clone()))
        .default_backend("fake")
        .retry(retries)
        .build()?;

    // A job that succeeds with the value its function would return.
    fake.push_outcome(Outcome::Succeed(json!(49)));
    let report = square_report(&engine, project.path(), 7).await;
    assert_eq!(report, "square(7) = 49");
    println!("{report}");

    // A job whose function raises: the remote error comes back typed.
    fake.push_outcome(Outcome::Fail {
        type_name: "ValueError".into(),
        message: "x must be small".into(),
    });
    let report = square_report(&engine, project.path(), 1_000_000).await;
    assert_eq!(report, "square(1000000) raised ValueError: x must be small");
    println!("{report}");

    // The backend is unavailable for one call: the engine's retry absorbs it.
    let outage = || BackendError::unavailable("the cluster's API server is restarting");
    backend.faults().fail_on("submit", 0, outage());
    let report = square_report(&engine, project.path(), 2).await;
    assert_eq!(report, "square(2) = null", "no outcome scripted: null");
    println!("{report}");

    // Unavailable for longer than the retry budget: a retryable error that
    // says it was retried already, and nothing was started.
    let started = fake.submits();
    for _ in 0..3 {
        backend.faults().fail_on("submit", 0, outage());
    }
    let report = square_report(&engine, project.path(), 3).await;
    assert!(
        report.starts_with("square(3) could not run yet"),
        "{report}"
    );
    assert!(report.contains("restarting"), "{report}");
    assert!(report.contains("gave up after 3 attempts"), "{report}");
    assert_eq!(fake.submits(), started, "no job was started");
    println!("{report}");

    // The next try goes through.
    let report = square_report(&engine, project.path(), 3).await;
    assert_eq!(report, "square(3) = null");
    println!("{report}");

    // What the engine left in the store is there to inspect.
    let objects = store.snapshot();
    assert!(objects.keys().any(|p| p.file_name() == "handle.json"));
    println!("{} objects in the store", objects.len());
    Ok(())
}
