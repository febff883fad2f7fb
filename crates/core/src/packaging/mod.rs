//! Packaging the user's project as `context.zip`.
//!
//! - [`detect_package_root`] chooses the directory to ship and computes the
//!   [`PackagingPlan`] the pod uses to rebuild the client's layout.
//! - [`pack`] writes the archive: the root walked in a fixed order following
//!   symlinked directories (with a cycle guard), minus `.git`/`__pycache__`,
//!   the default exclusions (unless turned off), `.kineticignore` patterns
//!   and the given absolute paths (local `Data`), with empty directories as
//!   `rel/` entries and the plan at `.kinetic/plan.json`. The entries are
//!   those Python's `zipfile` writes in Kinetic's `zip_working_dir`.
//! - Warnings (skipped files, credential-shaped names, a large archive) come
//!   back as [`PackWarning`] values; nothing is printed.
//!
//! The archive is written to a temporary file next to the output and renamed
//! into place only when complete, so a `context.zip` that exists is always
//! whole.
//!
//! ```no_run
//! use kinetic_core::packaging::{pack, PackOptions};
//!
//! let report = pack("/home/me/proj", "/tmp/context.zip", &PackOptions::default())?;
//! for warning in &report.warnings {
//!     eprintln!("warning: {warning}");
//! }
//! println!("{} entries, sha256 {}", report.entries, report.sha256);
//! # Ok::<(), kinetic_core::packaging::PackError>(())
//! ```

mod archive;
mod fnmatch;
mod ignore;
mod manifest;
mod plan;
mod root;
mod walk;
mod warning;

pub use self::fnmatch::{FnPattern, fnmatch};
pub use self::ignore::{
    ALWAYS_EXCLUDED_DIRS, DEFAULT_EXCLUDED_DIRS, DEFAULT_EXCLUDED_FILES, IgnoreRules,
    KINETICIGNORE, SECRET_FILE_PATTERNS, is_secret_name,
};
pub use self::manifest::{Manifest, manifest};
pub use self::plan::{PLAN_ARCHIVE_NAME, PackagingPlan, PlanJsonError};
pub use self::root::{PROJECT_MARKERS, PackageRootError, PackageRootInputs, detect_package_root};
pub use self::warning::PackWarning;

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::hashing::{absolute_normalized, file_sha256};

/// Default size above which [`PackWarning::LargeArchive`] is reported:
/// 100 MB as Kinetic counts them (MiB).
pub const DEFAULT_SIZE_WARN_BYTES: u64 = 100 * 1024 * 1024;

/// Default deflate level: Python's `zipfile` default, 6. Files are deflated
/// in parallel, and files deflate cannot shrink are stored, so the archive
/// is no larger than Kinetic's and written several times faster.
pub const DEFAULT_COMPRESSION_LEVEL: u32 = 6;

/// Knobs of [`pack`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PackOptions {
    /// Paths to leave out with everything below them (local `Data` paths;
    /// relative ones are taken from the current directory). Matched under
    /// the root lexically, through canonical paths, and by file identity.
    pub exclude_paths: Vec<PathBuf>,
    /// The plan to write at `.kinetic/plan.json` (a real file there is then
    /// skipped).
    pub plan: Option<PackagingPlan>,
    /// Apply [`DEFAULT_EXCLUDED_DIRS`] and [`DEFAULT_EXCLUDED_FILES`]
    /// (Kinetic turns them off with `KINETIC_NO_DEFAULT_EXCLUDES=1`).
    pub default_excludes: bool,
    /// Warn when the archive is larger than this many bytes; `0` disables.
    pub size_warn_bytes: u64,
    /// Deflate level, 1 (fastest) to 9 (smallest).
    pub compression_level: u32,
    /// Compression threads; `None` = all cores.
    pub threads: Option<NonZeroUsize>,
    /// `fsync` the archive before renaming it into place (off by default:
    /// the rename already guarantees that no partial archive is ever seen
    /// as complete; `fsync` only adds safety against a power loss, for an
    /// artifact that is uploaded right away).
    pub durable: bool,
}

impl Default for PackOptions {
    fn default() -> Self {
        Self {
            exclude_paths: Vec::new(),
            plan: None,
            default_excludes: true,
            size_warn_bytes: DEFAULT_SIZE_WARN_BYTES,
            compression_level: DEFAULT_COMPRESSION_LEVEL,
            threads: None,
            durable: false,
        }
    }
}

impl PackOptions {
    /// Adds a path to leave out.
    pub fn exclude(mut self, path: impl Into<PathBuf>) -> Self {
        self.exclude_paths.push(path.into());
        self
    }

    /// Sets the plan written at `.kinetic/plan.json`.
    pub fn plan(mut self, plan: PackagingPlan) -> Self {
        self.plan = Some(plan);
        self
    }

    /// Turns the default exclusions on or off.
    pub fn default_excludes(mut self, on: bool) -> Self {
        self.default_excludes = on;
        self
    }

    /// Sets the size warning threshold in bytes (`0` disables it).
    pub fn size_warn_bytes(mut self, bytes: u64) -> Self {
        self.size_warn_bytes = bytes;
        self
    }

    /// Sets the deflate level (clamped to 1..=9).
    pub fn compression_level(mut self, level: u32) -> Self {
        self.compression_level = level.clamp(1, 9);
        self
    }

    /// Uses `n` compression threads (`0` means all cores; at most
    /// [`crate::hashing::MAX_THREADS`]).
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = NonZeroUsize::new(n.min(crate::hashing::MAX_THREADS));
        self
    }

    /// Whether to `fsync` before the rename.
    pub fn durable(mut self, on: bool) -> Self {
        self.durable = on;
        self
    }
}

/// What [`pack`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PackReport {
    /// The archive written.
    pub path: PathBuf,
    /// ZIP entries: files, empty directories and the plan.
    pub entries: usize,
    /// File entries (the plan not counted).
    pub files: usize,
    /// Empty-directory entries.
    pub dirs: usize,
    /// File entries stored uncompressed because deflate could not shrink
    /// them (random or already compressed data, tiny files).
    pub stored: usize,
    /// Uncompressed bytes of the archived files.
    pub bytes_in: u64,
    /// Size of the archive.
    pub bytes_out: u64,
    /// SHA-256 of the archive, lower-case hex (what the runner verifies).
    pub sha256: String,
    /// What was skipped or should be known, in walk order, then the
    /// credential and size warnings.
    pub warnings: Vec<PackWarning>,
}

/// Why the archive could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PackError {
    /// The package root does not exist.
    #[error("{}: the package root does not exist", path.display())]
    RootNotFound {
        /// The root.
        path: PathBuf,
    },
    /// The package root is not a directory.
    #[error("{}: the package root is not a directory", path.display())]
    RootNotADirectory {
        /// The root.
        path: PathBuf,
    },
    /// The package root cannot be listed.
    #[error("{}: cannot list the package root: {source}", path.display())]
    RootUnreadable {
        /// The root.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The output path holds something other than a regular file (a
    /// directory, a device, a FIFO…), which the archive must not replace.
    #[error(transparent)]
    OutputNotAFile(#[from] crate::files::NotReplaceable),
    /// Creating, writing or renaming the archive failed.
    #[error("{}: cannot write the archive: {source}", path.display())]
    Write {
        /// The archive path (or its temporary file).
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// The package root's walk: what [`pack`] would archive, with the warnings
/// of reading `.kineticignore`.
fn walk_root(
    root: &Path,
    out: Option<&Path>,
    options: &PackOptions,
) -> Result<(Vec<walk::Step>, Vec<PackWarning>), PackError> {
    let as_abs = |p: &Path| {
        absolute_normalized(p).map_err(|e| PackError::Write {
            path: p.to_path_buf(),
            source: io::Error::other(e.to_string()),
        })
    };
    match fs::metadata(root) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(PackError::RootNotADirectory {
                path: root.to_path_buf(),
            });
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(PackError::RootNotFound {
                path: root.to_path_buf(),
            });
        }
        Err(source) => {
            return Err(PackError::RootUnreadable {
                path: root.to_path_buf(),
                source,
            });
        }
    }
    let mut warnings = Vec::new();
    let ignore_path = root.join(KINETICIGNORE);
    let ignore = if ignore_path.is_file() {
        match fs::read(&ignore_path) {
            Ok(bytes) => IgnoreRules::parse(&String::from_utf8_lossy(&bytes)),
            Err(e) => {
                warnings.push(PackWarning::IgnoreFileUnreadable {
                    path: ignore_path,
                    reason: e.to_string(),
                });
                IgnoreRules::default()
            }
        }
    } else {
        IgnoreRules::default()
    };
    // The output itself is never archived (an old `context.zip` inside the
    // root, say).
    let mut exclude_paths = options
        .exclude_paths
        .iter()
        .map(|p| as_abs(p))
        .collect::<Result<Vec<_>, _>>()?;
    exclude_paths.extend(out.map(Path::to_path_buf));
    let exclusions = walk::Exclusions::new(
        root,
        options.default_excludes,
        ignore,
        &exclude_paths,
        options.plan.is_some(),
    );
    let (steps, walk_warnings) = walk::walk(root, &exclusions)?;
    warnings.extend(walk_warnings);
    Ok((steps, warnings))
}

/// Writes the `context.zip` of `root` to `out`.
pub fn pack(
    root: impl AsRef<Path>,
    out: impl AsRef<Path>,
    options: &PackOptions,
) -> Result<PackReport, PackError> {
    let as_abs = |p: &Path| {
        absolute_normalized(p).map_err(|e| PackError::Write {
            path: p.to_path_buf(),
            source: io::Error::other(e.to_string()),
        })
    };
    let root = as_abs(root.as_ref())?;
    let out = as_abs(out.as_ref())?;
    // Refuse an output that is not a file before doing any work; a symlink
    // is written through, so the temporary file goes beside its target.
    let target = crate::files::replace_target(&out)?;
    let (steps, mut warnings) = walk_root(&root, Some(&out), options)?;

    let threads = options
        .threads
        .or_else(|| std::thread::available_parallelism().ok())
        .map_or(1, NonZeroUsize::get);
    let plan_json = options.plan.as_ref().map(PackagingPlan::to_python_json);
    let temp = TempFile::create_next_to(&target)?;
    let write_err = |source: io::Error| PackError::Write {
        path: temp.path.clone(),
        source,
    };
    let writer = BufWriter::with_capacity(1 << 20, temp.file()?);
    let (writer, written) = archive::write_archive(
        writer,
        steps,
        plan_json.as_deref(),
        options.compression_level,
        threads,
    )
    .map_err(write_err)?;
    let file = writer.into_inner().map_err(|e| write_err(e.into_error()))?;
    if options.durable {
        file.sync_all().map_err(write_err)?;
    }
    let bytes_out = file.metadata().map_err(write_err)?.len();
    drop(file);
    let sha256 = hex::encode(file_sha256(&temp.path).map_err(|e| write_err(io::Error::other(e)))?);
    // Checked again at the rename: a path that became a directory or a
    // device meanwhile is still not replaced.
    temp.persist(&crate::files::replace_target(&out)?)?;

    warnings.extend(written.warnings);
    if !written.secrets.is_empty() {
        let mut files = written.secrets;
        files.sort();
        warnings.push(PackWarning::SecretFiles {
            files,
            root: root.clone(),
        });
    }
    if options.size_warn_bytes > 0 && bytes_out > options.size_warn_bytes {
        let mut largest = written.archived;
        largest.sort_unstable_by(|a, b| b.cmp(a));
        largest.truncate(5);
        warnings.push(PackWarning::LargeArchive {
            bytes: bytes_out,
            threshold: options.size_warn_bytes,
            largest: largest
                .into_iter()
                .map(|(size, name)| (name, size))
                .collect(),
        });
    }
    Ok(PackReport {
        path: out,
        entries: written.entries,
        files: written.files,
        dirs: written.dirs,
        stored: written.stored,
        bytes_in: written.bytes_in,
        bytes_out,
        sha256,
        warnings,
    })
}

/// A temporary file next to the final path, removed unless persisted.
#[derive(Debug)]
struct TempFile {
    path: PathBuf,
    file: Option<File>,
}

impl TempFile {
    fn create_next_to(out: &Path) -> Result<Self, PackError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let dir = out.parent().unwrap_or(Path::new("/"));
        let name = out
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "context.zip".to_owned());
        let mut attempt = 0;
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => {
                    return Ok(Self {
                        path,
                        file: Some(file),
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => {
                    attempt += 1;
                }
                Err(source) => {
                    return Err(PackError::Write {
                        path: out.to_path_buf(),
                        source,
                    });
                }
            }
        }
    }

    fn file(&self) -> Result<File, PackError> {
        let file = self.file.as_ref().ok_or_else(|| PackError::Write {
            path: self.path.clone(),
            source: io::Error::other("temporary file already handed out"),
        })?;
        file.try_clone().map_err(|source| PackError::Write {
            path: self.path.clone(),
            source,
        })
    }

    fn persist(mut self, out: &Path) -> Result<(), PackError> {
        self.file = None;
        fs::rename(&self.path, out).map_err(|source| PackError::Write {
            path: out.to_path_buf(),
            source,
        })?;
        self.path = PathBuf::new();
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.path.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.path);
        }
    }
}
