//! Conformance suite of the `Backend` port.
//!
//! A [`BackendHarness`] gives the suite a backend, the store its runner
//! reads and writes, and a way to prepare jobs ([`ConformanceJob`]s): real
//! Python for backends that run the real runner, scripted outcomes for the
//! fake. [`run`] then checks every sentence of the port's contract that
//! applies to what the backend declares ([`BackendCapabilities`](kinetic_core::ports::BackendCapabilities)): a case
//! whose capability is not declared is skipped, and the [`Report`] names
//! the capability that excluded it; the calls of an undeclared capability
//! must answer `Unsupported`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures_util::StreamExt;
use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_core::env::{CapturedEnv, EnvEntry, EnvSnapshot, SecretValue, capture};
use kinetic_core::ids::{GroupId, JobId};
use kinetic_core::ports::{
    Backend, BackendError, BatchEnd, CleanupWait, GetOptions, GroupQuery, LogOptions, ObjectStore,
    PreparedBatch, PreparedJob,
};
use kinetic_core::protocol::RunnerResult;
use kinetic_core::record::JobRecord;
use kinetic_core::status::{JobState, JobStatus};
use sha2::Digest;

use crate::python_job::ConformanceJob;

/// What the suite needs from the backend under test.
#[async_trait]
pub trait BackendHarness: Send + Sync {
    /// The backend under test.
    fn backend(&self) -> Arc<dyn Backend>;
    /// The store its jobs read and write.
    fn store(&self) -> Arc<dyn ObjectStore>;
    /// Write `job` to the store (and script it, for a fake) and return it ready to submit.
    async fn prepare(&self, job: ConformanceJob, env: CapturedEnv) -> PreparedJob;
    /// The longest a job may take to end.
    fn patience(&self) -> Duration {
        Duration::from_secs(60)
    }
    /// Calls the backend has made so far to the system under it
    /// (Kubernetes API requests, a fake's answered calls, the calls that
    /// reach the local backend's store through a
    /// [`CountingStore`](crate::CountingStore)), when the harness can count
    /// them; the suite then checks that the count moves while jobs run and
    /// end, and that the cost of a `group_status` poll does not grow with
    /// the group. `None` (the default) when they cannot be counted.
    fn system_calls(&self) -> Option<u64> {
        None
    }
    /// Whether a job that ignores SIGTERM ([`ConformanceJob::IgnoresStop`])
    /// takes a grace period to stop, as a process or a pod does (the
    /// default): a short `cleanup` must then answer `NotConfirmed`. `false`
    /// for a backend whose jobs stop at once (tasks aborted in-process),
    /// whose short `cleanup` must then succeed.
    fn stops_take_a_grace_period(&self) -> bool {
        true
    }
    /// A batch of `values.len()` inputs ready for
    /// [`Backend::submit_batch`] (its spec, inputs and shared artifacts
    /// in the store), whose input `i` returns `values[i]`, run at most
    /// `parallelism` at once. Only the harness of a backend that declares
    /// `indexed_batches` is asked; the default panics saying so.
    async fn prepare_batch(&self, values: &[i64], parallelism: usize) -> PreparedBatch {
        let _ = (values, parallelism);
        panic!(
            "the backend declares indexed_batches, so its harness MUST implement BackendHarness::prepare_batch"
        )
    }
    /// A batch of `inputs` inputs ready for [`Backend::submit_batch`],
    /// each of which sleeps until it is stopped
    /// ([`ConformanceJob::Sleeps`]), all run at once. Asked, as
    /// [`BackendHarness::prepare_batch`] is, only of a backend that
    /// declares `indexed_batches`.
    async fn prepare_sleeping_batch(&self, inputs: usize) -> PreparedBatch {
        let _ = inputs;
        panic!(
            "the backend declares indexed_batches, so its harness MUST implement BackendHarness::prepare_sleeping_batch"
        )
    }
    /// A batch in blocks of `block_size` inputs
    /// ([`PreparedBatch::block_size`]) whose input `i` calls the
    /// conformance module's `flaky(*calls[i])` (it ends its process on its
    /// attempts up to `dies_until`), each retried `retries` times, at most
    /// `parallelism` at once. Asked only of a backend that declares
    /// `batch_blocks`.
    async fn prepare_batch_in_blocks(
        &self,
        calls: Vec<Vec<serde_json::Value>>,
        parallelism: usize,
        retries: u32,
        block_size: usize,
    ) -> PreparedBatch {
        let _ = (calls, parallelism, retries, block_size);
        panic!(
            "the backend declares batch_blocks, so its harness MUST implement BackendHarness::prepare_batch_in_blocks"
        )
    }
}

/// Every case of the suite, in the order [`run`] runs them, with the
/// capability each needs (`None`: every backend runs it). The
/// [`backend_conformance_tests!`](crate::backend_conformance_tests) macro
/// makes one named test of each.
pub const CASES: &[(&str, Option<&str>)] = &[
    ("checks_follow_the_capabilities", None),
    ("runs_a_job_to_its_value", None),
    ("reports_a_failed_job", None),
    ("submit_is_idempotent", None),
    ("unknown_jobs_are_not_found", None),
    ("cleanup_forgets_the_job", None),
    ("cleanup_waits_no_longer_than_asked", None),
    ("a_job_ending_is_announced_by_its_changes", None),
    ("env_reaches_the_job_and_nowhere_else", None),
    ("logs_hold_the_output_and_tail_the_end", Some("logs")),
    (
        "follow_logs_streams_every_line_and_ends",
        Some("follow_logs"),
    ),
    ("cancel_stops_a_running_job", Some("cancel")),
    (
        "group_status_reports_the_group_in_one_call",
        Some("group_status"),
    ),
    (
        "submit_batch_runs_every_input_as_its_child",
        Some("indexed_batches"),
    ),
    (
        "a_cancelled_batch_reports_no_input_running",
        Some("indexed_batches"),
    ),
    (
        "a_batch_in_blocks_runs_and_retries_each_input_as_its_child",
        Some("batch_blocks"),
    ),
    ("undeclared_capabilities_are_unsupported", None),
];

/// Which cases ran and which were skipped, with the capability each
/// skipped case needs and the backend does not declare.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Report {
    /// Cases that ran (and passed: a failing case panics).
    pub ran: Vec<&'static str>,
    /// Cases skipped, with the capability that excluded each.
    pub skipped: Vec<(&'static str, &'static str)>,
}

/// Whether `caps` declares the capability a case needs.
fn declares(caps: &kinetic_core::ports::BackendCapabilities, capability: &str) -> bool {
    match capability {
        "logs" => caps.logs,
        "follow_logs" => caps.follow_logs,
        "cancel" => caps.cancel,
        "group_status" => caps.group_status,
        "indexed_batches" => caps.indexed_batches,
        "batch_blocks" => caps.batch_blocks,
        other => panic!("the suite names an unknown capability {other:?}"),
    }
}

/// Run the case named `name`, or skip it when it needs a capability the
/// backend does not declare. The skip is asserted: `expected_skips` names
/// the cases the adapter's test expects to be skipped, and a case skipped
/// that it does not name — or one it names that runs — fails the test, so
/// a backend that stops declaring a capability (or starts to) is noticed.
/// Returns whether the case ran.
///
/// # Panics
/// When the case fails, when `name` is no case of [`CASES`], or when the
/// skip does not match `expected_skips`.
pub async fn run_case(h: &dyn BackendHarness, name: &str, expected_skips: &[&str]) -> bool {
    let &(_, needs) = CASES
        .iter()
        .find(|(case, _)| *case == name)
        .unwrap_or_else(|| panic!("no conformance case named {name}"));
    let caps = h.backend().capabilities();
    if let Some(capability) = needs
        && !declares(&caps, capability)
    {
        assert!(
            expected_skips.contains(&name),
            "{name} is skipped (the backend does not declare '{capability}'), but the test does not expect that skip"
        );
        eprintln!(
            "conformance: skipped {name}: the backend does not declare the '{capability}' capability"
        );
        return false;
    }
    assert!(
        !expected_skips.contains(&name),
        "the test expects {name} to be skipped, but the backend declares what it needs"
    );
    dispatch(h, name).await;
    true
}

async fn dispatch(h: &dyn BackendHarness, name: &str) {
    match name {
        "checks_follow_the_capabilities" => checks_follow_the_capabilities(h).await,
        "runs_a_job_to_its_value" => runs_a_job_to_its_value(h).await,
        "reports_a_failed_job" => reports_a_failed_job(h).await,
        "submit_is_idempotent" => submit_is_idempotent(h).await,
        "unknown_jobs_are_not_found" => unknown_jobs_are_not_found(h).await,
        "cleanup_forgets_the_job" => cleanup_forgets_the_job(h).await,
        "cleanup_waits_no_longer_than_asked" => cleanup_waits_no_longer_than_asked(h).await,
        "a_job_ending_is_announced_by_its_changes" => {
            a_job_ending_is_announced_by_its_changes(h).await;
        }
        "env_reaches_the_job_and_nowhere_else" => env_reaches_the_job_and_nowhere_else(h).await,
        "logs_hold_the_output_and_tail_the_end" => logs_hold_the_output_and_tail_the_end(h).await,
        "follow_logs_streams_every_line_and_ends" => {
            follow_logs_streams_every_line_and_ends(h).await;
        }
        "cancel_stops_a_running_job" => cancel_stops_a_running_job(h).await,
        "group_status_reports_the_group_in_one_call" => {
            group_status_reports_the_group_in_one_call(h).await;
        }
        "submit_batch_runs_every_input_as_its_child" => {
            submit_batch_runs_every_input_as_its_child(h).await;
        }
        "a_cancelled_batch_reports_no_input_running" => {
            a_cancelled_batch_reports_no_input_running(h).await;
        }
        "a_batch_in_blocks_runs_and_retries_each_input_as_its_child" => {
            a_batch_in_blocks_runs_and_retries_each_input_as_its_child(h).await;
        }
        "undeclared_capabilities_are_unsupported" => {
            undeclared_capabilities_are_unsupported(h).await;
        }
        other => panic!("no conformance case named {other}"),
    }
}

/// Run every case the backend's capabilities call for, and the check that
/// each undeclared capability is refused, in one go; returns what ran and
/// what was skipped (and why). Adapters' test suites use
/// [`backend_conformance_tests!`](crate::backend_conformance_tests)
/// instead, which makes each case its own named test; this serves
/// callers that want the whole report at once.
pub async fn run(h: &dyn BackendHarness) -> Report {
    let caps = h.backend().capabilities();
    let mut report = Report::default();
    for &(name, needs) in CASES {
        match needs {
            Some(capability) if !declares(&caps, capability) => {
                eprintln!(
                    "conformance: skipped {name}: the backend does not declare the '{capability}' capability"
                );
                report.skipped.push((name, capability));
            }
            _ => {
                dispatch(h, name).await;
                report.ran.push(name);
            }
        }
    }
    report
}

fn no_env() -> CapturedEnv {
    capture(&[], &EnvSnapshot::new()).expect("an empty capture")
}

/// Poll until the job is terminal; panics after the harness's patience.
pub async fn wait_terminal(h: &dyn BackendHarness, record: &JobRecord) -> JobState {
    let deadline = Instant::now() + h.patience();
    loop {
        let state = h.backend().status(record).await.expect("status");
        if state.status.is_terminal() {
            return state;
        }
        assert!(
            Instant::now() < deadline,
            "job {} not terminal after {:?}: {state:?}",
            record.job_id,
            h.patience()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn result_of(h: &dyn BackendHarness, record: &JobRecord) -> RunnerResult {
    let path = kinetic_core::layout::result(&record.job_id);
    let bytes = h
        .store()
        .get(&path, GetOptions::default())
        .await
        .unwrap_or_else(|e| panic!("the job's result.json MUST be in the store: {e}"));
    RunnerResult::from_json(&bytes).expect("a valid result.json")
}

async fn submitted(h: &dyn BackendHarness, job: ConformanceJob) -> PreparedJob {
    let prepared = h.prepare(job, no_env()).await;
    h.backend().submit(&prepared).await.expect("submit");
    prepared
}

/// `check` accepts a CPU job, and refuses with `Unsupported` an
/// accelerator spanning more hosts than the backend declares
/// (`BackendCapabilities::max_hosts`, and one host without
/// `BackendCapabilities::multi_host`).
pub async fn checks_follow_the_capabilities(h: &dyn BackendHarness) {
    let cpu = AcceleratorSpec::parse("cpu").expect("cpu");
    h.backend()
        .check(&cpu)
        .await
        .expect("every backend MUST accept cpu");
    let caps = h.backend().capabilities();
    let max_hosts = if caps.multi_host { caps.max_hosts } else { 1 };
    let beyond = ["v5litepod-16", "v5litepod-256", "v4-4096"]
        .iter()
        .map(|s| AcceleratorSpec::parse(s).expect("a known TPU slice"))
        .find(|a| a.num_hosts() > max_hosts);
    if let Some(accelerator) = beyond {
        let err = h
            .backend()
            .check(&accelerator)
            .await
            .expect_err("an accelerator beyond the declared hosts MUST be refused");
        assert!(
            matches!(err, BackendError::Unsupported { .. }),
            "MUST be Unsupported, got {err:?}"
        );
        assert!(
            err.to_string().contains(&accelerator.to_string()),
            "the refusal MUST name the accelerator: {err}"
        );
    }
}

/// Every call whose capability is not declared answers `Unsupported`.
pub async fn undeclared_capabilities_are_unsupported(h: &dyn BackendHarness) {
    let caps = h.backend().capabilities();
    let job = h.prepare(ConformanceJob::Returns42, no_env()).await;
    let unsupported = |what: &str, result: Result<(), BackendError>| match result {
        Err(BackendError::Unsupported { .. }) => {}
        other => panic!(
            "a backend that does not declare '{what}' MUST answer Unsupported, got {other:?}"
        ),
    };
    if !caps.group_status {
        let query = GroupQuery::new(GroupId::new_random(), job.record.namespace.clone());
        unsupported(
            "group_status",
            h.backend().group_status(&query).await.map(drop),
        );
    }
    if !caps.indexed_batches {
        let group = GroupId::new_random();
        let query = GroupQuery::new(group.clone(), job.record.namespace.clone());
        let batch = PreparedBatch::new(group, job.clone(), "", 1, 1, 0).expect("a valid batch");
        unsupported("submit_batch", h.backend().submit_batch(&batch).await);
        unsupported(
            "end_batch",
            h.backend()
                .end_batch(&query, BatchEnd::Cleanup, CleanupWait::default())
                .await,
        );
    }
    if !caps.logs {
        unsupported(
            "logs",
            h.backend()
                .logs(&job.record, LogOptions::default())
                .await
                .map(drop),
        );
    }
    if !caps.follow_logs {
        unsupported(
            "follow_logs",
            h.backend().follow_logs(&job.record).await.map(drop),
        );
    }
    if !caps.cancel {
        unsupported(
            "cancel",
            h.backend()
                .cancel(&job.record, CleanupWait::default())
                .await,
        );
    }
}

/// A submitted job runs to `SUCCEEDED` and its value lands in `result.json`;
/// a terminal state stays terminal.
pub async fn runs_a_job_to_its_value(h: &dyn BackendHarness) {
    let job = submitted(h, ConformanceJob::Returns42).await;
    let state = wait_terminal(h, &job.record).await;
    assert_eq!(state.status, JobStatus::Succeeded, "{state:?}");
    let result = result_of(h, &job.record).await;
    assert!(result.success);
    assert_eq!(result.value, serde_json::json!(42));
    let again = h.backend().status(&job.record).await.expect("status");
    assert_eq!(
        again.status,
        JobStatus::Succeeded,
        "a terminal state MUST stay terminal"
    );
    let listed = h.backend().list().await.expect("list");
    assert!(
        listed.contains(&job.record.job_id),
        "list MUST name a job the backend holds"
    );
}

/// With a change feed ([`Backend::changes`] answers `Some`), a job that
/// ends after the feed was armed is announced: an item comes after which
/// its terminal state can be read. A backend without one is polled, and
/// has nothing to show here.
pub async fn a_job_ending_is_announced_by_its_changes(h: &dyn BackendHarness) {
    let Some(mut feed) = h.backend().changes() else {
        return;
    };
    let job = submitted(h, ConformanceJob::Returns42).await;
    let deadline = Instant::now() + h.patience();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let item = tokio::time::timeout(left, feed.next())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "job {} ended without an item on the change feed within {:?}",
                    job.record.job_id,
                    h.patience()
                )
            });
        assert!(
            item.is_some(),
            "the change feed MUST NOT end while jobs run"
        );
        let state = h.backend().status(&job.record).await.expect("status");
        if state.status.is_terminal() {
            assert_eq!(state.status, JobStatus::Succeeded, "{state:?}");
            return;
        }
    }
}

/// A job whose function raises ends `FAILED` with the error in `result.json`.
pub async fn reports_a_failed_job(h: &dyn BackendHarness) {
    let job = submitted(h, ConformanceJob::Raises).await;
    let state = wait_terminal(h, &job.record).await;
    assert_eq!(state.status, JobStatus::Failed, "{state:?}");
    let result = result_of(h, &job.record).await;
    assert!(!result.success);
    let error = result.error.expect("a failed result carries an error");
    assert_eq!(error.type_name, "ValueError");
    assert_eq!(error.message, "conformance failure");
    assert_eq!(error.phase.as_deref(), Some("execute"));
    assert!(error.traceback.is_some_and(|t| t.contains("ValueError")));
}

/// Submitting the same job twice succeeds without a second run; the same
/// id with another spec is `AlreadyExists`.
pub async fn submit_is_idempotent(h: &dyn BackendHarness) {
    let job = submitted(h, ConformanceJob::Returns42).await;
    h.backend()
        .submit(&job)
        .await
        .expect("re-submitting the same job MUST succeed");
    let mut other = job.clone();
    other.spec_uri.push_str(".other");
    let err = h
        .backend()
        .submit(&other)
        .await
        .expect_err("another spec under the same id");
    assert!(
        matches!(err, BackendError::AlreadyExists { .. }),
        "MUST be AlreadyExists, got {err:?}"
    );
    let state = wait_terminal(h, &job.record).await;
    assert_eq!(state.status, JobStatus::Succeeded);
}

/// A job never submitted: status `NOT_FOUND` (not an error), logs
/// `NotFound` and cancel succeeds (where declared), cleanup succeeds.
pub async fn unknown_jobs_are_not_found(h: &dyn BackendHarness) {
    let job = h.prepare(ConformanceJob::Returns42, no_env()).await;
    let state = h
        .backend()
        .status(&job.record)
        .await
        .expect("status of an unknown job is not an error");
    assert_eq!(state.status, JobStatus::NotFound);
    let caps = h.backend().capabilities();
    if caps.logs {
        let err = h
            .backend()
            .logs(&job.record, LogOptions::default())
            .await
            .expect_err("logs of an unknown job");
        assert!(
            matches!(err, BackendError::NotFound { .. }),
            "MUST be NotFound, got {err:?}"
        );
    }
    if caps.cancel {
        h.backend()
            .cancel(&job.record, CleanupWait::default())
            .await
            .expect("cancel of an unknown job MUST succeed");
    }
    h.backend()
        .cleanup(&job.record, CleanupWait::default())
        .await
        .expect("cleanup of an unknown job MUST succeed");
}

/// `follow_logs` streams every line of the job's output and ends once the
/// job ended.
pub async fn follow_logs_streams_every_line_and_ends(h: &dyn BackendHarness) {
    let job = submitted(h, ConformanceJob::Prints(3)).await;
    let mut stream = h
        .backend()
        .follow_logs(&job.record)
        .await
        .expect("follow_logs");
    let mut lines = Vec::new();
    let collected = tokio::time::timeout(h.patience(), async {
        while let Some(line) = stream.next().await {
            lines.push(line.expect("log line"));
        }
    })
    .await;
    assert!(
        collected.is_ok(),
        "follow_logs MUST end once the job ended; got {lines:?}"
    );
    for want in ["line 0", "line 1", "line 2"] {
        assert!(
            lines.iter().any(|l| l == want),
            "follow_logs MUST deliver {want:?}; got {lines:?}"
        );
    }
    wait_terminal(h, &job.record).await;
}

/// Logs hold the job's output; `tail(n)` is its last `n` lines.
pub async fn logs_hold_the_output_and_tail_the_end(h: &dyn BackendHarness) {
    let job = submitted(h, ConformanceJob::Prints(3)).await;
    wait_terminal(h, &job.record).await;
    let all = h
        .backend()
        .logs(&job.record, LogOptions::default())
        .await
        .expect("logs");
    assert!(all.contains("line 0") && all.contains("line 2"), "{all}");
    let tail = h
        .backend()
        .logs(&job.record, LogOptions::tail(2))
        .await
        .expect("tail");
    let last_two: Vec<&str> = all
        .lines()
        .rev()
        .take(2)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    assert_eq!(
        tail.lines().collect::<Vec<_>>(),
        last_two,
        "tail(2) MUST be the last two lines of logs()"
    );
}

/// Cancelling a running job makes it terminal; cancelling again succeeds.
pub async fn cancel_stops_a_running_job(h: &dyn BackendHarness) {
    let job = submitted(h, ConformanceJob::Sleeps).await;
    let deadline = Instant::now() + h.patience();
    loop {
        let state = h.backend().status(&job.record).await.expect("status");
        assert!(
            !state.status.is_terminal(),
            "a sleeping job ended by itself: {state:?}"
        );
        if state.status == JobStatus::Running {
            break;
        }
        assert!(Instant::now() < deadline, "job never started: {state:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    h.backend()
        .cancel(&job.record, CleanupWait::default())
        .await
        .expect("cancel");
    let state = wait_terminal(h, &job.record).await;
    assert!(
        matches!(state.status, JobStatus::Failed | JobStatus::NotFound),
        "a cancelled job MUST end FAILED or NOT_FOUND, got {state:?}"
    );
    h.backend()
        .cancel(&job.record, CleanupWait::default())
        .await
        .expect("cancel MUST be idempotent");
}

/// After cleanup the job is `NOT_FOUND` and not listed; cleanup again succeeds.
pub async fn cleanup_forgets_the_job(h: &dyn BackendHarness) {
    let job = submitted(h, ConformanceJob::Returns42).await;
    wait_terminal(h, &job.record).await;
    h.backend()
        .cleanup(&job.record, CleanupWait::default())
        .await
        .expect("cleanup");
    let state = h.backend().status(&job.record).await.expect("status");
    assert_eq!(
        state.status,
        JobStatus::NotFound,
        "after cleanup status MUST be NOT_FOUND"
    );
    assert!(
        !h.backend()
            .list()
            .await
            .expect("list")
            .contains(&job.record.job_id)
    );
    h.backend()
        .cleanup(&job.record, CleanupWait::default())
        .await
        .expect("cleanup MUST be idempotent");
}

/// `cleanup` (and `cancel`) wait no longer than the call allows: a job
/// whose stop takes its whole grace period (it ignores SIGTERM) is not
/// deleted within a short wait, and `cleanup` says so
/// ([`BackendError::NotConfirmed`]) in about that time, not after the
/// backend's own bound; the job stops and goes all the same, and a later
/// `cleanup` that waits long enough confirms it.
pub async fn cleanup_waits_no_longer_than_asked(h: &dyn BackendHarness) {
    let job = submitted(h, ConformanceJob::IgnoresStop).await;
    wait_running(h, &job.record).await;
    if h.backend().capabilities().logs {
        // The job ignores SIGTERM from the moment it says so.
        let deadline = Instant::now() + h.patience();
        loop {
            let text = h
                .backend()
                .logs(&job.record, LogOptions::default())
                .await
                .unwrap_or_default();
            if text.contains("ignoring SIGTERM") {
                break;
            }
            assert!(Instant::now() < deadline, "the job never started: {text}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let short = CleanupWait::new(Duration::from_millis(300), Duration::from_millis(50));
    // "About that time": the wait, plus a request or two to the system.
    let bound = short.timeout + Duration::from_secs(3);
    let started = Instant::now();
    let answer = h.backend().cleanup(&job.record, short).await;
    let took = started.elapsed();
    if h.stops_take_a_grace_period() {
        assert!(
            matches!(answer, Err(BackendError::NotConfirmed { .. })),
            "a deletion not confirmed within the wait MUST be NotConfirmed, got {answer:?} after {took:?}"
        );
    } else {
        assert!(
            answer.is_ok(),
            "a job that stops at once is deleted within the wait: {answer:?}"
        );
    }
    assert!(took < bound, "cleanup waited {took:?} for a {short:?} wait");
    if h.backend().capabilities().cancel {
        let started = Instant::now();
        let answer = h.backend().cancel(&job.record, short).await;
        let took = started.elapsed();
        assert!(
            matches!(answer, Ok(()) | Err(BackendError::NotConfirmed { .. })),
            "cancel within a short wait: done or NotConfirmed, got {answer:?}"
        );
        assert!(took < bound, "cancel waited {took:?} for a {short:?} wait");
    }
    let long = CleanupWait::new(h.patience(), Duration::from_millis(100));
    h.backend()
        .cleanup(&job.record, long)
        .await
        .expect("a cleanup that waits long enough confirms the deletion");
    let state = h.backend().status(&job.record).await.expect("status");
    assert_eq!(
        state.status,
        JobStatus::NotFound,
        "after cleanup: {state:?}"
    );
}

/// Wait until the job runs.
async fn wait_running(h: &dyn BackendHarness, record: &JobRecord) {
    let deadline = Instant::now() + h.patience();
    loop {
        let state = h.backend().status(record).await.expect("status");
        assert!(
            !state.status.is_terminal(),
            "the job ended by itself: {state:?}"
        );
        if state.status == JobStatus::Running {
            return;
        }
        assert!(Instant::now() < deadline, "job never started: {state:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A captured value reaches the job's environment, and nothing the job
/// left in the store nor its logs hold it.
pub async fn env_reaches_the_job_and_nowhere_else(h: &dyn BackendHarness) {
    let sentinel = format!("kinetic-sentinel-{}", uuid_like());
    let name = "KINETIC_CONFORMANCE_SECRET";
    let entry = EnvEntry::Literal(
        name.parse().expect("name"),
        SecretValue::new(sentinel.clone()),
    );
    let env = capture(&[entry], &EnvSnapshot::new()).expect("capture");
    let job = h.prepare(ConformanceJob::EnvDigest(name.into()), env).await;
    h.backend().submit(&job).await.expect("submit");
    let state = wait_terminal(h, &job.record).await;
    assert_eq!(state.status, JobStatus::Succeeded, "{state:?}");
    let result = result_of(h, &job.record).await;
    let want = hex::encode(sha2::Sha256::digest(sentinel.as_bytes()));
    assert_eq!(
        result.value,
        serde_json::json!(want),
        "the captured value MUST reach the job's environment"
    );
    let store = h.store();
    for meta in store.list(None).await.expect("list store") {
        let bytes = store
            .get(&meta.path, GetOptions::default())
            .await
            .expect("get");
        assert!(
            !contains(&bytes, sentinel.as_bytes()),
            "a captured value MUST NOT be stored: found in {}",
            meta.path
        );
    }
    if h.backend().capabilities().logs {
        let logs = h
            .backend()
            .logs(&job.record, LogOptions::default())
            .await
            .expect("logs");
        assert!(
            !logs.contains(&sentinel),
            "a captured value MUST NOT be logged"
        );
    }
    assert!(
        !format!("{job:?}").contains(&sentinel),
        "a prepared job's Debug MUST NOT show values"
    );
}

/// Prepare `job` as child `index` of `group` (or of no group).
async fn prepared_in_group(
    h: &dyn BackendHarness,
    job: ConformanceJob,
    group: Option<&GroupId>,
    index: u64,
) -> PreparedJob {
    let mut prepared = h.prepare(job, no_env()).await;
    if let Some(group) = group {
        prepared.record.group_id = Some(group.clone());
        prepared.record.group_kind = Some("map".into());
        prepared.record.group_index = Some(index);
    }
    prepared
}

/// Calls of the system under the backend that one `group_status` of
/// `query` costs, when the harness counts them.
async fn group_status_cost(h: &dyn BackendHarness, query: &GroupQuery) -> Option<u64> {
    let before = h.system_calls()?;
    h.backend().group_status(query).await.expect("group_status");
    Some(h.system_calls()? - before)
}

/// `group_status` names exactly the group's jobs the backend holds, with
/// the state `status` gives; other groups, ungrouped jobs and cleaned-up
/// jobs are left out; an unknown group is an empty map. One call answers
/// for the whole group, and where the harness counts the calls made to
/// the system under the backend, a group of five costs what a group of
/// two costs.
pub async fn group_status_reports_the_group_in_one_call(h: &dyn BackendHarness) {
    let calls_at_start = h.system_calls();
    let group = GroupId::new_random();
    let other = GroupId::new_random();
    let a = prepared_in_group(h, ConformanceJob::Returns42, Some(&group), 0).await;
    let b = prepared_in_group(h, ConformanceJob::Raises, Some(&group), 1).await;
    let c = prepared_in_group(h, ConformanceJob::Returns42, Some(&other), 0).await;
    let d = prepared_in_group(h, ConformanceJob::Returns42, None, 0).await;
    for job in [&a, &b, &c, &d] {
        h.backend().submit(job).await.expect("submit");
    }
    let query = GroupQuery::new(group.clone(), a.record.namespace.clone());
    let listed = h
        .backend()
        .group_status(&query)
        .await
        .expect("group_status MUST be supported");
    let ids: Vec<_> = listed.keys().cloned().collect();
    let mut want = vec![a.record.job_id.clone(), b.record.job_id.clone()];
    want.sort();
    assert_eq!(
        ids, want,
        "group_status MUST list every job of the group submitted before the call, and only those"
    );
    for job in [&a, &b] {
        wait_terminal(h, &job.record).await;
    }
    let listed = h
        .backend()
        .group_status(&query)
        .await
        .expect("group_status");
    for job in [&a, &b] {
        let single = h.backend().status(&job.record).await.expect("status");
        assert_eq!(
            listed.get(&job.record.job_id),
            Some(&single),
            "group_status MUST give the state status gives"
        );
    }
    assert_eq!(listed[&a.record.job_id].status, JobStatus::Succeeded);
    assert_eq!(listed[&b.record.job_id].status, JobStatus::Failed);

    // The cost of one call, for two jobs and then for five.
    let small = group_status_cost(h, &query).await;
    let mut more = Vec::new();
    for index in 2..5 {
        let job = prepared_in_group(h, ConformanceJob::Returns42, Some(&group), index).await;
        h.backend().submit(&job).await.expect("submit");
        more.push(job);
    }
    for job in &more {
        wait_terminal(h, &job.record).await;
    }
    let large = group_status_cost(h, &query).await;
    let listed = h
        .backend()
        .group_status(&query)
        .await
        .expect("group_status");
    assert_eq!(
        listed.len(),
        5,
        "one group_status call MUST answer for every job of the group"
    );
    match (small, large) {
        (Some(small), Some(large)) => {
            // A counter that never moves would make the bound below hold
            // for nothing: submitting, running and ending jobs must ask
            // the system (a poll may not: a local backend answers a poll
            // of ended jobs from its own directory).
            let moved = h
                .system_calls()
                .zip(calls_at_start)
                .map(|(now, start)| now > start);
            assert_eq!(
                moved,
                Some(true),
                "the harness counts the backend's calls to its system, yet none was counted while seven jobs ran and ended"
            );
            eprintln!("group_status: {small} calls to the system for 2 jobs, {large} for 5");
            assert_eq!(
                large, small,
                "the cost of group_status in calls to the system MUST NOT grow with the group: {small} calls for 2 jobs, {large} for 5"
            );
        }
        _ => eprintln!(
            "group_status: the harness does not count the backend's calls to its system; only the answer was checked"
        ),
    }
    for job in &more {
        h.backend()
            .cleanup(&job.record, CleanupWait::default())
            .await
            .expect("cleanup");
    }

    h.backend()
        .cleanup(&a.record, CleanupWait::default())
        .await
        .expect("cleanup");
    let listed = h
        .backend()
        .group_status(&query)
        .await
        .expect("group_status");
    assert_eq!(
        listed.keys().cloned().collect::<Vec<_>>(),
        vec![b.record.job_id.clone()],
        "a cleaned-up job MUST NOT be listed"
    );
    let unknown = GroupQuery::new(GroupId::new_random(), a.record.namespace.clone());
    assert!(
        h.backend()
            .group_status(&unknown)
            .await
            .expect("an unknown group is not an error")
            .is_empty()
    );
    for job in [&b, &c, &d] {
        wait_terminal(h, &job.record).await;
        h.backend()
            .cleanup(&job.record, CleanupWait::default())
            .await
            .expect("cleanup");
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn uuid_like() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    )
}

/// `submit_batch` runs every input of a batch as its attempt-1 child
/// (`child_job_id(group, i, 1)`), whose `result.json` holds the input's
/// value; submitting the batch again starts no second copy, and with
/// another spec URI is `AlreadyExists`; `group_status` reports every
/// child (and, where the harness counts calls, costs at most 3 calls to
/// the system under the backend); `end_batch(Cleanup)` forgets the batch.
pub async fn submit_batch_runs_every_input_as_its_child(h: &dyn BackendHarness) {
    use kinetic_core::batch::child_job_id;
    let values = [10_i64, 20, 30];
    let batch = h.prepare_batch(&values, 2).await;
    let (group, query) = submit_batch(h, &batch).await;
    h.backend()
        .submit_batch(&batch)
        .await
        .expect("submit_batch MUST be idempotent");
    let mut other = batch.clone();
    other.job.spec_uri.push_str(".other");
    let err = h
        .backend()
        .submit_batch(&other)
        .await
        .expect_err("the same batch with another spec MUST be refused");
    assert!(
        matches!(err, BackendError::AlreadyExists { .. }),
        "MUST be AlreadyExists, got {err:?}"
    );
    let children: Vec<_> = (0..values.len())
        .map(|i| child_job_id(&group, i, 1))
        .collect();
    let listed = batch_ended(h, &query, &children, true).await;
    assert_eq!(
        listed.keys().cloned().collect::<Vec<_>>(),
        {
            let mut want = children.clone();
            want.sort();
            want
        },
        "a batch whose inputs all succeeded at once has only its attempt-1 children"
    );
    for (id, value) in children.iter().zip(values) {
        assert_eq!(listed[id].status, JobStatus::Succeeded, "{id}: {listed:?}");
        let bytes = h
            .store()
            .get(&kinetic_core::layout::result(id), GetOptions::default())
            .await
            .unwrap_or_else(|e| panic!("child {id}'s result.json MUST be in the store: {e}"));
        let result = RunnerResult::from_json(&bytes).expect("a valid result.json");
        assert_eq!(result.value, serde_json::json!(value), "{id}");
    }
    if let Some(cost) = group_status_cost(h, &query).await {
        assert!(
            cost <= 3,
            "one group_status of a batch MUST cost at most 3 calls to the system, cost {cost}"
        );
    }
    end_batch(h, &query, BatchEnd::Cleanup, "end_batch(Cleanup)").await;
    end_batch(h, &query, BatchEnd::Cleanup, "end_batch MUST be idempotent").await;
    let after = h
        .backend()
        .group_status(&query)
        .await
        .expect("group_status");
    assert!(
        after.is_empty(),
        "after end_batch(Cleanup) group_status MUST be empty: {after:?}"
    );
}

/// Once `end_batch(Cancel)` of a running batch returned, `group_status`
/// reports none of its inputs `PENDING` or `RUNNING`, from the first read
/// on (while the system may still be stopping them) until the batch is
/// cleaned up: each reads `FAILED (cancelled)`, or is gone. A second
/// cancel succeeds.
pub async fn a_cancelled_batch_reports_no_input_running(h: &dyn BackendHarness) {
    use kinetic_core::batch::child_job_id;
    use kinetic_core::status::StatusReason;
    let inputs = 3;
    let (group, query) = submit_batch(h, &h.prepare_sleeping_batch(inputs).await).await;
    let children: Vec<_> = (0..inputs).map(|i| child_job_id(&group, i, 1)).collect();
    let deadline = Instant::now() + h.patience();
    loop {
        let listed = h
            .backend()
            .group_status(&query)
            .await
            .expect("group_status of a batch");
        let running = |id| listed.get(id).map(|s: &JobState| s.status) == Some(JobStatus::Running);
        if children.iter().all(running) {
            break;
        }
        assert!(
            listed.values().all(|s| !s.status.is_terminal()),
            "a sleeping input ended by itself: {listed:?}"
        );
        assert!(
            Instant::now() < deadline,
            "the batch's inputs never all ran: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    end_batch(h, &query, BatchEnd::Cancel, "end_batch(Cancel)").await;
    // Read again for a while: a system that stops the inputs in the
    // background must not show them running, or waiting to start, meanwhile.
    let until = Instant::now() + Duration::from_secs(2);
    let mut reads = 0;
    while reads < 3 || Instant::now() < until {
        let listed = h
            .backend()
            .group_status(&query)
            .await
            .expect("group_status of a cancelled batch");
        for (id, state) in &listed {
            assert!(
                state.status == JobStatus::Failed && state.reason == Some(StatusReason::Cancelled),
                "after end_batch(Cancel) every input not ended MUST read FAILED (cancelled) or be gone; {id} is {state:?} (read {reads})"
            );
        }
        reads += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    end_batch(
        h,
        &query,
        BatchEnd::Cancel,
        "end_batch(Cancel) MUST be idempotent",
    )
    .await;
    end_batch(h, &query, BatchEnd::Cleanup, "end_batch(Cleanup)").await;
}

/// [`Backend::submit_batch`] of a batch in blocks (two blocks of two
/// inputs, one retry each): every input runs as its child, each attempt
/// its own child id, an attempt that ended its process retried alone,
/// and `group_status` reports each attempt: the first of input 1 (it
/// ended its process once) `FAILED` with exit code 3 and its second
/// `SUCCEEDED` with its value; input 3's two `FAILED` (it ends its process
/// every time), no third; the others `SUCCEEDED` at attempt 1. A status
/// read costs at most 3 calls to the system, as for a batch of one input
/// per index.
pub async fn a_batch_in_blocks_runs_and_retries_each_input_as_its_child(h: &dyn BackendHarness) {
    use kinetic_core::batch::child_job_id;
    use kinetic_core::status::StatusReason;
    use serde_json::json;
    let calls = vec![
        vec![json!(10)],
        vec![json!(20), json!(1)],
        vec![json!(30)],
        vec![json!(40), json!(9)],
    ];
    let batch = h.prepare_batch_in_blocks(calls, 2, 1, 2).await;
    let (group, query) = submit_batch(h, &batch).await;
    let want = [
        ((0, 1), JobStatus::Succeeded),
        ((1, 1), JobStatus::Failed),
        ((1, 2), JobStatus::Succeeded),
        ((2, 1), JobStatus::Succeeded),
        ((3, 1), JobStatus::Failed),
        ((3, 2), JobStatus::Failed),
    ];
    let children: Vec<_> = want
        .iter()
        .map(|((i, a), _)| child_job_id(&group, *i, *a))
        .collect();
    // A retry's child exists once the attempt before it failed.
    let listed = batch_ended(h, &query, &children, false).await;
    for ((i, a), status) in want {
        let id = child_job_id(&group, i, a);
        assert_eq!(
            listed[&id].status, status,
            "input {i} attempt {a}: {listed:?}"
        );
    }
    assert_eq!(
        listed.len(),
        want.len(),
        "no other child (input 3 has no third attempt): {listed:?}"
    );
    assert_eq!(
        listed[&child_job_id(&group, 1, 1)].reason,
        Some(StatusReason::ExitCode { code: 3 }),
        "{listed:?}"
    );
    for (i, a, value) in [(0, 1, 10), (1, 2, 20), (2, 1, 30)] {
        let id = child_job_id(&group, i, a);
        let bytes = h
            .store()
            .get(&kinetic_core::layout::result(&id), GetOptions::default())
            .await
            .unwrap_or_else(|e| panic!("child {id}'s result.json MUST be in the store: {e}"));
        let result = RunnerResult::from_json(&bytes).expect("a valid result.json");
        assert_eq!(
            result.value,
            json!({"value": value, "attempt": a}),
            "input {i} attempt {a}"
        );
    }
    if let Some(cost) = group_status_cost(h, &query).await {
        assert!(
            cost <= 3,
            "one group_status of a batch in blocks MUST cost at most 3 calls to the system, cost {cost}"
        );
    }
    end_batch(h, &query, BatchEnd::Cleanup, "end_batch(Cleanup)").await;
}

/// The batch `query` names once each of `children` ended (polled until
/// the harness's patience runs out); with `all_along`, each MUST be
/// reported from the first read on.
async fn batch_ended(
    h: &dyn BackendHarness,
    query: &GroupQuery,
    children: &[JobId],
    all_along: bool,
) -> kinetic_core::ports::GroupStatus {
    let deadline = Instant::now() + h.patience();
    loop {
        let listed = h
            .backend()
            .group_status(query)
            .await
            .expect("group_status of a batch");
        for id in children.iter().filter(|_| all_along) {
            assert!(
                listed.contains_key(id),
                "group_status MUST report every input of a submitted batch, {id} is missing: {listed:?}"
            );
        }
        let ended = |id| {
            listed
                .get(id)
                .is_some_and(|s: &JobState| s.status.is_terminal())
        };
        if children.iter().all(ended) {
            return listed;
        }
        assert!(
            Instant::now() < deadline,
            "batch not ended after {:?}: {listed:?}",
            h.patience()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `end_batch(end)` of the batch `query` names, which MUST succeed (`what`
/// says which promise failed otherwise).
async fn end_batch(h: &dyn BackendHarness, query: &GroupQuery, end: BatchEnd, what: &str) {
    h.backend()
        .end_batch(query, end, CleanupWait::default())
        .await
        .expect(what);
}

/// Submit `batch`, which MUST succeed: its group and the query of it.
async fn submit_batch(h: &dyn BackendHarness, batch: &PreparedBatch) -> (GroupId, GroupQuery) {
    h.backend().submit_batch(batch).await.expect("submit_batch");
    let query = GroupQuery::new(batch.group_id.clone(), batch.job.record.namespace.clone());
    (batch.group_id.clone(), query)
}
