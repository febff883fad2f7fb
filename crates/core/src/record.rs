//! The durable job record, persisted as `{job_id}/handle.json`
//! ([`crate::layout::record`]).
//!
//! [`JobRecord`] has exactly the fields and JSON of Kinetic's `JobHandle`
//!, so either tool can attach to a job the other submitted:
//!
//! - keys: `job_id, backend, project, cluster_name, zone, namespace,
//!   bucket_name, k8s_name, image_uri, accelerator, func_name, display_name,
//!   created_at, group_id?, group_kind?, group_index?, debug`;
//! - `created_at` is UTC ISO-8601 without fractional seconds, with `Z`
//!   ([`UtcTimestamp`]);
//! - absent optional keys are dropped, never written as `null`;
//! - keys are written sorted, so the output is byte-stable;
//! - reading ignores unknown keys (forward compatibility); a missing
//!   required key is an error naming it.
//!
//! `backend` is a free string: Kinetic writes `gke` or `pathways`; we add
//! `local` and plugin names (Kinetic cannot attach to those).
//!
//! Our own additions are optional keys only, which Kinetic's reader drops
//! (its `from_dict` keeps only its dataclass fields):
//!
//! - `entrypoint`: what the job runs (`module:function` or the command line);
//! - `store_url`: the object-store URL of the job's artifacts when it is not
//!   the Kinetic jobs bucket (`file:///…` for the local backend).
//!
//! ```
//! use kinetic_core::record::JobRecord;
//!
//! let json = r#"{"accelerator":"cpu","backend":"gke","bucket_name":"p-kn-c-jobs",
//!   "cluster_name":"c","created_at":"2026-03-25T10:00:00Z","debug":false,
//!   "display_name":"kinetic-main-job-1a2b3c4d","func_name":"main",
//!   "image_uri":"","job_id":"job-1a2b3c4d","k8s_name":"kinetic-job-1a2b3c4d",
//!   "namespace":"default","project":"p","zone":"us-central1-a"}"#;
//! let record = JobRecord::from_json(json).unwrap();
//! assert_eq!(record.job_id.as_str(), "job-1a2b3c4d");
//! assert!(record.to_json().starts_with(r#"{"accelerator":"cpu","backend":"gke""#));
//! ```

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ids::{GroupId, JobId};

/// Content type the record is stored with.
pub const RECORD_CONTENT_TYPE: &str = "application/json";

/// A moment in UTC with whole seconds, written `2026-03-25T10:00:00Z`.
///
/// Parsing accepts fractional seconds (dropped) and a `+00:00` suffix as
/// well as `Z`; formatting always gives the Kinetic form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct UtcTimestamp {
    unix_seconds: u64,
}

impl UtcTimestamp {
    /// The current time, truncated to the second.
    pub fn now() -> Self {
        Self::from(SystemTime::now())
    }

    /// The moment `unix_seconds` seconds after 1970-01-01T00:00:00Z.
    pub fn from_unix_seconds(unix_seconds: u64) -> Self {
        Self { unix_seconds }
    }

    /// Seconds since 1970-01-01T00:00:00Z.
    pub fn unix_seconds(self) -> u64 {
        self.unix_seconds
    }

    /// The moment as a [`SystemTime`].
    pub fn to_system_time(self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.unix_seconds)
    }
}

impl From<SystemTime> for UtcTimestamp {
    /// Truncates to the second; times before 1970 become 1970-01-01T00:00:00Z.
    fn from(t: SystemTime) -> Self {
        let unix_seconds = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Self { unix_seconds }
    }
}

impl fmt::Display for UtcTimestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}",
            humantime::format_rfc3339_seconds(self.to_system_time())
        )
    }
}

/// A timestamp that is not UTC ISO-8601.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid timestamp '{input}': expected UTC ISO-8601 such as 2026-03-25T10:00:00Z")]
#[non_exhaustive]
pub struct ParseTimestampError {
    /// The text that was given.
    pub input: String,
}

impl FromStr for UtcTimestamp {
    type Err = ParseTimestampError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let normalised = match s.strip_suffix("+00:00") {
            Some(head) => format!("{head}Z"),
            None => s.to_owned(),
        };
        humantime::parse_rfc3339(&normalised)
            .map(Self::from)
            .map_err(|_| ParseTimestampError {
                input: s.to_owned(),
            })
    }
}

impl TryFrom<String> for UtcTimestamp {
    type Error = ParseTimestampError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<UtcTimestamp> for String {
    fn from(t: UtcTimestamp) -> String {
        t.to_string()
    }
}

/// Why a `handle.json` could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The text is not JSON.
    #[error("job record is not valid JSON: {message}")]
    InvalidJson {
        /// The parser's message.
        message: String,
    },
    /// The JSON is not an object.
    #[error("job record must be a JSON object, got {found}")]
    NotAnObject {
        /// The JSON type found.
        found: &'static str,
    },
    /// A required key is absent.
    #[error("job record is missing the required key '{key}'")]
    MissingKey {
        /// The key.
        key: &'static str,
    },
    /// A key has a value of the wrong type or shape.
    #[error("job record key '{key}' is invalid: expected {expected}, got {found}")]
    InvalidValue {
        /// The key.
        key: &'static str,
        /// What is accepted.
        expected: &'static str,
        /// What was found (a JSON type, or the offending text).
        found: String,
    },
}

/// A record's ids do not match where it was read from: it names another
/// job, Kubernetes object or batch (an edited or misplaced `handle.json`).
/// Acting on it could touch what belongs to that other job, so it is
/// refused ([`JobRecord::check_ids`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "job record key '{key}' is '{found}' but the record belongs to {expected}: refusing a record whose ids do not match where it was read from (was handle.json edited or copied?)"
)]
#[non_exhaustive]
pub struct IdMismatch {
    /// The key (`job_id`, `k8s_name`, `group_id`).
    pub key: &'static str,
    /// What the record says.
    pub found: String,
    /// What it must say, in words (`job job-0a1b2c3d`, …).
    pub expected: String,
}

/// The durable description of a submitted job (`{job_id}/handle.json`).
///
/// Field order is alphabetical, which is also the key order of the JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Value")]
pub struct JobRecord {
    /// The accelerator string as the user wrote it (e.g. `tpu-v5e-1`).
    pub accelerator: String,
    /// The backend that runs the job: `gke`, `pathways`, `local`, or a plugin's name.
    pub backend: String,
    /// The jobs bucket (`{project}-kn-{cluster}-jobs`).
    pub bucket_name: String,
    /// The cluster name.
    pub cluster_name: String,
    /// When the job was submitted.
    pub created_at: UtcTimestamp,
    /// Whether the job runs with a debugger attached.
    pub debug: bool,
    /// `kinetic-{func_name}-{job_id}` ([`crate::ids::display_name`]).
    pub display_name: String,
    /// Ours, optional: what the job runs (`module:function` or a command line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
    /// The function's name.
    pub func_name: String,
    /// The batch this job belongs to, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_id: Option<GroupId>,
    /// The job's input index in its batch, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_index: Option<u64>,
    /// The kind of batch (Kinetic writes `map`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_kind: Option<String>,
    /// The image the job runs (`""` when none was resolved).
    pub image_uri: String,
    /// The job's id.
    pub job_id: JobId,
    /// The Kubernetes object name ([`crate::ids::k8s_name_for_backend`]).
    pub k8s_name: String,
    /// The Kubernetes namespace.
    pub namespace: String,
    /// The cloud project.
    pub project: String,
    /// Ours, optional: object-store URL of the job's artifacts when not the
    /// Kinetic jobs bucket.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store_url: Option<String>,
    /// The zone.
    pub zone: String,
}

/// Keys Kinetic requires; reading fails naming the first one absent.
pub const REQUIRED_KEYS: [&str; 13] = [
    "job_id",
    "backend",
    "project",
    "cluster_name",
    "zone",
    "namespace",
    "bucket_name",
    "k8s_name",
    "image_uri",
    "accelerator",
    "func_name",
    "display_name",
    "created_at",
];

/// Keys this crate writes only when set and Kinetic's reader ignores.
pub const EXTENSION_KEYS: [&str; 2] = ["entrypoint", "store_url"];

impl JobRecord {
    /// The record as compact JSON with sorted keys and no `null` values
    /// (byte-stable for equal records).
    pub fn to_json(&self) -> String {
        sorted_value(self).to_string()
    }

    /// The record as indented JSON with sorted keys, for people.
    pub fn to_json_pretty(&self) -> String {
        // Serialising a map of strings to JSON values cannot fail.
        serde_json::to_string_pretty(&sorted_value(self)).unwrap_or_default()
    }

    /// Reads a record; unknown keys are ignored.
    pub fn from_json(text: &str) -> Result<Self, RecordError> {
        let value: Value = serde_json::from_str(text).map_err(|e| RecordError::InvalidJson {
            message: e.to_string(),
        })?;
        Self::try_from(value)
    }

    /// Reads a record from bytes (see [`JobRecord::from_json`]).
    pub fn from_json_bytes(bytes: &[u8]) -> Result<Self, RecordError> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| RecordError::InvalidJson {
            message: e.to_string(),
        })?;
        Self::try_from(value)
    }

    /// Checks that the record's ids are those of job `job_id` (the id its
    /// key names): `job_id` itself, and the Kubernetes object name derived
    /// from it ([`crate::ids::k8s_name_for_backend`]), which backends
    /// delete on cleanup. Every reader of a stored record calls this before
    /// acting on it.
    ///
    /// ```
    /// # use kinetic_core::record::JobRecord;
    /// let json = r#"{"accelerator":"cpu","backend":"gke","bucket_name":"b","cluster_name":"c",
    ///   "created_at":"2026-03-25T10:00:00Z","debug":false,"display_name":"kinetic-f-job-1a2b3c4d",
    ///   "func_name":"f","image_uri":"","job_id":"job-1a2b3c4d","k8s_name":"kinetic-job-1a2b3c4d",
    ///   "namespace":"default","project":"p","zone":"z"}"#;
    /// let record = JobRecord::from_json(json).unwrap();
    /// assert!(record.check_ids(&"job-1a2b3c4d".parse().unwrap()).is_ok());
    /// let err = record.check_ids(&"job-00000000".parse().unwrap()).unwrap_err();
    /// assert_eq!(err.key, "job_id");
    /// ```
    pub fn check_ids(&self, job_id: &JobId) -> Result<(), IdMismatch> {
        if &self.job_id != job_id {
            return Err(IdMismatch {
                key: "job_id",
                found: self.job_id.to_string(),
                expected: format!("job {job_id}"),
            });
        }
        let k8s_name = crate::ids::k8s_name_for_backend(&self.backend, job_id);
        if self.k8s_name != k8s_name {
            return Err(IdMismatch {
                key: "k8s_name",
                found: self.k8s_name.clone(),
                expected: format!("job {job_id} (whose object is {k8s_name})"),
            });
        }
        Ok(())
    }

    /// Checks that the record belongs to batch `group_id` (its `group_id`
    /// key), as a batch child must, besides [`JobRecord::check_ids`].
    pub fn check_group(&self, group_id: &GroupId) -> Result<(), IdMismatch> {
        if self.group_id.as_ref() == Some(group_id) {
            return Ok(());
        }
        Err(IdMismatch {
            key: "group_id",
            found: self
                .group_id
                .as_ref()
                .map_or_else(|| "(none)".to_owned(), ToString::to_string),
            expected: format!("batch {group_id}"),
        })
    }

    /// Where this record is stored: `{job_id}/handle.json` ([`crate::layout::record`]).
    pub fn key(&self) -> crate::ports::ObjectPath {
        crate::layout::record(&self.job_id)
    }
}

fn sorted_value(record: &JobRecord) -> Value {
    match serde_json::to_value(record) {
        Ok(Value::Object(mut map)) => {
            map.retain(|_, v| !v.is_null());
            map.sort_keys();
            Value::Object(map)
        }
        // A struct of strings, bools and integers always serialises to an object.
        Ok(other) => other,
        Err(_) => Value::Null,
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

struct Reader {
    map: Map<String, Value>,
}

impl Reader {
    fn required_str(&mut self, key: &'static str) -> Result<String, RecordError> {
        match self.map.remove(key) {
            None => Err(RecordError::MissingKey { key }),
            Some(v) => into_string(key, v),
        }
    }

    fn optional_str(&mut self, key: &'static str) -> Result<Option<String>, RecordError> {
        match self.map.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => into_string(key, v).map(Some),
        }
    }

    fn parsed<T: FromStr>(
        &mut self,
        key: &'static str,
        expected: &'static str,
    ) -> Result<T, RecordError> {
        let text = self.required_str(key)?;
        text.parse().map_err(|_| RecordError::InvalidValue {
            key,
            expected,
            found: format!("'{text}'"),
        })
    }
}

fn into_string(key: &'static str, v: Value) -> Result<String, RecordError> {
    match v {
        Value::String(s) => Ok(s),
        other => Err(RecordError::InvalidValue {
            key,
            expected: "a string",
            found: json_type(&other).to_owned(),
        }),
    }
}

impl TryFrom<Value> for JobRecord {
    type Error = RecordError;

    fn try_from(value: Value) -> Result<Self, Self::Error> {
        let map = match value {
            Value::Object(map) => map,
            other => {
                return Err(RecordError::NotAnObject {
                    found: json_type(&other),
                });
            }
        };
        let mut r = Reader { map };
        // Required keys first, in Kinetic's field order, so the error names
        // the first missing one as Kinetic's constructor would.
        let job_id = r.parsed::<JobId>("job_id", "'job-' followed by 8 lowercase hex digits")?;
        let backend = r.required_str("backend")?;
        let project = r.required_str("project")?;
        let cluster_name = r.required_str("cluster_name")?;
        let zone = r.required_str("zone")?;
        let namespace = r.required_str("namespace")?;
        let bucket_name = r.required_str("bucket_name")?;
        let k8s_name = r.required_str("k8s_name")?;
        let image_uri = r.required_str("image_uri")?;
        let accelerator = r.required_str("accelerator")?;
        let func_name = r.required_str("func_name")?;
        let display_name = r.required_str("display_name")?;
        let created_at = r.parsed::<UtcTimestamp>(
            "created_at",
            "a UTC ISO-8601 timestamp such as 2026-03-25T10:00:00Z",
        )?;
        let group_id = match r.optional_str("group_id")? {
            None => None,
            Some(text) => Some(
                text.parse::<GroupId>()
                    .map_err(|_| RecordError::InvalidValue {
                        key: "group_id",
                        expected: "'grp-' followed by 8 lowercase hex digits",
                        found: format!("'{text}'"),
                    })?,
            ),
        };
        let group_kind = r.optional_str("group_kind")?;
        let group_index = match r.map.remove("group_index") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64(),
            Some(other) => {
                return Err(RecordError::InvalidValue {
                    key: "group_index",
                    expected: "a non-negative integer",
                    found: if other.is_number() {
                        other.to_string()
                    } else {
                        json_type(&other).to_owned()
                    },
                });
            }
        };
        // Kinetic's dataclass defaults `debug` to False when absent.
        let debug = match r.map.remove("debug") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => b,
            Some(other) => {
                return Err(RecordError::InvalidValue {
                    key: "debug",
                    expected: "a boolean",
                    found: json_type(&other).to_owned(),
                });
            }
        };
        let entrypoint = r.optional_str("entrypoint")?;
        let store_url = r.optional_str("store_url")?;
        Ok(Self {
            accelerator,
            backend,
            bucket_name,
            cluster_name,
            created_at,
            debug,
            display_name,
            entrypoint,
            func_name,
            group_id,
            group_index,
            group_kind,
            image_uri,
            job_id,
            k8s_name,
            namespace,
            project,
            store_url,
            zone,
        })
    }
}
