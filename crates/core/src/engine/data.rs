//! The content-addressed data cache, in Kinetic's layout: local data is
//! hashed, uploaded once under `default/data-cache/{hash}/…`, and marked
//! complete by an empty `default/data-markers/{hash}` object written only
//! after every data object landed ([`crate::layout::data_entry`],
//! [`crate::layout::data_marker`]). A hit costs one HEAD of the marker; a
//! half-finished upload has no marker and is never taken as a hit.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};

use crate::plan::DataUpload;
use crate::ports::{ObjectStore, PutOptions, StoreError};

use super::EngineError;
use super::blocking::blocking;

/// Uploads in flight at once for one data entry.
const UPLOAD_CONCURRENCY: usize = 16;

/// What happened to one local data entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CachedData {
    /// URI of the cache entry (the directory prefix).
    pub(crate) uri: String,
    /// True when the marker was there and nothing was uploaded.
    pub(crate) hit: bool,
    /// Objects uploaded.
    pub(crate) objects: usize,
    /// Bytes uploaded.
    pub(crate) bytes: u64,
}

/// Make sure the planned data entry is in the cache; return where.
pub(crate) async fn ensure_cached(
    store: &Arc<dyn ObjectStore>,
    data: &DataUpload,
) -> Result<CachedData, EngineError> {
    let (prefix, marker) = (&data.entry, &data.marker);
    let uri = store.uri(prefix);
    match store.head(marker).await {
        Ok(_) => {
            return Ok(CachedData {
                uri,
                hit: true,
                objects: 0,
                bytes: 0,
            });
        }
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(e.into()),
    }
    let root = data.local.clone();
    let files = blocking(move || list_upload_files(&root)).await??;
    let objects = files.len();
    let hash = data.hash;
    let bytes: u64 = futures_util::stream::iter(files.into_iter().map(|(rel, local)| {
        let store = store.clone();
        async move {
            let object = crate::layout::data_entry_file(&hash, &rel)?;
            store.put_file(&object, &local, PutOptions::default()).await
        }
    }))
    .buffer_unordered(UPLOAD_CONCURRENCY)
    .try_fold(0u64, |acc, n| async move { Ok::<_, StoreError>(acc + n) })
    .await?;
    // The marker goes last: only now is the entry complete.
    store
        .put(marker, Bytes::new(), PutOptions::default())
        .await?;
    Ok(CachedData {
        uri,
        hit: false,
        objects,
        bytes,
    })
}

/// The files to upload for a data path, as (relative object name, local
/// path): a single file goes under its own name; a directory's files go
/// under their `/`-joined relative paths, walking like Kinetic's upload
/// (`os.walk` without following symlinked directories; symlinks to files
/// are read through).
pub(crate) fn list_upload_files(root: &Path) -> Result<Vec<(String, PathBuf)>, EngineError> {
    let meta = std::fs::metadata(root).map_err(|e| {
        EngineError::project_caused_by(
            format!("cannot read data path '{}': {e}", root.display()),
            e,
        )
    })?;
    if !meta.is_dir() {
        let name = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| {
                EngineError::project(format!("data path '{}' has no file name", root.display()))
            })?;
        return Ok(vec![(name, root.to_path_buf())]);
    }
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            // Kinetic's walk skips unreadable directories; so does its hash.
            Err(_) => continue,
        };
        for entry in entries {
            let entry = entry.map_err(|e| {
                EngineError::project_caused_by(
                    format!("cannot list data directory '{}': {e}", dir.display()),
                    e,
                )
            })?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let child_rel = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let path = entry.path();
            let file_type = entry.file_type().map_err(|e| {
                EngineError::project_caused_by(format!("cannot read '{}': {e}", path.display()), e)
            })?;
            if file_type.is_dir() {
                stack.push((path, child_rel));
            } else if file_type.is_symlink() && path.is_dir() {
                // A symlinked directory: not followed (and not in the hash).
            } else {
                out.push((child_rel, path));
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upload_listing_skips_symlinked_dirs_and_keeps_file_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("data");
        std::fs::create_dir_all(root.join("sub/deep")).unwrap();
        std::fs::create_dir_all(dir.path().join("elsewhere")).unwrap();
        std::fs::write(root.join("a.txt"), "a").unwrap();
        std::fs::write(root.join("sub/deep/b.txt"), "b").unwrap();
        std::fs::write(dir.path().join("target.txt"), "t").unwrap();
        std::os::unix::fs::symlink(dir.path().join("target.txt"), root.join("link.txt")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), root.join("linkdir")).unwrap();
        let names: Vec<String> = list_upload_files(&root)
            .unwrap()
            .into_iter()
            .map(|(r, _)| r)
            .collect();
        assert_eq!(names, vec!["a.txt", "link.txt", "sub/deep/b.txt"]);
        let single = list_upload_files(&root.join("a.txt")).unwrap();
        assert_eq!(single[0].0, "a.txt");
    }
}
