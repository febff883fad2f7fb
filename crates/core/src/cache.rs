//! The data cache's marker: what an entry holds.
//!
//! Local data goes into the content-addressed cache in Kinetic's layout:
//! its files under `default/data-cache/{hash}/…`, then a marker at
//! `default/data-markers/{hash}` ([`crate::layout::data_entry`],
//! [`crate::layout::data_marker`]), written last. Kinetic's marker is an
//! empty object whose existence means "complete" (Kinetic checks only that
//! it exists, so ours works for it too); ours is a JSON document listing
//! exactly what the entry holds:
//!
//! ```json
//! {"kinetic_data_marker": 1, "hash": "64 hex", "kind": "dir",
//!  "files": [{"name": "sub/a.txt", "size": 5, "digest": "64 hex", "etag": "…"}]}
//! ```
//!
//! - `files` in the content hash's order; `digest` is the file's part of
//!   the hash, `SHA-256(name ‖ 0x00 ‖ bytes)`, so the listing itself can be
//!   checked against the hash that names the entry ([`hash_of_listing`]);
//! - `etag`: the store's version tag of the object as uploaded, where the
//!   store has one.
//!
//! The runner downloads exactly the files the marker lists and checks each
//! one's size and digest, so a stray object in the entry (a killed upload's
//! leftover) never reaches a job, and an edited one fails the job before
//! its code runs. The client compares the marker with a listing of the
//! entry on every use and repairs an entry that does not match
//! ([`DataMarker::mismatches`]): a file missing, of another size, rewritten
//! since (another etag), or an object the marker does not list.

use std::fmt;

use serde_json::{Value, json};

use crate::hashing::{ContentHash, HashKind, HashedFile, hash_of_listing};

/// The marker format this crate writes.
pub const MARKER_FORMAT: u64 = 1;

/// One file of a cache entry, as its marker lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MarkedFile {
    /// Its path inside the entry (`/`-separated).
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// `SHA-256(name ‖ 0x00 ‖ bytes)`.
    pub digest: [u8; 32],
    /// The store's version tag of the uploaded object, where it has one.
    pub e_tag: Option<String>,
}

/// What a cache entry holds.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DataMarker {
    /// The entry's content hash.
    pub hash: ContentHash,
    /// A single file or a directory.
    pub kind: HashKind,
    /// Every file, in the hash's order.
    pub files: Vec<MarkedFile>,
}

/// An object found in the entry: its name inside the entry, size, etag.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredFile {
    /// The object's path inside the entry.
    pub name: String,
    /// Its size.
    pub size: u64,
    /// The store's version tag, where it has one.
    pub e_tag: Option<String>,
}

impl StoredFile {
    /// An object of the entry.
    pub fn new(name: impl Into<String>, size: u64, e_tag: Option<String>) -> Self {
        Self {
            name: name.into(),
            size,
            e_tag,
        }
    }
}

/// Why a marker cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MarkerError {
    /// An empty marker, as Kinetic writes: it lists nothing.
    #[error("the marker is empty (written by Kinetic): it does not list what the entry holds")]
    Unlisted,
    /// Not a marker this crate can read, or one that contradicts itself.
    #[error("the marker cannot be used: {message}")]
    Invalid {
        /// What is wrong.
        message: String,
    },
}

/// How an entry differs from its marker.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mismatch {
    /// A listed file is not in the entry.
    Missing {
        /// The file.
        name: String,
    },
    /// A listed file has another size.
    Size {
        /// The file.
        name: String,
        /// Its size in the entry.
        found: u64,
        /// The size listed.
        listed: u64,
    },
    /// A listed file was written again since the marker (another etag).
    Rewritten {
        /// The file.
        name: String,
    },
    /// An object the marker does not list.
    Extra {
        /// The object's name inside the entry.
        name: String,
    },
}

impl Mismatch {
    /// The file or object concerned.
    pub fn name(&self) -> &str {
        match self {
            Self::Missing { name }
            | Self::Size { name, .. }
            | Self::Rewritten { name }
            | Self::Extra { name } => name,
        }
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing { name } => write!(f, "{name} is missing"),
            Self::Size {
                name,
                found,
                listed,
            } => write!(f, "{name} holds {found} bytes, not {listed}"),
            Self::Rewritten { name } => write!(f, "{name} was written again after the marker"),
            Self::Extra { name } => write!(f, "{name} is not listed by the marker"),
        }
    }
}

impl DataMarker {
    /// The marker of an entry holding `listing` (from
    /// [`crate::hashing::HashOptions::listing`]), without etags yet.
    pub fn from_listing(hash: ContentHash, kind: HashKind, listing: &[HashedFile]) -> Self {
        Self {
            hash,
            kind,
            files: listing
                .iter()
                .map(|f| MarkedFile {
                    name: f.name.clone(),
                    size: f.size,
                    digest: f.digest,
                    e_tag: None,
                })
                .collect(),
        }
    }

    /// The marker as stored.
    pub fn to_json(&self) -> String {
        let files: Vec<Value> = self
            .files
            .iter()
            .map(|f| {
                let mut v =
                    json!({"name": f.name, "size": f.size, "digest": hex::encode(f.digest)});
                if let Some(tag) = &f.e_tag {
                    v["etag"] = json!(tag);
                }
                v
            })
            .collect();
        json!({
            "kinetic_data_marker": MARKER_FORMAT,
            "hash": self.hash.to_hex(),
            "kind": self.kind.to_string(),
            "files": files,
        })
        .to_string()
    }

    /// Read the marker of the entry `expected`. It must name that hash and
    /// its listing must hash to it.
    pub fn from_json(bytes: &[u8], expected: &ContentHash) -> Result<Self, MarkerError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(MarkerError::Unlisted);
        }
        let invalid = |message: String| MarkerError::Invalid { message };
        let doc: Value =
            serde_json::from_slice(bytes).map_err(|e| invalid(format!("not JSON: {e}")))?;
        if doc["kinetic_data_marker"].as_u64() != Some(MARKER_FORMAT) {
            return Err(invalid(format!(
                "kinetic_data_marker is {}, this client reads {MARKER_FORMAT}",
                doc["kinetic_data_marker"]
            )));
        }
        let hash: ContentHash = doc["hash"]
            .as_str()
            .and_then(|h| h.parse().ok())
            .ok_or_else(|| invalid("no valid hash".into()))?;
        if &hash != expected {
            return Err(invalid(format!("it describes {hash}, not {expected}")));
        }
        let kind = match doc["kind"].as_str() {
            Some("dir") => HashKind::Dir,
            Some("file") => HashKind::File,
            other => return Err(invalid(format!("kind is {other:?}, not dir or file"))),
        };
        let items = doc["files"]
            .as_array()
            .ok_or_else(|| invalid("no files list".into()))?;
        let mut files = Vec::with_capacity(items.len());
        for item in items {
            let name = item["name"].as_str().filter(|n| !n.is_empty());
            let size = item["size"].as_u64();
            let mut digest = [0u8; 32];
            let hexed = item["digest"]
                .as_str()
                .is_some_and(|d| hex::decode_to_slice(d, &mut digest).is_ok());
            let (Some(name), Some(size), true) = (name, size, hexed) else {
                return Err(invalid(format!("a file entry is not usable: {item}")));
            };
            files.push(MarkedFile {
                name: name.to_owned(),
                size,
                digest,
                e_tag: item["etag"].as_str().map(str::to_owned),
            });
        }
        if kind == HashKind::File && files.len() != 1 {
            return Err(invalid(format!(
                "a file entry lists {} files, not 1",
                files.len()
            )));
        }
        let marker = Self { hash, kind, files };
        let listed = hash_of_listing(kind, marker.files.iter().map(|f| &f.digest));
        if listed != hash {
            return Err(invalid(format!(
                "its files hash to {listed}, not to {hash}"
            )));
        }
        Ok(marker)
    }

    /// Bytes the listed files hold.
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// How the objects `stored` in the entry differ from this marker: each
    /// listed file must be there with its size (and its etag, when both
    /// sides have one), and nothing else may be. Empty when they match.
    pub fn mismatches(&self, stored: &[StoredFile]) -> Vec<Mismatch> {
        let found: std::collections::BTreeMap<&str, &StoredFile> =
            stored.iter().map(|s| (s.name.as_str(), s)).collect();
        let mut out = Vec::new();
        for f in &self.files {
            match found.get(f.name.as_str()) {
                None => out.push(Mismatch::Missing {
                    name: f.name.clone(),
                }),
                Some(s) if s.size != f.size => out.push(Mismatch::Size {
                    name: f.name.clone(),
                    found: s.size,
                    listed: f.size,
                }),
                Some(s) => {
                    if let (Some(a), Some(b)) = (&s.e_tag, &f.e_tag)
                        && a != b
                    {
                        out.push(Mismatch::Rewritten {
                            name: f.name.clone(),
                        });
                    }
                }
            }
        }
        let listed: std::collections::BTreeSet<&str> =
            self.files.iter().map(|f| f.name.as_str()).collect();
        out.extend(
            stored
                .iter()
                .filter(|s| !listed.contains(s.name.as_str()))
                .map(|s| Mismatch::Extra {
                    name: s.name.clone(),
                }),
        );
        out
    }

    /// This marker with each file's etag taken from `stored` (the listing
    /// made right after uploading).
    pub fn with_e_tags(mut self, stored: &[StoredFile]) -> Self {
        let tags: std::collections::BTreeMap<&str, &Option<String>> =
            stored.iter().map(|s| (s.name.as_str(), &s.e_tag)).collect();
        for f in &mut self.files {
            f.e_tag = tags.get(f.name.as_str()).and_then(|t| (*t).clone());
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn file(name: &str, content: &[u8]) -> HashedFile {
        let mut h = Sha256::new();
        h.update(name.as_bytes());
        h.update([0]);
        h.update(content);
        HashedFile {
            name: name.into(),
            path: name.into(),
            size: content.len() as u64,
            digest: h.finalize().into(),
        }
    }

    fn marker() -> DataMarker {
        let listing = [file("a.txt", b"a"), file("sub/b.txt", b"bb")];
        let hash = hash_of_listing(HashKind::Dir, listing.iter().map(|f| &f.digest));
        DataMarker::from_listing(hash, HashKind::Dir, &listing)
    }

    #[test]
    fn a_marker_round_trips_and_checks_its_own_listing() {
        let m = marker().with_e_tags(&[StoredFile::new("a.txt", 1, Some("e1".into()))]);
        assert_eq!(m.files[0].e_tag.as_deref(), Some("e1"));
        assert_eq!(m.files[1].e_tag, None);
        let back = DataMarker::from_json(m.to_json().as_bytes(), &m.hash).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.total_bytes(), 3);
        // Another entry's marker, or a listing that does not hash to the name.
        let other = ContentHash::from_bytes([7; 32]);
        assert!(DataMarker::from_json(m.to_json().as_bytes(), &other).is_err());
        let mut forged = m.clone();
        forged.files.pop();
        let err = DataMarker::from_json(forged.to_json().as_bytes(), &m.hash).unwrap_err();
        assert!(err.to_string().contains("hash to"), "{err}");
        assert_eq!(
            DataMarker::from_json(b"", &m.hash),
            Err(MarkerError::Unlisted)
        );
        assert!(DataMarker::from_json(b"{}", &m.hash).is_err());
    }

    #[test]
    fn mismatches_name_each_difference() {
        let m = marker().with_e_tags(&[StoredFile::new("a.txt", 1, Some("e1".into()))]);
        let ok = [
            StoredFile::new("a.txt", 1, Some("e1".into())),
            StoredFile::new("sub/b.txt", 2, Some("anything".into())),
        ];
        assert!(m.mismatches(&ok).is_empty());
        let bad = [
            StoredFile::new("a.txt", 1, Some("e2".into())),
            StoredFile::new("sub/b.txt#1", 0, None),
        ];
        let found: Vec<String> = m.mismatches(&bad).iter().map(ToString::to_string).collect();
        assert_eq!(
            found,
            [
                "a.txt was written again after the marker",
                "sub/b.txt is missing",
                "sub/b.txt#1 is not listed by the marker"
            ]
        );
        let short = [
            StoredFile::new("a.txt", 0, None),
            StoredFile::new("sub/b.txt", 2, None),
        ];
        assert_eq!(
            m.mismatches(&short)[0].to_string(),
            "a.txt holds 0 bytes, not 1"
        );
    }
}
