//! A batch's client stays bounded: collected values are handed out as the
//! inputs settle and are not kept by the handle once the manifest records
//! them (issue 27, point 3). On the in-memory fake backend and store.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use kinetic_core::batch::{ChildOutcome, GroupManifest};
use kinetic_core::env::EnvSnapshot;
use kinetic_core::layout;
use kinetic_core::ports::{GetOptions, ObjectStore};
use kinetic_core::record::JobRecord;
use kinetic_engine::{
    AttachOptions, BatchConfig, BatchHandle, BatchResultsOptions, ChildError, Engine,
    EngineSettings, Entrypoint, JobSpec,
};
use kinetic_testkit::{FakeBackend, MemoryStore, Outcome};
use serde_json::{Value, json};

const FAST: Duration = Duration::from_millis(10);

struct World {
    dir: tempfile::TempDir,
    store: MemoryStore,
    fake: FakeBackend,
}

impl World {
    /// Input `i` answers `i * i`, or runs until cancelled when `hangs(i)`.
    fn new(hangs: fn(u64) -> bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("home/proj");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(
            project.join("pyproject.toml"),
            "[project]\nname = \"proj\"\n",
        )
        .unwrap();
        std::fs::write(
            project.join("work.py"),
            "def square(x):\n    return x * x\n",
        )
        .unwrap();
        let store = MemoryStore::new();
        let fake = FakeBackend::new("fake", Arc::new(store.clone()));
        fake.script_with(move |r: &JobRecord| {
            r.group_index.map(|i| {
                if hangs(i) {
                    Outcome::Hang
                } else {
                    Outcome::Succeed(json!(i * i))
                }
            })
        });
        Self { dir, store, fake }
    }

    fn engine(&self) -> Engine {
        let mut env = EnvSnapshot::new();
        env.insert("HOME", self.dir.path().join("home").to_string_lossy());
        Engine::builder()
            .store(Arc::new(self.store.clone()))
            .backend(Arc::new(self.fake.clone()))
            .default_backend("fake")
            .env_snapshot(env)
            .settings(EngineSettings::default().with_home(self.dir.path().join("home")))
            .spawner(|driver| {
                tokio::spawn(driver);
            })
            .build()
            .unwrap()
    }

    async fn map(&self, engine: &Engine, n: u64) -> BatchHandle {
        let spec = JobSpec::new(Entrypoint::parse("work:square").unwrap())
            .working_dir(self.dir.path().join("home/proj"));
        let config = BatchConfig::default()
            .max_concurrent(None)
            .poll_interval(FAST)
            .manifest_interval(FAST);
        engine
            .map(spec, (0..n).map(|i| json!(i)), config)
            .await
            .unwrap()
    }

    async fn manifest(&self, batch: &BatchHandle) -> GroupManifest {
        let path = layout::group_manifest(batch.group_id());
        let bytes = self.store.get(&path, GetOptions::default()).await.unwrap();
        GroupManifest::from_json_bytes(&bytes, batch.group_id())
            .unwrap()
            .0
    }
}

fn values(items: &[kinetic_engine::BatchItem]) -> Vec<Value> {
    items
        .iter()
        .map(|i| i.value().cloned().unwrap_or(Value::Null))
        .collect()
}

#[tokio::test]
async fn results_leave_no_value_in_the_handle_and_a_second_call_reads_the_manifest() {
    let w = World::new(|_| false);
    let engine = w.engine();
    let batch = w.map(&engine, 40).await;
    let squares: Vec<Value> = (0..40u64).map(|i| json!(i * i)).collect();
    let items = batch.results(BatchResultsOptions::default()).await.unwrap();
    assert_eq!(values(&items), squares);
    // The caller holds the values; the handle none (the manifest does).
    assert_eq!(batch.values_held(), 0);
    drop(items);
    let manifest = w.manifest(&batch).await;
    assert_eq!(manifest.children.len(), 40);
    for child in &manifest.children {
        let expected = json!(child.group_index * child.group_index);
        assert!(
            matches!(&child.outcome, Some(ChildOutcome::Succeeded { value, cleaned: true }) if *value == expected),
            "{child:?}"
        );
    }
    // Collected again (the jobs were cleaned up): from the manifest.
    let again = batch.results(BatchResultsOptions::default()).await.unwrap();
    assert_eq!(values(&again), squares);
    assert_eq!(batch.values_held(), 0);
    // And from another handle, which holds no value either.
    let attached = engine
        .attach_batch(batch.group_id().as_str(), AttachOptions::default())
        .await
        .unwrap();
    assert_eq!(attached.values_held(), 0);
    let from_attached = attached
        .results(BatchResultsOptions::default().ordered(false))
        .await
        .unwrap();
    let mut unordered = values(&from_attached);
    unordered.sort_by_key(|v| v.as_u64());
    assert_eq!(unordered, squares);
    assert_eq!(attached.values_held(), 0);
}

#[tokio::test]
async fn the_stream_hands_out_the_first_values_while_later_inputs_still_run() {
    // Inputs from 3 on run until cancelled: a client that collected every
    // value before handing any out would never hand one out.
    let w = World::new(|i| i >= 3);
    let engine = w.engine();
    let batch = w.map(&engine, 8).await;
    let mut stream = batch.results_stream(BatchResultsOptions::default());
    for i in 0..3u64 {
        let item = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("an item before the inputs still running ended")
            .unwrap()
            .unwrap();
        assert_eq!(item.index, i as usize);
        assert_eq!(item.value(), Some(&json!(i * i)));
    }
    assert_eq!(batch.status_counts().await.unwrap().running, 5);
    batch.cancel().await.unwrap();
    let rest: Vec<_> = stream.collect().await;
    assert_eq!(rest.len(), 5);
    for (item, index) in rest.iter().zip(3..) {
        let item = item.as_ref().unwrap();
        assert_eq!(item.index, index);
        assert!(
            matches!(item.outcome, Err(ChildError::Job { .. })),
            "{item:?}"
        );
    }
    assert_eq!(batch.values_held(), 0);
}

#[tokio::test]
async fn a_later_collection_keeps_the_outcomes_an_earlier_one_recorded() {
    // Inputs 0..4 end; 4..8 run until cancelled.
    let w = World::new(|i| i >= 4);
    let engine = w.engine();
    let batch = w.map(&engine, 8).await;
    let first: Vec<_> = batch
        .results_stream(BatchResultsOptions::default().timeout(Duration::from_secs(2)))
        .collect()
        .await;
    assert_eq!(first.len(), 5, "{first:?}");
    assert!(first[..4].iter().all(Result::is_ok));
    assert!(matches!(
        first[4],
        Err(kinetic_engine::BatchError::Timeout { .. })
    ));
    assert_eq!(batch.values_held(), 0);
    let recorded = w.manifest(&batch).await;
    assert_eq!(
        recorded
            .children
            .iter()
            .filter(|c| c.outcome.is_some())
            .count(),
        4
    );
    // The second collection writes the manifest again, without holding
    // the first one's values: it must still carry them.
    batch.cancel().await.unwrap();
    let items = batch
        .results(BatchResultsOptions::default().return_exceptions(true))
        .await
        .unwrap();
    assert_eq!(
        values(&items)[..4],
        [json!(0), json!(1), json!(4), json!(9)]
    );
    assert!(items[4..].iter().all(|i| i.outcome.is_err()));
    assert_eq!(batch.values_held(), 0);
    let manifest = w.manifest(&batch).await;
    for child in &manifest.children {
        match child.group_index {
            i @ 0..4 => assert!(
                matches!(&child.outcome, Some(ChildOutcome::Succeeded { value, .. }) if *value == json!(i * i)),
                "{child:?}"
            ),
            _ => assert!(
                matches!(child.outcome, Some(ChildOutcome::Failed { .. })),
                "{child:?}"
            ),
        }
    }
}
