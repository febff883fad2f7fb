//! # kinetic-store-gcs
//!
//! The [`ObjectStore`] port of `kinetic-core` over the `object_store` crate.
//! One adapter, [`GcsStore`], serves every store URL the engine uses, so the
//! local default, the tests and production share one code path:
//!
//! - `file:///abs/dir`: a local directory (the local backend's default store);
//! - `memory://`: an in-process store (tests);
//!
//! `object_store` already streams, retries and does multipart uploads; this
//! crate only maps paths, options and errors onto the port's contract.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use kinetic_core::ports::{GetOptions, ObjectPath, ObjectStore, PutOptions};
//! use kinetic_store_gcs::GcsStore;
//!
//! let store = GcsStore::from_url("memory://").unwrap();
//! let path = ObjectPath::parse("job-0a1b2c3d/spec.json").unwrap();
//! store.put(&path, "{}".into(), PutOptions::default()).await.unwrap();
//! assert_eq!(&store.get(&path, GetOptions::default()).await.unwrap()[..], b"{}");
//! # });
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::TryStreamExt;
use kinetic_core::ports::{
    GetOptions, ObjectMeta, ObjectPath, ObjectStore, PutMode, PutOptions, StoreError,
};
use object_store::buffered::BufWriter;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path as OsPath;
use object_store::{Attribute, Attributes, ObjectStoreExt, PutPayload};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Size of the chunks read from a local file on upload.
const UPLOAD_CHUNK: usize = 4 * 1024 * 1024;

/// An [`ObjectStore`] over any `object_store` backend, addressed by URL.
#[derive(Debug, Clone)]
pub struct GcsStore {
    inner: Arc<dyn object_store::ObjectStore>,
    /// URI prefix of every object (`file:///abs/dir`, `memory://`), no trailing `/`.
    base_uri: String,
    /// Whether the backend keeps attributes such as the content type (a
    /// local directory does not: they are dropped there).
    attributes: bool,
}

impl GcsStore {
    /// Open the store a URL names: `file:///abs/dir` (created if missing) or
    /// `memory://` (a new, empty in-process store).
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        let parsed = url::Url::parse(url).map_err(|e| StoreError::InvalidInput {
            message: format!(
                "invalid store URL '{url}': {e} (expected file:///absolute/dir or memory://)"
            ),
        })?;
        match parsed.scheme() {
            "file" => {
                let dir = parsed
                    .to_file_path()
                    .map_err(|()| StoreError::InvalidInput {
                        message: format!(
                            "invalid store URL '{url}': expected file:///absolute/dir"
                        ),
                    })?;
                Self::local_dir(&dir)
            }
            "memory" => Ok(Self {
                inner: Arc::new(InMemory::new()),
                base_uri: "memory://".to_owned(),
                attributes: true,
            }),
            other => Err(StoreError::InvalidInput {
                message: format!(
                    "unsupported store URL scheme '{other}' in '{url}' (accepted: file:///absolute/dir, memory://)"
                ),
            }),
        }
    }

    /// A store in the local directory `dir` (created if missing).
    pub fn local_dir(dir: &Path) -> Result<Self, StoreError> {
        if !dir.is_absolute() {
            return Err(StoreError::InvalidInput {
                message: format!("store directory '{}' must be absolute", dir.display()),
            });
        }
        std::fs::create_dir_all(dir).map_err(|e| StoreError::InvalidInput {
            message: format!("cannot create store directory '{}': {e}", dir.display()),
        })?;
        let fs = LocalFileSystem::new_with_prefix(dir)
            .map_err(|e| map_error(e, dir.display().to_string()))?
            .with_automatic_cleanup(true);
        Ok(Self {
            inner: Arc::new(fs),
            base_uri: format!("file://{}", dir.display())
                .trim_end_matches('/')
                .to_owned(),
            attributes: false,
        })
    }

    /// Wrap an already-configured `object_store` backend whose objects the
    /// runner reaches at `base_uri` + `/` + path.
    pub fn from_object_store(inner: Arc<dyn object_store::ObjectStore>, base_uri: &str) -> Self {
        Self {
            inner,
            base_uri: base_uri.trim_end_matches('/').to_owned(),
            attributes: true,
        }
    }

    fn os_path(path: &ObjectPath) -> OsPath {
        OsPath::from_iter(path.as_str().split('/'))
    }

    fn port_path(&self, path: &OsPath) -> Result<ObjectPath, StoreError> {
        ObjectPath::parse(path.as_ref())
    }

    fn attributes(&self, options: &PutOptions) -> Attributes {
        let mut attributes = Attributes::new();
        if let (true, Some(ct)) = (self.attributes, &options.content_type) {
            attributes.insert(Attribute::ContentType, ct.clone().into());
        }
        attributes
    }
}

/// Map an `object_store` error into the port's kinds.
fn map_error(err: object_store::Error, what: String) -> StoreError {
    use object_store::Error as E;
    match err {
        E::NotFound { .. } => StoreError::NotFound { path: what },
        E::AlreadyExists { .. } => StoreError::AlreadyExists { path: what },
        E::InvalidPath { source } => StoreError::InvalidInput {
            message: format!("invalid object path {what}: {source}"),
        },
        E::PermissionDenied { source, .. } | E::Unauthenticated { source, .. } => {
            StoreError::PermissionDenied {
                message: format!("{what}: {source}"),
            }
        }
        E::Precondition { source, .. } => StoreError::Other {
            message: format!("precondition failed for {what}: {source}"),
        },
        other => StoreError::Other {
            message: format!("{what}: {other}"),
        },
    }
}

#[async_trait]
impl ObjectStore for GcsStore {
    fn uri(&self, path: &ObjectPath) -> String {
        if self.base_uri.ends_with("//") {
            format!("{}{}", self.base_uri, path)
        } else {
            format!("{}/{}", self.base_uri, path)
        }
    }

    async fn put(
        &self,
        path: &ObjectPath,
        data: Bytes,
        options: PutOptions,
    ) -> Result<(), StoreError> {
        let mode = match options.mode {
            PutMode::Overwrite => object_store::PutMode::Overwrite,
            PutMode::CreateIfAbsent => object_store::PutMode::Create,
        };
        let opts = object_store::PutOptions {
            mode,
            attributes: self.attributes(&options),
            ..Default::default()
        };
        self.inner
            .put_opts(&Self::os_path(path), PutPayload::from_bytes(data), opts)
            .await
            .map(|_| ())
            .map_err(|e| map_error(e, self.uri(path)))
    }

    async fn put_file(
        &self,
        path: &ObjectPath,
        file: &Path,
        options: PutOptions,
    ) -> Result<u64, StoreError> {
        let unreadable = |e: std::io::Error| StoreError::InvalidInput {
            message: format!("cannot read local file '{}': {e}", file.display()),
        };
        let mut reader = tokio::fs::File::open(file).await.map_err(unreadable)?;
        let len = reader.metadata().await.map_err(unreadable)?.len();
        if options.mode == PutMode::CreateIfAbsent || len <= UPLOAD_CHUNK as u64 {
            // Small files (and create-if-absent, which multipart uploads cannot
            // express) go as one conditional put.
            if options.mode == PutMode::CreateIfAbsent && len > UPLOAD_CHUNK as u64 {
                if self.head(path).await.is_ok() {
                    return Err(StoreError::AlreadyExists {
                        path: self.uri(path),
                    });
                }
                let mut plain = options.clone();
                plain.mode = PutMode::Overwrite;
                return self.put_file(path, file, plain).await;
            }
            let mut buf = Vec::with_capacity(len as usize);
            reader.read_to_end(&mut buf).await.map_err(unreadable)?;
            let size = buf.len() as u64;
            self.put(path, Bytes::from(buf), options).await?;
            return Ok(size);
        }
        // Large files stream through a buffered multipart upload: at most a
        // few chunks in memory, whatever the file size.
        let mut writer =
            BufWriter::with_capacity(self.inner.clone(), Self::os_path(path), UPLOAD_CHUNK)
                .with_attributes(self.attributes(&options));
        let mut buf = vec![0u8; UPLOAD_CHUNK];
        let mut total = 0u64;
        loop {
            let n = match reader.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => {
                    let _ = writer.abort().await;
                    return Err(unreadable(e));
                }
            };
            total += n as u64;
            if let Err(e) = writer.put(Bytes::copy_from_slice(&buf[..n])).await {
                let _ = writer.abort().await;
                return Err(map_error(e, self.uri(path)));
            }
        }
        writer.shutdown().await.map_err(|e| StoreError::Other {
            message: format!(
                "upload of '{}' to {} failed: {e}",
                file.display(),
                self.uri(path)
            ),
        })?;
        Ok(total)
    }

    async fn get(&self, path: &ObjectPath, options: GetOptions) -> Result<Bytes, StoreError> {
        let location = Self::os_path(path);
        match options.range {
            None => {
                let result = self
                    .inner
                    .get(&location)
                    .await
                    .map_err(|e| map_error(e, self.uri(path)))?;
                result
                    .bytes()
                    .await
                    .map_err(|e| map_error(e, self.uri(path)))
            }
            Some(range) => {
                let meta = self.head(path).await?;
                if range.start > meta.size || range.start > range.end {
                    return Err(StoreError::InvalidInput {
                        message: format!(
                            "range {}..{} is outside {} ({} bytes)",
                            range.start,
                            range.end,
                            self.uri(path),
                            meta.size
                        ),
                    });
                }
                let end = range.end.min(meta.size);
                if range.start == end {
                    return Ok(Bytes::new());
                }
                self.inner
                    .get_range(&location, range.start..end)
                    .await
                    .map_err(|e| map_error(e, self.uri(path)))
            }
        }
    }

    async fn get_to_file(&self, path: &ObjectPath, file: &Path) -> Result<u64, StoreError> {
        let result = self
            .inner
            .get(&Self::os_path(path))
            .await
            .map_err(|e| map_error(e, self.uri(path)))?;
        let tmp = temp_sibling(file);
        let local_err = |e: std::io::Error| StoreError::InvalidInput {
            message: format!("cannot write local file '{}': {e}", file.display()),
        };
        let mut out = tokio::fs::File::create(&tmp).await.map_err(local_err)?;
        let mut stream = result.into_stream();
        let mut total = 0u64;
        let copied: Result<(), StoreError> = async {
            while let Some(chunk) = stream
                .try_next()
                .await
                .map_err(|e| map_error(e, self.uri(path)))?
            {
                total += chunk.len() as u64;
                out.write_all(&chunk).await.map_err(local_err)?;
            }
            out.flush().await.map_err(local_err)?;
            Ok(())
        }
        .await;
        drop(out);
        if let Err(e) = copied {
            let _ = tokio::fs::remove_file(&tmp).await;
            return Err(e);
        }
        tokio::fs::rename(&tmp, file).await.map_err(local_err)?;
        Ok(total)
    }

    async fn head(&self, path: &ObjectPath) -> Result<ObjectMeta, StoreError> {
        let meta = self
            .inner
            .head(&Self::os_path(path))
            .await
            .map_err(|e| map_error(e, self.uri(path)))?;
        Ok(ObjectMeta {
            path: path.clone(),
            size: meta.size,
        })
    }

    async fn list(&self, prefix: Option<&ObjectPath>) -> Result<Vec<ObjectMeta>, StoreError> {
        let os_prefix = prefix.map(Self::os_path);
        let what = prefix.map_or_else(|| self.base_uri.clone(), |p| self.uri(p));
        let metas: Vec<object_store::ObjectMeta> = self
            .inner
            .list(os_prefix.as_ref())
            .try_collect()
            .await
            .map_err(|e| map_error(e, what))?;
        let mut out = Vec::with_capacity(metas.len());
        for meta in metas {
            out.push(ObjectMeta {
                path: self.port_path(&meta.location)?,
                size: meta.size,
            });
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    async fn delete(&self, path: &ObjectPath) -> Result<(), StoreError> {
        match self.inner.delete(&Self::os_path(path)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(map_error(e, self.uri(path))),
        }
    }
}

/// A temporary name next to `file`, so the final rename stays on one filesystem.
fn temp_sibling(file: &Path) -> PathBuf {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "download".to_owned());
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    file.with_file_name(format!(".{name}.{}-{n}.part", std::process::id()))
}
