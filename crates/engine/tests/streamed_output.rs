//! A job's output streamed by `result(stream_logs)` is never lost, even
//! when the job ended before its output could be followed.

use std::sync::{Arc, Mutex};

use kinetic_core::ports::BackendError;
use kinetic_engine::layers::FaultyBackend;
use kinetic_engine::{Engine, EngineSettings, Entrypoint, JobSpec, ResultOptions};
use kinetic_testkit::{FakeBackend, MemoryStore, Outcome};

#[tokio::test]
async fn a_job_that_ended_before_its_stream_opened_still_shows_its_output() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("work.py"), "def f():\n    pass\n").unwrap();
    let store = Arc::new(MemoryStore::new());
    let fake = Arc::new(FakeBackend::new("fake", store.clone()));
    let backend = Arc::new(FaultyBackend::new(fake.clone()));
    let engine = Engine::builder()
        .store(store)
        .backend(backend.clone())
        .default_backend("fake")
        .settings(EngineSettings::default().with_cwd(dir.path()))
        .build()
        .unwrap();
    fake.push_logs(vec!["looking up".into(), "the last line".into()]);
    fake.push_outcome(Outcome::Fail {
        type_name: "KeyError".into(),
        message: "'missing'".into(),
    });
    let handle = engine
        .submit(JobSpec::new(Entrypoint::parse("work:f").unwrap()))
        .await
        .unwrap();
    // The job has ended by the first poll, and the backend refuses to
    // stream it then (a pod whose log could not be followed).
    backend.faults().fail_on(
        "follow_logs",
        0,
        BackendError::permission_denied("scripted"),
    );
    let lines = Arc::new(Mutex::new(Vec::new()));
    let seen = lines.clone();
    let options = ResultOptions::default()
        .cleanup(false)
        .stream_logs(Arc::new(move |line: &str| {
            seen.lock().unwrap().push(line.to_owned())
        }));
    handle.result(options).await.unwrap_err();
    assert_eq!(backend.faults().calls("follow_logs"), 1);
    assert_eq!(
        *lines.lock().unwrap(),
        vec!["looking up".to_owned(), "the last line".to_owned()]
    );
}
