//! The `ObjectStore` port: where job artifacts, data and results live.
//!
//! Narrow on purpose: put, get (with a range), head, list under a prefix,
//! delete a prefix, and create-if-absent; conveniences written on top of
//! those live in [`ObjectStoreExt`]. The adapter in `kinetic-store-gcs`
//! implements it over the `object_store` crate (GCS, local directories,
//! memory), which already streams, does multipart uploads and retries —
//! and reports what it gave up on as already retried
//! ([`StoreError::is_retried`]), so the engine never retries a store call;
//! the testkit has an in-memory fake. Both pass the same conformance suite,
//! as does the fault-injecting decorator [`FaultyStore`].

use std::fmt;
use std::ops::Range;
use std::path::Path;

use async_trait::async_trait;
use bytes::Bytes;

use super::BoxError;

/// The path of an object inside a store: `/`-separated segments, no leading
/// or trailing `/`, no empty, `.` or `..` segment, no control characters.
///
/// ```
/// use kinetic_core::ports::ObjectPath;
/// let p = ObjectPath::parse("job-0a1b2c3d/spec.json").unwrap();
/// assert_eq!(p.child("x").unwrap().as_str(), "job-0a1b2c3d/spec.json/x");
/// assert!(ObjectPath::parse("../etc/passwd").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectPath(String);

impl ObjectPath {
    /// Validate a path; the error names it and says what is accepted.
    pub fn parse(path: impl Into<String>) -> Result<Self, StoreError> {
        let path = path.into();
        let bad = |why: &str| {
            StoreError::invalid_input(format!(
                "invalid object path '{}': {why} (expected '/'-separated names, no leading or trailing '/', no '.' or '..' segments)",
                path.escape_debug()
            ))
        };
        if path.is_empty() {
            return Err(bad("it is empty"));
        }
        if path.chars().any(char::is_control) {
            return Err(bad("it holds a control character"));
        }
        for segment in path.split('/') {
            match segment {
                "" => return Err(bad("it has an empty segment")),
                "." | ".." => return Err(bad("it has a '.' or '..' segment")),
                _ => {}
            }
        }
        Ok(Self(path))
    }

    /// This path followed by one more segment (or several, `/`-separated).
    pub fn child(&self, name: &str) -> Result<Self, StoreError> {
        Self::parse(format!("{}/{name}", self.0))
    }

    /// The path as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The last segment.
    pub fn file_name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or(&self.0)
    }

    /// True when `self` lies strictly under `prefix`, segment-wise
    /// (`a/b` is under `a`; `ab` and `a` itself are not).
    pub fn is_under(&self, prefix: &ObjectPath) -> bool {
        self.0.starts_with(&prefix.0) && self.0.as_bytes().get(prefix.0.len()) == Some(&b'/')
    }
}

impl fmt::Display for ObjectPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What is known about a stored object.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ObjectMeta {
    /// Where it is.
    pub path: ObjectPath,
    /// Its size in bytes.
    pub size: u64,
    /// A tag of this version of the object (GCS's ETag), where the store
    /// has one: it changes whenever the object is written again.
    pub e_tag: Option<String>,
}

impl ObjectMeta {
    /// The object at `path`, of `size` bytes, without a version tag.
    pub fn new(path: ObjectPath, size: u64) -> Self {
        Self {
            path,
            size,
            e_tag: None,
        }
    }

    /// With the version tag `e_tag`.
    pub fn with_e_tag(mut self, e_tag: Option<String>) -> Self {
        self.e_tag = e_tag;
        self
    }
}

/// Whether a put may replace an existing object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PutMode {
    /// Replace whatever is there (the default).
    #[default]
    Overwrite,
    /// Write only if nothing is at the path; otherwise fail with
    /// [`StoreError::AlreadyExists`] and leave the existing object as it was.
    CreateIfAbsent,
}

/// Options of a put. `Default` is an overwrite with no content type.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct PutOptions {
    /// Overwrite or create-if-absent.
    pub mode: PutMode,
    /// A MIME type to record with the object, where the store keeps one.
    pub content_type: Option<String>,
}

impl PutOptions {
    /// Options for create-if-absent.
    pub fn create_if_absent() -> Self {
        Self {
            mode: PutMode::CreateIfAbsent,
            ..Self::default()
        }
    }

    /// Options with a content type.
    pub fn with_content_type(mut self, content_type: &str) -> Self {
        self.content_type = Some(content_type.to_owned());
        self
    }
}

/// Options of a get. `Default` reads the whole object.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct GetOptions {
    /// Only these bytes (end exclusive). A range that starts past the end is
    /// [`StoreError::InvalidInput`]; one that ends past it is cut at the end.
    pub range: Option<Range<u64>>,
}

impl GetOptions {
    /// Read only `range`.
    pub fn range(range: Range<u64>) -> Self {
        Self { range: Some(range) }
    }
}

/// Errors of an [`ObjectStore`], organised by what the caller does next.
///
/// Each error's `Display` is a complete sentence for a person (what was
/// being done, on which object, and what the store said); its
/// [`source`](std::error::Error::source) is the typed cause an adapter got
/// (an `object_store::Error`, an `std::io::Error`, …) for a program to
/// inspect. Adapters classify from the cause's type, never from its text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No object at this path: treat it as absent.
    #[error("object not found: {path}")]
    NotFound {
        /// The missing object (as the store's URI where known).
        path: String,
        /// What the store reported, where it reported something.
        source: Option<BoxError>,
    },
    /// A create-if-absent put found an object already there: someone else
    /// wrote it first.
    #[error("object already exists: {path}")]
    AlreadyExists {
        /// The existing object.
        path: String,
        /// What the store reported, where it reported something.
        source: Option<BoxError>,
    },
    /// The request itself was wrong (bad path, bad range, unreadable local
    /// file): fix the input; retrying will not help.
    #[error("{message}")]
    InvalidInput {
        /// What was wrong and what is accepted.
        message: String,
        /// The cause, where there is one (the local file's I/O error…).
        source: Option<BoxError>,
    },
    /// The credentials are missing, expired, or lack a permission: fix
    /// them; retrying will not help.
    #[error("permission denied: {message}")]
    PermissionDenied {
        /// What was refused, and which permission is missing where known.
        message: String,
        /// What the store reported.
        source: Option<BoxError>,
    },
    /// This store cannot do what was asked (an operation its kind of
    /// storage lacks): use another store; retrying will not help.
    #[error("not supported by this store: {message}")]
    Unsupported {
        /// What cannot be done.
        message: String,
        /// What the store reported.
        source: Option<BoxError>,
    },
    /// The store could not be reached or asked us to slow down: the same
    /// call may succeed later. When `retried` is true the call already went
    /// through a retry layer that spent its budget (`object_store`'s
    /// `RetryConfig` for a cloud store): nobody retries it again.
    #[error("store unavailable: {message}")]
    Unavailable {
        /// What happened.
        message: String,
        /// The call was already retried as its retry policy allows.
        retried: bool,
        /// What the store reported.
        source: Option<BoxError>,
    },
    /// Anything else the store reported: an answer nothing expected.
    #[error("store error: {message}")]
    Other {
        /// What happened.
        message: String,
        /// What the store reported.
        source: Option<BoxError>,
    },
}

impl StoreError {
    /// [`StoreError::NotFound`] for `path`.
    pub fn not_found(path: impl Into<String>) -> Self {
        Self::NotFound {
            path: path.into(),
            source: None,
        }
    }

    /// [`StoreError::AlreadyExists`] for `path`.
    pub fn already_exists(path: impl Into<String>) -> Self {
        Self::AlreadyExists {
            path: path.into(),
            source: None,
        }
    }

    /// [`StoreError::Unsupported`].
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::Unsupported {
            message: message.into(),
            source: None,
        }
    }

    /// True for [`StoreError::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    /// True for [`StoreError::AlreadyExists`].
    pub fn is_already_exists(&self) -> bool {
        matches!(self, Self::AlreadyExists { .. })
    }

    /// True for [`StoreError::InvalidInput`] and [`StoreError::Unsupported`]:
    /// the request must change before it can succeed.
    pub fn is_invalid_input(&self) -> bool {
        matches!(self, Self::InvalidInput { .. } | Self::Unsupported { .. })
    }
}

crate::retry::port_error_kinds!(
    StoreError,
    sourced: [NotFound, AlreadyExists, Unsupported],
    bare: []
);

/// Where a job's objects live: a GCS bucket, a local directory, memory.
///
/// Implementations MUST be safe to share between tasks (`Arc<dyn ObjectStore>`)
/// and MUST make every completed `put`/`put_file` visible, whole, to every
/// later `get`/`head`/`list` (read-after-write); an interrupted write MUST
/// NOT leave a partial object visible at the path.
///
/// Every method is required, with no default, so that a decorator forwards
/// each one. A store that retries (a cloud store's client) MUST report a
/// transient failure it gave up on as [`StoreError::Unavailable`] with
/// `retried: true`, keeping its own error as the source.
#[async_trait]
pub trait ObjectStore: fmt::Debug + Send + Sync + 'static {
    /// The URI a runner uses to read the object (`gs://bucket/p`,
    /// `file:///abs/p`, `memory:///p`). MUST be stable for the same path.
    fn uri(&self, path: &ObjectPath) -> String;

    /// Store `data` at `path`.
    ///
    /// With [`PutMode::Overwrite`] it MUST replace any existing object.
    /// With [`PutMode::CreateIfAbsent`] it MUST fail with
    /// [`StoreError::AlreadyExists`] when an object is there, leaving it untouched.
    async fn put(
        &self,
        path: &ObjectPath,
        data: Bytes,
        options: PutOptions,
    ) -> Result<(), StoreError>;

    /// Store the content of the local file `file` at `path`, streaming it
    /// (implementations SHOULD NOT hold the whole file in memory; large files
    /// SHOULD go as multipart uploads). Returns the number of bytes stored.
    /// A local file that cannot be read MUST be [`StoreError::InvalidInput`]
    /// naming it. Same modes as [`ObjectStore::put`].
    async fn put_file(
        &self,
        path: &ObjectPath,
        file: &Path,
        options: PutOptions,
    ) -> Result<u64, StoreError>;

    /// Read an object, or the requested range of it.
    /// A missing object MUST be [`StoreError::NotFound`].
    async fn get(&self, path: &ObjectPath, options: GetOptions) -> Result<Bytes, StoreError>;

    /// Copy an object into the local file `file`, streaming it, and return
    /// its size. The file MUST appear only once complete (written aside, then
    /// renamed). A missing object MUST be [`StoreError::NotFound`] and leave
    /// no file behind. A `file` that holds anything but a regular file (a
    /// directory, a device, a FIFO) MUST be refused with
    /// [`StoreError::InvalidInput`] and left as it is; a symlink to a
    /// regular file is written through
    /// ([`crate::files::replace_target`]).
    async fn get_to_file(&self, path: &ObjectPath, file: &Path) -> Result<u64, StoreError>;

    /// Size (and version tag) of an object. A missing object MUST be
    /// [`StoreError::NotFound`]. A store that gives version tags MUST give
    /// a different one after the object is written again, and the same one
    /// as [`ObjectStore::list`].
    async fn head(&self, path: &ObjectPath) -> Result<ObjectMeta, StoreError>;

    /// Every object strictly under `prefix` (segment-wise: `a/b` is under
    /// `a`; `ab` and an object named `a` itself are not), at any depth,
    /// sorted by path; `None` lists the whole store. An empty listing is
    /// not an error.
    async fn list(&self, prefix: Option<&ObjectPath>) -> Result<Vec<ObjectMeta>, StoreError>;

    /// Delete one object. Deleting a missing object MUST succeed (idempotent).
    async fn delete(&self, path: &ObjectPath) -> Result<(), StoreError>;

    /// Delete every object under `prefix` (segment-wise, as [`ObjectStore::list`])
    /// and return how many were deleted. An empty prefix MUST succeed with 0.
    /// Required, with no default, so that a wrapper cannot lose a store's
    /// own bulk delete (or a decorator its effect on it).
    async fn delete_prefix(&self, prefix: &ObjectPath) -> Result<u64, StoreError>;
}

/// Conveniences over any [`ObjectStore`], written once in terms of its
/// required methods (as `object_store`'s `ObjectStoreExt`): a store
/// implements the port, and gets these for free. Bring the trait into
/// scope to use them.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use kinetic_core::ports::{ObjectPath, ObjectStoreExt};
/// use kinetic_testkit::MemoryStore;
///
/// let store = MemoryStore::new();
/// let path = ObjectPath::parse("job-0a1b2c3d/handle.json").unwrap();
/// assert_eq!(store.get_if_exists(&path).await.unwrap(), None);
/// store.put_json(&path, r#"{"job_id": "job-0a1b2c3d"}"#.to_owned()).await.unwrap();
/// assert!(store.exists(&path).await.unwrap());
/// # });
/// ```
#[async_trait]
pub trait ObjectStoreExt: ObjectStore {
    /// The object's bytes, or `None` when there is no such object.
    async fn get_if_exists(&self, path: &ObjectPath) -> Result<Option<Bytes>, StoreError> {
        match self.get(path, GetOptions::default()).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// True when an object is at `path` (one `head`).
    async fn exists(&self, path: &ObjectPath) -> Result<bool, StoreError> {
        match self.head(path).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Store a JSON document (`application/json`), replacing any object there.
    async fn put_json(&self, path: &ObjectPath, json: String) -> Result<(), StoreError> {
        self.put_text(path, json, "application/json").await
    }

    /// Store a text document with its content type, replacing any object there.
    async fn put_text(
        &self,
        path: &ObjectPath,
        text: String,
        content_type: &str,
    ) -> Result<(), StoreError> {
        self.put(
            path,
            Bytes::from(text),
            PutOptions::default().with_content_type(content_type),
        )
        .await
    }
}

impl<T: ObjectStore + ?Sized> ObjectStoreExt for T {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_paths_are_validated() {
        for ok in [
            "a",
            "a/b",
            "job-1/spec.json",
            "default/data-cache/ab/x y.txt",
        ] {
            assert!(ObjectPath::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["", "/a", "a/", "a//b", "./a", "a/../b", "a/\nb"] {
            let err = ObjectPath::parse(bad).unwrap_err().to_string();
            assert!(err.contains("invalid object path"), "{bad}: {err}");
        }
    }

    #[test]
    fn is_under_is_segment_wise_and_strict() {
        let p = |s: &str| ObjectPath::parse(s).unwrap();
        assert!(p("a/b").is_under(&p("a")));
        assert!(p("a/b/c").is_under(&p("a")));
        assert!(!p("a").is_under(&p("a")));
        assert!(!p("ab").is_under(&p("a")));
        assert!(!p("a").is_under(&p("a/b")));
    }

    #[test]
    fn only_unavailable_is_retryable() {
        use crate::retry::Retryable;
        assert!(StoreError::unavailable("x").is_retryable());
        assert!(!StoreError::unavailable("x").is_retried());
        assert!(!StoreError::not_found("x").is_retryable());
        assert!(!StoreError::permission_denied("x").is_retryable());
        let retried = StoreError::unavailable("x").into_retried(3);
        assert!(retried.is_retryable() && retried.is_retried());
        assert!(!StoreError::not_found("x").into_retried(3).is_retried());
    }

    #[test]
    fn the_cause_is_kept_as_the_source() {
        use std::error::Error as _;
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "no");
        let err = StoreError::invalid_input("cannot read local file 'x'").with_source(io);
        let cause = err.source().expect("a source");
        assert_eq!(
            cause.downcast_ref::<std::io::Error>().map(|e| e.kind()),
            Some(std::io::ErrorKind::PermissionDenied)
        );
        assert_eq!(err.to_string(), "cannot read local file 'x'");
    }
}
