//! [`CountingStore`]: an [`ObjectStore`] around another that counts the
//! calls made to it, so a test can bound what an operation costs (the
//! local backend's conformance harness counts its store calls per status
//! poll with it).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use kinetic_core::ports::{
    GetOptions, ObjectMeta, ObjectPath, ObjectStore, PutOptions, StoreError,
};

/// Counts every call that reaches the store (`uri`, which names an object
/// without asking the store anything, is not counted) and forwards it
/// unchanged. Clones share the count.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use kinetic_core::ports::{ObjectPath, ObjectStore, PutOptions};
/// use kinetic_testkit::{CountingStore, MemoryStore};
///
/// let store = CountingStore::new(Arc::new(MemoryStore::new()));
/// let path = ObjectPath::parse("a/b").unwrap();
/// store.put(&path, "x".into(), PutOptions::default()).await.unwrap();
/// store.list(None).await.unwrap();
/// assert_eq!(store.calls(), 2);
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    calls: Arc<AtomicU64>,
}

impl CountingStore {
    /// Wrap `inner`, with no call counted yet.
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self {
            inner,
            calls: Arc::default(),
        }
    }

    /// The calls made so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    fn count(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}

#[async_trait]
impl ObjectStore for CountingStore {
    fn uri(&self, path: &ObjectPath) -> String {
        self.inner.uri(path)
    }

    async fn put(
        &self,
        path: &ObjectPath,
        data: Bytes,
        options: PutOptions,
    ) -> Result<(), StoreError> {
        self.count();
        self.inner.put(path, data, options).await
    }

    async fn put_file(
        &self,
        path: &ObjectPath,
        file: &Path,
        options: PutOptions,
    ) -> Result<u64, StoreError> {
        self.count();
        self.inner.put_file(path, file, options).await
    }

    async fn get(&self, path: &ObjectPath, options: GetOptions) -> Result<Bytes, StoreError> {
        self.count();
        self.inner.get(path, options).await
    }

    async fn get_to_file(&self, path: &ObjectPath, file: &Path) -> Result<u64, StoreError> {
        self.count();
        self.inner.get_to_file(path, file).await
    }

    async fn head(&self, path: &ObjectPath) -> Result<ObjectMeta, StoreError> {
        self.count();
        self.inner.head(path).await
    }

    async fn list(&self, prefix: Option<&ObjectPath>) -> Result<Vec<ObjectMeta>, StoreError> {
        self.count();
        self.inner.list(prefix).await
    }

    async fn delete(&self, path: &ObjectPath) -> Result<(), StoreError> {
        self.count();
        self.inner.delete(path).await
    }

    async fn delete_prefix(&self, prefix: &ObjectPath) -> Result<u64, StoreError> {
        self.count();
        self.inner.delete_prefix(prefix).await
    }
}
