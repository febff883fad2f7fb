//! # kinetic-store-gcs
//!
//! The [`ObjectStore`] port of `kinetic-core` over the `object_store` crate.
//! One adapter, [`GcsStore`], serves every store URL the engine uses, so
//! production, the local default and the tests share one code path:
//!
//! - `gs://bucket[/prefix]`: Google Cloud Storage over its XML API, with
//!   Application Default Credentials by default, or an explicit endpoint
//!   and credentials ([`GcsOptions`]) for emulators and `kinetic-fake-gcp`'s
//!   fake server. [`GcsStore::for_jobs_bucket`] names the bucket as Kinetic
//!   does (`{project}-kn-{cluster}-jobs`);
//! - `file:///abs/dir`: a local directory (the local backend's default store);
//! - `memory://`: an in-process store (tests).
//!
//! `object_store` already streams, retries and does multipart uploads; this
//! crate maps paths, options and errors onto the port's contract and sets
//! those mechanisms explicitly ([`RetrySettings`], part sizes): retries
//! happen once, inside `object_store`, never again on top — a transient
//! failure they gave up on comes back as `StoreError::Unavailable` with
//! `retried: true`.
//!
//! Errors are classified from `object_store`'s types, never from message
//! text, and keep the `object_store::Error` as their source. The HTTP
//! client handed to `object_store` keeps each failed answer, parsed as
//! every Google adapter parses them ([`GoogleError`]: the HTTP status as
//! its `code`, Google's status, reasons and message), in that chain, so
//! that a 503 after the retries is told from a 400 without reading the
//! message.
//!
//! Streaming: `put_file` sends files larger than [`GcsOptions::part_size`]
//! as multipart uploads with a bounded number of parts in flight, and
//! `get_to_file` writes the response as it arrives, so moving a file of any
//! size holds a few parts in memory (measured in `benches/gcs.rs`).
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
//!
//! Against GCS, or a fake of it (`kinetic_fake_gcp::FakeGcs`):
//!
//! ```no_run
//! use kinetic_store_gcs::{GcsOptions, GcsStore};
//!
//! // Production: ADC, Google's endpoint.
//! let jobs = GcsStore::open("gs://my-proj-kn-kinetic-cluster-jobs", &GcsOptions::default())?;
//! // A fake server: no auth, plain HTTP on loopback, no retries.
//! let fake = GcsStore::open("gs://bucket/prefix", &GcsOptions::emulator("http://127.0.0.1:4443"))?;
//! # Ok::<(), kinetic_core::ports::StoreError>(())
//! ```

mod error;
mod options;

pub use kinetic_gcp_common::GoogleError;
pub use options::{GCS_ENDPOINT_VAR, GcsCredentials, GcsOptions, MIN_PART_SIZE, RetrySettings};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use kinetic_core::ports::{
    GetOptions, ObjectMeta, ObjectPath, ObjectStore, PutMode, PutOptions, StoreError,
};
use object_store::buffered::BufWriter;
use object_store::gcp::{GcpCredential, GcpSigningCredential, GoogleCloudStorageBuilder};
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path as OsPath;
use object_store::prefix::PrefixStore;
use object_store::{
    Attribute, Attributes, ClientOptions, ObjectStoreExt, PutPayload, StaticCredentialProvider,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::{StatusConnector, map_error, map_io_error};

/// An [`ObjectStore`] over any `object_store` backend, addressed by URL.
///
/// Its `Debug` output names the store's URI only: the client inside holds
/// credentials, which are never printed.
#[derive(Clone)]
pub struct GcsStore {
    inner: Arc<dyn object_store::ObjectStore>,
    /// URI prefix of every object (`gs://bucket/prefix`, `file:///abs/dir`,
    /// `memory://`), no trailing `/`.
    base_uri: String,
    /// Whether the backend keeps attributes such as the content type (a
    /// local directory does not: they are dropped there).
    attributes: bool,
    /// Files larger than this go as multipart uploads of parts this size.
    part_size: usize,
    /// Parts of one upload in flight at once.
    part_concurrency: usize,
    /// Requests go through `object_store`'s retry loop (an HTTP store):
    /// transient failures come back already retried.
    retries: bool,
    /// The directory of a local store, whose uploads stage into
    /// `name#N` files first (see [`sweep_staging`]).
    local_root: Option<PathBuf>,
}

/// A local store's staging file (`name#N`) untouched this long was left
/// by an upload that was killed: an upload in progress writes to its own.
const STALE_STAGING: std::time::Duration = std::time::Duration::from_secs(600);

/// Remove the staging files (`name#N`, `N` digits: names no object can
/// have in a local store) under `dir` that were last written at least
/// `min_age` ago; returns how many. A killed upload leaves its staging
/// file behind, and nothing else ever removes it: a listing does not
/// show it.
fn sweep_staging(dir: &Path, min_age: std::time::Duration) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            removed += sweep_staging(&entry.path(), min_age);
            continue;
        }
        let name = entry.file_name();
        let staging = name
            .to_str()
            .and_then(|n| n.rsplit_once('#'))
            .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= min_age);
        if staging && old && kind.is_file() && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

impl std::fmt::Debug for GcsStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GcsStore")
            .field("uri", &self.base_uri)
            .field("part_size", &self.part_size)
            .field("part_concurrency", &self.part_concurrency)
            .field("retries", &self.retries)
            .finish_non_exhaustive()
    }
}

impl GcsStore {
    /// Open the store a URL names, with default [`GcsOptions`] for `gs://`
    /// (Google's endpoint, Application Default Credentials): see
    /// [`GcsStore::open`].
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        Self::open(url, &GcsOptions::default())
    }

    /// Open the store a URL names:
    ///
    /// - `gs://bucket[/prefix]`: that bucket (objects under `prefix/` when
    ///   given), reached as `options` say;
    /// - `file:///abs/dir`: a local directory, created if missing;
    /// - `memory://`: a new, empty in-process store.
    ///
    /// Nothing is contacted here: credentials are fetched on the first request.
    pub fn open(url: &str, options: &GcsOptions) -> Result<Self, StoreError> {
        const ACCEPTED: &str = "gs://bucket[/prefix], file:///absolute/dir or memory://";
        let parsed = url::Url::parse(url).map_err(|e| {
            StoreError::invalid_input(format!(
                "invalid store URL '{url}': {e} (expected {ACCEPTED})"
            ))
            .with_source(e)
        })?;
        match parsed.scheme() {
            "gs" => {
                let bucket = parsed.host_str().unwrap_or("");
                let prefix = parsed.path().trim_matches('/');
                Self::gcs(bucket, (!prefix.is_empty()).then_some(prefix), options).map_err(|e| {
                    match e {
                        StoreError::InvalidInput { message, source } => StoreError::InvalidInput {
                            message: format!("invalid store URL '{url}': {message}"),
                            source,
                        },
                        other => other,
                    }
                })
            }
            "file" => {
                let dir = parsed.to_file_path().map_err(|()| {
                    StoreError::invalid_input(format!(
                        "invalid store URL '{url}': expected file:///absolute/dir"
                    ))
                })?;
                Self::local_dir(&dir)
            }
            "memory" => Ok(Self::from_object_store(
                Arc::new(InMemory::new()),
                "memory://",
            )),
            other => Err(StoreError::invalid_input(format!(
                "unsupported store URL scheme '{other}' in '{url}' (accepted: {ACCEPTED})"
            ))),
        }
    }

    /// The jobs bucket of a Kinetic cluster, named as Kinetic names it:
    /// `gs://{project}-kn-{cluster}-jobs`.
    pub fn for_jobs_bucket(
        project: &str,
        cluster: &str,
        options: &GcsOptions,
    ) -> Result<Self, StoreError> {
        Self::gcs(
            &kinetic_core::config::jobs_bucket(project, cluster),
            None,
            options,
        )
    }

    /// The GCS bucket `bucket`, objects under `prefix/` when given.
    pub fn gcs(
        bucket: &str,
        prefix: Option<&str>,
        options: &GcsOptions,
    ) -> Result<Self, StoreError> {
        check_bucket_name(bucket)?;
        let prefix = match prefix
            .map(|p| p.trim_matches('/'))
            .filter(|p| !p.is_empty())
        {
            Some(p) => Some(ObjectPath::parse(p).map_err(|e| {
                StoreError::invalid_input(format!("invalid prefix '{p}' in bucket '{bucket}': {e}"))
            })?),
            None => None,
        };
        let mut client = ClientOptions::new()
            .with_timeout(options.request_timeout)
            .with_connect_timeout(options.connect_timeout);
        let mut builder = GoogleCloudStorageBuilder::new()
            .with_bucket_name(bucket)
            .with_retry(options.retry.to_object_store())
            .with_http_connector(StatusConnector);
        let mut credentials = options.credentials.clone();
        if let Some(endpoint) = &options.endpoint {
            if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
                return Err(StoreError::invalid_input(format!(
                    "invalid GCS endpoint '{endpoint}': expected an http:// or https:// URL"
                )));
            }
            client = client.with_allow_http(endpoint.starts_with("http://"));
            builder = builder.with_base_url(endpoint);
            // An emulator never gets a real token unless one is asked for.
            if matches!(credentials, GcsCredentials::ApplicationDefault) {
                credentials = GcsCredentials::Anonymous;
            }
        }
        builder = match credentials {
            GcsCredentials::ApplicationDefault => {
                // ADC's first source is the file the caller names; the
                // builder itself only looks at gcloud's file and the
                // metadata server.
                match &options.application_credentials {
                    Some(path) => builder.with_application_credentials(path.to_string_lossy()),
                    None => builder,
                }
            }
            GcsCredentials::ServiceAccountKeyFile(path) => {
                builder.with_service_account_path(path.to_string_lossy())
            }
            GcsCredentials::ServiceAccountKey(key) => builder.with_service_account_key(key),
            GcsCredentials::Anonymous => builder
                .with_credentials(Arc::new(StaticCredentialProvider::new(GcpCredential {
                    bearer: String::new(),
                })))
                .with_signing_credentials(Arc::new(StaticCredentialProvider::new(
                    GcpSigningCredential {
                        email: String::new(),
                        private_key: None,
                    },
                ))),
        };
        let gcs = builder.with_client_options(client).build().map_err(|e| {
            StoreError::invalid_input(format!(
                "cannot set up the GCS client for bucket '{bucket}': {e}"
            ))
            .with_source(e)
        })?;
        let (inner, base_uri): (Arc<dyn object_store::ObjectStore>, String) = match &prefix {
            Some(p) => (
                Arc::new(PrefixStore::new(gcs, os_path(p))),
                format!("gs://{bucket}/{p}"),
            ),
            None => (Arc::new(gcs), format!("gs://{bucket}")),
        };
        Ok(Self {
            inner,
            base_uri,
            attributes: true,
            part_size: options.part_size.max(MIN_PART_SIZE),
            part_concurrency: options.part_concurrency.max(1),
            retries: true,
            local_root: None,
        })
    }

    /// A store in the local directory `dir` (created if missing).
    pub fn local_dir(dir: &Path) -> Result<Self, StoreError> {
        if !dir.is_absolute() {
            return Err(StoreError::invalid_input(format!(
                "store directory '{}' must be absolute",
                dir.display()
            )));
        }
        std::fs::create_dir_all(dir).map_err(|e| {
            StoreError::invalid_input(format!(
                "cannot create store directory '{}': {e}",
                dir.display()
            ))
            .with_source(e)
        })?;
        let fs = LocalFileSystem::new_with_prefix(dir)
            .map_err(|e| map_error(e, dir.display().to_string(), false))?
            .with_automatic_cleanup(true);
        let mut store = Self::from_object_store(
            Arc::new(fs),
            format!("file://{}", dir.display()).trim_end_matches('/'),
        );
        store.attributes = false;
        store.local_root = Some(dir.to_owned());
        Ok(store)
    }

    /// Wrap an already-configured `object_store` backend whose objects the
    /// runner reaches at `base_uri` + `/` + path. Its transient failures are
    /// reported as not retried yet unless [`GcsStore::with_retrying_client`]
    /// says its client retries.
    pub fn from_object_store(inner: Arc<dyn object_store::ObjectStore>, base_uri: &str) -> Self {
        let defaults = GcsOptions::default();
        Self {
            inner,
            base_uri: if base_uri.ends_with("//") {
                base_uri.to_owned()
            } else {
                base_uri.trim_end_matches('/').to_owned()
            },
            attributes: true,
            part_size: defaults.part_size,
            part_concurrency: defaults.part_concurrency,
            retries: false,
            local_root: None,
        }
    }

    /// In a local store, remove what killed uploads left under `prefix`
    /// (staging files at least `min_age` old).
    async fn sweep(&self, prefix: &ObjectPath, min_age: std::time::Duration) {
        let Some(root) = &self.local_root else { return };
        let dir = root.join(prefix.as_str());
        let swept = tokio::task::spawn_blocking(move || sweep_staging(&dir, min_age)).await;
        if let Ok(n) = swept
            && n > 0
        {
            tracing::debug!(
                "{}: removed {n} file(s) a killed upload left",
                self.uri(prefix)
            );
        }
    }

    /// Say that the wrapped store's client retries failed requests itself
    /// (as `object_store`'s cloud stores do under a `RetryConfig`): its
    /// transient failures are then reported as already retried
    /// ([`StoreError::is_retried`]), so that nothing retries them again.
    /// Stores opened from a `gs://` URL are set so already.
    #[must_use]
    pub fn with_retrying_client(mut self) -> Self {
        self.retries = true;
        self
    }

    /// The URI of the store's root (`gs://bucket/prefix`, `file:///dir`, `memory://`).
    pub fn base_uri(&self) -> &str {
        &self.base_uri
    }

    /// The bucket (`gs://name`) a write found missing: GCS answers a write
    /// into a bucket that does not exist with 404, and a write of a new
    /// object finds nothing else missing.
    fn missing_bucket(&self, err: &object_store::Error) -> Option<String> {
        if !matches!(err, object_store::Error::NotFound { .. }) {
            return None;
        }
        let rest = self.base_uri.strip_prefix("gs://")?;
        let bucket = rest.split('/').next().filter(|b| !b.is_empty())?;
        Some(format!("gs://{bucket}"))
    }

    /// An `object_store` error about `what`, as the port's.
    fn fail(&self, err: object_store::Error, what: String) -> StoreError {
        map_error(err, what, self.retries)
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

    /// Stream a local file as a multipart upload; nothing is visible at
    /// `path` unless every part landed and the upload completed.
    async fn upload_in_parts(
        &self,
        path: &ObjectPath,
        file: &Path,
        mut reader: tokio::fs::File,
        options: &PutOptions,
    ) -> Result<u64, StoreError> {
        let unreadable = |e: std::io::Error| {
            StoreError::invalid_input(format!("cannot read local file '{}': {e}", file.display()))
                .with_source(e)
        };
        let mut writer =
            BufWriter::with_capacity(self.inner.clone(), os_path(path), self.part_size)
                .with_max_concurrency(self.part_concurrency)
                .with_attributes(self.attributes(options));
        let mut buf = vec![0u8; READ_BUFFER];
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
                return Err(self.fail(e, self.uri(path)));
            }
        }
        if let Err(e) = writer.shutdown().await {
            let _ = writer.abort().await;
            return Err(map_io_error(
                e,
                &format!("upload of '{}' to {}", file.display(), self.uri(path)),
                self.retries,
            ));
        }
        Ok(total)
    }
}

/// Size of the reads from a local file during a multipart upload.
const READ_BUFFER: usize = 1024 * 1024;

/// The `object_store` path of a port path: the same text, not re-encoded,
/// so the runner finds the object under the name the engine wrote.
fn os_path(path: &ObjectPath) -> OsPath {
    OsPath::parse(path.as_str()).unwrap_or_else(|_| OsPath::from_iter(path.as_str().split('/')))
}

/// Bucket names as GCS accepts them: 3–222 characters of lower-case
/// letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit.
fn check_bucket_name(bucket: &str) -> Result<(), StoreError> {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c);
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if (3..=222).contains(&bucket.len())
        && bucket.chars().all(ok_char)
        && edge(bucket.chars().next())
        && edge(bucket.chars().last())
    {
        Ok(())
    } else {
        Err(StoreError::invalid_input(format!(
            "invalid bucket name '{bucket}' (expected 3 to 222 lower-case letters, digits, '-', '_' or '.', starting and ending with a letter or digit)"
        )))
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
            .put_opts(&os_path(path), PutPayload::from_bytes(data), opts)
            .await
            .map(|_| ())
            .map_err(|e| match self.missing_bucket(&e) {
                Some(bucket) => StoreError::invalid_input(format!(
                    "the bucket {bucket} does not exist (writing {})",
                    self.uri(path)
                ))
                .with_source(e),
                None => self.fail(e, self.uri(path)),
            })
    }

    async fn put_file(
        &self,
        path: &ObjectPath,
        file: &Path,
        options: PutOptions,
    ) -> Result<u64, StoreError> {
        let unreadable = |e: std::io::Error| {
            StoreError::invalid_input(format!("cannot read local file '{}': {e}", file.display()))
                .with_source(e)
        };
        let mut reader = tokio::fs::File::open(file).await.map_err(unreadable)?;
        let len = reader.metadata().await.map_err(unreadable)?.len();
        if len > self.part_size as u64 {
            if options.mode == PutMode::CreateIfAbsent {
                // A multipart upload cannot be conditional: check first. Two
                // writers racing here may both write; the data cache only
                // uses overwrites, so nothing in the engine depends on it.
                match self.head(path).await {
                    Ok(_) => {
                        return Err(StoreError::already_exists(self.uri(path)));
                    }
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(e),
                }
            }
            return self.upload_in_parts(path, file, reader, &options).await;
        }
        // Up to one part: one request, conditional when asked.
        let mut buf = Vec::with_capacity(len as usize);
        reader.read_to_end(&mut buf).await.map_err(unreadable)?;
        let size = buf.len() as u64;
        self.put(path, Bytes::from(buf), options).await?;
        Ok(size)
    }

    async fn get(&self, path: &ObjectPath, options: GetOptions) -> Result<Bytes, StoreError> {
        let location = os_path(path);
        match options.range {
            None => {
                let result = self
                    .inner
                    .get(&location)
                    .await
                    .map_err(|e| self.fail(e, self.uri(path)))?;
                result
                    .bytes()
                    .await
                    .map_err(|e| self.fail(e, self.uri(path)))
            }
            Some(range) => {
                let meta = self.head(path).await?;
                if range.start > meta.size || range.start > range.end {
                    return Err(StoreError::invalid_input(format!(
                        "range {}..{} is outside {} ({} bytes)",
                        range.start,
                        range.end,
                        self.uri(path),
                        meta.size
                    )));
                }
                let end = range.end.min(meta.size);
                if range.start == end {
                    return Ok(Bytes::new());
                }
                self.inner
                    .get_range(&location, range.start..end)
                    .await
                    .map_err(|e| self.fail(e, self.uri(path)))
            }
        }
    }

    async fn get_to_file(&self, path: &ObjectPath, file: &Path) -> Result<u64, StoreError> {
        let target = local_target(file)?;
        let file = target.as_path();
        let result = self
            .inner
            .get(&os_path(path))
            .await
            .map_err(|e| self.fail(e, self.uri(path)))?;
        let tmp = temp_sibling(file);
        let local_err = |e: std::io::Error| {
            StoreError::invalid_input(format!("cannot write local file '{}': {e}", file.display()))
                .with_source(e)
        };
        let mut out = tokio::fs::File::create(&tmp).await.map_err(local_err)?;
        let mut stream = result.into_stream();
        let mut total = 0u64;
        let copied: Result<(), StoreError> = async {
            while let Some(chunk) = stream
                .try_next()
                .await
                .map_err(|e| self.fail(e, self.uri(path)))?
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
            .head(&os_path(path))
            .await
            .map_err(|e| self.fail(e, self.uri(path)))?;
        Ok(ObjectMeta::new(path.clone(), meta.size).with_e_tag(meta.e_tag))
    }

    async fn list(&self, prefix: Option<&ObjectPath>) -> Result<Vec<ObjectMeta>, StoreError> {
        if let Some(p) = prefix {
            self.sweep(p, STALE_STAGING).await;
        }
        let os_prefix = prefix.map(os_path);
        let what = prefix.map_or_else(|| self.base_uri.clone(), |p| self.uri(p));
        let metas: Vec<object_store::ObjectMeta> = self
            .inner
            .list(os_prefix.as_ref())
            .try_collect()
            .await
            .map_err(|e| self.fail(e, what))?;
        let mut out = Vec::with_capacity(metas.len());
        for meta in metas {
            out.push(
                ObjectMeta::new(self.port_path(&meta.location)?, meta.size).with_e_tag(meta.e_tag),
            );
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    async fn delete(&self, path: &ObjectPath) -> Result<(), StoreError> {
        match self.inner.delete(&os_path(path)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.fail(e, self.uri(path))),
        }
    }

    async fn delete_prefix(&self, prefix: &ObjectPath) -> Result<u64, StoreError> {
        // One listing, then the deletes a few at a time (GCS has no bulk
        // delete); an object already gone counts as deleted.
        let objects = self.list(Some(prefix)).await?;
        let deleted = objects.len() as u64;
        futures_util::stream::iter(objects)
            .map(|meta| async move { self.delete(&meta.path).await })
            .buffer_unordered(DELETE_CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await?;
        // Whatever is being written under a prefix that goes away goes too.
        self.sweep(prefix, std::time::Duration::ZERO).await;
        Ok(deleted)
    }
}

/// Deletes of one `delete_prefix` in flight at once.
const DELETE_CONCURRENCY: usize = 8;

/// Where a download to `file` may be renamed to (refusing directories,
/// devices and the like, which a rename would replace).
fn local_target(file: &Path) -> Result<PathBuf, StoreError> {
    kinetic_core::files::replace_target(file).map_err(|e| {
        StoreError::invalid_input(format!("cannot write local file: {e}")).with_source(e)
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names_are_checked() {
        for ok in ["abc", "my-proj-kn-kinetic-cluster-jobs", "a.b_c-1"] {
            assert!(check_bucket_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "ab", "Upper", "-lead", "trail-", "sp ace", "a/b"] {
            let err = check_bucket_name(bad).unwrap_err().to_string();
            assert!(
                err.contains("invalid bucket name") && err.contains("lower-case"),
                "{err}"
            );
        }
    }

    #[test]
    fn debug_output_names_the_uri_and_no_credentials() {
        let key = r#"{"private_key": "-----BEGIN PRIVATE KEY-----SECRETKEY", "client_email": "a@b.c", "private_key_id": "id", "disable_oauth": true, "gcs_base_url": "http://127.0.0.1:9"}"#;
        let store = GcsStore::open(
            "gs://my-bucket/p",
            &GcsOptions::default().with_credentials(GcsCredentials::ServiceAccountKey(key.into())),
        )
        .unwrap();
        let shown = format!("{store:?}");
        assert!(shown.contains("gs://my-bucket/p"), "{shown}");
        assert!(!shown.contains("SECRETKEY"), "{shown}");
    }

    #[test]
    fn a_wrapped_store_says_whether_its_client_retried() {
        let refused = || object_store::Error::Generic {
            store: "S3",
            source: Box::new(object_store::client::HttpError::new(
                object_store::client::HttpErrorKind::Connect,
                std::io::Error::other("connection refused"),
            )),
        };
        let plain = GcsStore::from_object_store(Arc::new(InMemory::new()), "memory://");
        let e = plain.fail(refused(), "memory:///x".into());
        assert!(e.is_retryable() && !e.is_retried(), "{e:?}");
        let retrying = plain.with_retrying_client();
        let e = retrying.fail(refused(), "memory:///x".into());
        assert!(e.is_retried(), "{e:?}");
        let gcs = GcsStore::open(
            "gs://some-bucket",
            &GcsOptions::emulator("http://127.0.0.1:9"),
        )
        .unwrap();
        assert!(
            gcs.fail(refused(), "gs://some-bucket/x".into())
                .is_retried()
        );
    }

    #[tokio::test]
    async fn staging_files_killed_uploads_left_are_swept() {
        // Issue 25.10: `name#1` files of killed uploads stayed in the data
        // cache for good (a listing does not show them, so nothing removed
        // them).
        let dir = tempfile::tempdir().unwrap();
        let store = GcsStore::local_dir(dir.path()).unwrap();
        let entry = ObjectPath::parse("default/data-cache/abc").unwrap();
        let file = ObjectPath::parse("default/data-cache/abc/sub/a.txt").unwrap();
        store
            .put(&file, Bytes::from_static(b"a"), PutOptions::default())
            .await
            .unwrap();
        let on_disk = dir.path().join("default/data-cache/abc/sub");
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        for name in ["a.txt#1", "a.txt#2", "b.txt#1"] {
            let f = std::fs::File::create(on_disk.join(name)).unwrap();
            f.set_modified(hour_ago).unwrap();
        }
        // An upload in progress (written just now) and a name that is no
        // staging file stay.
        std::fs::write(on_disk.join("c.txt#3"), "c").unwrap();
        let listed = store.list(Some(&entry)).await.unwrap();
        assert_eq!(listed.len(), 1, "{listed:?}");
        let mut left: Vec<String> = std::fs::read_dir(&on_disk)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["a.txt", "c.txt#3"]);
        // Deleting the entry takes everything, in progress or not.
        store.delete_prefix(&entry).await.unwrap();
        let files: Vec<_> = walk(dir.path());
        assert!(files.is_empty(), "{files:?}");
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|e| {
                if e.file_type().unwrap().is_dir() {
                    walk(&e.path())
                } else {
                    vec![e.path()]
                }
            })
            .collect()
    }

    #[test]
    fn paths_keep_their_text() {
        let p = ObjectPath::parse("default/data-cache/h/a b#c%d.txt").unwrap();
        assert_eq!(os_path(&p).as_ref(), "default/data-cache/h/a b#c%d.txt");
    }
}
