//! The engine keeps a job's secret values out of what it shows of the job —
//! streamed and stored logs, a remote error's message and traceback — even
//! when the job itself did not redact them, from the submitting process and
//! from one that attaches later.

use std::sync::{Arc, Mutex};

use kinetic_core::env::{EnvEntry, EnvSnapshot};
use kinetic_core::redact::REDACTED;
use kinetic_engine::{Engine, EngineError, EngineSettings, Entrypoint, JobSpec, ResultOptions};
use kinetic_testkit::{FakeBackend, MemoryStore, Outcome};

const SECRET: &str = "s3cret-9f1e";

fn engine(project: &std::path::Path) -> (Engine, Arc<FakeBackend>) {
    let store = Arc::new(MemoryStore::new());
    let backend = Arc::new(FakeBackend::new("fake", store.clone()));
    let engine = Engine::builder()
        .store(store)
        .backend(backend.clone())
        .default_backend("fake")
        .env_snapshot(EnvSnapshot::from_pairs([
            ("API_TOKEN", SECRET),
            ("PLAIN", "plain"),
        ]))
        .settings(EngineSettings::default().with_cwd(project))
        .build()
        .unwrap();
    (engine, backend)
}

#[tokio::test]
async fn secret_values_never_reach_what_the_engine_shows() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("work.py"), "def f():\n    pass\n").unwrap();
    let (engine, backend) = engine(dir.path());
    backend.push_logs(vec![
        format!("connecting with {SECRET}"),
        "plain line".into(),
    ]);
    backend.push_outcome(Outcome::Fail {
        type_name: "RuntimeError".into(),
        message: format!("token {SECRET} refused"),
    });
    let spec = JobSpec::new(Entrypoint::parse("work:f").unwrap())
        .env(EnvEntry::parse_secret("API_TOKEN").unwrap())
        .env(EnvEntry::parse_cli("PLAIN").unwrap());
    let handle = engine.submit(spec).await.unwrap();

    let lines = Arc::new(Mutex::new(Vec::new()));
    let seen = lines.clone();
    let options = ResultOptions::default()
        .cleanup(false)
        .stream_logs(Arc::new(move |line: &str| {
            seen.lock().unwrap().push(line.to_owned())
        }));
    let err = handle.result(options).await.unwrap_err();
    let EngineError::Remote { error, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(error.message, format!("token {REDACTED} refused"));
    assert!(!err.to_string().contains(SECRET), "{err}");
    let streamed = lines.lock().unwrap().join("\n");
    assert!(
        streamed.contains(&format!("connecting with {REDACTED}")),
        "{streamed}"
    );
    assert!(!streamed.contains(SECRET));

    // Another handle on the same job, as `kinetic jobs logs ID` makes one:
    // the names come from spec.json, the values from its environment.
    let attached = engine.attach(handle.id().as_str()).await.unwrap();
    let logs = attached.logs().await.unwrap();
    assert!(logs.contains(REDACTED) && !logs.contains(SECRET), "{logs}");
    let tail = attached.tail(5).await.unwrap();
    assert!(!tail.contains(SECRET), "{tail}");
    assert!(logs.contains("plain line"));
}
