//! The directory walk of the content hash, in Kinetic's exact order.
//!
//! Kinetic walks with `os.walk(root, followlinks=False)`, sorting the
//! subdirectory list in place and the file list of each directory. So:
//! pre-order; in each directory its files (sorted by name) first, then its
//! subdirectories (sorted by name) recursively. An entry counts as a
//! directory if it is one *following symlinks*; a symlink to a directory is
//! therefore neither hashed as a file nor walked into: it contributes
//! nothing. Everything else (regular files, symlinks to files, broken
//! symlinks, special files) is a file.
//!
//! A subdirectory that cannot be listed is skipped silently, as `os.walk`
//! does without an `onerror` callback; a listing that fails half-way drops
//! the whole directory (`os.walk` yields a directory only after listing it
//! completely). The walk records such directories in
//! [`DataWalk::skipped_dirs`] so callers can report them.
//!
//! Names are compared as bytes, which for UTF-8 names is the code-point
//! order Python's `sorted` uses. A file whose relative path is not UTF-8
//! cannot be hashed (Kinetic fails encoding it), so it becomes an error at
//! its place in the order.

use std::fs::{self, File};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileTypeExt;
use std::path::PathBuf;
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};

use super::HashError;

/// One file to hash: its path relative to the root (with `/`) and on disk.
#[derive(Debug)]
pub(crate) struct FileJob {
    pub(crate) rel: String,
    pub(crate) path: PathBuf,
    /// True when the directory entry is a symlink (for error messages).
    pub(crate) symlink: bool,
    /// The directory holding the file, opened once for all its files, so
    /// that opening one looks up a single name rather than the whole path.
    dir: Option<Arc<OwnedFd>>,
}

impl FileJob {
    /// Opens the file for reading (through a symlink, as `File::open`).
    pub(crate) fn open(&self) -> io::Result<File> {
        match (&self.dir, self.path.file_name()) {
            (Some(dir), Some(name)) => {
                rustix::fs::openat(dir, name, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
                    .map(File::from)
                    .map_err(io::Error::from)
            }
            _ => File::open(&self.path),
        }
    }
}

/// A directory waiting to be listed. `rel` is `None` when some component of
/// its relative path is not UTF-8.
#[derive(Debug)]
struct PendingDir {
    path: PathBuf,
    rel: Option<String>,
    is_root: bool,
}

/// A lazy, ordered walk: yields the files of the content hash one by one.
#[derive(Debug)]
pub(crate) struct DataWalk {
    stack: Vec<PendingDir>,
    ready: std::vec::IntoIter<Result<FileJob, HashError>>,
    skipped_dirs: Vec<PathBuf>,
    failed: bool,
}

impl DataWalk {
    pub(crate) fn new(root: PathBuf) -> Self {
        Self {
            stack: vec![PendingDir {
                path: root,
                rel: Some(String::new()),
                is_root: true,
            }],
            ready: Vec::new().into_iter(),
            skipped_dirs: Vec::new(),
            failed: false,
        }
    }

    /// Subdirectories that could not be listed and were skipped.
    pub(crate) fn into_skipped_dirs(self) -> Vec<PathBuf> {
        self.skipped_dirs
    }

    /// Lists one directory: queues its files and pushes its subdirectories.
    fn expand(&mut self, dir: PendingDir) -> Result<(), HashError> {
        let listing = match list(&dir.path) {
            Ok(listing) => listing,
            Err(source) if dir.is_root => {
                return Err(HashError::Io {
                    path: dir.path,
                    source,
                });
            }
            Err(_) => {
                self.skipped_dirs.push(dir.path);
                return Ok(());
            }
        };
        let mut files = Vec::new();
        let mut dirs = Vec::new();
        for (name, kind) in listing {
            match kind {
                Kind::Dir => dirs.push(name),
                Kind::SymlinkToDir => {}
                Kind::File { symlink, special } => files.push((name, symlink, special)),
            }
        }
        files.sort_unstable_by(|a, b| a.0.as_encoded_bytes().cmp(b.0.as_encoded_bytes()));
        dirs.sort_unstable_by(|a, b| a.as_encoded_bytes().cmp(b.as_encoded_bytes()));

        // Without this handle files are opened by their whole path.
        let handle = rustix::fs::open(
            &dir.path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()
        .map(Arc::new);
        let jobs: Vec<Result<FileJob, HashError>> = files
            .into_iter()
            .map(|(name, symlink, special)| {
                let path = dir.path.join(&name);
                let rel = match (&dir.rel, name.to_str()) {
                    (Some(parent), Some(name)) => join_rel(parent, name),
                    _ => return Err(HashError::NonUtf8Name { path }),
                };
                if special {
                    return Err(HashError::NotAFile { path });
                }
                Ok(FileJob {
                    rel,
                    path,
                    symlink,
                    dir: handle.clone(),
                })
            })
            .collect();
        self.ready = jobs.into_iter();
        for name in dirs.into_iter().rev() {
            let rel = match (&dir.rel, name.to_str()) {
                (Some(parent), Some(name)) => Some(join_rel(parent, name)),
                _ => None,
            };
            self.stack.push(PendingDir {
                path: dir.path.join(&name),
                rel,
                is_root: false,
            });
        }
        Ok(())
    }
}

impl Iterator for DataWalk {
    type Item = Result<FileJob, HashError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        loop {
            if let Some(job) = self.ready.next() {
                if job.is_err() {
                    self.failed = true;
                }
                return Some(job);
            }
            let dir = self.stack.pop()?;
            if let Err(e) = self.expand(dir) {
                self.failed = true;
                return Some(Err(e));
            }
        }
    }
}

pub(crate) fn join_rel(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        let mut rel = String::with_capacity(parent.len() + 1 + name.len());
        rel.push_str(parent);
        rel.push('/');
        rel.push_str(name);
        rel
    }
}

enum Kind {
    Dir,
    SymlinkToDir,
    File { symlink: bool, special: bool },
}

/// Lists a directory completely, classifying each entry with the type the
/// directory itself reports (no `stat`), and stats only symlinks.
fn list(path: &std::path::Path) -> std::io::Result<Vec<(std::ffi::OsString, Kind)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(path)? {
        let entry = entry?;
        let name = entry.file_name();
        // Python's `DirEntry.is_dir()` treats an error as "not a directory".
        let kind = match entry.file_type() {
            Ok(ft) if ft.is_dir() => Kind::Dir,
            Ok(ft) if ft.is_symlink() => match fs::metadata(entry.path()) {
                Ok(meta) if meta.is_dir() => Kind::SymlinkToDir,
                Ok(meta) => Kind::File {
                    symlink: true,
                    special: is_special(meta.file_type()),
                },
                Err(_) => Kind::File {
                    symlink: true,
                    special: false,
                },
            },
            Ok(ft) => Kind::File {
                symlink: false,
                special: is_special(ft),
            },
            Err(_) => Kind::File {
                symlink: false,
                special: false,
            },
        };
        out.push((name, kind));
    }
    Ok(out)
}

fn is_special(ft: fs::FileType) -> bool {
    ft.is_fifo() || ft.is_socket() || ft.is_block_device() || ft.is_char_device()
}
