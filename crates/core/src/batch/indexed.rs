//! A batch submitted in one call ([`crate::ports::Backend::submit_batch`],
//! an Indexed Job on gke): the batch spec the runner's index mode reads
//! (`_groups/{group_id}/batch.json`, `docs/runner-protocol.md`) and the
//! inputs' calls in chunks of JSON lines. Pure: the engine writes what
//! these functions give.

use serde_json::{Map, Value, json};

use crate::ids::GroupId;
use crate::protocol::{PROTOCOL_VERSION, RunnerSpec};
use crate::record::JobRecord;

/// The batch spec's `kind`.
pub const BATCH_SPEC_KIND: &str = "indexed_batch";
/// Inputs per chunk of calls: a pod reads one chunk (about 100 objects
/// for 100,000 inputs).
pub const DEFAULT_CHUNK_SIZE: usize = 1000;
/// Where a child's id goes in [`IndexedBatchSpec::job_uri`] and in the
/// record template's strings.
pub const JOB_ID_PLACEHOLDER: &str = "{job_id}";

/// The fields of a child's `spec.json` the runner sets per child (its id,
/// call, result and log URIs, attempt numbering): the batch spec's `child`
/// leaves them out.
const PER_CHILD_FIELDS: [&str; 8] = [
    "job_id",
    "args",
    "kwargs",
    "result_uri",
    "worker_result_uris",
    "log_uris",
    "starts_uri",
    "attempt_offset",
];

/// The batch spec (`_groups/{group_id}/batch.json`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct IndexedBatchSpec {
    /// The batch.
    pub group_id: GroupId,
    /// How many inputs.
    pub inputs: usize,
    /// Inputs per chunk of calls.
    pub chunk_size: usize,
    /// The folder of the chunks (`_groups/{group_id}/calls` as a URI).
    pub calls_uri: String,
    /// A child's folder with [`JOB_ID_PLACEHOLDER`] for its id.
    pub job_uri: String,
    /// Every child's spec but its own fields.
    pub child: Value,
    /// Every child's record, its id and index aside.
    pub record: Value,
    /// Inputs per index ([`crate::batch::block_size`]); 1: each index is
    /// one input, run by its pod alone and retried by Kubernetes.
    pub block_size: usize,
    /// Blocks only: how many times a block's pod runs an input again after
    /// it failed (each run a new child, `KINETIC_ATTEMPT` one higher).
    pub retries: u32,
    /// Blocks only: an input that failed for good stops the batch: its pod
    /// writes the stop marker and starts no other input.
    pub fail_fast: bool,
    /// Blocks only: the folder of the blocks' markers
    /// (`_groups/{group_id}/blocks` as a URI,
    /// [`crate::batch::BlockMarker`]).
    pub blocks_uri: String,
    /// Blocks only: the stop marker (`_groups/{group_id}/stopping` as a
    /// URI): once it exists, a block's pod starts no other input.
    pub stop_uri: String,
}

impl IndexedBatchSpec {
    /// The spec of batch `group_id` of `inputs` inputs whose children run
    /// `child` (a child's spec: its per-child fields are dropped) with
    /// records like `record` (its job id, wherever a string holds it, is
    /// replaced by [`JOB_ID_PLACEHOLDER`]; its group is set).
    /// `job_uri_of` gives the URI of a job's folder for a job id string.
    pub fn new(
        group_id: GroupId,
        inputs: usize,
        chunk_size: usize,
        calls_uri: String,
        job_uri_of: impl Fn(&str) -> String,
        child: &RunnerSpec,
        record: &JobRecord,
    ) -> Self {
        let mut child = serde_json::to_value(child).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut child {
            for field in PER_CHILD_FIELDS {
                map.remove(field);
            }
        }
        let template_id = record.job_id.to_string();
        let mut record = serde_json::to_value(record).unwrap_or(Value::Null);
        placehold(&mut record, &template_id);
        if let Value::Object(map) = &mut record {
            map.insert("group_id".into(), json!(group_id.to_string()));
            map.remove("group_index");
        }
        Self {
            job_uri: job_uri_of(JOB_ID_PLACEHOLDER),
            group_id,
            inputs,
            chunk_size: chunk_size.max(1),
            calls_uri,
            child,
            record,
            block_size: 1,
            retries: 0,
            fail_fast: false,
            blocks_uri: String::new(),
            stop_uri: String::new(),
        }
    }

    /// The same spec with `block_size` inputs per index (more than one:
    /// block mode), each retried `retries` times by its block's pod, the
    /// markers under `blocks_uri` and the stop marker at `stop_uri`.
    #[must_use]
    pub fn with_blocks(
        mut self,
        block_size: usize,
        retries: u32,
        fail_fast: bool,
        blocks_uri: String,
        stop_uri: String,
    ) -> Self {
        self.block_size = block_size.max(1);
        self.retries = retries;
        self.fail_fast = fail_fast;
        self.blocks_uri = blocks_uri;
        self.stop_uri = stop_uri;
        self
    }

    /// How many indexes the batch has: one per block.
    pub fn blocks(&self) -> usize {
        self.inputs.div_ceil(self.block_size.max(1))
    }

    /// The JSON document.
    pub fn to_json(&self) -> Value {
        json!({
            "protocol": PROTOCOL_VERSION,
            "kind": BATCH_SPEC_KIND,
            "group_id": self.group_id.to_string(),
            "inputs": self.inputs,
            "chunk_size": self.chunk_size,
            "calls_uri": self.calls_uri,
            "job_uri": self.job_uri,
            "child": self.child,
            "record": self.record,
            "block_size": self.block_size,
            "retries": self.retries,
            "fail_fast": self.fail_fast,
            "blocks_uri": self.blocks_uri,
            "stop_uri": self.stop_uri,
        })
    }

    /// Read a batch spec ([`IndexedBatchSpec::to_json`]) back.
    ///
    /// # Errors
    /// What is missing or of the wrong type, by key; a `kind` other than
    /// [`BATCH_SPEC_KIND`].
    pub fn from_json(value: &Value) -> Result<Self, String> {
        let obj = value.as_object().ok_or("a batch spec is a JSON object")?;
        let text = |key: &str| -> Result<String, String> {
            obj.get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("{key} must be a string"))
        };
        let count = |key: &str| -> Result<usize, String> {
            obj.get(key)
                .and_then(Value::as_u64)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| format!("{key} must be a non-negative integer"))
        };
        let kind = text("kind")?;
        if kind != BATCH_SPEC_KIND {
            return Err(format!("kind must be {BATCH_SPEC_KIND:?}, got {kind:?}"));
        }
        let group_id = text("group_id")?
            .parse()
            .map_err(|e| format!("group_id: {e}"))?;
        Ok(Self {
            group_id,
            inputs: count("inputs")?,
            chunk_size: count("chunk_size")?.max(1),
            calls_uri: text("calls_uri")?,
            job_uri: text("job_uri")?,
            child: obj.get("child").cloned().unwrap_or(Value::Null),
            record: obj
                .get("record")
                .filter(|r| r.is_object())
                .cloned()
                .ok_or("record must be an object")?,
            block_size: match obj.get("block_size") {
                None => 1,
                Some(_) => count("block_size")?.max(1),
            },
            retries: match obj.get("retries") {
                None => 0,
                Some(_) => u32::try_from(count("retries")?)
                    .map_err(|_| "retries must fit 32 bits".to_owned())?,
            },
            fail_fast: obj
                .get("fail_fast")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            blocks_uri: text("blocks_uri").unwrap_or_default(),
            stop_uri: text("stop_uri").unwrap_or_default(),
        })
    }

    /// How many chunks of calls the batch has.
    pub fn chunks(&self) -> usize {
        self.inputs.div_ceil(self.chunk_size)
    }
    /// The record of input `index`'s child `job_id`, as its pod writes it
    /// in `handle.json` (the template with the child's id and index): what
    /// the client follows a child by before (or without) reading it.
    ///
    /// # Errors
    /// The template is not a record (it was not built by
    /// [`IndexedBatchSpec::new`]).
    pub fn child_record(
        &self,
        job_id: &str,
        index: usize,
    ) -> Result<JobRecord, crate::record::RecordError> {
        let mut record = self.record.clone();
        fill(&mut record, job_id);
        if let Value::Object(map) = &mut record {
            map.insert("group_index".into(), json!(index));
        }
        JobRecord::try_from(record)
    }
}

/// Replace [`JOB_ID_PLACEHOLDER`] by `id` in every string of `value`.
fn fill(value: &mut Value, id: &str) {
    match value {
        Value::String(s) if s.contains(JOB_ID_PLACEHOLDER) => {
            *s = s.replace(JOB_ID_PLACEHOLDER, id);
        }
        Value::Array(items) => items.iter_mut().for_each(|v| fill(v, id)),
        Value::Object(map) => map.values_mut().for_each(|v| fill(v, id)),
        _ => {}
    }
}

/// Replace `id` by [`JOB_ID_PLACEHOLDER`] in every string of `value`.
fn placehold(value: &mut Value, id: &str) {
    match value {
        Value::String(s) if s.contains(id) => *s = s.replace(id, JOB_ID_PLACEHOLDER),
        Value::Array(items) => items.iter_mut().for_each(|v| placehold(v, id)),
        Value::Object(map) => map.values_mut().for_each(|v| placehold(v, id)),
        _ => {}
    }
}

/// One input's call as a line of a chunk: `{"args": [...], "kwargs": {...}}`.
pub fn call_line(args: Vec<Value>, kwargs: Map<String, Value>) -> String {
    json!({"args": args, "kwargs": kwargs}).to_string()
}

/// The calls (one line each, in input order) in chunks of `chunk_size`
/// lines, each line ending with a newline: chunk `n` holds inputs
/// `n * chunk_size ..`.
///
/// ```
/// use kinetic_core::batch::encode_call_chunks;
/// let lines = ["a", "b", "c"].map(String::from);
/// assert_eq!(encode_call_chunks(lines, 2), vec!["a\nb\n", "c\n"]);
/// ```
pub fn encode_call_chunks(
    lines: impl IntoIterator<Item = String>,
    chunk_size: usize,
) -> Vec<String> {
    let chunk_size = chunk_size.max(1);
    let mut chunks = Vec::new();
    let mut current = String::new();
    let mut in_current = 0;
    for line in lines {
        current.push_str(&line);
        current.push('\n');
        in_current += 1;
        if in_current == chunk_size {
            chunks.push(std::mem::take(&mut current));
            in_current = 0;
        }
    }
    if in_current > 0 {
        chunks.push(current);
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_id_becomes_the_placeholder_everywhere() {
        let mut v = json!({"job_id": "job-0a1b2c3d", "k8s_name": "kinetic-job-0a1b2c3d", "n": 1,
                           "list": ["x-job-0a1b2c3d"]});
        placehold(&mut v, "job-0a1b2c3d");
        assert_eq!(
            v,
            json!({"job_id": "{job_id}", "k8s_name": "kinetic-{job_id}", "n": 1, "list": ["x-{job_id}"]})
        );
    }

    #[test]
    fn chunks_split_at_the_size() {
        let lines = (0..5).map(|i| i.to_string());
        assert_eq!(
            encode_call_chunks(lines, 2),
            vec!["0\n1\n", "2\n3\n", "4\n"]
        );
        assert!(encode_call_chunks(Vec::new(), 3).is_empty());
    }

    #[test]
    fn a_child_record_is_the_template_with_its_id_and_index() {
        let group = GroupId::new_random();
        let template_id = crate::batch::child_job_id(&group, 0, 1);
        let mut record = json!({
            "job_id": template_id.to_string(), "backend": "gke", "project": "p",
            "cluster_name": "c", "zone": "z", "namespace": "default", "bucket_name": "b",
            "k8s_name": format!("kinetic-{template_id}"), "image_uri": "i",
            "accelerator": "cpu", "func_name": "f", "display_name": "d",
            "created_at": "2026-11-27T20:00:00Z", "group_index": 0,
            "group_id": group.to_string(), "group_kind": "map"
        });
        placehold(&mut record, template_id.as_str());
        let spec = IndexedBatchSpec {
            group_id: group.clone(),
            inputs: 3,
            chunk_size: 2,
            calls_uri: "mem://b/calls".into(),
            job_uri: "mem://b/{job_id}".into(),
            child: Value::Null,
            record,
            block_size: 1,
            retries: 0,
            fail_fast: false,
            blocks_uri: String::new(),
            stop_uri: String::new(),
        }
        .with_blocks(
            2,
            1,
            true,
            "mem://b/blocks".into(),
            "mem://b/stopping".into(),
        );
        let child = crate::batch::child_job_id(&group, 2, 3);
        let got = spec.child_record(child.as_str(), 2).unwrap();
        assert_eq!(got.job_id, child);
        assert_eq!(got.group_index, Some(2));
        assert_eq!(got.group_id, Some(group));
        assert!(got.check_ids(&child).is_ok(), "{got:?}");
        let back = IndexedBatchSpec::from_json(&spec.to_json()).unwrap();
        assert_eq!(back, spec);
        let mut wrong = spec.to_json();
        wrong["kind"] = json!("job");
        assert!(
            IndexedBatchSpec::from_json(&wrong)
                .unwrap_err()
                .starts_with("kind must be")
        );
    }
}
