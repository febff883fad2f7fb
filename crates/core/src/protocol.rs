//! Runner protocol v1: the JSON documents the engine and the in-pod runner
//! exchange through the store (`docs/runner-protocol.md`).
//!
//! The engine writes `{job_id}/spec.json` ([`RunnerSpec`]); the runner
//! writes `{job_id}/result.json` ([`RunnerResult`]) at the URI the spec
//! names (keys: [`crate::layout`]). Both are plain JSON so
//! any language can read them. The runner itself (Python, standard library
//! only) comes from the `kinetic-runner` crate as [`RUNNER_SOURCE`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::json::JsonError;

/// The protocol version this crate writes and reads.
pub const PROTOCOL_VERSION: u32 = 1;

/// The runner program, built by the `kinetic-runner` crate from the package
/// `runner/kinetic_runner/` into one Python file, so every backend ships
/// exactly the runner this engine speaks to. It carries the job-side
/// `kinetic` module ([`JOB_MODULE_SOURCE`]) on its `JOB_MODULE_SOURCE`
/// line, which the runner places first on every job's `sys.path`; the
/// image tag and the local runner's file name hash both through this text.
pub use kinetic_runner::RUNNER_SOURCE;

/// The job-side `kinetic` module (`runner/kinetic_job.py`): what
/// `import kinetic` gives inside a job, whatever the image. Standard
/// library only; [`RUNNER_SOURCE`] carries it.
pub use kinetic_runner::JOB_MODULE_SOURCE;

/// File name the runner is installed under (in images and local state dirs).
pub use kinetic_runner::RUNNER_FILE_NAME;

/// SHA-256 (hex) of [`RUNNER_SOURCE`]; part of image tags and of the local
/// backend's runner file name, so a changed runner is never mistaken for an old one.
pub fn runner_digest() -> String {
    hex::encode(Sha256::digest(RUNNER_SOURCE.as_bytes()))
}

/// `spec.json`: everything the runner needs to run one job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunnerSpec {
    /// Always [`PROTOCOL_VERSION`].
    pub protocol: u32,
    /// The job id (`job-` + 8 hex).
    pub job_id: String,
    /// What to run.
    pub entrypoint: RunnerEntrypoint,
    /// Positional arguments (JSON; data references replaced by paths on the runner).
    pub args: Vec<Value>,
    /// Keyword arguments, in the order given.
    pub kwargs: Map<String, Value>,
    /// Data mounted at absolute paths before the call.
    pub volumes: Vec<RunnerVolume>,
    /// Names of the captured environment variables (never their values).
    pub env_names: Vec<String>,
    /// The names among `env_names` whose values the runner redacts from the
    /// job's output, its own lines and failure results ([`crate::redact`]).
    #[serde(default)]
    pub secret_names: Vec<String>,
    /// Exported to the job as `KINETIC_OUTPUT_DIR`.
    pub output_dir: String,
    /// The packaged project.
    pub context: Artifact,
    /// Requirements to install at start (prebuilt images), or none.
    pub requirements: Option<Artifact>,
    /// Where the client's project sat, to rebuild `sys.path` and the cwd.
    pub plan: RunnerPlan,
    /// Where the leader (host 0) writes `result.json`.
    pub result_uri: String,
    /// Where each other host writes its failure result
    /// (`result-worker-{N}.json`): entry `i` is host `i + 1`'s. Empty for a
    /// single host. The runner writes only to URIs the spec names.
    #[serde(default)]
    pub worker_result_uris: Vec<String>,
    /// Where each host copies the job's output while it runs: entry `i`
    /// is host `i`'s folder, under which it writes numbered chunks
    /// (`{seq:08}`, the last of a run `{seq:08}.end`), numbering on from
    /// what the folder already holds. Empty: nothing is copied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log_uris: Vec<String>,
    /// Where each run of a single-host job claims its attempt number
    /// (`{job_id}/starts`, [`crate::layout::starts`]): at start the runner
    /// creates `{N:08}` there only if absent, `N` one more than the
    /// highest already there, and exports `N` to the job as
    /// `KINETIC_ATTEMPT` (1 for the first run). Absent (a multi-host
    /// slice, which is never run again): `KINETIC_ATTEMPT` is the one the
    /// backend set (the local supervisor counts its own runs), else 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts_uri: Option<String>,
    /// How many runs came before this job's first (a batch input's
    /// earlier attempts, each its own job): the runner adds it to the
    /// number it claims or is given, so `KINETIC_ATTEMPT` counts an
    /// input's runs across its batch retries as it counts a single job's.
    /// Absent: 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempt_offset: u32,
    /// What the job runs on.
    pub cluster: ClusterInfo,
    /// The client's Python minor version when it exchanges pickled Python
    /// values (argument leaves `{"__kinetic_pickle__": base64, "python":
    /// "3.11"}`, unpickled by a runner of the same version; results JSON
    /// cannot hold come back the same way). Absent: JSON only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python_values: Option<String>,
    /// What `context.zip` may expand to; the runner refuses a larger
    /// archive before extracting anything. Absent: the runner's defaults
    /// (the same as [`ExtractLimits::default`]).
    #[serde(default)]
    pub extract_limits: ExtractLimits,
    /// Run the function under a debugger ([`RunnerDebug`]); absent: no
    /// debugger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug: Option<RunnerDebug>,
}

/// `serde`'s `skip_serializing_if` for a count that is absent when zero
/// (serde passes a reference).
fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// `spec.debug`: the leader starts debugpy, listening on the address in
/// `KINETIC_DEBUG_HOST` (the pod's IP; `127.0.0.1` when unset) at `port`
/// (or `KINETIC_DEBUG_PORT` when the backend sets it), writes
/// `ready_uri` ([`crate::debug::DebugEndpoint`]), waits up to
/// `wait_timeout_seconds` for a client (past it the job fails in phase
/// `debugger setup`), writes `leader_ready_uri` once one attached, then
/// stops at a breakpoint before the call. debugpy must be importable (in
/// the image or the requirements).
///
/// On a multi-host job the other hosts run no debugger: a host whose
/// environment has `KINETIC_DEBUG_WAIT_LEADER=1` (the workers of a
/// Pathways slice) waits in phase `debugger setup`, before the call, until
/// `leader_ready_uri` exists, so that the user sets breakpoints before any
/// host runs the function; it stops waiting with a failure when the
/// leader's result appears first (the leader failed) or after
/// [`crate::debug::worker_wait_bound`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerDebug {
    /// Where the readiness marker goes (`{job_id}/.debug_ready`).
    pub ready_uri: String,
    /// The port debugpy listens on.
    pub port: u16,
    /// How long to wait for a client.
    pub wait_timeout_seconds: u64,
    /// Where the leader writes that its debugger has a client and the
    /// call starts (`{job_id}/.leader_ready`); the hosts told to wait for
    /// the leader wait for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_ready_uri: Option<String>,
}

/// Limits on what `context.zip` may expand to, checked by the runner
/// before it extracts anything (phase `context extract`); set by the
/// `KINETIC_CONTEXT_MAX_MB`, `KINETIC_CONTEXT_MAX_FILES` and
/// `KINETIC_CONTEXT_MAX_RATIO` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExtractLimits {
    /// Total size of the extracted files, in bytes. Default 4 GiB.
    pub max_bytes: u64,
    /// Number of entries (files, directories, links). Default 50,000.
    pub max_entries: u64,
    /// Extracted size over archive size (`200` = 200:1). Default 200.
    pub max_ratio: u64,
}

impl ExtractLimits {
    /// Default total size: 4 GiB.
    pub const DEFAULT_MAX_BYTES: u64 = 4 << 30;
    /// Default number of entries.
    pub const DEFAULT_MAX_ENTRIES: u64 = 50_000;
    /// Default expansion ratio.
    pub const DEFAULT_MAX_RATIO: u64 = 200;

    /// Limits of `max_bytes`, `max_entries` and `max_ratio` (each positive).
    pub fn new(max_bytes: u64, max_entries: u64, max_ratio: u64) -> Self {
        Self {
            max_bytes: max_bytes.max(1),
            max_entries: max_entries.max(1),
            max_ratio: max_ratio.max(1),
        }
    }

    /// Why an archive of `entries` entries expanding `packed` bytes into
    /// `expanded` bytes is beyond these limits (the runner's check, made
    /// before uploading), or `None` when it is within them.
    pub fn refuse(&self, entries: u64, expanded: u64, packed: u64) -> Option<String> {
        if entries > self.max_entries {
            return Some(format!(
                "the packed project holds {entries} entries, more than the limit of {} (KINETIC_CONTEXT_MAX_FILES)",
                self.max_entries
            ));
        }
        if expanded > self.max_bytes {
            return Some(format!(
                "the packed project expands to {expanded} bytes, more than the limit of {} bytes (KINETIC_CONTEXT_MAX_MB)",
                self.max_bytes
            ));
        }
        if expanded > self.max_ratio.saturating_mul(packed.max(1)) {
            return Some(format!(
                "the packed project expands {packed} bytes into {expanded}, more than the limit of {}:1 (KINETIC_CONTEXT_MAX_RATIO)",
                self.max_ratio
            ));
        }
        None
    }
}

impl Default for ExtractLimits {
    fn default() -> Self {
        Self::new(
            Self::DEFAULT_MAX_BYTES,
            Self::DEFAULT_MAX_ENTRIES,
            Self::DEFAULT_MAX_RATIO,
        )
    }
}

/// The entrypoint as the runner sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunnerEntrypoint {
    /// A Python function: by module (`module`) or by file (`path`, relative
    /// to the workspace root). Exactly one of the two is set.
    Function {
        /// Dotted module name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        module: Option<String>,
        /// File path relative to the workspace root.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
        /// The attribute to call.
        function: String,
    },
    /// A command run in the workspace; exit 0 is success with value `null`.
    Command {
        /// Program and arguments.
        argv: Vec<String>,
    },
}

/// A data volume: a data reference placed at an absolute path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerVolume {
    /// Absolute mount path.
    pub mount_path: String,
    /// What goes there.
    pub data: DataRef,
}

/// A data reference, as it stands in `args`, `kwargs` and volumes: the same
/// keys as Kinetic's (`__data_ref__`, `uri`, `is_dir`, `mount_path`, `fuse`,
/// `hf_trust_remote_code`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataRef {
    /// Always `true`: marks the object as a reference.
    #[serde(rename = "__data_ref__")]
    pub marker: bool,
    /// `gs://…` or `file://…` of a directory prefix or of one object, or
    /// an `hf://` dataset.
    pub uri: String,
    /// Whether `uri` names a directory.
    pub is_dir: bool,
    /// Where to place it, or `None` for a fresh download directory.
    pub mount_path: Option<String>,
    /// Mounted by the backend (GCS FUSE) instead of downloaded.
    pub fuse: bool,
    /// For an `hf://` dataset: its repository may run its own loading code.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hf_trust_remote_code: bool,
    /// For a data cache entry: the URI of its marker, which lists exactly
    /// the files the runner downloads and checks
    /// ([`crate::cache::DataMarker`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_marker: Option<String>,
}

impl DataRef {
    /// A reference to `uri`.
    pub fn new(uri: impl Into<String>, is_dir: bool) -> Self {
        Self {
            marker: true,
            uri: uri.into(),
            is_dir,
            mount_path: None,
            fuse: false,
            hf_trust_remote_code: false,
            cache_marker: None,
        }
    }

    /// This reference with `hf_trust_remote_code` set to `trust`.
    pub fn with_trust_remote_code(mut self, trust: bool) -> Self {
        self.hf_trust_remote_code = trust;
        self
    }

    /// A reference to a data cache entry whose marker is at `marker_uri`.
    pub fn with_marker(mut self, marker_uri: impl Into<String>) -> Self {
        self.cache_marker = Some(marker_uri.into());
        self
    }

    /// This reference as a JSON value for `args`/`kwargs`.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// An object the runner downloads and verifies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    /// Where it is.
    pub uri: String,
    /// Its SHA-256 (64 lower-case hex); a mismatch refuses to run.
    pub sha256: String,
}

/// Kinetic's packaging plan (`.kinetic/plan.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerPlan {
    /// The client's absolute package root.
    pub package_root: String,
    /// The entry directory relative to the root (`""` = the root).
    pub entry_rel: String,
    /// The client's cwd relative to the root, or `None` when outside it.
    pub client_cwd_rel: Option<String>,
    /// `sys.path` entries relative to the root (`""` = the root).
    pub sys_path_rel: Vec<String>,
}

/// What the job runs on; the source of the `KINETIC_*` topology variables.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterInfo {
    /// The accelerator as the user spelled it.
    pub accelerator: String,
    /// Number of hosts.
    pub num_nodes: u32,
    /// GPUs per host (0 for CPU and TPU).
    pub num_gpus_per_node: u32,
    /// Accelerators per host: GPUs for a GPU, chips per host for a TPU
    /// slice, 0 for CPU (absent in older specs: read as 0).
    #[serde(default)]
    pub num_accelerators_per_node: u32,
    /// Host addresses, when the backend knows them at submit time.
    pub node_ips: Vec<String>,
    /// The cluster the job runs on: the configured GKE cluster, or
    /// `local` (absent in older specs: read as empty).
    #[serde(default)]
    pub cluster_name: String,
    /// The cloud, as SkyPilot names it: `GCP`, or `local` for the local
    /// backend (absent in older specs: the runner reads `GCP`).
    #[serde(default = "default_cloud")]
    pub cloud: String,
    /// The cluster's region (`us-central1`); `None` locally.
    #[serde(default)]
    pub region: Option<String>,
    /// The cluster's zone (`us-central1-a`); `None` locally.
    #[serde(default)]
    pub zone: Option<String>,
}

/// The cloud of a spec that names none.
fn default_cloud() -> String {
    CLOUD_GCP.to_owned()
}

/// [`ClusterInfo::cloud`] of a job on Google Cloud (GKE, Pathways).
pub const CLOUD_GCP: &str = "GCP";

/// [`ClusterInfo::cloud`] (and [`ClusterInfo::cluster_name`]) of a job
/// the local backend runs.
pub const CLOUD_LOCAL: &str = "local";

impl ClusterInfo {
    /// The region of a GCP zone: the zone without its last `-` part
    /// (`us-central1-a` → `us-central1`); `None` for a zone without one.
    pub fn region_of(zone: &str) -> Option<String> {
        zone.rsplit_once('-')
            .map(|(region, _)| region)
            .filter(|region| !region.is_empty())
            .map(str::to_owned)
    }
}

/// `result.json` (and `result-worker-{N}.json`): how a job ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunnerResult {
    /// Protocol version of the runner that wrote it.
    #[serde(default = "default_protocol")]
    pub protocol: u32,
    /// Whether the function (or command) succeeded.
    pub success: bool,
    /// The returned value on success.
    #[serde(default)]
    pub value: Value,
    /// What went wrong on failure.
    #[serde(default)]
    pub error: Option<RemoteError>,
    /// Which host wrote it.
    #[serde(default)]
    pub host_index: u32,
}

fn default_protocol() -> u32 {
    PROTOCOL_VERSION
}

/// An error raised on the remote side, with its traceback and phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{type_name}: {message}{}", phase_note(phase.as_deref()))]
pub struct RemoteError {
    /// Qualified exception type (`ValueError`, `pkg.mod.MyError`) or one of
    /// the runner's own (`CommandFailed`, `SystemExit`, `ResultNotJSON`, `RunnerError`).
    #[serde(rename = "type")]
    pub type_name: String,
    /// `str(exception)`.
    pub message: String,
    /// The remote traceback, when there is one.
    #[serde(default)]
    pub traceback: Option<String>,
    /// The runner phase that failed (`execute` for the user's own code).
    #[serde(default)]
    pub phase: Option<String>,
}

fn phase_note(phase: Option<&str>) -> String {
    match phase {
        Some(p) if p != "execute" => format!(" (failed during the runner's '{p}' phase)"),
        _ => String::new(),
    }
}

/// The host a worker result's file name names: `result-worker-{N}.json`
/// → `N` (`N` ≥ 1, written in decimal without a sign); `None` for any
/// other name.
///
/// ```
/// use kinetic_core::protocol::worker_result_host;
/// assert_eq!(worker_result_host("result-worker-10.json"), Some(10));
/// assert_eq!(worker_result_host("result-worker-x.json"), None);
/// assert_eq!(worker_result_host("result.json"), None);
/// ```
pub fn worker_result_host(file_name: &str) -> Option<u32> {
    let digits = file_name
        .strip_prefix("result-worker-")?
        .strip_suffix(".json")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&n| n >= 1)
}

/// Which host of a multi-host job reported the failure that is raised,
/// and which others reported one too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostReport {
    /// The reporting host (its index; the leader is 0).
    pub host: u32,
    /// How many hosts the job has, when known.
    pub hosts: Option<u32>,
    /// The hosts after it that left a failure result too, in order
    /// (their results were not read).
    pub others: Vec<u32>,
}

impl std::fmt::Display for HostReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.hosts {
            Some(n) => write!(f, "reported by host {} of {n}", self.host)?,
            None => write!(f, "reported by host {}", self.host)?,
        }
        if !self.others.is_empty() {
            let others: Vec<String> = self.others.iter().map(u32::to_string).collect();
            write!(
                f,
                "; other hosts that also reported a failure: {}",
                others.join(", ")
            )?;
        }
        Ok(())
    }
}

/// The worker results among `names` (file names under a job's prefix), in
/// host order (2 before 10): `(host, name)`. Other names are left out.
pub fn worker_results_in_order<'a>(
    names: impl IntoIterator<Item = &'a str>,
) -> Vec<(u32, &'a str)> {
    let mut found: Vec<(u32, &str)> = names
        .into_iter()
        .filter_map(|n| worker_result_host(n).map(|h| (h, n)))
        .collect();
    found.sort_unstable();
    found.dedup_by_key(|(h, _)| *h);
    found
}

impl RunnerResult {
    /// Parse `result.json`; the error says what was wrong. The value is
    /// read as [`crate::json`] reads user values: numbers exactly as
    /// written, nesting up to [`crate::json::MAX_DEPTH`] levels.
    pub fn from_json(bytes: &[u8]) -> Result<Self, JsonError> {
        let invalid = |message: String| JsonError::Invalid { message };
        let Value::Object(mut doc) = crate::json::parse_document(bytes, 1)? else {
            return Err(invalid("expected a JSON object".into()));
        };
        // The value is moved out whole (a deep value is never walked twice).
        let value = doc.remove("value").unwrap_or(Value::Null);
        let mut result: Self =
            serde_json::from_value(Value::Object(doc)).map_err(|e| invalid(e.to_string()))?;
        result.value = value;
        if result.protocol != PROTOCOL_VERSION {
            return Err(invalid(format!(
                "it was written for protocol {}, but this engine reads protocol {PROTOCOL_VERSION}: the job ran a runner this engine does not speak to",
                result.protocol
            )));
        }
        Ok(result)
    }
}

#[cfg(test)]
mod host_tests {
    use super::*;

    #[test]
    fn worker_result_names() {
        for (name, host) in [
            ("result-worker-1.json", Some(1)),
            ("result-worker-007.json", Some(7)),
            ("result-worker-0.json", None),
            ("result-worker--1.json", None),
            ("result-worker-+1.json", None),
            ("result-worker-.json", None),
            ("result-worker-1.json.part", None),
            ("result-worker-99999999999.json", None),
            ("result.json", None),
        ] {
            assert_eq!(worker_result_host(name), host, "{name}");
        }
    }

    #[test]
    fn workers_come_in_numeric_order() {
        let names = [
            "result-worker-10.json",
            "spec.json",
            "result-worker-2.json",
            "result-worker-bad.json",
            "result-worker-3.json",
        ];
        let hosts: Vec<u32> = worker_results_in_order(names)
            .into_iter()
            .map(|(h, _)| h)
            .collect();
        assert_eq!(hosts, [2, 3, 10]);
    }

    #[test]
    fn the_report_names_the_host_and_the_others() {
        let report = HostReport {
            host: 2,
            hosts: Some(4),
            others: vec![3],
        };
        assert_eq!(
            report.to_string(),
            "reported by host 2 of 4; other hosts that also reported a failure: 3"
        );
        let alone = HostReport {
            host: 1,
            hosts: None,
            others: vec![],
        };
        assert_eq!(alone.to_string(), "reported by host 1");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spec_matches_the_documented_shape() {
        let spec = RunnerSpec {
            protocol: 1,
            job_id: "job-0a1b2c3d".into(),
            entrypoint: RunnerEntrypoint::Function {
                module: Some("work".into()),
                path: None,
                function: "square".into(),
            },
            args: vec![json!(7)],
            kwargs: Map::new(),
            volumes: vec![],
            env_names: vec!["WANDB_API_KEY".into()],
            secret_names: vec!["WANDB_API_KEY".into()],
            output_dir: "gs://p-kn-c-jobs/outputs/job-0a1b2c3d".into(),
            context: Artifact {
                uri: "gs://p-kn-c-jobs/job-0a1b2c3d/context.zip".into(),
                sha256: "ab".repeat(32),
            },
            requirements: None,
            plan: RunnerPlan {
                package_root: "/home/u/proj".into(),
                entry_rel: String::new(),
                client_cwd_rel: Some(String::new()),
                sys_path_rel: vec![String::new()],
            },
            result_uri: "gs://p-kn-c-jobs/job-0a1b2c3d/result.json".into(),
            worker_result_uris: vec![],
            log_uris: vec![],
            starts_uri: None,
            attempt_offset: 0,
            cluster: ClusterInfo {
                accelerator: "cpu".into(),
                num_nodes: 1,
                num_gpus_per_node: 0,
                num_accelerators_per_node: 0,
                node_ips: vec![],
                cluster_name: "kinetic-cluster".into(),
                cloud: CLOUD_GCP.into(),
                region: Some("us-central1".into()),
                zone: Some("us-central1-a".into()),
            },
            python_values: None,
            debug: None,
            extract_limits: ExtractLimits::default(),
        };
        let value = serde_json::to_value(&spec).unwrap();
        assert!(
            value.get("python_values").is_none(),
            "absent unless asked for"
        );
        assert!(value.get("starts_uri").is_none(), "absent for a slice");
        assert_eq!(
            value["extract_limits"],
            json!({"max_bytes": 4u64 << 30, "max_entries": 50000, "max_ratio": 200})
        );
        assert_eq!(
            value["entrypoint"],
            json!({"kind": "function", "module": "work", "function": "square"})
        );
        assert_eq!(value["requirements"], Value::Null);
        assert_eq!(value["worker_result_uris"], json!([]));
        assert_eq!(
            value["cluster"],
            json!({"accelerator": "cpu", "num_nodes": 1, "num_gpus_per_node": 0,
                   "num_accelerators_per_node": 0, "node_ips": [],
                   "cluster_name": "kinetic-cluster", "cloud": "GCP",
                   "region": "us-central1", "zone": "us-central1-a"})
        );
        let back: RunnerSpec = serde_json::from_value(value).unwrap();
        assert_eq!(back, spec);
    }

    #[test]
    fn an_older_spec_without_the_cluster_facts_reads_as_gcp_with_none() {
        let cluster: ClusterInfo = serde_json::from_value(json!({"accelerator": "cpu",
            "num_nodes": 1, "num_gpus_per_node": 0, "node_ips": []}))
        .unwrap();
        assert_eq!(
            (cluster.cluster_name.as_str(), cluster.cloud.as_str()),
            ("", "GCP")
        );
        assert_eq!((cluster.region, cluster.zone), (None, None));
    }

    #[test]
    fn a_zones_region_is_the_zone_without_its_last_part() {
        assert_eq!(
            ClusterInfo::region_of("us-central1-a").as_deref(),
            Some("us-central1")
        );
        assert_eq!(
            ClusterInfo::region_of("europe-west4-b").as_deref(),
            Some("europe-west4")
        );
        assert_eq!(ClusterInfo::region_of("local"), None);
        assert_eq!(ClusterInfo::region_of("-a"), None);
    }

    #[test]
    fn the_embedded_runner_carries_the_job_module() {
        assert!(!RUNNER_SOURCE.contains("\nJOB_MODULE_SOURCE = None\n"));
        assert!(
            RUNNER_SOURCE.contains("\nJOB_MODULE_SOURCE = \"\\\"\\\"\\\"Kinetic, as a job sees it")
        );
        assert!(JOB_MODULE_SOURCE.contains("def run("));
        assert!(RUNNER_SOURCE.len() > JOB_MODULE_SOURCE.len());
    }

    #[test]
    fn the_runner_digest_hashes_the_built_file() {
        // The one file the runner crate builds from the package, not a source file of it.
        assert!(RUNNER_SOURCE.starts_with("#!/usr/bin/env python3\n"));
        assert!(RUNNER_SOURCE.contains("\n# ---- kinetic_runner/phases.py\n"));
        assert_eq!(
            runner_digest(),
            hex::encode(Sha256::digest(kinetic_runner::RUNNER_SOURCE.as_bytes()))
        );
    }

    #[test]
    fn the_runner_defaults_its_limits_as_the_engine_does() {
        let d = ExtractLimits::default();
        let line = format!(
            "DEFAULT_EXTRACT_LIMITS = {{\"max_bytes\": 4 << 30, \"max_entries\": {}, \"max_ratio\": {}}}",
            d.max_entries, d.max_ratio
        );
        assert_eq!(d.max_bytes, 4 << 30);
        assert!(RUNNER_SOURCE.contains(&line), "{line}");
        assert!(d.refuse(50_000, 4 << 30, 1 << 30).is_none());
        let why = d.refuse(50_001, 1, 1).unwrap();
        assert!(why.contains("KINETIC_CONTEXT_MAX_FILES"), "{why}");
        let why = d.refuse(1, 201 * 1000, 1000).unwrap();
        assert!(why.contains("200:1"), "{why}");
    }

    #[test]
    fn command_entrypoint_and_data_ref_shapes() {
        let e = RunnerEntrypoint::Command {
            argv: vec!["python3".into(), "train.py".into()],
        };
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"kind": "command", "argv": ["python3", "train.py"]})
        );
        let r = DataRef::new("file:///s/default/data-cache/abc", true);
        assert_eq!(
            r.to_value(),
            json!({"__data_ref__": true, "uri": "file:///s/default/data-cache/abc", "is_dir": true, "mount_path": null, "fuse": false})
        );
    }

    #[test]
    fn a_result_of_another_protocol_is_refused() {
        // Issue 25.9: `"protocol": 2` was read as if it were protocol 1.
        for doc in [
            &br#"{"protocol":2,"success":true,"value":49,"host_index":0}"#[..],
            br#"{"protocol":0,"success":true,"value":49,"host_index":0}"#,
        ] {
            let err = RunnerResult::from_json(doc).unwrap_err().to_string();
            assert!(
                err.contains("protocol") && err.contains("reads protocol 1"),
                "{err}"
            );
        }
        // A result without the field is protocol 1 (the runner always
        // writes it; hand-written results may not).
        assert!(RunnerResult::from_json(br#"{"success":true,"value":1}"#).is_ok());
    }

    #[test]
    fn results_parse_success_and_failure() {
        let ok =
            RunnerResult::from_json(br#"{"protocol":1,"success":true,"value":49,"host_index":0}"#)
                .unwrap();
        assert!(ok.success);
        assert_eq!(ok.value, json!(49));
        let failed = RunnerResult::from_json(
            br#"{"protocol":1,"success":false,"host_index":0,"error":{"type":"ValueError","message":"bad","traceback":"Traceback...","phase":"execute"}}"#,
        )
        .unwrap();
        let err = failed.error.unwrap();
        assert_eq!(err.to_string(), "ValueError: bad");
        let phase = RemoteError {
            phase: Some("artifact verification".into()),
            ..err
        };
        assert!(phase.to_string().contains("'artifact verification' phase"));
        assert!(RunnerResult::from_json(b"[1]").is_err());
    }
}
