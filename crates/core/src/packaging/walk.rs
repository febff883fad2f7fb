//! The walk of the package root: which entries go into `context.zip`, in
//! which order.
//!
//! Kinetic walks with `os.walk(root, followlinks=True)`, so: pre-order; in
//! each directory, first its files, then (if it wrote no file and keeps no
//! subdirectory) its empty-directory entry, then its kept subdirectories
//! recursively. Symlinked directories are followed; a directory whose
//! `(st_dev, st_ino)` was already seen anywhere in the walk (recorded when
//! its parent is listed) is skipped with a "symlink loop" warning.
//!
//! One deliberate difference: Kinetic lists each directory in file-system
//! order, so its archives differ from machine to machine; we sort names
//! (byte order), which makes `context.zip` reproducible.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::ignore::{
    ALWAYS_EXCLUDED_DIRS, DEFAULT_EXCLUDED_DIRS, DEFAULT_EXCLUDED_FILES, IgnoreRules,
    is_secret_name,
};
use super::plan::PLAN_ARCHIVE_NAME;
use super::root::relpath_under;
use super::{PackError, PackWarning};
use crate::hashing::normalize_lexically;

/// One step of the archive, in order.
#[derive(Debug)]
pub(crate) enum Step {
    /// A file to archive.
    File(FileEntry),
    /// End of a directory's files: write `arcname/` if no file of it was
    /// written and it keeps no subdirectory (never for the root).
    DirDone {
        arcname: String,
        keeps_subdirs: bool,
        is_root: bool,
    },
}

/// A file to archive and the metadata its ZIP entry records.
#[derive(Debug)]
pub(crate) struct FileEntry {
    pub(crate) path: PathBuf,
    pub(crate) arcname: String,
    /// `st_mode` (through symlinks).
    pub(crate) mode: u32,
    pub(crate) size: u64,
    pub(crate) mtime_sec: i64,
    pub(crate) mtime_nsec: i64,
    /// `st_ctime` and `st_ino`: not archived, but part of the manifest
    /// fingerprint, so content rewritten under a restored mtime is noticed.
    pub(crate) ctime_sec: i64,
    pub(crate) ctime_nsec: i64,
    pub(crate) ino: u64,
    pub(crate) secret: bool,
}

/// What the walk is told to leave out.
#[derive(Debug)]
pub(crate) struct Exclusions {
    pub(crate) default_excludes: bool,
    pub(crate) ignore: IgnoreRules,
    /// Relative paths (re-anchored under the root) excluded with everything
    /// below them.
    pub(crate) rel_paths: HashSet<String>,
    /// `(st_dev, st_ino)` of excluded paths, so an alias through a symlink
    /// is excluded as well.
    pub(crate) identities: HashSet<(u64, u64)>,
    /// Skip a real `.kinetic/plan.json` (a plan is supplied).
    pub(crate) skip_plan_file: bool,
}

impl Exclusions {
    pub(crate) fn new(
        root: &Path,
        default_excludes: bool,
        ignore: IgnoreRules,
        exclude_paths: &[PathBuf],
        skip_plan_file: bool,
    ) -> Self {
        let mut rel_paths = HashSet::new();
        let mut identities = HashSet::new();
        for path in exclude_paths {
            let path = normalize_lexically(path);
            if let Ok(meta) = fs::metadata(&path) {
                identities.insert((meta.dev(), meta.ino()));
            }
            if let Some(rel) = relpath_under(&path, root)
                && let Some(rel) = rel.to_str()
            {
                rel_paths.insert(rel.to_owned());
            }
        }
        Self {
            default_excludes,
            ignore,
            rel_paths,
            identities,
            skip_plan_file,
        }
    }

    fn dir_name_excluded(&self, name: &str) -> bool {
        ALWAYS_EXCLUDED_DIRS.contains(&name)
            || (self.default_excludes && DEFAULT_EXCLUDED_DIRS.contains(&name))
    }

    fn file_name_excluded(&self, name: &str) -> bool {
        self.default_excludes && DEFAULT_EXCLUDED_FILES.contains(&name)
    }
}

/// Walks the package root; returns the archive steps and the warnings.
pub(crate) fn walk(
    root: &Path,
    ex: &Exclusions,
) -> Result<(Vec<Step>, Vec<PackWarning>), PackError> {
    let mut steps = Vec::new();
    let mut warnings = Vec::new();
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    if let Ok(meta) = fs::metadata(root) {
        seen.insert((meta.dev(), meta.ino()));
    }
    // (path, rel, is_root); popped in pre-order.
    let mut stack: Vec<(PathBuf, String, bool)> = vec![(root.to_path_buf(), String::new(), true)];
    while let Some((dir, rel, is_root)) = stack.pop() {
        let listing = match list(&dir) {
            Ok(listing) => listing,
            Err(source) if is_root => {
                return Err(PackError::RootUnreadable { path: dir, source });
            }
            Err(e) => {
                warnings.push(PackWarning::UnreadableDir {
                    path: dir,
                    reason: e.to_string(),
                });
                continue;
            }
        };
        let (mut dirs, mut files): (Vec<_>, Vec<_>) = listing.into_iter().partition(|e| e.is_dir);
        dirs.sort_unstable_by(|a, b| a.name.as_encoded_bytes().cmp(b.name.as_encoded_bytes()));
        files.sort_unstable_by(|a, b| a.name.as_encoded_bytes().cmp(b.name.as_encoded_bytes()));

        let mut kept = Vec::new();
        for entry in dirs {
            let path = dir.join(&entry.name);
            let Some(name) = entry.name.to_str() else {
                warnings.push(PackWarning::NonUtf8Name { path });
                continue;
            };
            if ex.dir_name_excluded(name) {
                continue;
            }
            let sub_rel = join_rel(&rel, name);
            if ex.rel_paths.contains(&sub_rel) || ex.ignore.matches(&sub_rel, true) {
                continue;
            }
            let identity = match fs::metadata(&path) {
                Ok(meta) => (meta.dev(), meta.ino()),
                Err(e) => {
                    warnings.push(PackWarning::UnreadableDir {
                        path,
                        reason: e.to_string(),
                    });
                    continue;
                }
            };
            if ex.identities.contains(&identity) {
                continue;
            }
            if !seen.insert(identity) {
                warnings.push(PackWarning::SymlinkLoop { path });
                continue;
            }
            kept.push((path, sub_rel));
        }

        for entry in files {
            let path = dir.join(&entry.name);
            let Some(name) = entry.name.to_str() else {
                warnings.push(PackWarning::NonUtf8Name { path });
                continue;
            };
            if ex.file_name_excluded(name) {
                continue;
            }
            let arcname = join_rel(&rel, name);
            if ex.rel_paths.contains(&arcname) || ex.ignore.matches(&arcname, false) {
                continue;
            }
            if ex.skip_plan_file && arcname == PLAN_ARCHIVE_NAME {
                continue;
            }
            let meta = match fs::metadata(&path) {
                Ok(meta) => meta,
                // Like Python's `os.path.exists`, any failure to follow a
                // symlink (missing target, a loop) makes it broken.
                Err(_) if entry.is_symlink => {
                    let target = fs::read_link(&path).unwrap_or_default();
                    warnings.push(PackWarning::BrokenSymlink { path, target });
                    continue;
                }
                Err(e) => {
                    warnings.push(PackWarning::UnreadableFile {
                        path,
                        reason: e.to_string(),
                    });
                    continue;
                }
            };
            if ex.identities.contains(&(meta.dev(), meta.ino())) {
                continue;
            }
            let ft = meta.file_type();
            if ft.is_fifo() || ft.is_socket() || ft.is_block_device() || ft.is_char_device() {
                warnings.push(PackWarning::NotARegularFile { path });
                continue;
            }
            steps.push(Step::File(FileEntry {
                path,
                secret: is_secret_name(name),
                arcname,
                mode: meta.mode(),
                size: meta.len(),
                mtime_sec: meta.mtime(),
                mtime_nsec: meta.mtime_nsec(),
                ctime_sec: meta.ctime(),
                ctime_nsec: meta.ctime_nsec(),
                ino: meta.ino(),
            }));
        }

        steps.push(Step::DirDone {
            arcname: rel,
            keeps_subdirs: !kept.is_empty(),
            is_root,
        });
        for (path, sub_rel) in kept.into_iter().rev() {
            stack.push((path, sub_rel, false));
        }
    }
    Ok((steps, warnings))
}

fn join_rel(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}/{name}")
    }
}

struct Listed {
    name: OsString,
    /// A directory, following symlinks.
    is_dir: bool,
    is_symlink: bool,
}

/// Lists a directory completely (a listing error drops the whole directory,
/// as `os.walk` does), classifying entries without `stat` except symlinks.
fn list(dir: &Path) -> io::Result<Vec<Listed>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let (is_dir, is_symlink) = match entry.file_type() {
            Ok(ft) if ft.is_symlink() => {
                (fs::metadata(entry.path()).is_ok_and(|m| m.is_dir()), true)
            }
            Ok(ft) => (ft.is_dir(), false),
            Err(_) => (false, false),
        };
        out.push(Listed {
            name: entry.file_name(),
            is_dir,
            is_symlink,
        });
    }
    Ok(out)
}
