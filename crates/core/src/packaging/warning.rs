//! Warnings of packaging: returned as values, never printed by the core.

use std::fmt;
use std::path::PathBuf;

const MB: f64 = 1024.0 * 1024.0;

/// Something the archive skipped, or something the user should know about
/// what it holds. Each displays as one line.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PackWarning {
    /// A directory that leads back to one already archived (through a
    /// symlink) was skipped.
    SymlinkLoop {
        /// The directory entry that was skipped.
        path: PathBuf,
    },
    /// A symlink whose target does not exist was skipped.
    BrokenSymlink {
        /// The symlink.
        path: PathBuf,
        /// Where it points.
        target: PathBuf,
    },
    /// A directory that could not be read was skipped.
    UnreadableDir {
        /// The directory.
        path: PathBuf,
        /// The error.
        reason: String,
    },
    /// A file that could not be read was skipped.
    UnreadableFile {
        /// The file.
        path: PathBuf,
        /// The error.
        reason: String,
    },
    /// A FIFO, socket or device was skipped (it has no content to ship).
    NotARegularFile {
        /// The special file.
        path: PathBuf,
    },
    /// A name that is not UTF-8 was skipped (ZIP names are UTF-8).
    NonUtf8Name {
        /// The path.
        path: PathBuf,
    },
    /// `.kineticignore` exists but could not be read; no pattern applied.
    IgnoreFileUnreadable {
        /// The ignore file.
        path: PathBuf,
        /// The error.
        reason: String,
    },
    /// Files named like credentials are in the archive.
    SecretFiles {
        /// Their archive names, sorted.
        files: Vec<String>,
        /// The package root (where a `.kineticignore` would go).
        root: PathBuf,
    },
    /// The archive is larger than the warning threshold.
    LargeArchive {
        /// Size of the archive in bytes.
        bytes: u64,
        /// The threshold in bytes.
        threshold: u64,
        /// The five largest files: archive name and uncompressed size.
        largest: Vec<(String, u64)>,
    },
}

impl PackWarning {
    /// A stable short name of the kind of warning (for JSON and tests).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::SymlinkLoop { .. } => "symlink_loop",
            Self::BrokenSymlink { .. } => "broken_symlink",
            Self::UnreadableDir { .. } => "unreadable_dir",
            Self::UnreadableFile { .. } => "unreadable_file",
            Self::NotARegularFile { .. } => "not_a_regular_file",
            Self::NonUtf8Name { .. } => "non_utf8_name",
            Self::IgnoreFileUnreadable { .. } => "ignore_file_unreadable",
            Self::SecretFiles { .. } => "secret_files",
            Self::LargeArchive { .. } => "large_archive",
        }
    }
}

impl fmt::Display for PackWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SymlinkLoop { path } => write!(
                f,
                "skipping {}: it links back to a directory already in the archive (symlink loop)",
                path.display()
            ),
            Self::BrokenSymlink { path, target } => write!(
                f,
                "skipping broken symlink {} -> {}",
                path.display(),
                target.display()
            ),
            Self::UnreadableDir { path, reason } => {
                write!(
                    f,
                    "skipping unreadable directory {}: {reason}",
                    path.display()
                )
            }
            Self::UnreadableFile { path, reason } => {
                write!(f, "skipping {}: {reason}", path.display())
            }
            Self::NotARegularFile { path } => write!(
                f,
                "skipping {}: not a regular file (FIFO, socket or device)",
                path.display()
            ),
            Self::NonUtf8Name { path } => write!(
                f,
                "skipping {}: the name is not valid UTF-8",
                path.display()
            ),
            Self::IgnoreFileUnreadable { path, reason } => write!(
                f,
                "could not read {}: {reason}; no ignore pattern applied",
                path.display()
            ),
            Self::SecretFiles { files, root } => write!(
                f,
                "credential-shaped files are being uploaded with your code: {}. They will be \
                 stored in the job's Cloud Storage bucket. Add them to a .kineticignore file at \
                 {} to keep them out of the archive.",
                files.join(", "),
                root.display()
            ),
            Self::LargeArchive {
                bytes,
                threshold,
                largest,
            } => {
                write!(
                    f,
                    "the working-directory archive is {:.1} MB (warning threshold {:.1} MB) and \
                     is uploaded on every run. Largest files:",
                    *bytes as f64 / MB,
                    *threshold as f64 / MB
                )?;
                for (i, (name, size)) in largest.iter().enumerate() {
                    let sep = if i == 0 { " " } else { ", " };
                    write!(f, "{sep}{name} ({:.1} MB)", *size as f64 / MB)?;
                }
                write!(
                    f,
                    ". Add a .kineticignore file to exclude paths, or pass big datasets as Data \
                     instead."
                )
            }
        }
    }
}
