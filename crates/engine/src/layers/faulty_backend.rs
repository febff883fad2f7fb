//! [`FaultyBackend`]: a [`Backend`] around another that fails or slows down
//! the calls a test scripts, and forwards everything else unchanged.

use std::sync::Arc;

use async_trait::async_trait;

use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_core::ids::JobId;
use kinetic_core::ports::{
    Backend, BackendCapabilities, BackendError, GroupQuery, GroupStatus, LogOptions, LogStream,
    PreparedJob,
};
use kinetic_core::ports::{CleanupWait, FaultPlan};
use kinetic_core::record::JobRecord;
use kinetic_core::status::JobState;

/// Fault injection for any [`Backend`]: before each call it consults a
/// [`FaultPlan`] whose operation names are the port's method names
/// (`check`, `submit`, `status`, `group_status`, `logs`, `follow_logs`,
/// `cancel`, `cleanup`, `list`); a due error is returned without calling
/// the inner backend, otherwise the call goes through as is. `name` and
/// `capabilities` are the inner backend's. With nothing scripted it
/// behaves exactly as the inner backend. Clones share the plan.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use kinetic_core::ports::{Backend, BackendError};
/// use kinetic_engine::layers::{FaultyBackend};
/// use kinetic_testkit::{FakeBackend, MemoryStore};
///
/// let fake = FakeBackend::new("fake", Arc::new(MemoryStore::new()));
/// let backend = FaultyBackend::new(Arc::new(fake));
/// backend.faults().fail_on("list", 1, BackendError::unavailable("scripted"));
/// assert!(backend.list().await.is_ok());
/// assert!(backend.list().await.unwrap_err().is_retryable());
/// assert_eq!(backend.name(), "fake");
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct FaultyBackend {
    inner: Arc<dyn Backend>,
    faults: Arc<FaultPlan<BackendError>>,
}

impl FaultyBackend {
    /// Wrap `inner`, with nothing scripted yet.
    pub fn new(inner: Arc<dyn Backend>) -> Self {
        Self {
            inner,
            faults: Arc::default(),
        }
    }

    /// The plan: `fail_next`, `fail_on("status", n, err)`, latency.
    pub fn faults(&self) -> &FaultPlan<BackendError> {
        &self.faults
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &Arc<dyn Backend> {
        &self.inner
    }
}

#[async_trait]
impl Backend for FaultyBackend {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn capabilities(&self) -> BackendCapabilities {
        self.inner.capabilities()
    }

    async fn check(&self, accelerator: &AcceleratorSpec) -> Result<(), BackendError> {
        super::check(&self.faults, "check").await?;
        self.inner.check(accelerator).await
    }

    async fn submit(&self, job: &PreparedJob) -> Result<(), BackendError> {
        super::check(&self.faults, "submit").await?;
        self.inner.submit(job).await
    }

    async fn status(&self, job: &JobRecord) -> Result<JobState, BackendError> {
        super::check(&self.faults, "status").await?;
        self.inner.status(job).await
    }

    async fn group_status(&self, query: &GroupQuery) -> Result<GroupStatus, BackendError> {
        super::check(&self.faults, "group_status").await?;
        self.inner.group_status(query).await
    }

    async fn submit_batch(
        &self,
        batch: &kinetic_core::ports::PreparedBatch,
    ) -> Result<(), BackendError> {
        super::check(&self.faults, "submit_batch").await?;
        self.inner.submit_batch(batch).await
    }

    async fn end_batch(
        &self,
        query: &GroupQuery,
        end: kinetic_core::ports::BatchEnd,
        wait: CleanupWait,
    ) -> Result<(), BackendError> {
        super::check(&self.faults, "end_batch").await?;
        self.inner.end_batch(query, end, wait).await
    }

    async fn logs(&self, job: &JobRecord, options: LogOptions) -> Result<String, BackendError> {
        super::check(&self.faults, "logs").await?;
        self.inner.logs(job, options).await
    }

    async fn follow_logs(&self, job: &JobRecord) -> Result<LogStream, BackendError> {
        super::check(&self.faults, "follow_logs").await?;
        self.inner.follow_logs(job).await
    }

    async fn cancel(&self, job: &JobRecord, wait: CleanupWait) -> Result<(), BackendError> {
        super::check(&self.faults, "cancel").await?;
        self.inner.cancel(job, wait).await
    }

    async fn cleanup(&self, job: &JobRecord, wait: CleanupWait) -> Result<(), BackendError> {
        super::check(&self.faults, "cleanup").await?;
        self.inner.cleanup(job, wait).await
    }

    fn changes(&self) -> Option<kinetic_core::ports::ChangeFeed> {
        self.inner.changes()
    }

    async fn list(&self) -> Result<Vec<JobId>, BackendError> {
        super::check(&self.faults, "list").await?;
        self.inner.list().await
    }

    async fn port_forward(
        &self,
        job: &JobRecord,
        port: u16,
    ) -> Result<kinetic_core::ports::PortStream, BackendError> {
        super::check(&self.faults, "port_forward").await?;
        self.inner.port_forward(job, port).await
    }
}
