//! The `Backend` port: where a prepared job runs (a GKE Job, a Pathways
//! LeaderWorkerSet, a local process, or a plugin's own), the registry
//! the embedding program fills with backends by name, and its decorators:
//! [`FaultyBackend`] (fault injection) and [`RetryBackend`] (the engine's
//! one retry policy).

use std::collections::BTreeMap;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_core::Stream;

use crate::accelerators::AcceleratorSpec;
use crate::advice::{Advice, FrontEnd};
use crate::env::CapturedEnv;
use crate::ids::{GroupId, JobId};
use crate::record::JobRecord;
use crate::status::JobState;

use super::{BoxError, StoreError};

/// What a backend can do, as data: the engine chooses its behaviour from
/// it (whether to resolve an image, poll a batch with one group call or
/// job by job, stream logs, offer cancel, which accelerators to refuse
/// before uploading anything), and the conformance suite runs the cases a
/// backend declares. A method whose capability is not declared MUST answer
/// [`BackendError::Unsupported`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackendCapabilities {
    /// Runs jobs that span several hosts.
    pub multi_host: bool,
    /// Most hosts one job may use; [`BackendCapabilities::check`] refuses
    /// accelerators that need more.
    pub max_hosts: u32,
    /// `logs` returns the job's output.
    pub logs: bool,
    /// `follow_logs` streams it while the job runs.
    pub follow_logs: bool,
    /// `cancel` stops a running job.
    pub cancel: bool,
    /// Jobs need a container image (the engine resolves one before submit).
    pub needs_image: bool,
    /// `group_status` reports a whole batch in one call; without it the
    /// engine polls a batch one `status` call per job.
    pub group_status: bool,
    /// `port_forward` opens a byte stream to a port of a running job's
    /// leader (debug jobs need it).
    pub port_forward: bool,
    /// Runs the children of a batch on workers ([`PreparedJob::worker_pool`])
    /// that take at most `max_workers` of them at once, whatever the number
    /// submitted: the engine then keeps each worker's next input queued
    /// (up to twice `max_concurrent` in flight, never more than
    /// `max_concurrent` running).
    pub worker_pools: bool,
    /// `submit_batch` runs a whole batch from one call (one Indexed Job
    /// and one Secret on gke, however many inputs), `group_status` then
    /// reports every child of it, and `end_batch` stops or removes it.
    pub indexed_batches: bool,
    /// `submit_batch` also takes a batch in blocks
    /// ([`PreparedBatch::block_size`] above 1): each index a block of
    /// inputs one pod runs, whose states `group_status` reads from the
    /// blocks' markers in the store.
    pub batch_blocks: bool,
}

impl BackendCapabilities {
    /// A single-host backend with logs, cancel and group status, that
    /// needs no image and forwards no ports.
    pub fn single_host() -> Self {
        Self {
            multi_host: false,
            max_hosts: 1,
            logs: true,
            follow_logs: true,
            cancel: true,
            needs_image: false,
            group_status: true,
            port_forward: false,
            worker_pools: false,
            indexed_batches: false,
            batch_blocks: false,
        }
    }

    /// The same, stating whether `submit_batch` takes a batch in blocks.
    pub fn with_batch_blocks(mut self, batch_blocks: bool) -> Self {
        self.batch_blocks = batch_blocks;
        self
    }

    /// The same, stating whether `submit_batch` runs a whole batch.
    pub fn with_indexed_batches(mut self, indexed_batches: bool) -> Self {
        self.indexed_batches = indexed_batches;
        self
    }

    /// The same, stating whether batches run on worker pools.
    pub fn with_worker_pools(mut self, worker_pools: bool) -> Self {
        self.worker_pools = worker_pools;
        self
    }

    /// The same, stating whether `port_forward` reaches a job's ports.
    pub fn with_port_forward(mut self, port_forward: bool) -> Self {
        self.port_forward = port_forward;
        self
    }

    /// The same, stating whether jobs need an image.
    pub fn with_image(mut self, needs_image: bool) -> Self {
        self.needs_image = needs_image;
        self
    }

    /// The same, with multi-host support up to `max_hosts`.
    pub fn with_multi_host(mut self, max_hosts: u32) -> Self {
        self.multi_host = max_hosts > 1;
        self.max_hosts = max_hosts;
        self
    }

    /// The same, stating whether `group_status` reports a batch in one call.
    pub fn with_group_status(mut self, group_status: bool) -> Self {
        self.group_status = group_status;
        self
    }

    /// The same, stating whether `logs` and `follow_logs` give the output.
    pub fn with_logs(mut self, logs: bool, follow_logs: bool) -> Self {
        self.logs = logs;
        self.follow_logs = follow_logs;
        self
    }

    /// The same, stating whether `cancel` stops a running job.
    pub fn with_cancel(mut self, cancel: bool) -> Self {
        self.cancel = cancel;
        self
    }

    /// Whether backend `backend`, with these capabilities, can run a job on
    /// `accelerator` as far as hosts go: a job on more hosts than
    /// [`max_hosts`](Self::max_hosts) (or on several hosts when
    /// [`multi_host`](Self::multi_host) is false) is
    /// [`BackendError::Unsupported`] naming both. The engine asks this
    /// before [`Backend::check`], which adds what only the backend knows.
    ///
    /// ```
    /// use kinetic_core::accelerators::AcceleratorSpec;
    /// use kinetic_core::ports::BackendCapabilities;
    /// let caps = BackendCapabilities::single_host();
    /// assert!(caps.check("gke", &AcceleratorSpec::parse("l4").unwrap()).is_ok());
    /// let err = caps.check("gke", &AcceleratorSpec::parse("v5litepod-16").unwrap()).unwrap_err();
    /// assert!(err.to_string().contains("spans 4 hosts"), "{err}");
    /// ```
    pub fn check(&self, backend: &str, accelerator: &AcceleratorSpec) -> Result<(), BackendError> {
        let hosts = accelerator.num_hosts();
        if hosts <= 1 || (self.multi_host && hosts <= self.max_hosts) {
            return Ok(());
        }
        let offers = if self.multi_host {
            format!("jobs on at most {} hosts", self.max_hosts)
        } else {
            "single-host jobs (CPU, GPU, single-host TPU slices)".to_owned()
        };
        Err(BackendError::unsupported(format!(
            "accelerator '{accelerator}' spans {hosts} hosts; the {backend} backend runs {offers}; use the pathways backend for multi-host TPU slices"
        )))
    }

    /// [`BackendError::Unsupported`] for a call of `backend` whose
    /// capability (`what`, as the field is named) is not declared.
    pub fn undeclared(backend: &str, what: &str) -> BackendError {
        BackendError::unsupported(format!(
            "the {backend} backend does not declare the '{what}' capability"
        ))
    }
}

/// Deadlines the backend enforces (where it can) so that no job hangs silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Deadlines {
    /// Longest a job may run once started; past it the job fails with
    /// `DeadlineExceeded`.
    pub run: Option<Duration>,
    /// Longest a job may stay pending for a blocking reason (unschedulable,
    /// image pull error) before it is reported failed with that reason.
    pub pending: Option<Duration>,
}

/// Everything a backend needs to start one job. Built only by the plan
/// ([`crate::plan::job`], [`crate::plan::submission`]); the engine hands it
/// to the backend once the job's artifacts are in the store.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PreparedJob {
    /// The durable record (ids, names, namespace, image, group).
    pub record: JobRecord,
    /// The parsed accelerator.
    pub accelerator: AcceleratorSpec,
    /// URI of `spec.json`, the runner's only argument.
    pub spec_uri: String,
    /// Captured environment values. A backend MUST deliver them to the
    /// runner's process environment only (a Kubernetes Secret through
    /// `envFrom`, a child's environment) and MUST NOT write them into a
    /// manifest, the store, a log line or an error.
    pub env: CapturedEnv,
    /// Deadlines to enforce.
    pub deadlines: Deadlines,
    /// Data to mount read-only before the runner starts (Kinetic's
    /// `fuse=True`), volumes first, then arguments' mounts under
    /// `/_kinetic/fuse-data/`. A backend MUST present each at its mount
    /// path (relative to the runner's `--mount-root` where it gives one)
    /// read-only, or refuse the job with [`BackendError::Unsupported`]
    /// when it cannot; it MUST NOT start the job without them.
    pub fuse_mounts: Vec<FuseMount>,
    /// Failure budgets to enforce (see [`crate::budget`]): a backend MUST
    /// run the job again after an application failure while
    /// [`Budgets::retries`](crate::budget::Budgets::retries) allows, and
    /// after a preemption or eviction while
    /// [`Budgets::restarts`](crate::budget::Budgets::restarts) allows, and
    /// MUST refuse (invalid input) an explicitly asked budget it cannot
    /// honour ([`PreparedJob::budget_request`]).
    pub budgets: crate::budget::Budgets,
    /// The budgets as the user asked for them (unset: the default).
    pub budget_request: crate::budget::BudgetRequest,
    /// Set for a batch child whose batch runs on workers
    /// ([`crate::batch::Isolation::Workers`]): a backend MAY then run the
    /// job in a long-lived worker process its batch shares instead of a
    /// process of its own, as long as the job keeps everything a job has
    /// (its status, logs, attempts, result, cancel, deadline) and a job that
    /// kills its process fails alone. A backend without pools ignores it.
    pub worker_pool: Option<WorkerPool>,
}

/// The pool a batch child may run on ([`PreparedJob::worker_pool`]): the
/// children of one batch (the record's `group_id`) share it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct WorkerPool {
    /// At most this many workers (the batch's `max_concurrent`); `None`:
    /// as many as the backend runs jobs at once.
    pub max_workers: Option<usize>,
}

impl WorkerPool {
    /// A pool of at most `max_workers` workers (`None`: the backend's
    /// parallelism).
    pub fn new(max_workers: Option<usize>) -> Self {
        Self { max_workers }
    }
}

/// A whole batch handed to a backend in one call ([`Backend::submit_batch`]):
/// what its children share, once, and how many inputs there are. The
/// backend runs input `i`'s attempt `a` as the child job
/// [`child_job_id(group_id, i, a)`](crate::batch::child_job_id), through
/// the runner's index mode (`--batch-spec`, see the runner protocol): the
/// runner reads its input from the store and writes the child's
/// `handle.json`, `result.json` and log chunks where a child submitted on
/// its own has them, so the client writes O(1) objects per batch.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PreparedBatch {
    /// The batch.
    pub group_id: GroupId,
    /// What every child shares: image, resources, namespace, deadlines,
    /// mounts and the captured environment (one Secret on Kubernetes). Its
    /// `spec_uri` is the batch spec (`_groups/{group_id}/batch.json`), the
    /// runner's `--batch-spec`; its record is the template of every
    /// child's record (the job id aside: the runner sets each child's).
    pub job: PreparedJob,
    /// The inputs' calls: the prefix under which the runner finds the
    /// chunks of one JSON line per input (named in the batch spec).
    pub inputs_uri: String,
    /// How many inputs (children at attempt 1): at least one.
    pub inputs: usize,
    /// At most this many inputs run at once (the batch's `max_concurrent`,
    /// or the backend's default when unlimited): at least one.
    pub parallelism: usize,
    /// How many times an input that failed is run again, each run a new
    /// child id (attempt + 1) with `KINETIC_ATTEMPT` one higher.
    pub retries_per_input: u32,
    /// Inputs per index (the batch spec's `block_size`): 1, each index is
    /// one input; more, each index is a block of inputs its pod runs one
    /// after the other and retries itself, telling the store what each
    /// did ([`crate::batch::BlockMarker`]). Only for a backend that
    /// declares [`BackendCapabilities::batch_blocks`].
    pub block_size: usize,
}

impl PreparedBatch {
    /// A batch of `inputs` inputs of `job` (whose `spec_uri` is the batch
    /// spec). [`BackendError::InvalidInput`] when `inputs` or `parallelism`
    /// is zero, or `inputs` is beyond the deterministic child ids
    /// ([`crate::batch::MAX_DETERMINISTIC_INDEX`]), or `retries_per_input`
    /// beyond their attempts.
    pub fn new(
        group_id: GroupId,
        job: PreparedJob,
        inputs_uri: impl Into<String>,
        inputs: usize,
        parallelism: usize,
        retries_per_input: u32,
    ) -> Result<Self, BackendError> {
        if inputs == 0 || inputs > crate::batch::MAX_DETERMINISTIC_INDEX {
            return Err(BackendError::invalid_input(format!(
                "a batch submitted in one call takes 1 to {} inputs, got {inputs}",
                crate::batch::MAX_DETERMINISTIC_INDEX
            )));
        }
        if parallelism == 0 {
            return Err(BackendError::invalid_input(
                "a batch's parallelism must be at least 1, got 0",
            ));
        }
        if retries_per_input >= crate::batch::MAX_DETERMINISTIC_ATTEMPT {
            return Err(BackendError::invalid_input(format!(
                "a batch submitted in one call retries an input at most {} times, got {retries_per_input}",
                crate::batch::MAX_DETERMINISTIC_ATTEMPT - 1
            )));
        }
        Ok(Self {
            group_id,
            job,
            inputs_uri: inputs_uri.into(),
            inputs,
            parallelism: parallelism.min(inputs),
            retries_per_input,
            block_size: 1,
        })
    }

    /// The same batch with `block_size` inputs per index (at least 1).
    #[must_use]
    pub fn with_block_size(mut self, block_size: usize) -> Self {
        self.block_size = block_size.max(1);
        self
    }

    /// How many indexes: one per block.
    pub fn indexes(&self) -> usize {
        self.inputs.div_ceil(self.block_size.max(1))
    }

    /// The batch spec's URI (the shared job's `spec_uri`).
    pub fn spec_uri(&self) -> &str {
        &self.job.spec_uri
    }
}

/// What [`Backend::end_batch`] does to a batch submitted with
/// [`Backend::submit_batch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BatchEnd {
    /// Start no input that has not started (nor any retry); inputs running
    /// finish (fail-fast without `cancel_running_on_fail`).
    StopStarting,
    /// Stop every input (those running too) and start none: cancel of the
    /// batch, `cancel_running_on_fail`. Children already ended keep their
    /// results.
    Cancel,
    /// Remove what the backend holds for the batch (its Kubernetes Job and
    /// Secret), stopping it first.
    Cleanup,
}

/// Data a backend mounts read-only for a job: a GCS FUSE CSI volume on
/// Kubernetes, a read-only view of the store's directory locally.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FuseMount {
    /// `gs://bucket/prefix` (or the store's `file://` URI) of a directory,
    /// or of one object.
    pub uri: String,
    /// Where it is mounted in the job (absolute).
    pub mount_path: String,
    /// Whether `uri` names a directory. For one object the mount shows
    /// the object's directory (GCS FUSE's `only-dir`), and the job reads
    /// the object by its name inside the mount.
    pub is_dir: bool,
}

impl FuseMount {
    /// The directory the mount shows: `uri` itself for a directory, its
    /// parent for one object (without a trailing `/`).
    ///
    /// ```
    /// use kinetic_core::ports::FuseMount;
    /// let file = FuseMount { uri: "gs://b/data/w.h5".into(), mount_path: "/w".into(), is_dir: false };
    /// assert_eq!(file.dir_uri(), "gs://b/data");
    /// let dir = FuseMount { uri: "gs://b/data/".into(), mount_path: "/d".into(), is_dir: true };
    /// assert_eq!(dir.dir_uri(), "gs://b/data");
    /// ```
    pub fn dir_uri(&self) -> &str {
        let uri = self.uri.trim_end_matches('/');
        if self.is_dir {
            return uri;
        }
        match uri.rsplit_once('/') {
            Some((parent, _)) if !parent.ends_with('/') => parent,
            _ => uri,
        }
    }
}

impl PreparedJob {
    /// A prepared job: only the plan makes one.
    pub(crate) fn new(
        record: JobRecord,
        accelerator: AcceleratorSpec,
        spec_uri: String,
        env: CapturedEnv,
        deadlines: Deadlines,
    ) -> Self {
        Self {
            record,
            accelerator,
            spec_uri,
            env,
            deadlines,
            fuse_mounts: Vec::new(),
            budgets: crate::budget::Budgets::default(),
            budget_request: crate::budget::BudgetRequest::default(),
            worker_pool: None,
        }
    }

    /// The same job, allowed to run on its batch's worker pool.
    pub fn with_worker_pool(mut self, pool: Option<WorkerPool>) -> Self {
        self.worker_pool = pool;
        self
    }

    /// The same job with these read-only mounts.
    pub fn with_fuse_mounts(mut self, mounts: Vec<FuseMount>) -> Self {
        self.fuse_mounts = mounts;
        self
    }

    /// The same job with failure budgets `request`, resolved for its
    /// accelerator (Spot jobs get restarts by default).
    pub fn with_budgets(mut self, request: crate::budget::BudgetRequest) -> Self {
        self.budgets = request.resolve(self.accelerator.spot());
        self.budget_request = request;
        self
    }
}

/// How long [`Backend::cancel`] and [`Backend::cleanup`] wait for the
/// system under the backend to confirm what they asked (the job stopped,
/// its objects deleted), and how often an adapter that polls for the
/// confirmation looks: Kinetic's `cleanup_timeout` and
/// `cleanup_poll_interval` (180 s and 2 s by default).
///
/// ```
/// use std::time::Duration;
/// use kinetic_core::ports::CleanupWait;
/// let wait = CleanupWait::new(Duration::from_secs(5), Duration::from_millis(500));
/// assert_eq!(wait.timeout, Duration::from_secs(5));
/// assert_eq!(CleanupWait::default().timeout, Duration::from_secs(180));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CleanupWait {
    /// The longest the call waits for the confirmation.
    pub timeout: Duration,
    /// The longest pause between two checks, where the adapter polls for
    /// the confirmation (it MAY check sooner, backing off up to this;
    /// one told by events, such as a Kubernetes watch, polls only when it
    /// cannot be told).
    pub poll_interval: Duration,
}

impl Default for CleanupWait {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(180),
            poll_interval: Duration::from_secs(2),
        }
    }
}

impl CleanupWait {
    /// Wait at most `timeout`, looking at least every `poll_interval`.
    pub fn new(timeout: Duration, poll_interval: Duration) -> Self {
        Self {
            timeout,
            poll_interval,
        }
    }
}

/// Options of [`Backend::logs`].
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct LogOptions {
    /// Only the last `n` lines.
    pub tail: Option<usize>,
}

impl LogOptions {
    /// The last `n` lines.
    pub fn tail(n: usize) -> Self {
        Self { tail: Some(n) }
    }
}

/// The last `n` lines of `text`, with their newlines: what
/// [`LogOptions::tail`] asks a backend for when it has the whole text.
///
/// ```
/// use kinetic_core::ports::tail_lines;
/// assert_eq!(tail_lines("a\nb\nc\n", 2), "b\nc\n");
/// assert_eq!(tail_lines("a\nb", 9), "a\nb");
/// ```
pub fn tail_lines(text: &str, n: usize) -> String {
    if n == 0 {
        return String::new();
    }
    let trimmed = text.strip_suffix('\n').unwrap_or(text);
    let start = trimmed
        .rmatch_indices('\n')
        .nth(n - 1)
        .map_or(0, |(i, _)| i + 1);
    text[start..].to_owned()
}

/// What a terminal shows of an output line holding carriage returns: the
/// text after the last one (progress bars redraw in place), as Kinetic's
/// log streaming shows it.
///
/// ```
/// use kinetic_core::ports::terminal_line;
/// assert_eq!(terminal_line("1/10\r2/10\r3/10"), "3/10");
/// assert_eq!(terminal_line("done\r"), "done");
/// ```
pub fn terminal_line(line: &str) -> &str {
    let line = line.strip_suffix('\r').unwrap_or(line);
    line.rsplit('\r').next().unwrap_or(line)
}

/// A live log: one item per line (without its newline), ending when the
/// job's output ends.
pub type LogStream = Pin<Box<dyn Stream<Item = Result<String, BackendError>> + Send>>;

/// Hints that jobs of a backend may have changed state ([`Backend::changes`]):
/// each item says "look again", never what changed.
pub type ChangeFeed = Pin<Box<dyn Stream<Item = ()> + Send>>;

/// A byte stream, both ways, to a port of a job's host
/// ([`Backend::port_forward`]).
pub trait PortIo: futures_io::AsyncRead + futures_io::AsyncWrite + Send + Unpin {}

impl<T: futures_io::AsyncRead + futures_io::AsyncWrite + Send + Unpin> PortIo for T {}

/// An open connection to a job's port: what [`Backend::port_forward`] gives.
pub type PortStream = Box<dyn PortIo>;

/// Which group [`Backend::group_status`] reports on: the batch's id and the
/// namespace its jobs were submitted to (from their records).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupQuery {
    /// The batch (`grp-` + 8 hex), as the children's records carry it.
    pub group_id: GroupId,
    /// The Kubernetes namespace of the children (backends without
    /// namespaces ignore it).
    pub namespace: String,
}

impl GroupQuery {
    /// The children of `group_id` in `namespace`.
    pub fn new(group_id: GroupId, namespace: impl Into<String>) -> Self {
        Self {
            group_id,
            namespace: namespace.into(),
        }
    }
}

/// The state of every job of a group the backend holds, by job id. A job
/// of the group that is absent is `NOT_FOUND` as far as the backend knows.
pub type GroupStatus = BTreeMap<JobId, JobState>;

/// Errors of a [`Backend`], organised by what the caller does next.
///
/// Each error's `Display` is a complete sentence for a person; its
/// [`source`](std::error::Error::source) is the typed cause the backend got
/// (a `kube::Error` holding the Kubernetes API `Status`, a [`StoreError`],
/// an `std::io::Error`, …) for a program to inspect. Backends classify from
/// the cause's type and status code, never from its text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The backend knows no such job: check the id (it may have been
    /// cleaned up).
    #[error("job {job_id} not found on backend '{backend}'")]
    NotFound {
        /// The backend.
        backend: String,
        /// The job.
        job_id: String,
    },
    /// A job with this id exists with a different spec.
    #[error("job {job_id} already exists on backend '{backend}' with a different spec: {message}")]
    AlreadyExists {
        /// The backend.
        backend: String,
        /// The job.
        job_id: String,
        /// What differs.
        message: String,
    },
    /// The job cannot run here as asked (e.g. an accelerator this backend
    /// or host does not have), or the backend does not declare the
    /// capability a call needs ([`BackendCapabilities`]): choose another
    /// backend or accelerator; the message says what would be accepted,
    /// and the advice, when there is some, what to set (each front end
    /// names the settings its own way: [`BackendError::message_for`]; the
    /// `Display` is the command line's).
    #[error("{}", crate::advice::with_advice(message, advice.as_ref(), crate::advice::FrontEnd::CommandLine))]
    Unsupported {
        /// What is not supported and what is.
        message: String,
        /// What the user can set instead.
        advice: Option<Advice>,
    },
    /// The request was malformed, or names something the system under the
    /// backend lacks (a namespace): fix the input or the configuration.
    #[error("{message}")]
    InvalidInput {
        /// What was wrong and what is accepted.
        message: String,
        /// What the system under the backend reported.
        source: Option<BoxError>,
    },
    /// The credentials are missing, expired, or lack a permission: fix
    /// them; retrying will not help. The source keeps the system's answer
    /// (on Kubernetes, the API `Status` with its code, reason and message).
    #[error("permission denied: {message}")]
    PermissionDenied {
        /// What was refused and which permission is missing, where known.
        message: String,
        /// What the system under the backend reported.
        source: Option<BoxError>,
    },
    /// The backend could not be reached or is overloaded: the same call may
    /// succeed later. When `retried` is true the call already went through
    /// a retry policy that spent its budget (the engine's `RetryBackend`, or a store's
    /// own retries): nobody retries it again.
    #[error("backend unavailable: {message}")]
    Unavailable {
        /// What happened.
        message: String,
        /// The call was already retried as its retry policy allows.
        retried: bool,
        /// What the system under the backend reported.
        source: Option<BoxError>,
    },
    /// What `cancel` or `cleanup` asked for was requested, but the system
    /// under the backend did not confirm it within the call's
    /// [`CleanupWait::timeout`]: it goes on without the caller (the job
    /// stops, its objects go; `status` says when). Calling again only waits
    /// again, so no retry policy retries it.
    #[error("{message}")]
    NotConfirmed {
        /// The job.
        job_id: String,
        /// How long the call waited.
        waited: Duration,
        /// What was asked, what is still there, and how long was waited.
        message: String,
    },
    /// Anything else: an answer nothing expected.
    #[error("backend error: {message}")]
    Other {
        /// What happened.
        message: String,
        /// What the system under the backend reported.
        source: Option<BoxError>,
    },
}

impl BackendError {
    /// [`BackendError::NotFound`].
    pub fn not_found(backend: impl Into<String>, job_id: impl Into<String>) -> Self {
        Self::NotFound {
            backend: backend.into(),
            job_id: job_id.into(),
        }
    }

    /// [`BackendError::Unsupported`].
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::Unsupported {
            message: message.into(),
            advice: None,
        }
    }

    /// [`BackendError::Unsupported`] with advice on what to set instead.
    pub fn unsupported_with(message: impl Into<String>, advice: Advice) -> Self {
        Self::Unsupported {
            message: message.into(),
            advice: Some(advice),
        }
    }

    /// The error's advice on what to set, if it has some.
    pub fn advice(&self) -> Option<&Advice> {
        match self {
            Self::Unsupported { advice, .. } => advice.as_ref(),
            _ => None,
        }
    }

    /// The error as `front` shows it: its advice names the settings as
    /// that front end does (the `Display` is the command line's).
    pub fn message_for(&self, front: FrontEnd) -> String {
        match self {
            Self::Unsupported {
                message,
                advice: Some(advice),
            } => crate::advice::with_advice(message, Some(advice), front),
            other => other.to_string(),
        }
    }

    /// A store error met by a backend, as a backend error of the same
    /// kind, keeping it as the source (and whether it was retried).
    pub fn from_store(what: &str, error: StoreError) -> Self {
        let message = format!("{what}: {error}");
        let kind = match &error {
            StoreError::Unavailable { retried, .. } => Self::Unavailable {
                message,
                retried: *retried,
                source: None,
            },
            StoreError::PermissionDenied { .. } => Self::permission_denied(message),
            StoreError::InvalidInput { .. } | StoreError::Unsupported { .. } => {
                Self::invalid_input(message)
            }
            _ => Self::other(message),
        };
        kind.with_source(error)
    }

    /// True for [`BackendError::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    /// [`BackendError::NotConfirmed`]: `what` (e.g. "the deletion of Job
    /// x in namespace y") of `job_id` not confirmed after `waited`.
    pub fn not_confirmed(job_id: impl Into<String>, what: &str, waited: Duration) -> Self {
        let job_id = job_id.into();
        Self::NotConfirmed {
            message: format!(
                "{what} of job {job_id} was requested but not confirmed within {:.1}s; it goes on without waiting (status shows when it is done)",
                waited.as_secs_f64()
            ),
            job_id,
            waited,
        }
    }

    /// True for [`BackendError::NotConfirmed`].
    pub fn is_not_confirmed(&self) -> bool {
        matches!(self, Self::NotConfirmed { .. })
    }

    /// True for [`BackendError::Unsupported`].
    pub fn is_unsupported(&self) -> bool {
        matches!(self, Self::Unsupported { .. })
    }

    /// True for [`BackendError::InvalidInput`] and [`BackendError::Unsupported`]:
    /// the request must change before it can succeed.
    pub fn is_invalid_input(&self) -> bool {
        matches!(self, Self::InvalidInput { .. } | Self::Unsupported { .. })
    }
}

crate::retry::port_error_kinds!(
    BackendError,
    sourced: [],
    bare: [NotFound, AlreadyExists, Unsupported, NotConfirmed]
);

/// A place where jobs run.
///
/// Implementations MUST be safe to share (`Arc<dyn Backend>`), MUST keep
/// every job's state outside the process (another process attaching to the
/// same job id sees the same job), and MUST NOT write captured environment
/// values anywhere but the runner's process environment.
///
/// Every method is required, with no default, so that a decorator forwards
/// each one rather than silently replacing it. What a backend can do is
/// declared by [`Backend::capabilities`]; a method whose capability is not
/// declared answers [`BackendError::Unsupported`].
///
/// The engine wraps each backend it is given in a `RetryBackend`, which
/// calls a method again when it failed with an error that is retryable and
/// not yet retried: every method MUST be safe to call again (`submit`,
/// `cancel` and `cleanup` are idempotent, the rest only read). A backend
/// that retries on its own reports what it gave up on as retried
/// ([`BackendError::Unavailable`] with `retried: true`), so that nothing
/// retries it twice.
#[async_trait]
pub trait Backend: fmt::Debug + Send + Sync + 'static {
    /// The name the registry knows this backend by (`local`, `gke`, …).
    fn name(&self) -> &str;

    /// What this backend can do.
    fn capabilities(&self) -> BackendCapabilities;

    /// Whether this backend can run a job on `accelerator`; called before
    /// anything is uploaded, after the engine checked the hosts against
    /// [`BackendCapabilities::check`]. MUST return
    /// [`BackendError::Unsupported`] with a message naming the accelerator
    /// and what this backend accepts when it cannot (a backend MAY refuse
    /// more than its capabilities say, such as GPUs a host lacks, never
    /// less). Required: a wrapper must not lose it.
    async fn check(&self, accelerator: &AcceleratorSpec) -> Result<(), BackendError>;

    /// Start the job. MUST be idempotent: submitting a job id that already
    /// exists with the same spec URI succeeds without starting a second
    /// copy; with a different spec URI it MUST fail with
    /// [`BackendError::AlreadyExists`].
    async fn submit(&self, job: &PreparedJob) -> Result<(), BackendError>;

    /// The job's state. A job the backend does not know (never submitted,
    /// or cleaned up) MUST be `NOT_FOUND`, not an error. A terminal state
    /// MUST stay terminal.
    async fn status(&self, job: &JobRecord) -> Result<JobState, BackendError>;

    /// The state of every job the backend holds whose record names
    /// `query.group_id` (a batch's children), in one call of this port
    /// whose cost does not grow with the group's size in calls to the
    /// underlying system: a labelled list on Kubernetes (plus one list of
    /// pods when pending reasons live on them), one directory listing
    /// locally. This is what makes a batch poll cost one backend call.
    ///
    /// - It MUST include every job of the group that [`Backend::status`]
    ///   would not report as `NOT_FOUND`, with the state `status` would give
    ///   (same status and reason), and MUST NOT include jobs of other groups
    ///   or jobs without a group.
    /// - A job whose `submit` returned before this call started MUST be
    ///   included unless it was cleaned up since.
    /// - An unknown group, or one whose jobs were all cleaned up, MUST give
    ///   an empty map, not an error.
    ///
    /// A backend whose [`BackendCapabilities::group_status`] is false MUST
    /// answer [`BackendError::Unsupported`], and the engine then polls the
    /// group one `status` call per job (it asks the capabilities, not this
    /// error). Required: a wrapper must not lose it.
    async fn group_status(&self, query: &GroupQuery) -> Result<GroupStatus, BackendError>;

    /// Start a whole batch ([`PreparedBatch`]) with calls whose number does
    /// not grow with its inputs (one Secret and one Indexed Job on gke).
    ///
    /// - Input `i` runs as child [`crate::batch::child_job_id`]`(group, i,
    ///   1)`; an input whose run failed runs again, while
    ///   `retries_per_input` allows, as the child of the next attempt, and
    ///   only that input: the others never notice.
    /// - At most `parallelism` inputs run at once.
    /// - In blocks ([`PreparedBatch::block_size`] above 1, for a backend
    ///   that declares [`BackendCapabilities::batch_blocks`]; any other
    ///   MUST answer [`BackendError::Unsupported`]): the same promises,
    ///   each input's attempts run one after the other by its block's
    ///   pod.
    /// - MUST be idempotent: submitting the same group again with the same
    ///   batch spec URI succeeds without starting a second copy; with a
    ///   different one it MUST fail with [`BackendError::AlreadyExists`].
    /// - [`Backend::group_status`] of the group then reports every input:
    ///   each attempt's child that ran, with its state, and an input not
    ///   started yet as its attempt-1 child `PENDING`.
    ///
    /// Without [`BackendCapabilities::indexed_batches`] it MUST answer
    /// [`BackendError::Unsupported`] (the engine then submits one job per
    /// input). Required: a wrapper must not lose it.
    async fn submit_batch(&self, batch: &PreparedBatch) -> Result<(), BackendError>;

    /// Stop or remove a batch started by [`Backend::submit_batch`]
    /// ([`BatchEnd`]). MUST be idempotent (an unknown or ended batch
    /// succeeds); after [`BatchEnd::Cancel`] returned `Ok`, `group_status`
    /// MUST report no child `PENDING` or `RUNNING` (each child not ended
    /// reads `FAILED (cancelled)`, or is gone), even while the system
    /// still stops its processes; after [`BatchEnd::Cleanup`] returned
    /// `Ok`, `group_status` MUST give an empty map. Waits as
    /// [`Backend::cleanup`] does (`wait`), answering
    /// [`BackendError::NotConfirmed`] past it. Without
    /// [`BackendCapabilities::indexed_batches`] it MUST answer
    /// [`BackendError::Unsupported`]. Required: a wrapper must not lose it.
    async fn end_batch(
        &self,
        query: &GroupQuery,
        end: BatchEnd,
        wait: CleanupWait,
    ) -> Result<(), BackendError>;

    /// The job's output so far (all of it, or the last `tail` lines). A job
    /// that has written nothing yet gives an empty string; an unknown job
    /// MUST be [`BackendError::NotFound`]. Without
    /// [`BackendCapabilities::logs`] it MUST be [`BackendError::Unsupported`].
    async fn logs(&self, job: &JobRecord, options: LogOptions) -> Result<String, BackendError>;

    /// The job's output as a stream of lines, from the start, that ends once
    /// the job has ended and every line was delivered. An unknown job MUST be
    /// [`BackendError::NotFound`]. Without [`BackendCapabilities::follow_logs`]
    /// it MUST be [`BackendError::Unsupported`].
    async fn follow_logs(&self, job: &JobRecord) -> Result<LogStream, BackendError>;

    /// Stop the job. MUST be idempotent (cancelling an ended or unknown job
    /// succeeds); once it returns, `status` MUST eventually report a
    /// terminal state or `NOT_FOUND`, never `RUNNING` forever. Without
    /// [`BackendCapabilities::cancel`] it MUST be [`BackendError::Unsupported`].
    ///
    /// It MUST return within about `wait.timeout` (plus one request to the
    /// system under it): a stop not confirmed by then (a process still in
    /// its grace period) is [`BackendError::NotConfirmed`], and the job
    /// still stops without the caller (as above). Where it polls for the
    /// stop it pauses at most `wait.poll_interval` between checks.
    async fn cancel(&self, job: &JobRecord, wait: CleanupWait) -> Result<(), BackendError>;

    /// Remove what the backend holds for the job (process, Kubernetes
    /// objects, their Secret), stopping it first if it still runs. MUST be
    /// idempotent; once it returned `Ok`, `status` MUST be `NOT_FOUND`.
    ///
    /// It MUST return within about `wait.timeout` (plus one request to the
    /// system under it): a deletion not confirmed by then (a pod still
    /// terminating, a finalizer not yet removed) is
    /// [`BackendError::NotConfirmed`]. The job still stops; where the
    /// system under the backend carries the deletion out by itself
    /// (Kubernetes) `status` becomes `NOT_FOUND` once it is done, elsewhere
    /// (the local backend) a later `cleanup` finishes it. Where it polls
    /// for the deletion it pauses at most `wait.poll_interval` between
    /// checks.
    async fn cleanup(&self, job: &JobRecord, wait: CleanupWait) -> Result<(), BackendError>;

    /// The ids of the jobs this backend holds.
    async fn list(&self) -> Result<Vec<JobId>, BackendError>;

    /// Open one connection to TCP port `port` of the job's leader host, as
    /// the job sees the port (the debug port of a debug job: `spec.debug.port`,
    /// which a backend MAY map to another port of its own, as the local
    /// backend does since its jobs share the host): what `kubectl
    /// port-forward` does, one stream per call.
    ///
    /// - A job that is not running (queued, pending, ended, unknown) MUST
    ///   be refused with [`BackendError::InvalidInput`] saying so (an
    ///   unknown job: [`BackendError::NotFound`]); nothing waits for it to
    ///   start.
    /// - Nothing listening on the port MUST be
    ///   [`BackendError::Unavailable`] (the same call may succeed once the
    ///   job listens), at this call or as an error of the stream's first
    ///   read or write.
    /// - Bytes written to the stream reach the job's port in order, and the
    ///   job's bytes come back in order; shutting down the write half ends
    ///   what the job reads.
    ///
    /// Without [`BackendCapabilities::port_forward`] it MUST be
    /// [`BackendError::Unsupported`].
    async fn port_forward(&self, job: &JobRecord, port: u16) -> Result<PortStream, BackendError>;

    /// A feed of hints that a job of this backend may have changed state,
    /// so that whoever waits on jobs reads their states at once instead of
    /// at its next poll; `None` when the backend has no such events (it is
    /// polled).
    ///
    /// - The feed MUST be armed when this returns: when a job ends after
    ///   this call, an item follows soon after its new state can be read.
    /// - An item MAY come when nothing changed, and several changes MAY come
    ///   as one item.
    ///
    /// Waiters keep polling, less often: a late or lost item delays them to
    /// their next poll, no more. Required: a wrapper must not lose it.
    fn changes(&self) -> Option<ChangeFeed>;
}

/// Errors of the [`BackendRegistry`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// No backend of that name is registered.
    #[error("unknown backend '{name}' (registered: {})", registered.join(", "))]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names that are registered.
        registered: Vec<String>,
    },
    /// A multi-host accelerator was asked for and no backend can run it.
    #[error("accelerator '{accelerator}' spans {hosts} hosts; no registered backend runs multi-host jobs (registered: {})", registered.join(", "))]
    NoMultiHost {
        /// The accelerator.
        accelerator: String,
        /// Its number of hosts.
        hosts: u32,
        /// The names that are registered.
        registered: Vec<String>,
    },
}

/// The backends an embedding program offers, by name, and the rule that
/// picks one when a job names none.
///
/// ```
/// use kinetic_core::ports::BackendRegistry;
/// let registry = BackendRegistry::new("local");
/// assert!(registry.names().is_empty());
/// ```
#[derive(Debug, Clone)]
pub struct BackendRegistry {
    backends: BTreeMap<String, Arc<dyn Backend>>,
    default: String,
}

impl BackendRegistry {
    /// An empty registry whose default backend (for single-host jobs that
    /// name none) is `default`.
    pub fn new(default: &str) -> Self {
        Self {
            backends: BTreeMap::new(),
            default: default.to_owned(),
        }
    }

    /// Register `backend` under its own name, replacing any of that name.
    pub fn register(&mut self, backend: Arc<dyn Backend>) -> &mut Self {
        self.backends.insert(backend.name().to_owned(), backend);
        self
    }

    /// The name of the backend for single-host jobs that name none.
    pub fn default_name(&self) -> &str {
        &self.default
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.backends.keys().cloned().collect()
    }

    /// The [`Backend::changes`] of every registered backend, as one feed;
    /// `None` when none has any.
    pub fn changes(&self) -> Option<ChangeFeed> {
        let feeds: Vec<ChangeFeed> = self.backends.values().filter_map(|b| b.changes()).collect();
        if feeds.is_empty() {
            return None;
        }
        Some(Box::pin(futures_util::stream::select_all(feeds)))
    }

    /// The backend registered as `name`.
    pub fn get(&self, name: &str) -> Result<Arc<dyn Backend>, RegistryError> {
        self.backends
            .get(name)
            .cloned()
            .ok_or_else(|| RegistryError::Unknown {
                name: name.to_owned(),
                registered: self.names(),
            })
    }

    /// Choose the backend for a job: the one it names; else, for a
    /// multi-host accelerator, `pathways` if registered, else any backend
    /// that runs multi-host jobs; else the default.
    pub fn choose(
        &self,
        named: Option<&str>,
        accelerator: &AcceleratorSpec,
    ) -> Result<Arc<dyn Backend>, RegistryError> {
        if let Some(name) = named {
            return self.get(name);
        }
        let hosts = accelerator.num_hosts();
        if hosts > 1 {
            if let Some(b) = self.backends.get("pathways") {
                return Ok(b.clone());
            }
            return self
                .backends
                .values()
                .find(|b| b.capabilities().multi_host && b.capabilities().max_hosts >= hosts)
                .cloned()
                .ok_or_else(|| RegistryError::NoMultiHost {
                    accelerator: accelerator.to_string(),
                    hosts,
                    registered: self.names(),
                });
        }
        self.get(&self.default)
    }
}
