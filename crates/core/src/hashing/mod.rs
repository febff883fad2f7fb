//! Content hashes of local data, bit-compatible with Kinetic.
//!
//! The data cache is keyed by these hashes and shared with the Python tool,
//! so the algorithm is Kinetic's to the bit. With `H` =
//! SHA-256:
//!
//! - a file: `H("file:" ‖ H(basename ‖ 0x00 ‖ bytes))`, where `basename` is
//!   the last component of the absolute, lexically normalised path the user
//!   gave (a symlink's own name; its target's bytes);
//! - a directory: `H("dir:" ‖ D1 ‖ … ‖ Dn)` with `Di = H(relpath ‖ 0x00 ‖
//!   bytes)` over the files of a pre-order walk (each directory's files
//!   sorted by name, then its subdirectories sorted by name), `relpath`
//!   joined with `/`. Symlinked subdirectories contribute nothing; symlinks
//!   to files are read through; a broken symlink is an error; empty
//!   directories contribute nothing, so an empty root hashes to `H("dir:")`.
//!
//! Files of a directory are hashed in parallel (one thread per core, each
//! with one reusable buffer, each file streamed) and the per-file digests
//! folded in walk order, so the result does not depend on the thread count.
//! When the files turn out not to be in the page cache, a pool of reader
//! threads asks the kernel to read the files ahead of the hashing threads,
//! so that a cold disk has hundreds of reads in flight instead of one per
//! core ([`HashOptions::readers`]). A single large file is read on a helper
//! thread while the calling thread hashes, which keeps SHA-256 busy all the
//! time.
//!
//! Where Kinetic's behaviour is an accident we still match it, and say so:
//! a subdirectory that cannot be listed is skipped silently (`os.walk`
//! ignores the error); [`HashReport::skipped_dirs`] names such directories so
//! a caller can warn. We differ in three places where Kinetic has no useful
//! answer: a root directory that cannot be listed is an error (Kinetic
//! would hash it as empty), special files (FIFOs, sockets, devices) are an
//! error (Kinetic would block on a FIFO or read a device), and a name that
//! is not UTF-8 is an error naming the path (Kinetic fails with an encoding
//! error).
//!
//! ```no_run
//! use kinetic_core::hashing::{content_hash, content_hash_with, HashOptions};
//!
//! let hash = content_hash("data/train")?;
//! println!("{hash}"); // 64 lower-case hex digits
//! let report = content_hash_with("data/train", &HashOptions::default().threads(1))?;
//! assert_eq!(report.hash, hash);
//! # Ok::<(), kinetic_core::hashing::HashError>(())
//! ```

mod ordered;
mod prefetch;
mod read;
mod walk;

pub(crate) use ordered::{batched, batched_by_weight, ordered_map};

use std::fmt;
use std::fs::File;
use std::io;
use std::num::NonZeroUsize;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use self::prefetch::{CacheState, Prefetcher, Probe};
use self::walk::{DataWalk, FileJob};

/// Size of the read buffer each hashing thread reuses for its files.
const WORKER_BUFFER: usize = 256 << 10;
/// Files handed to a hashing thread at once: per-message costs (channel
/// operations, wake-ups of the folding thread) are paid once per batch.
/// With the window below this also sets how far ahead of the hashing the
/// walk runs, and so how many files a cold tree has in flight.
const BATCH: usize = 32;
/// How many batches may be in flight (queued, hashing, or waiting to be
/// folded) per thread.
const WINDOW_PER_THREAD: usize = 4;
/// A read of an uncached file taking at least this long means the disk is
/// cold (a read from the page cache takes a few microseconds).
const COLD_READ: Duration = Duration::from_micros(50);

/// A SHA-256 content hash, shown and parsed as 64 lower-case hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentHash([u8; 32]);

impl ContentHash {
    /// Wraps a raw 32-byte digest.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The raw 32-byte digest.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The 64 lower-case hex digits (same as `to_string()`).
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContentHash({})", self.to_hex())
    }
}

/// Why a string is not a [`ContentHash`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a content hash: expected 64 lower-case hex digits")]
pub struct ParseContentHashError {
    /// The rejected input.
    pub input: String,
}

impl FromStr for ContentHash {
    type Err = ParseContentHashError;

    /// Accepts exactly 64 lower-case hex digits, the only spelling Kinetic
    /// writes (cache prefixes are case-sensitive).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseContentHashError {
            input: s.to_owned(),
        };
        if s.len() != 64 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(err());
        }
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(s, &mut bytes).map_err(|_| err())?;
        Ok(Self(bytes))
    }
}

impl serde::Serialize for ContentHash {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_hex())
    }
}

impl<'de> serde::Deserialize<'de> for ContentHash {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Whether a hashed path was a single file or a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HashKind {
    /// A single file (or a symlink to one).
    File,
    /// A directory (or a symlink to one).
    Dir,
}

impl fmt::Display for HashKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::File => "file",
            Self::Dir => "dir",
        })
    }
}

/// The most worker threads hashing and packing start; asking for more
/// gives this many (each thread holds a read buffer and a share of the
/// in-flight window, so the bound also bounds memory).
pub const MAX_THREADS: usize = 256;

/// Read-ahead threads of a cold directory unless [`HashOptions::readers`]
/// says otherwise.
pub const DEFAULT_READERS: usize = 16;

/// Knobs of [`content_hash_with`]. The result never depends on them.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct HashOptions {
    /// Threads hashing the files of a directory; `None` = all cores.
    pub threads: Option<NonZeroUsize>,
    /// Threads that, once files turn out not to be in the page cache, open
    /// the files ahead of the hashing threads and ask the kernel to read
    /// them, so that a cold disk has many reads in flight; `None` =
    /// [`DEFAULT_READERS`]. They start only when a file is found uncached.
    pub readers: Option<NonZeroUsize>,
    /// Keep each file's name, size and digest in [`HashReport::listing`].
    pub listing: bool,
}

impl HashOptions {
    /// Uses `n` hashing threads (`0` means all cores; at most
    /// [`MAX_THREADS`]).
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = NonZeroUsize::new(n.min(MAX_THREADS));
        self
    }

    /// Uses `n` read-ahead threads for a cold directory (`0` means
    /// [`DEFAULT_READERS`]; at most [`MAX_THREADS`]).
    pub fn readers(mut self, n: usize) -> Self {
        self.readers = NonZeroUsize::new(n.min(MAX_THREADS));
        self
    }

    /// Keep the listing of what was hashed ([`HashReport::listing`]).
    pub fn listing(mut self, listing: bool) -> Self {
        self.listing = listing;
        self
    }

    fn reader_count(&self) -> usize {
        self.readers
            .map_or(DEFAULT_READERS, NonZeroUsize::get)
            .min(MAX_THREADS)
    }

    fn thread_count(&self) -> usize {
        self.threads
            .or_else(|| std::thread::available_parallelism().ok())
            .map_or(1, NonZeroUsize::get)
            .min(MAX_THREADS)
    }
}

/// A content hash and what went into it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HashReport {
    /// The content hash.
    pub hash: ContentHash,
    /// File or directory.
    pub kind: HashKind,
    /// Number of files hashed.
    pub files: u64,
    /// Number of content bytes hashed.
    pub bytes: u64,
    /// Subdirectories that could not be listed and were skipped, as Kinetic
    /// skips them (they do not change the hash).
    pub skipped_dirs: Vec<PathBuf>,
    /// Files handed to the read-ahead threads because the directory was
    /// found not to be in the page cache (0 for a warm tree or a file).
    pub read_ahead: u64,
    /// With [`HashOptions::listing`]: every file hashed, in the hash's
    /// order (empty otherwise).
    pub listing: Vec<HashedFile>,
}

/// One file that went into a content hash.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HashedFile {
    /// Its name in the hash: the path relative to the directory, joined
    /// with `/` (for a single file, its base name).
    pub name: String,
    /// Where it was read (through symlinks).
    pub path: PathBuf,
    /// Bytes read.
    pub size: u64,
    /// `H(name ‖ 0x00 ‖ bytes)`: its part of the content hash.
    pub digest: [u8; 32],
}

/// The content hash of a listing of files (their digests in order):
/// `H("dir:" ‖ D1 ‖ … ‖ Dn)` for a directory, `H("file:" ‖ D)` for a single
/// file. Whoever holds a listing can check it against the hash it claims.
pub fn hash_of_listing<'a>(
    kind: HashKind,
    digests: impl IntoIterator<Item = &'a [u8; 32]>,
) -> ContentHash {
    let mut outer = Sha256::new();
    outer.update(match kind {
        HashKind::Dir => b"dir:".as_slice(),
        HashKind::File => b"file:".as_slice(),
    });
    for d in digests {
        outer.update(d);
    }
    ContentHash(outer.finalize().into())
}

/// Why a content hash could not be computed. Every variant names the path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HashError {
    /// The path does not exist.
    #[error("{}: no such file or directory", path.display())]
    NotFound {
        /// The missing path.
        path: PathBuf,
    },
    /// A symlink whose target does not exist.
    #[error("{}: broken symlink (its target does not exist)", path.display())]
    BrokenSymlink {
        /// The symlink.
        path: PathBuf,
    },
    /// A FIFO, socket or device, which cannot be hashed as data.
    #[error(
        "{}: not a regular file (FIFO, socket or device); remove it or hash a narrower path",
        path.display()
    )]
    NotAFile {
        /// The special file.
        path: PathBuf,
    },
    /// A name that is not UTF-8; the hash encodes relative paths as UTF-8.
    #[error(
        "{}: the name is not valid UTF-8, so it cannot enter the content hash",
        path.display()
    )]
    NonUtf8Name {
        /// The offending path.
        path: PathBuf,
    },
    /// Reading failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path being read or listed.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

impl HashError {
    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Self::NotFound { path }
            | Self::BrokenSymlink { path }
            | Self::NotAFile { path }
            | Self::NonUtf8Name { path }
            | Self::Io { path, .. } => path,
        }
    }
}

/// The content hash of a file or directory, as Kinetic computes it for the
/// data cache. Uses every core for a directory.
pub fn content_hash(path: impl AsRef<Path>) -> Result<ContentHash, HashError> {
    content_hash_with(path, &HashOptions::default()).map(|r| r.hash)
}

/// The content hash of a file or directory, with statistics.
pub fn content_hash_with(
    path: impl AsRef<Path>,
    options: &HashOptions,
) -> Result<HashReport, HashError> {
    if path.as_ref().as_os_str().is_empty() {
        return Err(HashError::NotFound {
            path: PathBuf::new(),
        });
    }
    let path = absolute_normalized(path.as_ref())?;
    match std::fs::symlink_metadata(&path) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(HashError::NotFound { path }),
        Err(source) => return Err(HashError::Io { path, source }),
    }
    let meta = match std::fs::metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(HashError::BrokenSymlink { path });
        }
        Err(source) => return Err(HashError::Io { path, source }),
    };
    if meta.is_dir() {
        hash_dir(
            path,
            options.thread_count(),
            options.reader_count(),
            &CacheState::default(),
            options.listing,
        )
    } else {
        hash_single_file(path, &meta, options.listing)
    }
}

/// The plain SHA-256 of a file's bytes (lower-case hex is
/// `hex::encode(digest)`), streamed with the pipelined reader. The engine
/// uploads `context.zip` with this digest so the runner can verify it.
pub fn file_sha256(path: impl AsRef<Path>) -> Result<[u8; 32], HashError> {
    let path = path.as_ref();
    let mut file = open(path, false)?;
    let mut hasher = Sha256::new();
    let big = file.metadata().map(|m| m.len()).unwrap_or(u64::MAX) >= read::PIPELINE_THRESHOLD;
    let result = if big {
        read::read_pipelined(&mut file, |chunk| hasher.update(chunk))
    } else {
        let mut buf = vec![0u8; WORKER_BUFFER];
        read::read_inline(&mut file, &mut buf, |chunk| hasher.update(chunk))
    };
    result.map_err(|source| HashError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(hasher.finalize().into())
}

fn hash_single_file(
    path: PathBuf,
    meta: &std::fs::Metadata,
    listing: bool,
) -> Result<HashReport, HashError> {
    if is_special(meta) {
        return Err(HashError::NotAFile { path });
    }
    let Some(name) = path.file_name() else {
        // A normalised absolute path without a last component is `/`,
        // which is a directory and never gets here.
        return Err(HashError::NotAFile { path });
    };
    let Some(name) = name.to_str() else {
        return Err(HashError::NonUtf8Name { path });
    };
    let mut inner = Sha256::new();
    inner.update(name.as_bytes());
    inner.update([0u8]);
    let symlink = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
    let mut file = open(&path, symlink)?;
    let result = if meta.len() >= read::PIPELINE_THRESHOLD {
        read::read_pipelined(&mut file, |chunk| inner.update(chunk))
    } else {
        let mut buf = vec![0u8; WORKER_BUFFER];
        read::read_inline(&mut file, &mut buf, |chunk| inner.update(chunk))
    };
    let bytes = result.map_err(|source| HashError::Io {
        path: path.clone(),
        source,
    })?;
    let digest: [u8; 32] = inner.finalize().into();
    let files = if listing {
        vec![HashedFile {
            name: name.to_owned(),
            path: path.clone(),
            size: bytes,
            digest,
        }]
    } else {
        Vec::new()
    };
    Ok(HashReport {
        hash: hash_of_listing(HashKind::File, [&digest]),
        kind: HashKind::File,
        files: 1,
        bytes,
        skipped_dirs: Vec::new(),
        read_ahead: 0,
        listing: files,
    })
}

/// The hash of a directory: `threads` hash, `readers` read ahead when
/// `cache` finds the files cold.
fn hash_dir(
    root: PathBuf,
    threads: usize,
    readers: usize,
    cache: &CacheState,
    listing: bool,
) -> Result<HashReport, HashError> {
    let mut walk = DataWalk::new(root);
    let mut outer = Sha256::new();
    outer.update(b"dir:");
    let mut files = 0u64;
    let mut bytes = 0u64;
    let mut listed = Vec::new();
    std::thread::scope(|scope| {
        let mut prefetcher = Prefetcher::new(scope, cache, readers);
        // Files are numbered from 1 in walk order; a batch carries the
        // number of its first file.
        let mut seq = 0u64;
        let batches = batched(walk.by_ref(), BATCH).map(|batch| {
            let batch: Vec<FileJob> = batch?;
            let first = seq + 1;
            for job in &batch {
                seq += 1;
                prefetcher.offer(seq, &job.path);
            }
            Ok((first, batch))
        });
        ordered_map(
            threads,
            threads.saturating_mul(WINDOW_PER_THREAD),
            batches,
            || vec![0u8; WORKER_BUFFER],
            |buf, (first, jobs): (u64, Vec<FileJob>)| {
                let mut digests = Vec::with_capacity(jobs.len());
                for (seq, job) in (first..).zip(jobs) {
                    let result = hash_one(buf, job, seq, cache);
                    let failed = result.is_err();
                    digests.push(result);
                    if failed {
                        break; // the whole hash fails; do not read further
                    }
                }
                (first, digests)
            },
            |(first, digests)| {
                let last = first + digests.len() as u64 - 1;
                for result in digests {
                    let (job, digest, n) = result?;
                    outer.update(digest);
                    files += 1;
                    bytes += n;
                    if listing {
                        listed.push(HashedFile {
                            name: job.rel,
                            path: job.path,
                            size: n,
                            digest,
                        });
                    }
                }
                cache.hashed_up_to(last);
                Ok(())
            },
        )
    })?;
    Ok(HashReport {
        hash: ContentHash(outer.finalize().into()),
        kind: HashKind::Dir,
        files,
        bytes,
        skipped_dirs: walk.into_skipped_dirs(),
        read_ahead: cache.queued(),
        listing: listed,
    })
}

/// `H(relpath ‖ 0x00 ‖ bytes)` of one file of a directory (the `seq`-th of
/// the walk). The first read may not wait for the disk: when it finds the
/// file uncached, the cache state learns that the tree is cold.
fn hash_one(
    buf: &mut [u8],
    job: FileJob,
    seq: u64,
    cache: &CacheState,
) -> Result<(FileJob, [u8; 32], u64), HashError> {
    let mut hasher = Sha256::new();
    hasher.update(job.rel.as_bytes());
    hasher.update([0u8]);
    let mut file = job
        .open()
        .map_err(|source| open_error(&job.path, job.symlink, source))?;
    let io_error = |source| HashError::Io {
        path: job.path.clone(),
        source,
    };
    let probe = if cache.probing() {
        prefetch::probe(&file, buf)
    } else {
        Probe::Unknown
    };
    let cached = match probe {
        Probe::Cached(n) => {
            hasher.update(&buf[..n]);
            n as u64
        }
        Probe::Missed => {
            // A page marked for read-ahead refuses a non-blocking read too,
            // so the tree counts as cold only if the read has to wait.
            let started = Instant::now();
            let n = read::read_some(&mut file, buf).map_err(io_error)?;
            if started.elapsed() >= COLD_READ {
                cache.miss(seq);
            }
            hasher.update(&buf[..n]);
            n as u64
        }
        Probe::Unknown => {
            cache.cannot_probe();
            0
        }
    };
    let n = read::read_inline(&mut file, buf, |chunk| hasher.update(chunk)).map_err(io_error)?;
    Ok((job, hasher.finalize().into(), cached + n))
}

fn open(path: &Path, symlink: bool) -> Result<File, HashError> {
    File::open(path).map_err(|source| open_error(path, symlink, source))
}

fn open_error(path: &Path, symlink: bool, source: io::Error) -> HashError {
    if symlink && source.kind() == io::ErrorKind::NotFound {
        HashError::BrokenSymlink {
            path: path.to_path_buf(),
        }
    } else {
        HashError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

fn is_special(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::FileTypeExt;
    let ft = meta.file_type();
    ft.is_fifo() || ft.is_socket() || ft.is_block_device() || ft.is_char_device()
}

/// Python's `os.path.normpath(os.path.abspath(p))`: absolute against the
/// current directory, `.` and `..` resolved lexically (symlinks are *not*
/// resolved, so a symlink keeps its own name).
pub(crate) fn absolute_normalized(path: &Path) -> Result<PathBuf, HashError> {
    let joined;
    let path = if path.is_absolute() {
        path
    } else {
        let cwd = std::env::current_dir().map_err(|source| HashError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        joined = cwd.join(path);
        &joined
    };
    Ok(normalize_lexically(path))
}

/// Lexical normalisation (`normpath`): drops `.`, resolves `..` against the
/// previous component, collapses repeated separators.
pub(crate) fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    let mut normals = 0usize;
    for component in path.components() {
        match component {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                if normals > 0 {
                    out.pop();
                    normals -= 1;
                } else if !out.has_root() {
                    // A relative path keeps leading `..`; at the root, `..`
                    // is the root.
                    out.push("..");
                }
            }
            Component::Normal(name) => {
                out.push(name);
                normals += 1;
            }
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_accepts_only_64_lower_hex() {
        let h: ContentHash = "9d1ae5a6cdbe837d499a16cb32234ea2d953c60e8e8fdc88f84a3bbe2d629143"
            .parse()
            .expect("valid");
        assert_eq!(
            h.to_string(),
            "9d1ae5a6cdbe837d499a16cb32234ea2d953c60e8e8fdc88f84a3bbe2d629143"
        );
        for bad in [
            "",
            "9D1AE5A6CDBE837D499A16CB32234EA2D953C60E8E8FDC88F84A3BBE2D629143",
            "9d1ae5a6cdbe837d499a16cb32234ea2d953c60e8e8fdc88f84a3bbe2d62914",
            "9d1ae5a6cdbe837d499a16cb32234ea2d953c60e8e8fdc88f84a3bbe2d629143a",
            "zd1ae5a6cdbe837d499a16cb32234ea2d953c60e8e8fdc88f84a3bbe2d629143",
        ] {
            assert!(bad.parse::<ContentHash>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_listing_is_what_the_hash_covers_in_its_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("data");
        std::fs::create_dir_all(root.join("sub/deep")).unwrap();
        std::fs::create_dir_all(dir.path().join("elsewhere")).unwrap();
        std::fs::write(root.join("b.txt"), "bb").unwrap();
        std::fs::write(root.join("sub/deep/c.txt"), "c").unwrap();
        std::fs::write(dir.path().join("target.txt"), "t").unwrap();
        std::os::unix::fs::symlink(dir.path().join("target.txt"), root.join("a-link.txt")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), root.join("linkdir")).unwrap();
        for threads in [1, 4] {
            let options = HashOptions::default().threads(threads).listing(true);
            let report = content_hash_with(&root, &options).unwrap();
            let names: Vec<&str> = report.listing.iter().map(|f| f.name.as_str()).collect();
            assert_eq!(names, ["a-link.txt", "b.txt", "sub/deep/c.txt"]);
            assert_eq!(report.listing[1].size, 2);
            assert_eq!(
                hash_of_listing(HashKind::Dir, report.listing.iter().map(|f| &f.digest)),
                report.hash
            );
        }
        let single =
            content_hash_with(root.join("b.txt"), &HashOptions::default().listing(true)).unwrap();
        assert_eq!(single.listing[0].name, "b.txt");
        assert_eq!(
            hash_of_listing(HashKind::File, [&single.listing[0].digest]),
            single.hash
        );
        let plain = content_hash_with(&root, &HashOptions::default()).unwrap();
        assert!(plain.listing.is_empty());
    }

    #[test]
    fn serde_round_trip_is_a_hex_string() {
        let h = ContentHash::from_bytes([0xab; 32]);
        let json = serde_json::to_string(&h).expect("encode");
        assert_eq!(json, format!("\"{}\"", "ab".repeat(32)));
        let back: ContentHash = serde_json::from_str(&json).expect("decode");
        assert_eq!(back, h);
    }

    #[test]
    fn a_cold_tree_is_read_ahead_and_hashes_the_same() {
        let dir = tempfile::tempdir().expect("tempdir");
        for i in 0..300 {
            let sub = dir.path().join(format!("d{}", i % 7));
            std::fs::create_dir_all(&sub).expect("mkdir");
            let body = format!("file {i}\n").repeat(i % 50 + 1);
            std::fs::write(sub.join(format!("f{i:03}.txt")), body).expect("write");
        }
        // Just written, so cached: nothing is read ahead.
        let warm = content_hash_with(dir.path(), &HashOptions::default().threads(1)).expect("hash");
        assert_eq!((warm.files, warm.read_ahead), (300, 0));
        for (threads, readers) in [(1, 1), (2, 4), (3, 16)] {
            // As if the first file had been found uncached.
            let cache = CacheState::default();
            cache.miss(1);
            let root = dir.path().to_path_buf();
            let cold = hash_dir(root, threads, readers, &cache, false).expect("hash");
            assert_eq!(cold.hash, warm.hash, "threads {threads}, readers {readers}");
            assert_eq!((cold.files, cold.bytes), (warm.files, warm.bytes));
            assert_eq!(cold.read_ahead, 300, "every file is handed to the readers");
        }
    }

    #[test]
    fn normalize_is_lexical_like_normpath() {
        let cases = [
            ("/a/b/../c", "/a/c"),
            ("/a/./b/", "/a/b"),
            ("/..", "/"),
            ("/../a", "/a"),
            ("//a//b", "/a/b"),
            ("/", "/"),
            ("a/../..", ".."),
            ("a/..", "."),
        ];
        for (input, want) in cases {
            assert_eq!(
                normalize_lexically(Path::new(input)),
                PathBuf::from(want),
                "{input}"
            );
        }
    }
}
