//! The `ObjectStore` port: where job artifacts, data and results live.
//!
//! Narrow on purpose: put, get (with a range), head, list under a prefix,
//! delete a prefix, and create-if-absent. The adapter in `kinetic-store-gcs`
//! implements it over the `object_store` crate (GCS, local directories,
//! memory), which already retries, streams and does multipart uploads; the
//! testkit has an in-memory fake. Both pass the same conformance suite, as
//! does the fault-injecting decorator [`FaultyStore`].

mod fault;

use std::fmt;
use std::ops::Range;
use std::path::Path;

use async_trait::async_trait;
use bytes::Bytes;

pub use fault::FaultyStore;

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
        let bad = |why: &str| StoreError::InvalidInput {
            message: format!(
                "invalid object path '{}': {why} (expected '/'-separated names, no leading or trailing '/', no '.' or '..' segments)",
                path.escape_debug()
            ),
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
pub struct ObjectMeta {
    /// Where it is.
    pub path: ObjectPath,
    /// Its size in bytes.
    pub size: u64,
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
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No object at this path.
    #[error("object not found: {path}")]
    NotFound {
        /// The missing object (as the store's URI where known).
        path: String,
    },
    /// A create-if-absent put found an object already there.
    #[error("object already exists: {path}")]
    AlreadyExists {
        /// The existing object.
        path: String,
    },
    /// The request itself was wrong (bad path, bad range, unreadable local file).
    #[error("{message}")]
    InvalidInput {
        /// What was wrong and what is accepted.
        message: String,
    },
    /// The credentials lack a permission; retrying will not help.
    #[error("permission denied: {message}")]
    PermissionDenied {
        /// What was refused, and which permission is missing where known.
        message: String,
    },
    /// The store could not be reached or asked us to slow down; retrying may help.
    #[error("store unavailable: {message}")]
    Unavailable {
        /// What happened.
        message: String,
    },
    /// Anything else the store reported.
    #[error("store error: {message}")]
    Other {
        /// What happened.
        message: String,
    },
}

impl StoreError {
    /// True when the same call may succeed if tried again later.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }

    /// True for [`StoreError::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }
}

/// Where a job's objects live: a GCS bucket, a local directory, memory.
///
/// Implementations MUST be safe to share between tasks (`Arc<dyn ObjectStore>`)
/// and MUST make every completed `put`/`put_file` visible, whole, to every
/// later `get`/`head`/`list` (read-after-write); an interrupted write MUST
/// NOT leave a partial object visible at the path.
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
    /// no file behind.
    async fn get_to_file(&self, path: &ObjectPath, file: &Path) -> Result<u64, StoreError>;

    /// Size of an object. A missing object MUST be [`StoreError::NotFound`].
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
    async fn delete_prefix(&self, prefix: &ObjectPath) -> Result<u64, StoreError> {
        let objects = self.list(Some(prefix)).await?;
        let mut deleted = 0;
        for meta in objects {
            self.delete(&meta.path).await?;
            deleted += 1;
        }
        Ok(deleted)
    }
}

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
        assert!(
            StoreError::Unavailable {
                message: "x".into()
            }
            .is_retryable()
        );
        assert!(!StoreError::NotFound { path: "x".into() }.is_retryable());
        assert!(
            !StoreError::PermissionDenied {
                message: "x".into()
            }
            .is_retryable()
        );
    }
}
