//! An in-memory [`ObjectStore`]: real state, real semantics.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use kinetic_core::ports::{
    GetOptions, ObjectMeta, ObjectPath, ObjectStore, PutMode, PutOptions, StoreError,
};

/// An in-memory object store. Clones share the same objects, so a test can
/// hand one clone to an engine, drop the engine, and inspect or reuse the
/// objects through another clone (as a bucket outlives a crashed client).
///
/// To script failures or latency, wrap it in
/// [`FaultyStore`](kinetic_engine::layers::FaultyStore).
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    /// Each object with the write that made it (its version tag).
    objects: Arc<Mutex<BTreeMap<ObjectPath, (Bytes, u64)>>>,
    calls: Arc<AtomicU64>,
    writes: Arc<AtomicU64>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many port calls this store (and its clones) answered.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Every object, for tests that search the whole store (e.g. for a leaked secret).
    pub fn snapshot(&self) -> BTreeMap<ObjectPath, Bytes> {
        self.lock()
            .iter()
            .map(|(p, (d, _))| (p.clone(), d.clone()))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<ObjectPath, (Bytes, u64)>> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn enter(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    fn store(&self, path: &ObjectPath, data: Bytes, mode: PutMode) -> Result<(), StoreError> {
        let mut objects = self.lock();
        if mode == PutMode::CreateIfAbsent && objects.contains_key(path) {
            return Err(StoreError::already_exists(self.uri(path)));
        }
        let version = self.writes.fetch_add(1, Ordering::Relaxed) + 1;
        objects.insert(path.clone(), (data, version));
        Ok(())
    }

    fn read(&self, path: &ObjectPath) -> Result<Bytes, StoreError> {
        self.read_versioned(path).map(|(data, _)| data)
    }

    fn read_versioned(&self, path: &ObjectPath) -> Result<(Bytes, u64), StoreError> {
        self.lock()
            .get(path)
            .cloned()
            .ok_or_else(|| StoreError::not_found(self.uri(path)))
    }
}

/// The version tag of the `version`-th write.
fn tag(version: u64) -> String {
    format!("\"{version:x}\"")
}

#[async_trait]
impl ObjectStore for MemoryStore {
    fn uri(&self, path: &ObjectPath) -> String {
        format!("memory:///{path}")
    }

    async fn put(
        &self,
        path: &ObjectPath,
        data: Bytes,
        options: PutOptions,
    ) -> Result<(), StoreError> {
        self.enter();
        self.store(path, data, options.mode)
    }

    async fn put_file(
        &self,
        path: &ObjectPath,
        file: &Path,
        options: PutOptions,
    ) -> Result<u64, StoreError> {
        self.enter();
        let data = tokio::fs::read(file).await.map_err(|e| {
            StoreError::invalid_input(format!("cannot read local file '{}': {e}", file.display()))
                .with_source(e)
        })?;
        let size = data.len() as u64;
        self.store(path, Bytes::from(data), options.mode)?;
        Ok(size)
    }

    async fn get(&self, path: &ObjectPath, options: GetOptions) -> Result<Bytes, StoreError> {
        self.enter();
        let data = self.read(path)?;
        match options.range {
            None => Ok(data),
            Some(range) => {
                let len = data.len() as u64;
                if range.start > len || range.start > range.end {
                    return Err(StoreError::invalid_input(format!(
                        "range {}..{} is outside {} ({len} bytes)",
                        range.start,
                        range.end,
                        self.uri(path)
                    )));
                }
                let end = range.end.min(len);
                Ok(data.slice(range.start as usize..end as usize))
            }
        }
    }

    async fn get_to_file(&self, path: &ObjectPath, file: &Path) -> Result<u64, StoreError> {
        self.enter();
        let target = kinetic_core::files::replace_target(file).map_err(|e| {
            StoreError::invalid_input(format!("cannot write local file: {e}")).with_source(e)
        })?;
        let file = target.as_path();
        let data = self.read(path)?;
        let tmp = file.with_extension("kinetic-part");
        let local_err = |e: std::io::Error| {
            StoreError::invalid_input(format!("cannot write local file '{}': {e}", file.display()))
                .with_source(e)
        };
        tokio::fs::write(&tmp, &data).await.map_err(local_err)?;
        tokio::fs::rename(&tmp, file).await.map_err(local_err)?;
        Ok(data.len() as u64)
    }

    async fn head(&self, path: &ObjectPath) -> Result<ObjectMeta, StoreError> {
        self.enter();
        let (data, version) = self.read_versioned(path)?;
        Ok(ObjectMeta::new(path.clone(), data.len() as u64).with_e_tag(Some(tag(version))))
    }

    async fn list(&self, prefix: Option<&ObjectPath>) -> Result<Vec<ObjectMeta>, StoreError> {
        self.enter();
        Ok(self
            .lock()
            .iter()
            .filter(|(p, _)| prefix.is_none_or(|pre| p.is_under(pre)))
            .map(|(p, (d, version))| {
                ObjectMeta::new(p.clone(), d.len() as u64).with_e_tag(Some(tag(*version)))
            })
            .collect())
    }

    async fn delete(&self, path: &ObjectPath) -> Result<(), StoreError> {
        self.enter();
        self.lock().remove(path);
        Ok(())
    }

    async fn delete_prefix(&self, prefix: &ObjectPath) -> Result<u64, StoreError> {
        self.enter();
        let mut objects = self.lock();
        let before = objects.len();
        objects.retain(|p, _| !p.is_under(prefix));
        Ok((before - objects.len()) as u64)
    }
}
