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

mod fake_backend_conformance {
    use kinetic_testkit::FakeBackendHarness;

    kinetic_testkit::backend_conformance_tests! {
        #[tokio::test]
        harness = FakeBackendHarness::default();
        skips = [
            "submit_batch_runs_every_input_as_its_child",
            "a_cancelled_batch_reports_no_input_running",
            "a_batch_in_blocks_runs_and_retries_each_input_as_its_child",
        ];
    }
}

/// A skip the test does not expect fails it, and so does an expected skip
/// of a case the backend declares what it needs for: skips are asserted,
/// not thrown away.
#[tokio::test]
async fn named_cases_assert_their_skips() {
    let less = FakeBackendHarness::with_capabilities(
        BackendCapabilities::single_host().with_cancel(false),
    );
    let unexpected = std::panic::AssertUnwindSafe(conformance::backend::run_case(
        &less,
        "cancel_stops_a_running_job",
        &[],
    ))
    .catch_unwind()
    .await;
    assert!(unexpected.is_err(), "an unexpected skip must fail");
    assert!(
        !conformance::backend::run_case(
            &less,
            "cancel_stops_a_running_job",
            &["cancel_stops_a_running_job"]
        )
        .await,
        "an expected skip is reported as not run"
    );
    let full = FakeBackendHarness::default();
    let wrong = std::panic::AssertUnwindSafe(conformance::backend::run_case(
        &full,
        "cancel_stops_a_running_job",
        &["cancel_stops_a_running_job"],
    ))
    .catch_unwind()
    .await;
    assert!(
        wrong.is_err(),
        "an expected skip of a case that applies must fail"
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
            (
                "submit_batch_runs_every_input_as_its_child",
                "indexed_batches"
            ),
            (
                "a_cancelled_batch_reports_no_input_running",
                "indexed_batches"
            ),
            (
                "a_batch_in_blocks_runs_and_retries_each_input_as_its_child",
                "batch_blocks"
            ),
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

/// The suite fails a backend that declares `indexed_batches` but does not
/// run a batch from one call (the fake answers `Unsupported`).
#[tokio::test]
async fn the_backend_suite_fails_a_backend_that_overstates_indexed_batches() {
    let overstated = FakeBackendHarness::with_capabilities(
        BackendCapabilities::single_host().with_indexed_batches(true),
    );
    let outcome = std::panic::AssertUnwindSafe(conformance::backend::run_case(
        &overstated,
        "submit_batch_runs_every_input_as_its_child",
        &[],
    ))
    .catch_unwind()
    .await;
    let message = outcome
        .expect_err("declaring indexed_batches without running batches must fail the case")
        .downcast::<String>()
        .map(|m| *m)
        .unwrap_or_default();
    assert!(message.contains("submit_batch"), "{message}");
}

/// A harness that says it counts the backend's calls but whose count never
/// moves fails the group case: the bound on a poll's cost would hold for
/// nothing.
#[tokio::test]
async fn the_backend_suite_fails_a_harness_whose_count_never_moves() {
    let stuck = StuckCounter(FakeBackendHarness::default());
    let outcome = std::panic::AssertUnwindSafe(
        conformance::backend::group_status_reports_the_group_in_one_call(&stuck),
    )
    .catch_unwind()
    .await;
    let message = outcome
        .expect_err("a count that never moves must fail the case")
        .downcast::<String>()
        .map(|m| *m)
        .unwrap_or_default();
    assert!(message.contains("yet none was counted"), "{message}");
    // The same fake, its calls counted, passes.
    conformance::backend::group_status_reports_the_group_in_one_call(
        &FakeBackendHarness::default(),
    )
    .await;
}

/// The fake, with a call count that stays at zero.
struct StuckCounter(FakeBackendHarness);

#[async_trait::async_trait]
impl BackendHarness for StuckCounter {
    fn backend(&self) -> Arc<dyn Backend> {
        self.0.backend()
    }

    fn store(&self) -> Arc<dyn ObjectStore> {
        self.0.store()
    }

    fn system_calls(&self) -> Option<u64> {
        Some(0)
    }

    async fn prepare(&self, job: ConformanceJob, env: CapturedEnv) -> PreparedJob {
        self.0.prepare(job, env).await
    }
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

mod fake_image_builder_conformance {
    use super::FakeImages;
    use kinetic_testkit::FakeImageBuilder;

    kinetic_testkit::image_builder_conformance_tests! {
        #[tokio::test]
        harness = FakeImages(
            FakeImageBuilder::new("us-docker.pkg.dev/p/kn-c")
                .with_build_time(std::time::Duration::from_millis(20)),
        );
        skips = [
            "a_builder_that_cannot_build_never_builds",
            "requirements_it_cannot_bake_in_are_refused",
        ];
    }
}
