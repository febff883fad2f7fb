//! # kinetic-backend-local
//!
//! The embedded default [`Backend`] of Kinetic for Rust: each job runs as a
//! local child process of the real runner (`kinetic_runner.py`, the same
//! program the pods run) on the host's `python3`, through the same runner
//! protocol and store as the cloud backends.
//!
//! - Each job has a directory `{root}/jobs/{job_id}/` holding its state,
//!   its output log and its workspace; state lives there, not in memory, so
//!   `status`, `logs`, `result` and `cancel` work from any process.
//! - Each job is one interpreter, started in a process group of its own:
//!   a small supervisor (`supervisor.py`, standard library) waits for one
//!   of `max_concurrent` slots (file locks under `{root}/slots/`, so the
//!   limit holds across processes and a queued job needs no one to stay
//!   alive to start), then forks: the copy runs the runner (compiled once
//!   into `{root}/bin/`, not at every start) with its output appended to
//!   `output.log`, and the supervisor records its exit code the moment it
//!   ends. The interpreter is resolved once per backend: the first
//!   `python3` on `PATH`, or, when that is a version manager's shim, the
//!   interpreter the shim starts.
//! - A job's end is an event: the supervisor touches `{root}/slots/ended`,
//!   which [`Backend::changes`] watches (inotify), and a followed log ends
//!   when the exit code lands, not at a poll.
//! - `cancel` kills the whole process group; a job whose processes vanished
//!   without an exit code (a reboot, a `kill -9`) is reported `FAILED` with
//!   that reason, never `RUNNING` forever.
//! - Logs outlive the job's directory: the runner copies them to the store
//!   while it runs (`{job_id}/logs/host-0/…`, read by the engine once this
//!   backend has none); when it copied nothing (it never started), the
//!   backend copies the whole log to `{job_id}/logs/output.log` once the
//!   job ends.
//! - A batch child is also named by an empty file
//!   `{root}/groups/{group_id}/{job_id}`, so a batch's status is one
//!   directory listing ([`Backend::group_status`]).
//! - A job's environment is what a pod's would be, not the client's: the
//!   host variables of [`HOST_ENV`] (where programs and the locale are, the
//!   proxy), the variables a pod's spec sets (`KERAS_BACKEND`,
//!   `JAX_PLATFORMS`, `JOB_ID`, `GCS_BUCKET`), its host's address
//!   (`KINETIC_NODE_IPS=127.0.0.1`), [`LocalOptions::runner_env`], and the
//!   job's captured variables, which win. Captured values go into
//!   the child's environment only.
//! - A run deadline ([`Deadlines::run`](kinetic_core::ports::Deadlines)) is
//!   enforced by the supervisor: past it the job's whole process group is
//!   killed and the job is `FAILED` with `DeadlineExceeded`.
//! - A job's state is read from what is on disk: when its processes are
//!   gone without an exit code (the supervisor was killed), the result the
//!   runner wrote decides.
//! - FUSE data (`fuse=True`) in the store's data cache is bind-mounted
//!   read-only where the runner looks for it, in a user and mount
//!   namespace of the job (`unshare --map-root-user --mount`), with no
//!   copy. The kernel refuses every write under such a mount (`EROFS`),
//!   root's included; only a job that remounts its own namespace could
//!   undo it, and no one outside the job sees the mount. `gs://` FUSE data
//!   (no GCS FUSE driver here) and a host that refuses user namespaces are
//!   errors at submit.
//! - No image is built: jobs run on the host. A job that asks for a GPU or
//!   TPU the host does not have is refused before anything is uploaded, with
//!   a message saying so.
//! - GPUs are a resource: a job asking for N GPUs is given N whole devices
//!   of this host (`CUDA_VISIBLE_DEVICES`, and `NVIDIA_VISIBLE_DEVICES`
//!   where the host sets it), locked under `{root}/slots/` like the job
//!   slots, so jobs of every process sharing the root never share a
//!   device; it waits `PENDING` ("waiting for 1 GPU of 2 (2 held by
//!   job-…)") while they are taken. A CPU job sees none
//!   (`CUDA_VISIBLE_DEVICES=""`). The host's GPUs are those `nvidia-smi -L`
//!   lists, or `0..N` for [`LocalOptions::gpus`] (`KINETIC_LOCAL_GPUS`).

mod gpus;
mod readonly;
mod state;
mod watch;

use std::collections::HashMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use kinetic_core::accelerators::{AcceleratorSpec, Category};
use kinetic_core::advice::{Advice, Knob};
use kinetic_core::debug;
use kinetic_core::ids::{GroupId, JobId};
use kinetic_core::ports::{
    Backend, BackendCapabilities, BackendError, ChangeFeed, CleanupWait, GroupQuery, GroupStatus,
    LogOptions, LogStream, ObjectStore, ObjectStoreExt, PortStream, PreparedJob, PutOptions,
    WorkerPool, tail_lines,
};
use kinetic_core::protocol::{RUNNER_FILE_NAME, RUNNER_SOURCE, runner_digest};
use kinetic_core::record::JobRecord;
use kinetic_core::settings::vars;
use kinetic_core::status::{JobState, JobStatus, StatusReason};

use crate::state::{JobDir, LivePools, Observed};

/// The supervisor program, written next to the runner in the local root.
const SUPERVISOR_SOURCE: &str = include_str!("supervisor.py");

/// The file under `{root}/slots/` every supervisor opens for writing and
/// closes when its job started and when it ended: one inotify watch on it
/// tells a waiter to look again.
const ENDED_FILE: &str = "ended";

/// How long `cancel` waits after SIGTERM before SIGKILL.
const CANCEL_GRACE: Duration = Duration::from_secs(3);

/// Variables of this host that every local job receives from the process
/// that submits it, as a pod receives its image's: where programs are
/// (`PATH`, pyenv's interpreter choice), the home and temporary directories,
/// the locale, the time zone, the proxy and the metadata server (which
/// gives the runner its credentials). Nothing else of the submitting
/// process's environment reaches a job unless it is captured (`--env`).
pub const HOST_ENV: [&str; 16] = [
    "PATH",
    "HOME",
    "TMPDIR",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "PYENV_VERSION",
    "PYENV_ROOT",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "GCE_METADATA_HOST",
];

/// Settings of a [`LocalBackend`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LocalOptions {
    /// State directory (default `~/.kinetic/local`).
    pub root: PathBuf,
    /// The Python interpreter (default `python3`).
    pub python: PathBuf,
    /// Jobs running at once (default: the number of cores).
    pub max_concurrent: usize,
    /// GPUs the host has, handed out as devices `0..n` (default: those
    /// `nvidia-smi -L` lists, counted when a job first asks for one).
    pub gpus: Option<u32>,
    /// Extra environment for every runner, on top of the base (the
    /// [`HOST_ENV`] variables and a pod's): non-secret settings such as
    /// `KINETIC_GCS_ENDPOINT` for a store on a fake GCS server. A job's
    /// captured variables win.
    pub runner_env: Vec<(String, String)>,
}

impl LocalOptions {
    /// Options with the state directory `root` and every other default.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            python: PathBuf::from("python3"),
            max_concurrent: std::thread::available_parallelism()
                .map_or(1, std::num::NonZeroUsize::get),
            gpus: None,
            runner_env: Vec::new(),
        }
    }

    /// Use this interpreter.
    pub fn python(mut self, python: impl Into<PathBuf>) -> Self {
        self.python = python.into();
        self
    }

    /// Run at most `n` jobs at once (at least 1, at most
    /// [`MAX_LOCAL_CONCURRENT`](kinetic_core::settings::MAX_LOCAL_CONCURRENT)).
    pub fn max_concurrent(mut self, n: usize) -> Self {
        self.max_concurrent = n.clamp(1, kinetic_core::settings::MAX_LOCAL_CONCURRENT);
        self
    }

    /// Give every runner `name=value` in its environment (not for secrets:
    /// those travel as captured env of the job).
    pub fn runner_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.runner_env.push((name.into(), value.into()));
        self
    }

    /// Declare how many GPUs the host has (devices `0..gpus`), instead of
    /// asking `nvidia-smi`; `0` for none.
    pub fn gpus(mut self, gpus: u32) -> Self {
        self.gpus = Some(gpus);
        self
    }
}

/// The local backend.
///
/// It runs on a tokio runtime with IO enabled (`#[tokio::main]`, or
/// `Builder::enable_all`/`enable_io`): it watches its jobs' files with
/// inotify to notice a job's end and follow its log the moment they change.
#[derive(Debug)]
pub struct LocalBackend {
    options: LocalOptions,
    store: Arc<dyn ObjectStore>,
    runner: PathBuf,
    supervisor: PathBuf,
    /// GPUs on this host: as declared, else counted when a job first asks
    /// for one (a CPU job never starts `nvidia-smi`).
    gpus: OnceLock<gpus::HostGpus>,
    /// The interpreter jobs start on, resolved at the first submit.
    python: OnceLock<PathBuf>,
    /// Per group, the states of its children that ended for good (their
    /// `exit_code` recorded, their log archived): `group_status` reads a
    /// child's files until it ended, not at every poll after, so a poll
    /// costs what the batch has running, not what it has run.
    ended: std::sync::Mutex<HashMap<GroupId, HashMap<JobId, JobState>>>,
}

impl LocalBackend {
    /// A backend keeping its state under `options.root` and copying logs to
    /// `store` (the engine's jobs store). Installs the runner and supervisor
    /// programs under the root.
    ///
    /// # Errors
    /// [`BackendError::Unsupported`] when the runner, a separate process,
    /// could not read `store` by its URIs (an in-process `memory://`
    /// store): only `file://` and `gs://` stores are accepted. Other
    /// errors when the root cannot be written.
    pub fn new(options: LocalOptions, store: Arc<dyn ObjectStore>) -> Result<Self, BackendError> {
        check_store(store.as_ref())?;
        let bin = options.root.join("bin");
        std::fs::create_dir_all(&bin).map_err(|e| io_err(&bin, &e))?;
        std::fs::create_dir_all(options.root.join("jobs"))
            .map_err(|e| io_err(&options.root, &e))?;
        let digest = &runner_digest()[..12];
        let runner = bin.join(format!(
            "{}-{digest}.py",
            RUNNER_FILE_NAME.trim_end_matches(".py")
        ));
        install(&runner, RUNNER_SOURCE)?;
        let supervisor = bin.join(format!(
            "supervisor-{}.py",
            &hex_digest(SUPERVISOR_SOURCE.as_bytes())[..12]
        ));
        install(&supervisor, SUPERVISOR_SOURCE)?;
        let slots = options.root.join("slots");
        std::fs::create_dir_all(&slots).map_err(|e| io_err(&slots, &e))?;
        let ended = slots.join(ENDED_FILE);
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&ended)
            .map_err(|e| io_err(&ended, &e))?;
        let gpus = OnceLock::new();
        if let Some(declared) = options.gpus {
            let _ = gpus.set(gpus::HostGpus::declared(declared));
        }
        Ok(Self {
            options,
            store,
            runner,
            supervisor,
            gpus,
            python: OnceLock::new(),
            ended: std::sync::Mutex::new(HashMap::new()),
        })
    }

    /// The GPUs a job on `accelerator` takes and the host's devices it
    /// takes them from; `None` for a job without GPUs. The host's GPUs are
    /// counted at the first request.
    ///
    /// # Errors
    /// [`BackendError::Unsupported`] when the host has fewer GPUs than
    /// asked for, or they cannot be counted.
    fn gpu_request(
        &self,
        accelerator: &AcceleratorSpec,
    ) -> Result<Option<(u32, Vec<u32>)>, BackendError> {
        if accelerator.category() != Category::Gpu {
            return Ok(None);
        }
        let wanted = accelerator.count().unwrap_or(1);
        let host = self.gpus.get_or_init(gpus::detect);
        match host.refusal(wanted, &accelerator.to_string()) {
            Some((why, advice)) => Err(BackendError::unsupported_with(why, advice)),
            None => Ok(Some((wanted, host.ids().to_vec()))),
        }
    }

    /// The state directory.
    pub fn root(&self) -> &Path {
        &self.options.root
    }

    fn job_dir(&self, job_id: &JobId) -> JobDir {
        JobDir::new(self.options.root.join("jobs").join(job_id.as_str()))
    }

    fn group_dir(&self, group_id: &GroupId) -> PathBuf {
        self.options.root.join("groups").join(group_id.as_str())
    }

    /// Name a batch child in its group's directory (idempotent).
    fn join_group(&self, record: &JobRecord) -> Result<(), BackendError> {
        let Some(group) = &record.group_id else {
            return Ok(());
        };
        let dir = self.group_dir(group);
        std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, &e))?;
        let entry = dir.join(record.job_id.as_str());
        state::link_empty(&self.options.root.join("jobs"), &entry).map_err(|e| io_err(&entry, &e))
    }

    /// The state of a job from its directory, copying its log to the store
    /// once it ended.
    async fn observe_state(&self, job_id: &JobId, dir: &JobDir, pools: &LivePools) -> JobState {
        let state = match dir.observe_in(pools) {
            Observed::Missing => JobState::new(JobStatus::NotFound),
            Observed::Queued => {
                JobState::new(JobStatus::Pending).with_reason(self.queued_reason(job_id, dir))
            }
            Observed::Running => JobState::new(JobStatus::Running),
            Observed::Exited(0) => JobState::new(JobStatus::Succeeded),
            Observed::Exited(code) => {
                JobState::new(JobStatus::Failed).with_reason(StatusReason::ExitCode { code })
            }
            Observed::Cancelled => {
                JobState::new(JobStatus::Failed).with_reason(StatusReason::Cancelled)
            }
            Observed::DeadlineExceeded => {
                JobState::new(JobStatus::Failed).with_reason(StatusReason::DeadlineExceeded)
            }
            Observed::Vanished => self.vanished_state(job_id).await,
        };
        let state = with_attempts(state, dir);
        if state.status.is_terminal() && state.status != JobStatus::NotFound {
            self.archive_logs(job_id, dir).await;
        }
        state
    }

    /// Why a queued job waits: for GPUs other jobs hold (what its
    /// supervisor's waiting file says, with the jobs named in the devices'
    /// lock files that still run), else for a slot.
    fn queued_reason(&self, job_id: &JobId, dir: &JobDir) -> StatusReason {
        let Some((wanted, ids)) = dir
            .read(gpus::WAITING_FILE)
            .as_deref()
            .and_then(gpus::parse_waiting)
        else {
            return StatusReason::WaitingForResources;
        };
        let slots = self.options.root.join("slots");
        gpus::waiting_reason(wanted, &ids, |id| {
            let holder = gpus::last_holder(&slots, id)?;
            let holder_id: JobId = holder.parse().ok()?;
            let alive = holder_id != *job_id
                && matches!(
                    self.job_dir(&holder_id).observe(),
                    Observed::Queued | Observed::Running
                );
            alive.then_some(holder)
        })
    }

    /// The state of a job whose processes are gone without an exit code
    /// (the supervisor was killed, the machine restarted): what the runner
    /// left in the store decides. A result it wrote is the outcome it
    /// exited with (0 after a success, 1 after a failure); no result means
    /// the job died with its processes.
    async fn vanished_state(&self, job_id: &JobId) -> JobState {
        let path = kinetic_core::layout::result(job_id);
        let written = match self.store.get_if_exists(&path).await {
            Ok(Some(bytes)) => kinetic_core::protocol::RunnerResult::from_json(&bytes)
                .ok()
                .map(|r| r.success),
            Ok(None) => None,
            Err(e) => {
                return JobState::new(JobStatus::Failed).with_reason(StatusReason::BackendError {
                    message: format!("the job's local processes ended without recording an exit code, and its result could not be read: {e}"),
                });
            }
        };
        match written {
            Some(true) => JobState::new(JobStatus::Succeeded),
            Some(false) => JobState::new(JobStatus::Failed).with_reason(StatusReason::ExitCode { code: 1 }),
            None => JobState::new(JobStatus::Failed).with_reason(StatusReason::BackendError {
                message: "the job's local processes ended without recording an exit code or writing a result (killed, or the machine restarted)".into(),
            }),
        }
    }

    /// Copy the job's log to the store once it ended (idempotent), as the
    /// one last chunk a runner would have copied (`{job_id}/logs/host-0/
    /// 00000000.end`, which the engine reads once the job directory is
    /// gone), unless chunks are there already. Local runners leave the copy
    /// to this (`--log-copy off`): their output is already in the job's
    /// directory, and copying it while they run would cost every job a pipe
    /// and threads.
    async fn archive_logs(&self, job_id: &JobId, dir: &JobDir) {
        if dir.logs_archived() {
            return;
        }
        let chunks = kinetic_core::layout::log_chunks(job_id, 0);
        if let Ok(found) = self.store.list(Some(&chunks)).await
            && found
                .iter()
                .any(|meta| kinetic_core::layout::log_chunk(&chunks, &meta.path).is_some())
        {
            dir.mark_logs_archived();
            return;
        }
        let path = archived_log(job_id);
        let log = dir.log_path();
        let result = if log.exists() {
            self.store
                .put_file(&path, &log, PutOptions::default())
                .await
                .map(|_| ())
        } else {
            self.store
                .put(&path, bytes::Bytes::new(), PutOptions::default())
                .await
        };
        match result {
            Ok(()) => dir.mark_logs_archived(),
            Err(e) => {
                tracing::warn!(job_id = %job_id, "could not copy the job's log to the store: {e}")
            }
        }
    }

    /// The log text: from the job directory, or from the store copy once the
    /// directory is gone.
    async fn log_text(&self, record: &JobRecord) -> Result<String, BackendError> {
        let dir = self.job_dir(&record.job_id);
        if dir.exists() {
            return Ok(dir.read_log());
        }
        // The archive, else a whole-log copy an older version wrote.
        let mut found = self
            .store
            .get(&archived_log(&record.job_id), Default::default())
            .await;
        if found.as_ref().is_err_and(|e| e.is_not_found()) {
            let path = kinetic_core::layout::log(&record.job_id);
            found = self.store.get(&path, Default::default()).await;
        }
        match found {
            Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
            Err(e) if e.is_not_found() => Err(BackendError::not_found(
                self.name().to_owned(),
                record.job_id.to_string(),
            )),
            Err(e) => Err(BackendError::from_store(
                "reading the job's log from the store",
                e,
            )),
        }
    }
}

impl LocalBackend {
    /// Queue a claimed batch child on its batch's worker pool and make sure
    /// the pool has its workers (see `supervisor.py`, worker mode): the job
    /// keeps its own directory, log, attempts and exit code; only its
    /// process is a fork of a worker instead of a supervisor of its own.
    fn submit_pooled(
        &self,
        job: &PreparedJob,
        dir: &JobDir,
        group: &GroupId,
        pool: WorkerPool,
        python: &Path,
    ) -> Result<(), BackendError> {
        let env = job_env(job, &self.options.runner_env, host_nvidia_devices());
        let pool_dir = self.pool_dir(group, &env)?;
        // Held until the job is queued and the pool has its worker: the
        // last worker to leave removes an idle pool's directory only
        // under this lock taken exclusively (`supervisor.py`, `leave_pool`).
        let _pools = lock_pools(&self.options.root.join("pools"))?;
        let queue = pool_dir.join("queue");
        std::fs::create_dir_all(&queue).map_err(|e| io_err(&queue, &e))?;
        let launch = serde_json::json!({
            "pool": pool_dir.to_string_lossy(),
            "args": [
                "--spec", job.spec_uri,
                "--workdir", dir.work_path().to_string_lossy(),
                "--mount-root", dir.mounts_path().to_string_lossy(),
                "--log-copy", "off",
            ],
            "retries": job.budgets.retries,
            "run_deadline": job.deadlines.run.map(|d| d.as_secs_f64()),
        });
        dir.record_pooled(&launch)
            .map_err(|e| io_err(dir.path(), &e))?;
        // Oldest input first: retries of early inputs before later inputs.
        let entry = queue.join(format!(
            "{:010}.{}",
            job.record.group_index.unwrap_or(0),
            job.record.job_id
        ));
        state::link_empty(&self.options.root.join("jobs"), &entry)
            .map_err(|e| io_err(&entry, &e))?;
        wake_a_worker(&pool_dir);
        // After the entry is there: a worker leaving marks itself first and
        // looks at the queue after, so either it sees this job or this
        // sees it leaving and starts another.
        let max = self.options.max_concurrent;
        let workers = pool.max_workers.unwrap_or(max).clamp(1, max);
        let live = state::live_workers(&pool_dir);
        if live.iter().filter(|(_, leaving)| !leaving).count() < workers {
            self.start_worker(&pool_dir, workers, &env, python)?;
        }
        Ok(())
    }

    /// Keep in the job's directory the runs its batch input made before
    /// this job (its spec's `attempt_offset`), so that its attempts are
    /// numbered on from them as `KINETIC_ATTEMPT` is (the runner adds the
    /// offset to the supervisor's count): a retried input's child reads
    /// attempt 2, not 1. Only a child past its input's first attempt (its
    /// id says so) has its spec read.
    async fn note_earlier_runs(&self, job: &PreparedJob, dir: &JobDir) -> Result<(), BackendError> {
        let Some(group) = &job.record.group_id else {
            return Ok(());
        };
        let retry = kinetic_core::batch::child_position(group, &job.record.job_id).is_some_and(
            |(index, attempt)| attempt > 1 && job.record.group_index == u64::try_from(index).ok(),
        );
        if !retry {
            return Ok(());
        }
        let path = kinetic_core::layout::spec(&job.record.job_id);
        let bytes = self
            .store
            .get(&path, Default::default())
            .await
            .map_err(|e| BackendError::from_store("reading the batch child's spec", e))?;
        let offset = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|spec| spec.get("attempt_offset")?.as_u64())
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0);
        dir.record_earlier_runs(offset)
            .map_err(|e| io_err(dir.path(), &e))
    }

    /// `{root}/pools/{group_id}-{digest}`: the pool of a batch's children
    /// whose environment is `env` (its values are hashed with a salt kept
    /// under the root, so no value can be guessed from the name), so that
    /// a batch resumed with other values never runs on workers holding the
    /// old ones.
    fn pool_dir(&self, group: &GroupId, env: &[(String, String)]) -> Result<PathBuf, BackendError> {
        let salt_path = self.options.root.join("bin").join("pool-salt");
        let salt = match std::fs::read(&salt_path) {
            Ok(salt) if salt.len() >= 16 => salt,
            _ => {
                let mut salt = vec![0u8; 32];
                std::fs::File::open("/dev/urandom")
                    .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut salt))
                    .map_err(|e| io_err(Path::new("/dev/urandom"), &e))?;
                // First writer wins; every submitter then reads that one.
                let tmp = salt_path.with_extension(format!("tmp-{}", std::process::id()));
                std::fs::write(&tmp, &salt).map_err(|e| io_err(&tmp, &e))?;
                if std::fs::hard_link(&tmp, &salt_path).is_err() {
                    let _ = std::fs::remove_file(&tmp);
                    std::fs::read(&salt_path).map_err(|e| io_err(&salt_path, &e))?
                } else {
                    let _ = std::fs::remove_file(&tmp);
                    salt
                }
            }
        };
        let mut text = salt;
        for (name, value) in env {
            // Each child's own id is set in its fork.
            if name != "JOB_ID" {
                text.extend_from_slice(format!("{name}={value}\0").as_bytes());
            }
        }
        let digest = hex_digest(&text);
        Ok(self
            .options
            .root
            .join("pools")
            .join(format!("{group}-{}", &digest[..16])))
    }

    /// Start one worker of the pool at `pool_dir` (at most `workers` hold
    /// its locks; one too many exits at once) and name it under
    /// `workers/` before returning, so the pool counts as served.
    fn start_worker(
        &self,
        pool_dir: &Path,
        workers: usize,
        env: &[(String, String)],
        python: &Path,
    ) -> Result<(), BackendError> {
        let registry = pool_dir.join("workers");
        std::fs::create_dir_all(&registry).map_err(|e| io_err(&registry, &e))?;
        let log_path = pool_dir.join("worker.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| io_err(&log_path, &e))?;
        let mut cmd = Command::new(python);
        cmd.arg("-u")
            .arg(&self.supervisor)
            .arg("--pool")
            .arg(pool_dir)
            .arg("--jobs-dir")
            .arg(self.options.root.join("jobs"))
            .arg("--slots-dir")
            .arg(self.options.root.join("slots"))
            .arg("--max-concurrent")
            .arg(self.options.max_concurrent.to_string())
            .arg("--workers")
            .arg(workers.to_string())
            .arg("--grace")
            .arg(CANCEL_GRACE.as_secs_f64().to_string())
            .arg("--runner")
            .arg(&self.runner)
            .current_dir(&self.options.root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .process_group(0)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)));
        let mut child = cmd.spawn().map_err(|e| BackendError::unsupported(format!(
                "the local backend could not start '{}': {e} (it needs a Python 3.9+ interpreter on this host)",
                python.display()
            )).with_source(e))?;
        let pid = child.id();
        let name = format!("{pid}-{}", state::start_time_text(pid));
        let entry = registry.join(name);
        std::fs::write(&entry, b"").map_err(|e| io_err(&entry, &e))?;
        std::thread::Builder::new()
            .name("kinetic-local-reaper".into())
            .spawn(move || {
                let _ = child.wait();
            })
            .map_err(|e| {
                BackendError::other(format!("cannot start a reaper thread: {e}")).with_source(e)
            })?;
        Ok(())
    }
}

/// A shared flock on the directory of pools (`{root}/pools`, made if
/// missing), released when dropped: while a submitter holds it, no worker
/// removes a pool's directory (workers take it exclusively to do so).
fn lock_pools(pools: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, BackendError> {
    std::fs::create_dir_all(pools).map_err(|e| io_err(pools, &e))?;
    let dir = std::fs::File::open(pools).map_err(|e| io_err(pools, &e))?;
    nix::fcntl::Flock::lock(dir, nix::fcntl::FlockArg::LockShared).map_err(|(_, e)| {
        let e = std::io::Error::from(e);
        io_err(pools, &e)
    })
}

/// Write a byte to the pool's `wake` FIFO, which wakes one idle worker at
/// once. Nothing happens when no worker reads it (no FIFO yet, or no
/// reader: the workers then look at the queue on their own).
fn wake_a_worker(pool_dir: &Path) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Ok(mut fifo) = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(pool_dir.join("wake"))
    {
        let _ = fifo.write(b".");
    }
}

/// The variable that tells the runner its job's host addresses.
const NODE_IPS_ENV: &str = "KINETIC_NODE_IPS";

/// The address of a local job's one host (`KINETIC_NODE_IPS`): this host,
/// as the job reaches it.
pub const LOCAL_NODE_IP: &str = "127.0.0.1";

/// A job's whole environment, in the order later entries win: the host's
/// [`HOST_ENV`] variables, what a pod's spec sets, its host's address
/// ([`LOCAL_NODE_IP`] in `KINETIC_NODE_IPS`), `runner_env`, the job's
/// captured variables, then the devices it may see: none for a job
/// without GPUs (`CUDA_VISIBLE_DEVICES=""`, and `NVIDIA_VISIBLE_DEVICES=none`
/// where the host sets that, `nvidia_devices`); a GPU job's are set by its
/// supervisor once it holds them, over whatever is here.
fn job_env(
    job: &PreparedJob,
    runner_env: &[(String, String)],
    nvidia_devices: Option<String>,
) -> Vec<(String, String)> {
    let mut env = host_env();
    let record = &job.record;
    env.extend([
        ("KERAS_BACKEND".into(), "jax".into()),
        (
            "JAX_PLATFORMS".into(),
            job.accelerator.jax_platform().into(),
        ),
        ("JOB_ID".into(), record.job_id.to_string()),
        ("GCS_BUCKET".into(), record.bucket_name.clone()),
    ]);
    // The job's one host is this one, as a pod's is its own address.
    env.push((NODE_IPS_ENV.into(), LOCAL_NODE_IP.into()));
    env.extend(runner_env.iter().cloned());
    env.extend(
        job.env
            .iter()
            .map(|(name, value)| (name.as_str().to_owned(), value.expose().to_owned())),
    );
    if job.accelerator.category() == Category::Gpu {
        // The supervisor replaces it with the job's devices.
        env.extend(nvidia_devices.map(|value| (NVIDIA_VISIBLE_DEVICES.to_owned(), value)));
    } else {
        env.push((CUDA_VISIBLE_DEVICES.to_owned(), String::new()));
        if nvidia_devices.is_some() {
            env.push((NVIDIA_VISIBLE_DEVICES.to_owned(), "none".to_owned()));
        }
    }
    env
}

/// The devices CUDA shows a process.
const CUDA_VISIBLE_DEVICES: &str = "CUDA_VISIBLE_DEVICES";

/// The devices the NVIDIA container runtime gave this host's container.
const NVIDIA_VISIBLE_DEVICES: &str = "NVIDIA_VISIBLE_DEVICES";

/// This process's `NVIDIA_VISIBLE_DEVICES`: where it is set (a container
/// given GPUs), local jobs get it too, naming only their own devices.
fn host_nvidia_devices() -> Option<String> {
    std::env::var(NVIDIA_VISIBLE_DEVICES).ok()
}

/// A debug job's environment: jobs share the host's ports, so the
/// debugger listens on a free loopback port this backend picks and records
/// as the job's debug port ([`Backend::port_forward`] connects to it).
fn debug_env(dir: &JobDir) -> Result<Vec<(String, String)>, BackendError> {
    let host_port = std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map_err(|e| {
            BackendError::other(format!(
                "local backend: cannot find a free port for the debugger: {e}"
            ))
            .with_source(e)
        })?
        .port();
    dir.record_port(debug::DEFAULT_PORT, host_port)
        .map_err(|e| io_err(dir.path(), &e))?;
    let mut env: Vec<(String, String)> = debug::pod_env(host_port, debug::DEFAULT_WAIT_TIMEOUT)
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect();
    env.push((debug::HOST_ENV.to_owned(), "127.0.0.1".to_owned()));
    Ok(env)
}

/// The [`HOST_ENV`] variables this process has.
fn host_env() -> Vec<(String, String)> {
    HOST_ENV
        .iter()
        .filter_map(|name| Some((name.to_string(), std::env::var(name).ok()?)))
        .collect()
}

/// Refuses a store whose URIs a runner process cannot open: the runner
/// reads `gs://` and `file://` URIs, and anything else (an in-process
/// `memory://` store) would make every job fail after its upload.
fn check_store(store: &dyn ObjectStore) -> Result<(), BackendError> {
    let probe = kinetic_core::ports::ObjectPath::parse("probe")
        .map_err(|e| BackendError::other(e.to_string()))?;
    let uri = store.uri(&probe);
    if uri.starts_with("gs://") || uri.starts_with("file://") {
        return Ok(());
    }
    let scheme = uri.split_once(':').map_or(uri.as_str(), |(s, _)| s);
    Err(BackendError::unsupported(format!(
        "the local backend cannot use a {scheme}:// store: its jobs run as separate processes that read their files from the store, and only this process can see a {scheme}:// store; use a directory (file:///absolute/dir) or a bucket (gs://bucket)"
    )))
}

/// The interpreter to start jobs on: `python` when it names a path, else
/// the first executable of that name on the jobs' `PATH`; and when that
/// file is a script (a version manager's shim, which would start a shell
/// and look the version up for every job), the interpreter it starts, as
/// that interpreter reports it (`sys.executable`, asked once). Anything
/// that cannot be resolved is returned as given, and starting it says why.
fn resolve_python(python: &Path, env: &[(String, String)], cwd: &Path) -> PathBuf {
    let found = if python.components().count() > 1 {
        Some(python.to_owned())
    } else {
        env.iter()
            .rev()
            .find(|(name, _)| name == "PATH")
            .and_then(|(_, path)| {
                std::env::split_paths(path)
                    .map(|dir| dir.join(python))
                    .find(|candidate| is_executable(candidate))
            })
    };
    let Some(found) = found else {
        return python.to_owned();
    };
    let mut head = [0u8; 2];
    let script = std::fs::File::open(&found)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok()
        && &head == b"#!";
    if !script {
        return found;
    }
    let asked = Command::new(&found)
        .args(["-c", "import sys; print(sys.executable)"])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    match asked {
        Ok(out) if out.status.success() => {
            let real = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            if real.is_absolute() && is_executable(&real) {
                real
            } else {
                found
            }
        }
        _ => found,
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn hex_digest(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// Write `text` at `path` unless an identical file is there (atomically).
fn install(path: &Path, text: &str) -> Result<(), BackendError> {
    if std::fs::read_to_string(path).is_ok_and(|t| t == text) {
        return Ok(());
    }
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| io_err(&tmp, &e))?;
    std::fs::rename(&tmp, path).map_err(|e| io_err(path, &e))
}

fn io_err(path: &Path, e: &std::io::Error) -> BackendError {
    BackendError::other(format!("local backend: {}: {e}", path.display()))
}

/// What to set for a job this host cannot serve (`what`: "TPUs", "GPUs"):
/// the CPU to run here, or a cluster backend (`backends`) with the project
/// and cluster that name the cluster, which `kinetic up` creates.
pub(crate) fn elsewhere(what: &str, backends: &[&str]) -> Advice {
    Advice::new()
        .text("use ")
        .set(Knob::Accelerator, "cpu")
        .text(format!(" to run here; or, for {what}, a cluster backend ("))
        .set_any(Knob::Backend, backends.iter().copied())
        .text(") with the cluster's project and cluster set (")
        .name(Knob::Project)
        .text(" and ")
        .name(Knob::Cluster)
        .text(format!(
            ", {} and {}, or a profile from `kinetic profile create`): with a project set, {what} go to the cluster by themselves; `kinetic up` creates the cluster",
            vars::PROJECT,
            vars::CLUSTER
        ))
}

/// Where [`LocalBackend::archive_logs`] copies a job's log: host 0's one
/// and last chunk (`{job_id}/logs/host-0/00000000.end`).
fn archived_log(job_id: &JobId) -> kinetic_core::ports::ObjectPath {
    let chunks = kinetic_core::layout::log_chunks(job_id, 0);
    // Cannot fail: the name is eight digits and a suffix.
    chunks
        .child(&format!("{:08}{}", 0, kinetic_core::layout::LOG_END_SUFFIX))
        .unwrap_or(chunks)
}

#[async_trait]
impl Backend for LocalBackend {
    fn name(&self) -> &str {
        "local"
    }

    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities::single_host()
            .with_port_forward(true)
            .with_worker_pools(true)
    }

    async fn check(&self, accelerator: &AcceleratorSpec) -> Result<(), BackendError> {
        if accelerator.spot() {
            return Err(BackendError::unsupported_with(
                format!(
                    "the local backend runs jobs on this host, which is no Spot VM: '{accelerator}' asks for one"
                ),
                Advice::new()
                    .text("drop ")
                    .on(Knob::Spot)
                    .text(" (or the :spot suffix) to run here, or use a cluster backend (")
                    .set(Knob::Backend, "gke")
                    .text(")"),
            ));
        }
        match accelerator.category() {
            Category::Cpu => Ok(()),
            Category::Gpu => self.gpu_request(accelerator).map(|_| ()),
            Category::Tpu => Err(BackendError::unsupported_with(
                format!(
                    "the local backend runs jobs on this host's CPU and cannot provide TPU '{accelerator}'"
                ),
                elsewhere("TPUs", &["gke", "pathways"]),
            )),
        }
    }

    async fn submit(&self, job: &PreparedJob) -> Result<(), BackendError> {
        // Resolved before the job is claimed: a submitter that dies between
        // the claim and the start leaves the job queued until resubmitted,
        // so nothing slow happens in between.
        let python = self.python.get_or_init(|| {
            let mut host = host_env();
            host.extend(self.options.runner_env.iter().cloned());
            resolve_python(&self.options.python, &host, &self.options.root)
        });
        let gpus = self.gpu_request(&job.accelerator)?;
        let dir = self.job_dir(&job.record.job_id);
        let binds = readonly::binds(job, &dir.mounts_path())?;
        readonly::check(&binds, &self.options.root)?;
        match dir.claim(&job.spec_uri) {
            Ok(true) => {
                self.join_group(&job.record)?;
                // A fresh claim: this submitter starts it.
                dir.take_launch();
            }
            // The same job, already submitted: started, or about to be by
            // its submitter, unless that submitter died first.
            // A pooled job whose submitter died before queuing it (killed
            // between `pooled` and the queue entry): queued again.
            Ok(false) if dir.launched() => {
                self.join_group(&job.record)?;
                if let (Some(pool), Some(group)) = (job.worker_pool, &job.record.group_id)
                    && dir.pooled_and_stranded(&job.record.job_id)
                {
                    return self.submit_pooled(job, &dir, group, pool, python);
                }
                return Ok(());
            }
            Ok(false) => {
                self.join_group(&job.record)?;
                if !dir.take_launch() {
                    return Ok(());
                }
            }
            Err(existing) => {
                return Err(BackendError::AlreadyExists {
                    backend: self.name().to_owned(),
                    job_id: job.record.job_id.to_string(),
                    message: format!("it runs spec {existing}, not {}", job.spec_uri),
                });
            }
        }
        self.note_earlier_runs(job, &dir).await?;
        // A batch child on workers: queued on its batch's pool, unless it
        // needs what only a process of its own gives (its own devices,
        // mounts, or a debugger's port).
        if let (Some(pool), Some(group)) = (job.worker_pool, &job.record.group_id)
            && gpus.is_none()
            && binds.is_empty()
            && !job.record.debug
        {
            return self.submit_pooled(job, &dir, group, pool, python);
        }
        dir.make_run_dirs()
            .map_err(|e| io_err(&dir.work_path(), &e))?;
        // One interpreter: the supervisor forks the runner, so it starts as
        // the runner always did (`-u`, site-packages for the job's imports).
        let mut cmd = readonly::command(python, &binds)?;
        cmd.arg("-u")
            .arg(&self.supervisor)
            .arg("--job-dir")
            .arg(dir.path())
            .arg("--slots-dir")
            .arg(self.options.root.join("slots"))
            .arg("--max-concurrent")
            .arg(self.options.max_concurrent.to_string())
            .arg("--grace")
            .arg(CANCEL_GRACE.as_secs_f64().to_string());
        if let Some(run) = job.deadlines.run {
            cmd.arg("--run-deadline").arg(run.as_secs_f64().to_string());
        }
        if job.budgets.retries > 0 {
            cmd.arg("--retries").arg(job.budgets.retries.to_string());
        }
        if let Some((wanted, ids)) = gpus {
            let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
            cmd.arg("--gpus")
                .arg(wanted.to_string())
                .arg("--gpu-ids")
                .arg(ids.join(","));
        }
        cmd.arg("--runner")
            .arg(&self.runner)
            .arg("--")
            .arg("--spec")
            .arg(&job.spec_uri)
            .arg("--workdir")
            .arg(dir.work_path())
            .arg("--mount-root")
            .arg(dir.mounts_path())
            .arg("--log-copy")
            .arg("off")
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                dir.open_log().map_err(|e| io_err(&dir.log_path(), &e))?,
            ))
            .process_group(0);
        cmd.env_clear();
        for (name, value) in job_env(job, &self.options.runner_env, host_nvidia_devices()) {
            cmd.env(name, value);
        }
        if job.record.debug {
            for (name, value) in debug_env(&dir)? {
                cmd.env(name, value);
            }
        }
        let mut child = cmd.spawn().map_err(|e| BackendError::unsupported(format!(
                "the local backend could not start '{}': {e} (it needs a Python 3.9+ interpreter on this host)",
                python.display()
            )).with_source(e))?;
        dir.record_pid(child.id())
            .map_err(|e| io_err(dir.path(), &e))?;
        // Reap the supervisor when it exits, so no zombie is left while this
        // process lives; if this process exits first, init adopts it.
        std::thread::Builder::new()
            .name("kinetic-local-reaper".into())
            .spawn(move || {
                let _ = child.wait();
            })
            .map_err(|e| {
                BackendError::other(format!("cannot start a reaper thread: {e}")).with_source(e)
            })?;
        Ok(())
    }

    async fn status(&self, job: &JobRecord) -> Result<JobState, BackendError> {
        let dir = self.job_dir(&job.job_id);
        Ok(self
            .observe_state(&job.job_id, &dir, &LivePools::default())
            .await)
    }

    /// Unsupported: a local batch runs on a worker pool, one job per input
    /// ([`PreparedJob::worker_pool`]).
    async fn submit_batch(
        &self,
        _batch: &kinetic_core::ports::PreparedBatch,
    ) -> Result<(), BackendError> {
        Err(BackendCapabilities::undeclared(
            self.name(),
            "indexed_batches",
        ))
    }

    /// Unsupported, as `submit_batch`.
    async fn end_batch(
        &self,
        _query: &GroupQuery,
        _end: kinetic_core::ports::BatchEnd,
        _wait: CleanupWait,
    ) -> Result<(), BackendError> {
        Err(BackendCapabilities::undeclared(
            self.name(),
            "indexed_batches",
        ))
    }

    async fn group_status(&self, query: &GroupQuery) -> Result<GroupStatus, BackendError> {
        let dir = self.group_dir(&query.group_id);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(GroupStatus::new()),
            Err(e) => return Err(io_err(&dir, &e)),
        };
        let mut out = GroupStatus::new();
        // Taken out while the group is read, and put back with only the
        // children this listing names (a cleaned child leaves it).
        let mut ended = self
            .ended
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&query.group_id)
            .unwrap_or_default();
        let mut still = HashMap::with_capacity(ended.len());
        let pools = LivePools::default();
        for entry in entries.filter_map(Result::ok) {
            let Some(job_id) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<JobId>().ok())
            else {
                continue;
            };
            let job_dir = self.job_dir(&job_id);
            if let Some(state) = ended.remove(&job_id) {
                if job_dir.exists() {
                    out.insert(job_id.clone(), state.clone());
                    still.insert(job_id, state);
                }
                continue;
            }
            // A child whose directory is gone (cleaned up) reads NOT_FOUND
            // here, and is left out below.
            let state = self.observe_state(&job_id, &job_dir, &pools).await;
            // Final once its exit code is recorded: nothing writes a
            // job's state files after that (a cancel of an ended job
            // marks nothing), and its log was copied.
            let final_state = state.status.is_terminal()
                && job_dir.path().join("exit_code").exists()
                && job_dir.logs_archived();
            if final_state {
                still.insert(job_id.clone(), state.clone());
            }
            if state.status != JobStatus::NotFound {
                out.insert(job_id, state);
            }
        }
        self.ended
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(query.group_id.clone(), still);
        Ok(out)
    }

    async fn logs(&self, job: &JobRecord, options: LogOptions) -> Result<String, BackendError> {
        let text = self.log_text(job).await?;
        Ok(match options.tail {
            Some(n) => tail_lines(&text, n),
            None => text,
        })
    }

    async fn follow_logs(&self, job: &JobRecord) -> Result<LogStream, BackendError> {
        let dir = self.job_dir(&job.job_id);
        if !dir.exists() {
            // Ended and cleaned up: replay the archived copy.
            let text = self.log_text(job).await?;
            let lines: Vec<Result<String, BackendError>> =
                text.lines().map(|l| Ok(l.to_owned())).collect();
            return Ok(Box::pin(futures_util::stream::iter(lines)));
        }
        Ok(state::follow(dir))
    }

    async fn cancel(&self, job: &JobRecord, wait: CleanupWait) -> Result<(), BackendError> {
        let dir = self.job_dir(&job.job_id);
        if !dir.exists() {
            return Ok(());
        }
        let live = matches!(dir.observe(), Observed::Queued | Observed::Running);
        let stopped = if live {
            dir.mark_cancelled().map_err(|e| io_err(dir.path(), &e))?;
            dir.kill_group(CANCEL_GRACE, wait).await
        } else if dir.is_cancelled() {
            // Cancelled before and maybe still in its grace period (its
            // supervisor kills it at the end): wait for it, signalling nothing.
            dir.wait_group_gone(wait).await
        } else {
            true
        };
        if !stopped {
            return Err(BackendError::not_confirmed(
                job.job_id.as_str(),
                "the stop of the local process",
                wait.timeout,
            ));
        }
        Ok(())
    }

    async fn cleanup(&self, job: &JobRecord, wait: CleanupWait) -> Result<(), BackendError> {
        let dir = self.job_dir(&job.job_id);
        if !dir.exists() {
            return Ok(());
        }
        // A job still stopping keeps its folder (its state and logs): the
        // next cleanup, once it stopped, removes it.
        self.cancel(job, wait).await?;
        self.archive_logs(&job.job_id, &dir).await;
        if let Some(group) = &job.group_id {
            let entry = self.group_dir(group).join(job.job_id.as_str());
            if let Err(e) = std::fs::remove_file(&entry)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                return Err(io_err(&entry, &e));
            }
        }
        dir.remove().map_err(|e| io_err(dir.path(), &e))
    }

    async fn port_forward(&self, job: &JobRecord, port: u16) -> Result<PortStream, BackendError> {
        let dir = self.job_dir(&job.job_id);
        match dir.observe() {
            Observed::Running => {}
            Observed::Missing => {
                return Err(BackendError::not_found(self.name(), job.job_id.as_str()));
            }
            Observed::Queued => {
                return Err(BackendError::invalid_input(format!(
                    "cannot forward port {port} of job {}: it is queued, not running yet",
                    job.job_id
                )));
            }
            _ => {
                return Err(BackendError::invalid_input(format!(
                    "cannot forward port {port} of job {}: it has ended",
                    job.job_id
                )));
            }
        }
        // The job shares the host's network: a port this backend mapped
        // (the debug port) is the host port it picked, any other is itself.
        let host_port = dir.host_port(port).unwrap_or(port);
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", host_port))
            .await
            .map_err(|e| {
                BackendError::unavailable(format!(
                    "nothing accepts connections on port {port} of job {} (127.0.0.1:{host_port}): {e}",
                    job.job_id
                ))
                .with_source(e)
            })?;
        Ok(Box::new(
            tokio_util::compat::TokioAsyncReadCompatExt::compat(stream),
        ))
    }

    fn changes(&self) -> Option<ChangeFeed> {
        let ended = self.options.root.join("slots").join(ENDED_FILE);
        match watch::Watch::new(
            &ended,
            nix::sys::inotify::AddWatchFlags::IN_CLOSE_WRITE
                | nix::sys::inotify::AddWatchFlags::IN_ATTRIB,
        ) {
            Ok(w) => Some(w.into_feed()),
            Err(e) => {
                tracing::debug!(
                    "local jobs are polled: cannot watch {}: {e}",
                    ended.display()
                );
                None
            }
        }
    }

    async fn list(&self) -> Result<Vec<JobId>, BackendError> {
        let jobs = self.options.root.join("jobs");
        let entries = std::fs::read_dir(&jobs).map_err(|e| io_err(&jobs, &e))?;
        let mut ids: Vec<JobId> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
            .collect();
        ids.sort();
        Ok(ids)
    }
}

/// `state` with the attempts the job's supervisor recorded (a job run
/// under an application retry budget); while a retry runs, its reason
/// says which attempt it is (`failed, retrying (attempt 2 of 3)`).
fn with_attempts(state: JobState, dir: &JobDir) -> JobState {
    let running = state.status == JobStatus::Running;
    let (attempts, current) = dir.attempts(running);
    if attempts.is_empty() {
        return state;
    }
    let mut state = state;
    if let Some((attempt, of)) = current {
        state.reason = Some(StatusReason::Restarting {
            attempt,
            of,
            after: kinetic_core::budget::Outcome::Failed,
        });
    }
    state.with_attempts(attempts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kinetic_core::advice::FrontEnd;
    use std::os::unix::fs::PermissionsExt;

    /// A `file://` store this module's group tests never reach: every call
    /// fails, so a test that passes made none.
    #[derive(Debug)]
    struct Unreachable;

    #[async_trait]
    impl ObjectStore for Unreachable {
        fn uri(&self, path: &kinetic_core::ports::ObjectPath) -> String {
            format!("file:///unreachable/{}", path.as_str())
        }
        async fn put(
            &self,
            _: &kinetic_core::ports::ObjectPath,
            _: bytes::Bytes,
            _: PutOptions,
        ) -> Result<(), kinetic_core::ports::StoreError> {
            Err(kinetic_core::ports::StoreError::unsupported("put"))
        }
        async fn put_file(
            &self,
            _: &kinetic_core::ports::ObjectPath,
            _: &Path,
            _: PutOptions,
        ) -> Result<u64, kinetic_core::ports::StoreError> {
            Err(kinetic_core::ports::StoreError::unsupported("put_file"))
        }
        async fn get(
            &self,
            _: &kinetic_core::ports::ObjectPath,
            _: kinetic_core::ports::GetOptions,
        ) -> Result<bytes::Bytes, kinetic_core::ports::StoreError> {
            Err(kinetic_core::ports::StoreError::unsupported("get"))
        }
        async fn get_to_file(
            &self,
            _: &kinetic_core::ports::ObjectPath,
            _: &Path,
        ) -> Result<u64, kinetic_core::ports::StoreError> {
            Err(kinetic_core::ports::StoreError::unsupported("get_to_file"))
        }
        async fn head(
            &self,
            _: &kinetic_core::ports::ObjectPath,
        ) -> Result<kinetic_core::ports::ObjectMeta, kinetic_core::ports::StoreError> {
            Err(kinetic_core::ports::StoreError::unsupported("head"))
        }
        async fn list(
            &self,
            _: Option<&kinetic_core::ports::ObjectPath>,
        ) -> Result<Vec<kinetic_core::ports::ObjectMeta>, kinetic_core::ports::StoreError> {
            Err(kinetic_core::ports::StoreError::unsupported("list"))
        }
        async fn delete(
            &self,
            _: &kinetic_core::ports::ObjectPath,
        ) -> Result<(), kinetic_core::ports::StoreError> {
            Err(kinetic_core::ports::StoreError::unsupported("delete"))
        }
        async fn delete_prefix(
            &self,
            _: &kinetic_core::ports::ObjectPath,
        ) -> Result<u64, kinetic_core::ports::StoreError> {
            Err(kinetic_core::ports::StoreError::unsupported(
                "delete_prefix",
            ))
        }
    }

    #[tokio::test]
    async fn group_status_reads_a_child_until_it_ended_for_good_and_forgets_a_cleaned_one() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let backend = LocalBackend::new(LocalOptions::new(root.clone()), Arc::new(Unreachable))
            .expect("backend");
        let group: GroupId = "grp-00000001".parse().unwrap();
        let query = GroupQuery::new(group.clone(), "default");
        let ended: JobId = "job-0000000a".parse().unwrap();
        let failing: JobId = "job-0000000b".parse().unwrap();
        for job in [&ended, &failing] {
            let dir = root.join("jobs").join(job.as_str());
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::create_dir_all(root.join("groups").join(group.as_str())).unwrap();
            std::fs::write(
                root.join("groups").join(group.as_str()).join(job.as_str()),
                b"",
            )
            .unwrap();
            std::fs::write(dir.join("logs_archived"), b"").unwrap();
        }
        let dir = |job: &JobId| root.join("jobs").join(job.as_str());
        std::fs::write(dir(&ended).join("exit_code"), "0").unwrap();
        // Failed without an exit code (its processes vanished): read from
        // the store each time, never kept.
        std::fs::write(dir(&failing).join("started"), b"").unwrap();
        let first = backend.group_status(&query).await.unwrap();
        assert_eq!(first[&ended].status, JobStatus::Succeeded);
        // Ended for good: its files are not read again (what they say now
        // is ignored) …
        std::fs::write(dir(&ended).join("exit_code"), "9").unwrap();
        let second = backend.group_status(&query).await.unwrap();
        assert_eq!(second[&ended].status, JobStatus::Succeeded);
        // … while the child that did not end for good is read each time.
        std::fs::write(dir(&failing).join("exit_code"), "3").unwrap();
        assert_eq!(
            backend.group_status(&query).await.unwrap()[&failing].status,
            JobStatus::Failed
        );
        // Cleaned (its group entry and directory gone): no longer reported,
        // and not kept either.
        std::fs::remove_file(
            root.join("groups")
                .join(group.as_str())
                .join(ended.as_str()),
        )
        .unwrap();
        std::fs::remove_dir_all(dir(&ended)).unwrap();
        let after = backend.group_status(&query).await.unwrap();
        assert!(!after.contains_key(&ended));
        let kept = backend.ended.lock().unwrap();
        assert_eq!(kept[&group].len(), 1, "only the failed child is kept");
        assert!(kept[&group].contains_key(&failing));
    }

    #[test]
    fn a_job_this_host_cannot_serve_is_told_what_to_set_as_each_front_end_names_it() {
        let err = BackendError::unsupported_with(
            "the local backend runs jobs on this host's CPU and cannot provide TPU 'v5litepod-1'",
            elsewhere("TPUs", &["gke", "pathways"]),
        );
        let cli = err.to_string();
        assert_eq!(cli, err.message_for(FrontEnd::CommandLine));
        for part in [
            "use --accelerator cpu to run here",
            "(--backend gke or pathways)",
            "(--project and --cluster, KINETIC_PROJECT and KINETIC_CLUSTER, or a profile",
            "`kinetic up` creates the cluster",
        ] {
            assert!(cli.contains(part), "{part:?} not in {cli}");
        }
        let python = err.message_for(FrontEnd::Python);
        for part in [
            "use accelerator=\"cpu\" to run here",
            "(backend=\"gke\" or \"pathways\")",
            "(project= and cluster=, KINETIC_PROJECT and KINETIC_CLUSTER, or a profile",
            "`kinetic up` creates the cluster",
        ] {
            assert!(python.contains(part), "{part:?} not in {python}");
        }
        assert!(!python.contains("--"), "{python}");
    }

    fn executable(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// The interpreter this host's `python3` really is.
    fn real_python() -> PathBuf {
        let out = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3 is needed by this test");
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    }

    /// Runs the supervisor on `runner` (a module with `main(argv)`) in a
    /// process group of its own, as `submit` does; its exit status.
    fn supervise(root: &Path, runner: &Path, args: &[&str]) -> std::process::ExitStatus {
        let job = root.join("job");
        std::fs::create_dir_all(&job).unwrap();
        let supervisor = root.join("supervisor.py");
        std::fs::write(&supervisor, SUPERVISOR_SOURCE).unwrap();
        Command::new(real_python())
            .arg("-u")
            .arg(&supervisor)
            .arg("--job-dir")
            .arg(&job)
            .arg("--slots-dir")
            .arg(root.join("slots"))
            .arg("--max-concurrent")
            .arg("1")
            .arg("--runner")
            .arg(runner)
            .arg("--")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .status()
            .unwrap()
    }

    /// Starts the supervisor of job directory `root/{job}` on `runner`
    /// with GPU arguments `gpus`, in a process group of its own.
    fn spawn_supervisor(
        root: &Path,
        job: &str,
        runner: &Path,
        gpus: &[&str],
        args: &[&str],
    ) -> std::process::Child {
        let dir = root.join(job);
        std::fs::create_dir_all(&dir).unwrap();
        let supervisor = root.join("supervisor.py");
        std::fs::write(&supervisor, SUPERVISOR_SOURCE).unwrap();
        Command::new(real_python())
            .arg("-u")
            .arg(&supervisor)
            .arg("--job-dir")
            .arg(&dir)
            .arg("--slots-dir")
            .arg(root.join("slots"))
            .arg("--max-concurrent")
            .arg("4")
            .args(gpus)
            .arg("--runner")
            .arg(runner)
            .arg("--")
            .args(args)
            .env_clear()
            .env("NVIDIA_VISIBLE_DEVICES", "all")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap()
    }

    /// A stand-in runner `root/runner.py` whose `main(argv)` is `source`.
    fn runner_script(root: &Path, source: &str) -> PathBuf {
        let runner = root.join("runner.py");
        std::fs::write(&runner, source).unwrap();
        runner
    }

    /// The jobs of the worker tests that queue four.
    const FOUR_JOBS: [&str; 4] = [
        "job-0000000a",
        "job-0000000b",
        "job-0000000c",
        "job-0000000d",
    ];

    /// Waits until each of `ids` under `root/jobs` has its exit code.
    fn wait_every_job_ended(root: &Path, ids: &[&str]) {
        wait_for("every job ended", || {
            ids.iter().all(|id| {
                JobDir::new(root.join("jobs").join(id))
                    .read("exit_code")
                    .is_some()
            })
        });
    }

    fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A pool at `root/pool` whose jobs live in `root/jobs`: queue `jobs`
    /// (`(index, job id, runner args)`) as `submit_pooled` does, and start
    /// one worker on `runner`; the worker's process.
    fn pool_with_jobs(
        root: &Path,
        runner: &Path,
        jobs: &[(u64, &str, &[&str])],
    ) -> std::process::Child {
        pool_with_launches(root, runner, jobs, |_| serde_json::Value::Null)
    }

    /// [`pool_with_jobs`], each job's run deadline given by `deadline`.
    fn pool_with_launches(
        root: &Path,
        runner: &Path,
        jobs: &[(u64, &str, &[&str])],
        deadline: impl Fn(&str) -> serde_json::Value,
    ) -> std::process::Child {
        pool_worker(root, runner, jobs, deadline, &[])
    }

    /// [`pool_with_launches`], the worker's environment holding `env` too.
    fn pool_worker(
        root: &Path,
        runner: &Path,
        jobs: &[(u64, &str, &[&str])],
        deadline: impl Fn(&str) -> serde_json::Value,
        env: &[(&str, &Path)],
    ) -> std::process::Child {
        let pool = root.join("pool");
        std::fs::create_dir_all(pool.join("queue")).unwrap();
        for (index, job, args) in jobs {
            let dir = JobDir::new(root.join("jobs").join(job));
            std::fs::create_dir_all(dir.path()).unwrap();
            dir.record_pooled(&serde_json::json!({
                "pool": pool.to_string_lossy(), "args": args, "retries": 1, "run_deadline": deadline(job),
            }))
            .unwrap();
            std::fs::write(pool.join("queue").join(format!("{index:010}.{job}")), b"").unwrap();
        }
        let supervisor = root.join("supervisor.py");
        std::fs::write(&supervisor, SUPERVISOR_SOURCE).unwrap();
        Command::new(real_python())
            .arg("-u")
            .arg(&supervisor)
            .args(["--pool", pool.to_str().unwrap()])
            .args(["--jobs-dir", root.join("jobs").to_str().unwrap()])
            .args(["--slots-dir", root.join("slots").to_str().unwrap()])
            .args(["--max-concurrent", "2", "--workers", "1", "--idle", "0.3"])
            .arg("--runner")
            .arg(runner)
            .env_clear()
            .env("JOB_ID", "job-00000000")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap()
    }

    #[test]
    fn a_worker_runs_its_queue_in_forks_and_a_job_that_kills_its_process_ends_alone() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // Each run: its log line, then (by its argument) a clean exit, an
        // os._exit on its first attempt only, or a SIGKILL of itself.
        let runner = runner_script(
            root,
            "import os, signal\n\ndef main(argv):\n    print('job', os.environ['JOB_ID'], 'attempt', os.environ['KINETIC_ATTEMPT'], 'worker', os.getppid(), flush=True)\n    if argv[0] == 'exit-once' and os.environ['KINETIC_ATTEMPT'] == '1':\n        os._exit(9)\n    if argv[0] == 'kill':\n        os.kill(os.getpid(), signal.SIGKILL)\n    return 0\n",
        );
        let ids = FOUR_JOBS;
        let mut worker = pool_with_jobs(
            root,
            &runner,
            &[
                (3, ids[3], &["ok"]),
                (0, ids[0], &["ok"]),
                (1, ids[1], &["exit-once"]),
                (2, ids[2], &["kill"]),
            ],
        );
        let job = |id: &str| JobDir::new(root.join("jobs").join(id));
        wait_every_job_ended(root, &ids);
        let code = |id: &str| job(id).read("exit_code").unwrap().trim().to_owned();
        assert_eq!(
            ids.map(code),
            ["0", "0", "-9", "0"],
            "the os._exit was retried (attempt 2), the SIGKILL ended its job alone"
        );
        // Each job's log holds its own lines only, its own JOB_ID, and every
        // run came from the one worker.
        let worker_pid = worker.id().to_string();
        for id in ids {
            let log = job(id).read_log();
            let lines: Vec<&str> = log.lines().filter(|l| l.starts_with("job ")).collect();
            assert!(!lines.is_empty(), "{id}: {log}");
            for line in &lines {
                assert!(line.starts_with(&format!("job {id} ")), "{id}: {log}");
                assert!(
                    line.ends_with(&format!("worker {worker_pid}")),
                    "{id}: {log}"
                );
            }
            assert_eq!(
                job(id).observe(),
                Observed::Exited(code(id).parse().unwrap())
            );
        }
        let retried = job(ids[1]).read_log();
        assert!(
            retried.contains("attempt 1") && retried.contains("attempt 2"),
            "{retried}"
        );
        // Oldest input first.
        let started = |id: &str| {
            std::fs::metadata(job(id).path().join("started"))
                .unwrap()
                .modified()
                .unwrap()
        };
        assert!(started(ids[0]) <= started(ids[1]) && started(ids[2]) <= started(ids[3]));
        // Idle, the worker leaves and unregisters itself.
        assert!(worker.wait().unwrap().success());
        assert!(state::live_workers(&root.join("pool")).is_empty());
    }

    /// A stand-in runner with a `PoolWorker` whose preparation always
    /// holds: every input runs on the worker's executor. Each run prints
    /// its job, attempt, process, the runs its process made so far, the
    /// variable the run before it set and its working directory; by its
    /// first argument it then returns, `os._exit`s on its first attempt,
    /// or waits for the file its second argument names.
    const EXECUTOR_RUNNER: &str = "import os, time\n\
        RUNS = []\n\
        class Prepared:\n    next_spec = None\n\
        class PoolWorker:\n    armed = False\n\
        \x20   def __init__(self, scratch):\n        self.prepared = Prepared()\n\
        \x20   def held(self, argv):\n        return self.prepared\n\
        \x20   def prepare(self, argv, log_path):\n        return self.prepared\n\
        \x20   def interrupt(self):\n        pass\n\
        \x20   def ended(self, code):\n        pass\n\
        \x20   def close(self):\n        pass\n\
        def main(argv, prepared=None):\n\
        \x20   RUNS.append(os.environ['JOB_ID'])\n\
        \x20   print('job', os.environ['JOB_ID'], 'attempt', os.environ['KINETIC_ATTEMPT'], 'pid', os.getpid(),\n\
        \x20         'runs', len(RUNS), 'left', os.environ.get('LEFT_BY_A_RUN'), 'cwd', os.getcwd(), flush=True)\n\
        \x20   os.environ['LEFT_BY_A_RUN'] = os.environ['JOB_ID']\n\
        \x20   if argv[0] == 'exit-once' and os.environ['KINETIC_ATTEMPT'] == '1':\n        os._exit(9)\n\
        \x20   if argv[0] == 'wait':\n\
        \x20       while not os.path.exists(argv[1]):\n            time.sleep(0.01)\n\
        \x20   return 0\n";

    /// The `(job, attempt, pid, runs)` of each run line of a log written
    /// by [`EXECUTOR_RUNNER`], asserting the run saw no variable an
    /// earlier run set and ran in its job's directory.
    fn executor_runs(job: &JobDir) -> Vec<(String, u32, u32, u32)> {
        let log = job.read_log();
        let runs: Vec<_> = log
            .lines()
            .filter(|l| l.starts_with("job "))
            .map(|line| {
                let f: Vec<&str> = line.split(' ').collect();
                assert_eq!(f[8..10], ["left", "None"], "{line}");
                let cwd = std::fs::canonicalize(f[11]).unwrap();
                assert_eq!(cwd, std::fs::canonicalize(job.path()).unwrap(), "{line}");
                let n = |i: usize| f[i].parse::<u32>().unwrap();
                (f[1].to_owned(), n(3), n(5), n(7))
            })
            .collect();
        assert!(!runs.is_empty(), "{log}");
        runs
    }

    #[test]
    fn a_worker_runs_input_after_input_in_one_process_and_one_that_ends_it_alone() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let runner = runner_script(root, EXECUTOR_RUNNER);
        let ids = FOUR_JOBS;
        let mut worker = pool_with_jobs(
            root,
            &runner,
            &[
                (0, ids[0], &["ok"]),
                (1, ids[1], &["ok"]),
                (2, ids[2], &["exit-once"]),
                (3, ids[3], &["ok"]),
            ],
        );
        let job = |id: &str| JobDir::new(root.join("jobs").join(id));
        wait_every_job_ended(root, &ids);
        for id in ids {
            assert_eq!(job(id).observe(), Observed::Exited(0), "{id}");
        }
        let runs: Vec<_> = ids.iter().flat_map(|id| executor_runs(&job(id))).collect();
        let worker_pid = worker.id();
        let first = runs[0].2;
        assert_ne!(first, worker_pid, "inputs run in the worker's executor");
        // One process ran the first three runs, counting them; the
        // os._exit ended it, and its input's second attempt and the next
        // input ran in a new one.
        let seen: Vec<_> = runs
            .iter()
            .map(|(j, a, _, n)| (j.as_str(), *a, *n))
            .collect();
        assert_eq!(
            seen,
            [
                (ids[0], 1, 1),
                (ids[1], 1, 2),
                (ids[2], 1, 3),
                (ids[2], 2, 1),
                (ids[3], 1, 2)
            ],
            "{runs:?}"
        );
        assert!(runs[..3].iter().all(|r| r.2 == first), "{runs:?}");
        assert!(
            runs[3..].iter().all(|r| r.2 != first && r.2 == runs[3].2),
            "{runs:?}"
        );
        assert_eq!(
            job(ids[2]).read("pid").unwrap().split(' ').next(),
            Some(runs[3].2.to_string().as_str()),
            "pid names the process that ran the input"
        );
        // What the jobs of one process share is one file linked into each
        // job's directory, not a file each.
        let inode = |id: &str, name: &str| {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(job(id).path().join(name)).unwrap().ino()
        };
        for name in ["worker", "pid", "started", "exit_code"] {
            assert_eq!(inode(ids[0], name), inode(ids[1], name), "{name}");
        }
        assert_eq!(job(ids[1]).read("exit_code").as_deref(), Some("0\n"));
        assert!(worker.wait().unwrap().success());
        assert!(state::live_workers(&root.join("pool")).is_empty());
    }

    #[tokio::test]
    async fn a_cancel_stops_its_input_through_the_worker_and_never_the_next_input_on_its_process() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let runner = runner_script(root, EXECUTOR_RUNNER);
        let ids = FOUR_JOBS;
        let release = root.join("release-b");
        let never = root.join("never");
        let (release_arg, never_arg) = (release.to_str().unwrap(), never.to_str().unwrap());
        let mut worker = pool_with_jobs(
            root,
            &runner,
            &[
                (0, ids[0], &["ok"]),
                (1, ids[1], &["wait", release_arg]),
                (2, ids[2], &["wait", never_arg]),
                (3, ids[3], &["ok"]),
            ],
        );
        let job = |id: &str| JobDir::new(root.join("jobs").join(id));
        let wait = CleanupWait::new(Duration::from_secs(20), Duration::from_millis(20));
        wait_for("the second input runs", || {
            job(ids[1]).read_log().contains("job ")
        });
        // The first input's end is written once the second was handed
        // over, not after the second ends (it waits for `release`).
        wait_for(
            "the first input's end written while the second runs",
            || job(ids[0]).observe() == Observed::Exited(0),
        );
        assert_eq!(job(ids[1]).observe(), Observed::Running);
        let (attempts, _) = job(ids[0]).attempts(false);
        assert_eq!(attempts.len(), 1, "its attempt recorded with it");
        assert_eq!(
            job(ids[0]).read("pid"),
            job(ids[1]).read("pid"),
            "the ended input's process runs the next"
        );
        // A cancel of the first input that raced its end (it read the job
        // running, then the input ended and its process took the next):
        // the worker stops nothing, since the job its process runs now
        // was not cancelled.
        job(ids[0]).mark_cancelled().unwrap();
        assert!(job(ids[0]).kill_group(Duration::from_secs(3), wait).await);
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(job(ids[1]).observe(), Observed::Running);
        std::fs::write(&release, b"").unwrap();
        wait_for("the second input ended", || {
            job(ids[1]).read("exit_code").is_some()
        });
        assert_eq!(
            executor_runs(&job(ids[1])).len(),
            1,
            "its first attempt ran to its end, never stopped"
        );
        assert_eq!(job(ids[1]).observe(), Observed::Exited(0));
        // A cancel of the input running now stops it, and only it.
        wait_for("the third input runs", || {
            job(ids[2]).read_log().contains("job ")
        });
        job(ids[2]).mark_cancelled().unwrap();
        assert!(job(ids[2]).kill_group(Duration::from_secs(3), wait).await);
        assert_eq!(job(ids[2]).observe(), Observed::Cancelled);
        wait_for("the last input ended", || {
            job(ids[3]).read("exit_code").is_some()
        });
        assert_eq!(job(ids[3]).observe(), Observed::Exited(0));
        let pid = |id: &str| executor_runs(&job(id))[0].2;
        assert_eq!(pid(ids[0]), pid(ids[2]));
        assert_ne!(
            pid(ids[2]),
            pid(ids[3]),
            "a new process after the stopped one"
        );
        assert!(worker.wait().unwrap().success());
    }

    #[test]
    fn a_pooled_fork_that_runs_every_phase_itself_finds_its_work_and_mounts_directories_made() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // A runner without PoolWorker: every fork runs every phase itself,
        // and needs the directories its arguments name.
        let runner = runner_script(
            root,
            "import os\n\ndef main(argv):\n    ok = all(os.path.isdir(argv[argv.index(f) + 1]) for f in ('--workdir', '--mount-root'))\n    return 0 if ok else 3\n",
        );
        let id = "job-0000000a";
        let job = JobDir::new(root.join("jobs").join(id));
        let (work, mounts) = (job.work_path(), job.mounts_path());
        let args = [
            "--workdir",
            work.to_str().unwrap(),
            "--mount-root",
            mounts.to_str().unwrap(),
        ];
        let mut worker = pool_with_jobs(root, &runner, &[(0, id, &args)]);
        wait_for("the job ended", || job.read("exit_code").is_some());
        assert_eq!(
            job.read("exit_code").unwrap().trim(),
            "0",
            "{}",
            job.read_log()
        );
        assert!(worker.wait().unwrap().success());
    }

    #[test]
    fn a_worker_skips_a_job_cancelled_in_its_queue_and_stops_one_past_its_deadline_then_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let runner = runner_script(
            root,
            "import time\n\ndef main(argv):\n    print('ran', argv[0], flush=True)\n    time.sleep(float(argv[0]))\n    return 0\n",
        );
        let ids = ["job-0000000a", "job-0000000b", "job-0000000c"];
        let job = |id: &str| JobDir::new(root.join("jobs").join(id));
        // The first is cancelled before any worker claims it.
        std::fs::create_dir_all(job(ids[0]).path()).unwrap();
        job(ids[0]).mark_cancelled().unwrap();
        let mut worker = pool_with_launches(
            root,
            &runner,
            &[
                (0, ids[0], &["0"]),
                (1, ids[1], &["60"]),
                (2, ids[2], &["0"]),
            ],
            |id| {
                if id == "job-0000000b" {
                    serde_json::json!(0.5)
                } else {
                    serde_json::Value::Null
                }
            },
        );
        wait_for("the last job ended", || {
            job(ids[2]).read("exit_code").is_some()
        });
        assert_eq!(job(ids[0]).observe(), Observed::Cancelled);
        assert!(
            !job(ids[0]).path().join("started").exists(),
            "a job cancelled in the queue never starts"
        );
        assert_eq!(job(ids[1]).observe(), Observed::DeadlineExceeded);
        assert!(
            job(ids[1]).read_log().contains("run deadline"),
            "{}",
            job(ids[1]).read_log()
        );
        assert_eq!(job(ids[2]).observe(), Observed::Exited(0));
        assert!(worker.wait().unwrap().success());
    }

    #[test]
    fn a_job_cancelled_after_its_worker_took_it_never_starts_and_the_worker_goes_on() {
        // The window between a worker taking a job (past its check of
        // `cancelled`) and the fork: a cancel there finds no pid to kill,
        // so the worker must see `cancelled` itself before opening the gate.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let runner = runner_script(
            root,
            "import os\n\ndef main(argv):\n    print('ran', os.environ['JOB_ID'], flush=True)\n    return 0\n",
        );
        let hold = root.join("hold");
        std::fs::create_dir_all(&hold).unwrap();
        let ids = ["job-0000000a", "job-0000000b"];
        let job = |id: &str| JobDir::new(root.join("jobs").join(id));
        let mut worker = pool_worker(
            root,
            &runner,
            &[(0, ids[0], &[]), (1, ids[1], &[])],
            |_| serde_json::Value::Null,
            &[("KINETIC_TEST_WORKER_HOLD", &hold)],
        );
        wait_for("the worker took the first job", || {
            hold.join(format!("{}.held", ids[0])).exists()
        });
        assert!(job(ids[0]).path().join("worker").exists());
        assert_eq!(
            job(ids[0]).observe(),
            Observed::Queued,
            "taken, not started: its worker lives"
        );
        // What `cancel` does: the marker, then the job's group (no pid yet).
        job(ids[0]).mark_cancelled().unwrap();
        assert!(!job(ids[0]).path().join("pid").exists());
        for id in ids {
            std::fs::write(hold.join(format!("{id}.go")), b"").unwrap();
        }
        wait_for("the next job ended", || {
            job(ids[1]).read("exit_code").is_some()
        });
        assert_eq!(job(ids[0]).observe(), Observed::Cancelled);
        assert!(
            job(ids[0]).read("attempts.jsonl").is_none(),
            "no attempt ran"
        );
        assert!(
            !job(ids[0]).read_log().contains("ran"),
            "a job cancelled before its fork started never runs: {}",
            job(ids[0]).read_log()
        );
        assert!(!job(ids[0]).path().join("started").exists());
        assert_eq!(job(ids[1]).observe(), Observed::Exited(0));
        assert!(job(ids[1]).read_log().contains(&format!("ran {}", ids[1])));
        assert!(worker.wait().unwrap().success());
    }

    #[test]
    fn a_queued_pooled_job_reported_gone_leaves_its_queue_so_no_later_worker_runs_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let runner = runner_script(
            root,
            "def main(argv):\n    print('ran', flush=True)\n    return 0\n",
        );
        let pool = root.join("pool");
        std::fs::create_dir_all(pool.join("queue")).unwrap();
        let id = "job-0000000a";
        let job = JobDir::new(root.join("jobs").join(id));
        std::fs::create_dir_all(job.path()).unwrap();
        job.record_pooled(&serde_json::json!({"pool": pool.to_string_lossy(), "args": []}))
            .unwrap();
        let entry = pool.join("queue").join(format!("{:010}.{id}", 0));
        std::fs::write(&entry, b"").unwrap();
        // Queued long ago on a pool whose workers are all gone.
        state::backdate(&job.path().join("pooled"));
        assert_eq!(job.observe(), Observed::Vanished);
        assert!(!entry.exists(), "reported gone, and out of the queue");
        // A worker started on the pool later (another batch input's
        // submitter) finds nothing of it to run.
        let mut worker = pool_with_jobs(root, &runner, &[]);
        assert!(worker.wait().unwrap().success());
        assert!(!job.path().join("worker").exists());
        assert!(!job.read_log().contains("ran"), "{}", job.read_log());
        assert_eq!(job.observe(), Observed::Vanished);
    }

    /// True once process `pid` waits for a flock (`/proc/locks` lists a
    /// blocked request as `N: -> FLOCK …  PID …`).
    fn waits_for_a_flock(pid: u32) -> bool {
        std::fs::read_to_string("/proc/locks").is_ok_and(|locks| {
            locks.lines().any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.get(1) == Some(&"->")
                    && f.get(2) == Some(&"FLOCK")
                    && f.get(5) == Some(&pid.to_string().as_str())
            })
        })
    }

    #[test]
    fn the_last_worker_to_leave_an_idle_pool_removes_its_directory_but_never_under_a_submitter() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let runner = runner_script(root, "def main(argv):\n    return 0\n");
        let pool = root.join("pool");
        let job = |id: &str| JobDir::new(root.join("jobs").join(id));

        // Its queue run and nothing queued: the leaving worker removes it.
        let mut worker = pool_with_jobs(root, &runner, &[(0, "job-0000000a", &[])]);
        assert!(worker.wait().unwrap().success());
        assert_eq!(job("job-0000000a").observe(), Observed::Exited(0));
        assert!(!pool.exists(), "an idle pool's directory is removed");
        assert!(
            std::fs::read_dir(root).unwrap().all(|e| !e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(".removed-")),
            "nothing of it is left"
        );

        // A submitter at work (the shared lock `submit_pooled` holds while
        // it queues and starts a worker): the leaving worker waits for it,
        // then finds the job it queued and keeps the pool.
        let pools = lock_pools(root).unwrap();
        let mut worker = pool_with_jobs(root, &runner, &[(0, "job-0000000b", &[])]);
        wait_for("the worker leaves and waits for the submitter", || {
            waits_for_a_flock(worker.id())
        });
        assert!(pool.exists());
        let late = job("job-0000000c");
        std::fs::create_dir_all(late.path()).unwrap();
        late.record_pooled(&serde_json::json!({"pool": pool.to_string_lossy(), "args": []}))
            .unwrap();
        let entry = pool.join("queue").join(format!("{:010}.job-0000000c", 1));
        std::fs::write(&entry, b"").unwrap();
        drop(pools);
        assert!(worker.wait().unwrap().success());
        assert!(entry.exists(), "the job queued meanwhile is still queued");
        assert!(pool.join("workers").exists());

        // A pool whose workers logged errors is kept for them to be read.
        std::fs::remove_file(&entry).unwrap();
        std::fs::write(pool.join("worker.log"), "worker: job x: boom\n").unwrap();
        let mut worker = pool_with_jobs(root, &runner, &[]);
        assert!(worker.wait().unwrap().success());
        assert!(pool.join("worker.log").exists());
    }

    #[test]
    fn a_pooled_job_no_queue_names_is_stranded_once_old_and_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let pool = root.join("pool");
        std::fs::create_dir_all(pool.join("queue")).unwrap();
        let id: JobId = "job-0000000a".parse().unwrap();
        let job = JobDir::new(root.join("jobs").join(id.as_str()));
        std::fs::create_dir_all(job.path()).unwrap();
        job.record_pooled(&serde_json::json!({"pool": pool.to_string_lossy(), "args": []}))
            .unwrap();
        assert!(
            !job.pooled_and_stranded(&id),
            "just queued: its submitter is at it"
        );
        let age = |job: &JobDir| state::backdate(&job.path().join("pooled"));
        age(&job);
        assert!(job.pooled_and_stranded(&id));
        let entry = pool.join("queue").join(format!("{:010}.{id}", 3));
        std::fs::write(&entry, b"").unwrap();
        assert!(!job.pooled_and_stranded(&id), "queued");
        std::fs::remove_file(&entry).unwrap();
        std::fs::write(job.path().join("worker"), "1234 5\n").unwrap();
        assert!(!job.pooled_and_stranded(&id), "claimed by a worker");
    }

    #[test]
    fn a_queued_pooled_job_counts_as_queued_while_a_worker_lives_and_as_gone_after() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let pool = root.join("pool");
        std::fs::create_dir_all(pool.join("workers")).unwrap();
        let job = JobDir::new(root.join("jobs").join("job-0000000a"));
        std::fs::create_dir_all(job.path()).unwrap();
        job.record_pooled(&serde_json::json!({"pool": pool.to_string_lossy(), "args": []}))
            .unwrap();
        let entry = pool.join("queue").join("0000000000.job-0000000a");
        let queue = || {
            std::fs::create_dir_all(pool.join("queue")).unwrap();
            std::fs::write(&entry, b"").unwrap();
        };
        queue();
        // Just queued: served for a while even before a worker is named.
        assert_eq!(job.observe(), Observed::Queued);
        let pooled = job.path().join("pooled");
        state::backdate(&pooled);
        assert_eq!(
            job.observe(),
            Observed::Vanished,
            "no worker will ever start it"
        );
        assert!(!entry.exists(), "reported gone, and out of the queue");
        // Queued again (a resubmission), on a pool with a live worker.
        queue();
        let me = std::process::id();
        let worker = pool
            .join("workers")
            .join(format!("{me}-{}", state::start_time_text(me)));
        std::fs::write(&worker, b"").unwrap();
        assert_eq!(job.observe(), Observed::Queued);
        // A dead worker's file is no worker (and is removed).
        let dead = pool.join("workers").join("999999999-1");
        std::fs::write(&dead, b"").unwrap();
        std::fs::remove_file(&worker).unwrap();
        assert_eq!(job.observe(), Observed::Vanished);
        assert!(!dead.exists());
        // Claimed by a worker that died before starting it: gone too.
        std::fs::write(job.path().join("worker"), "999999999 1\n").unwrap();
        assert_eq!(job.observe(), Observed::Vanished);
    }

    /// A job whose submitter died between writing `pooled` and its queue
    /// entry is held by nothing that will run it, however live its pool
    /// (a resumed batch's workers run there): `NOT_FOUND`, so a resume
    /// queues it again. It read `PENDING` for ever, and a resume waited on
    /// it for ever.
    #[test]
    fn a_pooled_job_no_queue_names_on_a_live_pool_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let pool = root.join("pool");
        std::fs::create_dir_all(pool.join("workers")).unwrap();
        std::fs::create_dir_all(pool.join("queue")).unwrap();
        let me = std::process::id();
        std::fs::write(
            pool.join("workers")
                .join(format!("{me}-{}", state::start_time_text(me))),
            b"",
        )
        .unwrap();
        let job = JobDir::new(root.join("jobs").join("job-0000000a"));
        std::fs::create_dir_all(job.path()).unwrap();
        job.record_pooled(&serde_json::json!({"pool": pool.to_string_lossy(), "args": []}))
            .unwrap();
        assert_eq!(
            job.observe(),
            Observed::Queued,
            "just written: its submitter is at it"
        );
        state::backdate(&job.path().join("pooled"));
        assert_eq!(job.observe(), Observed::Missing);
        let entry = pool.join("queue").join("0000000000.job-0000000a");
        std::fs::write(&entry, b"").unwrap();
        assert_eq!(job.observe(), Observed::Queued, "queued again");
        // Taken by a worker that waits for a job slot before naming itself.
        std::fs::create_dir_all(pool.join("claimed")).unwrap();
        let claimed = pool.join("claimed").join("0000000000.job-0000000a");
        std::fs::rename(&entry, &claimed).unwrap();
        assert_eq!(job.observe(), Observed::Queued, "claimed");
        std::fs::remove_file(&claimed).unwrap();
        std::fs::write(
            job.path().join("worker"),
            format!("{me} {}\n", state::start_time_text(me)),
        )
        .unwrap();
        assert_eq!(job.observe(), Observed::Queued, "taken by a live worker");
    }

    #[test]
    fn a_gpu_held_by_a_killed_job_is_free_again_and_its_waiter_gets_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let runner = runner_script(
            root,
            "import os, time\n\ndef main(argv):\n    with open(argv[0], 'w') as f:\n        f.write(' '.join(os.environ[v] for v in ('CUDA_VISIBLE_DEVICES', 'NVIDIA_VISIBLE_DEVICES', 'CUDA_DEVICE_ORDER')))\n    time.sleep(float(argv[1]))\n    return 0\n",
        );
        let gpus = ["--gpus", "1", "--gpu-ids", "3"];
        let seen = |job: &str| std::fs::read_to_string(root.join(format!("{job}.seen"))).ok();
        let first_seen = root.join("job-0000000a.seen");
        let mut first = spawn_supervisor(
            root,
            "job-0000000a",
            &runner,
            &gpus,
            &[first_seen.to_str().unwrap(), "60"],
        );
        wait_for("the first job never started", || {
            seen("job-0000000a").is_some()
        });
        assert_eq!(seen("job-0000000a").as_deref(), Some("3 3 PCI_BUS_ID"));
        assert_eq!(
            gpus::last_holder(&root.join("slots"), 3).as_deref(),
            Some("job-0000000a")
        );
        let second_seen = root.join("job-0000000b.seen");
        let mut second = spawn_supervisor(
            root,
            "job-0000000b",
            &runner,
            &gpus,
            &[second_seen.to_str().unwrap(), "0"],
        );
        let waiting = root.join("job-0000000b").join(gpus::WAITING_FILE);
        wait_for("the second job never waited", || waiting.exists());
        let text = std::fs::read_to_string(&waiting).unwrap();
        assert_eq!(gpus::parse_waiting(&text), Some((1, vec![3])), "{text}");
        assert_eq!(seen("job-0000000b"), None, "it waits for the device");
        // The holder dies without a word: its device is free again.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(first.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        first.wait().unwrap();
        assert!(second.wait().unwrap().success());
        assert_eq!(seen("job-0000000b").as_deref(), Some("3 3 PCI_BUS_ID"));
        assert!(
            !waiting.exists(),
            "the waiting file goes once it holds them"
        );
        let started = std::fs::read_to_string(root.join("job-0000000b").join("started")).unwrap();
        assert!(started.contains(r#""gpus": [3]"#), "{started}");
    }

    #[test]
    fn a_supervisor_asked_for_more_gpus_than_listed_fails_the_job_instead_of_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let runner = dir.path().join("runner.py");
        std::fs::write(&runner, "def main(argv):\n    return 0\n").unwrap();
        let gpus = ["--gpus", "2", "--gpu-ids", "0"];
        let mut child = spawn_supervisor(dir.path(), "job-0000000c", &runner, &gpus, &[]);
        assert!(child.wait().unwrap().success());
        let job = dir.path().join("job-0000000c");
        let code = std::fs::read_to_string(job.join("exit_code")).unwrap();
        assert_eq!(code.trim(), "1");
        let log = std::fs::read_to_string(job.join("output.log")).unwrap();
        assert!(log.contains("needs 2 GPUs and this host has 1"), "{log}");
        assert!(!job.join("started").exists());
    }

    #[test]
    fn the_supervisor_runs_the_runner_in_its_own_interpreter_from_compiled_code() {
        let dir = tempfile::tempdir().unwrap();
        let runner = dir.path().join("runner-0123.py");
        std::fs::write(
            &runner,
            "import os, sys\n\ndef main(argv):\n    print('runner', os.getpid(), os.getppid(), argv)\n    return int(argv[0])\n",
        )
        .unwrap();
        let job = dir.path().join("job");
        for (round, code) in [(1, "3"), (2, "0")] {
            assert!(supervise(dir.path(), &runner, &[code]).success());
            let recorded = std::fs::read_to_string(job.join("exit_code")).unwrap();
            assert_eq!(recorded.trim(), code, "round {round}");
        }
        let log = std::fs::read_to_string(job.join("output.log")).unwrap();
        let pid_file = std::fs::read_to_string(job.join("pid")).unwrap();
        let supervisor: &str = pid_file.split_whitespace().next().unwrap();
        // The runner is the supervisor's forked copy: its parent.
        let last = log.lines().last().unwrap();
        let fields: Vec<&str> = last.split_whitespace().collect();
        assert_eq!(fields[2], supervisor, "{log}");
        // Compiled once, next to the runner, under the interpreter's tag.
        let compiled: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with("runner-0123.cpython-") && n.ends_with(".bin"))
            .collect();
        assert_eq!(compiled.len(), 1, "{compiled:?}");
        assert!(dir.path().join("slots").join(ENDED_FILE).exists());
    }

    #[test]
    fn a_runner_killed_by_a_signal_is_recorded_with_that_signal() {
        let dir = tempfile::tempdir().unwrap();
        let runner = dir.path().join("runner.py");
        std::fs::write(
            &runner,
            "import os, signal\n\ndef main(argv):\n    os.kill(os.getpid(), signal.SIGKILL)\n",
        )
        .unwrap();
        assert!(supervise(dir.path(), &runner, &[]).success());
        let recorded = std::fs::read_to_string(dir.path().join("job").join("exit_code")).unwrap();
        assert_eq!(recorded.trim(), "-9");
    }

    #[test]
    fn a_shim_on_path_resolves_to_the_interpreter_it_starts() {
        let dir = tempfile::tempdir().unwrap();
        let real = real_python();
        let shim = dir.path().join("python3");
        executable(
            &shim,
            &format!("#!/bin/sh\nexec {} \"$@\"\n", real.display()),
        );
        let path = format!("{}:/usr/bin:/bin", dir.path().display());
        let env = vec![("PATH".to_owned(), path)];
        assert_eq!(resolve_python(Path::new("python3"), &env, dir.path()), real);
        assert_eq!(
            resolve_python(&shim, &env, dir.path()),
            real,
            "a shim named by its path too"
        );
    }

    #[test]
    fn an_interpreter_on_path_is_taken_as_found_and_a_missing_one_as_given() {
        let dir = tempfile::tempdir().unwrap();
        let real = real_python();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::os::unix::fs::symlink(&real, bin.join("python3")).unwrap();
        // A file of that name that is not executable is passed over.
        let earlier = dir.path().join("earlier");
        std::fs::create_dir(&earlier).unwrap();
        std::fs::write(earlier.join("python3"), "not a program").unwrap();
        let env = vec![(
            "PATH".to_owned(),
            format!("{}:{}", earlier.display(), bin.display()),
        )];
        // A venv's link is kept as it is: the venv is found through it.
        assert_eq!(
            resolve_python(Path::new("python3"), &env, dir.path()),
            bin.join("python3")
        );
        assert_eq!(
            resolve_python(Path::new("no-such-python"), &env, dir.path()),
            PathBuf::from("no-such-python")
        );
    }
}
