//! A job's output as its runner copied it to the store
//! (`{job_id}/logs/host-0/{seq}`): read once the backend has no log left,
//! followed chunk by chunk as it lands, and redacted as the backend's is.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use kinetic_core::env::{EnvEntry, EnvSnapshot};
use kinetic_core::layout;
use kinetic_core::ports::{BackendCapabilities, ObjectStore, PutOptions};
use kinetic_engine::{Engine, EngineSettings, Entrypoint, JobSpec};
use kinetic_testkit::{FakeBackend, MemoryStore, Outcome};

struct World {
    _dir: tempfile::TempDir,
    store: MemoryStore,
    fake: FakeBackend,
    engine: Engine,
}

fn world(capabilities: BackendCapabilities) -> World {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("work.py"), "def f():\n    return 1\n").unwrap();
    let store = MemoryStore::new();
    let fake = FakeBackend::new("fake", Arc::new(store.clone())).with_capabilities(capabilities);
    let mut env = EnvSnapshot::new();
    env.insert("API_TOKEN", "tok-stored-7c2e");
    let engine = Engine::builder()
        .settings(EngineSettings::default().with_cwd(dir.path()))
        .store(Arc::new(store.clone()))
        .backend(Arc::new(fake.clone()))
        .default_backend("fake")
        .env_snapshot(env)
        .build()
        .unwrap();
    World {
        _dir: dir,
        store,
        fake,
        engine,
    }
}

fn spec() -> JobSpec {
    JobSpec::new(Entrypoint::parse("work:f").unwrap())
        .env(EnvEntry::parse_secret("API_TOKEN").unwrap())
}

async fn put_chunk(store: &MemoryStore, job: &kinetic_core::ids::JobId, name: &str, text: &str) {
    let path = layout::log_chunks(job, 0).child(name).unwrap();
    store
        .put(&path, Bytes::from(text.to_owned()), PutOptions::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn the_stored_copy_answers_once_the_backend_has_no_log() {
    let w = world(BackendCapabilities::single_host());
    w.fake.push_outcome(Outcome::Hang);
    let handle = w.engine.submit(spec()).await.unwrap();
    let job = handle.id().clone();
    put_chunk(&w.store, &job, "00000000", "one\ntwo\n").await;
    put_chunk(&w.store, &job, "00000001", "token tok-stored-7c2e\n").await;
    put_chunk(&w.store, &job, "00000002.end", "last\n").await;
    // A chunk of another host and a stray name are not part of it.
    let other = layout::log_chunks(&job, 1).child("00000000").unwrap();
    w.store
        .put(
            &other,
            Bytes::from_static(b"host one\n"),
            PutOptions::default(),
        )
        .await
        .unwrap();
    put_chunk(&w.store, &job, "notes.txt", "stray\n").await;

    // While the backend has a log, it answers.
    assert!(handle.logs().await.unwrap().starts_with("[fake] running"));
    // Cleaned up on the backend: the stored copy answers, tail and follow too.
    handle
        .cleanup(kinetic_engine::CleanupOptions {
            backend: true,
            store: false,
            ..kinetic_engine::CleanupOptions::default()
        })
        .await
        .unwrap();
    assert_eq!(
        handle.logs().await.unwrap(),
        "one\ntwo\ntoken <redacted>\nlast\n"
    );
    assert_eq!(handle.tail(2).await.unwrap(), "token <redacted>\nlast\n");
    let lines: Vec<String> = handle
        .follow_logs()
        .await
        .unwrap()
        .map(Result::unwrap)
        .collect()
        .await;
    assert_eq!(lines, ["one", "two", "token <redacted>", "last"]);

    // Without a stored copy, the backend's answer stands: not found.
    w.store
        .delete_prefix(&layout::log_chunks(&job, 0))
        .await
        .unwrap();
    let err = handle.logs().await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
}

async fn next(
    stream: &mut kinetic_core::ports::LogStream,
) -> Option<Result<String, kinetic_core::ports::BackendError>> {
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("a line within 10 s")
}

#[tokio::test]
async fn a_follower_without_a_live_log_reads_chunks_as_they_land() {
    // A backend that offers no log at all: the stored copy is the log.
    let w = world(BackendCapabilities::single_host().with_logs(false, false));
    w.fake.push_outcome(Outcome::Hang);
    let handle = w.engine.submit(spec()).await.unwrap();
    let job = handle.id().clone();
    let err = handle.logs().await.unwrap_err();
    assert!(err.is_invalid_input(), "{err:?}");

    put_chunk(&w.store, &job, "00000000", "first\npart").await;
    let mut stream = handle.follow_logs().await.unwrap();
    assert_eq!(next(&mut stream).await.unwrap().unwrap(), "first");
    put_chunk(&w.store, &job, "00000001", "ial\nsecond\n").await;
    assert_eq!(next(&mut stream).await.unwrap().unwrap(), "partial");
    assert_eq!(next(&mut stream).await.unwrap().unwrap(), "second");
    // A retried run numbers on after the first run's end.
    put_chunk(&w.store, &job, "00000002.end", "").await;
    put_chunk(&w.store, &job, "00000003", "retried\n").await;
    assert_eq!(next(&mut stream).await.unwrap().unwrap(), "retried");
    // The job ends: the stream ends once nothing more was copied.
    handle
        .cleanup(kinetic_engine::CleanupOptions {
            backend: true,
            store: false,
            ..kinetic_engine::CleanupOptions::default()
        })
        .await
        .unwrap();
    put_chunk(&w.store, &job, "00000004.end", "bye").await;
    assert_eq!(next(&mut stream).await.unwrap().unwrap(), "bye");
    assert!(next(&mut stream).await.is_none());
}
