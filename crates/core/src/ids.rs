//! Job and group identities, and the names derived from them.
//!
//! Kinetic's identity rules:
//!
//! - a job id is `job-` followed by 8 lowercase hex digits (the first 8 of a
//!   uuid4's hex form); a batch's group id is `grp-` followed by 8 lowercase
//!   hex digits;
//! - the Kubernetes object of a single-host job (a batch/v1 Job) is named
//!   `kinetic-{job_id}`; a multi-host job's LeaderWorkerSet is named
//!   `keras-pathways-{job_id}`;
//! - the display name, stored in the job record but never used as a
//!   Kubernetes name, is `kinetic-{func_name}-{job_id}`;
//! - a callable without a usable name gets a synthetic one built from its
//!   `repr()` ([`synthetic_func_name`]).
//!
//! Beyond Kinetic, [`sanitize_dns1123_label`] and [`sanitize_label_value`]
//! turn any text into a valid Kubernetes object name or label value, so a
//! backend never submits a name the API server would reject.
//!
//! ```
//! use kinetic_core::ids::{JobId, gke_job_name};
//!
//! let id: JobId = "job-1a2b3c4d".parse().unwrap();
//! assert_eq!(gke_job_name(&id), "kinetic-job-1a2b3c4d");
//! assert!("job-XYZ".parse::<JobId>().is_err());
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Prefix of every job id.
pub const JOB_ID_PREFIX: &str = "job-";
/// Prefix of every group (batch) id.
pub const GROUP_ID_PREFIX: &str = "grp-";
/// Number of lowercase hex digits after the prefix of a job or group id.
pub const ID_HEX_LEN: usize = 8;
/// Longest Kubernetes object name built on a DNS-1123 label, and longest label value.
pub const K8S_NAME_MAX_LEN: usize = 63;
/// Longest synthetic function name (Kinetic's limit).
pub const SYNTHETIC_FUNC_NAME_MAX_LEN: usize = 40;
/// What the sanitisers return when nothing usable is left of their input.
pub const SANITIZE_FALLBACK: &str = "kinetic";

/// An identifier that was not in the accepted shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdError {
    /// Not `job-` followed by 8 lowercase hex digits.
    #[error(
        "invalid job id '{input}': expected 'job-' followed by 8 lowercase hex digits (e.g. job-1a2b3c4d)"
    )]
    InvalidJobId {
        /// The text that was given.
        input: String,
    },
    /// Not `grp-` followed by 8 lowercase hex digits.
    #[error(
        "invalid group id '{input}': expected 'grp-' followed by 8 lowercase hex digits (e.g. grp-1a2b3c4d)"
    )]
    InvalidGroupId {
        /// The text that was given.
        input: String,
    },
}

fn has_id_shape(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix).is_some_and(|hex| {
        hex.len() == ID_HEX_LEN && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// Bytes of a job or group id: a 4-byte prefix and [`ID_HEX_LEN`] digits.
const ID_LEN: usize = 4 + ID_HEX_LEN;

/// The text of a job or group id, held inline: an id costs 12 bytes and
/// no allocation (a batch of 100,000 inputs holds an id per input several
/// times over: its slots, its last jobs, its manifest, a status poll's
/// map). Only ever made from text of the id's shape (ASCII).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct IdText([u8; ID_LEN]);

impl IdText {
    /// `s` has an id's shape (checked by the caller): 12 ASCII bytes.
    fn of(s: &str) -> Self {
        let mut bytes = [0u8; ID_LEN];
        let n = s.len().min(ID_LEN);
        bytes[..n].copy_from_slice(&s.as_bytes()[..n]);
        Self(bytes)
    }

    fn as_str(&self) -> &str {
        // Made from ASCII only (`of`), so always UTF-8.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl fmt::Debug for IdText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

fn random_hex8() -> String {
    let mut hex = uuid::Uuid::new_v4().simple().to_string();
    hex.truncate(ID_HEX_LEN);
    hex
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:expr, $err:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(IdText);

        impl $name {
            /// A new random id: the prefix and the first 8 hex digits of a uuid4.
            pub fn new_random() -> Self {
                Self(IdText::of(&format!("{}{}", $prefix, random_hex8())))
            }

            /// The id built from a given uuid (its first 8 hex digits), for
            /// deterministic ids in tests and replays.
            pub fn from_uuid(uuid: uuid::Uuid) -> Self {
                let mut hex = uuid.simple().to_string();
                hex.truncate(ID_HEX_LEN);
                Self(IdText::of(&format!("{}{}", $prefix, hex)))
            }

            /// The id as text, prefix included.
            pub fn as_str(&self) -> &str {
                self.0.as_str()
            }

            /// The 8 hex digits after the prefix.
            pub fn hex(&self) -> &str {
                &self.as_str()[$prefix.len()..]
            }
        }

        impl FromStr for $name {
            type Err = IdError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                if has_id_shape(s, $prefix) {
                    Ok(Self(IdText::of(s)))
                } else {
                    Err(IdError::$err { input: s.to_owned() })
                }
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;

            fn try_from(s: String) -> Result<Self, Self::Error> {
                if has_id_shape(&s, $prefix) {
                    Ok(Self(IdText::of(&s)))
                } else {
                    Err(IdError::$err { input: s })
                }
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.as_str().to_owned()
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                self.as_str()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

id_type!(
    /// A job's identity: `job-` followed by 8 lowercase hex digits.
    ///
    /// It names the job's folder in the jobs bucket (`{job_id}/handle.json`…)
    /// and, through [`gke_job_name`] / [`lws_name`], its Kubernetes object.
    /// Serialises as its string.
    JobId,
    JOB_ID_PREFIX,
    InvalidJobId
);

id_type!(
    /// A batch's identity: `grp-` followed by 8 lowercase hex digits.
    ///
    /// It names the batch manifest `_groups/{group_id}/manifest.json`.
    /// Serialises as its string.
    GroupId,
    GROUP_ID_PREFIX,
    InvalidGroupId
);

/// Name of the batch/v1 Job of a single-host job: `kinetic-{job_id}`.
pub fn gke_job_name(job_id: &JobId) -> String {
    format!("kinetic-{job_id}")
}

/// Name of the LeaderWorkerSet of a multi-host job: `keras-pathways-{job_id}`.
///
/// Its leader pod is `{lws_name}-0`.
pub fn lws_name(job_id: &JobId) -> String {
    format!("keras-pathways-{job_id}")
}

/// The Kubernetes object name for a job on a backend: [`lws_name`] for
/// `pathways`, [`gke_job_name`] for every other backend (`gke`, `local` and
/// plugins, which may ignore it).
pub fn k8s_name_for_backend(backend: &str, job_id: &JobId) -> String {
    if backend == "pathways" {
        lws_name(job_id)
    } else {
        gke_job_name(job_id)
    }
}

/// The display name stored in the job record: `kinetic-{func_name}-{job_id}`.
///
/// Like Kinetic, it is not sanitised and never used as a Kubernetes name;
/// pass it through [`sanitize_dns1123_label`] for that.
pub fn display_name(func_name: &str, job_id: &JobId) -> String {
    format!("kinetic-{func_name}-{job_id}")
}

/// Kinetic's synthetic name for a callable that has no usable name.
///
/// Every run of characters outside `[A-Za-z0-9_.-]` in `repr` becomes one
/// `-`, leading and trailing `-` are stripped, and the result is cut to 40
/// characters (so it may end in `-`, as in Kinetic). When nothing is left,
/// `type_name` is returned unchanged (Kinetic's fallback).
///
/// ```
/// use kinetic_core::ids::synthetic_func_name;
///
/// assert_eq!(
///     synthetic_func_name("functools.partial(<function f at 0x7f>, 1)", "partial"),
///     "functools.partial-function-f-at-0x7f-1",
/// );
/// assert_eq!(synthetic_func_name("<<>>", "partial"), "partial");
/// ```
pub fn synthetic_func_name(repr: &str, type_name: &str) -> String {
    let replaced = replace_runs(repr, |c| {
        c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
    });
    let stripped = replaced.trim_matches('-');
    let truncated: String = stripped.chars().take(SYNTHETIC_FUNC_NAME_MAX_LEN).collect();
    if truncated.is_empty() {
        type_name.to_owned()
    } else {
        truncated
    }
}

/// Replaces every run of characters that are not `allowed` with one `-`.
fn replace_runs(input: &str, allowed: impl Fn(char) -> bool) -> String {
    let mut out = String::with_capacity(input.len());
    let mut in_run = false;
    for c in input.chars() {
        if allowed(c) {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('-');
            in_run = true;
        }
    }
    out
}

/// True when `s` is a DNS-1123 label: 1 to 63 characters of lowercase ASCII
/// letters, digits and `-`, starting and ending with a letter or digit.
pub fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= K8S_NAME_MAX_LEN
        && b.iter()
            .all(|c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'-'))
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// True when `s` is a valid, non-empty Kubernetes label value: 1 to 63
/// characters of ASCII letters, digits, `-`, `_` and `.`, starting and
/// ending with a letter or digit. (Kubernetes also accepts the empty value;
/// the sanitiser never produces it.)
pub fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= K8S_NAME_MAX_LEN
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// Turns any text into a DNS-1123 label (see [`is_dns1123_label`]).
///
/// ASCII letters are lower-cased; every run of other characters outside
/// `[a-z0-9-]` becomes one `-`; leading and trailing `-` are removed; the
/// result is cut to 63 characters and trailing `-` removed again. When
/// nothing is left the result is [`SANITIZE_FALLBACK`]. The function is
/// idempotent and always returns a valid label.
///
/// ```
/// use kinetic_core::ids::sanitize_dns1123_label;
///
/// assert_eq!(sanitize_dns1123_label("Kinetic-My_Func-job-1a2b3c4d"), "kinetic-my-func-job-1a2b3c4d");
/// assert_eq!(sanitize_dns1123_label("___"), "kinetic");
/// ```
pub fn sanitize_dns1123_label(input: &str) -> String {
    let lowered = input.to_ascii_lowercase();
    let replaced = replace_runs(&lowered, |c| {
        c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
    });
    finish(&replaced, |c| c == '-')
}

/// Turns any text into a valid, non-empty label value (see
/// [`is_label_value`]).
///
/// Every run of characters outside `[A-Za-z0-9._-]` becomes one `-`;
/// leading and trailing `-`, `_` and `.` are removed; the result is cut to 63
/// characters and trailing `-`, `_`, `.` removed again; case is kept. When
/// nothing is left the result is [`SANITIZE_FALLBACK`]. Idempotent.
pub fn sanitize_label_value(input: &str) -> String {
    let replaced = replace_runs(input, |c| {
        c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
    });
    finish(&replaced, |c| matches!(c, '-' | '_' | '.'))
}

/// Trims `edge` characters at both ends, cuts to the name limit (input is
/// ASCII here), trims the end again, and falls back when empty.
fn finish(replaced: &str, edge: impl Fn(char) -> bool + Copy) -> String {
    let trimmed = replaced.trim_matches(edge);
    let cut = &trimmed[..trimmed.len().min(K8S_NAME_MAX_LEN)];
    let cut = cut.trim_end_matches(edge);
    if cut.is_empty() {
        SANITIZE_FALLBACK.to_owned()
    } else {
        cut.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_held_inline_and_reads_as_its_text() {
        // 12 bytes, no allocation: a batch holds one per input many times.
        assert_eq!(std::mem::size_of::<JobId>(), 12);
        assert_eq!(std::mem::size_of::<GroupId>(), 12);
        let id: JobId = "job-1a2b3c4d".parse().unwrap();
        assert_eq!(id.as_str(), "job-1a2b3c4d");
        assert_eq!(id.hex(), "1a2b3c4d");
        assert_eq!(format!("{id:?}"), "JobId(\"job-1a2b3c4d\")");
        assert_eq!(String::from(id.clone()), "job-1a2b3c4d");
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"job-1a2b3c4d\"");
        let back: JobId = serde_json::from_str("\"job-1a2b3c4d\"").unwrap();
        assert_eq!(back, id);
        assert!(serde_json::from_str::<JobId>("\"job-1a2b3c4\"").is_err());
        let a: JobId = "job-0000000a".parse().unwrap();
        assert!(a < id, "ordered as their text");
        let g = GroupId::new_random();
        assert!(g.as_str().starts_with("grp-") && g.hex().len() == ID_HEX_LEN);
    }

    #[test]
    fn replace_runs_collapses() {
        assert_eq!(
            replace_runs("a  b!!c", |c| c.is_ascii_alphabetic()),
            "a-b-c"
        );
        assert_eq!(replace_runs("", |_| true), "");
    }
}
