//! An in-memory [`Backend`] with scripted outcomes.
//!
//! It keeps real state (jobs by id, their timelines, logs, idempotent
//! submits) and "runs" each job by following a scripted [`Outcome`]: after
//! an optional pending and running time it ends, writing the `result.json`
//! a runner would have written (or none, for outcomes that kill the job).
//! Failures and latency of the port's calls are scripted by wrapping it in
//! [`FaultyBackend`](kinetic_engine::layers::FaultyBackend).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_core::env::SecretValue;
use kinetic_core::ids::JobId;
use kinetic_core::ports::{
    Backend, BackendCapabilities, BackendError, ChangeFeed, CleanupWait, GroupQuery, GroupStatus,
    LogOptions, LogStream, ObjectStore, PreparedJob, PutOptions,
};
use kinetic_core::protocol::{RemoteError, RunnerResult};
use kinetic_core::record::JobRecord;
use kinetic_core::status::{JobState, JobStatus, StatusReason};
use serde_json::Value;

/// How a fake job ends.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Succeeds with this value.
    Succeed(Value),
    /// The function raises `type_name: message`.
    Fail {
        /// Exception type.
        type_name: String,
        /// Its message.
        message: String,
    },
    /// Runs forever (until cancelled).
    Hang,
    /// Runs forever, and takes `grace` to stop once asked (a process that
    /// ignores SIGTERM and is killed at the end of its grace period; a
    /// Kubernetes pod that stays terminating): `cancel` and `cleanup`
    /// waiting less than that answer [`BackendError::NotConfirmed`], and
    /// the stop (and the deletion) completes without them.
    HoldsOnStop {
        /// How long a stop takes.
        grace: Duration,
    },
    /// Stays pending forever for this blocking reason.
    Blocked(StatusReason),
    /// The node is preempted: the job fails without a result.
    Preempt,
    /// The process exits with this code without a result.
    Exit(i32),
}

#[derive(Debug)]
struct FakeJob {
    spec_uri: String,
    record: JobRecord,
    outcome: Outcome,
    submitted: Instant,
    logs: Vec<String>,
    env: BTreeMap<String, SecretValue>,
    cancelled: bool,
    finished: bool,
    /// When a stop (`cancel`, `cleanup`) was first asked for.
    stop_asked: Option<Instant>,
    /// `cleanup` asked for the job to go: it goes once it stopped.
    delete_asked: bool,
    /// The result write was attempted to its end (an observer whose future
    /// is dropped mid-write leaves it to the next observer).
    result_written: bool,
}

impl FakeJob {
    /// Whether a stop asked for has taken effect (at once, unless the
    /// outcome holds on stop for its grace period).
    fn stopped(&self) -> bool {
        let grace = match self.outcome {
            Outcome::HoldsOnStop { grace } => grace,
            _ => Duration::ZERO,
        };
        self.stop_asked.is_some_and(|t| t.elapsed() >= grace)
    }
}

/// Chooses a submitted job's outcome from its record (e.g. from its
/// `group_index`); `None` falls through to the queued outcomes.
pub type OutcomeFn = Arc<dyn Fn(&JobRecord) -> Option<Outcome> + Send + Sync>;

#[derive(Default)]
struct Script {
    by_job: BTreeMap<String, Outcome>,
    by_record: Option<OutcomeFn>,
    next: VecDeque<Outcome>,
    logs: VecDeque<Vec<String>>,
    logs_by_job: BTreeMap<String, Vec<String>>,
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Script")
            .field("by_job", &self.by_job)
            .field("by_record", &self.by_record.is_some())
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

/// An in-memory backend. Clones share state.
#[derive(Debug, Clone)]
pub struct FakeBackend {
    name: String,
    store: Arc<dyn ObjectStore>,
    jobs: Arc<Mutex<BTreeMap<String, FakeJob>>>,
    script: Arc<Mutex<Script>>,
    calls: Arc<Mutex<BTreeMap<&'static str, u64>>>,
    pending_for: Duration,
    run_for: Duration,
    submits: Arc<AtomicU64>,
    capabilities: BackendCapabilities,
}

impl FakeBackend {
    /// A fake named `local`-like `name` that writes results into `store`.
    /// Jobs succeed with `null` unless an outcome is scripted, and end as
    /// soon as they are observed.
    pub fn new(name: &str, store: Arc<dyn ObjectStore>) -> Self {
        Self {
            name: name.to_owned(),
            store,
            jobs: Arc::default(),
            script: Arc::default(),
            calls: Arc::default(),
            pending_for: Duration::ZERO,
            run_for: Duration::ZERO,
            submits: Arc::default(),
            capabilities: BackendCapabilities::single_host(),
        }
    }

    /// Declare that jobs need a container image (as a cluster backend
    /// does), so that the engine resolves one through its image builder.
    pub fn with_image(mut self, needs_image: bool) -> Self {
        self.capabilities = self.capabilities.with_image(needs_image);
        self
    }

    /// Declare these capabilities instead of a single-host backend's with
    /// everything. The fake honours them as a real backend must: a call
    /// whose capability is not declared answers `Unsupported`, and `check`
    /// refuses accelerators beyond the declared hosts.
    pub fn with_capabilities(mut self, capabilities: BackendCapabilities) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// `Unsupported` unless `declared`.
    fn require(&self, declared: bool, what: &str) -> Result<(), BackendError> {
        if declared {
            Ok(())
        } else {
            Err(BackendCapabilities::undeclared(&self.name, what))
        }
    }

    /// Jobs stay pending for `pending` and then run for `running`.
    pub fn with_timing(mut self, pending: Duration, running: Duration) -> Self {
        self.pending_for = pending;
        self.run_for = running;
        self
    }

    /// The next submitted job (without a per-job script) ends with `outcome`.
    pub fn push_outcome(&self, outcome: Outcome) {
        lock(&self.script).next.push_back(outcome);
    }

    /// The job `job_id` ends with `outcome` whenever it is submitted.
    pub fn script_job(&self, job_id: &str, outcome: Outcome) {
        lock(&self.script).by_job.insert(job_id.to_owned(), outcome);
    }

    /// Every submitted job without a per-job script asks `script` for its
    /// outcome first (batch tests answer from `group_index`).
    pub fn script_with(
        &self,
        script: impl Fn(&JobRecord) -> Option<Outcome> + Send + Sync + 'static,
    ) {
        lock(&self.script).by_record = Some(Arc::new(script));
    }

    /// The job `job_id` prints these lines whenever it is submitted.
    pub fn script_logs(&self, job_id: &str, lines: Vec<String>) {
        lock(&self.script)
            .logs_by_job
            .insert(job_id.to_owned(), lines);
    }

    /// The next submitted job (without per-job lines) prints these lines.
    pub fn push_logs(&self, lines: Vec<String>) {
        lock(&self.script).logs.push_back(lines);
    }

    /// Calls answered per method name.
    pub fn calls(&self, method: &str) -> u64 {
        lock(&self.calls).get(method).copied().unwrap_or(0)
    }

    /// Calls answered, all methods together.
    pub fn total_calls(&self) -> u64 {
        lock(&self.calls).values().sum()
    }

    /// Jobs started (idempotent re-submits not counted).
    pub fn submits(&self) -> u64 {
        self.submits.load(Ordering::Relaxed)
    }

    /// The environment values a job received (what a pod's environment
    /// would hold), for tests that follow a secret.
    pub fn received_env(&self, job_id: &str) -> BTreeMap<String, SecretValue> {
        lock(&self.jobs)
            .get(job_id)
            .map(|j| j.env.clone())
            .unwrap_or_default()
    }

    fn enter(&self, op: &'static str) {
        *lock(&self.calls).entry(op).or_default() += 1;
    }

    fn not_found(&self, job_id: &JobId) -> BackendError {
        BackendError::not_found(&self.name, job_id.to_string())
    }

    /// Wait (looking every `wait.poll_interval`) for the job to have
    /// stopped, for at most `wait.timeout`.
    async fn wait_stopped(
        &self,
        job: &JobRecord,
        wait: CleanupWait,
        what: &str,
    ) -> Result<(), BackendError> {
        let started = Instant::now();
        loop {
            let stopped = lock(&self.jobs)
                .get(job.job_id.as_str())
                .is_none_or(|j| j.finished || j.stopped());
            if stopped {
                return Ok(());
            }
            let elapsed = started.elapsed();
            if elapsed >= wait.timeout {
                return Err(BackendError::not_confirmed(
                    job.job_id.as_str(),
                    what,
                    wait.timeout,
                ));
            }
            tokio::time::sleep(
                wait.poll_interval
                    .min(wait.timeout - elapsed)
                    .max(Duration::from_millis(1)),
            )
            .await;
        }
    }

    /// Where the job is on its timeline, writing its result when it ends.
    async fn advance(&self, job_id: &str) -> JobState {
        let (state, write) = {
            let mut jobs = lock(&self.jobs);
            // A deletion asked for completes once the job stopped.
            if jobs
                .get(job_id)
                .is_some_and(|j| j.delete_asked && j.stopped())
            {
                jobs.remove(job_id);
            }
            let Some(job) = jobs.get_mut(job_id) else {
                return JobState::new(JobStatus::NotFound);
            };
            if job.cancelled && !job.stopped() {
                return JobState::new(JobStatus::Running);
            }
            if job.cancelled {
                return JobState::new(JobStatus::Failed).with_reason(StatusReason::Cancelled);
            }
            let elapsed = job.submitted.elapsed();
            if let Outcome::Blocked(reason) = &job.outcome {
                return JobState::new(JobStatus::Pending).with_reason(reason.clone());
            }
            if elapsed < self.pending_for {
                return JobState::new(JobStatus::Pending)
                    .with_reason(StatusReason::WaitingForResources);
            }
            if elapsed < self.pending_for + self.run_for
                || matches!(job.outcome, Outcome::Hang | Outcome::HoldsOnStop { .. })
            {
                return JobState::new(JobStatus::Running);
            }
            let state = match &job.outcome {
                Outcome::Succeed(_) => JobState::new(JobStatus::Succeeded),
                Outcome::Fail { .. } => {
                    JobState::new(JobStatus::Failed).with_reason(StatusReason::ExitCode { code: 1 })
                }
                Outcome::Preempt => {
                    JobState::new(JobStatus::Failed).with_reason(StatusReason::Preempted)
                }
                Outcome::Exit(code) => JobState::new(JobStatus::Failed)
                    .with_reason(StatusReason::ExitCode { code: *code }),
                Outcome::Hang | Outcome::HoldsOnStop { .. } | Outcome::Blocked(_) => {
                    JobState::new(JobStatus::Running)
                }
            };
            job.finished = true;
            let write = if job.result_written {
                None
            } else {
                let write = result_for(&job.outcome).map(|r| (job.record.job_id.clone(), r));
                job.result_written = write.is_none();
                write
            };
            (state, write)
        };
        if let Some((job_id, result)) = write {
            let path = kinetic_core::layout::result(&job_id);
            if let Ok(json) = serde_json::to_vec(&result)
                && let Err(e) = self
                    .store
                    .put(&path, Bytes::from(json), PutOptions::default())
                    .await
            {
                // Like a pod whose upload failed: the job ends without a result.
                tracing_warn(&format!(
                    "fake backend could not write the result of {job_id}: {e}"
                ));
            }
            if let Some(j) = lock(&self.jobs).get_mut(job_id.as_str()) {
                j.result_written = true;
            }
        }
        state
    }
}

fn tracing_warn(message: &str) {
    eprintln!("kinetic-testkit: {message}");
}

fn result_for(outcome: &Outcome) -> Option<RunnerResult> {
    match outcome {
        Outcome::Succeed(value) => Some(RunnerResult {
            protocol: 1,
            success: true,
            value: value.clone(),
            error: None,
            host_index: 0,
        }),
        Outcome::Fail { type_name, message } => Some(RunnerResult {
            protocol: 1,
            success: false,
            value: Value::Null,
            error: Some(RemoteError {
                type_name: type_name.clone(),
                message: message.clone(),
                traceback: Some(format!(
                    "Traceback (most recent call last):\n  File \"fake.py\", line 1, in <module>\n{type_name}: {message}\n"
                )),
                phase: Some("execute".into()),
            }),
            host_index: 0,
        }),
        _ => None,
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[async_trait]
impl Backend for FakeBackend {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> BackendCapabilities {
        self.capabilities.clone()
    }

    async fn check(&self, accelerator: &AcceleratorSpec) -> Result<(), BackendError> {
        self.enter("check");
        self.capabilities.check(&self.name, accelerator)
    }

    async fn submit(&self, job: &PreparedJob) -> Result<(), BackendError> {
        self.enter("submit");
        // It runs each job once: an asked budget is refused, not ignored.
        if job.budget_request.is_explicit() && !job.budgets.is_zero() {
            return Err(BackendError::invalid_input(format!(
                "the {} backend does not apply failure budgets (--retries, --restarts)",
                self.name
            )));
        }
        let id = job.record.job_id.to_string();
        let mut jobs = lock(&self.jobs);
        if let Some(existing) = jobs.get(&id) {
            if existing.spec_uri == job.spec_uri {
                return Ok(());
            }
            return Err(BackendError::AlreadyExists {
                backend: self.name.clone(),
                job_id: id,
                message: format!("it runs spec {}, not {}", existing.spec_uri, job.spec_uri),
            });
        }
        let (outcome, logs) = {
            let mut script = lock(&self.script);
            let by_record = script.by_record.clone();
            let outcome = script
                .by_job
                .remove(&id)
                .or_else(|| by_record.and_then(|f| f(&job.record)))
                .or_else(|| script.next.pop_front())
                .unwrap_or(Outcome::Succeed(Value::Null));
            let logs = script
                .logs_by_job
                .remove(&id)
                .or_else(|| script.logs.pop_front())
                .unwrap_or_else(|| vec![format!("[fake] running {id}")]);
            (outcome, logs)
        };
        jobs.insert(
            id,
            FakeJob {
                spec_uri: job.spec_uri.clone(),
                record: job.record.clone(),
                outcome,
                submitted: Instant::now(),
                logs,
                env: job
                    .env
                    .iter()
                    .map(|(n, v)| (n.as_str().to_owned(), v.clone()))
                    .collect(),
                cancelled: false,
                finished: false,
                stop_asked: None,
                delete_asked: false,
                result_written: false,
            },
        );
        self.submits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    async fn status(&self, job: &JobRecord) -> Result<JobState, BackendError> {
        self.enter("status");
        Ok(self.advance(job.job_id.as_str()).await)
    }

    /// Counted; `Unsupported` (undeclared, or declared by a test that
    /// checks the suite catches a backend overstating it: the fake runs
    /// batches one job per input only).
    async fn submit_batch(
        &self,
        _batch: &kinetic_core::ports::PreparedBatch,
    ) -> Result<(), BackendError> {
        self.enter("submit_batch");
        self.require(self.capabilities.indexed_batches, "indexed_batches")?;
        Err(BackendError::unsupported(format!(
            "the fake backend '{}' declares indexed_batches but runs batches one job per input",
            self.name
        )))
    }

    /// As `submit_batch`.
    async fn end_batch(
        &self,
        _query: &GroupQuery,
        _end: kinetic_core::ports::BatchEnd,
        _wait: CleanupWait,
    ) -> Result<(), BackendError> {
        self.enter("end_batch");
        self.require(self.capabilities.indexed_batches, "indexed_batches")?;
        Err(BackendError::unsupported(format!(
            "the fake backend '{}' declares indexed_batches but runs batches one job per input",
            self.name
        )))
    }

    async fn group_status(&self, query: &GroupQuery) -> Result<GroupStatus, BackendError> {
        self.enter("group_status");
        self.require(self.capabilities.group_status, "group_status")?;
        let members: Vec<(String, JobId)> = lock(&self.jobs)
            .iter()
            .filter(|(_, j)| {
                j.record.group_id.as_ref() == Some(&query.group_id)
                    && j.record.namespace == query.namespace
            })
            .map(|(id, j)| (id.clone(), j.record.job_id.clone()))
            .collect();
        let mut out = GroupStatus::new();
        for (id, job_id) in members {
            let state = self.advance(&id).await;
            if state.status != JobStatus::NotFound {
                out.insert(job_id, state);
            }
        }
        Ok(out)
    }

    async fn logs(&self, job: &JobRecord, options: LogOptions) -> Result<String, BackendError> {
        self.enter("logs");
        self.require(self.capabilities.logs, "logs")?;
        let jobs = lock(&self.jobs);
        let j = jobs
            .get(job.job_id.as_str())
            .ok_or_else(|| self.not_found(&job.job_id))?;
        let skip = options.tail.map_or(0, |n| j.logs.len().saturating_sub(n));
        Ok(j.logs[skip..].iter().map(|l| format!("{l}\n")).collect())
    }

    async fn follow_logs(&self, job: &JobRecord) -> Result<LogStream, BackendError> {
        self.enter("follow_logs");
        self.require(self.capabilities.follow_logs, "follow_logs")?;
        let jobs = lock(&self.jobs);
        let j = jobs
            .get(job.job_id.as_str())
            .ok_or_else(|| self.not_found(&job.job_id))?;
        let lines: Vec<Result<String, BackendError>> = j.logs.iter().cloned().map(Ok).collect();
        Ok(Box::pin(futures_util::stream::iter(lines)))
    }

    async fn cancel(&self, job: &JobRecord, wait: CleanupWait) -> Result<(), BackendError> {
        self.enter("cancel");
        self.require(self.capabilities.cancel, "cancel")?;
        if let Some(j) = lock(&self.jobs).get_mut(job.job_id.as_str())
            && !j.finished
        {
            j.cancelled = true;
            j.stop_asked.get_or_insert_with(Instant::now);
        }
        self.wait_stopped(job, wait, "the stop").await
    }

    async fn cleanup(&self, job: &JobRecord, wait: CleanupWait) -> Result<(), BackendError> {
        self.enter("cleanup");
        if let Some(j) = lock(&self.jobs).get_mut(job.job_id.as_str()) {
            if !j.finished {
                j.cancelled = true;
                j.stop_asked.get_or_insert_with(Instant::now);
            }
            j.delete_asked = true;
        }
        self.wait_stopped(job, wait, "the deletion").await?;
        lock(&self.jobs).remove(job.job_id.as_str());
        Ok(())
    }

    fn changes(&self) -> Option<ChangeFeed> {
        None
    }

    async fn list(&self) -> Result<Vec<JobId>, BackendError> {
        self.enter("list");
        Ok(lock(&self.jobs)
            .values()
            .map(|j| j.record.job_id.clone())
            .collect())
    }

    async fn port_forward(
        &self,
        _job: &JobRecord,
        _port: u16,
    ) -> Result<kinetic_core::ports::PortStream, BackendError> {
        self.enter("port_forward");
        // Scripted jobs run nothing that listens.
        Err(BackendCapabilities::undeclared(self.name(), "port_forward"))
    }
}

/// A [`crate::conformance::backend::BackendHarness`] over a [`FakeBackend`]
/// and a [`crate::MemoryStore`]: each conformance job is scripted with the
/// outcome the real Python would have.
#[derive(Debug, Clone)]
pub struct FakeBackendHarness {
    /// The fake under test.
    pub backend: FakeBackend,
    /// Its store.
    pub store: crate::MemoryStore,
}

impl Default for FakeBackendHarness {
    fn default() -> Self {
        let store = crate::MemoryStore::new();
        let backend = FakeBackend::new("fake", Arc::new(store.clone()));
        Self { backend, store }
    }
}

impl FakeBackendHarness {
    /// A harness whose fake declares (and honours) these capabilities.
    pub fn with_capabilities(capabilities: BackendCapabilities) -> Self {
        let harness = Self::default();
        Self {
            backend: harness.backend.with_capabilities(capabilities),
            ..harness
        }
    }
}

#[async_trait]
impl crate::conformance::backend::BackendHarness for FakeBackendHarness {
    fn backend(&self) -> Arc<dyn Backend> {
        Arc::new(self.backend.clone())
    }

    fn store(&self) -> Arc<dyn ObjectStore> {
        Arc::new(self.store.clone())
    }

    /// Every call the fake answered: the fake is its own system.
    fn system_calls(&self) -> Option<u64> {
        Some(self.backend.total_calls())
    }

    /// A batch over a scripted job (the fake runs no batch: a fake that
    /// declares `indexed_batches` fails the case, as it must).
    async fn prepare_batch(
        &self,
        values: &[i64],
        parallelism: usize,
    ) -> kinetic_core::ports::PreparedBatch {
        let job = self
            .prepare(
                crate::ConformanceJob::Returns42,
                kinetic_core::env::CapturedEnv::default(),
            )
            .await;
        let group = kinetic_core::ids::GroupId::new_random();
        kinetic_core::ports::PreparedBatch::new(group, job, "", values.len(), parallelism, 0)
            .expect("a valid batch")
    }

    async fn prepare(
        &self,
        job: crate::ConformanceJob,
        env: kinetic_core::env::CapturedEnv,
    ) -> PreparedJob {
        use crate::ConformanceJob as J;
        use sha2::Digest;
        let (outcome, logs) = match &job {
            J::Returns42 => (Outcome::Succeed(serde_json::json!(42)), vec![]),
            J::Raises => (
                Outcome::Fail {
                    type_name: "ValueError".into(),
                    message: "conformance failure".into(),
                },
                vec![],
            ),
            J::Sleeps => (Outcome::Hang, vec!["sleeping".to_owned()]),
            J::IgnoresStop => (
                Outcome::HoldsOnStop {
                    grace: Duration::from_secs(2),
                },
                vec!["ignoring SIGTERM".to_owned()],
            ),
            J::Prints(n) => (
                Outcome::Succeed(serde_json::json!(n)),
                (0..*n).map(|i| format!("line {i}")).collect(),
            ),
            J::EnvDigest(name) => {
                let value = env
                    .get(name)
                    .map(|v| v.expose().to_owned())
                    .unwrap_or_default();
                (
                    Outcome::Succeed(serde_json::json!(hex::encode(sha2::Sha256::digest(
                        value.as_bytes()
                    )))),
                    vec![],
                )
            }
            // One host: rank 0 of 1.
            J::Topology { fail_on, .. } if fail_on.contains(&0) => (
                Outcome::Fail {
                    type_name: "ValueError".into(),
                    message: "host 0 failed".into(),
                },
                vec![],
            ),
            J::Topology { .. } => (
                Outcome::Succeed(serde_json::json!({"node_rank": 0, "num_nodes": 1})),
                vec![],
            ),
        };
        let store: Arc<dyn ObjectStore> = Arc::new(self.store.clone());
        let prepared =
            crate::python_job::prepare_python_job(&store, self.backend.name(), &job, env).await;
        self.backend
            .script_job(prepared.record.job_id.as_str(), outcome);
        if !logs.is_empty() {
            self.backend
                .script_logs(prepared.record.job_id.as_str(), logs);
        }
        prepared
    }
}
