//! The group manifest (`_groups/{group_id}/manifest.json`), the stored
//! inputs (`_groups/{group_id}/inputs.jsonl`) and the children's job ids
//! (the keys are [`crate::layout`]'s).
//!
//! The manifest has Kinetic's keys, written with sorted
//! keys: `group_id, group_kind ("map"), group_name (or null), tags,
//! created_at, total_expected, submit_fn_name, children: [{attempts,
//! group_index, job_id}]`, children in the order they were first submitted.
//! Our own keys are optional and ignored by Kinetic: `backend`, `namespace`,
//! `entrypoint`, `input_mode`, `inputs` (the inputs object's name, which
//! makes a batch resumable), `resume` (the spec's and the map's options,
//! environment names but never values: what `kinetic batch resume` needs),
//! `submission_complete` (true once every input was submitted, written
//! before `map` says so) and, on a child, `outcome` (how it ended, recorded
//! when its result was collected: [`ChildOutcome`]).
//!
//! Reading is tolerant like Kinetic's `attach_batch`: unknown keys are
//! ignored, `total_expected` defaults to the number of children, and a
//! child whose index or job id is unusable is skipped with a warning.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::ids::{GroupId, JobId};
use crate::record::UtcTimestamp;

use super::input::InputMode;

/// Kinetic's `group_kind` for a map.
pub const GROUP_KIND_MAP: &str = "map";
/// Largest input index (exclusive) with a deterministic job id.
pub const MAX_DETERMINISTIC_INDEX: usize = 1 << 24;
/// Largest attempt number with a deterministic job id.
pub const MAX_DETERMINISTIC_ATTEMPT: u32 = 255;

/// The job id of attempt `attempt` (1-based) of input `index`.
///
/// `(attempt, index)` packed into 32 bits goes through a 4-round Feistel
/// permutation keyed by the group id: the ids look random (like Kinetic's
/// `job-` + 8 hex), are the same in every process, and are **distinct for
/// every input and attempt of the batch** (a permutation has no
/// collisions). A resumed submission therefore reuses the id of an attempt
/// that may already have reached the backend, which starts it at most once.
/// Beyond 2²⁴ inputs or 255 attempts the id is random.
///
/// ```
/// use kinetic_core::batch::child_job_id;
/// let g = "grp-0a1b2c3d".parse().unwrap();
/// assert_eq!(child_job_id(&g, 7, 1), child_job_id(&g, 7, 1));
/// assert_ne!(child_job_id(&g, 7, 1), child_job_id(&g, 7, 2));
/// assert!(child_job_id(&g, 7, 1).as_str().starts_with("job-"));
/// ```
pub fn child_job_id(group_id: &GroupId, index: usize, attempt: u32) -> JobId {
    if index >= MAX_DETERMINISTIC_INDEX || attempt == 0 || attempt > MAX_DETERMINISTIC_ATTEMPT {
        return JobId::new_random();
    }
    let plain = (attempt << 24) | index as u32;
    let mut left = (plain >> 16) as u16;
    let mut right = plain as u16;
    for round in 0u8..4 {
        (left, right) = (right, left ^ feistel_round(group_id, round, right));
    }
    let mixed = (u32::from(left) << 16) | u32::from(right);
    // `job-` and 8 lower-case hex digits is always a valid job id.
    format!("job-{mixed:08x}")
        .parse()
        .unwrap_or_else(|_| JobId::new_random())
}

/// The input index and attempt whose [`child_job_id`] in `group_id` is
/// `job_id` (the permutation inverted), when that is a deterministic id
/// (attempt 1 to 255). A job id of another group decodes to some position
/// too: callers check the job belongs to the group (its record, or the
/// backend's group listing) and that the index is below the total.
///
/// ```
/// use kinetic_core::batch::{child_job_id, child_position};
/// let g = "grp-0a1b2c3d".parse().unwrap();
/// assert_eq!(child_position(&g, &child_job_id(&g, 41, 3)), Some((41, 3)));
/// ```
pub fn child_position(group_id: &GroupId, job_id: &JobId) -> Option<(usize, u32)> {
    let mixed = u32::from_str_radix(job_id.hex(), 16).ok()?;
    let mut left = (mixed >> 16) as u16;
    let mut right = mixed as u16;
    for round in (0u8..4).rev() {
        (left, right) = (right ^ feistel_round(group_id, round, left), left);
    }
    let plain = (u32::from(left) << 16) | u32::from(right);
    let attempt = plain >> 24;
    let index = (plain & 0x00ff_ffff) as usize;
    (attempt >= 1).then_some((index, attempt))
}

fn feistel_round(group_id: &GroupId, round: u8, half: u16) -> u16 {
    let mut h = Sha256::new();
    h.update(b"kinetic-batch-child\0");
    h.update(group_id.as_str().as_bytes());
    h.update([0, round]);
    h.update(half.to_be_bytes());
    let d = h.finalize();
    u16::from_be_bytes([d[0], d[1]])
}

/// One child of the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestChild {
    /// The input's index.
    pub group_index: usize,
    /// Its current job (the latest attempt's).
    pub job_id: JobId,
    /// Attempts made.
    pub attempts: u32,
    /// Ours: how it ended, once its result was collected.
    pub outcome: Option<ChildOutcome>,
}

impl ManifestChild {
    /// A child with no recorded outcome.
    pub fn new(group_index: usize, job_id: JobId, attempts: u32) -> Self {
        Self {
            group_index,
            job_id,
            attempts,
            outcome: None,
        }
    }
}

/// How a child ended, recorded in the manifest when its result is
/// collected, so that the batch reads the same after its jobs are cleaned:
/// `{"status": "SUCCEEDED", "value": V, "cleaned": true}` or
/// `{"status": "FAILED", "error": "…", "cleaned": false}`.
#[derive(Debug, Clone, PartialEq, Eq)]
// Exhaustive on purpose: the engine matches every variant, so a new
// one is a compile error there rather than a case it silently skips.
pub enum ChildOutcome {
    /// It returned `value`.
    Succeeded {
        /// The value.
        value: Value,
        /// Its job's objects and resources were removed after collection.
        cleaned: bool,
    },
    /// It failed; `error` says how (as collecting it said).
    Failed {
        /// The error's text.
        error: String,
        /// Its job's objects and resources were removed after collection.
        cleaned: bool,
    },
}

impl ChildOutcome {
    /// Whether the job was cleaned after collection.
    pub fn cleaned(&self) -> bool {
        match self {
            Self::Succeeded { cleaned, .. } | Self::Failed { cleaned, .. } => *cleaned,
        }
    }

    fn to_value(&self) -> Value {
        match self {
            Self::Succeeded { value, cleaned } => {
                json!({"cleaned": cleaned, "status": "SUCCEEDED", "value": value})
            }
            Self::Failed { error, cleaned } => {
                json!({"cleaned": cleaned, "error": error, "status": "FAILED"})
            }
        }
    }

    fn from_value(v: &Value) -> Option<Self> {
        let cleaned = v.get("cleaned").and_then(Value::as_bool).unwrap_or(false);
        match v.get("status").and_then(Value::as_str)? {
            "SUCCEEDED" => Some(Self::Succeeded {
                value: v.get("value").cloned().unwrap_or(Value::Null),
                cleaned,
            }),
            "FAILED" => Some(Self::Failed {
                error: v.get("error").and_then(Value::as_str)?.to_owned(),
                cleaned,
            }),
            _ => None,
        }
    }
}

/// A batch's manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupManifest {
    /// The group.
    pub group_id: GroupId,
    /// `map`.
    pub group_kind: String,
    /// The batch's name, if given.
    pub group_name: Option<String>,
    /// The batch's tags.
    pub tags: BTreeMap<String, String>,
    /// When the batch was created.
    pub created_at: UtcTimestamp,
    /// Number of inputs.
    pub total_expected: usize,
    /// The function's name (Kinetic's `submit_fn.__name__`).
    pub submit_fn_name: String,
    /// The children submitted so far, in first-submission order.
    pub children: Vec<ManifestChild>,
    /// Ours: the backend the children run on.
    pub backend: Option<String>,
    /// Ours: the children's namespace.
    pub namespace: Option<String>,
    /// Ours: the entrypoint (`module:function`, file or command line).
    pub entrypoint: Option<String>,
    /// Ours: how each input was applied to the function.
    pub input_mode: Option<InputMode>,
    /// Ours: the stored inputs' object name inside the group folder.
    pub inputs: Option<String>,
    /// Ours: what a resume needs (the spec's and the map's options; env
    /// names, never values).
    pub resume: Option<Value>,
    /// Ours: every input was submitted.
    pub submission_complete: bool,
}

impl GroupManifest {
    /// A manifest for a new map batch created at `created_at`, with no
    /// children yet.
    pub fn new(
        group_id: GroupId,
        total_expected: usize,
        submit_fn_name: &str,
        created_at: UtcTimestamp,
    ) -> Self {
        Self {
            group_id,
            group_kind: GROUP_KIND_MAP.to_owned(),
            group_name: None,
            tags: BTreeMap::new(),
            created_at,
            total_expected,
            submit_fn_name: submit_fn_name.to_owned(),
            children: Vec::new(),
            backend: None,
            namespace: None,
            entrypoint: None,
            input_mode: None,
            inputs: None,
            resume: None,
            submission_complete: false,
        }
    }

    /// Take in what `stored` (the manifest as stored now) knows and this
    /// one does not, for a handle that writes a batch's manifest without
    /// submitting it (one attached to a batch another process submits):
    /// the children it does not name (appended, in `stored`'s order), a
    /// child's later attempt, the outcome recorded for the same job, and
    /// that the submission is complete. Written as it was, such a
    /// handle's manifest would drop what the submitter wrote after the
    /// handle last read it, and nobody would name those children again.
    pub fn merge_stored(&mut self, stored: GroupManifest) {
        self.submission_complete |= stored.submission_complete;
        let mut at: BTreeMap<usize, usize> = self
            .children
            .iter()
            .enumerate()
            .map(|(pos, c)| (c.group_index, pos))
            .collect();
        for theirs in stored.children {
            match at.get(&theirs.group_index) {
                None => {
                    at.insert(theirs.group_index, self.children.len());
                    self.children.push(theirs);
                }
                Some(&pos) => {
                    let ours = &mut self.children[pos];
                    if theirs.attempts > ours.attempts {
                        *ours = theirs;
                    } else if theirs.job_id == ours.job_id && ours.outcome.is_none() {
                        ours.outcome = theirs.outcome;
                    }
                }
            }
        }
    }

    /// The manifest as compact JSON with sorted keys (Kinetic's
    /// `json.dumps(…, sort_keys=True)`); our optional keys only when set.
    pub fn to_json(&self) -> String {
        let mut map = Map::new();
        let mut put = |k: &str, v: Value| {
            map.insert(k.to_owned(), v);
        };
        if let Some(b) = &self.backend {
            put("backend", json!(b));
        }
        // The children are written straight into the text below: a
        // `Value` per child costs about 1.4 kB, a transient 140 MB for a
        // batch of 100,000 inputs, rewritten at every manifest write.
        put("children", Value::Null);
        put("created_at", json!(self.created_at.to_string()));
        if let Some(e) = &self.entrypoint {
            put("entrypoint", json!(e));
        }
        put("group_id", json!(self.group_id.as_str()));
        put("group_kind", json!(self.group_kind));
        put("group_name", json!(self.group_name));
        if let Some(m) = self.input_mode {
            put("input_mode", json!(m.as_str()));
        }
        if let Some(i) = &self.inputs {
            put("inputs", json!(i));
        }
        if let Some(n) = &self.namespace {
            put("namespace", json!(n));
        }
        if let Some(r) = &self.resume {
            put("resume", r.clone());
        }
        put("submit_fn_name", json!(self.submit_fn_name));
        if self.submission_complete {
            put("submission_complete", json!(true));
        }
        put("tags", json!(self.tags));
        put("total_expected", json!(self.total_expected));
        // Keys were inserted in sorted order; `sort_keys` makes it explicit.
        map.sort_keys();
        // The same text as `Value::Object(map).to_string()` with the
        // children in place, each child written as it is read.
        let mut out = String::with_capacity(512 + self.children.len() * 64);
        out.push('{');
        for (n, (key, value)) in map.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str(&Value::String(key.clone()).to_string());
            out.push(':');
            if key == "children" {
                self.write_children(&mut out);
            } else {
                out.push_str(&value.to_string());
            }
        }
        out.push('}');
        out
    }

    /// `children` as a JSON array, keys sorted (`attempts, group_index,
    /// job_id, outcome`).
    fn write_children(&self, out: &mut String) {
        use std::fmt::Write as _;
        out.push('[');
        for (n, c) in self.children.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            // Ids are `[a-z0-9-]`, written as they are; a JSON string
            // all the same should one ever hold anything else.
            let _ = write!(
                out,
                "{{\"attempts\":{},\"group_index\":{},\"job_id\":{}",
                c.attempts,
                c.group_index,
                Value::String(c.job_id.as_str().to_owned())
            );
            if let Some(o) = &c.outcome {
                out.push_str(",\"outcome\":");
                out.push_str(&o.to_value().to_string());
            }
            out.push('}');
        }
        out.push(']');
    }

    /// Read a manifest; `expected` is the group it was fetched for (used
    /// when the document has no usable `group_id`). Returns the manifest and
    /// warnings about entries that were skipped.
    pub fn from_json_bytes(
        bytes: &[u8],
        expected: &GroupId,
    ) -> Result<(Self, Vec<String>), ManifestError> {
        // Each child is read into its `ManifestChild` as the document is
        // parsed: as a `Value`, the children of 100,000 inputs took about
        // 0.7 kB each (70 MB) before they were converted.
        let raw: RawManifest =
            crate::json::parse_document_as(bytes, 4).map_err(|e| ManifestError {
                message: match e {
                    crate::json::JsonError::Invalid { message }
                        if message.contains(RawManifest::EXPECTING) =>
                    {
                        "expected a JSON object".to_owned()
                    }
                    e => format!("not valid JSON: {e}"),
                },
            })?;
        let RawManifest {
            fields: mut map,
            children,
            warnings,
        } = raw;
        let text = |map: &mut Map<String, Value>, key: &str| -> Option<String> {
            match map.remove(key) {
                Some(Value::String(s)) => Some(s),
                _ => None,
            }
        };
        let group_id = text(&mut map, "group_id")
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| expected.clone());
        if &group_id != expected {
            return Err(ManifestError {
                message: format!("it describes group {group_id}, not {expected}"),
            });
        }
        let total_expected = map
            .remove("total_expected")
            .and_then(|v| v.as_u64())
            .and_then(|t| usize::try_from(t).ok())
            .unwrap_or(children.len());
        let created_at = text(&mut map, "created_at")
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| UtcTimestamp::from_unix_seconds(0));
        let tags = match map.remove("tags") {
            Some(Value::Object(t)) => t
                .into_iter()
                .map(|(k, v)| match v {
                    Value::String(s) => (k, s),
                    other => (k, other.to_string()),
                })
                .collect(),
            _ => BTreeMap::new(),
        };
        let input_mode = text(&mut map, "input_mode").and_then(|m| m.parse().ok());
        Ok((
            Self {
                group_id,
                group_kind: text(&mut map, "group_kind").unwrap_or_else(|| GROUP_KIND_MAP.into()),
                group_name: text(&mut map, "group_name"),
                tags,
                created_at,
                total_expected,
                submit_fn_name: text(&mut map, "submit_fn_name").unwrap_or_default(),
                children,
                backend: text(&mut map, "backend"),
                namespace: text(&mut map, "namespace"),
                entrypoint: text(&mut map, "entrypoint"),
                input_mode,
                inputs: text(&mut map, "inputs"),
                resume: map.remove("resume").filter(|r| r.is_object()),
                submission_complete: map.remove("submission_complete") == Some(Value::Bool(true)),
            },
            warnings,
        ))
    }
}

/// A manifest as it is parsed: its children read one at a time into
/// [`ManifestChild`]ren (skipped ones as warnings), every other field kept
/// as a [`Value`] for [`GroupManifest::from_json_bytes`] to take apart.
#[derive(Default)]
struct RawManifest {
    fields: Map<String, Value>,
    children: Vec<ManifestChild>,
    warnings: Vec<String>,
}

impl RawManifest {
    const EXPECTING: &'static str = "a manifest (a JSON object)";

    /// One child entry, or why it is skipped.
    fn child(pos: usize, item: &Value) -> Result<ManifestChild, String> {
        let index = item
            .get("group_index")
            .and_then(Value::as_u64)
            .and_then(|i| usize::try_from(i).ok());
        let job_id = item
            .get("job_id")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<JobId>().ok());
        let attempts = item
            .get("attempts")
            .and_then(Value::as_u64)
            .and_then(|a| u32::try_from(a).ok())
            .unwrap_or(1);
        match (index, job_id) {
            (Some(group_index), Some(job_id)) => Ok(ManifestChild {
                group_index,
                job_id,
                attempts,
                outcome: item.get("outcome").and_then(ChildOutcome::from_value),
            }),
            _ => Err(format!(
                "manifest child #{pos} has no valid group_index and job_id ({item}); skipped"
            )),
        }
    }
}

impl<'de> serde::Deserialize<'de> for RawManifest {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Document;
        impl<'de> serde::de::Visitor<'de> for Document {
            type Value = RawManifest;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(RawManifest::EXPECTING)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut access: A,
            ) -> Result<RawManifest, A::Error> {
                let mut raw = RawManifest::default();
                while let Some(key) = access.next_key::<String>()? {
                    if key == "children" {
                        // Anything but an array names no children.
                        if let Some(Children(children, warnings)) =
                            access.next_value::<Option<Children>>()?
                        {
                            raw.children = children;
                            raw.warnings = warnings;
                        }
                    } else {
                        let value: Value = access.next_value()?;
                        raw.fields.insert(key, value);
                    }
                }
                Ok(raw)
            }
        }
        deserializer.deserialize_map(Document)
    }
}

/// The `children` array, converted entry by entry; a value of another
/// type names none.
struct Children(Vec<ManifestChild>, Vec<String>);

impl<'de> serde::Deserialize<'de> for Children {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> serde::de::Visitor<'de> for Entries {
            type Value = Children;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("the children")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut items: A,
            ) -> Result<Children, A::Error> {
                let mut out = Children(
                    Vec::with_capacity(items.size_hint().unwrap_or(0)),
                    Vec::new(),
                );
                let mut pos = 0;
                while let Some(item) = items.next_element::<Value>()? {
                    match RawManifest::child(pos, &item) {
                        Ok(child) => out.0.push(child),
                        Err(warning) => out.1.push(warning),
                    }
                    pos += 1;
                }
                Ok(out)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Children, A::Error> {
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(Children(Vec::new(), Vec::new()))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Children, E> {
                Ok(Children(Vec::new(), Vec::new()))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Children, E> {
                Ok(Children(Vec::new(), Vec::new()))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Children, E> {
                Ok(Children(Vec::new(), Vec::new()))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Children, E> {
                Ok(Children(Vec::new(), Vec::new()))
            }
            fn visit_str<E>(self, _: &str) -> Result<Children, E> {
                Ok(Children(Vec::new(), Vec::new()))
            }
        }
        deserializer.deserialize_any(Entries)
    }
}

/// A manifest or inputs file that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct ManifestError {
    /// What is wrong.
    pub message: String,
}

/// The outcomes a manifest records, by input, read without building the
/// document as a `Value` (about 1.4 kB per child that way: 140 MB for a
/// batch of 100,000 inputs): what a batch reads back for the values it
/// let go once recorded. Children without a valid `group_index` or
/// outcome are skipped, as [`GroupManifest::from_json_bytes`] skips them;
/// a document this lean reading refuses (a field of an unexpected type)
/// is read in full ([`GroupManifest::from_json_bytes`] with `expected`).
pub fn recorded_outcomes(
    bytes: &[u8],
    expected: &GroupId,
) -> Result<BTreeMap<usize, ChildOutcome>, ManifestError> {
    #[derive(serde::Deserialize)]
    struct Outcomes {
        #[serde(default)]
        children: Vec<Child>,
    }
    #[derive(serde::Deserialize)]
    struct Child {
        #[serde(default)]
        group_index: Option<u64>,
        #[serde(default)]
        job_id: Option<String>,
        #[serde(default)]
        outcome: Option<Stored>,
    }
    #[derive(serde::Deserialize)]
    struct Stored {
        status: String,
        #[serde(default)]
        value: Value,
        #[serde(default)]
        error: Option<String>,
        #[serde(default)]
        cleaned: bool,
    }
    let lean = match serde_json::from_slice::<Outcomes>(bytes) {
        Ok(lean) => lean,
        Err(_) => {
            // Read it the tolerant way.
            let (manifest, _) = GroupManifest::from_json_bytes(bytes, expected)?;
            return Ok(manifest
                .children
                .into_iter()
                .filter_map(|c| c.outcome.map(|o| (c.group_index, o)))
                .collect());
        }
    };
    Ok(lean
        .children
        .into_iter()
        .filter(|c| {
            c.job_id
                .as_deref()
                .is_some_and(|j| j.parse::<JobId>().is_ok())
        })
        .filter_map(|c| {
            let index = usize::try_from(c.group_index?).ok()?;
            let o = c.outcome?;
            let outcome = match (o.status.as_str(), o.error) {
                ("SUCCEEDED", _) => ChildOutcome::Succeeded {
                    value: o.value,
                    cleaned: o.cleaned,
                },
                ("FAILED", Some(error)) => ChildOutcome::Failed {
                    error,
                    cleaned: o.cleaned,
                },
                _ => return None,
            };
            Some((index, outcome))
        })
        .collect())
}

/// The inputs as JSON Lines: one compact JSON value per line, in order.
pub fn encode_inputs(inputs: &[Value]) -> String {
    let mut out = String::new();
    for v in inputs {
        out.push_str(&v.to_string());
        out.push('\n');
    }
    out
}

/// Read JSON Lines: one value per non-blank line. The error names the
/// 1-based line.
pub fn decode_inputs(bytes: &[u8]) -> Result<Vec<Value>, ManifestError> {
    let text = std::str::from_utf8(bytes).map_err(|e| ManifestError {
        message: format!("inputs are not UTF-8: {e}"),
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            crate::json::parse(l.as_bytes()).map_err(|e| ManifestError {
                message: format!("line {}: {e}", n + 1),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gid() -> GroupId {
        "grp-0a1b2c3d".parse().unwrap()
    }

    #[test]
    fn manifest_json_is_kinetics_with_sorted_keys() {
        let mut m = GroupManifest::new(gid(), 3, "square", UtcTimestamp::now());
        m.created_at = "2026-03-25T10:00:00Z".parse().unwrap();
        m.children
            .push(ManifestChild::new(1, "job-00000001".parse().unwrap(), 2));
        let golden = r#"{"children":[{"attempts":2,"group_index":1,"job_id":"job-00000001"}],"created_at":"2026-03-25T10:00:00Z","group_id":"grp-0a1b2c3d","group_kind":"map","group_name":null,"submit_fn_name":"square","tags":{},"total_expected":3}"#;
        assert_eq!(m.to_json(), golden);
        let (back, warnings) = GroupManifest::from_json_bytes(golden.as_bytes(), &gid()).unwrap();
        assert_eq!(back, m);
        assert!(warnings.is_empty());
    }

    /// Children are read one at a time (never the whole array as a
    /// `Value`), with the same tolerance: an unusable entry is a warning,
    /// a `children` that is no array names none, and a document that is
    /// no object or nests too deep is refused.
    #[test]
    fn a_manifest_is_read_child_by_child_with_the_same_tolerance() {
        let job = child_job_id(&gid(), 0, 1);
        let doc = format!(
            r#"{{"group_id":"grp-0a1b2c3d","total_expected":3,"children":[{{"group_index":0,"job_id":"{job}","attempts":2,"outcome":{{"status":"SUCCEEDED","value":[1,{{"a":null}}],"cleaned":true}}}},{{"group_index":"one","job_id":"{job}"}},{{"job_id":"nope","group_index":2}}],"submission_complete":true,"resume":{{"x":1}}}}"#
        );
        let (m, warnings) = GroupManifest::from_json_bytes(doc.as_bytes(), &gid()).unwrap();
        assert_eq!(m.total_expected, 3);
        assert!(m.submission_complete);
        assert_eq!(m.resume, Some(json!({"x": 1})));
        assert_eq!(m.children.len(), 1);
        assert_eq!((m.children[0].group_index, m.children[0].attempts), (0, 2));
        assert_eq!(
            m.children[0].outcome,
            Some(ChildOutcome::Succeeded {
                value: json!([1, {"a": null}]),
                cleaned: true
            })
        );
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[0].starts_with("manifest child #1 "),
            "{warnings:?}"
        );
        assert!(
            warnings[1].starts_with("manifest child #2 "),
            "{warnings:?}"
        );
        for children in ["null", "7", "\"x\"", "{\"a\":[1]}", "true"] {
            let doc = format!(r#"{{"total_expected":2,"children":{children}}}"#);
            let (m, warnings) = GroupManifest::from_json_bytes(doc.as_bytes(), &gid()).unwrap();
            assert!(m.children.is_empty() && warnings.is_empty(), "{children}");
            assert_eq!(m.total_expected, 2);
        }
        for (doc, says) in [
            ("[1]", "expected a JSON object"),
            ("\"x\"", "expected a JSON object"),
            ("{\"children\":[}", "not valid JSON"),
            ("{} trailing", "not valid JSON"),
        ] {
            let err = GroupManifest::from_json_bytes(doc.as_bytes(), &gid()).unwrap_err();
            assert!(err.message.starts_with(says), "{doc}: {err}");
        }
        let deep = format!(
            r#"{{"children":[{{"group_index":0,"job_id":"{job}","outcome":{{"status":"SUCCEEDED","value":{}1{}}}}}]}}"#,
            "[".repeat(crate::json::MAX_DEPTH + 1),
            "]".repeat(crate::json::MAX_DEPTH + 1)
        );
        let err = GroupManifest::from_json_bytes(deep.as_bytes(), &gid()).unwrap_err();
        assert!(err.message.contains("deep"), "{err}");
    }

    /// An attached handle that knew only input 0 when it read the
    /// manifest writes input 1, which the submitter named since, too; a
    /// later attempt and a recorded outcome are kept, its own outcome too.
    #[test]
    fn merging_the_stored_manifest_keeps_what_only_it_knows() {
        let job = |i: usize, attempt: u32| child_job_id(&gid(), i, attempt);
        let done = |v: i64| ChildOutcome::Succeeded {
            value: json!(v),
            cleaned: true,
        };
        let at = UtcTimestamp::now();
        let mut ours = GroupManifest::new(gid(), 4, "square", at);
        ours.children.push(ManifestChild::new(0, job(0, 1), 1));
        ours.children[0].outcome = Some(done(0));
        ours.children.push(ManifestChild::new(2, job(2, 1), 1));
        ours.children.push(ManifestChild::new(3, job(3, 1), 1));
        let mut stored = GroupManifest::new(gid(), 4, "square", at);
        stored.submission_complete = true;
        stored.children.push(ManifestChild::new(0, job(0, 1), 1));
        stored.children.push(ManifestChild::new(1, job(1, 1), 1));
        stored.children.push(ManifestChild::new(2, job(2, 2), 2));
        stored.children.push(ManifestChild::new(3, job(3, 1), 1));
        stored.children[3].outcome = Some(done(9));
        ours.merge_stored(stored);
        assert!(ours.submission_complete);
        let children: Vec<(usize, JobId, u32, Option<ChildOutcome>)> = ours
            .children
            .into_iter()
            .map(|c| (c.group_index, c.job_id, c.attempts, c.outcome))
            .collect();
        assert_eq!(
            children,
            vec![
                (0, job(0, 1), 1, Some(done(0))),
                (2, job(2, 2), 2, None),
                (3, job(3, 1), 1, Some(done(9))),
                (1, job(1, 1), 1, None),
            ]
        );
        // What the stored manifest lacks stays; an older attempt is not taken.
        let mut ours = GroupManifest::new(gid(), 2, "square", at);
        ours.children.push(ManifestChild::new(0, job(0, 2), 2));
        let mut stored = GroupManifest::new(gid(), 2, "square", at);
        stored.children.push(ManifestChild::new(0, job(0, 1), 1));
        stored.children[0].outcome = Some(done(1));
        ours.merge_stored(stored);
        assert!(!ours.submission_complete);
        assert_eq!(ours.children, vec![ManifestChild::new(0, job(0, 2), 2)]);
    }

    /// The children are written as text, not built as a `Value`: the
    /// text is the one a `Value` of the whole manifest prints.
    #[test]
    fn children_written_as_text_read_as_a_value_would() {
        let mut m = GroupManifest::new(gid(), 3, "f\"q", UtcTimestamp::now());
        m.resume = Some(json!({"z": 1, "a": [true, null]}));
        m.tags.insert("k\u{e9}y".into(), "v\n".into());
        for (i, outcome) in [
            None,
            Some(ChildOutcome::Succeeded {
                value: json!({"b": "x\"y", "a": [1.5, -2]}),
                cleaned: true,
            }),
            Some(ChildOutcome::Failed {
                error: "Boom:\n\tline".into(),
                cleaned: false,
            }),
        ]
        .into_iter()
        .enumerate()
        {
            let mut c = ManifestChild::new(i, child_job_id(&gid(), i, 1), 1);
            c.outcome = outcome;
            m.children.push(c);
        }
        let text = m.to_json();
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value.to_string(), text);
        let (back, warnings) = GroupManifest::from_json_bytes(text.as_bytes(), &gid()).unwrap();
        assert_eq!(back, m);
        assert!(warnings.is_empty());
    }

    /// The lean reading of the outcomes gives what the full one gives,
    /// and falls back to it for a document it refuses.
    #[test]
    fn recorded_outcomes_read_lean_match_the_full_reading() {
        let mut m = GroupManifest::new(gid(), 4, "f", UtcTimestamp::now());
        for (i, outcome) in [
            Some(ChildOutcome::Succeeded {
                value: json!({"a": [1, "x"]}),
                cleaned: true,
            }),
            None,
            Some(ChildOutcome::Failed {
                error: "ValueError: no".into(),
                cleaned: false,
            }),
            Some(ChildOutcome::Succeeded {
                value: Value::Null,
                cleaned: false,
            }),
        ]
        .into_iter()
        .enumerate()
        {
            let mut c = ManifestChild::new(i, child_job_id(&gid(), i, 1), 1);
            c.outcome = outcome;
            m.children.push(c);
        }
        let full: BTreeMap<usize, ChildOutcome> = m
            .children
            .iter()
            .filter_map(|c| c.outcome.clone().map(|o| (c.group_index, o)))
            .collect();
        assert_eq!(full.len(), 3);
        let text = m.to_json();
        assert_eq!(recorded_outcomes(text.as_bytes(), &gid()).unwrap(), full);
        // A field of another type: the tolerant reading skips that child.
        let odd = text.replacen("\"attempts\":1", "\"attempts\":1,\"group_index\":\"x\"", 1);
        let read = recorded_outcomes(odd.as_bytes(), &gid());
        assert!(read.is_ok(), "{read:?}");
        assert!(recorded_outcomes(b"{not json", &gid()).is_err());
    }

    #[test]
    fn our_keys_round_trip() {
        let mut m = GroupManifest::new(gid(), 2, "f", UtcTimestamp::now());
        m.backend = Some("gke".into());
        m.namespace = Some("ns".into());
        m.entrypoint = Some("work:f".into());
        m.input_mode = Some(InputMode::Kwargs);
        m.inputs = Some(crate::layout::INPUTS_FILE.into());
        m.group_name = Some("sweep".into());
        m.tags.insert("team".into(), "x".into());
        m.resume = Some(json!({"retries": 2, "env": [{"name": "K", "secret": true}]}));
        m.submission_complete = true;
        let mut done = ManifestChild::new(0, "job-0000000a".parse().unwrap(), 1);
        done.outcome = Some(ChildOutcome::Succeeded {
            value: json!(1267650600228229401496703205376_u128.to_string()),
            cleaned: true,
        });
        let mut failed = ManifestChild::new(1, "job-0000000b".parse().unwrap(), 2);
        failed.outcome = Some(ChildOutcome::Failed {
            error: "ValueError: no".into(),
            cleaned: false,
        });
        m.children = vec![done, failed];
        let json = m.to_json();
        let keys: Vec<String> = serde_json::from_str::<Map<String, Value>>(&json)
            .unwrap()
            .keys()
            .cloned()
            .collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        let (back, _) = GroupManifest::from_json_bytes(json.as_bytes(), &gid()).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn reading_is_tolerant_like_kinetic() {
        let doc = br#"{"group_id":"grp-0a1b2c3d","children":[
            {"group_index":0,"job_id":"job-0000000a","attempts":1},
            {"group_index":"x","job_id":"job-0000000b"},
            {"group_index":2,"job_id":"nope"}],
            "tags":{"n":1},"future_key":true}"#;
        let (m, warnings) = GroupManifest::from_json_bytes(doc, &gid()).unwrap();
        assert_eq!(m.children.len(), 1);
        assert_eq!(m.total_expected, 1, "defaults to the number of children");
        assert_eq!(warnings.len(), 2);
        assert_eq!(m.tags["n"], "1");
        assert!(GroupManifest::from_json_bytes(b"[]", &gid()).is_err());
        let other = br#"{"group_id":"grp-ffffffff"}"#;
        assert!(GroupManifest::from_json_bytes(other, &gid()).is_err());
    }

    #[test]
    fn inputs_round_trip_and_errors_name_the_line() {
        let inputs = vec![json!(1), json!({"a": [1, "x\ny"]}), json!(null)];
        let text = encode_inputs(&inputs);
        assert_eq!(text.lines().count(), 3);
        assert_eq!(decode_inputs(text.as_bytes()).unwrap(), inputs);
        let err = decode_inputs(b"1\n\n{bad\n").unwrap_err().to_string();
        assert!(err.contains("line 3"), "{err}");
    }

    #[test]
    fn child_ids_are_stable_and_distinct() {
        let g = gid();
        let ids: std::collections::BTreeSet<JobId> = (0..20_000)
            .flat_map(|i| [child_job_id(&g, i, 1), child_job_id(&g, i, 2)])
            .collect();
        assert_eq!(ids.len(), 40_000, "a permutation never collides");
        let other: GroupId = "grp-0a1b2c3e".parse().unwrap();
        assert_ne!(child_job_id(&g, 0, 1), child_job_id(&other, 0, 1));
        assert_eq!(
            child_job_id(&g, 5, 1).as_str(),
            child_job_id(&g, 5, 1).as_str()
        );
    }
}
