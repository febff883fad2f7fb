//! The batch state machine: `(state, event) → (state, commands)`, no IO.
//!
//! [`BatchMachine`] holds one [`Slot`] per input. The engine feeds it
//! [`Event`]s (a submission came back, a poll observed a job, the user
//! cancelled…) and carries out the [`Command`]s it returns (submit this
//! input, cancel that job…). Everything a batch decides — how many jobs are
//! in flight, when an input is retried, what fail-fast stops, what counts as
//! done — is decided here, so it can be tested exhaustively without a
//! backend or a store.
//!
//! The rules are on [`BatchMachine`].

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::time::Duration;

use serde::Serialize;

use super::input::InputMode;
use super::manifest::{MAX_DETERMINISTIC_ATTEMPT, child_job_id};
use crate::ids::{GroupId, JobId};
use crate::status::JobStatus;

/// Kinetic's default `max_concurrent`.
pub const DEFAULT_MAX_CONCURRENT: usize = 64;

/// A batch's settings: how it submits, retries and stops, what it is
/// called, how its inputs become arguments, and how often it polls and
/// writes its manifest. One value for the whole batch: the machine reads
/// the first four, the engine the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchConfig {
    /// Inputs in flight at once (being submitted, or submitted and not
    /// ended); `None` = no limit. Default 64.
    pub max_concurrent: Option<usize>,
    /// Extra attempts per input whose job fails (or whose submission fails
    /// with a retryable error that no layer retried already). Default 0.
    pub retries: u32,
    /// Stop submitting once an input failed for good. Default false.
    pub fail_fast: bool,
    /// With `fail_fast`: also cancel the jobs still running. Default false.
    pub cancel_running_on_fail: bool,
    /// A name for the batch (the manifest's `group_name`).
    pub name: Option<String>,
    /// Tags recorded in the manifest.
    pub tags: BTreeMap<String, String>,
    /// How each input becomes the call's arguments. Default `auto`.
    pub input_mode: InputMode,
    /// Time between status polls of the batch. Default 1 s.
    pub poll_interval: Duration,
    /// Shortest time between two manifest writes. Default 250 ms.
    pub manifest_interval: Duration,
    /// Submissions (`spec.json`, `handle.json`, backend submit) in progress
    /// at once. Default 16.
    pub submit_parallelism: usize,
    /// How the inputs' jobs share processes: on a pool of worker processes
    /// (the default) where the backend has them, or one process per input.
    pub isolation: Isolation,
}

/// How a batch's inputs share processes ([`BatchConfig::isolation`]).
///
/// Every input keeps its own job either way: its own id, status, result
/// or error, attempts, logs and cancel. Only the processes differ.
///
/// ```
/// use kinetic_core::batch::Isolation;
/// assert_eq!("process".parse::<Isolation>(), Ok(Isolation::Process));
/// assert_eq!(Isolation::default().to_string(), "workers");
/// assert!("threads".parse::<Isolation>().unwrap_err().to_string().contains("workers or process"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[non_exhaustive]
pub enum Isolation {
    /// The batch's inputs run on a pool of at most `max_concurrent`
    /// long-lived worker processes (the backend's parallelism when
    /// unlimited): a worker starts its interpreter and loads the runner
    /// once, then calls the function for input after input in one
    /// interpreter, so an input that kills that interpreter (`os._exit`, a
    /// segfault, the OOM killer) ends alone and the worker starts another.
    /// Backends without pools run one process per
    /// input, as [`Isolation::Process`].
    #[default]
    Workers,
    /// One fresh interpreter per input (the isolation of a job run on its
    /// own): for functions whose import or state must not be shared.
    Process,
}

impl Isolation {
    /// Its name, as `isolation=` and `--isolation` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Workers => "workers",
            Self::Process => "process",
        }
    }
}

impl fmt::Display for Isolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Isolation {
    type Err = BatchConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "workers" => Ok(Self::Workers),
            "process" => Ok(Self::Process),
            other => Err(BatchConfigError {
                message: format!("isolation must be workers or process, got {other:?}"),
            }),
        }
    }
}

impl Default for BatchConfig {
    fn default() -> Self {
        Self {
            max_concurrent: Some(DEFAULT_MAX_CONCURRENT),
            retries: 0,
            fail_fast: false,
            cancel_running_on_fail: false,
            name: None,
            tags: BTreeMap::new(),
            input_mode: InputMode::Auto,
            poll_interval: Duration::from_secs(1),
            manifest_interval: Duration::from_millis(250),
            submit_parallelism: 16,
            isolation: Isolation::Workers,
        }
    }
}

/// Why a [`BatchConfig`] cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct BatchConfigError {
    /// What is wrong, naming the setting and what it accepts.
    pub message: String,
}

impl BatchConfig {
    /// At most `limit` inputs in flight (`None` = no limit).
    pub fn max_concurrent(mut self, limit: Option<usize>) -> Self {
        self.max_concurrent = limit;
        self
    }

    /// Retry each failed input up to `retries` times.
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// Stop after the first failed input; with `cancel_running_on_fail`,
    /// also cancel the jobs still running.
    pub fn fail_fast(mut self, fail_fast: bool, cancel_running_on_fail: bool) -> Self {
        self.fail_fast = fail_fast;
        self.cancel_running_on_fail = cancel_running_on_fail;
        self
    }

    /// Name the batch.
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self
    }

    /// Add a tag.
    pub fn tag(mut self, key: &str, value: &str) -> Self {
        self.tags.insert(key.to_owned(), value.to_owned());
        self
    }

    /// How inputs become arguments.
    pub fn input_mode(mut self, mode: InputMode) -> Self {
        self.input_mode = mode;
        self
    }

    /// Time between status polls.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// Shortest time between manifest writes.
    pub fn manifest_interval(mut self, interval: Duration) -> Self {
        self.manifest_interval = interval;
        self
    }

    /// Submissions in progress at once (at least 1).
    pub fn submit_parallelism(mut self, n: usize) -> Self {
        self.submit_parallelism = n.max(1);
        self
    }

    /// Run the inputs on worker processes, or one process each.
    pub fn isolation(mut self, isolation: Isolation) -> Self {
        self.isolation = isolation;
        self
    }

    /// Check the settings a batch cannot run with.
    ///
    /// # Errors
    /// [`BatchConfigError`] naming the setting and what it accepts: a
    /// `max_concurrent` of 0, a `poll_interval` of zero or longer than a
    /// year, `retries` past the attempts a child's id can number.
    pub fn validate(&self) -> Result<(), BatchConfigError> {
        let refuse = |message: String| Err(BatchConfigError { message });
        if self.max_concurrent == Some(0) {
            return refuse(
                "max_concurrent must be a positive integer (or None for no limit), got 0".into(),
            );
        }
        if self.poll_interval.is_zero()
            || self.poll_interval > Duration::from_secs(crate::settings::MAX_SECONDS)
        {
            return refuse(format!(
                "poll_interval must be longer than zero and at most {} s",
                crate::settings::MAX_SECONDS
            ));
        }
        if self.retries >= MAX_DETERMINISTIC_ATTEMPT {
            return refuse(format!(
                "retries must be at most {}, got {}",
                MAX_DETERMINISTIC_ATTEMPT - 1,
                self.retries
            ));
        }
        Ok(())
    }

    fn max_attempts(&self) -> u32 {
        self.retries.saturating_add(1)
    }
}

/// Why an input was never submitted (or is not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SkipReason {
    /// Dropped from the queue when fail-fast stopped the batch.
    FailFast,
    /// Dropped from the queue when the batch was cancelled.
    Cancelled,
    /// An attached batch whose manifest never named this input before the
    /// attach gave up polling.
    NotInManifest,
    /// The manifest names a job for this input but its record cannot be read.
    Unavailable,
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::FailFast => "not submitted: the batch stopped after a failure (fail-fast)",
            Self::Cancelled => "not submitted: the batch was cancelled",
            Self::NotInManifest => {
                "never submitted: the batch manifest names no job for it and none was found (resume the batch to submit it)"
            }
            Self::Unavailable => "its job record cannot be read",
        })
    }
}

/// Where one input is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    /// Not known here: an attached batch whose manifest does not name it
    /// (yet), or a submission that was interrupted.
    Unknown,
    /// Waiting to be submitted, after `attempts` earlier attempts.
    Queued {
        /// Attempts made so far.
        attempts: u32,
    },
    /// A submission is in flight.
    Submitting {
        /// Which attempt (1-based).
        attempt: u32,
    },
    /// Submitted and not ended.
    Active {
        /// The job.
        job_id: JobId,
        /// Which attempt (1-based).
        attempt: u32,
        /// Last observed status (`PENDING` or `RUNNING`).
        status: JobStatus,
    },
    /// The job ended and will not be retried (terminal).
    Ended {
        /// The job.
        job_id: JobId,
        /// Which attempt (1-based).
        attempt: u32,
        /// `SUCCEEDED`, `FAILED` or `NOT_FOUND`.
        status: JobStatus,
    },
    /// The input could not be submitted (terminal).
    SubmitFailed {
        /// Attempts made.
        attempts: u32,
    },
    /// Never submitted, or not followed (terminal).
    Skipped {
        /// Why.
        reason: SkipReason,
    },
}

impl Slot {
    /// True for a slot that never changes again.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Self::Ended { .. } | Self::SubmitFailed { .. } | Self::Skipped { .. }
        )
    }

    /// The job of this slot, once submitted.
    pub fn job_id(&self) -> Option<&JobId> {
        match self {
            Self::Active { job_id, .. } | Self::Ended { job_id, .. } => Some(job_id),
            _ => None,
        }
    }

    /// The job's status, once submitted.
    pub fn status(&self) -> Option<JobStatus> {
        match self {
            Self::Active { status, .. } | Self::Ended { status, .. } => Some(*status),
            _ => None,
        }
    }

    fn in_flight(&self) -> bool {
        matches!(self, Self::Submitting { .. } | Self::Active { .. })
    }
}

/// What happened, as the engine tells the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// Submit whatever the limit allows (at the start, or after a change of
    /// capacity the machine did not see).
    Pump,
    /// The submission of `index` returned a job.
    Submitted {
        /// The input.
        index: usize,
        /// Its job.
        job_id: JobId,
    },
    /// The submission of `index` failed.
    SubmitFailed {
        /// The input.
        index: usize,
        /// Whether the error was transient (retrying may help).
        retryable: bool,
    },
    /// A poll saw the job `job_id` of `index` in `status`. Stale
    /// observations (of an earlier attempt, or of an ended slot) are ignored.
    Observed {
        /// The input.
        index: usize,
        /// The job observed.
        job_id: JobId,
        /// Its status.
        status: JobStatus,
    },
    /// [`Event::Observed`], for a batch submitted in one call whose
    /// backend runs the input no more: it would have named the next
    /// attempt's child in the same read (see
    /// [`BatchMachine::indexed`]). A failure then ends the input at this
    /// attempt, with its own error, instead of following an attempt that
    /// never comes.
    ObservedLast {
        /// The input.
        index: usize,
        /// The job observed.
        job_id: JobId,
        /// Its status.
        status: JobStatus,
    },
    /// The user cancelled the batch.
    Cancel,
    /// A job submitted by another process (or before a crash) was found for
    /// an [`Slot::Unknown`] input: follow it.
    Adopt {
        /// The input.
        index: usize,
        /// The job.
        job_id: JobId,
        /// Its attempt number (1-based).
        attempts: u32,
    },
    /// An [`Slot::Unknown`] input must be submitted again after `attempts`
    /// earlier attempts (its last one never reached the backend).
    Requeue {
        /// The input.
        index: usize,
        /// Attempts made so far.
        attempts: u32,
    },
    /// A resumed batch's input followed as pending whose job the backend
    /// does not hold (its submission never reached it, or the job is gone):
    /// [`Slot::Unknown`] again, so the resume probes it as it probes the
    /// inputs the manifest does not name. Only a pending active slot
    /// changes.
    Forget {
        /// The input.
        index: usize,
    },
    /// Resume a batch: every [`Slot::Unknown`] input is queued (after the
    /// ones already queued) after the attempts known for it, then
    /// submission continues.
    Resume,
    /// The manifest will name no more children: every [`Slot::Unknown`]
    /// input is skipped.
    CloseManifest,
    /// The manifest names a job for `index` whose record cannot be read.
    Unavailable {
        /// The input.
        index: usize,
    },
    /// The submission loop stopped before the end (its process is going
    /// away): queued inputs and submissions in flight become
    /// [`Slot::Unknown`], to be found or resubmitted by a resume.
    Abandon,
    /// An indexed batch ([`BatchMachine::indexed`]): the one submission
    /// ([`Command::SubmitBatch`]) started every input being submitted as
    /// its attempt-1 child.
    BatchSubmitted,
    /// An indexed batch: the one submission failed; every input being
    /// submitted is queued again when `retryable` and attempts are left,
    /// else fails to submit.
    BatchSubmitFailed {
        /// Whether the error was transient (retrying may help).
        retryable: bool,
    },
}

/// What the engine must do.
#[derive(Debug, Clone, PartialEq, Eq)]
// Exhaustive on purpose: the engine matches every variant, so a new
// one is a compile error there rather than a case it silently skips.
pub enum Command {
    /// Submit input `index` as attempt `attempt`, then report
    /// [`Event::Submitted`] or [`Event::SubmitFailed`].
    Submit {
        /// The input.
        index: usize,
        /// The attempt (1-based).
        attempt: u32,
    },
    /// Cancel the job.
    Cancel {
        /// The input.
        index: usize,
        /// The job.
        job_id: JobId,
    },
    /// Remove the backend resources of a failed attempt that is retried
    /// (its stored artifacts stay, for inspection).
    Cleanup {
        /// The input.
        index: usize,
        /// The failed job.
        job_id: JobId,
    },
    /// An indexed batch ([`BatchMachine::indexed`]): submit every input
    /// being submitted (all of them, at attempt 1) in one call, then report
    /// [`Event::BatchSubmitted`] or [`Event::BatchSubmitFailed`].
    SubmitBatch,
    /// An indexed batch: stop it as a whole, the backend's one call
    /// (`end_batch`): start no more of its inputs and, with
    /// `cancel_running`, stop the running ones too.
    StopBatch {
        /// Cancel the inputs running (a cancel, or fail-fast with
        /// `cancel_running_on_fail`).
        cancel_running: bool,
    },
    /// The manifest's children changed: input `index` now has job `job_id`
    /// after `attempts` attempts.
    RecordChild {
        /// The input.
        index: usize,
        /// Its current job.
        job_id: JobId,
        /// Attempts made.
        attempts: u32,
    },
}

/// Inputs by where they are. The fields always sum to the batch's total.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BatchCounts {
    /// Not known here (attached batch still being submitted elsewhere, or
    /// an interrupted submission).
    pub unknown: usize,
    /// Waiting to be submitted.
    pub queued: usize,
    /// Being submitted.
    pub submitting: usize,
    /// Submitted, `PENDING`.
    pub pending: usize,
    /// `RUNNING`.
    pub running: usize,
    /// Ended `SUCCEEDED`.
    pub succeeded: usize,
    /// Ended `FAILED`.
    pub failed: usize,
    /// Ended `NOT_FOUND`.
    pub not_found: usize,
    /// Could not be submitted.
    pub submit_failed: usize,
    /// Skipped (fail-fast, cancel, not in the manifest, unreadable record).
    pub skipped: usize,
}

impl BatchCounts {
    /// The sum of every field: the batch's number of inputs.
    pub fn total(&self) -> usize {
        self.unknown
            + self.queued
            + self.submitting
            + self.pending
            + self.running
            + self.succeeded
            + self.failed
            + self.not_found
            + self.submit_failed
            + self.skipped
    }

    /// Inputs in a terminal state.
    pub fn finished(&self) -> usize {
        self.succeeded + self.failed + self.not_found + self.submit_failed + self.skipped
    }

    /// Inputs that ended without a value.
    pub fn failures(&self) -> usize {
        self.failed + self.not_found + self.submit_failed + self.skipped
    }

    fn field(&mut self, slot: &Slot) -> &mut usize {
        match slot {
            Slot::Unknown => &mut self.unknown,
            Slot::Queued { .. } => &mut self.queued,
            Slot::Submitting { .. } => &mut self.submitting,
            Slot::Active { status, .. } => match status {
                JobStatus::Running => &mut self.running,
                _ => &mut self.pending,
            },
            Slot::Ended { status, .. } => match status {
                JobStatus::Succeeded => &mut self.succeeded,
                JobStatus::NotFound => &mut self.not_found,
                _ => &mut self.failed,
            },
            Slot::SubmitFailed { .. } => &mut self.submit_failed,
            Slot::Skipped { .. } => &mut self.skipped,
        }
    }
}

impl fmt::Display for BatchCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts = [
            ("succeeded", self.succeeded),
            ("failed", self.failed),
            ("not found", self.not_found),
            ("submit failed", self.submit_failed),
            ("skipped", self.skipped),
            ("running", self.running),
            ("pending", self.pending),
            ("submitting", self.submitting),
            ("queued", self.queued),
            ("unknown", self.unknown),
        ];
        let shown: Vec<String> = parts
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(name, n)| format!("{n} {name}"))
            .collect();
        write!(f, "{}/{} done", self.finished(), self.total())?;
        if !shown.is_empty() {
            write!(f, ": {}", shown.join(", "))?;
        }
        Ok(())
    }
}

/// The state of one batch: one [`Slot`] per input.
///
/// Rules (Kinetic's `collections.map`, unless noted):
///
/// - At most `max_concurrent` inputs are in flight (being submitted, or
///   submitted and not ended), plus the prefetch of a batch on a worker
///   pool ([`BatchMachine::set_prefetch`]; ours); inputs are submitted in
///   index order and a retried input goes to the back of the queue.
/// - A job that ends `FAILED` or `NOT_FOUND` is retried while it has had
///   fewer than `1 + retries` attempts (the old attempt's backend resources
///   are cleaned first), unless the batch was cancelled or stopped.
/// - A submission error is retried the same way only when it is retryable
///   (an unavailable store or backend); Kinetic never retries them, but a
///   transient error should not cost an input. Other submission errors end
///   the input.
/// - With `fail_fast`, the first input that ends failed (no retry left)
///   stops the batch: queued inputs are skipped, and with
///   `cancel_running_on_fail` every running job is cancelled, including
///   ones whose submission comes back later.
/// - `cancel` skips queued inputs, cancels every submitted job (and any
///   whose submission comes back later) and retries nothing.
/// - On a worker pool ([`BatchMachine::set_worker_pool`]; ours), a stop
///   (fail-fast or cancel) also withdraws the jobs waiting in the pool's
///   queue (seen `PENDING`): cancelled, their inputs skipped as never
///   submitted, so no input starts after the failure was seen.
/// - A terminal slot (ended, submission failed, skipped) never changes.
#[derive(Debug, Clone)]
pub struct BatchMachine {
    config: BatchConfig,
    slots: Vec<Slot>,
    queue: VecDeque<usize>,
    counts: BatchCounts,
    in_flight: usize,
    stopped: bool,
    cancelled: bool,
    /// Indices of ended jobs, in the order they ended.
    completed: Vec<usize>,
    /// Indices in the order they were first submitted (the manifest's order).
    submission_order: Vec<usize>,
    /// The last job of each input and its attempt (kept across retries).
    last_job: Vec<Option<(JobId, u32)>>,
    /// Attempts completed before an [`Event::Abandon`] made a slot unknown.
    abandoned_attempts: Vec<u32>,
    /// Inputs in flight allowed beyond `max_concurrent` (queued in the
    /// backend's worker pool, not running): [`BatchMachine::set_prefetch`].
    prefetch: usize,
    /// The jobs run on a worker pool whose queued jobs read `PENDING` and
    /// have not started: [`BatchMachine::set_worker_pool`].
    pool: bool,
    /// Set for a batch submitted in one call whose backend retries each
    /// input itself: [`BatchMachine::indexed`].
    indexed: Option<GroupId>,
    /// The indexed batch's one submission was made.
    batch_submitted: bool,
    /// The indexed batch was told to stop every input
    /// (`StopBatch { cancel_running: true }`).
    batch_cancelled: bool,
}

impl BatchMachine {
    /// A batch of `total` inputs about to submit every input, in index
    /// order.
    pub fn new(total: usize, config: BatchConfig) -> Self {
        let counts = BatchCounts {
            queued: total,
            ..BatchCounts::default()
        };
        Self {
            slots: vec![Slot::Queued { attempts: 0 }; total],
            queue: (0..total).collect(),
            counts,
            in_flight: 0,
            stopped: false,
            cancelled: false,
            completed: Vec::new(),
            submission_order: Vec::new(),
            last_job: vec![None; total],
            abandoned_attempts: vec![0; total],
            prefetch: 0,
            pool: false,
            indexed: None,
            batch_submitted: false,
            batch_cancelled: false,
            config,
        }
    }

    /// A batch this process did not submit: every input [`Slot::Unknown`]
    /// until [`Event::Adopt`] names its job. An observer never retries nor
    /// stops on failures (the submitting process decides that).
    pub fn observer(total: usize) -> Self {
        let counts = BatchCounts {
            unknown: total,
            ..BatchCounts::default()
        };
        Self {
            slots: vec![Slot::Unknown; total],
            queue: VecDeque::new(),
            counts,
            in_flight: 0,
            stopped: false,
            cancelled: false,
            completed: Vec::new(),
            submission_order: Vec::new(),
            last_job: vec![None; total],
            abandoned_attempts: vec![0; total],
            prefetch: 0,
            pool: false,
            indexed: None,
            batch_submitted: false,
            batch_cancelled: false,
            config: BatchConfig::default().max_concurrent(None),
        }
    }

    /// A batch of `total` inputs (group `group_id`) submitted in **one**
    /// call to a backend that runs every input as an index of one workload
    /// and retries each index itself (an Indexed Job on gke): the
    /// *indexed mode*.
    ///
    /// - The first [`Event::Pump`] puts every input in
    ///   [`Slot::Submitting`] and asks for one [`Command::SubmitBatch`];
    ///   [`Event::BatchSubmitted`] makes every input active as its attempt-1
    ///   child ([`child_job_id`]`(group_id, index, 1)`), all at once: the
    ///   backend keeps `max_concurrent` of them running.
    /// - No [`Command::Submit`] nor [`Command::Cleanup`] ever: an attempt
    ///   seen `FAILED` with attempts left (and the batch not stopped) moves
    ///   its input to the next attempt's child, `PENDING`, which the
    ///   backend starts itself ([`Command::RecordChild`] names it). Out of
    ///   attempts, or seen `NOT_FOUND` (the backend no longer holds the
    ///   batch, so nobody retries), the input ends as it would otherwise.
    /// - A stop (fail-fast, cancel) is one [`Command::StopBatch`] instead of
    ///   a cancel per job, and the inputs seen `PENDING` (not started) are
    ///   withdrawn as on a worker pool ([`BatchMachine::set_worker_pool`]):
    ///   skipped, as never submitted.
    ///
    /// ```
    /// use kinetic_core::batch::{BatchConfig, BatchMachine, Command, Event, child_job_id};
    /// use kinetic_core::ids::GroupId;
    /// use kinetic_core::status::JobStatus;
    ///
    /// let g = GroupId::new_random();
    /// let mut m = BatchMachine::indexed(3, BatchConfig::default().retries(1), g.clone());
    /// assert_eq!(m.apply(Event::Pump), vec![Command::SubmitBatch]);
    /// assert_eq!(m.apply(Event::BatchSubmitted).len(), 3); // three RecordChild
    /// let first = child_job_id(&g, 1, 1);
    /// let cmds = m.apply(Event::Observed { index: 1, job_id: first, status: JobStatus::Failed });
    /// // The backend retries it: the input follows attempt 2, nothing to submit.
    /// assert_eq!(cmds, vec![Command::RecordChild { index: 1, job_id: child_job_id(&g, 1, 2), attempts: 2 }]);
    /// ```
    pub fn indexed(total: usize, config: BatchConfig, group_id: GroupId) -> Self {
        let mut machine = Self::new(total, config);
        machine.indexed = Some(group_id);
        machine
    }

    /// Follow a batch this process did not start ([`BatchMachine::observer`],
    /// or one being resumed) as an indexed batch of group `group_id`
    /// ([`BatchMachine::indexed`]) whose backend retries each input
    /// `retries` times: a `FAILED` attempt with attempts left moves to the
    /// next attempt's child, and the inputs a [`Event::Resume`] queues
    /// (never submitted) go in one [`Command::SubmitBatch`] (which the
    /// backend takes once per batch).
    pub fn follow_indexed(&mut self, group_id: GroupId, retries: u32) {
        self.indexed = Some(group_id);
        self.config.retries = retries;
        self.batch_submitted = false;
    }

    /// True for a batch submitted in one call ([`BatchMachine::indexed`]).
    pub fn is_indexed(&self) -> bool {
        self.indexed.is_some()
    }

    /// The configuration.
    pub fn config(&self) -> &BatchConfig {
        &self.config
    }

    /// Replace the submission settings (limit, retries, fail-fast), e.g.
    /// when a process resumes a batch it attached to. The total is kept.
    pub fn reconfigure(&mut self, config: BatchConfig) {
        self.config = config;
    }

    /// Allow `extra` inputs in flight beyond `max_concurrent`: for a batch
    /// whose backend runs at most `max_concurrent` of its jobs at once on a
    /// worker pool, so that each worker finds its next input queued the
    /// moment it ends one, instead of after a poll and a submission.
    /// `max_concurrent` then bounds the inputs *running*, not those in
    /// flight. No effect without a limit.
    ///
    /// ```
    /// use kinetic_core::batch::{BatchConfig, BatchMachine, Event};
    ///
    /// let mut m = BatchMachine::new(10, BatchConfig::default().max_concurrent(Some(2)));
    /// m.set_prefetch(2);
    /// assert_eq!(m.apply(Event::Pump).len(), 4);
    /// ```
    pub fn set_prefetch(&mut self, extra: usize) {
        self.prefetch = extra;
    }

    /// The inputs in flight allowed beyond `max_concurrent`
    /// ([`BatchMachine::set_prefetch`]).
    pub fn prefetch(&self) -> usize {
        self.prefetch
    }

    /// Say that the batch's jobs run on a worker pool where a job the
    /// backend reports `PENDING` waits in the pool's queue and has not
    /// started (the local backend's pools: a job reads `RUNNING` from the
    /// moment its runner started, and a cancelled queued job is never
    /// started by a worker).
    ///
    /// Fail-fast and [`Event::Cancel`] then **withdraw** those jobs: each
    /// is cancelled and its input counts as skipped, as an input never
    /// submitted ([`SkipReason::FailFast`], [`SkipReason::Cancelled`]), so
    /// that no input starts after the first failure was seen however deep
    /// the pool's queue ([`BatchMachine::set_prefetch`]). A job whose
    /// submission comes back after the stop is withdrawn the same way. The
    /// jobs seen `RUNNING` are cancelled only with `cancel_running_on_fail`
    /// (fail-fast) or by a cancel, and end as the backend reports them. A
    /// job a worker started after the last poll (so still seen `PENDING`)
    /// is stopped by its cancel and stays skipped: it never gives a
    /// result.
    ///
    /// ```
    /// use kinetic_core::batch::{BatchConfig, BatchMachine, Command, Event, Slot};
    /// use kinetic_core::status::JobStatus;
    ///
    /// let config = BatchConfig::default().max_concurrent(Some(1)).fail_fast(true, false);
    /// let mut m = BatchMachine::new(3, config);
    /// m.set_worker_pool(true);
    /// m.set_prefetch(2);
    /// m.apply(Event::Pump);
    /// for i in 0..3 {
    ///     let job_id = format!("job-{i:08x}").parse().unwrap();
    ///     m.apply(Event::Submitted { index: i, job_id });
    /// }
    /// let first = "job-00000000".parse().unwrap();
    /// let cmds = m.apply(Event::Observed { index: 0, job_id: first, status: JobStatus::Failed });
    /// // Inputs 1 and 2 wait in the pool: cancelled before they start, skipped.
    /// assert_eq!(cmds.iter().filter(|c| matches!(c, Command::Cancel { .. })).count(), 2);
    /// assert_eq!(m.counts().skipped, 2);
    /// ```
    pub fn set_worker_pool(&mut self, pool: bool) {
        self.pool = pool;
    }

    /// True when the batch runs on a worker pool
    /// ([`BatchMachine::set_worker_pool`]).
    pub fn on_worker_pool(&self) -> bool {
        self.pool
    }

    /// Whether an input seen `PENDING` has not started (and a stop
    /// withdraws it): on a worker pool, and in indexed mode.
    fn withdraws_pending(&self) -> bool {
        self.pool || self.indexed.is_some()
    }

    /// The most inputs in flight at once.
    fn in_flight_limit(&self) -> usize {
        self.config
            .max_concurrent
            .map_or(usize::MAX, |m| m.saturating_add(self.prefetch))
    }

    /// Number of inputs.
    pub fn total(&self) -> usize {
        self.slots.len()
    }

    /// Every slot, by input index.
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// One slot.
    pub fn slot(&self, index: usize) -> Option<&Slot> {
        self.slots.get(index)
    }

    /// Inputs by where they are (always summing to [`BatchMachine::total`]).
    pub fn counts(&self) -> BatchCounts {
        self.counts
    }

    /// Indices of the ended jobs in the order they ended.
    pub fn completed(&self) -> &[usize] {
        &self.completed
    }

    /// The last job of each input (kept when it is retried) with its attempt.
    pub fn last_job(&self, index: usize) -> Option<&(JobId, u32)> {
        self.last_job.get(index).and_then(Option::as_ref)
    }

    /// The manifest's children: `(index, job, attempts)` in the order the
    /// inputs were first submitted.
    pub fn children(&self) -> impl Iterator<Item = (usize, &JobId, u32)> + '_ {
        self.submission_order.iter().filter_map(|&i| {
            self.last_job[i]
                .as_ref()
                .map(|(job_id, attempts)| (i, job_id, *attempts))
        })
    }

    /// At most how many children [`BatchMachine::children`] yields (the
    /// inputs submitted at least once): what a manifest's children are
    /// sized by before they are copied.
    pub fn children_bound(&self) -> usize {
        self.submission_order.len()
    }

    /// The jobs submitted and not ended, with their input.
    pub fn active_jobs(&self) -> impl Iterator<Item = (usize, &JobId)> + '_ {
        self.slots.iter().enumerate().filter_map(|(i, s)| match s {
            Slot::Active { job_id, .. } => Some((i, job_id)),
            _ => None,
        })
    }

    /// Inputs being submitted or submitted and not ended.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// True once the user cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled
    }

    /// True once fail-fast or a cancel stopped submissions.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// True when no input waits to be submitted, is being submitted, or is
    /// unknown.
    pub fn is_submission_complete(&self) -> bool {
        self.counts.queued == 0 && self.counts.submitting == 0 && self.counts.unknown == 0
    }

    /// True when every slot is terminal.
    pub fn is_done(&self) -> bool {
        self.counts.finished() == self.total()
    }

    /// True while a submission loop must run: inputs wait or are being
    /// submitted, or running jobs may still need a retry or a fail-fast
    /// cancel (which only polling finds).
    pub fn needs_driver(&self) -> bool {
        !self.queue.is_empty() || self.counts.submitting > 0 || self.needs_polling()
    }

    /// True when the submission loop must poll the running jobs: only an
    /// ended job frees capacity for a queued input, and only a poll finds
    /// a failure to retry, or one that fail-fast acts on.
    pub fn needs_polling(&self) -> bool {
        let active = self.counts.pending + self.counts.running;
        if active == 0 {
            return false;
        }
        let limit = self.in_flight_limit();
        let capacity_bound = !self.queue.is_empty() && self.in_flight >= limit;
        let retry_watch = !self.stopped && self.config.retries > 0;
        // On a pool, inputs queued there are withdrawn on the first failure
        // too: only a poll finds it.
        let fail_watch = !self.stopped
            && self.config.fail_fast
            && (!self.queue.is_empty()
                || self.config.cancel_running_on_fail
                || (self.withdraws_pending() && self.counts.pending > 0));
        capacity_bound || retry_watch || fail_watch
    }

    /// Apply `event`, consuming the state: `(state, event) → (state, commands)`.
    pub fn step(mut self, event: Event) -> (Self, Vec<Command>) {
        let commands = self.apply(event);
        (self, commands)
    }

    /// Apply `event` in place and return the commands to carry out.
    pub fn apply(&mut self, event: Event) -> Vec<Command> {
        let mut out = Vec::new();
        match event {
            Event::Pump => {}
            Event::Submitted { index, job_id } => self.on_submitted(index, job_id, &mut out),
            Event::SubmitFailed { index, retryable } => {
                self.on_submit_failed(index, retryable, &mut out)
            }
            Event::Observed {
                index,
                job_id,
                status,
            } => self.on_observed(index, &job_id, status, false, &mut out),
            Event::ObservedLast {
                index,
                job_id,
                status,
            } => self.on_observed(index, &job_id, status, true, &mut out),
            Event::Cancel => self.on_cancel(&mut out),
            Event::Adopt {
                index,
                job_id,
                attempts,
            } => self.on_adopt(index, job_id, attempts, &mut out),
            Event::Forget { index } => {
                if let Some(Slot::Active {
                    status: JobStatus::Pending,
                    ..
                }) = self.slots.get(index)
                {
                    self.set(index, Slot::Unknown);
                }
            }
            Event::Requeue { index, attempts } => {
                if matches!(self.slots.get(index), Some(Slot::Unknown)) {
                    self.set(index, Slot::Queued { attempts });
                    self.queue.push_back(index);
                }
            }
            Event::Resume => {
                for index in 0..self.slots.len() {
                    if self.slots[index] == Slot::Unknown {
                        // Attempts known here continue; an interrupted
                        // attempt is made again (with the same job id).
                        let attempts = self.last_job[index]
                            .as_ref()
                            .map_or(0, |(_, a)| *a)
                            .max(self.abandoned_attempts[index]);
                        self.set(index, Slot::Queued { attempts });
                        self.queue.push_back(index);
                    }
                }
            }
            Event::CloseManifest => {
                for index in 0..self.slots.len() {
                    if self.slots[index] == Slot::Unknown {
                        self.set(
                            index,
                            Slot::Skipped {
                                reason: SkipReason::NotInManifest,
                            },
                        );
                    }
                }
            }
            Event::Unavailable { index } => {
                if matches!(self.slots.get(index), Some(Slot::Unknown)) {
                    self.set(
                        index,
                        Slot::Skipped {
                            reason: SkipReason::Unavailable,
                        },
                    );
                }
            }
            Event::BatchSubmitted => self.on_batch_submitted(&mut out),
            Event::BatchSubmitFailed { retryable } => {
                for index in 0..self.slots.len() {
                    if matches!(self.slots[index], Slot::Submitting { .. }) {
                        self.on_submit_failed(index, retryable, &mut out);
                    }
                }
                // Queued again: submitted again, in one call.
                self.batch_submitted = false;
            }
            Event::Abandon => {
                for index in std::mem::take(&mut self.queue) {
                    if let Slot::Queued { attempts } = self.slots[index] {
                        self.abandoned_attempts[index] = attempts;
                        self.set(index, Slot::Unknown);
                    }
                }
                for index in 0..self.slots.len() {
                    if let Slot::Submitting { attempt } = self.slots[index] {
                        self.abandoned_attempts[index] = attempt - 1;
                        self.set(index, Slot::Unknown);
                    }
                }
            }
        }
        self.pump(&mut out);
        self.finish_stopped_batch(&mut out);
        out
    }

    fn set(&mut self, index: usize, slot: Slot) {
        let old = std::mem::replace(&mut self.slots[index], slot);
        *self.counts.field(&old) -= 1;
        *self.counts.field(&self.slots[index]) += 1;
        match (old.in_flight(), self.slots[index].in_flight()) {
            (false, true) => self.in_flight += 1,
            (true, false) => self.in_flight -= 1,
            _ => {}
        }
    }

    fn cancels_new_jobs(&self) -> bool {
        self.cancelled || (self.stopped && self.config.cancel_running_on_fail)
    }

    fn pump(&mut self, out: &mut Vec<Command>) {
        if self.stopped {
            return;
        }
        if self.indexed.is_some() {
            // Every input at once, in one call; the backend keeps
            // `max_concurrent` of them running.
            if self.batch_submitted || self.queue.is_empty() {
                return;
            }
            self.batch_submitted = true;
            for index in std::mem::take(&mut self.queue) {
                if let Slot::Queued { attempts } = self.slots[index] {
                    self.set(
                        index,
                        Slot::Submitting {
                            attempt: attempts + 1,
                        },
                    );
                }
            }
            out.push(Command::SubmitBatch);
            return;
        }
        let limit = self.in_flight_limit();
        while self.in_flight < limit {
            let Some(index) = self.queue.pop_front() else {
                break;
            };
            let Slot::Queued { attempts } = self.slots[index] else {
                continue;
            };
            let attempt = attempts + 1;
            self.set(index, Slot::Submitting { attempt });
            out.push(Command::Submit { index, attempt });
        }
    }

    fn record(&mut self, index: usize, job_id: &JobId, attempt: u32, out: &mut Vec<Command>) {
        if self.last_job[index].is_none() {
            self.submission_order.push(index);
        }
        self.last_job[index] = Some((job_id.clone(), attempt));
        out.push(Command::RecordChild {
            index,
            job_id: job_id.clone(),
            attempts: attempt,
        });
        // An indexed batch is stopped as a whole (`StopBatch`).
        if self.cancels_new_jobs() && self.indexed.is_none() {
            out.push(Command::Cancel {
                index,
                job_id: job_id.clone(),
            });
        }
    }

    /// An indexed batch: stop every input, once (a cancel after a
    /// fail-fast stop that cancelled already asks nothing more).
    fn cancel_batch(&mut self, out: &mut Vec<Command>) {
        if !self.batch_cancelled {
            self.batch_cancelled = true;
            out.push(Command::StopBatch {
                cancel_running: true,
            });
        }
    }

    /// An indexed batch stopped from starting inputs whose last input
    /// followed here ended: the backend may still hold inputs this batch
    /// withdrew (started after the last poll) or retries, and only status
    /// reads keep a stopping batch from starting more, so it is stopped
    /// as a whole: nothing it runs now has a value anyone reads.
    fn finish_stopped_batch(&mut self, out: &mut Vec<Command>) {
        if self.indexed.is_some()
            && self.stopped
            && self.batch_submitted
            && self.counts.pending + self.counts.running + self.counts.submitting == 0
        {
            self.cancel_batch(out);
        }
    }

    fn on_batch_submitted(&mut self, out: &mut Vec<Command>) {
        let Some(group_id) = self.indexed.clone() else {
            return;
        };
        for index in 0..self.slots.len() {
            if let Slot::Submitting { attempt } = self.slots[index] {
                let job_id = child_job_id(&group_id, index, attempt);
                self.activate(index, job_id, attempt, out);
            }
        }
        // Back after a stop: the stop already asked the backend to stop the
        // batch; what did not start is withdrawn.
        self.withdraw_queued(out);
    }

    /// Why a stopped batch withdraws the jobs still queued in its pool.
    fn stop_reason(&self) -> SkipReason {
        if self.cancelled {
            SkipReason::Cancelled
        } else {
            SkipReason::FailFast
        }
    }

    /// On a worker pool, once stopped: cancel every job seen queued in the
    /// pool (`PENDING`) and skip its input, as if never submitted.
    fn withdraw_queued(&mut self, out: &mut Vec<Command>) {
        if !self.withdraws_pending() || !self.stopped {
            return;
        }
        let reason = self.stop_reason();
        for index in 0..self.slots.len() {
            if let Slot::Active {
                job_id,
                status: JobStatus::Pending,
                ..
            } = &self.slots[index]
            {
                let job_id = job_id.clone();
                // An indexed batch's stop (`StopBatch`) starts none of them.
                if !self.cancels_new_jobs() && self.indexed.is_none() {
                    // Cancelled below with the running ones otherwise.
                    out.push(Command::Cancel { index, job_id });
                }
                self.set(index, Slot::Skipped { reason });
            }
        }
    }

    fn on_submitted(&mut self, index: usize, job_id: JobId, out: &mut Vec<Command>) {
        let Some(Slot::Submitting { attempt }) = self.slots.get(index) else {
            return;
        };
        let attempt = *attempt;
        self.activate(index, job_id, attempt, out);
        // Back after the stop: queued in the pool, not started.
        self.withdraw_queued(out);
    }

    fn on_submit_failed(&mut self, index: usize, retryable: bool, out: &mut Vec<Command>) {
        let Some(Slot::Submitting { attempt }) = self.slots.get(index) else {
            return;
        };
        let attempt = *attempt;
        if retryable && attempt < self.config.max_attempts() && !self.stopped {
            self.set(index, Slot::Queued { attempts: attempt });
            self.queue.push_back(index);
        } else {
            self.set(index, Slot::SubmitFailed { attempts: attempt });
            if self.config.fail_fast {
                self.stop(out);
            }
        }
    }

    fn on_observed(
        &mut self,
        index: usize,
        observed: &JobId,
        status: JobStatus,
        last: bool,
        out: &mut Vec<Command>,
    ) {
        let Some(Slot::Active {
            job_id, attempt, ..
        }) = self.slots.get(index)
        else {
            return;
        };
        if job_id != observed {
            return;
        }
        let (job_id, attempt) = (job_id.clone(), *attempt);
        // On a pool a job seen started never goes back to its queue (a
        // late or reordered answer saying so is not taken): what a stop
        // withdraws is only what never started.
        let status = match (status, self.slots.get(index)) {
            (
                JobStatus::Pending,
                Some(Slot::Active {
                    status: JobStatus::Running,
                    ..
                }),
            ) if self.withdraws_pending() => JobStatus::Running,
            _ => status,
        };
        if status == JobStatus::Failed
            && attempt < self.config.max_attempts()
            && !self.stopped
            && !last
            && let Some(group_id) = &self.indexed
        {
            // The backend runs the index again itself, as the next
            // attempt's child: follow that one.
            let next = attempt + 1;
            let job_id = child_job_id(group_id, index, next);
            self.set(
                index,
                Slot::Active {
                    job_id: job_id.clone(),
                    attempt: next,
                    status: JobStatus::Pending,
                },
            );
            self.record(index, &job_id, next, out);
            return;
        }
        match status {
            JobStatus::Pending | JobStatus::Running => self.set(
                index,
                Slot::Active {
                    job_id,
                    attempt,
                    status,
                },
            ),
            JobStatus::Succeeded => {
                self.set(
                    index,
                    Slot::Ended {
                        job_id,
                        attempt,
                        status,
                    },
                );
                self.completed.push(index);
            }
            JobStatus::Failed | JobStatus::NotFound => {
                if attempt < self.config.max_attempts() && !self.stopped && self.indexed.is_none() {
                    self.set(index, Slot::Queued { attempts: attempt });
                    self.queue.push_back(index);
                    out.push(Command::Cleanup { index, job_id });
                } else {
                    self.set(
                        index,
                        Slot::Ended {
                            job_id,
                            attempt,
                            status,
                        },
                    );
                    self.completed.push(index);
                    if self.config.fail_fast && !self.cancelled {
                        self.stop(out);
                    }
                }
            }
        }
    }

    /// Fail-fast: skip the queue and, when configured, cancel running jobs.
    fn stop(&mut self, out: &mut Vec<Command>) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        self.skip_queue(SkipReason::FailFast);
        if self.indexed.is_some() {
            self.withdraw_queued(out);
            let running = self.counts.pending + self.counts.running > 0;
            if self.config.cancel_running_on_fail || !running {
                // Nothing followed here runs on: stop it all.
                self.cancel_batch(out);
            } else {
                out.push(Command::StopBatch {
                    cancel_running: false,
                });
            }
            return;
        } else if self.config.cancel_running_on_fail {
            self.cancel_active(out);
        }
        self.withdraw_queued(out);
    }

    fn skip_queue(&mut self, reason: SkipReason) {
        for index in std::mem::take(&mut self.queue) {
            if matches!(self.slots[index], Slot::Queued { .. }) {
                self.set(index, Slot::Skipped { reason });
            }
        }
    }

    fn cancel_active(&self, out: &mut Vec<Command>) {
        for (index, job_id) in self.active_jobs() {
            out.push(Command::Cancel {
                index,
                job_id: job_id.clone(),
            });
        }
    }

    fn on_cancel(&mut self, out: &mut Vec<Command>) {
        if self.cancelled {
            return;
        }
        self.cancelled = true;
        self.stopped = true;
        self.skip_queue(SkipReason::Cancelled);
        if self.indexed.is_some() {
            self.cancel_batch(out);
        } else {
            self.cancel_active(out);
        }
        self.withdraw_queued(out);
    }

    fn on_adopt(&mut self, index: usize, job_id: JobId, attempts: u32, out: &mut Vec<Command>) {
        if !matches!(self.slots.get(index), Some(Slot::Unknown)) {
            return;
        }
        self.activate(index, job_id, attempts.max(1), out);
    }

    /// The input now has a job on the backend: it is active (pending) and
    /// goes into the manifest.
    fn activate(&mut self, index: usize, job_id: JobId, attempt: u32, out: &mut Vec<Command>) {
        self.set(
            index,
            Slot::Active {
                job_id: job_id.clone(),
                attempt,
                status: JobStatus::Pending,
            },
        );
        self.record(index, &job_id, attempt, out);
    }
}

/// The order in which `results()` returns inputs: every index in input
/// order when `ordered`; otherwise the ended jobs in the order they ended,
/// then every other input (submission failures, skipped) in input order.
pub fn result_order(machine: &BatchMachine, ordered: bool) -> Vec<usize> {
    if ordered {
        return (0..machine.total()).collect();
    }
    let mut seen = vec![false; machine.total()];
    let mut order = Vec::with_capacity(machine.total());
    for &i in machine.completed() {
        if !seen[i] {
            seen[i] = true;
            order.push(i);
        }
    }
    order.extend((0..machine.total()).filter(|&i| !seen[i]));
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_config_refuses_what_a_batch_cannot_run_with() {
        assert_eq!(BatchConfig::default().validate(), Ok(()));
        let refused = |config: BatchConfig| config.validate().unwrap_err().message;
        assert!(
            refused(BatchConfig::default().max_concurrent(Some(0))).starts_with("max_concurrent")
        );
        assert!(
            refused(BatchConfig::default().poll_interval(Duration::ZERO))
                .starts_with("poll_interval")
        );
        assert_eq!(
            refused(BatchConfig::default().retries(MAX_DETERMINISTIC_ATTEMPT)),
            "retries must be at most 254, got 255"
        );
        // One value carries every setting of a batch.
        let config = BatchConfig::default()
            .name("n")
            .tag("k", "v")
            .submit_parallelism(0);
        assert_eq!(config.name.as_deref(), Some("n"));
        assert_eq!(config.tags["k"], "v");
        assert_eq!(config.submit_parallelism, 1);
    }

    fn id(n: u32) -> JobId {
        format!("job-{n:08x}").parse().unwrap()
    }

    fn submits(cmds: &[Command]) -> Vec<(usize, u32)> {
        cmds.iter()
            .filter_map(|c| match c {
                Command::Submit { index, attempt } => Some((*index, *attempt)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn submits_up_to_the_limit_and_refills() {
        let mut m = BatchMachine::new(5, BatchConfig::default().max_concurrent(Some(2)));
        assert_eq!(submits(&m.apply(Event::Pump)), vec![(0, 1), (1, 1)]);
        assert_eq!(m.in_flight(), 2);
        let cmds = m.apply(Event::Submitted {
            index: 0,
            job_id: id(0),
        });
        assert!(submits(&cmds).is_empty(), "still two in flight");
        let cmds = m.apply(Event::Observed {
            index: 0,
            job_id: id(0),
            status: JobStatus::Succeeded,
        });
        assert_eq!(submits(&cmds), vec![(2, 1)]);
        assert_eq!(m.completed(), &[0]);
        assert_eq!(m.counts().total(), 5);
    }

    #[test]
    fn failed_jobs_are_retried_then_end() {
        let mut m = BatchMachine::new(1, BatchConfig::default().retries(1));
        m.apply(Event::Pump);
        m.apply(Event::Submitted {
            index: 0,
            job_id: id(1),
        });
        let cmds = m.apply(Event::Observed {
            index: 0,
            job_id: id(1),
            status: JobStatus::Failed,
        });
        assert_eq!(submits(&cmds), vec![(0, 2)]);
        assert!(cmds.contains(&Command::Cleanup {
            index: 0,
            job_id: id(1)
        }));
        m.apply(Event::Submitted {
            index: 0,
            job_id: id(2),
        });
        // A late observation of the first attempt is ignored.
        m.apply(Event::Observed {
            index: 0,
            job_id: id(1),
            status: JobStatus::Succeeded,
        });
        assert!(matches!(m.slot(0), Some(Slot::Active { attempt: 2, .. })));
        let cmds = m.apply(Event::Observed {
            index: 0,
            job_id: id(2),
            status: JobStatus::NotFound,
        });
        assert!(submits(&cmds).is_empty());
        assert!(m.is_done());
        assert_eq!(m.counts().not_found, 1);
        assert_eq!(m.children().collect::<Vec<_>>(), vec![(0, &id(2), 2)]);
    }

    #[test]
    fn fail_fast_skips_the_queue_and_cancels_running_jobs() {
        let mut m = BatchMachine::new(
            4,
            BatchConfig::default()
                .max_concurrent(Some(2))
                .fail_fast(true, true),
        );
        m.apply(Event::Pump);
        m.apply(Event::Submitted {
            index: 0,
            job_id: id(0),
        });
        let cmds = m.apply(Event::Observed {
            index: 0,
            job_id: id(0),
            status: JobStatus::Failed,
        });
        assert!(submits(&cmds).is_empty());
        assert_eq!(m.counts().skipped, 2);
        // Input 1's submission comes back after the stop: it is cancelled.
        let cmds = m.apply(Event::Submitted {
            index: 1,
            job_id: id(1),
        });
        assert!(cmds.contains(&Command::Cancel {
            index: 1,
            job_id: id(1)
        }));
        assert!(!m.needs_driver(), "stopped: nothing left to retry");
    }

    #[test]
    fn transient_submit_errors_are_retried_within_the_budget() {
        let mut m = BatchMachine::new(1, BatchConfig::default().retries(1));
        m.apply(Event::Pump);
        let cmds = m.apply(Event::SubmitFailed {
            index: 0,
            retryable: true,
        });
        assert_eq!(submits(&cmds), vec![(0, 2)]);
        m.apply(Event::SubmitFailed {
            index: 0,
            retryable: true,
        });
        assert_eq!(m.slot(0), Some(&Slot::SubmitFailed { attempts: 2 }));
        let mut m = BatchMachine::new(1, BatchConfig::default().retries(3));
        m.apply(Event::Pump);
        m.apply(Event::SubmitFailed {
            index: 0,
            retryable: false,
        });
        assert_eq!(m.slot(0), Some(&Slot::SubmitFailed { attempts: 1 }));
    }

    #[test]
    fn observers_adopt_resume_and_close() {
        let mut m = BatchMachine::observer(3);
        assert!(!m.is_submission_complete());
        assert!(submits(&m.apply(Event::Pump)).is_empty());
        m.apply(Event::Adopt {
            index: 1,
            job_id: id(1),
            attempts: 1,
        });
        m.apply(Event::Unavailable { index: 2 });
        let mut resumed = m.clone();
        m.apply(Event::CloseManifest);
        assert!(m.is_submission_complete());
        assert_eq!(m.counts().skipped, 2);
        resumed.reconfigure(BatchConfig::default());
        assert_eq!(resumed.total(), 3);
        assert_eq!(submits(&resumed.apply(Event::Resume)), vec![(0, 1)]);
    }

    #[test]
    fn forget_makes_a_pending_adopted_input_unknown_for_a_resume() {
        let mut m = BatchMachine::observer(2);
        let g = GroupId::new_random();
        let job = |i: usize| child_job_id(&g, i, 1);
        m.apply(Event::Adopt {
            index: 0,
            job_id: job(0),
            attempts: 1,
        });
        m.apply(Event::Adopt {
            index: 1,
            job_id: job(1),
            attempts: 1,
        });
        m.apply(Event::Observed {
            index: 1,
            job_id: job(1),
            status: JobStatus::Running,
        });
        m.apply(Event::Forget { index: 0 });
        m.apply(Event::Forget { index: 1 });
        assert_eq!(m.slot(0), Some(&Slot::Unknown));
        assert!(
            matches!(m.slot(1), Some(Slot::Active { .. })),
            "a running job is kept"
        );
    }

    #[test]
    fn abandon_leaves_unknown_slots_for_a_resume() {
        let mut m = BatchMachine::new(3, BatchConfig::default().max_concurrent(Some(1)));
        m.apply(Event::Pump);
        m.apply(Event::Abandon);
        assert_eq!(m.counts().unknown, 3);
        assert_eq!(submits(&m.apply(Event::Resume)), vec![(0, 1)]);
    }

    fn cancels(cmds: &[Command]) -> Vec<usize> {
        cmds.iter()
            .filter_map(|c| match c {
                Command::Cancel { index, .. } => Some(*index),
                _ => None,
            })
            .collect()
    }

    /// A fail-fast batch of `total` inputs on a pool of 1 worker whose
    /// queue holds every other input: all submitted, input 1 running.
    fn pooled(total: usize, cancel_running: bool) -> BatchMachine {
        let config = BatchConfig::default()
            .max_concurrent(Some(1))
            .fail_fast(true, cancel_running);
        let mut m = BatchMachine::new(total, config);
        m.set_worker_pool(true);
        m.set_prefetch(total);
        assert_eq!(submits(&m.apply(Event::Pump)).len(), total);
        for i in 0..total {
            m.apply(Event::Submitted {
                index: i,
                job_id: id(i as u32),
            });
        }
        m.apply(Event::Observed {
            index: 1,
            job_id: id(1),
            status: JobStatus::Running,
        });
        m
    }

    #[test]
    fn fail_fast_on_a_pool_withdraws_the_queued_jobs_and_lets_running_ones_end() {
        let mut m = pooled(5, false);
        // Only a poll sees the failure, and the machine's own queue is
        // empty: the pool's queued jobs still make it poll.
        assert!(m.needs_polling());
        let cmds = m.apply(Event::Observed {
            index: 0,
            job_id: id(0),
            status: JobStatus::Failed,
        });
        assert_eq!(cancels(&cmds), vec![2, 3, 4], "the running input 1 goes on");
        for i in 2..5 {
            assert_eq!(
                m.slot(i),
                Some(&Slot::Skipped {
                    reason: SkipReason::FailFast
                })
            );
        }
        assert_eq!(m.counts().skipped, 3);
        assert_eq!(m.counts().running, 1);
        // Input 1 ends as the backend says; nothing is submitted again.
        let cmds = m.apply(Event::Observed {
            index: 1,
            job_id: id(1),
            status: JobStatus::Succeeded,
        });
        assert!(cmds.is_empty());
        assert!(m.is_done());
        assert_eq!(m.counts().succeeded, 1);
        // A late observation of a withdrawn job changes nothing.
        m.apply(Event::Observed {
            index: 2,
            job_id: id(2),
            status: JobStatus::Failed,
        });
        assert_eq!(m.counts().skipped, 3);
    }

    #[test]
    fn fail_fast_on_a_pool_with_cancel_running_cancels_each_job_once() {
        let mut m = pooled(4, true);
        let cmds = m.apply(Event::Observed {
            index: 0,
            job_id: id(0),
            status: JobStatus::Failed,
        });
        assert_eq!(cancels(&cmds), vec![1, 2, 3]);
        assert_eq!(m.counts().skipped, 2, "the queued ones");
        assert_eq!(
            m.counts().running,
            1,
            "cancelled, it ends as the backend says"
        );
    }

    #[test]
    fn a_pool_submission_back_after_the_stop_is_withdrawn() {
        let config = BatchConfig::default()
            .max_concurrent(Some(1))
            .fail_fast(true, false);
        let mut m = BatchMachine::new(3, config);
        m.set_worker_pool(true);
        m.set_prefetch(2);
        m.apply(Event::Pump);
        m.apply(Event::Submitted {
            index: 0,
            job_id: id(0),
        });
        m.apply(Event::Observed {
            index: 0,
            job_id: id(0),
            status: JobStatus::Failed,
        });
        let cmds = m.apply(Event::Submitted {
            index: 2,
            job_id: id(2),
        });
        assert_eq!(cancels(&cmds), vec![2]);
        assert!(cmds.contains(&Command::RecordChild {
            index: 2,
            job_id: id(2),
            attempts: 1
        }));
        assert_eq!(
            m.slot(2),
            Some(&Slot::Skipped {
                reason: SkipReason::FailFast
            })
        );
    }

    #[test]
    fn a_cancel_on_a_pool_skips_the_queued_jobs_as_cancelled() {
        let mut m = pooled(3, false);
        let cmds = m.apply(Event::Cancel);
        assert_eq!(cancels(&cmds), vec![0, 1, 2], "each once");
        assert_eq!(m.counts().skipped, 2);
        assert_eq!(
            m.slot(0),
            Some(&Slot::Skipped {
                reason: SkipReason::Cancelled
            })
        );
        assert_eq!(m.counts().running, 1);
    }

    #[test]
    fn off_a_pool_fail_fast_lets_submitted_jobs_run() {
        let mut m = pooled(3, false);
        m.set_worker_pool(false);
        let cmds = m.apply(Event::Observed {
            index: 0,
            job_id: id(0),
            status: JobStatus::Failed,
        });
        assert!(cancels(&cmds).is_empty());
        assert_eq!(m.counts().pending, 1);
        assert_eq!(m.counts().skipped, 0);
    }

    #[test]
    fn counts_display() {
        let mut m = BatchMachine::new(3, BatchConfig::default());
        m.apply(Event::Pump);
        assert_eq!(m.counts().to_string(), "0/3 done: 3 submitting");
    }

    mod indexed {
        use super::super::*;
        use proptest::prelude::*;

        fn started(total: usize, config: BatchConfig) -> (BatchMachine, GroupId) {
            let g = GroupId::new_random();
            let mut m = BatchMachine::indexed(total, config, g.clone());
            assert_eq!(m.apply(Event::Pump), vec![Command::SubmitBatch]);
            assert_eq!(m.counts().submitting, total);
            // A second pump asks for nothing more.
            assert!(m.apply(Event::Pump).is_empty());
            let cmds = m.apply(Event::BatchSubmitted);
            assert_eq!(cmds.len(), total, "one RecordChild each: {cmds:?}");
            assert_eq!(m.counts().pending, total);
            (m, g)
        }

        fn observe(
            m: &mut BatchMachine,
            g: &GroupId,
            index: usize,
            attempt: u32,
            status: JobStatus,
        ) -> Vec<Command> {
            m.apply(Event::Observed {
                index,
                job_id: child_job_id(g, index, attempt),
                status,
            })
        }

        #[test]
        fn every_input_is_submitted_at_once_whatever_max_concurrent() {
            let (m, g) = started(5, BatchConfig::default().max_concurrent(Some(2)));
            assert_eq!(m.in_flight(), 5);
            let children: Vec<(usize, JobId, u32)> =
                m.children().map(|(i, j, a)| (i, j.clone(), a)).collect();
            let want: Vec<(usize, JobId, u32)> =
                (0..5).map(|i| (i, child_job_id(&g, i, 1), 1)).collect();
            assert_eq!(children, want);
            assert!(m.is_submission_complete());
        }

        #[test]
        fn a_failure_the_backend_runs_no_more_ends_the_input_at_that_attempt() {
            let (mut m, g) = started(2, BatchConfig::default().retries(2));
            let cmds = m.apply(Event::ObservedLast {
                index: 0,
                job_id: child_job_id(&g, 0, 1),
                status: JobStatus::Failed,
            });
            assert!(cmds.is_empty(), "no next attempt followed: {cmds:?}");
            assert_eq!(
                m.slot(0),
                Some(&Slot::Ended {
                    job_id: child_job_id(&g, 0, 1),
                    attempt: 1,
                    status: JobStatus::Failed
                })
            );
            // A success is a success either way.
            m.apply(Event::ObservedLast {
                index: 1,
                job_id: child_job_id(&g, 1, 1),
                status: JobStatus::Succeeded,
            });
            assert!(m.is_done());
        }

        #[test]
        fn a_failed_attempt_moves_to_the_next_child_without_a_submit_or_cleanup() {
            let (mut m, g) = started(2, BatchConfig::default().retries(2));
            let cmds = observe(&mut m, &g, 0, 1, JobStatus::Failed);
            assert_eq!(
                cmds,
                vec![Command::RecordChild {
                    index: 0,
                    job_id: child_job_id(&g, 0, 2),
                    attempts: 2
                }]
            );
            // A stale observation of attempt 1 changes nothing.
            assert!(observe(&mut m, &g, 0, 1, JobStatus::Failed).is_empty());
            assert_eq!(m.slot(0).unwrap().status(), Some(JobStatus::Pending));
            observe(&mut m, &g, 0, 2, JobStatus::Running);
            observe(&mut m, &g, 0, 2, JobStatus::Failed);
            // Out of retries after attempt 3: ends failed.
            let cmds = observe(&mut m, &g, 0, 3, JobStatus::Failed);
            assert!(cmds.is_empty(), "{cmds:?}");
            assert_eq!(
                m.slot(0),
                Some(&Slot::Ended {
                    job_id: child_job_id(&g, 0, 3),
                    attempt: 3,
                    status: JobStatus::Failed
                })
            );
            assert_eq!(m.last_job(0), Some(&(child_job_id(&g, 0, 3), 3)));
            observe(&mut m, &g, 1, 1, JobStatus::Succeeded);
            assert!(m.is_done());
            assert_eq!(m.counts().failed, 1);
        }

        #[test]
        fn not_found_is_not_retried_the_backend_holds_nothing_to_retry() {
            let (mut m, g) = started(1, BatchConfig::default().retries(3));
            assert!(observe(&mut m, &g, 0, 1, JobStatus::NotFound).is_empty());
            assert_eq!(m.counts().not_found, 1);
        }

        #[test]
        fn fail_fast_stops_the_batch_once_and_withdraws_what_did_not_start() {
            let config = BatchConfig::default().fail_fast(true, false);
            let (mut m, g) = started(4, config);
            assert!(m.needs_polling(), "a failure must be looked for");
            observe(&mut m, &g, 1, 1, JobStatus::Running);
            observe(&mut m, &g, 2, 1, JobStatus::Running);
            let cmds = observe(&mut m, &g, 1, 1, JobStatus::Failed);
            assert_eq!(
                cmds,
                vec![Command::StopBatch {
                    cancel_running: false
                }]
            );
            // 0 and 3 never started: skipped; 2 runs on.
            assert_eq!(m.counts().skipped, 2);
            assert_eq!(m.counts().running, 1);
            // Once the last input followed ended, the batch is stopped as
            // a whole: the backend may hold inputs started after the last
            // poll, and nobody reads the batch to keep it from starting more.
            assert_eq!(
                observe(&mut m, &g, 2, 1, JobStatus::Failed),
                vec![Command::StopBatch {
                    cancel_running: true
                }]
            );
            assert!(m.is_done());
            assert!(m.apply(Event::Cancel).is_empty(), "stopped already");

            // Nothing running at the failure: one stop of everything.
            let config = BatchConfig::default().fail_fast(true, false);
            let (mut m, g) = started(3, config);
            assert_eq!(
                observe(&mut m, &g, 0, 1, JobStatus::Failed),
                vec![Command::StopBatch {
                    cancel_running: true
                }]
            );
            assert_eq!(m.counts().skipped, 2);
        }

        #[test]
        fn cancel_running_on_fail_and_cancel_stop_the_whole_batch_in_one_command() {
            let config = BatchConfig::default().fail_fast(true, true).retries(1);
            let (mut m, g) = started(2, config);
            observe(&mut m, &g, 1, 1, JobStatus::Running);
            let cmds = observe(&mut m, &g, 0, 1, JobStatus::Failed);
            // Retried by the backend: not a failure for good yet.
            assert_eq!(cmds.len(), 1);
            let cmds = observe(&mut m, &g, 0, 2, JobStatus::Failed);
            assert_eq!(
                cmds,
                vec![Command::StopBatch {
                    cancel_running: true
                }]
            );
            assert!(m.apply(Event::Cancel).len() <= 1);

            let (mut m, g) = started(3, BatchConfig::default());
            observe(&mut m, &g, 0, 1, JobStatus::Running);
            let cmds = m.apply(Event::Cancel);
            assert_eq!(
                cmds,
                vec![Command::StopBatch {
                    cancel_running: true
                }]
            );
            assert_eq!(m.counts().skipped, 2);
            assert!(m.apply(Event::Cancel).is_empty());
        }

        #[test]
        fn a_failed_submission_is_made_again_in_one_call_or_fails_every_input() {
            let g = GroupId::new_random();
            let mut m = BatchMachine::indexed(3, BatchConfig::default().retries(1), g.clone());
            m.apply(Event::Pump);
            assert_eq!(
                m.apply(Event::BatchSubmitFailed { retryable: true }),
                vec![Command::SubmitBatch]
            );
            assert!(
                m.apply(Event::BatchSubmitFailed { retryable: true })
                    .is_empty()
            );
            assert_eq!(m.counts().submit_failed, 3);
            assert!(m.is_done());
        }

        #[derive(Debug, Clone)]
        enum Fate {
            Succeeds,
            Fails,
            Runs,
            Cancel,
        }

        fn fate() -> impl Strategy<Value = (usize, Fate)> {
            (
                0usize..6,
                prop_oneof![
                    Just(Fate::Succeeds),
                    Just(Fate::Fails),
                    Just(Fate::Runs),
                    Just(Fate::Cancel)
                ],
            )
        }

        proptest! {
            /// Whatever the backend reports, an indexed batch never asks for
            /// a per-input submit, cleanup or cancel; counts always sum to
            /// the total; an input's attempts never pass `1 + retries`;
            /// and each kind of StopBatch is asked for once at most (a
            /// cancel after a fail-fast stop escalates it to a cancel).
            #[test]
            fn indexed_batches_make_no_per_input_calls(
                retries in 0u32..3,
                fail_fast in any::<bool>(),
                cancel_running in any::<bool>(),
                fates in proptest::collection::vec(fate(), 0..40),
            ) {
                let config = BatchConfig::default().retries(retries).fail_fast(fail_fast, cancel_running);
                let (mut m, g) = started(6, config);
                let mut stops = [0; 2];
                for (index, fate) in fates {
                    let attempt = match m.slot(index) {
                        Some(Slot::Active { attempt, .. }) => *attempt,
                        _ => 1,
                    };
                    let cmds = match fate {
                        Fate::Succeeds => observe(&mut m, &g, index, attempt, JobStatus::Succeeded),
                        Fate::Fails => observe(&mut m, &g, index, attempt, JobStatus::Failed),
                        Fate::Runs => observe(&mut m, &g, index, attempt, JobStatus::Running),
                        Fate::Cancel => m.apply(Event::Cancel),
                    };
                    for c in &cmds {
                        match c {
                            Command::StopBatch { cancel_running } => stops[usize::from(*cancel_running)] += 1,
                            Command::RecordChild { attempts, .. } => prop_assert!(*attempts <= retries + 1),
                            other => prop_assert!(false, "a per-input command: {other:?}"),
                        }
                    }
                    prop_assert_eq!(m.counts().total(), 6);
                }
                prop_assert!(stops[0] <= 1 && stops[1] <= 1, "{stops:?}");
            }
        }
    }
}
