//! The manifest of a package root: what [`super::pack`] would archive, by
//! name and file metadata, without reading a file's content.
//!
//! Its fingerprint changes whenever the archive could: a file added,
//! removed or renamed, or a file whose size, mode, mtime, ctime or inode
//! changed, or other packing options. An unchanged fingerprint lets a
//! client reuse the archive it packed before instead of packing again.

use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use super::walk::Step;
use super::{PackError, PackOptions, PackWarning, PackagingPlan, walk_root};
use crate::hashing::absolute_normalized;

/// What [`manifest`] found.
#[derive(Debug)]
#[non_exhaustive]
pub struct Manifest {
    /// SHA-256 over the packing options and every entry's name and
    /// metadata, in archive order.
    pub fingerprint: [u8; 32],
    /// The files the archive would hold, in archive order.
    pub files: Vec<PathBuf>,
    /// The latest mtime or ctime of those files, in nanoseconds since the
    /// epoch: a file changed within the timestamp resolution of a cached
    /// record cannot be told apart by metadata alone.
    pub newest_change_ns: i128,
    /// The walk's warnings (skipped files), as [`super::pack`] reports them.
    pub warnings: Vec<PackWarning>,
}

/// Walks `root` as [`super::pack`] would with `options` and fingerprints
/// what it found. Reads metadata only.
///
/// # Errors
/// [`PackError`] when the root is missing, not a directory or unreadable.
pub fn manifest(root: impl AsRef<Path>, options: &PackOptions) -> Result<Manifest, PackError> {
    let root = absolute_normalized(root.as_ref()).map_err(|e| PackError::Write {
        path: root.as_ref().to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })?;
    let (steps, warnings) = walk_root(&root, None, options)?;
    let mut h = Sha256::new();
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(b"kinetic-context-manifest-v1");
    field(root.as_os_str().as_encoded_bytes());
    let plan = options.plan.as_ref().map(PackagingPlan::to_python_json);
    field(plan.as_deref().unwrap_or("").as_bytes());
    field(&[u8::from(options.default_excludes)]);
    field(&options.compression_level.to_le_bytes());
    let mut files = Vec::new();
    let mut newest_change_ns = i128::MIN;
    for step in &steps {
        match step {
            Step::File(f) => {
                field(b"F");
                field(f.arcname.as_bytes());
                field(&f.mode.to_le_bytes());
                field(&f.size.to_le_bytes());
                field(&f.mtime_sec.to_le_bytes());
                field(&f.mtime_nsec.to_le_bytes());
                field(&f.ctime_sec.to_le_bytes());
                field(&f.ctime_nsec.to_le_bytes());
                field(&f.ino.to_le_bytes());
                let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
                newest_change_ns = newest_change_ns
                    .max(ns(f.mtime_sec, f.mtime_nsec))
                    .max(ns(f.ctime_sec, f.ctime_nsec));
                files.push(f.path.clone());
            }
            Step::DirDone {
                arcname,
                keeps_subdirs,
                is_root,
            } => {
                field(b"D");
                field(arcname.as_bytes());
                field(&[u8::from(*keeps_subdirs), u8::from(*is_root)]);
            }
        }
    }
    for w in &warnings {
        field(w.to_string().as_bytes());
    }
    Ok(Manifest {
        fingerprint: h.finalize().into(),
        files,
        newest_change_ns,
        warnings,
    })
}
