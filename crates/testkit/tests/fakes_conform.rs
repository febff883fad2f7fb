//! The fakes pass the conformance suites every adapter runs.

use std::sync::Arc;

use futures_util::FutureExt;
use kinetic_core::env::CapturedEnv;
use kinetic_core::ports::{
    Backend, BackendCapabilities, BackendError, ImageBuilder, ObjectStore, PreparedJob,
};
use kinetic_engine::layers::FaultyBackend;
use kinetic_testkit::conformance::backend::BackendHarness;
use kinetic_testkit::conformance::image_builder::ImageBuilderHarness;
use kinetic_testkit::{ConformanceJob, FakeBackendHarness, FakeImageBuilder, conformance};

#[tokio::test]
async fn fake_backend_conforms() {
    let report = conformance::backend::run(&FakeBackendHarness::default()).await;
    assert!(report.skipped.is_empty(), "{report:?}");
    assert!(
        report
            .ran
            .contains(&"group_status_reports_the_group_in_one_call")
    );
}

/// A backend that declares less runs only the cases it declares, each
/// skipped case names the capability that excludes it, and the calls it
/// does not declare answer `Unsupported` (the suite checks that too).
#[tokio::test]
async fn the_backend_suite_runs_what_a_backend_declares() {
    let caps = BackendCapabilities::single_host()
        .with_group_status(false)
        .with_cancel(false)
        .with_logs(true, false);
    let report = conformance::backend::run(&FakeBackendHarness::with_capabilities(caps)).await;
    assert_eq!(
        report.skipped,
        vec![
            ("follow_logs_streams_every_line_and_ends", "follow_logs"),
            ("cancel_stops_a_running_job", "cancel"),
            ("group_status_reports_the_group_in_one_call", "group_status"),
        ]
    );
    assert!(
        report
            .ran
            .contains(&"logs_hold_the_output_and_tail_the_end")
    );
    assert!(
        report
            .ran
            .contains(&"undeclared_capabilities_are_unsupported")
    );
}

/// The suite fails a backend that declares a capability it lacks: here
/// the fake declares `group_status`, but its calls answer `Unsupported`.
#[tokio::test]
async fn the_backend_suite_fails_a_backend_that_overstates_its_capabilities() {
    let inner = FakeBackendHarness::default();
    let faulty = FaultyBackend::new(Arc::new(inner.backend.clone()));
    faulty.faults().fail_on(
        "group_status",
        0,
        BackendError::unsupported("no group status after all"),
    );
    let overstated = Overstated { inner, faulty };
    let outcome = std::panic::AssertUnwindSafe(
        conformance::backend::group_status_reports_the_group_in_one_call(&overstated),
    )
    .catch_unwind()
    .await;
    assert!(
        outcome.is_err(),
        "declaring group_status without it must fail the case"
    );
}

/// The fake, declaring what it declares, behind scripted faults.
struct Overstated {
    inner: FakeBackendHarness,
    faulty: FaultyBackend,
}

#[async_trait::async_trait]
impl BackendHarness for Overstated {
    fn backend(&self) -> Arc<dyn Backend> {
        Arc::new(self.faulty.clone())
    }

    fn store(&self) -> Arc<dyn ObjectStore> {
        self.inner.store()
    }

    async fn prepare(&self, job: ConformanceJob, env: CapturedEnv) -> PreparedJob {
        self.inner.prepare(job, env).await
    }
}

struct FakeImages(FakeImageBuilder);

impl ImageBuilderHarness for FakeImages {
    fn builder(&self) -> Arc<dyn ImageBuilder> {
        Arc::new(self.0.clone())
    }

    fn builds(&self) -> u64 {
        self.0.builds()
    }
}

#[tokio::test]
async fn fake_image_builder_conforms() {
    let fake = FakeImageBuilder::new("us-docker.pkg.dev/p/kn-c")
        .with_build_time(std::time::Duration::from_millis(20));
    conformance::image_builder::run(&FakeImages(fake)).await;
}
