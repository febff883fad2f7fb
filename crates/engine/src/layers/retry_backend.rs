//! [`RetryBackend`]: a [`Backend`] around another that retries failed
//! calls under one [`RetryPolicy`].

use std::sync::Arc;

use async_trait::async_trait;

use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_core::ids::JobId;
use kinetic_core::ports::{
    Backend, BackendCapabilities, BackendError, CleanupWait, GroupQuery, GroupStatus, LogOptions,
    LogStream, PreparedJob,
};
use kinetic_core::record::JobRecord;
use kinetic_core::retry::RetryPolicy;
use kinetic_core::status::JobState;

/// Retries for any [`Backend`]: each call that fails with an error that is
/// [retryable](BackendError::is_retryable) and not [already
/// retried](BackendError::is_retried) is made again after the policy's
/// backoff, until it succeeds or the policy's budget is spent; the error
/// that ends it comes back marked as retried, so that nothing above retries
/// it again. Every other error (not found, permission, an error a lower
/// layer already retried) is returned at once. `name` and `capabilities`
/// are the inner backend's; a log stream, once open, is not retried.
///
/// This is the one place the engine retries backend calls: job and batch
/// polling, submit, cancel, cleanup and logs all go through it
/// ([`EngineBuilder::retry`](crate::EngineBuilder::retry) sets the
/// policy).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use kinetic_core::ports::{Backend, BackendError};
/// use kinetic_engine::layers::{FaultyBackend, RetryBackend};
/// use kinetic_core::retry::{Backoff, RetryPolicy};
/// use kinetic_testkit::{FakeBackend, MemoryStore};
///
/// let fake = FaultyBackend::new(Arc::new(FakeBackend::new("fake", Arc::new(MemoryStore::new()))));
/// let policy = RetryPolicy::new(3, Backoff::new(Duration::from_millis(10), Duration::from_secs(1)));
/// let backend = RetryBackend::new(Arc::new(fake.clone()), policy);
///
/// // Two failures are absorbed by the budget of three attempts…
/// fake.faults().fail_next(BackendError::unavailable("restarting"));
/// fake.faults().fail_next(BackendError::unavailable("restarting"));
/// assert!(backend.list().await.is_ok());
/// // …three are not, and the error says it was retried.
/// for _ in 0..3 {
///     fake.faults().fail_next(BackendError::unavailable("restarting"));
/// }
/// let err = backend.list().await.unwrap_err();
/// assert!(err.is_retried());
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct RetryBackend {
    inner: Arc<dyn Backend>,
    policy: RetryPolicy,
}

impl RetryBackend {
    /// Wrap `inner`, retrying under `policy`.
    pub fn new(inner: Arc<dyn Backend>, policy: RetryPolicy) -> Self {
        Self { inner, policy }
    }

    /// The policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &Arc<dyn Backend> {
        &self.inner
    }
}

/// `wait` with what is left of it until `deadline`.
fn left(wait: CleanupWait, deadline: std::time::Instant) -> CleanupWait {
    CleanupWait::new(
        deadline.saturating_duration_since(std::time::Instant::now()),
        wait.poll_interval,
    )
}

#[async_trait]
impl Backend for RetryBackend {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn capabilities(&self) -> BackendCapabilities {
        self.inner.capabilities()
    }

    async fn check(&self, accelerator: &AcceleratorSpec) -> Result<(), BackendError> {
        crate::retry::call(&self.policy, || self.inner.check(accelerator)).await
    }

    async fn submit(&self, job: &PreparedJob) -> Result<(), BackendError> {
        crate::retry::call(&self.policy, || self.inner.submit(job)).await
    }

    async fn status(&self, job: &JobRecord) -> Result<JobState, BackendError> {
        crate::retry::call(&self.policy, || self.inner.status(job)).await
    }

    async fn group_status(&self, query: &GroupQuery) -> Result<GroupStatus, BackendError> {
        crate::retry::call(&self.policy, || self.inner.group_status(query)).await
    }

    /// Retried as `submit` is: submitting a batch again is idempotent.
    async fn submit_batch(
        &self,
        batch: &kinetic_core::ports::PreparedBatch,
    ) -> Result<(), BackendError> {
        crate::retry::call(&self.policy, || self.inner.submit_batch(batch)).await
    }

    /// Retried within the one wait the caller gave, as `cleanup`.
    async fn end_batch(
        &self,
        query: &GroupQuery,
        end: kinetic_core::ports::BatchEnd,
        wait: CleanupWait,
    ) -> Result<(), BackendError> {
        let deadline = std::time::Instant::now() + wait.timeout;
        crate::retry::call(&self.policy, || {
            self.inner.end_batch(query, end, left(wait, deadline))
        })
        .await
    }

    async fn logs(&self, job: &JobRecord, options: LogOptions) -> Result<String, BackendError> {
        crate::retry::call(&self.policy, || self.inner.logs(job, options.clone())).await
    }

    async fn follow_logs(&self, job: &JobRecord) -> Result<LogStream, BackendError> {
        crate::retry::call(&self.policy, || self.inner.follow_logs(job)).await
    }

    /// Retried within the one wait the caller gave: each try gets what
    /// is left of it, so the call never waits past it.
    async fn cancel(&self, job: &JobRecord, wait: CleanupWait) -> Result<(), BackendError> {
        let deadline = std::time::Instant::now() + wait.timeout;
        crate::retry::call(&self.policy, || {
            self.inner.cancel(job, left(wait, deadline))
        })
        .await
    }

    /// Retried within the one wait the caller gave, as `cancel`.
    async fn cleanup(&self, job: &JobRecord, wait: CleanupWait) -> Result<(), BackendError> {
        let deadline = std::time::Instant::now() + wait.timeout;
        crate::retry::call(&self.policy, || {
            self.inner.cleanup(job, left(wait, deadline))
        })
        .await
    }

    fn changes(&self) -> Option<kinetic_core::ports::ChangeFeed> {
        self.inner.changes()
    }

    async fn list(&self) -> Result<Vec<JobId>, BackendError> {
        crate::retry::call(&self.policy, || self.inner.list()).await
    }

    async fn port_forward(
        &self,
        job: &JobRecord,
        port: u16,
    ) -> Result<kinetic_core::ports::PortStream, BackendError> {
        crate::retry::call(&self.policy, || self.inner.port_forward(job, port)).await
    }
}
