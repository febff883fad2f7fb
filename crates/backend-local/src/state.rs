//! A local job's directory: the files through which any process sees the
//! job's state, and the process group behind it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kinetic_core::budget::{Attempt, Outcome};
use kinetic_core::ports::{BackendError, CleanupWait, LogStream, terminal_line};
use kinetic_core::record::UtcTimestamp;
use kinetic_core::status::StatusReason;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use crate::watch::Watch;

/// The runs a batch child's input made before it (its spec's
/// `attempt_offset`), kept in its directory for [`JobDir::attempts`].
const EARLIER_RUNS_FILE: &str = "earlier_runs";

/// How often a followed log is read again when no file-system event can
/// say that it grew (no inotify), and at the latest when one can (a job
/// whose processes vanished writes nothing more).
const FOLLOW_POLL: Duration = Duration::from_millis(100);
const FOLLOW_FALLBACK: Duration = Duration::from_secs(1);

/// How long a job just queued on a worker pool counts as served before
/// its pool has a live worker (its submitter starts one right after).
const POOL_START: Duration = Duration::from_secs(5);

/// What a job's directory says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Observed {
    /// No directory: never submitted here, or cleaned up.
    Missing,
    /// Waiting for a slot (or just spawned).
    Queued,
    /// The runner is running.
    Running,
    /// The runner exited with this code (negative: killed by that signal).
    Exited(i32),
    /// Cancelled by a user.
    Cancelled,
    /// Stopped by the supervisor: it ran longer than its run deadline.
    DeadlineExceeded,
    /// The processes are gone and no exit code was recorded.
    Vanished,
}

/// The directory `{root}/jobs/{job_id}`.
#[derive(Debug, Clone)]
pub(crate) struct JobDir {
    path: PathBuf,
}

impl JobDir {
    pub(crate) fn new(path: PathBuf) -> Self {
        Self { path }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn exists(&self) -> bool {
        self.path.is_dir()
    }

    pub(crate) fn log_path(&self) -> PathBuf {
        self.path.join("output.log")
    }

    pub(crate) fn work_path(&self) -> PathBuf {
        self.path.join("work")
    }

    pub(crate) fn mounts_path(&self) -> PathBuf {
        self.path.join("mounts")
    }

    fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The text of the job's file `name`, if it can be read.
    pub(crate) fn read(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.file(name)).ok()
    }

    /// Make the runner's `work` and `mounts` directories, which a job run
    /// by a supervisor of its own is given. A pooled job gets none from the
    /// submitter: its fork on a worker's preparation makes only what it
    /// writes to (fetched data), and a fork that runs every phase itself
    /// makes them first (`supervisor.py`, `run_pooled_job`). Two
    /// directories made and removed per input cost the client more than
    /// a trivial input's call (each takes and frees a disk block).
    pub(crate) fn make_run_dirs(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(self.work_path())?;
        std::fs::create_dir_all(self.mounts_path())
    }

    /// Take the job id for `spec_uri`: `Ok(true)` when this call created the
    /// job, `Ok(false)` when the same spec was already submitted, `Err(uri)`
    /// when another spec holds the id. Only the job's directory and its
    /// `submitted` are made ([`JobDir::make_run_dirs`] for the rest).
    pub(crate) fn claim(&self, spec_uri: &str) -> Result<bool, String> {
        let mut taken_over = false;
        loop {
            match self.create_with_submitted(spec_uri) {
                Ok(()) => return Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    // Where the directory is made in place, its creator
                    // writes `submitted` right after it.
                    let deadline = Instant::now() + Duration::from_secs(2);
                    loop {
                        if let Ok(existing) = std::fs::read_to_string(self.file("submitted")) {
                            return if existing == spec_uri {
                                Ok(false)
                            } else {
                                Err(existing)
                            };
                        }
                        if Instant::now() > deadline {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    // Still none: a submission cut between the two (made in
                    // place, as an older version or a file system that
                    // cannot refuse a rename does). Nothing ran from it (a
                    // job starts only once claimed): it is moved away and
                    // the job claimed anew, once.
                    if taken_over {
                        return Err("(an unfinished submission)".into());
                    }
                    taken_over = true;
                    let stale = self.beside("cut");
                    if std::fs::rename(&self.path, &stale).is_ok() {
                        let _ = std::fs::remove_dir_all(&stale);
                    }
                }
                Err(e) => return Err(format!("(cannot create {}: {e})", self.path.display())),
            }
        }
    }

    /// `.{job}.{what}-{pid}` beside the job's directory: a name no job
    /// listing takes for a job (it starts with a dot), this process's own.
    fn beside(&self, what: &str) -> PathBuf {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.path
            .with_file_name(format!(".{name}.{what}-{}", std::process::id()))
    }

    /// Create the job's directory holding its `submitted` (`spec_uri`) and
    /// an empty `output.log`, made here by the submitter rather than by
    /// whatever runs the job: a file made costs an inode, which on this
    /// machine's journal-less ext4 is dearest right after many were freed
    /// (a map after a map), and a worker's executor made the log of each
    /// input between the input before it and its call. The directory is
    /// made aside and renamed into place where the file system can refuse
    /// to replace what is there (one rename wins), so the directory never
    /// exists without `submitted`. Made first and written after, it was
    /// left so by a submitter killed in between, and a resubmission of the
    /// same job read it as another's unfinished submission (a resumed
    /// batch's input then failed). `AlreadyExists` when the job has one.
    fn create_with_submitted(&self, spec_uri: &str) -> std::io::Result<()> {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
            let aside = self.beside("tmp");
            let _ = std::fs::remove_dir_all(&aside);
            std::fs::create_dir(&aside)?;
            std::fs::write(aside.join("submitted"), spec_uri)?;
            File::create(aside.join("output.log"))?;
            match renameat2(
                AT_FDCWD,
                &aside,
                AT_FDCWD,
                &self.path,
                RenameFlags::RENAME_NOREPLACE,
            ) {
                Ok(()) => return Ok(()),
                Err(errno) => {
                    let _ = std::fs::remove_dir_all(&aside);
                    if errno == nix::errno::Errno::EEXIST || errno == nix::errno::Errno::ENOTEMPTY {
                        return Err(std::io::ErrorKind::AlreadyExists.into());
                    }
                    if errno != nix::errno::Errno::EINVAL && errno != nix::errno::Errno::ENOSYS {
                        return Err(errno.into());
                    }
                    // The file system cannot refuse: made in place below.
                }
            }
        }
        std::fs::create_dir(&self.path)?;
        File::create(self.log_path())?;
        write_atomic(&self.file("submitted"), spec_uri)
    }

    /// Take the right to start this claimed job's supervisor: true for
    /// the one caller that may start it. A claim whose submitter died
    /// before starting it (no pid after a few seconds) can be taken over,
    /// so a resubmission of the same job starts it instead of leaving it
    /// queued forever.
    pub(crate) fn take_launch(&self) -> bool {
        let launch = self.file("launch");
        // The launch names its submitter, so that a job whose submitter
        // died before starting it is known at once (`launch_abandoned`).
        // Written aside and linked into place (one link wins): a launch
        // created empty and then written was left empty by a submitter
        // killed in between, naming nobody, and read as a live claim.
        let create = || {
            let pid = std::process::id();
            let tmp = self.file(&format!("launch.tmp-{pid}"));
            let written = std::fs::write(&tmp, format!("{pid} {}", start_time_text(pid)))
                .and_then(|()| std::fs::hard_link(&tmp, &launch));
            let _ = std::fs::remove_file(&tmp);
            written.is_ok()
        };
        if create() {
            return true;
        }
        let stale = std::fs::metadata(&launch)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(5));
        if self.launched() || !(stale || self.launch_abandoned()) {
            return false;
        }
        std::fs::remove_file(&launch).is_ok() && create()
    }

    /// True when the submitter that took the launch is gone and did not
    /// start the job (killed between its claim and the start or the queue
    /// entry): nobody will start it unless it is submitted again.
    pub(crate) fn launch_abandoned(&self) -> bool {
        !self.launched() && self.submitter_gone()
    }

    /// True when the submitter that took the launch is dead: the process
    /// `launch` names, or, for a launch naming nobody (an older one
    /// created empty and killed before it was written), when it is older
    /// than [`POOL_START`]. A claim without a launch, older than
    /// [`POOL_START`], was left by a submitter killed between its claim and
    /// its launch (the launch is taken right after the claim, with nothing
    /// slow in between): read as a live claim, its job stayed queued, and
    /// a resumed batch waited for it forever.
    fn submitter_gone(&self) -> bool {
        match self.pid_file("launch") {
            Some((pid, start)) => !process_alive(pid, &start),
            None if self.file("launch").exists() => !self.younger("launch", POOL_START),
            None => self.file("submitted").exists() && !self.younger("submitted", POOL_START),
        }
    }

    /// True once a supervisor was started for the job, or it was queued
    /// on a worker pool.
    pub(crate) fn launched(&self) -> bool {
        self.file("pid").exists() || self.file("pooled").exists()
    }

    pub(crate) fn open_log(&self) -> std::io::Result<File> {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
    }

    /// Remember the supervisor's pid (also its process group) and start time.
    pub(crate) fn record_pid(&self, pid: u32) -> std::io::Result<()> {
        let start = start_time_text(pid);
        write_atomic(&self.file("pid"), &format!("{pid} {start}\n"))
    }

    /// Remember that the job's port `job_port` is the host's `host_port`.
    pub(crate) fn record_port(&self, job_port: u16, host_port: u16) -> std::io::Result<()> {
        write_atomic(
            &self.file(&format!("port-{job_port}")),
            &format!("{host_port}\n"),
        )
    }

    /// The host's port for the job's `job_port`, when one was recorded.
    pub(crate) fn host_port(&self, job_port: u16) -> Option<u16> {
        std::fs::read_to_string(self.file(&format!("port-{job_port}")))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// The supervisor's pid and start time, as recorded. A pid that no
    /// supervisor can have (init, 0 — this process's own group — or a
    /// negative one, which `kill` reads as "every process") is no pid:
    /// the job then counts as one whose process is gone, never as running.
    fn pid(&self) -> Option<(i32, String)> {
        let text = std::fs::read_to_string(self.file("pid")).ok()?;
        let mut parts = text.split_whitespace();
        let pid: i32 = parts.next()?.parse().ok()?;
        if pid <= 1 {
            tracing::debug!(
                "{}: the pid file names process {pid}, which cannot be the job's supervisor; the job counts as gone",
                self.file("pid").display()
            );
            return None;
        }
        Some((pid, parts.next().unwrap_or_default().to_owned()))
    }

    /// True while the supervisor process lives (and is the one we started,
    /// not a later process that reused its pid), or while any process of
    /// its group does: a runner whose supervisor was killed still runs.
    ///
    /// A job of a worker pool ([`JobDir::pool_dir`]) is alive too while the
    /// worker that claimed it lives (it starts the job's process, or
    /// records how it ended), and, before a worker claimed it, while its
    /// pool has a live worker: a queued job of a pool whose workers are
    /// all gone will never start, and counts as gone (once taken out of
    /// the queue: [`JobDir::unqueue`]).
    fn alive(&self, pools: &LivePools) -> Option<bool> {
        let own = self
            .pid()
            .map(|(pid, start)| process_alive(pid, &start) || group_alive(pid));
        if own == Some(true) {
            return own;
        }
        if let Some((pid, start)) = self.pid_file("worker") {
            return Some(process_alive(pid, &start));
        }
        match (own, self.pool_dir()) {
            // Just queued: its submitter starts a worker after queuing it.
            (None, Some(pool)) => {
                if pools.has_worker(&pool) || self.younger("pooled", POOL_START) {
                    return Some(true);
                }
                Some(!self.unqueue(&pool))
            }
            _ => own,
        }
    }

    /// A queued pooled job about to be reported gone (its pool has no live
    /// worker): take its entry out of the pool's queue first (of this
    /// unlink and a worker's claim, a rename, one wins), so that no worker
    /// started later runs a job already reported gone (it would write a result and an exit
    /// code under a status that said it ended without either). False when
    /// a worker won the entry in the meantime: the job is that worker's.
    /// Where the queue cannot be changed (a read-only view of the root),
    /// the job is reported gone all the same.
    fn unqueue(&self, pool: &Path) -> bool {
        let Some(id) = self.path.file_name().and_then(|n| n.to_str()) else {
            return true;
        };
        let suffix = format!(".{id}");
        let queue = pool.join("queue");
        let Ok(entries) = std::fs::read_dir(&queue) else {
            return true;
        };
        let mut gone = true;
        for entry in entries.filter_map(Result::ok) {
            if !entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.ends_with(&suffix))
            {
                continue;
            }
            match std::fs::remove_file(entry.path()) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => gone = false,
                Err(e) => tracing::debug!(
                    "cannot take {} out of its pool's queue: {e}",
                    entry.path().display()
                ),
                Ok(()) => {
                    // Reported gone: never read as stranded (not queued
                    // by its submitter) after, which would change the
                    // ended job's state.
                    let _ = std::fs::write(self.file("unqueued"), b"");
                }
            }
        }
        gone
    }

    /// A job queued on a pool that no queue entry names and no worker or
    /// process ever took, whose submitter (the process its `launch`
    /// names; without one, a job queued more than [`POOL_START`] ago) is
    /// dead: it died between writing `pooled` and queuing it. A
    /// resubmission queues it again (a worker skips a job already
    /// claimed). Waiting out an age instead read such a job as queued for
    /// its first seconds, long enough for a resume to follow it as pending
    /// and then see it gone.
    pub(crate) fn pooled_and_stranded(&self, job_id: &kinetic_core::ids::JobId) -> bool {
        // The submitter first: it is alive for almost every job read (most
        // often it is the process reading), and then nothing else is.
        let submitter_gone = if self.file("launch").exists() {
            self.submitter_gone()
        } else {
            !self.younger("pooled", POOL_START)
        };
        if !submitter_gone {
            return false;
        }
        let Some(pool) = self.pool_dir() else {
            return false;
        };
        let untouched = || {
            ["pid", "worker", "exit_code", "cancelled", "unqueued"]
                .iter()
                .all(|f| !self.file(f).exists())
        };
        if !untouched() {
            return false;
        }
        // Queued, or taken by a worker not yet named in `worker` (it
        // waits for a job slot with the entry in `claimed/`). A worker
        // names itself before it removes that entry: looked at again
        // after the folders, a job taken meanwhile is named.
        let suffix = format!(".{job_id}");
        let named = |dir: &str| {
            std::fs::read_dir(pool.join(dir)).is_ok_and(|entries| {
                entries
                    .filter_map(Result::ok)
                    .any(|e| e.file_name().to_str().is_some_and(|n| n.ends_with(&suffix)))
            })
        };
        !(named("queue") || named("claimed")) && untouched()
    }

    /// [`JobDir::pooled_and_stranded`] twice, 100 ms apart (a second
    /// look at a job its submitter may have been queuing as it died).
    fn stranded_in_pool(&self) -> bool {
        let Some(id) = self
            .path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.parse::<kinetic_core::ids::JobId>().ok())
        else {
            return false;
        };
        if !self.pooled_and_stranded(&id) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
        self.pooled_and_stranded(&id)
    }

    /// Whether file `name` was written less than `age` ago.
    fn younger(&self, name: &str, age: Duration) -> bool {
        std::fs::metadata(self.file(name))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|elapsed| elapsed < age)
    }

    /// The pool this job was queued on (`pooled` names it), if any.
    pub(crate) fn pool_dir(&self) -> Option<PathBuf> {
        let text = std::fs::read_to_string(self.file("pooled")).ok()?;
        let value: serde_json::Value = serde_json::from_str(&text).ok()?;
        value.get("pool")?.as_str().map(PathBuf::from)
    }

    /// Queue the job on a worker pool: `pooled` holds the pool and what a
    /// supervisor would be told (written before the job is queued).
    pub(crate) fn record_pooled(&self, launch: &serde_json::Value) -> std::io::Result<()> {
        write_atomic(&self.file("pooled"), &launch.to_string())
    }

    /// A pid file's pid and start time (see [`JobDir::pid`]).
    fn pid_file(&self, name: &str) -> Option<(i32, String)> {
        let text = std::fs::read_to_string(self.file(name)).ok()?;
        let mut parts = text.split_whitespace();
        let pid: i32 = parts.next()?.parse().ok()?;
        (pid > 1).then(|| (pid, parts.next().unwrap_or_default().to_owned()))
    }

    /// The exit code the supervisor recorded, if any.
    fn exit_code(&self) -> Option<i32> {
        std::fs::read_to_string(self.file("exit_code"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    pub(crate) fn observe(&self) -> Observed {
        self.observe_in(&LivePools::default())
    }

    /// [`JobDir::observe`] as one reading of many jobs (a group's status):
    /// a pool seen with a live worker by an earlier job of the same
    /// reading is not listed again (see [`LivePools`]).
    pub(crate) fn observe_in(&self, pools: &LivePools) -> Observed {
        if !self.exists() {
            return Observed::Missing;
        }
        let cancelled = self.file("cancelled").exists();
        let deadline = self.file("deadline_exceeded").exists();
        let exit_code = self.exit_code();
        match exit_code {
            Some(0) => return Observed::Exited(0),
            _ if deadline => return Observed::DeadlineExceeded,
            _ if cancelled => return Observed::Cancelled,
            Some(code) => return Observed::Exited(code),
            None => {}
        }
        let started = self.file("started").exists();
        if !started && self.pid_file("worker").is_none() && self.launch_abandoned() {
            // Its submission never reached a process or a queue: the
            // backend holds nothing that will run it (a resumed batch
            // submits it again under the same id).
            return Observed::Missing;
        }
        if !started && self.stranded_in_pool() {
            // Queued on a pool that no queue entry names and no worker
            // took, long after its submitter wrote `pooled`: the submitter
            // died in between. No worker will ever run it, however many
            // the pool has (a resumed batch's run there): the backend holds
            // nothing that will (a resume queues it again under its id).
            return Observed::Missing;
        }
        match (self.alive(pools), started) {
            (Some(true), true) => Observed::Running,
            (Some(true), false) | (None, false) => Observed::Queued,
            (None, true) | (Some(false), _) => {
                // The exit code or a deadline may have landed between the
                // reads above: read again now that every process is gone.
                if self.file("deadline_exceeded").exists() {
                    return Observed::DeadlineExceeded;
                }
                match self.exit_code() {
                    Some(code) => Observed::Exited(code),
                    None => Observed::Vanished,
                }
            }
        }
    }

    /// The attempts the supervisor recorded (`attempts.jsonl`, one line
    /// per ended attempt), and the one running after them (`attempt`:
    /// its number and the most attempts) when `running`.
    /// Numbered on from the runs the job's batch input made before it
    /// ([`JobDir::record_earlier_runs`]), as the job's `KINETIC_ATTEMPT` is.
    pub(crate) fn attempts(&self, running: bool) -> (Vec<Attempt>, Option<(u32, u32)>) {
        let text = std::fs::read_to_string(self.file("attempts.jsonl")).unwrap_or_default();
        if text.is_empty() && !self.file("attempt").exists() {
            return (Vec::new(), None);
        }
        let earlier = std::fs::read_to_string(self.file(EARLIER_RUNS_FILE))
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
            .unwrap_or(0);
        let stamp = |v: &serde_json::Value| {
            v.as_f64()
                .filter(|s| *s >= 0.0)
                .map(|s| UtcTimestamp::from_unix_seconds(s as u64))
        };
        let mut attempts: Vec<Attempt> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .map(|v| {
                let code = v["exit_code"].as_i64().unwrap_or(1);
                let failed = code != 0;
                Attempt {
                    number: u32::try_from(v["number"].as_u64().unwrap_or(0))
                        .unwrap_or(0)
                        .saturating_add(earlier),
                    host: format!("local process {}", v["pid"].as_u64().unwrap_or(0)),
                    started: stamp(&v["started"]),
                    ended: stamp(&v["ended"]),
                    outcome: Some(if failed {
                        Outcome::Failed
                    } else {
                        Outcome::Succeeded
                    }),
                    reason: failed.then(|| {
                        StatusReason::ExitCode {
                            code: i32::try_from(code).unwrap_or(1),
                        }
                        .to_string()
                    }),
                }
            })
            .collect();
        let current = std::fs::read_to_string(self.file("attempt"))
            .ok()
            .and_then(|t| {
                let mut parts = t.split_whitespace().map(|p| p.parse::<u32>().ok());
                Some((parts.next()??, parts.next()??))
            })
            .filter(|_| running)
            .map(|(n, of)| (n.saturating_add(earlier), of.saturating_add(earlier)));
        if let Some((n, _)) = current
            && attempts.iter().all(|a| a.number < n)
        {
            attempts.push(Attempt {
                number: n,
                host: "local process".into(),
                started: None,
                ended: None,
                outcome: None,
                reason: None,
            });
        }
        (attempts, current)
    }

    /// Keep the runs the job's batch input made before this job (its
    /// spec's `attempt_offset`): [`JobDir::attempts`] numbers on from them.
    pub(crate) fn record_earlier_runs(&self, runs: u32) -> std::io::Result<()> {
        if runs == 0 {
            return Ok(());
        }
        write_atomic(&self.file(EARLIER_RUNS_FILE), &format!("{runs}\n"))
    }

    /// Whether a cancel was asked for (the job may still be stopping).
    pub(crate) fn is_cancelled(&self) -> bool {
        self.file("cancelled").exists()
    }

    pub(crate) fn mark_cancelled(&self) -> std::io::Result<()> {
        write_atomic(&self.file("cancelled"), "cancelled\n")
    }

    /// SIGTERM the job's process group, then SIGKILL after `grace`;
    /// waits for the group to be gone for at most `wait.timeout`, looking
    /// every 25 ms (or `wait.poll_interval`, when shorter). Returns whether
    /// it is gone. When the wait ends within the grace period the job's
    /// supervisor, which got the SIGTERM too, kills the group at its end.
    ///
    /// A job of a worker pool whose worker lives is stopped by its worker
    /// instead (the worker then does the same): the process that runs it
    /// is the worker's executor, which runs the worker's next input once
    /// this one ended, so only the worker knows whether the process still
    /// runs this job. The worker is sent SIGUSR1 (it looks at the job's
    /// `cancelled`, written before), and the job counts as stopped once
    /// its exit code is recorded or its process group is gone. Should the
    /// worker die meanwhile, the group is signalled here as for any job.
    pub(crate) async fn kill_group(&self, grace: Duration, wait: CleanupWait) -> bool {
        let Some((pid, _)) = self.pid() else {
            return true;
        };
        let group = Pid::from_raw(pid);
        let started = Instant::now();
        let pause = wait.poll_interval.min(Duration::from_millis(25));
        if let Some(worker) = self.live_worker() {
            let _ = kill(worker, Signal::SIGUSR1);
            let worker_lives = || self.live_worker().is_some();
            if let Some(stopped) = self.wait_stopped(group, started, wait, worker_lives).await {
                return stopped;
            }
        }
        let _ = killpg(group, Signal::SIGTERM);
        let mut killed = false;
        loop {
            if self.stopped(group) {
                return true;
            }
            let elapsed = started.elapsed();
            if !killed && elapsed >= grace {
                let _ = killpg(group, Signal::SIGKILL);
                killed = true;
                continue;
            }
            if elapsed >= wait.timeout {
                return false;
            }
            let next = if killed {
                wait.timeout
            } else {
                grace.min(wait.timeout)
            };
            tokio::time::sleep(
                pause
                    .min(next.saturating_sub(elapsed))
                    .max(Duration::from_millis(1)),
            )
            .await;
        }
    }

    /// Waits for the job's process group to be gone, for at most
    /// `wait.timeout`, sending it nothing; whether it is gone.
    pub(crate) async fn wait_group_gone(&self, wait: CleanupWait) -> bool {
        let Some((pid, _)) = self.pid() else {
            return true;
        };
        let group = Pid::from_raw(pid);
        self.wait_stopped(group, Instant::now(), wait, || true)
            .await
            .unwrap_or(true)
    }

    /// Looks, every 25 ms (or `wait.poll_interval`, when shorter), whether
    /// the job [`JobDir::stopped`] while `go_on` holds: `Some(true)` once
    /// it did, `Some(false)` once `wait.timeout` passed since `started`,
    /// `None` once `go_on` no longer holds.
    async fn wait_stopped(
        &self,
        group: Pid,
        started: Instant,
        wait: CleanupWait,
        go_on: impl Fn() -> bool,
    ) -> Option<bool> {
        let pause = wait.poll_interval.min(Duration::from_millis(25));
        while go_on() {
            if self.stopped(group) {
                return Some(true);
            }
            let elapsed = started.elapsed();
            if elapsed >= wait.timeout {
                return Some(false);
            }
            tokio::time::sleep(
                pause
                    .min(wait.timeout - elapsed)
                    .max(Duration::from_millis(1)),
            )
            .await;
        }
        None
    }

    /// The worker that took this pooled job, while it lives.
    fn live_worker(&self) -> Option<Pid> {
        if !self.file("pooled").exists() {
            return None;
        }
        let (pid, start) = self.pid_file("worker")?;
        process_alive(pid, &start).then(|| Pid::from_raw(pid))
    }

    /// True once the job's process `group` is gone or, for a job of a
    /// worker pool (whose process, the worker's executor, lives on to run
    /// the next input), once its exit code is recorded.
    fn stopped(&self, group: Pid) -> bool {
        killpg(group, None).is_err()
            || (self.file("pooled").exists() && self.file("exit_code").exists())
    }

    pub(crate) fn logs_archived(&self) -> bool {
        self.file("logs_archived").exists()
    }

    pub(crate) fn mark_logs_archived(&self) {
        if let Some(jobs) = self.path.parent() {
            let _ = link_empty(jobs, &self.file("logs_archived"));
        }
    }

    pub(crate) fn read_log(&self) -> String {
        std::fs::read(self.log_path())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    pub(crate) fn remove(&self) -> std::io::Result<()> {
        match std::fs::remove_dir_all(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// Name `dest` as one more link of the empty file `{jobs}/.empty` (made
/// when missing, and made again when it has as many links as the file
/// system allows): an empty marker (a group's or a pool queue's entry,
/// `logs_archived`) costs no inode of its own. On the ext4 without a
/// journal this machine runs on, every inode made and freed per input is
/// what a map paid most for: making one skips each inode of its group
/// freed in the last seconds (`docs/performance.md`, "Where an input's
/// time goes"). A `dest` that exists already is left as it is (every
/// such marker is empty).
pub(crate) fn link_empty(jobs: &Path, dest: &Path) -> std::io::Result<()> {
    let shared = jobs.join(".empty");
    match std::fs::hard_link(&shared, dest) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.raw_os_error() == Some(nix::libc::EMLINK) =>
        {
            write_atomic(&shared, "")?;
            match std::fs::hard_link(&shared, dest) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                other => other,
            }
        }
        other => other,
    }
}

/// A process's start time as pid files record it (empty where unknown).
/// This process's own is read once.
pub(crate) fn start_time_text(pid: u32) -> String {
    if pid == std::process::id() {
        return own_start_time().to_owned();
    }
    process_stat(pid)
        .map(|(start, _)| start)
        .unwrap_or_default()
}

/// This process's start time as pid files record it, read once: every
/// job it submits names it in its `launch`.
fn own_start_time() -> &'static str {
    static OWN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    OWN.get_or_init(|| {
        process_stat(std::process::id())
            .map(|(start, _)| start)
            .unwrap_or_default()
    })
}

/// What `/proc/{pid}/stat` says of a process, where /proc exists: its
/// start time in clock ticks (field 22) and whether it is a zombie
/// (field 3). One read: the kernel builds the whole line for each.
fn process_stat(pid: u32) -> Option<(String, bool)> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// [`process_stat`] of the text of a `/proc/{pid}/stat`.
fn parse_stat(stat: &str) -> Option<(String, bool)> {
    // The command name (field 2) may hold spaces and parentheses; the
    // fields after it follow the last ')'.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let zombie = fields.next()? == "Z";
    let start = fields.nth(18)?.to_owned();
    Some((start, zombie))
}

/// True while process `pid` lives and is the one that started at `start`
/// (when known), not a later process that reused its pid. This process
/// is known alive without asking the kernel: the submitter a queued
/// job's `launch` names is most often the process reading it.
pub(crate) fn process_alive(pid: i32, start: &str) -> bool {
    if u32::try_from(pid).is_ok_and(|p| p == std::process::id()) {
        return start.is_empty() || start == own_start_time();
    }
    if kill(Pid::from_raw(pid), None).is_err() {
        return false;
    }
    match process_stat(pid as u32) {
        Some((now, zombie)) => !zombie && (start.is_empty() || now == start),
        None => true, // no /proc: trust the signal check
    }
}

/// The pools seen with a live worker during one reading of many jobs (a
/// group's status, once per poll): a batch's queued children all name the
/// same pool, and listing its workers (a directory and each worker's
/// `/proc` entry) for each of them cost a poll more than everything else
/// it read. Only a live worker is remembered: a pool seen without one is
/// listed again for the next job, since what follows (taking the job out
/// of the queue and reporting it gone) must not act on a listing made
/// before a worker started; a worker seen alive that dies during the
/// reading only leaves its queued jobs reported queued until the next.
#[derive(Debug, Default)]
pub(crate) struct LivePools(std::sync::Mutex<std::collections::HashSet<PathBuf>>);

impl LivePools {
    /// [`pool_has_worker`], remembered once true.
    pub(crate) fn has_worker(&self, pool: &Path) -> bool {
        let seen = |set: &std::collections::HashSet<PathBuf>| set.contains(pool);
        if seen(
            &self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        ) {
            return true;
        }
        let live = pool_has_worker(pool);
        if live {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(pool.to_path_buf());
        }
        live
    }
}

/// True while a worker of the pool at `pool` lives: one of the files
/// `{pool}/workers/{pid}-{start}[.leaving]` names a live process.
pub(crate) fn pool_has_worker(pool: &Path) -> bool {
    !live_workers(pool).is_empty()
}

/// The live workers of the pool at `pool`: (file name, leaving). A
/// worker's file `{pid}-{start}` is there for its whole life; it marks
/// itself leaving with a second file, `{pid}-{start}.leaving` (a worker of
/// an earlier version renamed its file to that name instead, and counts as
/// leaving too). Files of workers that are gone are removed; any other
/// name (a file being written aside, say) is left alone: it names no
/// worker, and removing it could break whoever writes it.
pub(crate) fn live_workers(pool: &Path) -> Vec<(String, bool)> {
    let dir = pool.join("workers");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let names: std::collections::BTreeSet<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .collect();
    let mut live = Vec::new();
    for name in &names {
        let (base, marker) = match name.strip_suffix(".leaving") {
            Some(base) => (base, true),
            None => (name.as_str(), false),
        };
        let Some((pid, start)) = worker_file_name(base) else {
            continue;
        };
        // A marker beside its worker's file is read with that file.
        if marker && names.contains(base) {
            continue;
        }
        if process_alive(pid, start) {
            let leaving = marker || names.contains(&format!("{base}.leaving"));
            live.push((base.to_owned(), leaving));
        } else {
            let _ = std::fs::remove_file(dir.join(name));
            if !marker {
                let _ = std::fs::remove_file(dir.join(format!("{base}.leaving")));
            }
        }
    }
    live
}

/// The pid and start time a worker's file name `{pid}-{start}` holds (the
/// start in clock ticks, empty where /proc could not say), or None for
/// any other name.
fn worker_file_name(name: &str) -> Option<(i32, &str)> {
    let (pid, start) = name.split_once('-')?;
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if pid.is_empty() || !digits(pid) || !digits(start) {
        return None;
    }
    let pid: i32 = pid.parse().ok()?;
    (pid > 1).then_some((pid, start))
}

/// True while process group `pgid` has a member that is not a zombie.
fn group_alive(pgid: i32) -> bool {
    if killpg(Pid::from_raw(pgid), None).is_err() {
        return false;
    }
    // A zombie leader keeps the group answering; look for a live member.
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true; // no /proc: trust the signal check
    };
    entries.filter_map(Result::ok).any(|entry| {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            return false;
        };
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let after = stat.rsplit_once(')')?.1.to_owned();
                let mut fields = after.split_whitespace();
                let state = fields.next()?.to_owned();
                let pgrp: i32 = fields.nth(1)?.parse().ok()?;
                Some(pgrp == pgid && state != "Z")
            })
            .unwrap_or(false)
    })
}

struct Follow {
    dir: JobDir,
    /// Events in the job's directory (the log growing, the exit code
    /// landing), armed before the first read; `None` where inotify is
    /// unavailable, and the log is polled.
    watch: Option<Watch>,
    offset: u64,
    partial: Vec<u8>,
    pending: std::collections::VecDeque<String>,
    done: bool,
}

/// The most a followed log reads at once: lines are handed out a chunk at
/// a time, so a huge log never sits in memory whole.
const FOLLOW_CHUNK: usize = 1 << 20;

impl Follow {
    /// Read what was appended since the last call (at most
    /// [`FOLLOW_CHUNK`]); true if anything was. Linear in the bytes read:
    /// complete lines are cut from the buffer in one pass, and only the
    /// unfinished last line is kept for the next read.
    fn read_more(&mut self) -> Result<bool, BackendError> {
        let read_err = |e: std::io::Error| {
            BackendError::other(format!(
                "cannot read {}: {e}",
                self.dir.log_path().display()
            ))
            .with_source(e)
        };
        let mut file = match File::open(self.dir.log_path()) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(read_err(e)),
        };
        file.seek(SeekFrom::Start(self.offset)).map_err(read_err)?;
        let before = self.partial.len();
        file.take(FOLLOW_CHUNK as u64)
            .read_to_end(&mut self.partial)
            .map_err(read_err)?;
        let read = self.partial.len() - before;
        if read == 0 {
            return Ok(false);
        }
        self.offset += read as u64;
        // Only the new bytes can hold a newline not yet seen.
        let mut start = 0;
        let mut scan = before;
        while let Some(pos) = memchr_newline(&self.partial[scan..]) {
            let end = scan + pos;
            let text = String::from_utf8_lossy(&self.partial[start..end]);
            self.pending.push_back(terminal_line(&text).to_owned());
            start = end + 1;
            scan = start;
        }
        self.partial.drain(..start);
        Ok(true)
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

/// A stream of the job's output lines that ends when the job has ended
/// and its log was read to the end.
pub(crate) fn follow(dir: JobDir) -> LogStream {
    let watch = Watch::directory(dir.path())
        .map_err(|e| tracing::debug!("following {} by polling: {e}", dir.path().display()))
        .ok();
    let state = Follow {
        dir,
        watch,
        offset: 0,
        partial: Vec::new(),
        pending: std::collections::VecDeque::new(),
        done: false,
    };
    Box::pin(futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(line) = st.pending.pop_front() {
                return Some((Ok(line), st));
            }
            if st.done {
                return None;
            }
            let ended = !matches!(st.dir.observe(), Observed::Queued | Observed::Running);
            match st.read_more() {
                Ok(true) => continue,
                Ok(false) if ended => {
                    st.done = true;
                    if !st.partial.is_empty() {
                        let rest = String::from_utf8_lossy(&st.partial).into_owned();
                        st.partial.clear();
                        if !rest.trim().is_empty() {
                            st.pending.push_back(terminal_line(&rest).to_owned());
                        }
                    }
                }
                Ok(false) => match &st.watch {
                    Some(watch) => {
                        let changed = tokio::time::timeout(FOLLOW_FALLBACK, watch.changed()).await;
                        if let Ok(Err(e)) = changed {
                            tracing::debug!("following by polling from now: {e}");
                            st.watch = None;
                        }
                    }
                    None => tokio::time::sleep(FOLLOW_POLL).await,
                },
                Err(e) => {
                    st.done = true;
                    return Some((Err(e), st));
                }
            }
        }
    }))
}

/// Make file `path` a minute old (older than [`POOL_START`]), for tests
/// of what counts as abandoned or stranded.
#[cfg(test)]
pub(crate) fn backdate(path: &Path) {
    let old = std::time::SystemTime::now() - Duration::from_secs(60);
    File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(old))
        .unwrap_or_else(|e| panic!("backdate {}: {e}", path.display()));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `job`'s launch names a process that has exited (a submitter
    /// killed mid-submission).
    fn launched_by_a_dead_process(job: &JobDir) {
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        gone.wait().unwrap();
        let pid = gone.id();
        std::fs::write(
            job.file("launch"),
            format!("{pid} {}", start_time_text(pid)),
        )
        .unwrap();
    }
    #[test]
    fn claim_is_idempotent_per_spec() {
        let dir = tempfile::tempdir().unwrap();
        let job = JobDir::new(dir.path().join("job-0000abcd"));
        assert_eq!(job.claim("file:///a/spec.json"), Ok(true));
        assert_eq!(job.claim("file:///a/spec.json"), Ok(false));
        assert_eq!(
            job.claim("file:///b/spec.json"),
            Err("file:///a/spec.json".into())
        );
    }

    /// A submitter killed while it claimed a job leaves at most its
    /// directory made aside, never the job's without `submitted`: the
    /// job's resubmission (a resumed batch's) claims it. One made in place
    /// and cut before its `submitted` (an older version's) is taken over.
    #[test]
    fn a_claim_cut_midway_leaves_the_job_to_its_resubmission() {
        let dir = tempfile::tempdir().unwrap();
        let cut = JobDir::new(dir.path().join("job-0000cafe"));
        std::fs::create_dir(dir.path().join("job-0000cafe")).unwrap();
        std::fs::write(dir.path().join("job-0000cafe/submitted.tmp-4194000"), "x").unwrap();
        assert_eq!(cut.claim("file:///c/spec.json"), Ok(true));
        assert_eq!(
            cut.read("submitted").as_deref(),
            Some("file:///c/spec.json")
        );
        let job = JobDir::new(dir.path().join("job-0000abcd"));
        // What a killed claim leaves: its aside directory, and at most an
        // unfinished `submitted` in it.
        let aside = dir.path().join(".job-0000abcd.tmp-4194000");
        std::fs::create_dir(&aside).unwrap();
        std::fs::write(aside.join("submitted"), "file:///a/sp").unwrap();
        assert_eq!(job.claim("file:///a/spec.json"), Ok(true));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("job-0000abcd/submitted")).unwrap(),
            "file:///a/spec.json"
        );
        let mut names: Vec<String> = std::fs::read_dir(dir.path().join("job-0000abcd"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["output.log", "submitted"],
            "nothing else is made in place"
        );
        assert_eq!(job.read_log(), "", "the log is there, empty");
    }

    #[test]
    fn one_reading_remembers_a_pool_seen_with_a_live_worker_but_never_one_seen_without() {
        let dir = tempfile::tempdir().unwrap();
        let workers = dir.path().join("workers");
        std::fs::create_dir_all(&workers).unwrap();
        let me = std::process::id();
        let mine = workers.join(format!("{me}-{}", start_time_text(me)));
        // No worker yet: not remembered, so a worker that starts during
        // the reading is seen by the next job.
        let reading = LivePools::default();
        assert!(!reading.has_worker(dir.path()));
        std::fs::write(&mine, b"").unwrap();
        assert!(reading.has_worker(dir.path()));
        // Seen alive once: not listed again within this reading...
        std::fs::remove_file(&mine).unwrap();
        assert!(reading.has_worker(dir.path()));
        // ...while the next reading lists the pool again.
        assert!(!LivePools::default().has_worker(dir.path()));
    }

    #[test]
    fn a_claim_makes_no_run_directories_until_asked() {
        let dir = tempfile::tempdir().unwrap();
        let job = JobDir::new(dir.path().join("job-0000abcd"));
        assert_eq!(job.claim("s"), Ok(true));
        assert!(!job.work_path().exists() && !job.mounts_path().exists());
        job.make_run_dirs().unwrap();
        assert!(job.work_path().is_dir() && job.mounts_path().is_dir());
    }

    #[test]
    fn a_claim_whose_submitter_died_before_starting_it_can_be_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let job = JobDir::new(dir.path().join("job-0000abcd"));
        job.claim("s").unwrap();
        assert!(job.take_launch(), "the first submitter starts it");
        assert!(!job.take_launch(), "a fresh launch is not taken over");
        backdate(&job.file("launch"));
        assert!(
            job.take_launch(),
            "a stale launch without a pid is taken over"
        );
        job.record_pid(std::process::id()).unwrap();
        assert!(job.launched());
    }

    #[test]
    fn a_claim_left_without_its_launch_is_missing_once_old_and_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let job = JobDir::new(dir.path().join("job-0000abcd"));
        // A submitter killed between its claim and its launch (the launch
        // written aside, not linked yet).
        job.claim("s").unwrap();
        std::fs::write(job.file("launch.tmp-999999"), "999999 1").unwrap();
        assert!(
            matches!(job.observe(), Observed::Queued),
            "a fresh claim is its submitter's to start"
        );
        backdate(&job.file("submitted"));
        assert!(job.launch_abandoned());
        assert!(
            matches!(job.observe(), Observed::Missing),
            "nobody will start it: a resumed batch submits it again"
        );
        assert_eq!(job.claim("s"), Ok(false));
        assert!(job.take_launch(), "the resubmission starts it");
        assert!(!job.launch_abandoned(), "its launch names a live submitter");
    }

    #[test]
    fn a_launch_whose_submitter_is_dead_is_missing_and_taken_over_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let job = JobDir::new(dir.path().join("job-0000abcd"));
        job.claim("s").unwrap();
        assert!(job.take_launch());
        // Its submitter lives (this process): queued, not taken over.
        assert!(!job.launch_abandoned());
        assert!(matches!(job.observe(), Observed::Queued));
        assert!(!job.take_launch());
        // A submitter killed between its launch and the start or the
        // queue entry (`kinetic map` killed by SIGKILL mid-submission).
        launched_by_a_dead_process(&job);
        assert!(job.launch_abandoned());
        assert!(
            matches!(job.observe(), Observed::Missing),
            "nothing will start it: the backend does not hold it"
        );
        assert!(job.take_launch(), "a resubmission starts it at once");
        job.record_pid(std::process::id()).unwrap();
        assert!(!job.launch_abandoned());
    }

    /// A launch created empty, its submitter killed before writing it
    /// (as launches were made before they were written aside and linked):
    /// once old, nobody's claim, so the job is not held. It read as a
    /// live claim for ever, and a resume followed it as pending for ever.
    #[test]
    fn a_launch_naming_nobody_is_abandoned_once_old_and_a_new_one_is_never_empty() {
        let dir = tempfile::tempdir().unwrap();
        let job = JobDir::new(dir.path().join("job-0000abcd"));
        job.claim("s").unwrap();
        std::fs::write(job.file("launch"), b"").unwrap();
        assert!(
            !job.launch_abandoned(),
            "just made: its submitter may be writing it"
        );
        backdate(&job.file("launch"));
        assert!(job.launch_abandoned());
        assert!(matches!(job.observe(), Observed::Missing));
        assert!(job.take_launch(), "a resubmission takes it over");
        let text = std::fs::read_to_string(job.file("launch")).unwrap();
        assert!(
            text.starts_with(&format!("{} ", std::process::id())),
            "{text:?}"
        );
        let names: Vec<String> = std::fs::read_dir(job.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.contains(".tmp-")), "{names:?}");
    }

    /// A pooled job no queue entry names whose submitter (its launch) is
    /// dead is stranded at once, without waiting out an age: a resume
    /// that looked within that age followed it as pending, then saw it
    /// `NOT_FOUND` and failed the input. While its submitter lives it is
    /// not, however old.
    #[test]
    fn a_pooled_job_is_stranded_when_its_submitter_is_dead_not_when_it_is_old() {
        let dir = tempfile::tempdir().unwrap();
        let pool = dir.path().join("pool");
        std::fs::create_dir_all(pool.join("queue")).unwrap();
        let id: kinetic_core::ids::JobId = "job-0000abcd".parse().unwrap();
        let job = JobDir::new(dir.path().join(id.as_str()));
        job.claim("s").unwrap();
        assert!(job.take_launch());
        job.record_pooled(&serde_json::json!({"pool": pool.to_string_lossy(), "args": []}))
            .unwrap();
        backdate(&job.file("pooled"));
        assert!(
            !job.pooled_and_stranded(&id),
            "its submitter (this process) is at it"
        );
        launched_by_a_dead_process(&job);
        job.record_pooled(&serde_json::json!({"pool": pool.to_string_lossy(), "args": []}))
            .unwrap();
        assert!(
            job.pooled_and_stranded(&id),
            "just written, but by a dead submitter"
        );
        assert_eq!(job.observe(), Observed::Missing);
    }

    #[test]
    fn an_empty_marker_is_a_link_of_the_shared_empty_file_made_again_when_gone() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let jobs = dir.path();
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        link_empty(jobs, &jobs.join("a")).unwrap();
        link_empty(jobs, &jobs.join("b")).unwrap();
        assert_eq!(ino(&jobs.join("a")), ino(&jobs.join(".empty")));
        assert_eq!(ino(&jobs.join("b")), ino(&jobs.join(".empty")));
        link_empty(jobs, &jobs.join("a")).unwrap(); // there already: left as it is
        std::fs::remove_file(jobs.join(".empty")).unwrap();
        link_empty(jobs, &jobs.join("c")).unwrap();
        assert_eq!(ino(&jobs.join("c")), ino(&jobs.join(".empty")));
        assert_ne!(ino(&jobs.join("c")), ino(&jobs.join("a")));
        for name in ["a", "b", "c", ".empty"] {
            assert_eq!(std::fs::read(jobs.join(name)).unwrap(), b"", "{name}");
        }
        assert!(link_empty(jobs, &jobs.join("no-such-dir/d")).is_err());
    }

    #[test]
    fn a_stat_line_gives_the_start_and_whether_a_zombie_whatever_the_name() {
        let line = |name: &str, state: &str| {
            format!(
                "4242 ({name}) {state} 1 4242 4242 0 -1 4194560 120 0 0 0 1 2 0 0 20 0 1 0 98765 12345 67\n"
            )
        };
        assert_eq!(
            parse_stat(&line("python3", "S")),
            Some(("98765".to_owned(), false))
        );
        assert_eq!(
            parse_stat(&line("a) Z (b", "R")),
            Some(("98765".to_owned(), false)),
            "a name that looks like fields"
        );
        assert_eq!(
            parse_stat(&line("python3", "Z")),
            Some(("98765".to_owned(), true))
        );
        assert_eq!(parse_stat("4242 (cut"), None);
        assert_eq!(parse_stat("4242 (short) S 1 2"), None);
    }

    #[test]
    fn this_process_is_alive_as_recorded_and_a_reused_pid_is_not() {
        let me = std::process::id();
        let start = start_time_text(me);
        assert!(!start.is_empty());
        assert_eq!(
            start,
            parse_stat(&std::fs::read_to_string("/proc/self/stat").unwrap())
                .unwrap()
                .0,
            "what a pid file records of it"
        );
        let me = i32::try_from(me).unwrap();
        assert!(process_alive(me, &start));
        assert!(process_alive(me, ""), "a pid file without a start");
        assert!(
            !process_alive(me, "1"),
            "another process that had this pid, started at boot"
        );
        let child = std::process::Command::new("true").spawn().unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let child_start = start_time_text(child.id());
        let mut child = child;
        child.wait().unwrap();
        assert!(
            !process_alive(pid, &child_start),
            "a process that ended and was reaped"
        );
    }

    #[test]
    fn observe_follows_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let job = JobDir::new(dir.path().join("j"));
        assert_eq!(job.observe(), Observed::Missing);
        job.claim("s").unwrap();
        assert_eq!(job.observe(), Observed::Queued, "just claimed, no pid yet");
        job.record_pid(std::process::id()).unwrap();
        assert_eq!(job.observe(), Observed::Queued);
        write_atomic(&job.file("started"), "{}").unwrap();
        assert_eq!(job.observe(), Observed::Running);
        write_atomic(&job.file("exit_code"), "3\n").unwrap();
        assert_eq!(job.observe(), Observed::Exited(3));
        job.mark_cancelled().unwrap();
        assert_eq!(job.observe(), Observed::Cancelled);
    }

    #[test]
    fn a_dead_process_without_exit_code_vanished() {
        let dir = tempfile::tempdir().unwrap();
        let job = JobDir::new(dir.path().join("j"));
        job.claim("s").unwrap();
        // A pid that cannot be alive (beyond pid_max).
        write_atomic(&job.file("pid"), "2147483646 1\n").unwrap();
        write_atomic(&job.file("started"), "{}").unwrap();
        assert_eq!(job.observe(), Observed::Vanished);
    }

    #[test]
    fn a_pid_file_naming_init_or_no_process_is_a_vanished_job() {
        // Issue 25.9: "1" (init, always alive) kept the job RUNNING forever;
        // 0 and negative pids name this process's group or every process.
        for text in ["1\n", "1 1\n", "0 5\n", "-1\n", "-4242 7\n"] {
            let dir = tempfile::tempdir().unwrap();
            let job = JobDir::new(dir.path().join("j"));
            job.claim("s").unwrap();
            write_atomic(&job.file("pid"), text).unwrap();
            write_atomic(&job.file("started"), "{}").unwrap();
            assert_eq!(job.observe(), Observed::Vanished, "{text:?}");
        }
    }

    #[test]
    fn a_passed_deadline_is_reported_unless_the_job_succeeded() {
        let dir = tempfile::tempdir().unwrap();
        let job = JobDir::new(dir.path().join("j"));
        job.claim("s").unwrap();
        job.record_pid(std::process::id()).unwrap();
        write_atomic(&job.file("started"), "{}").unwrap();
        write_atomic(&job.file("deadline_exceeded"), "2\n").unwrap();
        assert_eq!(job.observe(), Observed::DeadlineExceeded, "still dying");
        write_atomic(&job.file("exit_code"), "-15\n").unwrap();
        assert_eq!(job.observe(), Observed::DeadlineExceeded);
        write_atomic(&job.file("exit_code"), "0\n").unwrap();
        assert_eq!(job.observe(), Observed::Exited(0), "it ended in time");
    }

    #[test]
    fn a_runner_outliving_its_supervisor_is_still_running() {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        let job = JobDir::new(dir.path().join("j"));
        job.claim("s").unwrap();
        write_atomic(&job.file("started"), "{}").unwrap();
        // A group whose leader (the "supervisor") exits at once, leaving
        // its child (the "runner") behind.
        let mut leader = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & exit 0"])
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = leader.id() as i32;
        job.record_pid(leader.id()).unwrap();
        leader.wait().unwrap();
        assert_eq!(job.observe(), Observed::Running);
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        let deadline = Instant::now() + Duration::from_secs(10);
        while job.observe() == Observed::Running {
            assert!(Instant::now() < deadline, "the group never emptied");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(job.observe(), Observed::Vanished);
    }

    #[test]
    fn a_pools_registry_counts_live_workers_and_their_markers_and_leaves_other_files_alone() {
        // The flake of `an_input_that_exits_its_process_fails_alone_and_its_
        // worker_goes_on`: a reader took a starting worker's file, written
        // aside as `{pid}-{start}.tmp-{pid}`, for a dead worker's and
        // removed it; the worker's rename then failed, it died before
        // taking a job, and the job it was started for was reported gone.
        let dir = tempfile::tempdir().unwrap();
        let pool = dir.path();
        let workers = pool.join("workers");
        std::fs::create_dir_all(&workers).unwrap();
        let me = std::process::id();
        let name = format!("{me}-{}", start_time_text(me));
        let aside = workers.join(format!("{name}.tmp-{me}"));
        std::fs::write(&aside, b"").unwrap();
        assert!(
            live_workers(pool).is_empty(),
            "a file being written names no worker"
        );
        assert!(aside.exists(), "and is not a dead worker's to remove");

        std::fs::write(workers.join(&name), b"").unwrap();
        assert_eq!(live_workers(pool), vec![(name.clone(), false)]);
        let marker = workers.join(format!("{name}.leaving"));
        std::fs::write(&marker, b"").unwrap();
        assert_eq!(live_workers(pool), vec![(name.clone(), true)], "leaving");
        // A worker of an earlier version renamed its file instead.
        std::fs::remove_file(workers.join(&name)).unwrap();
        assert_eq!(live_workers(pool), vec![(name.clone(), true)]);

        // A dead worker's file and marker go.
        let dead = workers.join("999999999-1");
        let dead_marker = workers.join("999999999-1.leaving");
        std::fs::write(&dead, b"").unwrap();
        std::fs::write(&dead_marker, b"").unwrap();
        assert_eq!(live_workers(pool), vec![(name, true)]);
        assert!(!dead.exists() && !dead_marker.exists());
        assert!(aside.exists());
    }

    #[test]
    fn following_a_log_hands_out_every_line_once() {
        let dir = tempfile::tempdir().unwrap();
        let job = JobDir::new(dir.path().join("j"));
        job.claim("s").unwrap();
        let mut follow = Follow {
            dir: job.clone(),
            watch: None,
            offset: 0,
            partial: Vec::new(),
            pending: std::collections::VecDeque::new(),
            done: false,
        };
        // Lines cut across reads, and more than one chunk of them.
        let line = "x".repeat(99);
        let mut text = String::new();
        for i in 0..(FOLLOW_CHUNK / 50) {
            text.push_str(&format!("{i} {line}\n"));
        }
        std::fs::write(job.log_path(), &text[..1000]).unwrap();
        assert!(follow.read_more().unwrap());
        std::fs::write(job.log_path(), &text).unwrap();
        while follow.read_more().unwrap() {}
        let got: Vec<String> = follow.pending.drain(..).collect();
        let want: Vec<&str> = text.lines().collect();
        assert_eq!(got.len(), want.len());
        assert!(got.iter().zip(&want).all(|(g, w)| g == w));
        assert!(follow.partial.is_empty());
    }
}
