//! Replacing a file a caller named: the one check every atomic write makes
//! before it renames a temporary file over a path it was given
//! (`kinetic pack SRC OUT`, the profiles file, a download's destination).
//!
//! A rename replaces whatever is at the path: run as root, renaming an
//! archive over `/dev/null` replaces the device with a regular file.
//! [`replace_target`] says where the new file may go instead: the path
//! itself when nothing is there or a regular file is; the file a symlink
//! leads to (so a symlinked dotfile stays a symlink and its target gets the
//! new contents); and an error for anything else — a directory, a device, a
//! FIFO, a socket, or a symlink that leads to one of those or to nothing.
//!
//! ```
//! use kinetic_core::files::replace_target;
//!
//! let dir = tempfile::tempdir()?;
//! let out = dir.path().join("context.zip");
//! assert_eq!(replace_target(&out)?, out);
//! let err = replace_target(dir.path()).unwrap_err();
//! assert!(err.to_string().contains("is a directory"), "{err}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fs::FileType;
use std::io;
use std::path::{Path, PathBuf};

/// A path that must not be replaced, or whose kind could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NotReplaceable {
    /// Something other than a regular file is there.
    #[error("{} is {kind}, not a regular file", path.display())]
    NotAFile {
        /// The path as given.
        path: PathBuf,
        /// What is there (`a directory`, `a character device`, …).
        kind: &'static str,
    },
    /// A symlink that leads nowhere.
    #[error("{} is a symlink to a file that does not exist", path.display())]
    DanglingSymlink {
        /// The path as given.
        path: PathBuf,
    },
    /// Where a symlink leads could not be read (a loop, no permission).
    #[error("cannot follow the symlink {}: {source}", path.display())]
    Io {
        /// The path as given.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

/// Where a file written for `path` may be renamed to: `path` itself when
/// nothing is there or a regular file is, the regular file a symlink at
/// `path` leads to, else [`NotReplaceable`].
///
/// Checked just before the rename; the check and the rename are two steps,
/// so this guards against a mistaken path, not against a concurrent writer.
pub fn replace_target(path: &Path) -> Result<PathBuf, NotReplaceable> {
    let io_err = |source| NotReplaceable::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        // Nothing there; or the path cannot be looked at (a parent is a
        // file, no permission): the write itself then fails and says why.
        Err(_) => return Ok(path.to_path_buf()),
    };
    if meta.file_type().is_file() {
        return Ok(path.to_path_buf());
    }
    if !meta.file_type().is_symlink() {
        return Err(NotReplaceable::NotAFile {
            path: path.to_path_buf(),
            kind: describe(meta.file_type()),
        });
    }
    let target = match std::fs::canonicalize(path) {
        Ok(target) => target,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(NotReplaceable::DanglingSymlink {
                path: path.to_path_buf(),
            });
        }
        Err(e) => return Err(io_err(e)),
    };
    let meta = std::fs::metadata(&target).map_err(io_err)?;
    if meta.file_type().is_file() {
        Ok(target)
    } else {
        Err(NotReplaceable::NotAFile {
            path: path.to_path_buf(),
            kind: describe(meta.file_type()),
        })
    }
}

/// What a file type is, in words.
fn describe(file_type: FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_symlink() {
        "a symlink"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_and_regular_files_are_replaced_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        assert_eq!(replace_target(&file).unwrap(), file);
        std::fs::write(&file, "x").unwrap();
        assert_eq!(replace_target(&file).unwrap(), file);
    }

    #[test]
    fn a_symlink_leads_to_its_regular_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real.json");
        std::fs::write(&target, "{}").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(
            replace_target(&link).unwrap(),
            target.canonicalize().unwrap()
        );
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        assert!(matches!(
            replace_target(&dangling),
            Err(NotReplaceable::DanglingSymlink { .. })
        ));
    }

    #[test]
    fn directories_fifos_and_devices_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix_mkfifo(&fifo);
        let err = replace_target(&fifo).unwrap_err();
        assert!(err.to_string().contains("is a FIFO"), "{err}");
        let err = replace_target(dir.path()).unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
        let link = dir.path().join("to-dir");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        assert!(replace_target(&link).is_err());
        let err = replace_target(Path::new("/dev/null")).unwrap_err();
        assert!(err.to_string().contains("character device"), "{err}");
    }

    fn nix_mkfifo(path: &Path) {
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .expect("mkfifo");
        assert!(status.success());
    }
}
