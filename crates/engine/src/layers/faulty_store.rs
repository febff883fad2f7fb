//! [`FaultyStore`]: an [`ObjectStore`] around another that fails or slows
//! down the calls a test scripts, and forwards everything else unchanged.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use kinetic_core::ports::FaultPlan;
use kinetic_core::ports::{
    GetOptions, ObjectMeta, ObjectPath, ObjectStore, PutOptions, StoreError,
};

/// Fault injection for any [`ObjectStore`]: before each call it consults a
/// [`FaultPlan`] whose operation names are the port's method names (`put`,
/// `put_file`, `get`, `get_to_file`, `head`, `list`, `delete`,
/// `delete_prefix`); a due error is returned without calling the inner
/// store, otherwise the call goes through as is. With nothing scripted it
/// behaves exactly as the inner store. Clones share the plan.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use kinetic_core::ports::{ObjectStore, StoreError};
/// use kinetic_engine::layers::{FaultyStore};
/// use kinetic_testkit::MemoryStore;
///
/// let store = FaultyStore::new(Arc::new(MemoryStore::new()));
/// store.faults().fail_next(StoreError::unavailable("scripted"));
/// assert!(store.list(None).await.unwrap_err().is_retryable());
/// assert!(store.list(None).await.unwrap().is_empty());
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    faults: Arc<FaultPlan<StoreError>>,
}

impl FaultyStore {
    /// Wrap `inner`, with nothing scripted yet.
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self {
            inner,
            faults: Arc::default(),
        }
    }

    /// The plan: `fail_next`, `fail_on("put", n, err)`, latency.
    pub fn faults(&self) -> &FaultPlan<StoreError> {
        &self.faults
    }

    /// The wrapped store.
    pub fn inner(&self) -> &Arc<dyn ObjectStore> {
        &self.inner
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    fn uri(&self, path: &ObjectPath) -> String {
        self.inner.uri(path)
    }

    async fn put(
        &self,
        path: &ObjectPath,
        data: Bytes,
        options: PutOptions,
    ) -> Result<(), StoreError> {
        super::check(&self.faults, "put").await?;
        self.inner.put(path, data, options).await
    }

    async fn put_file(
        &self,
        path: &ObjectPath,
        file: &Path,
        options: PutOptions,
    ) -> Result<u64, StoreError> {
        super::check(&self.faults, "put_file").await?;
        self.inner.put_file(path, file, options).await
    }

    async fn get(&self, path: &ObjectPath, options: GetOptions) -> Result<Bytes, StoreError> {
        super::check(&self.faults, "get").await?;
        self.inner.get(path, options).await
    }

    async fn get_to_file(&self, path: &ObjectPath, file: &Path) -> Result<u64, StoreError> {
        super::check(&self.faults, "get_to_file").await?;
        self.inner.get_to_file(path, file).await
    }

    async fn head(&self, path: &ObjectPath) -> Result<ObjectMeta, StoreError> {
        super::check(&self.faults, "head").await?;
        self.inner.head(path).await
    }

    async fn list(&self, prefix: Option<&ObjectPath>) -> Result<Vec<ObjectMeta>, StoreError> {
        super::check(&self.faults, "list").await?;
        self.inner.list(prefix).await
    }

    async fn delete(&self, path: &ObjectPath) -> Result<(), StoreError> {
        super::check(&self.faults, "delete").await?;
        self.inner.delete(path).await
    }

    async fn delete_prefix(&self, prefix: &ObjectPath) -> Result<u64, StoreError> {
        super::check(&self.faults, "delete_prefix").await?;
        self.inner.delete_prefix(prefix).await
    }
}
