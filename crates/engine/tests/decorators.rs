//! The decorators beside each port pass that port's conformance suite
//! around the in-memory fakes, and do what they add: scripted failures and
//! latency, retries up to a budget and never of what was already retried,
//! one fixed image that refuses requirements it cannot bake in, an image
//! builder made on first use.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use kinetic_core::env::CapturedEnv;
use kinetic_core::ports::{
    Backend, BackendError, BuildError, FixedImage, GetOptions, ImageBuilder, ImageCapabilities,
    ImageMode, ImageRequest, ObjectPath, ObjectStore, PreparedJob, PutOptions, StoreError,
};
use kinetic_core::retry::{Backoff, RetryPolicy};
use kinetic_engine::layers::{
    FaultyBackend, FaultyImageBuilder, FaultyStore, LazyImageBuilder, RetryBackend,
};
use kinetic_engine::{Engine, EngineError, EngineSettings, Entrypoint, JobSpec, ResultOptions};
use kinetic_testkit::conformance::backend::BackendHarness;
use kinetic_testkit::conformance::image_builder::ImageBuilderHarness;
use kinetic_testkit::{ConformanceJob, FakeBackendHarness, FakeImageBuilder, MemoryStore, Outcome};

const REGISTRY: &str = "us-docker.pkg.dev/p/kn-c";

fn unavailable() -> StoreError {
    StoreError::unavailable("scripted")
}

// ObjectStore

mod faulty_store_conformance {
    use super::*;

    kinetic_testkit::object_store_conformance_tests! {
        #[tokio::test]
        store = FaultyStore::new(Arc::new(MemoryStore::new()));
    }
}

#[tokio::test]
async fn faulty_store_fails_the_scripted_calls_only() {
    let memory = MemoryStore::new();
    let store = FaultyStore::new(Arc::new(memory.clone()));
    let p = ObjectPath::parse("a/b").unwrap();
    store.faults().fail_next(unavailable());
    let err = store
        .put(&p, Bytes::from_static(b"x"), PutOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_retryable());
    assert!(
        memory.snapshot().is_empty(),
        "a failed call never reached the store"
    );
    store
        .put(&p, Bytes::from_static(b"x"), PutOptions::default())
        .await
        .unwrap();

    // The third get fails; the others, and other methods, pass.
    store
        .faults()
        .fail_on("get", 2, StoreError::permission_denied("no"));
    for _ in 0..2 {
        store.get(&p, GetOptions::default()).await.unwrap();
    }
    store.head(&p).await.unwrap();
    let err = store.get(&p, GetOptions::default()).await.unwrap_err();
    assert!(
        matches!(err, StoreError::PermissionDenied { .. }),
        "{err:?}"
    );
    store.get(&p, GetOptions::default()).await.unwrap();

    // delete_prefix is a call of its own, forwarded to the inner store.
    store.faults().fail_on("delete_prefix", 0, unavailable());
    let prefix = ObjectPath::parse("a").unwrap();
    assert!(store.delete_prefix(&prefix).await.is_err());
    assert_eq!(store.delete_prefix(&prefix).await.unwrap(), 1);
    assert_eq!(store.uri(&p), memory.uri(&p));
}

#[tokio::test(start_paused = true)]
async fn faulty_store_adds_latency_to_every_call() {
    let store = FaultyStore::new(Arc::new(MemoryStore::new()));
    store.faults().set_latency(Duration::from_millis(300));
    let start = tokio::time::Instant::now();
    store.list(None).await.unwrap();
    assert!(start.elapsed() >= Duration::from_millis(300));
    store.faults().clear();
    let start = tokio::time::Instant::now();
    store.list(None).await.unwrap();
    assert!(start.elapsed() < Duration::from_millis(300));
}

// Backend

/// The fake backend's harness, with the backend under test decorated:
/// fault injection around the fake, and retries around that when asked.
struct FaultyHarness {
    fake: FakeBackendHarness,
    backend: FaultyBackend,
    outer: Arc<dyn Backend>,
}

impl FaultyHarness {
    fn new() -> Self {
        let fake = FakeBackendHarness::default();
        let backend = FaultyBackend::new(Arc::new(fake.backend.clone()));
        let outer = Arc::new(backend.clone());
        Self {
            fake,
            backend,
            outer,
        }
    }

    /// The faulty fake behind a [`RetryBackend`] with `policy`.
    fn retried(policy: RetryPolicy) -> Self {
        let mut h = Self::new();
        h.outer = Arc::new(RetryBackend::new(Arc::new(h.backend.clone()), policy));
        h
    }
}

#[async_trait]
impl BackendHarness for FaultyHarness {
    fn backend(&self) -> Arc<dyn Backend> {
        self.outer.clone()
    }

    fn store(&self) -> Arc<dyn ObjectStore> {
        self.fake.store()
    }

    async fn prepare(&self, job: ConformanceJob, env: CapturedEnv) -> PreparedJob {
        self.fake.prepare(job, env).await
    }

    fn system_calls(&self) -> Option<u64> {
        self.fake.system_calls()
    }
}

mod faulty_backend_conformance {
    use super::*;

    kinetic_testkit::backend_conformance_tests! {
        #[tokio::test]
        harness = FaultyHarness::new();
        skips = [
            "submit_batch_runs_every_input_as_its_child",
            "a_cancelled_batch_reports_no_input_running",
            "a_batch_in_blocks_runs_and_retries_each_input_as_its_child",
        ];
    }
}

#[tokio::test]
async fn faulty_backend_fails_the_scripted_calls_only() {
    let h = FaultyHarness::new();
    let backend = h.backend();
    assert_eq!(backend.name(), "fake");
    assert_eq!(backend.capabilities(), h.fake.backend.capabilities());
    let job = h
        .prepare(ConformanceJob::Returns42, CapturedEnv::default())
        .await;
    h.backend
        .faults()
        .fail_on("submit", 0, BackendError::unavailable("scripted"));
    let err = backend.submit(&job).await.unwrap_err();
    assert!(err.is_retryable(), "{err:?}");
    assert_eq!(h.fake.backend.submits(), 0, "the fake never saw the call");
    backend.submit(&job).await.unwrap();
    assert_eq!(h.fake.backend.submits(), 1);
    h.backend
        .faults()
        .fail_next(BackendError::permission_denied("scripted"));
    assert!(matches!(
        backend.list().await,
        Err(BackendError::PermissionDenied { .. })
    ));
    assert_eq!(backend.list().await.unwrap(), vec![job.record.job_id]);
}

// Retries

fn quick(attempts: u32) -> RetryPolicy {
    RetryPolicy::new(
        attempts,
        Backoff::new(Duration::from_millis(1), Duration::from_millis(4)),
    )
}

mod retry_backend_conformance {
    use super::*;

    kinetic_testkit::backend_conformance_tests! {
        #[tokio::test]
        harness = FaultyHarness::retried(quick(3));
        skips = [
            "submit_batch_runs_every_input_as_its_child",
            "a_cancelled_batch_reports_no_input_running",
            "a_batch_in_blocks_runs_and_retries_each_input_as_its_child",
        ];
    }
}

#[tokio::test]
async fn retry_backend_absorbs_a_scripted_outage() {
    let h = FaultyHarness::retried(quick(3));
    h.backend
        .faults()
        .fail_next(BackendError::unavailable("scripted"));
    assert!(h.backend().list().await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_retryable_backend_error_is_retried_exactly_up_to_its_budget() {
    let h = FaultyHarness::retried(RetryPolicy::new(
        4,
        Backoff::new(Duration::from_millis(100), Duration::from_secs(1)),
    ));
    for _ in 0..10 {
        h.backend
            .faults()
            .fail_next(BackendError::unavailable("the API server is restarting"));
    }
    let started = tokio::time::Instant::now();
    let err = h.backend().list().await.unwrap_err();
    assert_eq!(h.backend.faults().calls("list"), 4, "exactly the budget");
    assert!(err.is_retryable() && err.is_retried(), "{err:?}");
    assert!(
        err.to_string().contains("gave up after 4 attempts"),
        "{err}"
    );
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(100 + 200 + 400),
        "the backoff between attempts"
    );
    h.backend.faults().clear();

    // Within the budget the call succeeds.
    let before = h.backend.faults().calls("list");
    for _ in 0..2 {
        h.backend
            .faults()
            .fail_next(BackendError::unavailable("blip"));
    }
    assert!(h.backend().list().await.is_ok());
    assert_eq!(h.backend.faults().calls("list") - before, 3);
}

#[tokio::test(start_paused = true)]
async fn errors_already_retried_or_not_worth_retrying_are_tried_once() {
    let h = FaultyHarness::retried(quick(5));
    // A store error object_store already retried, met by a backend: the
    // backend's error says so, and the decorator does not retry it again.
    let store_retried = StoreError::Unavailable {
        message: "gs://b/job-1/result.json: HTTP 503".into(),
        retried: true,
        source: None,
    };
    let cases = [
        BackendError::from_store("reading the job's log", store_retried),
        BackendError::Unavailable {
            message: "retried below".into(),
            retried: true,
            source: None,
        },
        BackendError::permission_denied("jobs.batch is forbidden"),
        BackendError::not_found("fake", "job-00000001"),
    ];
    for error in cases {
        let before = h.backend.faults().calls("list");
        h.backend.faults().fail_next(error);
        let err = h.backend().list().await.unwrap_err();
        assert_eq!(
            h.backend.faults().calls("list") - before,
            1,
            "tried once: {err:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_engine_retries_backend_calls_once_through_its_decorator() {
    let fake = FakeBackendHarness::default();
    let faulty = FaultyBackend::new(Arc::new(fake.backend.clone()));
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("work.py"), "def f():\n    return 1\n").unwrap();
    let engine = Engine::builder()
        .settings(EngineSettings::default().with_cwd(project.path()))
        .store(Arc::new(fake.store.clone()))
        .backend(Arc::new(faulty.clone()))
        .default_backend("fake")
        .retry(quick(3))
        .build()
        .unwrap();
    assert!(
        engine.backends().get("fake").unwrap().list().await.is_ok(),
        "the registered backend answers through the engine"
    );
    let spec = || JobSpec::new(Entrypoint::parse("work:f").unwrap());

    // Two failed polls: absorbed, the value comes back.
    fake.backend
        .push_outcome(Outcome::Succeed(serde_json::json!(1)));
    let handle = engine.submit(spec()).await.unwrap();
    faulty
        .faults()
        .fail_on("status", 0, BackendError::unavailable("blip"));
    faulty
        .faults()
        .fail_on("status", 0, BackendError::unavailable("blip"));
    let value = handle.result(ResultOptions::default()).await.unwrap();
    assert_eq!(value, serde_json::json!(1));

    // Polls that keep failing: the wait ends after exactly the budget,
    // with an error that says it was retried; nothing retries it again.
    let handle = engine.submit(spec()).await.unwrap();
    for _ in 0..10 {
        faulty
            .faults()
            .fail_on("status", 0, BackendError::unavailable("down"));
    }
    let before = faulty.faults().calls("status");
    let err = handle.result(ResultOptions::default()).await.unwrap_err();
    assert_eq!(faulty.faults().calls("status") - before, 3);
    assert!(
        matches!(err, EngineError::Unavailable { retried: true, .. }),
        "{err:?}"
    );
}

// ImageBuilder

/// A builder under test, and the fake that does its builds, if any.
struct Images {
    builder: Arc<dyn ImageBuilder>,
    fake: Option<FakeImageBuilder>,
}

impl ImageBuilderHarness for Images {
    fn builder(&self) -> Arc<dyn ImageBuilder> {
        self.builder.clone()
    }

    fn builds(&self) -> u64 {
        self.fake.as_ref().map_or(0, FakeImageBuilder::builds)
    }
}

fn fake_images() -> FakeImageBuilder {
    FakeImageBuilder::new(REGISTRY).with_build_time(Duration::from_millis(20))
}

fn bundled(requirements: Option<&str>) -> ImageRequest {
    ImageRequest::new(
        ImageMode::Bundled,
        "python:3.11-slim".into(),
        "cpu".into(),
        requirements.map(str::to_owned),
        "print('runner')\n".into(),
        "FROM $base_image\n".into(),
    )
}

#[test]
fn a_fixed_image_declares_it_cannot_build() {
    let fixed = FixedImage::new("registry.example/team/job:1").unwrap();
    assert_eq!(fixed.capabilities(), ImageCapabilities::fixed());
}

mod fixed_image_conformance {
    use super::*;

    kinetic_testkit::image_builder_conformance_tests! {
        #[tokio::test]
        harness = Images {
            builder: Arc::new(FixedImage::new("registry.example/team/job:1").unwrap()),
            fake: None,
        };
        skips = [
            "an_existing_image_is_not_rebuilt",
            "inputs_change_the_image",
            "concurrent_equal_requests_build_once",
        ];
    }
}

#[tokio::test]
async fn fixed_image_refuses_requirements_naming_the_setting_and_the_alternative() {
    let fixed = FixedImage::new(" registry.example/team/job:1 ")
        .unwrap()
        .with_origin("KINETIC_IMAGE");
    assert_eq!(fixed.uri(), "registry.example/team/job:1");
    let err = fixed
        .resolve(&bundled(Some("numpy==2.0\n# a comment\npandas\n")))
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, BuildError::Unsupported { .. }), "{err:?}");
    for want in [
        "registry.example/team/job:1",
        "KINETIC_IMAGE",
        "2 requirement line(s)",
        "--container-image prebuilt",
        "unset KINETIC_IMAGE",
    ] {
        assert!(message.contains(want), "{want:?} missing from: {message}");
    }
    // Comments and blank lines are nothing to bake in.
    let image = fixed
        .resolve(&bundled(Some("# nothing\n\n")))
        .await
        .unwrap();
    assert_eq!(image.uri, "registry.example/team/job:1");
    assert!(FixedImage::new("  ").is_err(), "an empty URI is refused");
}

fn lazy_images() -> Images {
    let fake = fake_images();
    let inner = fake.clone();
    let lazy = LazyImageBuilder::new(ImageCapabilities::building(), move || {
        let inner = inner.clone();
        async move { Ok(Arc::new(inner) as Arc<dyn ImageBuilder>) }
    });
    Images {
        builder: Arc::new(lazy),
        fake: Some(fake),
    }
}

mod lazy_builder_conformance {
    use super::*;

    kinetic_testkit::image_builder_conformance_tests! {
        #[tokio::test]
        harness = lazy_images();
        skips = [
            "a_builder_that_cannot_build_never_builds",
            "requirements_it_cannot_bake_in_are_refused",
        ];
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lazy_builder_makes_its_builder_once_on_first_use() {
    let made = Arc::new(AtomicU64::new(0));
    let count = made.clone();
    let lazy = Arc::new(LazyImageBuilder::new(
        ImageCapabilities::building(),
        move || {
            count.fetch_add(1, Ordering::SeqCst);
            async {
                // Slow enough for the concurrent first calls to overlap.
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(Arc::new(fake_images()) as Arc<dyn ImageBuilder>)
            }
        },
    ));
    assert_eq!(made.load(Ordering::SeqCst), 0, "nothing is made up front");
    assert!(!lazy.is_ready());
    let calls = (0..8).map(|_| {
        let lazy = lazy.clone();
        tokio::spawn(async move { lazy.resolve(&bundled(Some("numpy\n"))).await })
    });
    for call in futures_util::future::join_all(calls).await {
        call.unwrap().unwrap();
    }
    assert_eq!(made.load(Ordering::SeqCst), 1, "made once for all callers");
    assert!(lazy.is_ready());
}

#[tokio::test]
async fn a_failed_construction_fails_that_call_and_is_tried_again() {
    let attempts = Arc::new(AtomicU64::new(0));
    let count = attempts.clone();
    let lazy = LazyImageBuilder::new(ImageCapabilities::building(), move || {
        let n = count.fetch_add(1, Ordering::SeqCst);
        async move {
            if n == 0 {
                Err(BuildError::permission_denied("no credentials yet"))
            } else {
                Ok(Arc::new(fake_images()) as Arc<dyn ImageBuilder>)
            }
        }
    });
    let err = lazy.resolve(&bundled(None)).await.unwrap_err();
    assert!(err.to_string().contains("no credentials yet"), "{err}");
    assert!(!lazy.is_ready(), "a failure is not kept");
    lazy.resolve(&bundled(None)).await.unwrap();
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}

fn faulty_images() -> Images {
    let fake = fake_images();
    Images {
        builder: Arc::new(FaultyImageBuilder::new(Arc::new(fake.clone()))),
        fake: Some(fake),
    }
}

mod faulty_image_builder_conformance {
    use super::*;

    kinetic_testkit::image_builder_conformance_tests! {
        #[tokio::test]
        harness = faulty_images();
        skips = [
            "a_builder_that_cannot_build_never_builds",
            "requirements_it_cannot_bake_in_are_refused",
        ];
    }
}

#[tokio::test]
async fn faulty_image_builder_fails_the_scripted_calls_only() {
    let fake = fake_images();
    let images = FaultyImageBuilder::new(Arc::new(fake.clone()));
    assert_eq!(images.capabilities(), fake.capabilities());
    images
        .faults()
        .fail_on("resolve", 1, BuildError::unavailable("scripted"));
    let request = bundled(Some("numpy\n"));
    let first = images.resolve(&request).await.unwrap();
    let err = images.resolve(&request).await.unwrap_err();
    assert!(err.is_retryable(), "{err:?}");
    let third = images.resolve(&request).await.unwrap();
    assert_eq!(third.uri, first.uri);
    assert_eq!(fake.builds(), 1);
}
