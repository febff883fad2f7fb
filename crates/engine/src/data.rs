//! The content-addressed data cache, in Kinetic's layout: local data is
//! hashed, uploaded once under `default/data-cache/{hash}/…`, and published
//! by its marker `default/data-markers/{hash}`, written only after every
//! file landed ([`kinetic_core::layout::data_entry`], [`kinetic_core::layout::data_marker`]).
//! The marker lists exactly what the entry holds ([`DataMarker`]): jobs
//! see the listed files only, and each use compares the entry with its
//! marker (one GET and one LIST) and repairs what does not match — a file
//! missing or changed since, an object nobody listed.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};

use kinetic_core::cache::{DataMarker, MarkerError, Mismatch, StoredFile};
use kinetic_core::plan::DataUpload;
use kinetic_core::ports::{ObjectStore, ObjectStoreExt, PutOptions, StoreError};

use super::EngineError;

/// Uploads in flight at once for one data entry.
const UPLOAD_CONCURRENCY: usize = 16;

/// What happened to one local data entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CachedData {
    /// URI of the cache entry (the directory prefix).
    pub(crate) uri: String,
    /// True when the entry matched its marker and nothing was uploaded.
    pub(crate) hit: bool,
    /// Why an existing entry was repaired, when it was.
    pub(crate) repaired: Option<String>,
    /// Objects uploaded.
    pub(crate) objects: usize,
    /// Bytes uploaded.
    pub(crate) bytes: u64,
}

/// Make sure the planned data entry is in the cache, whole and listed by
/// its marker; return where.
pub(crate) async fn ensure_cached(
    store: &Arc<dyn ObjectStore>,
    data: &DataUpload,
) -> Result<CachedData, EngineError> {
    let uri = store.uri(&data.entry);
    let wanted = data.marker_document();
    // Which files to upload (all, for a new entry), and why an existing
    // entry is repaired.
    let (upload, repaired): (Vec<&str>, Option<String>) =
        match store.get_if_exists(&data.marker).await? {
            None => (wanted.files.iter().map(|f| f.name.as_str()).collect(), None),
            Some(bytes) => {
                let stored = stored_files(store, data).await?;
                let (listed, mismatches) = match DataMarker::from_json(&bytes, &data.hash) {
                    Ok(marker) => (true, Ok(marker.mismatches(&stored))),
                    // Kinetic's empty marker: the entry is taken when it holds
                    // exactly the files this data has, by name and size.
                    Err(MarkerError::Unlisted) => (false, Ok(wanted.mismatches(&stored))),
                    Err(e) => (false, Err(e.to_string())),
                };
                match mismatches {
                    Ok(found) if found.is_empty() => {
                        if !listed {
                            // Listed from now on, so that jobs check what they get.
                            put_marker(store, data, &wanted.with_e_tags(&stored)).await?;
                        }
                        return Ok(CachedData {
                            uri,
                            hit: true,
                            repaired: None,
                            objects: 0,
                            bytes: 0,
                        });
                    }
                    Ok(found) => (to_upload(&wanted, &found), Some(describe(&found))),
                    Err(why) => (
                        wanted.files.iter().map(|f| f.name.as_str()).collect(),
                        Some(why),
                    ),
                }
            }
        };
    let wanted_names: BTreeSet<&str> = upload.iter().copied().collect();
    // Owned, so that the upload future holds no borrow (it must be `Send`
    // for any lifetime, as a spawned task's is).
    let files: Vec<(String, std::path::PathBuf)> = data
        .listing
        .iter()
        .filter(|f| wanted_names.contains(f.name.as_str()))
        .map(|f| (f.name.clone(), f.path.clone()))
        .collect();
    let objects = files.len();
    let hash = data.hash;
    let bytes: u64 = futures_util::stream::iter(files.into_iter().map(|(name, path)| {
        let store = store.clone();
        async move {
            let object = kinetic_core::layout::data_entry_file(&hash, &name)?;
            store.put_file(&object, &path, PutOptions::default()).await
        }
    }))
    .buffer_unordered(UPLOAD_CONCURRENCY)
    .try_fold(0u64, |acc, n| async move { Ok::<_, StoreError>(acc + n) })
    .await?;
    // What the entry holds now: nothing else may stay, and each listed
    // file must have the size it was hashed with.
    let stored = stored_files(store, data).await?;
    let after = wanted.mismatches(&stored);
    for extra in &after {
        match extra {
            Mismatch::Extra { name } => {
                let object = kinetic_core::layout::data_entry_file(&hash, name)?;
                store.delete(&object).await?;
            }
            other => {
                return Err(EngineError::project(format!(
                    "data '{}' changed while it was uploaded ({other}); its content hash no longer describes it: run again",
                    data.local.display()
                )));
            }
        }
    }
    // The marker goes last: only now are the files visible to jobs.
    put_marker(store, data, &wanted.with_e_tags(&stored)).await?;
    Ok(CachedData {
        uri,
        hit: false,
        repaired,
        objects,
        bytes,
    })
}

/// The objects under the entry, named relative to it.
async fn stored_files(
    store: &Arc<dyn ObjectStore>,
    data: &DataUpload,
) -> Result<Vec<StoredFile>, EngineError> {
    let prefix = format!("{}/", data.entry.as_str());
    Ok(store
        .list(Some(&data.entry))
        .await?
        .into_iter()
        .filter_map(|m| {
            let name = m.path.as_str().strip_prefix(&prefix)?.to_owned();
            Some(StoredFile::new(name, m.size, m.e_tag))
        })
        .collect())
}

async fn put_marker(
    store: &Arc<dyn ObjectStore>,
    data: &DataUpload,
    marker: &DataMarker,
) -> Result<(), EngineError> {
    let options = PutOptions::default().with_content_type("application/json");
    store
        .put(&data.marker, Bytes::from(marker.to_json()), options)
        .await?;
    Ok(())
}

/// The listed files a repair uploads again.
fn to_upload<'a>(wanted: &'a DataMarker, mismatches: &[Mismatch]) -> Vec<&'a str> {
    let bad: BTreeSet<&str> = mismatches
        .iter()
        .filter(|m| !matches!(m, Mismatch::Extra { .. }))
        .map(Mismatch::name)
        .collect();
    wanted
        .files
        .iter()
        .map(|f| f.name.as_str())
        .filter(|n| bad.contains(n))
        .collect()
}

/// The first few differences, for the user.
fn describe(mismatches: &[Mismatch]) -> String {
    let shown: Vec<String> = mismatches.iter().take(3).map(ToString::to_string).collect();
    let more = mismatches.len().saturating_sub(3);
    if more > 0 {
        format!("{} and {more} more", shown.join("; "))
    } else {
        shown.join("; ")
    }
}
