//! [`JobHandle`]: follow one submitted job, from any process.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::Value;

use kinetic_core::budget::{Attempt, AttemptHistory, merge_attempts};
use kinetic_core::ids::JobId;
use kinetic_core::layout;
use kinetic_core::ports::{
    Backend, BackendCapabilities, ChangeFeed, CleanupWait, GetOptions, LogOptions, LogStream,
    PutOptions, StoreError, tail_lines,
};
use kinetic_core::protocol::{HostReport, RunnerResult, worker_results_in_order};
use kinetic_core::record::JobRecord;
use kinetic_core::redact::Redactor;
use kinetic_core::retry::{Backoff, RetryPolicy};
use kinetic_core::status::{JobState, JobStatus, StatusReason};

use super::{EngineError, EngineInner, slice_log, stored_log};

/// Called with each new state `result()` observes (the first included).
pub type StatusCallback = Arc<dyn Fn(&JobState) + Send + Sync>;

/// Called with each line of the job's output while `result()` streams logs.
pub type LogCallback = Arc<dyn Fn(&str) + Send + Sync>;

/// Options of [`JobHandle::result`].
#[derive(Clone)]
#[non_exhaustive]
pub struct ResultOptions {
    /// Give up waiting after this long (the job keeps running).
    pub timeout: Option<Duration>,
    /// Clean up when done, as Kinetic does: the backend's resources (a
    /// Kubernetes Job and its pod) of a job whose value came back; a job
    /// that failed keeps them, so its logs can still be read (the cluster
    /// collects it after its TTL). Default true, except for a debug job
    /// ([`crate::JobSpec::debug`]), which is kept unless
    /// [`ResultOptions::cleanup`] asks for it.
    pub cleanup: bool,
    /// `cleanup` was set by [`ResultOptions::cleanup`].
    cleanup_asked: bool,
    /// Also remove the job's artifacts in the store once its value came
    /// back (only when asked: default false).
    pub remove_artifacts: bool,
    /// Deliver the job's output lines to `on_log` while it runs.
    pub stream_logs: bool,
    /// Receives each new state.
    pub on_status_change: Option<StatusCallback>,
    /// Receives output lines when `stream_logs` is set.
    pub on_log: Option<LogCallback>,
    /// First poll interval; grows by half while nothing changes, up to `max_poll_interval`.
    pub poll_interval: Duration,
    /// Longest poll interval.
    pub max_poll_interval: Duration,
    /// How long the cleanup after the value waits for the backend to
    /// confirm the deletion ([`CleanupWait`]; 180 s by default). A deletion
    /// not confirmed in time is logged, as any cleanup failure is.
    pub cleanup_wait: CleanupWait,
}

impl Default for ResultOptions {
    fn default() -> Self {
        Self {
            timeout: None,
            cleanup: true,
            cleanup_asked: false,
            remove_artifacts: false,
            stream_logs: false,
            on_status_change: None,
            on_log: None,
            poll_interval: Duration::from_millis(20),
            max_poll_interval: Duration::from_secs(2),
            cleanup_wait: CleanupWait::default(),
        }
    }
}

impl std::fmt::Debug for ResultOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResultOptions")
            .field("timeout", &self.timeout)
            .field("cleanup", &self.cleanup)
            .field("remove_artifacts", &self.remove_artifacts)
            .field("stream_logs", &self.stream_logs)
            .field("poll_interval", &self.poll_interval)
            .field("max_poll_interval", &self.max_poll_interval)
            .field("cleanup_wait", &self.cleanup_wait)
            .finish_non_exhaustive()
    }
}

impl ResultOptions {
    /// Wait at most `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Clean up afterwards, or not (a debug job too).
    pub fn cleanup(mut self, cleanup: bool) -> Self {
        self.cleanup = cleanup;
        self.cleanup_asked = true;
        self
    }

    /// Wait for the cleanup's deletion as `wait` says.
    pub fn cleanup_wait(mut self, wait: CleanupWait) -> Self {
        self.cleanup_wait = wait;
        self
    }

    /// Remove the job's store artifacts too once its value came back, or not.
    pub fn remove_artifacts(mut self, remove: bool) -> Self {
        self.remove_artifacts = remove;
        self
    }

    /// Stream output lines to `on_log`.
    pub fn stream_logs(mut self, on_log: LogCallback) -> Self {
        self.stream_logs = true;
        self.on_log = Some(on_log);
        self
    }

    /// Call `callback` on each new state.
    pub fn on_status_change(mut self, callback: StatusCallback) -> Self {
        self.on_status_change = Some(callback);
        self
    }
}

/// What [`JobHandle::cleanup`] removes, and how long it waits for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupOptions {
    /// The backend's resources (process, Kubernetes objects).
    pub backend: bool,
    /// The job's objects in the store (`{job_id}/…`; never outputs or cached data).
    pub store: bool,
    /// How long to wait for the backend to confirm the deletion; past it
    /// the cleanup fails with the backend's `NotConfirmed` (the deletion
    /// goes on) and the store objects are left.
    pub wait: CleanupWait,
}

impl Default for CleanupOptions {
    fn default() -> Self {
        Self {
            backend: true,
            store: true,
            wait: CleanupWait::default(),
        }
    }
}

/// A submitted job. Cheap to clone; serialisable through its record
/// ([`JobHandle::to_json`], `Engine::handle_from_json`, `Engine::attach`).
#[derive(Clone)]
pub struct JobHandle {
    inner: Arc<EngineInner>,
    backend: Arc<dyn Backend>,
    record: JobRecord,
    /// The job's secret values, known at submit; read back on first use
    /// otherwise (the names from `spec.json`, the values from the engine's
    /// environment).
    redactor: Arc<tokio::sync::OnceCell<Redactor>>,
    /// The attempts last kept in the store (`{job_id}/attempts.json`).
    kept_attempts: Arc<std::sync::Mutex<Vec<Attempt>>>,
}

impl std::fmt::Debug for JobHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobHandle")
            .field("job_id", &self.record.job_id)
            .field("backend", &self.record.backend)
            .finish_non_exhaustive()
    }
}

/// Reads of a missing result once the job ended: a store is
/// read-after-write consistent, so a short grace (five reads over about
/// two seconds) covers a writer that ended just after the job.
fn result_grace() -> RetryPolicy {
    RetryPolicy::new(
        5,
        Backoff::new(Duration::from_millis(100), Duration::from_secs(1)).with_multiplier(2.5),
    )
}

impl JobHandle {
    pub(crate) fn new(
        inner: Arc<EngineInner>,
        backend: Arc<dyn Backend>,
        record: JobRecord,
    ) -> Self {
        Self {
            inner,
            backend,
            record,
            redactor: Arc::new(tokio::sync::OnceCell::new()),
            kept_attempts: Arc::default(),
        }
    }

    /// This handle, redacting `redactor`'s values from what it reports.
    pub(crate) fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = Arc::new(tokio::sync::OnceCell::new_with(Some(redactor)));
        self
    }

    /// What to redact from the job's logs and errors: its secret values.
    async fn redactor(&self) -> &Redactor {
        self.redactor
            .get_or_init(|| async {
                let env = &self.inner.env;
                let spec = self
                    .inner
                    .store
                    .get(&layout::spec(&self.record.job_id), GetOptions::default())
                    .await;
                let names: Vec<String> = spec
                    .ok()
                    .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
                    .and_then(|doc| serde_json::from_value(doc["secret_names"].clone()).ok())
                    .unwrap_or_default();
                Redactor::from_names(names.iter().map(String::as_str), env)
            })
            .await
    }

    /// `on_log` redacting the job's secret values from each line.
    async fn redacting(&self, on_log: Option<&LogCallback>) -> Option<LogCallback> {
        let on_log = on_log?.clone();
        let redactor = self.redactor().await.clone();
        if redactor.is_empty() {
            return Some(on_log);
        }
        Some(Arc::new(move |line: &str| on_log(&redactor.redact(line))))
    }

    /// The job's id.
    pub fn id(&self) -> &JobId {
        &self.record.job_id
    }

    /// The durable record.
    pub fn record(&self) -> &JobRecord {
        &self.record
    }

    /// The record as JSON (Kinetic's `handle.json`).
    pub fn to_json(&self) -> String {
        self.record.to_json()
    }

    /// What the job's backend can do.
    pub fn capabilities(&self) -> BackendCapabilities {
        self.backend.capabilities()
    }

    /// Fails with the backend's `Unsupported` when it does not declare
    /// the capability `what` a call needs (`declared` is its value).
    fn require(&self, declared: bool, what: &str) -> Result<(), EngineError> {
        if declared {
            Ok(())
        } else {
            Err(BackendCapabilities::undeclared(self.backend.name(), what).into())
        }
    }

    /// Wait until a debug job's debugger listens: the job is `RUNNING` and
    /// its runner wrote `{job_id}/.debug_ready`; gives what the marker
    /// says (where debugpy listens, the job's workspace). Polls every
    /// `poll` (and at each change the backend reports).
    ///
    /// # Errors
    /// [`EngineError::DebugNotReady`] when the job reaches a terminal state
    /// (or is gone) first; [`EngineError::Timeout`] after `timeout`
    /// ([`kinetic_core::debug::DEFAULT_READY_TIMEOUT`] in Kinetic);
    /// [`EngineError::InvalidInput`] for a job not submitted with `debug`.
    pub async fn wait_debug_ready(
        &self,
        timeout: Duration,
        poll: Duration,
    ) -> Result<kinetic_core::debug::DebugEndpoint, EngineError> {
        if !self.record.debug {
            return Err(EngineError::invalid_input(format!(
                "job {} was not submitted with debug (kinetic run --debug, debug=True): no debugger to attach to",
                self.record.job_id
            )));
        }
        let started = Instant::now();
        let mut changes = self.backend.changes();
        let marker = layout::debug_ready(&self.record.job_id);
        let mut last: Option<JobStatus> = None;
        loop {
            let state = self.status().await?;
            if last != Some(state.status) {
                tracing::info!(job_id = %self.record.job_id, "waiting for the debugger: job {}", state.status);
                last = Some(state.status);
            }
            if state.status.is_terminal() || state.status == JobStatus::NotFound {
                return Err(EngineError::DebugNotReady {
                    job_id: self.record.job_id.to_string(),
                    status: state.status.to_string(),
                    reason: state.reason.as_ref().map(ToString::to_string),
                });
            }
            if state.status == JobStatus::Running {
                match self.inner.store.get(&marker, GetOptions::default()).await {
                    Ok(bytes) => {
                        return kinetic_core::debug::DebugEndpoint::parse(&bytes)
                            .map_err(EngineError::internal);
                    }
                    Err(StoreError::NotFound { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            if started.elapsed() >= timeout {
                return Err(EngineError::Timeout {
                    job_id: self.record.job_id.to_string(),
                    after: timeout,
                });
            }
            let nap = poll.min(timeout.saturating_sub(started.elapsed()));
            match changes.as_mut() {
                Some(feed) => {
                    let _ = tokio::time::timeout(nap, feed.next()).await;
                }
                None => tokio::time::sleep(nap).await,
            }
        }
    }

    /// Open one connection to TCP port `port` of the job's leader, as the
    /// job sees it (a debug job's debugger: [`kinetic_core::debug::DebugEndpoint::port`]);
    /// see [`Backend::port_forward`]. An invalid-input error when the
    /// backend does not declare [`BackendCapabilities::port_forward`].
    pub async fn port_forward(
        &self,
        port: u16,
    ) -> Result<kinetic_core::ports::PortStream, EngineError> {
        self.require(self.capabilities().port_forward, "port_forward")?;
        Ok(self.backend.port_forward(&self.record, port).await?)
    }

    /// The job's current state. A job the backend no longer holds because
    /// it was cleaned up is `NOT_FOUND` with [`StatusReason::CleanedUp`].
    pub async fn status(&self) -> Result<JobState, EngineError> {
        let mut state = self.backend.status(&self.record).await?;
        if state.status == JobStatus::NotFound
            && let Some(found) = self.state_in_batch().await?
        {
            state = found;
        }
        if !state.attempts.is_empty() {
            state.attempts = self.keep_attempts_merged(&state).await;
        }
        if state.status != JobStatus::NotFound || state.reason.is_some() {
            return Ok(state);
        }
        Ok(match self.cleanup_note().await {
            Some(collected) => state.with_reason(StatusReason::CleanedUp { collected }),
            None => state,
        })
    }

    /// A child of a batch submitted in one call (one Indexed Job) has no
    /// backend object of its own: its state is its batch's group status
    /// names for it (`None` for any other job, or a child it does not name).
    async fn state_in_batch(&self) -> Result<Option<JobState>, EngineError> {
        let Some(group_id) = self.record.group_id.clone() else {
            return Ok(None);
        };
        let caps = self.backend.capabilities();
        if !caps.indexed_batches || !caps.group_status {
            return Ok(None);
        }
        let query = kinetic_core::ports::GroupQuery::new(group_id, self.record.namespace.clone());
        let mut states = self.backend.group_status(&query).await?;
        Ok(states.remove(&self.record.job_id))
    }

    /// The job's attempts (see [`kinetic_core::budget`]): as last kept in the
    /// store (`{job_id}/attempts.json`), which outlives the backend's
    /// objects; empty for a job whose backend reported none.
    pub async fn attempts(&self) -> Result<Vec<Attempt>, EngineError> {
        match self
            .inner
            .store
            .get(
                &layout::attempts(&self.record.job_id),
                GetOptions::default(),
            )
            .await
        {
            Ok(bytes) => {
                let path = layout::attempts(&self.record.job_id);
                let history: AttemptHistory =
                    serde_json::from_slice(&bytes).map_err(|e| EngineError::InvalidResult {
                        job_id: self.record.job_id.to_string(),
                        uri: self.inner.store.uri(&path),
                        message: format!("invalid attempt history: {e}"),
                    })?;
                Ok(history.attempts)
            }
            Err(StoreError::NotFound { .. }) => Ok(Vec::new()),
            Err(e) => Err(e.into()),
        }
    }

    /// Keep the attempts `state` carries in the store when they differ
    /// from the last kept (a backend that no longer sees some, its pods
    /// gone, does not shorten the history). A failed write is a warning:
    /// the next observation writes again. A batch keeps its children's
    /// from its group polls the same way.
    pub(crate) async fn keep_attempts(&self, state: &JobState) {
        self.keep_attempts_merged(state).await;
    }

    /// [`JobHandle::keep_attempts`], returning the history kept: the
    /// union, keyed by host (the pod), of the stored history (read once
    /// per handle, so that a new process does not write a shorter one
    /// over it) and the attempts `state` carries, which win for a host in
    /// both. It only grows.
    async fn keep_attempts_merged(&self, state: &JobState) -> Vec<Attempt> {
        if state.attempts.is_empty() {
            return self.kept().clone();
        }
        if self.kept().is_empty() {
            match self.attempts().await {
                Ok(stored) => *self.kept() = stored,
                Err(e) => {
                    tracing::warn!(job_id = %self.record.job_id, "cannot read the attempt history: {e}");
                    return merge_attempts(&[], &state.attempts);
                }
            }
        }
        let kept = self.kept().clone();
        let merged = merge_attempts(&kept, &state.attempts);
        if merged == kept {
            return merged;
        }
        let history = AttemptHistory {
            attempts: merged.clone(),
        };
        let body = match serde_json::to_vec_pretty(&history) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(job_id = %self.record.job_id, "cannot encode the attempt history: {e}");
                return merged;
            }
        };
        match self
            .inner
            .store
            .put(
                &layout::attempts(&self.record.job_id),
                bytes::Bytes::from(body),
                PutOptions::default(),
            )
            .await
        {
            Ok(()) => *self.kept() = merged.clone(),
            Err(e) => {
                tracing::warn!(job_id = %self.record.job_id, "could not keep the attempt history: {e}")
            }
        }
        merged
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Vec<Attempt>> {
        self.kept_attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What the cleanup note says (whether the value had been collected),
    /// if the job was cleaned up.
    async fn cleanup_note(&self) -> Option<bool> {
        let bytes = self
            .inner
            .store
            .get(
                &layout::cleanup_note(&self.record.job_id),
                GetOptions::default(),
            )
            .await
            .ok()?;
        let note: Value = serde_json::from_slice(&bytes).ok()?;
        Some(
            note.get("collected")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        )
    }

    /// Remove the backend's resources and leave the note that says so.
    async fn clean_backend(&self, collected: bool, wait: CleanupWait) -> Result<(), EngineError> {
        self.backend.cleanup(&self.record, wait).await?;
        let note = serde_json::json!({
            "collected": collected,
            "at": (self.inner.clock)().to_string(),
        });
        self.inner
            .store
            .put(
                &layout::cleanup_note(&self.record.job_id),
                bytes::Bytes::from(note.to_string()),
                PutOptions::default(),
            )
            .await?;
        Ok(())
    }

    /// Stop the job unless it already ended: `Some(state)` says it had
    /// (and nothing was done), `None` that it was stopped.
    pub async fn cancel_if_running(&self) -> Result<Option<JobState>, EngineError> {
        let state = self.status().await?;
        if state.status.is_terminal() || state.status == JobStatus::NotFound {
            return Ok(Some(state));
        }
        self.cancel().await?;
        Ok(None)
    }

    /// All of the job's output so far: the backend's, or, once the backend
    /// has none (the pod is gone, the job was cleaned up), the copy its
    /// runner kept in the store. An invalid-input error when neither the
    /// backend declares [`BackendCapabilities::logs`] nor a copy exists.
    pub async fn logs(&self) -> Result<String, EngineError> {
        let text = self.log_text(LogOptions::default()).await?;
        Ok(self.redactor().await.redact(&text).into_owned())
    }

    /// The last `n` lines of the job's output (from the backend or the
    /// store, as [`JobHandle::logs`]).
    pub async fn tail(&self, n: usize) -> Result<String, EngineError> {
        let text = self.log_text(LogOptions::tail(n)).await?;
        Ok(self.redactor().await.redact(&text).into_owned())
    }

    /// Every host's stored output, under a header each, the failing
    /// hosts first, for a multi-host job whose store holds any host's
    /// output (see [`slice_log`]); else the backend's log when
    /// it has one, else the stored copy.
    async fn log_text(&self, options: LogOptions) -> Result<String, EngineError> {
        if let Some(text) = self.slice_text(&options).await? {
            return Ok(text);
        }
        let live = if self.capabilities().logs {
            match self.backend.logs(&self.record, options.clone()).await {
                Ok(text) if !text.is_empty() => return Ok(text),
                Err(e) if !e.is_not_found() => return Err(e.into()),
                other => Some(other),
            }
        } else {
            None
        };
        let stored =
            stored_log::read(&*self.inner.store, &stored_log::prefix(&self.record), 0).await?;
        if stored.chunks > 0 {
            let text = String::from_utf8_lossy(&stored.bytes).into_owned();
            return Ok(match options.tail {
                Some(n) => tail_lines(&text, n),
                None => text,
            });
        }
        match live {
            Some(answer) => Ok(answer?),
            None => Err(BackendCapabilities::undeclared(self.backend.name(), "logs").into()),
        }
    }

    /// Every host's stored output of a multi-host job ([`slice_log`]):
    /// `None` for a single-host job, or while the store holds no host's
    /// output. The host a status names as lost (a
    /// [`StatusReason::HostLost`]) comes first; a status that cannot be read
    /// names none.
    async fn slice_text(&self, options: &LogOptions) -> Result<Option<String>, EngineError> {
        let hosts = kinetic_core::accelerators::AcceleratorSpec::parse(&self.record.accelerator)
            .map_or(1, |a| a.num_hosts());
        if hosts < 2 {
            return Ok(None);
        }
        let lost = match self.status().await {
            Ok(JobState {
                reason: Some(StatusReason::HostLost { host, cause, .. }),
                ..
            }) => Some((host, format!("lost: {cause}"))),
            _ => None,
        };
        Ok(slice_log::read(
            &*self.inner.store,
            &self.record.job_id,
            hosts,
            options.tail,
            lost,
        )
        .await?)
    }

    /// The job's output as a stream of lines that ends with the job: the
    /// backend's stream, or, once the backend has none, the copy in the
    /// store, from its start and then chunk by chunk as the runner copies
    /// more (so a follower attached after the pod was gone still sees the
    /// rest). An invalid-input error when the backend does not declare
    /// [`BackendCapabilities::follow_logs`] and nothing was stored.
    pub async fn follow_logs(&self) -> Result<LogStream, EngineError> {
        let stream = match self.live_log_stream().await? {
            Some(stream) => stream,
            None => stored_log::follow(
                self.inner.store.clone(),
                self.backend.clone(),
                self.record.clone(),
                stored_log::FOLLOW_POLL,
            ),
        };
        let redactor = self.redactor().await.clone();
        if redactor.is_empty() {
            return Ok(stream);
        }
        Ok(Box::pin(stream.map(move |line| {
            line.map(|l| redactor.redact(&l).into_owned())
        })))
    }

    /// The backend's log stream; `None` when it has none but the store
    /// holds a copy.
    async fn live_log_stream(&self) -> Result<Option<LogStream>, EngineError> {
        let answer = if self.capabilities().follow_logs {
            match self.backend.follow_logs(&self.record).await {
                Ok(stream) => return Ok(Some(stream)),
                Err(e) if e.is_not_found() => Err(EngineError::from(e)),
                Err(e) => return Err(e.into()),
            }
        } else {
            Err(BackendCapabilities::undeclared(self.backend.name(), "follow_logs").into())
        };
        let stored =
            stored_log::chunks_exist(&*self.inner.store, &stored_log::prefix(&self.record)).await?;
        if stored {
            return Ok(None);
        }
        answer.map(|()| None)
    }

    /// Stop the job; its artifacts stay in the store. An invalid-input
    /// error when the backend does not declare [`BackendCapabilities::cancel`].
    /// Waits for the stop as long as the backend's default
    /// ([`CleanupWait::default`]); see [`JobHandle::cancel_within`].
    pub async fn cancel(&self) -> Result<(), EngineError> {
        self.cancel_within(CleanupWait::default()).await
    }

    /// Stop the job, waiting for the backend to confirm it as `wait` says:
    /// a stop not confirmed in time fails with the backend's
    /// `NotConfirmed` (the job still stops).
    pub async fn cancel_within(&self, wait: CleanupWait) -> Result<(), EngineError> {
        self.require(self.capabilities().cancel, "cancel")?;
        Ok(self.backend.cancel(&self.record, wait).await?)
    }

    /// Remove the job's backend resources and/or its store objects.
    pub async fn cleanup(&self, options: CleanupOptions) -> Result<(), EngineError> {
        if options.backend {
            if options.store {
                self.backend.cleanup(&self.record, options.wait).await?;
            } else {
                let collected = self
                    .inner
                    .store
                    .head(&layout::result(&self.record.job_id))
                    .await
                    .is_ok();
                self.clean_backend(collected, options.wait).await?;
            }
        }
        if options.store {
            self.inner
                .store
                .delete_prefix(&layout::job_prefix(&self.record.job_id))
                .await?;
        }
        Ok(())
    }

    /// Wait for the job to end and return its value, or its error.
    ///
    /// A timeout returns [`EngineError::Timeout`] and leaves the job running.
    /// A status poll that fails is retried by the engine's
    /// [`RetryBackend`](crate::layers::RetryBackend); one that still fails
    /// ends the wait with its error (the job keeps running). Streaming
    /// logs from a backend that does not declare
    /// [`BackendCapabilities::follow_logs`] is an invalid-input error.
    /// With `cleanup` (the default) the backend's resources of a job whose
    /// value came back are removed (a failed job keeps them, for its logs),
    /// and its store objects too with `remove_artifacts`; cleanup failures
    /// are logged, never raised. Asked again, a cleaned-up job's value is
    /// still read from the store.
    pub async fn result(&self, options: ResultOptions) -> Result<Value, EngineError> {
        let state = self.wait(&options).await?;
        let cleanup = self.cleans_up(&options);
        self.collect_ended(
            &state,
            cleanup,
            options.remove_artifacts,
            options.cleanup_wait,
        )
        .await
    }

    /// True when [`JobHandle::result`] with `options` cleans up after a
    /// value came back: asked to, unless the job is a debug job kept by
    /// default. A caller that shows the value before cleaning up asks for
    /// it without cleanup, then calls [`JobHandle::cleanup`] (backend
    /// only, and the store too with `remove_artifacts`) when this is true.
    pub fn cleans_up(&self, options: &ResultOptions) -> bool {
        // Kinetic's default: a debug job is kept, to be looked at.
        options.cleanup && (options.cleanup_asked || !self.record.debug)
    }

    /// The value of a job already seen in the terminal `state` (a batch
    /// poll saw it), without polling it again; cleans up like `result`.
    pub(crate) async fn collect_ended(
        &self,
        state: &JobState,
        cleanup: bool,
        remove_artifacts: bool,
        wait: CleanupWait,
    ) -> Result<Value, EngineError> {
        let outcome = self.collect(state).await;
        if cleanup && outcome.is_ok() {
            let already = matches!(state.reason, Some(StatusReason::CleanedUp { .. }));
            if !already && let Err(e) = self.clean_backend(true, wait).await {
                tracing::warn!(job_id = %self.record.job_id, "cleanup of backend resources failed: {e}");
            }
            if remove_artifacts {
                let deleted = self
                    .inner
                    .store
                    .delete_prefix(&layout::job_prefix(&self.record.job_id))
                    .await
                    .map_err(EngineError::from);
                if let Err(e) = deleted {
                    tracing::warn!(job_id = %self.record.job_id, "cleanup of job artifacts failed: {e}");
                }
            }
        }
        outcome
    }

    /// Poll until a terminal state, streaming logs meanwhile when asked.
    async fn wait(&self, options: &ResultOptions) -> Result<JobState, EngineError> {
        let started = Instant::now();
        // A timeout too long for the clock to reach is no timeout.
        let deadline = options.timeout.and_then(|t| started.checked_add(t));
        let mut last: Option<JobState> = None;
        let mut interval = options.poll_interval;
        let mut logs: Option<LineChunks> = None;
        // A stream is opened once: it replays the output from the start.
        let mut logs_opened = false;
        // Streaming logs is a request the backend must be able to honour.
        let follow = options.stream_logs;
        if follow {
            self.require(self.capabilities().follow_logs, "follow_logs")?;
        }
        let on_log = if follow {
            self.redacting(options.on_log.as_ref()).await
        } else {
            None
        };
        // The job's end is an event where the backend has them (armed
        // before the first poll, so no change is missed in between).
        let mut changes = self.backend.changes();
        // Failed polls are retried by the engine's RetryBackend; what comes
        // out of it has spent its budget and ends the wait.
        loop {
            let state = self.backend.status(&self.record).await?;
            self.keep_attempts(&state).await;
            if last.as_ref() != Some(&state) {
                if let Some(cb) = &options.on_status_change {
                    cb(&state);
                }
                interval = options.poll_interval;
                last = Some(state.clone());
            }
            if follow && !logs_opened && state.status != JobStatus::Pending {
                match self.backend.follow_logs(&self.record).await {
                    Ok(stream) => {
                        logs = Some(stream.ready_chunks(LOG_CHUNK));
                        logs_opened = true;
                    }
                    Err(e) => {
                        tracing::debug!(job_id = %self.record.job_id, "no log stream yet: {e}")
                    }
                }
            }
            if state.status.is_terminal() {
                if let Some(stream) = logs.take() {
                    drain_logs(stream, on_log.as_ref(), Duration::from_secs(5)).await;
                } else if follow && !logs_opened {
                    // The job ended before its output could be followed (it
                    // started and ended between two polls and the backend
                    // would not stream it then): its output is delivered
                    // whole, once, rather than lost.
                    self.deliver_whole_log(on_log.as_ref()).await;
                }
                return Ok(state);
            }
            let mut pause = interval;
            if let Some(deadline) = deadline {
                let now = Instant::now();
                if now >= deadline {
                    return Err(EngineError::Timeout {
                        job_id: self.record.job_id.to_string(),
                        after: options.timeout.unwrap_or_default(),
                    });
                }
                pause = pause.min(deadline - now);
            }
            match logs.as_mut() {
                Some(stream) => {
                    if !pump_logs(stream, on_log.as_ref(), pause).await {
                        logs = None;
                        // The output ended: the job most likely did too.
                        continue;
                    }
                }
                None => pause_or_change(&mut changes, pause).await,
            }
            interval = interval.mul_f64(1.5).min(options.max_poll_interval);
        }
    }

    /// The job's whole output to `on_log`, line by line (from the backend or
    /// the store, as [`JobHandle::logs`]); nothing when it has none.
    async fn deliver_whole_log(&self, on_log: Option<&LogCallback>) {
        let Some(cb) = on_log else { return };
        match self.log_text(LogOptions::default()).await {
            Ok(text) => text.lines().for_each(|line| cb(line)),
            Err(e) => {
                tracing::debug!(job_id = %self.record.job_id, "no output to deliver: {e}")
            }
        }
    }

    /// The error for a job that ended without a usable result, with the
    /// last lines of its output when the backend still has them.
    async fn no_result(&self, state: &JobState, uri: String) -> EngineError {
        let log_tail = self.tail(20).await.ok();
        EngineError::NoResult {
            job_id: self.record.job_id.to_string(),
            state: Box::new(state.clone()),
            uri,
            log_tail,
        }
    }

    /// The failure a worker host of a multi-host job reported, for a job
    /// whose leader left no usable result: the workers' results
    /// (`result-worker-{N}.json`) are read in host order (2 before 10),
    /// skipping unreadable ones and successes, and the first failure is
    /// the error, naming its host and the later hosts that reported one
    /// too. `None` when there is none, or the results cannot be listed.
    async fn worker_failure(&self) -> Option<EngineError> {
        let prefix = layout::job_prefix(&self.record.job_id);
        let listed = match self.inner.store.list(Some(&prefix)).await {
            Ok(listed) => listed,
            Err(e) => {
                tracing::warn!(job_id = %self.record.job_id, "cannot list the hosts' results: {e}");
                return None;
            }
        };
        let names: Vec<&str> = listed
            .iter()
            .filter(|m| {
                m.path.as_str().strip_suffix(m.path.file_name()) == Some(&format!("{prefix}/"))
            })
            .map(|m| m.path.file_name())
            .collect();
        let workers = worker_results_in_order(names);
        for (i, (host, _)) in workers.iter().enumerate() {
            let path = layout::host_result(&self.record.job_id, *host);
            let result = match self.inner.store.get(&path, GetOptions::default()).await {
                Ok(bytes) => RunnerResult::from_json(&bytes).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            let error = match result {
                Ok(RunnerResult {
                    success: false,
                    error: Some(error),
                    ..
                }) => error,
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!(job_id = %self.record.job_id, "ignoring host {host}'s result: {e}");
                    continue;
                }
            };
            let others = workers[i + 1..].iter().map(|(h, _)| *h).collect();
            return Some(EngineError::Remote {
                job_id: self.record.job_id.to_string(),
                error: Box::new(self.redactor().await.redact_error(error)),
                host: Some(HostReport {
                    host: *host,
                    hosts: self.host_count().await,
                    others,
                }),
            });
        }
        None
    }

    /// How many hosts the job has, as its `spec.json` says.
    async fn host_count(&self) -> Option<u32> {
        let path = layout::spec(&self.record.job_id);
        let bytes = self
            .inner
            .store
            .get(&path, GetOptions::default())
            .await
            .ok()?;
        let spec: Value = serde_json::from_slice(&bytes).ok()?;
        spec.pointer("/cluster/num_nodes")?
            .as_u64()?
            .try_into()
            .ok()
    }

    /// Read `result.json` after the job ended and turn it into the value or an error.
    async fn collect(&self, state: &JobState) -> Result<Value, EngineError> {
        let path = layout::result(&self.record.job_id);
        let uri = self.inner.store.uri(&path);
        // A job the backend no longer knows may never write one: no grace.
        let grace = state.status != JobStatus::NotFound;
        let read = crate::retry::retry_if(
            &result_grace(),
            |e: &StoreError| grace && e.is_not_found(),
            || self.inner.store.get(&path, GetOptions::default()),
        )
        .await;
        let job_id = self.record.job_id.to_string();
        let bytes = match read {
            Ok(bytes) => bytes,
            Err(gave_up) if gave_up.error.is_not_found() => {
                if let Some(failure) = self.worker_failure().await {
                    return Err(failure);
                }
                return Err(self.no_result(state, uri).await);
            }
            Err(gave_up) => return Err(gave_up.error.into()),
        };
        let result = RunnerResult::from_json(&bytes).map_err(|e| EngineError::InvalidResult {
            job_id: job_id.clone(),
            uri: uri.clone(),
            message: e.to_string(),
        })?;
        if result.success {
            if state.status == JobStatus::Failed {
                // Never return a value the backend says did not come from a
                // successful run (e.g. a host that failed after the leader wrote).
                if let Some(failure) = self.worker_failure().await {
                    return Err(failure);
                }
                return Err(self.no_result(state, uri).await);
            }
            return Ok(result.value);
        }
        match result.error {
            Some(error) => Err(EngineError::Remote {
                job_id,
                error: Box::new(self.redactor().await.redact_error(error)),
                host: None,
            }),
            None => Err(EngineError::InvalidResult {
                job_id,
                uri,
                message: "a failed result carries no error".into(),
            }),
        }
    }
}

/// A followed log, its lines taken as many at a time as are ready (up to
/// [`LOG_CHUNK`]), so a fast log costs one wake-up per chunk, not per line.
type LineChunks = futures_util::stream::ReadyChunks<LogStream>;

/// The most lines of a followed log handled in one go.
const LOG_CHUNK: usize = 4096;

/// Sleep `pause`, or less when `changes` says a job may have changed.
async fn pause_or_change(changes: &mut Option<ChangeFeed>, pause: Duration) {
    let Some(feed) = changes.as_mut() else {
        tokio::time::sleep(pause).await;
        return;
    };
    let sleep = std::pin::pin!(tokio::time::sleep(pause));
    if let futures_util::future::Either::Left((None, _)) =
        futures_util::future::select(feed.next(), sleep).await
    {
        *changes = None;
    }
}

/// Deliver log lines for up to `pause`; false when the stream ended.
async fn pump_logs(stream: &mut LineChunks, on_log: Option<&LogCallback>, pause: Duration) -> bool {
    let mut sleep = std::pin::pin!(tokio::time::sleep(pause));
    loop {
        let next = stream.next();
        match futures_util::future::select(next, sleep.as_mut()).await {
            futures_util::future::Either::Left((Some(lines), _)) => {
                for line in lines {
                    match line {
                        Ok(line) => {
                            if let Some(cb) = on_log {
                                cb(&line);
                            }
                        }
                        Err(e) => {
                            tracing::debug!("log stream error: {e}");
                            return false;
                        }
                    }
                }
            }
            futures_util::future::Either::Left((None, _)) => return false,
            futures_util::future::Either::Right(_) => return true,
        }
    }
}

/// Deliver what is left of a log stream once the job ended, for at most `limit`.
async fn drain_logs(mut stream: LineChunks, on_log: Option<&LogCallback>, limit: Duration) {
    let _ = pump_logs(&mut stream, on_log, limit).await;
}
