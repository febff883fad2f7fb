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
//! - A small supervisor (`supervisor.py`, standard library) runs in a process
//!   group of its own per job: it waits for one of `max_concurrent` slots
//!   (file locks under `{root}/slots/`, so the limit holds across processes
//!   and a queued job needs no one to stay alive to start), runs the runner
//!   with its output appended to `output.log`, and records the exit code.
//! - `cancel` kills the whole process group; a job whose processes vanished
//!   without an exit code (a reboot, a `kill -9`) is reported `FAILED` with
//!   that reason, never `RUNNING` forever.
//! - Logs are copied to the store (`{job_id}/logs/output.log`) when the job
//!   ends, so they outlive the job's directory.
//! - A batch child is also named by an empty file
//!   `{root}/groups/{group_id}/{job_id}`, so a batch's status is one
//!   directory listing ([`Backend::group_status`]).
//! - Captured environment values go into the child's environment only.
//! - No image is built: jobs run on the host. A job that asks for a GPU or
//!   TPU the host does not have is refused before anything is uploaded, with
//!   a message saying so.

mod state;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kinetic_core::accelerators::{AcceleratorSpec, Category};
use kinetic_core::ids::{GroupId, JobId};
use kinetic_core::ports::{
    Backend, BackendCapabilities, BackendError, GroupQuery, GroupStatus, LogOptions, LogStream,
    ObjectStore, PreparedJob, PutOptions, tail_lines,
};
use kinetic_core::protocol::{RUNNER_FILE_NAME, RUNNER_SOURCE, runner_digest};
use kinetic_core::record::JobRecord;
use kinetic_core::status::{JobState, JobStatus, StatusReason};

use crate::state::{JobDir, Observed};

/// The supervisor program, written next to the runner in the local root.
const SUPERVISOR_SOURCE: &str = include_str!("supervisor.py");

/// How long `cancel` waits after SIGTERM before SIGKILL.
const CANCEL_GRACE: Duration = Duration::from_secs(3);

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
    /// GPUs the host has (default: counted with `nvidia-smi -L` when present).
    pub gpus: Option<u32>,
    /// Extra environment for every runner, on top of this process's (which
    /// children inherit): non-secret settings such as `KINETIC_GCS_ENDPOINT`
    /// for a store on a fake GCS server. A job's captured variables win.
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

    /// Run at most `n` jobs at once (at least 1).
    pub fn max_concurrent(mut self, n: usize) -> Self {
        self.max_concurrent = n.max(1);
        self
    }

    /// Give every runner `name=value` in its environment (not for secrets:
    /// those travel as captured env of the job).
    pub fn runner_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.runner_env.push((name.into(), value.into()));
        self
    }

    /// Declare how many GPUs the host has.
    pub fn gpus(mut self, gpus: u32) -> Self {
        self.gpus = Some(gpus);
        self
    }
}

/// The local backend.
#[derive(Debug)]
pub struct LocalBackend {
    options: LocalOptions,
    store: Arc<dyn ObjectStore>,
    runner: PathBuf,
    supervisor: PathBuf,
    gpus: u32,
}

impl LocalBackend {
    /// A backend keeping its state under `options.root` and copying logs to
    /// `store` (the engine's jobs store). Installs the runner and supervisor
    /// programs under the root.
    pub fn new(options: LocalOptions, store: Arc<dyn ObjectStore>) -> Result<Self, BackendError> {
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
        let gpus = options.gpus.unwrap_or_else(count_gpus);
        Ok(Self {
            options,
            store,
            runner,
            supervisor,
            gpus,
        })
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
        std::fs::write(&entry, b"").map_err(|e| io_err(&entry, &e))
    }

    /// The state of a job from its directory, copying its log to the store
    /// once it ended.
    async fn observe_state(&self, job_id: &JobId, dir: &JobDir) -> JobState {
        let state = match dir.observe() {
            Observed::Missing => JobState::new(JobStatus::NotFound),
            Observed::Queued => JobState::new(JobStatus::Pending).with_reason(StatusReason::WaitingForResources),
            Observed::Running => JobState::new(JobStatus::Running),
            Observed::Exited(0) => JobState::new(JobStatus::Succeeded),
            Observed::Exited(code) => JobState::new(JobStatus::Failed).with_reason(StatusReason::ExitCode { code }),
            Observed::Cancelled => JobState::new(JobStatus::Failed).with_reason(StatusReason::Cancelled),
            Observed::Vanished => JobState::new(JobStatus::Failed).with_reason(StatusReason::BackendError {
                message: "the job's local processes ended without recording an exit code (killed, or the machine restarted)".into(),
            }),
        };
        if state.status.is_terminal() && state.status != JobStatus::NotFound {
            self.archive_logs(job_id, dir).await;
        }
        state
    }

    /// Copy the job's log to the store once it ended (idempotent).
    async fn archive_logs(&self, job_id: &JobId, dir: &JobDir) {
        if dir.logs_archived() {
            return;
        }
        let path = kinetic_core::layout::log(job_id);
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
        let path = kinetic_core::layout::log(&record.job_id);
        match self.store.get(&path, Default::default()).await {
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

/// GPUs on this host, as `nvidia-smi -L` lists them (0 when it is absent).
fn count_gpus() -> u32 {
    Command::new("nvidia-smi")
        .arg("-L")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or(0, |o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| l.starts_with("GPU "))
                .count() as u32
        })
}

#[async_trait]
impl Backend for LocalBackend {
    fn name(&self) -> &str {
        "local"
    }

    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities::single_host()
    }

    async fn check(&self, accelerator: &AcceleratorSpec) -> Result<(), BackendError> {
        match accelerator.category() {
            Category::Cpu => Ok(()),
            Category::Gpu => {
                let wanted = accelerator.count().unwrap_or(1);
                if wanted <= self.gpus {
                    Ok(())
                } else {
                    Err(BackendError::unsupported(format!(
                        "the local backend runs jobs on this host, and accelerator '{accelerator}' needs {wanted} GPU(s) but this host has {} (counted with nvidia-smi); use --accelerator cpu to run here, or a cloud backend (--backend gke) for GPUs",
                        self.gpus
                    )))
                }
            }
            Category::Tpu => Err(BackendError::unsupported(format!(
                "the local backend runs jobs on this host's CPU and cannot provide TPU '{accelerator}'; use --accelerator cpu to run here, or a cloud backend (--backend gke or pathways) for TPUs"
            ))),
        }
    }

    async fn submit(&self, job: &PreparedJob) -> Result<(), BackendError> {
        let dir = self.job_dir(&job.record.job_id);
        match dir.claim(&job.spec_uri) {
            Ok(true) => {
                self.join_group(&job.record)?;
                // A fresh claim: this submitter starts it.
                dir.take_launch();
            }
            // The same job, already submitted: started, or about to be by
            // its submitter, unless that submitter died first.
            Ok(false) if dir.launched() => return self.join_group(&job.record),
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
        let mut cmd = Command::new(&self.options.python);
        // The supervisor needs only the standard library: `-I -S` skips
        // site-packages and user settings, which saves start-up time.
        cmd.args(["-u", "-I", "-S"])
            .arg(&self.supervisor)
            .arg("--job-dir")
            .arg(dir.path())
            .arg("--slots-dir")
            .arg(self.options.root.join("slots"))
            .arg("--max-concurrent")
            .arg(self.options.max_concurrent.to_string())
            .arg("--")
            .arg(&self.options.python)
            .arg("-u")
            .arg(&self.runner)
            .arg("--spec")
            .arg(&job.spec_uri)
            .arg("--workdir")
            .arg(dir.work_path())
            .arg("--mount-root")
            .arg(dir.mounts_path())
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                dir.open_log().map_err(|e| io_err(&dir.log_path(), &e))?,
            ))
            .process_group(0);
        for (name, value) in &self.options.runner_env {
            cmd.env(name, value);
        }
        for (name, value) in job.env.iter() {
            cmd.env(name.as_str(), value.expose());
        }
        let mut child = cmd.spawn().map_err(|e| BackendError::unsupported(format!(
                "the local backend could not start '{}': {e} (it needs a Python 3.9+ interpreter on this host)",
                self.options.python.display()
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
        Ok(self.observe_state(&job.job_id, &dir).await)
    }

    async fn group_status(&self, query: &GroupQuery) -> Result<GroupStatus, BackendError> {
        let dir = self.group_dir(&query.group_id);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(GroupStatus::new()),
            Err(e) => return Err(io_err(&dir, &e)),
        };
        let mut out = GroupStatus::new();
        for entry in entries.filter_map(Result::ok) {
            let Some(job_id) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<JobId>().ok())
            else {
                continue;
            };
            let job_dir = self.job_dir(&job_id);
            if !job_dir.exists() {
                continue;
            }
            let state = self.observe_state(&job_id, &job_dir).await;
            if state.status != JobStatus::NotFound {
                out.insert(job_id, state);
            }
        }
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

    async fn cancel(&self, job: &JobRecord) -> Result<(), BackendError> {
        let dir = self.job_dir(&job.job_id);
        if !dir.exists() {
            return Ok(());
        }
        if matches!(dir.observe(), Observed::Queued | Observed::Running) {
            dir.mark_cancelled().map_err(|e| io_err(dir.path(), &e))?;
            dir.kill_group(CANCEL_GRACE).await;
        }
        Ok(())
    }

    async fn cleanup(&self, job: &JobRecord) -> Result<(), BackendError> {
        let dir = self.job_dir(&job.job_id);
        if !dir.exists() {
            return Ok(());
        }
        self.cancel(job).await?;
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
