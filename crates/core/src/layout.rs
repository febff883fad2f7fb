//! The bucket layout: the key of every object Kinetic for Rust reads or
//! writes, in one place.
//!
//! Every function returns an [`ObjectPath`] (the store's own path type, as
//! `object_store`'s `path` module gives `Path`s); the rest of the code asks
//! here instead of spelling a key. The runner never derives a key either:
//! each one it writes is named in `spec.json`.
//!
//! The jobs bucket (a GCS bucket `{project}-kn-{cluster}-jobs`, or the local
//! backend's directory) holds, in Kinetic's layout where Kinetic has one:
//!
//! | key | writer | what |
//! |---|---|---|
//! | `{job_id}/spec.json` | engine | [`crate::protocol::RunnerSpec`] |
//! | `contexts/{sha256}.zip` | engine | a packed project, by the archive's SHA-256, shared by every job that ships it |
//! | `{job_id}/requirements.txt` | engine | filtered requirements (prebuilt images) |
//! | `{job_id}/handle.json` | engine | [`crate::record::JobRecord`] |
//! | `{job_id}/result.json` | runner, host 0 | [`crate::protocol::RunnerResult`] |
//! | `{job_id}/result-worker-{N}.json` | runner, failing host N > 0 | a failure result |
//! | `{job_id}/logs/output.log` | backend | the job's output, once it ended |
//! | `{job_id}/logs/host-{N}/{seq:08}[.end]` | runner, host N | the job's output, copied in chunks while it runs |
//! | `{job_id}/.debug_ready` | runner, host 0 of a debug job | the debugger listens ([`crate::debug::DebugEndpoint`]) |
//! | `{job_id}/.leader_ready` | runner, host 0 of a debug job | a debugger attached; the other hosts may run the function |
//! | `{job_id}/starts/{N:08}` | runner, host 0 of a single-host job | run `N` of the job started (its `KINETIC_ATTEMPT`) |
//! | `outputs/{job_id}/…` | user code | the default output directory |
//! | `default/data-cache/{hash}/…` | engine | a data entry, by content hash |
//! | `default/data-markers/{hash}` | engine | written last: the entry is complete |
//! | `_groups/{group_id}/manifest.json` | engine | [`crate::batch::GroupManifest`] |
//! | `_groups/{group_id}/inputs.jsonl` | engine | a batch's inputs |
//! | `_groups/{group_id}/context-{sha}.zip` | engine | a batch's shared context |
//! | `_groups/{group_id}/requirements-{sha}.txt` | engine | a batch's shared requirements |
//! | `_groups/{group_id}/batch.json`, `calls/{n:08}.jsonl` | engine | a batch submitted in one call ([`crate::batch::IndexedBatchSpec`]) |
//! | `_groups/{group_id}/blocks/{block:08}/{input:08}.{attempt:03}.{what}.{ms}.{pod}` | runner, a block's pod | an input's attempt started or ended ([`crate::batch::BlockMarker`]) |
//! | `_groups/{group_id}/stopping` | engine or runner | a batch in blocks starts no other input |
//!
//! and the builds bucket ([`builds`]) holds image build contexts and logs.
//!
//! ```
//! use kinetic_core::ids::{GroupId, JobId};
//! use kinetic_core::layout;
//!
//! let job: JobId = "job-0a1b2c3d".parse()?;
//! assert_eq!(layout::spec(&job).as_str(), "job-0a1b2c3d/spec.json");
//! assert_eq!(layout::host_result(&job, 2).as_str(), "job-0a1b2c3d/result-worker-2.json");
//! assert!(layout::record(&job).is_under(&layout::job_prefix(&job)));
//! assert_eq!(layout::outputs(&job).as_str(), "outputs/job-0a1b2c3d");
//!
//! let group: GroupId = "grp-0a1b2c3d".parse()?;
//! let sha = [0xab; 32];
//! assert_eq!(
//!     layout::group_context(&group, &sha).as_str(),
//!     "_groups/grp-0a1b2c3d/context-abababababababab.zip"
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::hashing::ContentHash;
use crate::ids::{GroupId, JobId};
use crate::ports::{ObjectPath, StoreError};

/// The job's spec, inside its folder.
pub const SPEC_FILE: &str = "spec.json";
/// The leader's result, inside the job's folder.
pub const RESULT_FILE: &str = "result.json";
/// The durable job record, inside the job's folder.
pub const RECORD_FILE: &str = "handle.json";
/// The note that the job's backend resources were removed, inside the job's folder.
pub const CLEANUP_FILE: &str = "cleanup.json";
/// Name of a job's attempt history (see [`crate::budget::AttemptHistory`]).
pub const ATTEMPTS_FILE: &str = "attempts.json";
/// The file name of a packed project.
pub const CONTEXT_FILE: &str = "context.zip";
/// The requirements a prebuilt image installs, inside the job's folder.
pub const REQUIREMENTS_FILE: &str = "requirements.txt";
/// The job's stored output, inside the job's folder.
pub const LOG_FILE: &str = "logs/output.log";
/// Folder of the default output directories.
pub const OUTPUTS_DIR: &str = "outputs";
/// Folder of the data cache entries (Kinetic's).
pub const DATA_CACHE_DIR: &str = "default/data-cache";
/// Folder of the data cache markers (Kinetic's).
pub const DATA_MARKERS_DIR: &str = "default/data-markers";
/// Folder of the content-addressed packed projects. Job cleanup never
/// deletes them (another job may use the same one): a lifecycle rule on the
/// bucket ages them out.
pub const CONTEXTS_DIR: &str = "contexts";
/// Folder of the batches.
pub const GROUPS_DIR: &str = "_groups";
/// A batch's manifest, inside its folder.
pub const MANIFEST_FILE: &str = "manifest.json";
/// A batch's stored inputs, inside its folder.
pub const INPUTS_FILE: &str = "inputs.jsonl";
/// Hex digits of a SHA-256 that name a batch's shared artifacts.
pub const SHARED_ARTIFACT_HEX: usize = 16;

/// A key built from parts that are valid path segments by construction
/// (ids and hex digests). A failure would be a bug in this module.
fn known(path: String) -> ObjectPath {
    match ObjectPath::parse(path) {
        Ok(path) => path,
        Err(e) => unreachable!("the bucket layout built an invalid key: {e}"),
    }
}

/// The job's folder: `{job_id}`. Everything of the job but its outputs
/// and cached data lies under it, and job cleanup deletes it.
pub fn job_prefix(job_id: &JobId) -> ObjectPath {
    known(job_id.to_string())
}

fn job_file(job_id: &JobId, name: &str) -> ObjectPath {
    known(format!("{job_id}/{name}"))
}

/// `{job_id}/spec.json`.
pub fn spec(job_id: &JobId) -> ObjectPath {
    job_file(job_id, SPEC_FILE)
}

/// `{job_id}/result.json`: where the leader (host 0) writes the result.
pub fn result(job_id: &JobId) -> ObjectPath {
    job_file(job_id, RESULT_FILE)
}

/// Where host `host_index` writes a result: `{job_id}/result.json` for
/// host 0, `{job_id}/result-worker-{N}.json` for host N > 0 (only when it
/// fails).
pub fn host_result(job_id: &JobId, host_index: u32) -> ObjectPath {
    if host_index == 0 {
        result(job_id)
    } else {
        job_file(job_id, &format!("result-worker-{host_index}.json"))
    }
}

/// `{job_id}/handle.json`: the durable job record.
pub fn record(job_id: &JobId) -> ObjectPath {
    job_file(job_id, RECORD_FILE)
}

/// `{job_id}/cleanup.json`: written when the job's backend resources are
/// removed while its folder stays, so that a later status can say the job
/// was cleaned up rather than lost.
pub fn cleanup_note(job_id: &JobId) -> ObjectPath {
    job_file(job_id, CLEANUP_FILE)
}

/// `{job_id}/attempts.json`: the job's attempt history (each attempt's
/// host, start, end and outcome), written by the engine as it observes
/// the job, so that it outlives the backend's objects. `handle.json`
/// stays as Kinetic writes it.
pub fn attempts(job_id: &JobId) -> ObjectPath {
    job_file(job_id, ATTEMPTS_FILE)
}

/// Folder of the job's start markers, inside the job's folder.
pub const STARTS_DIR: &str = "starts";

/// `{job_id}/starts`: where each run of a single-host job's runner claims
/// its attempt number (named in `spec.json`'s `starts_uri`). Run `N`
/// creates `{N:08}` only if absent (a GCS `ifGenerationMatch=0` upload, an
/// exclusive create on a directory store), so no two runs get the same
/// number; job cleanup deletes the markers with the job's folder.
pub fn starts(job_id: &JobId) -> ObjectPath {
    job_file(job_id, STARTS_DIR)
}

/// `{job_id}/starts/{attempt:08}`: the marker of the job's run number
/// `attempt` (1 for the first), in [`starts`].
pub fn start_marker(job_id: &JobId, attempt: u32) -> ObjectPath {
    known(format!("{job_id}/{STARTS_DIR}/{attempt:08}"))
}

/// The debug readiness marker, inside the job's folder.
pub const DEBUG_READY_FILE: &str = ".debug_ready";

/// `{job_id}/.debug_ready`: written by the runner of a debug job once its
/// debugger listens ([`crate::debug::DebugEndpoint`]).
pub fn debug_ready(job_id: &JobId) -> ObjectPath {
    job_file(job_id, DEBUG_READY_FILE)
}

/// The marker releasing the other hosts of a debug job, inside the job's
/// folder.
pub const LEADER_READY_FILE: &str = ".leader_ready";

/// `{job_id}/.leader_ready`: written (empty) by the runner of a debug
/// job's leader once its debugger has a client, just before the call; the
/// other hosts of a multi-host debug job wait for it before theirs.
pub fn leader_ready(job_id: &JobId) -> ObjectPath {
    job_file(job_id, LEADER_READY_FILE)
}

/// `contexts/{sha256}.zip`: a packed project named by the SHA-256 of the
/// archive, written once and shared by every job that ships it.
pub fn shared_context(sha256: &[u8; 32]) -> ObjectPath {
    known(format!("{CONTEXTS_DIR}/{}.zip", hex::encode(sha256)))
}

/// `{job_id}/requirements.txt`: a single job's requirements to install.
pub fn requirements(job_id: &JobId) -> ObjectPath {
    job_file(job_id, REQUIREMENTS_FILE)
}

/// `{job_id}/logs/output.log`: the job's output, copied by backends whose
/// logs do not outlive the job.
pub fn log(job_id: &JobId) -> ObjectPath {
    job_file(job_id, LOG_FILE)
}

/// Folder of a job's stored output, inside the job's folder.
pub const LOGS_DIR: &str = "logs";
/// Suffix of the last chunk a run of the runner copies.
pub const LOG_END_SUFFIX: &str = ".end";

/// `{job_id}/logs/host-{N}`: where host `N`'s runner copies the job's
/// output while it runs, as numbered chunks (see [`log_chunk`]); named in
/// `spec.json`'s `log_uris`.
pub fn log_chunks(job_id: &JobId, host_index: u32) -> ObjectPath {
    known(format!("{job_id}/{LOGS_DIR}/host-{host_index}"))
}

/// One chunk of a stored log, read from its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct LogChunk {
    /// Its place in the log: chunks are joined by increasing number.
    pub seq: u64,
    /// The last chunk of a run of the runner (a retried run numbers on).
    pub last: bool,
}

/// The chunk `path` holds, when it is one under `prefix` (a
/// [`log_chunks`] folder): its last segment is eight or more digits,
/// followed by [`LOG_END_SUFFIX`] for the last chunk of a run.
///
/// ```
/// use kinetic_core::layout::{log_chunk, log_chunks, LogChunk};
/// use kinetic_core::ports::ObjectPath;
/// let job = "job-0a1b2c3d".parse()?;
/// let prefix = log_chunks(&job, 0);
/// assert_eq!(prefix.as_str(), "job-0a1b2c3d/logs/host-0");
/// let key = |k: &str| ObjectPath::parse(k).unwrap();
/// assert_eq!(log_chunk(&prefix, &key("job-0a1b2c3d/logs/host-0/00000007")),
///            Some(LogChunk { seq: 7, last: false }));
/// assert_eq!(log_chunk(&prefix, &key("job-0a1b2c3d/logs/host-0/00000008.end")),
///            Some(LogChunk { seq: 8, last: true }));
/// assert_eq!(log_chunk(&prefix, &key("job-0a1b2c3d/logs/host-0/7.part")), None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn log_chunk(prefix: &ObjectPath, path: &ObjectPath) -> Option<LogChunk> {
    let name = path
        .as_str()
        .strip_prefix(prefix.as_str())?
        .strip_prefix('/')?;
    let (digits, last) = match name.strip_suffix(LOG_END_SUFFIX) {
        Some(digits) => (digits, true),
        None => (name, false),
    };
    if digits.len() < 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(LogChunk {
        seq: digits.parse().ok()?,
        last,
    })
}

/// `outputs/{job_id}`: the default output directory (never deleted by job
/// cleanup).
pub fn outputs(job_id: &JobId) -> ObjectPath {
    known(format!("{OUTPUTS_DIR}/{job_id}"))
}

/// `default/data-cache/{hash}`: the folder of a data cache entry.
pub fn data_entry(hash: &ContentHash) -> ObjectPath {
    known(format!("{DATA_CACHE_DIR}/{hash}"))
}

/// `default/data-cache/{hash}/{relative}`: one file of a data cache entry
/// (`relative` is `/`-separated).
///
/// # Errors
/// [`StoreError::InvalidInput`] when `relative` is not a valid relative
/// object path (empty, `..`, …).
pub fn data_entry_file(hash: &ContentHash, relative: &str) -> Result<ObjectPath, StoreError> {
    data_entry(hash).child(relative)
}

/// `default/data-markers/{hash}`: written once every file of the entry
/// landed; without it the entry is incomplete.
pub fn data_marker(hash: &ContentHash) -> ObjectPath {
    known(format!("{DATA_MARKERS_DIR}/{hash}"))
}

/// True for a key of the data cache (an entry's file or a marker).
pub fn is_data_cache(path: &ObjectPath) -> bool {
    [DATA_CACHE_DIR, DATA_MARKERS_DIR]
        .iter()
        .any(|dir| path.is_under(&known((*dir).to_owned())))
}

/// `_groups`: every batch's folder is under it.
pub fn groups_root() -> ObjectPath {
    known(GROUPS_DIR.to_owned())
}

/// The batch whose manifest is at `path` (`_groups/{group_id}/manifest.json`),
/// if `path` is one.
pub fn manifest_group(path: &ObjectPath) -> Option<GroupId> {
    let rest = path.as_str().strip_prefix(GROUPS_DIR)?.strip_prefix('/')?;
    let (group, file) = rest.split_once('/')?;
    (file == MANIFEST_FILE)
        .then(|| group.parse().ok())
        .flatten()
}

/// True for a key of a content-addressed packed project.
pub fn is_shared_context(path: &ObjectPath) -> bool {
    path.is_under(&known(CONTEXTS_DIR.to_owned()))
}

/// `_groups/{group_id}`: a batch's folder.
pub fn group_prefix(group_id: &GroupId) -> ObjectPath {
    known(format!("{GROUPS_DIR}/{group_id}"))
}

fn group_file_known(group_id: &GroupId, name: &str) -> ObjectPath {
    known(format!("{GROUPS_DIR}/{group_id}/{name}"))
}

/// `_groups/{group_id}/manifest.json`.
pub fn group_manifest(group_id: &GroupId) -> ObjectPath {
    group_file_known(group_id, MANIFEST_FILE)
}

/// `_groups/{group_id}/inputs.jsonl`.
pub fn group_inputs(group_id: &GroupId) -> ObjectPath {
    group_file_known(group_id, INPUTS_FILE)
}

/// `_groups/{group_id}/batch.json`: the batch spec of a batch submitted
/// in one call (the runner's `--batch-spec`, see
/// [`crate::batch::IndexedBatchSpec`]).
pub fn group_batch_spec(group_id: &GroupId) -> ObjectPath {
    group_file_known(group_id, "batch.json")
}

/// `_groups/{group_id}/calls`: the folder of the inputs' calls of a batch
/// submitted in one call, in chunks ([`group_calls_chunk`]).
pub fn group_calls(group_id: &GroupId) -> ObjectPath {
    group_file_known(group_id, "calls")
}

/// `_groups/{group_id}/blocks`: the folder of a batch's blocks' markers
/// ([`crate::batch::BlockMarker`]), one folder per block
/// ([`group_block`]).
pub fn group_blocks(group_id: &GroupId) -> ObjectPath {
    group_file_known(group_id, "blocks")
}

/// `_groups/{group_id}/blocks/{block:08}`: the folder of block `block`'s markers.
pub fn group_block(group_id: &GroupId, block: usize) -> ObjectPath {
    group_file_known(group_id, &format!("blocks/{block:08}"))
}

/// `_groups/{group_id}/stopping`: once it exists, the pods of a batch run
/// in blocks start no other input (fail-fast).
pub fn group_stop(group_id: &GroupId) -> ObjectPath {
    group_file_known(group_id, "stopping")
}

/// `_groups/{group_id}/calls/{chunk:08}.jsonl`: chunk `chunk` of the calls.
pub fn group_calls_chunk(group_id: &GroupId, chunk: usize) -> ObjectPath {
    group_file_known(group_id, &format!("calls/{chunk:08}.jsonl"))
}

/// `_groups/{group_id}/{name}`, for a name a manifest gives (its `inputs`).
///
/// # Errors
/// [`StoreError::InvalidInput`] when `name` is not a valid relative object
/// path.
pub fn group_file(group_id: &GroupId, name: &str) -> Result<ObjectPath, StoreError> {
    group_prefix(group_id).child(name)
}

fn short_hex(sha256: &[u8; 32]) -> String {
    let mut hex = hex::encode(sha256);
    hex.truncate(SHARED_ARTIFACT_HEX);
    hex
}

/// `_groups/{group_id}/context-{sha256[..16]}.zip`: the context a batch's
/// children share, named by its content so a resume writes the same object.
pub fn group_context(group_id: &GroupId, sha256: &[u8; 32]) -> ObjectPath {
    group_file_known(group_id, &format!("context-{}.zip", short_hex(sha256)))
}

/// `_groups/{group_id}/requirements-{sha256[..16]}.txt`: the requirements a
/// batch's children share.
pub fn group_requirements(group_id: &GroupId, sha256: &[u8; 32]) -> ObjectPath {
    group_file_known(group_id, &format!("requirements-{}.txt", short_hex(sha256)))
}

/// The builds bucket (`{project}-kn-{cluster}-builds`): what image builds
/// upload and leave there.
pub mod builds {
    use crate::ports::ObjectPath;

    /// Folder the builds write their logs to (Cloud Build names each log
    /// `log-{build_id}.txt` in it).
    pub const LOGS_DIR: &str = "build-logs";

    /// `source-{unix_seconds}-{nonce}.tar.gz`: one build's uploaded context.
    /// `nonce` is 8 hex digits.
    ///
    /// # Errors
    /// [`crate::ports::StoreError::InvalidInput`] when `nonce` makes no
    /// valid key.
    pub fn source(unix_seconds: u64, nonce: &str) -> Result<ObjectPath, crate::ports::StoreError> {
        ObjectPath::parse(format!("source-{unix_seconds}-{nonce}.tar.gz"))
    }

    /// `{logs_dir}/log-{build_id}.txt`: the log Cloud Build wrote for a build.
    ///
    /// # Errors
    /// [`crate::ports::StoreError::InvalidInput`] when the parts make no
    /// valid key.
    pub fn log(logs_dir: &str, build_id: &str) -> Result<ObjectPath, crate::ports::StoreError> {
        ObjectPath::parse(format!("{logs_dir}/log-{build_id}.txt"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> JobId {
        "job-0a1b2c3d".parse().unwrap()
    }

    #[test]
    fn job_keys_are_kinetics() {
        let j = job();
        assert_eq!(spec(&j).as_str(), "job-0a1b2c3d/spec.json");
        assert_eq!(result(&j).as_str(), "job-0a1b2c3d/result.json");
        assert_eq!(host_result(&j, 0), result(&j));
        assert_eq!(
            host_result(&j, 3).as_str(),
            "job-0a1b2c3d/result-worker-3.json"
        );
        assert_eq!(record(&j).as_str(), "job-0a1b2c3d/handle.json");
        assert_eq!(
            shared_context(&[0xab; 32]).as_str(),
            format!("contexts/{}.zip", "ab".repeat(32))
        );
        assert!(!shared_context(&[0xab; 32]).is_under(&job_prefix(&j)));
        assert!(is_shared_context(&shared_context(&[0xab; 32])));
        assert!(!is_shared_context(&spec(&j)));
        assert_eq!(requirements(&j).as_str(), "job-0a1b2c3d/requirements.txt");
        assert_eq!(log(&j).as_str(), "job-0a1b2c3d/logs/output.log");
        assert_eq!(starts(&j).as_str(), "job-0a1b2c3d/starts");
        assert_eq!(start_marker(&j, 2).as_str(), "job-0a1b2c3d/starts/00000002");
        assert!(start_marker(&j, 2).is_under(&starts(&j)));
        for key in [
            spec(&j),
            record(&j),
            log(&j),
            host_result(&j, 7),
            start_marker(&j, 1),
        ] {
            assert!(key.is_under(&job_prefix(&j)), "{key}");
        }
        assert!(!outputs(&j).is_under(&job_prefix(&j)));
    }

    #[test]
    fn data_cache_keys() {
        let h = ContentHash::from_bytes([1; 32]);
        let hex = "01".repeat(32);
        assert_eq!(data_entry(&h).as_str(), format!("default/data-cache/{hex}"));
        assert_eq!(
            data_marker(&h).as_str(),
            format!("default/data-markers/{hex}")
        );
        let file = data_entry_file(&h, "a/b.txt").unwrap();
        assert!(is_data_cache(&file) && is_data_cache(&data_marker(&h)));
        assert!(!is_data_cache(&spec(&job())));
        assert!(data_entry_file(&h, "../x").is_err());
    }

    #[test]
    fn group_keys() {
        let g: GroupId = "grp-00ff00ff".parse().unwrap();
        assert_eq!(
            group_manifest(&g).as_str(),
            "_groups/grp-00ff00ff/manifest.json"
        );
        assert_eq!(group_inputs(&g), group_file(&g, INPUTS_FILE).unwrap());
        assert_eq!(
            group_requirements(&g, &[0x12; 32]).as_str(),
            "_groups/grp-00ff00ff/requirements-1212121212121212.txt"
        );
        assert!(group_file(&g, "../x").is_err());
    }

    #[test]
    fn builds_keys() {
        assert_eq!(
            builds::source(12, "0a1b2c3d").unwrap().as_str(),
            "source-12-0a1b2c3d.tar.gz"
        );
        assert_eq!(
            builds::log(builds::LOGS_DIR, "b-1").unwrap().as_str(),
            "build-logs/log-b-1.txt"
        );
    }
}
