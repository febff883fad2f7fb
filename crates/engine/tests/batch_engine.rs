//! Batches through the engine, on the in-memory fake backend and store.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use kinetic_core::batch::{InputMode, child_job_id, child_position};
use kinetic_core::env::EnvSnapshot;
use kinetic_core::ids::{GroupId, JobId};
use kinetic_core::layout;
use kinetic_core::ports::{Backend, BackendCapabilities, GetOptions, ObjectPath, ObjectStore};
use kinetic_core::record::JobRecord;
use kinetic_core::status::{JobStatus, StatusReason};
use kinetic_engine::layers::{FaultyBackend, FaultyStore};
use kinetic_engine::{
    Arg, AttachOptions, BatchConfig, BatchDriver, BatchError, BatchHandle, BatchResultsOptions,
    ChildError, CleanupOptions, Data, Engine, EngineBuilder, EngineSettings, Entrypoint, JobSpec,
    ProgressEvent, SubmitOptions,
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
    fn new() -> Self {
        Self::with_fake(|store| FakeBackend::new("fake", store))
    }

    fn with_fake(make: impl FnOnce(Arc<dyn ObjectStore>) -> FakeBackend) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("home/proj");
        std::fs::create_dir_all(project.join("data")).unwrap();
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
        std::fs::write(project.join("data/a.txt"), "alpha").unwrap();
        let store = MemoryStore::new();
        let fake = make(Arc::new(store.clone()));
        // Inputs answer with their square, as `work:square` would.
        fake.script_with(|r: &JobRecord| r.group_index.map(|i| Outcome::Succeed(json!(i * i))));
        Self { dir, store, fake }
    }

    fn engine(&self) -> Engine {
        self.engine_over(Arc::new(self.store.clone()), Arc::new(self.fake.clone()))
    }

    /// An engine over these ports (the world's fakes, decorated).
    fn engine_over(&self, store: Arc<dyn ObjectStore>, backend: Arc<dyn Backend>) -> Engine {
        self.builder_over(store, backend)
            .spawner(|driver| {
                tokio::spawn(driver);
            })
            .build()
            .unwrap()
    }

    /// An engine builder over these ports, with the world's home and no
    /// spawner.
    fn builder_over(
        &self,
        store: Arc<dyn ObjectStore>,
        backend: Arc<dyn Backend>,
    ) -> EngineBuilder {
        let mut env = EnvSnapshot::new();
        env.insert("HOME", self.dir.path().join("home").to_string_lossy());
        Engine::builder()
            .store(store)
            .backend(backend)
            .default_backend("fake")
            .env_snapshot(env)
            .settings(EngineSettings::default().with_home(self.dir.path().join("home")))
    }

    /// An engine builder over the world's own fakes, with no spawner.
    fn builder(&self) -> EngineBuilder {
        self.builder_over(Arc::new(self.store.clone()), Arc::new(self.fake.clone()))
    }

    fn spec(&self) -> JobSpec {
        JobSpec::new(Entrypoint::parse("work:square").unwrap())
            .working_dir(self.dir.path().join("home/proj"))
    }

    /// Whether the stored manifest of `group` names input `index`'s first
    /// attempt.
    fn names_child(&self, group: &GroupId, index: usize) -> bool {
        let child = child_job_id(group, index, 1);
        self.store
            .snapshot()
            .get(&layout::group_manifest(group))
            .is_some_and(|m| String::from_utf8_lossy(m).contains(child.as_str()))
    }

    /// Drive `driver` (a batch's submission loop) until the manifest of
    /// `group` names input `index` (30 s at most).
    async fn drive_until_named<F: std::future::Future + Unpin>(
        &self,
        group: &GroupId,
        index: usize,
        driver: &mut F,
    ) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !self.names_child(group, index) {
            assert!(
                std::time::Instant::now() < deadline,
                "input {index} was never named"
            );
            let _ = tokio::time::timeout(Duration::from_millis(1), &mut *driver).await;
        }
    }

    /// The stored manifest of `group`.
    fn manifest(&self, group: &GroupId) -> kinetic_core::batch::GroupManifest {
        let bytes = self
            .store
            .snapshot()
            .get(&layout::group_manifest(group))
            .cloned()
            .expect("the manifest is stored");
        kinetic_core::batch::GroupManifest::from_json_bytes(&bytes, group)
            .unwrap()
            .0
    }

    /// A map of `n` inputs submitted one at a time, driven until the
    /// manifest names input 0, and a handle attached to it then that
    /// reads the manifest again only in an hour: the batch's id, its
    /// submission loop and the attached handle.
    async fn attached_mid_submission(&self, n: u64) -> (GroupId, BatchDriver, BatchHandle) {
        let (batch, mut driver) = self
            .engine()
            .map_with_driver(
                self.spec(),
                numbers(n),
                fast().max_concurrent(Some(1)),
                SubmitOptions::default(),
            )
            .await
            .unwrap();
        let group_id = batch.group_id().clone();
        self.drive_until_named(&group_id, 0, &mut driver).await;
        let attached = self
            .engine()
            .attach_batch(
                group_id.as_str(),
                AttachOptions::default()
                    .poll_interval(FAST)
                    .manifest_polling(Duration::from_secs(3600), None),
            )
            .await
            .unwrap();
        (group_id, driver, attached)
    }

    async fn record(&self, job_id: &JobId) -> JobRecord {
        let path = ObjectPath::parse(format!("{job_id}/handle.json")).unwrap();
        let bytes = self.store.get(&path, GetOptions::default()).await.unwrap();
        JobRecord::from_json_bytes(&bytes).unwrap()
    }
}

fn fast() -> BatchConfig {
    BatchConfig::default()
        .poll_interval(FAST)
        .manifest_interval(FAST)
}

fn numbers(n: u64) -> Vec<Value> {
    (0..n).map(|i| json!(i)).collect()
}

fn values(items: &[kinetic_engine::BatchItem]) -> Vec<Value> {
    items
        .iter()
        .map(|i| i.value().cloned().unwrap_or(Value::Null))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn map_runs_every_input_and_returns_values_in_input_order() {
    let w = World::new();
    let batch = w
        .engine()
        .map(w.spec(), numbers(40), fast().max_concurrent(Some(7)))
        .await
        .unwrap();
    assert!(batch.group_id().as_str().starts_with("grp-"));
    let items = batch
        .results(BatchResultsOptions::default().timeout(Duration::from_secs(30)))
        .await
        .unwrap();
    let want: Vec<Value> = (0..40u64).map(|i| json!(i * i)).collect();
    assert_eq!(values(&items), want);
    assert_eq!(w.fake.submits(), 40);
    // Each child's handle.json names its group, kind and index.
    let job = child_job_id(batch.group_id(), 5, 1);
    assert_eq!(items[5].job_id.as_ref(), Some(&job));
    let counts = batch.counts();
    assert_eq!((counts.succeeded, counts.total()), (40, 40));
    // Results were collected with cleanup: the children's backend
    // resources are gone, their folders (and the group's) stay until the
    // batch is cleaned up, each with the note that says so.
    let notes = w
        .store
        .snapshot()
        .keys()
        .filter(|p| p.as_str().starts_with("job-") && p.as_str().ends_with("/cleanup.json"))
        .count();
    assert_eq!(notes, 40);
    assert!(
        w.store
            .snapshot()
            .contains_key(&layout::group_manifest(batch.group_id()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_records_and_the_manifest_name_the_group() {
    let w = World::new();
    let batch = w
        .engine()
        .map(w.spec(), numbers(12), fast().name("sweep").tag("team", "a"))
        .await
        .unwrap();
    batch.wait(Some(Duration::from_secs(30))).await.unwrap();
    let job = batch.job(3).unwrap();
    let record = w.record(job.id()).await;
    assert_eq!(record.group_id.as_ref(), Some(batch.group_id()));
    assert_eq!(record.group_kind.as_deref(), Some("map"));
    assert_eq!(record.group_index, Some(3));
    // The final manifest names every child once, in Kinetic's shape.
    let path = layout::group_manifest(batch.group_id());
    let manifest: Value =
        serde_json::from_slice(&w.store.get(&path, GetOptions::default()).await.unwrap()).unwrap();
    assert_eq!(manifest["total_expected"], 12);
    assert_eq!(manifest["group_kind"], "map");
    assert_eq!(manifest["group_name"], "sweep");
    assert_eq!(manifest["tags"], json!({"team": "a"}));
    assert_eq!(manifest["submit_fn_name"], "square");
    let indices: BTreeSet<u64> = manifest["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["group_index"].as_u64().unwrap())
        .collect();
    assert_eq!(indices, (0..12).collect());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_poll_is_one_backend_call_whatever_the_size() {
    let w = World::with_fake(|store| {
        FakeBackend::new("fake", store).with_timing(Duration::from_secs(3600), Duration::ZERO)
    });
    let batch = w
        .engine()
        .map(w.spec(), numbers(300), fast().max_concurrent(None))
        .await
        .unwrap();
    batch
        .wait_submitted(Some(Duration::from_secs(30)))
        .await
        .unwrap();
    // Let the submission loop finish (it stops once nothing can be retried).
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before = w.fake.total_calls();
    let groups_before = w.fake.calls("group_status");
    let statuses = batch.statuses().await.unwrap();
    assert_eq!(statuses.len(), 300);
    assert!(statuses.iter().all(|(_, s)| s.status == JobStatus::Pending));
    assert_eq!(
        w.fake.total_calls() - before,
        1,
        "one backend call per poll"
    );
    assert_eq!(w.fake.calls("group_status") - groups_before, 1);
    let counts = batch.status_counts().await.unwrap();
    assert_eq!((counts.pending, counts.total()), (300, 300));
    assert_eq!(w.fake.total_calls() - before, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_completed_yields_jobs_while_later_inputs_wait_to_be_submitted() {
    let w = World::new();
    let batch = w
        .engine()
        .map(w.spec(), numbers(6), fast().max_concurrent(Some(2)))
        .await
        .unwrap();
    let mut stream = batch.as_completed(Some(Duration::from_secs(30)));
    let first = stream.next().await.unwrap().unwrap();
    assert!(
        !batch.is_submission_complete(),
        "the first job ended before the last inputs were submitted"
    );
    let mut seen = vec![first.record().group_index.unwrap()];
    while let Some(job) = stream.next().await {
        seen.push(job.unwrap().record().group_index.unwrap());
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..6).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_inputs_are_retried_under_a_new_attempt_id() {
    let w = World::new();
    let fails_once: Arc<Mutex<BTreeSet<u64>>> = Arc::new(Mutex::new(BTreeSet::new()));
    let seen = fails_once.clone();
    w.fake.script_with(move |r: &JobRecord| {
        let i = r.group_index?;
        if i % 5 == 3 && seen.lock().unwrap().insert(i) {
            return Some(Outcome::Fail {
                type_name: "ValueError".into(),
                message: format!("flaky {i}"),
            });
        }
        Some(Outcome::Succeed(json!(i * i)))
    });
    let batch = w
        .engine()
        .map(w.spec(), numbers(20), fast().retries(1))
        .await
        .unwrap();
    let items = batch.results(BatchResultsOptions::default()).await.unwrap();
    assert_eq!(
        values(&items),
        (0..20u64).map(|i| json!(i * i)).collect::<Vec<_>>()
    );
    assert_eq!(w.fake.submits(), 24, "four inputs ran twice");
    let retried = batch.job(3).unwrap();
    assert_eq!(
        child_position(batch.group_id(), retried.id()),
        Some((3, 2)),
        "the retry is attempt 2"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_fast_skips_the_queue_and_cancels_running_jobs() {
    let w = World::new();
    w.fake.script_with(|r: &JobRecord| match r.group_index? {
        0 => Some(Outcome::Fail {
            type_name: "ValueError".into(),
            message: "bad input".into(),
        }),
        _ => Some(Outcome::Hang),
    });
    let batch = w
        .engine()
        .map(
            w.spec(),
            numbers(10),
            fast().max_concurrent(Some(3)).fail_fast(true, true),
        )
        .await
        .unwrap();
    let err = batch
        .results(
            BatchResultsOptions::default()
                .timeout(Duration::from_secs(30))
                .cleanup(false),
        )
        .await
        .unwrap_err();
    let failure = err.failure().expect("a batch failure");
    assert_eq!(failure.total, 10);
    assert_eq!(failure.failed_count(), 10, "{err}");
    assert!(err.to_string().contains("10 of 10 inputs failed"), "{err}");
    // Input 0 failed, 1 and 2 were cancelled, 3..9 never submitted.
    let failed: Vec<usize> = failure.failures.iter().map(|f| f.index).collect();
    assert_eq!(failed, vec![0, 1, 2]);
    assert!(matches!(
        failure.failures[0].error,
        ChildError::Job { ref error, .. } if error.remote().is_some_and(|r| r.message == "bad input")
    ));
    assert_eq!(failure.submission_failures.len(), 7);
    assert!(
        failure
            .submission_failures
            .values()
            .all(|e| matches!(e, ChildError::NotSubmitted { .. }))
    );
    assert_eq!(w.fake.submits(), 3);
    let cancelled = batch.job(1).unwrap().status().await.unwrap();
    assert_eq!(cancelled.reason, Some(StatusReason::Cancelled));
    assert_eq!(batch.failures().await.unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unordered_results_count_failures_against_every_input() {
    let w = World::new();
    w.fake.script_with(|r: &JobRecord| {
        let i = r.group_index?;
        Some(if i == 1 || i == 4 {
            Outcome::Exit(3)
        } else {
            Outcome::Succeed(json!(i))
        })
    });
    let batch = w.engine().map(w.spec(), numbers(6), fast()).await.unwrap();
    let err = batch
        .results(BatchResultsOptions::default().ordered(false).cleanup(false))
        .await
        .unwrap_err();
    // Kinetic would say "2 of 4" here.
    assert!(err.to_string().contains("2 of 6 inputs failed"), "{err}");
    let failure = err.failure().unwrap();
    assert_eq!(
        failure.partial_results,
        vec![
            Some(json!(0)),
            None,
            Some(json!(2)),
            Some(json!(3)),
            None,
            Some(json!(5))
        ]
    );
    // With return_exceptions the same call returns every item.
    let items = batch
        .results(
            BatchResultsOptions::default()
                .ordered(false)
                .return_exceptions(true),
        )
        .await
        .unwrap();
    assert_eq!(items.len(), 6);
    assert_eq!(items.iter().filter(|i| i.outcome.is_err()).count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_data_and_the_project_are_uploaded_once_per_batch() {
    let w = World::new();
    let hashed = Arc::new(AtomicUsize::new(0));
    let packed = Arc::new(AtomicUsize::new(0));
    let (h, p) = (hashed.clone(), packed.clone());
    let progress = Arc::new(move |e: &ProgressEvent| match e {
        ProgressEvent::HashingData { .. } => {
            h.fetch_add(1, Ordering::SeqCst);
        }
        ProgressEvent::ContextUploaded { .. } => {
            p.fetch_add(1, Ordering::SeqCst);
        }
        _ => {}
    });
    let data = Data::new("data", &w.dir.path().join("home/proj")).unwrap();
    let spec = w.spec().volume("/data", data.clone()).arg(data);
    let batch = w
        .engine()
        .map_with(
            spec,
            numbers(25),
            fast().input_mode(InputMode::Single),
            SubmitOptions::with_progress(progress),
        )
        .await
        .unwrap();
    batch.wait(Some(Duration::from_secs(30))).await.unwrap();
    assert_eq!(
        hashed.load(Ordering::SeqCst),
        1,
        "one hash for one data path"
    );
    assert_eq!(
        packed.load(Ordering::SeqCst),
        1,
        "one context for the batch"
    );
    let objects = w.store.snapshot();
    let contexts = objects
        .keys()
        .filter(|p| p.as_str().contains("context"))
        .count();
    assert_eq!(contexts, 1);
    let markers = objects
        .keys()
        .filter(|p| p.as_str().starts_with("default/data-markers/"))
        .count();
    assert_eq!(markers, 1);
    // Every child's spec points at the shared context and the cached data,
    // and gets the data ref first, then its own input.
    let job = batch.job(7).unwrap();
    let spec_path = ObjectPath::parse(format!("{}/spec.json", job.id())).unwrap();
    let spec: Value = serde_json::from_slice(
        &w.store
            .get(&spec_path, GetOptions::default())
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(
        spec["context"]["uri"]
            .as_str()
            .unwrap()
            .contains("/_groups/")
    );
    assert_eq!(spec["args"][0]["__data_ref__"], true);
    assert_eq!(spec["args"][1], 7);
}

/// Reads `{job_id}/spec.json`.
async fn child_spec(w: &World, job_id: &JobId) -> Value {
    let path = ObjectPath::parse(format!("{job_id}/spec.json")).unwrap();
    serde_json::from_slice(&w.store.get(&path, GetOptions::default()).await.unwrap()).unwrap()
}

/// Data in the inputs: each input's data reaches its own job as a
/// reference; data given to several inputs is hashed and uploaded once; a
/// resumed batch reads its inputs back, data included, and hashes again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_in_inputs_reaches_each_job_and_is_uploaded_once() {
    let w = World::new();
    let proj = w.dir.path().join("home/proj");
    for (name, text) in [("s0", "zero"), ("s1", "one")] {
        std::fs::create_dir_all(proj.join("shards").join(name)).unwrap();
        std::fs::write(proj.join("shards").join(name).join("part.txt"), text).unwrap();
    }
    let s0 = Data::new("shards/s0", &proj).unwrap();
    let s1 = Data::new("shards/s1", &proj).unwrap();
    let inputs = vec![
        Arg::Data(s0.clone()),
        Arg::Data(s1.clone()),
        Arg::List(vec![Arg::Data(s0.clone()), Arg::Json(json!(2))]),
    ];
    let hashed = Arc::new(Mutex::new(Vec::new()));
    let seen = hashed.clone();
    let progress = Arc::new(move |e: &ProgressEvent| {
        if let ProgressEvent::HashingData { path } = e {
            seen.lock().unwrap().push(path.clone());
        }
    });
    let options = SubmitOptions::with_progress(progress);
    let engine = w.engine();
    // Submitted by a loop that is dropped at once: nothing reaches the
    // backend, so the batch is resumed from what it stored.
    let (batch, driver) = engine
        .map_with_driver(w.spec(), inputs, fast(), options.clone())
        .await
        .unwrap();
    drop(driver);
    assert_eq!(
        hashed.lock().unwrap().len(),
        2,
        "s0, given twice, hashed once: {:?}",
        hashed.lock().unwrap()
    );
    let markers = |w: &World| {
        w.store
            .snapshot()
            .keys()
            .filter(|p| p.as_str().starts_with("default/data-markers/"))
            .count()
    };
    assert_eq!(markers(&w), 2, "one cache entry per content");
    let stored = w
        .store
        .get(
            &layout::group_inputs(batch.group_id()),
            GetOptions::default(),
        )
        .await
        .unwrap();
    let lines: Vec<Value> = String::from_utf8(stored.to_vec())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines[0],
        json!({"__kinetic_input__": {"data": proj.join("shards/s0").to_string_lossy()}})
    );

    let attached = w
        .engine()
        .attach_batch(batch.group_id().as_str(), AttachOptions::default())
        .await
        .unwrap();
    attached
        .resume_with(w.spec(), fast(), options)
        .await
        .unwrap();
    let items = attached
        .results(BatchResultsOptions::default().timeout(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(values(&items), vec![json!(0), json!(1), json!(4)]);
    assert_eq!(hashed.lock().unwrap().len(), 4, "the resume hashed again");
    assert_eq!(markers(&w), 2);
    let mut refs = Vec::new();
    for i in 0..3 {
        refs.push(child_spec(&w, &attached.job_id(i).unwrap()).await["args"].clone());
    }
    let uri = |args: &Value, i: usize| args[i]["uri"].as_str().unwrap().to_owned();
    assert_eq!(refs[0][0]["__data_ref__"], true);
    assert!(uri(&refs[0], 0).contains("/data-cache/"), "{}", refs[0]);
    assert_ne!(
        uri(&refs[0], 0),
        uri(&refs[1], 0),
        "each input its own data"
    );
    assert_eq!(
        uri(&refs[2], 0),
        uri(&refs[0], 0),
        "the same data, the same entry"
    );
    assert_eq!(refs[2][1], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_inputs_that_cannot_be_honoured_are_refused() {
    let w = World::new();
    let proj = w.dir.path().join("home/proj");
    let data = Data::new("data", &proj).unwrap();
    let engine = w.engine();
    let err = engine
        .map(
            w.spec(),
            vec![Arg::Data(data.clone().fuse(true).unwrap())],
            fast(),
        )
        .await
        .unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
    assert!(err.to_string().contains("FUSE-mounted data"), "{err}");
    let err = engine
        .map(
            w.spec(),
            vec![Arg::Data(data)],
            fast().input_mode(InputMode::Args),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("input 0 must be a JSON array for input mode 'args', got data"),
        "{err}"
    );
    assert!(w.store.snapshot().is_empty(), "nothing was uploaded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_and_options_fail_before_anything_is_uploaded() {
    let w = World::new();
    let engine = w.engine();
    let cases: Vec<(Vec<Value>, BatchConfig, &str)> = vec![
        (vec![], fast(), "non-empty"),
        (numbers(3), fast().max_concurrent(Some(0)), "max_concurrent"),
        (
            vec![json!({"x": 1}), json!([1])],
            fast().input_mode(InputMode::Kwargs),
            "input 1 must be a JSON object",
        ),
        (
            vec![json!(1)],
            fast().input_mode(InputMode::Args),
            "input 0 must be a JSON array",
        ),
    ];
    for (inputs, options, want) in cases {
        let err = engine.map(w.spec(), inputs, options).await.unwrap_err();
        assert!(err.is_invalid_input(), "{err}");
        assert!(err.to_string().contains(want), "{err}");
    }
    let bad_spec = JobSpec::new(Entrypoint::parse("work:square").unwrap())
        .working_dir(w.dir.path().join("home/proj"))
        .accelerator("no-such-chip");
    let err = engine.map(bad_spec, numbers(2), fast()).await.unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
    assert!(w.store.snapshot().is_empty(), "nothing was uploaded");
    // Without a spawner, map says how to get one.
    let bare = Engine::builder()
        .store(Arc::new(w.store.clone()))
        .backend(Arc::new(w.fake.clone()))
        .default_backend("fake")
        .build()
        .unwrap();
    let err = bare.map(w.spec(), numbers(2), fast()).await.unwrap_err();
    assert!(err.to_string().contains("spawner"), "{err}");
    let err = engine
        .attach_batch("grp-00000000", AttachOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, BatchError::GroupNotFound { .. }), "{err}");
    let err = engine
        .attach_batch("not-a-group", AttachOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn map_with_driver_needs_no_spawner() {
    let w = World::new();
    let bare = w.builder().build().unwrap();
    let (batch, driver) = bare
        .map_with_driver(w.spec(), numbers(5), fast(), SubmitOptions::default())
        .await
        .unwrap();
    let (_, items) = tokio::join!(driver, batch.results(BatchResultsOptions::default()));
    assert_eq!(
        values(&items.unwrap()),
        vec![json!(0), json!(1), json!(4), json!(9), json!(16)]
    );
}

/// The batch's manifest, like its children's records, carries the time of
/// the engine's clock, not the machine's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manifest_is_stamped_with_the_engines_clock() {
    let w = World::new();
    let stamp = kinetic_core::record::UtcTimestamp::from_unix_seconds(1_750_000_000);
    let engine = w.builder().clock(move || stamp).build().unwrap();
    let (batch, driver) = engine
        .map_with_driver(w.spec(), numbers(2), fast(), SubmitOptions::default())
        .await
        .unwrap();
    let (_, items) = tokio::join!(driver, batch.results(BatchResultsOptions::default()));
    items.unwrap();
    assert_eq!(w.manifest(batch.group_id()).created_at, stamp);
    let child = w.record(batch.job(0).unwrap().id()).await;
    assert_eq!(child.created_at, stamp);
}

/// A batch over jobs submitted already writes its manifest with the
/// engine's clock too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_jobs_is_stamped_with_the_engines_clock() {
    let w = World::new();
    let stamp = kinetic_core::record::UtcTimestamp::from_unix_seconds(1_760_000_000);
    let engine = w
        .builder()
        .clock(move || stamp)
        .spawner(|driver| {
            tokio::spawn(driver);
        })
        .build()
        .unwrap();
    let mut jobs = Vec::new();
    for i in 0..2 {
        jobs.push(Some(engine.submit(w.spec().arg(json!(i))).await.unwrap()));
    }
    let batch = engine
        .batch_of("grp-0a1b2c3d", None, Default::default(), jobs)
        .unwrap();
    batch
        .results(BatchResultsOptions::default().cleanup(false))
        .await
        .unwrap();
    assert_eq!(w.manifest(batch.group_id()).created_at, stamp);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_running_jobs_and_drops_queued_inputs() {
    let w = World::new();
    w.fake.script_with(|_| Some(Outcome::Hang));
    let batch = w
        .engine()
        .map(
            w.spec(),
            numbers(8),
            fast().max_concurrent(Some(3)).retries(2),
        )
        .await
        .unwrap();
    while batch.counts().pending + batch.counts().running < 3 {
        batch.status_counts().await.unwrap();
        tokio::time::sleep(FAST).await;
    }
    batch.cancel().await.unwrap();
    batch.wait(Some(Duration::from_secs(30))).await.unwrap();
    let counts = batch.counts();
    assert_eq!((counts.failed, counts.skipped), (3, 5), "{counts}");
    assert_eq!(w.fake.submits(), 3, "cancelled inputs are not retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_removes_children_and_the_group_folder() {
    let w = World::new();
    let batch = w.engine().map(w.spec(), numbers(4), fast()).await.unwrap();
    batch
        .results(BatchResultsOptions::default().cleanup(false))
        .await
        .unwrap();
    assert!(
        w.store
            .snapshot()
            .keys()
            .any(|p| p.as_str().starts_with("job-"))
    );
    batch.cleanup(CleanupOptions::default()).await.unwrap();
    let left: Vec<String> = w
        .store
        .snapshot()
        .keys()
        .map(|p| p.to_string())
        .filter(|p| !p.starts_with("default/"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(w.fake.list().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_follows_a_batch_still_being_submitted() {
    let w = World::with_fake(|store| {
        FakeBackend::new("fake", store).with_timing(Duration::from_millis(300), Duration::ZERO)
    });
    let batch = w
        .engine()
        .map(w.spec(), numbers(30), fast().max_concurrent(Some(10)))
        .await
        .unwrap();
    while w.fake.submits() < 10 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let other = w.engine();
    let attached = other
        .attach_batch(
            batch.group_id().as_str(),
            AttachOptions::default()
                .poll_interval(FAST)
                .manifest_polling(FAST, Some(Duration::from_secs(30))),
        )
        .await
        .unwrap();
    assert_eq!(attached.total(), 30);
    let known = attached.jobs().iter().flatten().count();
    assert!(
        known >= 10,
        "every child submitted so far is found ({known})"
    );
    assert!(!attached.is_submission_complete());
    let items = attached
        .results(BatchResultsOptions::default().timeout(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(
        values(&items),
        (0..30u64).map(|i| json!(i * i)).collect::<Vec<_>>()
    );
    assert_eq!(w.fake.submits(), 30);
}

/// A handle attached while the batch is still being submitted collects
/// (and records) the one child it knows after the submitter named the
/// other and said it submitted everything: its write does not drop what
/// it had not read (the Python `attach_batch` test hung when it did: the
/// manifest then named one child of two, and said no more would come).
/// On a backend without group status, so that the manifest is the only
/// way it learns of a child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_handle_never_writes_away_children_it_has_not_read() {
    let w = World::with_fake(|store| {
        FakeBackend::new("fake", store)
            .with_capabilities(BackendCapabilities::single_host().with_group_status(false))
    });
    // Attached while the manifest names input 0 only.
    let (group_id, driver, attached) = w.attached_mid_submission(2).await;
    assert_eq!(attached.never_submitted(), vec![1]);
    tokio::time::timeout(Duration::from_secs(30), driver)
        .await
        .expect("the submitter ends");
    assert!(w.names_child(&group_id, 1));
    assert!(w.manifest(&group_id).submission_complete);

    // It collects input 0 (and records it, cleaning it up), then waits
    // for input 1, which it does not know of yet.
    let err = attached
        .results(
            BatchResultsOptions::default()
                .ordered(false)
                .timeout(Duration::from_secs(2)),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, BatchError::Timeout { .. }), "{err}");
    assert_eq!(attached.counts().succeeded, 1);
    let m = w.manifest(&group_id);
    assert!(
        m.submission_complete,
        "the manifest still says every input was submitted"
    );
    let named: BTreeSet<usize> = m.children.iter().map(|c| c.group_index).collect();
    assert_eq!(named, BTreeSet::from([0, 1]), "both children stay named");

    // A handle attached now collects both.
    let again = w
        .engine()
        .attach_batch(
            group_id.as_str(),
            AttachOptions::default().poll_interval(FAST),
        )
        .await
        .unwrap();
    let items = again
        .results(BatchResultsOptions::default().timeout(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(values(&items), vec![json!(0), json!(1)]);
}

/// A handle attached while the batch is still being submitted follows
/// the children the submitter starts from the group poll that finds them,
/// not from its next read of the manifest (every 10 s by default; here an
/// hour, so only the poll can find them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_handle_follows_new_children_at_the_polls_pace() {
    let w = World::new();
    let (group_id, driver, attached) = w.attached_mid_submission(3).await;
    assert_eq!(attached.never_submitted(), vec![1, 2]);
    let submitter = tokio::spawn(driver);
    let items = attached
        .results(BatchResultsOptions::default().timeout(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(values(&items), vec![json!(0), json!(1), json!(4)]);
    submitter.await.unwrap();
    let m = w.manifest(&group_id);
    assert!(m.submission_complete);
    assert_eq!(m.children.len(), 3, "every child stays named");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_from_another_handle_stops_the_submitter_too() {
    // Jobs that run a minute unless cancelled. The submitter (one input at
    // a time) had input 0 out when another handle cancelled the batch
    // (`kinetic batch cancel` from another process): reading input 0
    // stopped must not free its room for inputs 1 and 2, which would then
    // run after the cancel with nobody to stop them.
    let w = World::with_fake(|store| {
        FakeBackend::new("fake", store).with_timing(Duration::ZERO, Duration::from_secs(60))
    });
    let (group_id, driver, attached) = w.attached_mid_submission(3).await;
    let submitter = tokio::spawn(driver);
    attached.cancel().await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), submitter)
        .await
        .expect("the submitter stops once it reads the cancel")
        .unwrap();
    assert_eq!(w.fake.submits(), 1, "nothing submitted after the cancel");
    let m = w.manifest(&group_id);
    assert_eq!(m.children.len(), 1, "{m:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_gone_from_the_backend_ends_as_its_stored_result_says() {
    let w = World::with_fake(|store| {
        FakeBackend::new("fake", store).with_timing(Duration::from_millis(50), Duration::ZERO)
    });
    let batch = w
        .engine()
        .map(
            w.spec(),
            numbers(3),
            fast().poll_interval(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    batch
        .wait_submitted(Some(Duration::from_secs(30)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(80)).await;
    // The backend ran job 1 to its end and forgot it (a Kubernetes TTL).
    let job = batch.job(1).unwrap();
    let state = w.fake.status(job.record()).await.unwrap();
    assert_eq!(state.status, JobStatus::Succeeded);
    w.fake
        .cleanup(job.record(), kinetic_core::ports::CleanupWait::default())
        .await
        .unwrap();
    let statuses = batch.statuses().await.unwrap();
    assert_eq!(statuses[1].1.status, JobStatus::Succeeded);
    let items = batch.results(BatchResultsOptions::default()).await.unwrap();
    assert_eq!(values(&items), vec![json!(0), json!(1), json!(4)]);
}

/// The crash test: drop the submitting engine mid-way through a
/// 500-input map; a new engine attaches, finds every submitted child,
/// resumes without submitting any input twice, and collects all 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_map_is_attached_resumed_and_collected_without_double_submits() {
    let w = World::new();
    // A little latency on every store and backend call, so submissions are
    // caught half-way (record written, backend not yet called) by the crash.
    let store = FaultyStore::new(Arc::new(w.store.clone()));
    store.faults().set_latency(Duration::from_micros(300));
    let backend = FaultyBackend::new(Arc::new(w.fake.clone()));
    backend.faults().set_latency(Duration::from_micros(300));
    let slow_engine = || w.engine_over(Arc::new(store.clone()), Arc::new(backend.clone()));
    let total = 500u64;
    let group_id = {
        let engine = slow_engine();
        let (batch, mut driver) = engine
            .map_with_driver(
                w.spec(),
                numbers(total),
                fast().max_concurrent(None).submit_parallelism(16),
                SubmitOptions::default(),
            )
            .await
            .unwrap();
        while w.fake.submits() < 250 {
            let _ = tokio::time::timeout(Duration::from_millis(1), &mut driver).await;
        }
        let group_id = batch.group_id().clone();
        drop(driver);
        let err = batch.wait(Some(Duration::from_secs(5))).await.unwrap_err();
        assert!(matches!(err, BatchError::SubmissionStopped { .. }), "{err}");
        group_id
    };
    let submitted_before = w.fake.submits();
    assert!(
        (250..total).contains(&submitted_before),
        "crashed mid-way ({submitted_before})"
    );
    // Children caught half-way: a record written, the backend never told.
    let held: BTreeSet<JobId> = w.fake.list().await.unwrap().into_iter().collect();
    let half_way = w
        .store
        .snapshot()
        .keys()
        .filter(|p| p.file_name() == "handle.json")
        .filter_map(|p| p.as_str().split('/').next()?.parse::<JobId>().ok())
        .filter(|id| !held.contains(id))
        .count();
    eprintln!("crash: {submitted_before} submitted, {half_way} caught half-way");

    let engine = slow_engine();
    let attached = engine
        .attach_batch(
            group_id.as_str(),
            AttachOptions::default()
                .poll_interval(FAST)
                .manifest_polling(FAST, Some(Duration::from_millis(100))),
        )
        .await
        .unwrap();
    let found = attached.jobs().iter().flatten().count() as u64;
    assert_eq!(
        found, submitted_before,
        "attach finds every submitted child"
    );

    attached
        .resume(w.spec(), fast().max_concurrent(None))
        .await
        .unwrap();
    let items = attached
        .results(BatchResultsOptions::default().timeout(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(
        values(&items),
        (0..total).map(|i| json!(i * i)).collect::<Vec<_>>()
    );
    assert_eq!(w.fake.submits(), total, "no input was submitted twice");
}

/// A child the manifest names whose job the backend no longer holds,
/// without a result (the local pool that queued it died with its client;
/// or its record was written and the client killed before the backend was
/// told), is not a failure to a handle attached while nobody submits: it
/// stays pending, and a resume runs that attempt under the same id. An
/// attached handle that polled before resuming ended it `NOT_FOUND`, and
/// the resume kept that failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_child_the_backend_lost_stays_pending_and_is_resumed() {
    let w = World::new();
    let first = Arc::new(AtomicUsize::new(0));
    let seen = first.clone();
    // Input 0's first job never ends; every other job squares its input.
    w.fake.script_with(move |r: &JobRecord| {
        let i = r.group_index?;
        if i == 0 && seen.fetch_add(1, Ordering::SeqCst) == 0 {
            return Some(Outcome::Hang);
        }
        Some(Outcome::Succeed(json!(i * i)))
    });
    let lost = {
        let engine = w.engine();
        let (batch, mut driver) = engine
            .map_with_driver(
                w.spec(),
                numbers(3),
                fast().max_concurrent(Some(1)),
                SubmitOptions::default(),
            )
            .await
            .unwrap();
        w.drive_until_named(batch.group_id(), 0, &mut driver).await;
        // The client is killed, and what it started goes with it.
        drop(driver);
        batch.job(0).unwrap()
    };
    w.fake
        .cleanup(lost.record(), kinetic_core::ports::CleanupWait::default())
        .await
        .unwrap();
    let group_id = lost.record().group_id.clone().unwrap();

    let engine = w.engine();
    let attached = engine
        .attach_batch(
            group_id.as_str(),
            AttachOptions::default()
                .poll_interval(FAST)
                .manifest_polling(FAST, None),
        )
        .await
        .unwrap();
    assert_eq!(
        attached.never_submitted(),
        vec![1, 2],
        "input 0 is followed"
    );
    // Polled before the resume: the backend does not hold input 0's job.
    let err = attached
        .wait(Some(Duration::from_millis(200)))
        .await
        .unwrap_err();
    assert!(matches!(err, BatchError::Timeout { .. }), "{err}");
    let counts = attached.counts();
    assert_eq!((counts.pending, counts.not_found), (1, 0), "{counts:?}");

    attached
        .resume(w.spec(), fast().max_concurrent(None))
        .await
        .unwrap();
    let items = attached
        .results(BatchResultsOptions::default().timeout(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(values(&items), vec![json!(0), json!(1), json!(4)]);
    assert_eq!(
        items[0].job_id.as_ref(),
        Some(lost.id()),
        "the lost attempt, submitted again under its id"
    );
    assert_eq!(
        w.fake.submits(),
        4,
        "input 0 twice (it was lost), the others once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_times_out_and_the_batch_goes_on() {
    let w = World::new();
    w.fake.script_with(|_| Some(Outcome::Hang));
    let batch = w.engine().map(w.spec(), numbers(3), fast()).await.unwrap();
    let err = batch
        .wait(Some(Duration::from_millis(100)))
        .await
        .unwrap_err();
    assert!(matches!(err, BatchError::Timeout { .. }), "{err}");
    assert!(err.is_retryable());
    let mut stream = batch.as_completed(Some(Duration::from_millis(50)));
    assert!(matches!(
        stream.next().await,
        Some(Err(BatchError::Timeout { .. }))
    ));
    assert!(stream.next().await.is_none());
    batch.cancel().await.unwrap();
    batch.wait(Some(Duration::from_secs(30))).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_without_group_status_is_polled_job_by_job() {
    // A backend that declares no group status (and answers Unsupported if
    // asked): the engine reads the capability and polls each job.
    let w = World::with_fake(|store| {
        FakeBackend::new("fake", store)
            .with_capabilities(BackendCapabilities::single_host().with_group_status(false))
    });
    let engine = w.engine();
    let batch = engine
        .map(w.spec(), numbers(6), fast().max_concurrent(Some(2)))
        .await
        .unwrap();
    let items = batch.results(BatchResultsOptions::default()).await.unwrap();
    assert_eq!(
        values(&items),
        (0..6u64).map(|i| json!(i * i)).collect::<Vec<_>>()
    );
    assert_eq!(w.fake.calls("group_status"), 0);
    assert!(w.fake.calls("status") >= 6);
}
