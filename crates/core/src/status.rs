//! Job status, and why a job is in it.
//!
//! [`JobStatus`] is Kinetic's five-valued status, with the
//! same strings on the wire (`PENDING`, `RUNNING`, `SUCCEEDED`, `FAILED`,
//! `NOT_FOUND`). Kinetic stops there, so a job whose image cannot be pulled
//! or whose pod cannot be scheduled stays `PENDING` forever.
//! Here a backend also reports a [`StatusReason`]: what the job is waiting
//! for, or why it failed. [`StatusReason::is_blocking`] tells the engine
//! that waiting will not help, so it can fail fast or apply a pending
//! deadline. [`JobState`] carries both.
//!
//! ```
//! use kinetic_core::status::{JobState, JobStatus, StatusReason};
//!
//! let state = JobState::new(JobStatus::Pending).with_reason(StatusReason::Unschedulable {
//!     message: "0/3 nodes are available: 3 Insufficient google.com/tpu".into(),
//! });
//! assert!(!state.status.is_terminal());
//! assert!(state.is_blocked());
//! assert_eq!(serde_json::to_value(JobStatus::NotFound).unwrap(), "NOT_FOUND");
//! ```

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The status of a job, as Kinetic reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobStatus {
    /// Submitted; no pod is running yet (scheduling, pulling, creating).
    Pending,
    /// The job's (leader) pod is running.
    Running,
    /// The job finished successfully.
    Succeeded,
    /// The job finished unsuccessfully.
    Failed,
    /// The job's Kubernetes object does not exist (never created, cleaned up,
    /// or removed by its time-to-live).
    NotFound,
}

impl JobStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [JobStatus; 5] = [
        JobStatus::Pending,
        JobStatus::Running,
        JobStatus::Succeeded,
        JobStatus::Failed,
        JobStatus::NotFound,
    ];

    /// True for the statuses a job never leaves: `SUCCEEDED`, `FAILED`,
    /// `NOT_FOUND` (Kinetic's terminal set).
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::NotFound)
    }

    /// The wire string: `PENDING`, `RUNNING`, `SUCCEEDED`, `FAILED` or `NOT_FOUND`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Running => "RUNNING",
            Self::Succeeded => "SUCCEEDED",
            Self::Failed => "FAILED",
            Self::NotFound => "NOT_FOUND",
        }
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A status string that is not one of the five.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid job status '{input}': expected one of PENDING, RUNNING, SUCCEEDED, FAILED, NOT_FOUND"
)]
#[non_exhaustive]
pub struct ParseStatusError {
    /// The text that was given.
    pub input: String,
}

impl FromStr for JobStatus {
    type Err = ParseStatusError;

    /// Parses the exact wire string (case-sensitive, as Kinetic's enum).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| ParseStatusError {
                input: s.to_owned(),
            })
    }
}

/// Why a job is pending, or why it failed.
///
/// Serialised as an object tagged by `kind` (`{"kind":"exit_code","code":1}`).
/// Durations serialise as humantime strings (`"10m 30s"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StatusReason {
    /// The scheduler cannot place the pod (no matching node pool, quota,
    /// spot mismatch…). `message` is the scheduler's event text.
    Unschedulable {
        /// The scheduler's explanation (e.g. a `FailedScheduling` event).
        message: String,
    },
    /// The container image cannot be pulled (`ImagePullBackOff`,
    /// `ErrImagePull`, `ErrImageNeverPull`, `InvalidImageName`).
    ImagePullError {
        /// The image reference.
        image: String,
        /// The waiting reason reported by the kubelet.
        reason: String,
        /// The kubelet's message.
        message: String,
    },
    /// The container cannot be created from its configuration (e.g.
    /// `CreateContainerConfigError`: a referenced Secret is missing).
    ContainerConfigError {
        /// The waiting reason reported by the kubelet.
        reason: String,
        /// The kubelet's message.
        message: String,
    },
    /// The job's pod cannot be created: the API server refuses it (a
    /// missing service account, a ResourceQuota, a LimitRange, a
    /// PodSecurity level), so the job has no pod at all. `message` is the
    /// server's refusal as the Job controller recorded it (its
    /// `FailedCreate` event).
    PodCreationFailed {
        /// The refusal (`Error creating: pods "…" is forbidden: …`).
        message: String,
    },
    /// The container was killed for exceeding its memory limit.
    OomKilled,
    /// The node was preempted (Spot / preemptible VM reclaimed).
    Preempted,
    /// The pod was evicted from its node.
    Evicted {
        /// The eviction message.
        message: String,
    },
    /// The job ran longer than its running deadline.
    DeadlineExceeded,
    /// The job stayed pending longer than its pending deadline.
    PendingDeadlineExceeded {
        /// How long it had been pending.
        #[serde(with = "humantime_serde_duration")]
        waited: Duration,
        /// The last pending reason seen, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<Box<StatusReason>>,
    },
    /// The pod is scheduled; its containers are being created (image pull
    /// in progress, volumes mounting).
    ContainerCreating,
    /// Waiting for capacity: the pod is pending while nodes scale up.
    WaitingForResources,
    /// A local job waits for whole GPUs of its host while other jobs hold
    /// them: shown as `waiting for 1 GPU of 2 (2 held by job-…)`.
    WaitingForGpus {
        /// GPUs the job asks for.
        wanted: u32,
        /// GPUs the host has.
        total: u32,
        /// GPUs other jobs hold now.
        held: u32,
        /// The jobs holding them, each once.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        held_by: Vec<String>,
    },
    /// A multi-host slice waits for its turn on its node pool, whose
    /// slices run whole, one at a time: shown as `waiting: pool
    /// tpu-v5-lite-podslice 4x4 holds 1 slice of 4 hosts, 1 in use
    /// (kinetic-…), 1 queued ahead`.
    WaitingForSlice {
        /// The pool (its TPU type and topology).
        pool: String,
        /// Hosts per slice.
        hosts: u32,
        /// Slices the pool runs at once.
        holds: u32,
        /// The jobs (objects) whose slices hold it now.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        in_use: Vec<String>,
        /// Slices queued before this one.
        #[serde(default)]
        ahead: u32,
    },
    /// The job's process exited with a non-zero code.
    ExitCode {
        /// The exit code.
        code: i32,
    },
    /// The job was cancelled by a user.
    Cancelled,
    /// The backend no longer holds the job because it was cleaned up: its
    /// resources were removed (after its value was collected, or on
    /// request); its folder in the store remains.
    CleanedUp {
        /// Whether the job had left its result (in the store) when it
        /// was cleaned up; not whether anyone read it.
        collected: bool,
    },
    /// The job runs again after an attempt ended badly, within the
    /// budget of that kind of failure (see [`crate::budget`]): shown as
    /// `preempted, restarting (attempt 2 of 4)`.
    Restarting {
        /// The number of the attempt now running (or pending).
        attempt: u32,
        /// The most attempts the job's budgets allow.
        of: u32,
        /// How the previous attempt ended.
        after: crate::budget::Outcome,
    },
    /// The job's node was preempted (or its pod evicted) more times than
    /// its infrastructure restart budget allows.
    RestartsSpent {
        /// How the last attempt ended (`preempted` or `evicted`).
        after: crate::budget::Outcome,
        /// Infrastructure failures so far.
        times: u32,
        /// The budget.
        budget: u32,
    },
    /// The backend could not tell (an API error while observing the job).
    BackendError {
        /// The backend's error text.
        message: String,
    },
    /// One host of a multi-host slice was lost (its container restarted,
    /// its pod failed, or its pod was deleted and made again), which ends
    /// the slice: shown as `worker 2 (pod kinetic-x-0-2) failed: exit code
    /// 1; the slice was recreated`.
    HostLost {
        /// The host's index in the slice (0 is the leader).
        host: u32,
        /// The lost pod's name.
        pod: String,
        /// What happened to it, as the cluster told it (`failed: exit code
        /// 1; the slice was recreated`).
        cause: String,
    },
}

impl StatusReason {
    /// True for a pending reason that will not resolve by itself: the pod
    /// cannot be scheduled or created, its image cannot be pulled, or its
    /// container cannot be created from its configuration.
    pub fn is_blocking(&self) -> bool {
        match self {
            Self::Unschedulable { .. }
            | Self::ImagePullError { .. }
            | Self::ContainerConfigError { .. }
            | Self::PodCreationFailed { .. } => true,
            Self::PendingDeadlineExceeded { cause, .. } => {
                cause.as_deref().is_some_and(Self::is_blocking)
            }
            _ => false,
        }
    }
}

impl fmt::Display for StatusReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unschedulable { message } => write!(f, "pod cannot be scheduled: {message}"),
            Self::ImagePullError {
                image,
                reason,
                message,
            } => write!(f, "cannot pull image {image} ({reason}): {message}"),
            Self::ContainerConfigError { reason, message } => {
                write!(f, "container cannot be created ({reason}): {message}")
            }
            Self::PodCreationFailed { message } => {
                write!(f, "its pod cannot be created: {message}")
            }
            Self::OomKilled => f.write_str("killed for running out of memory (OOMKilled)"),
            Self::Preempted => f.write_str("node was preempted"),
            Self::Evicted { message } => write!(f, "pod was evicted: {message}"),
            Self::DeadlineExceeded => f.write_str("running deadline exceeded"),
            Self::PendingDeadlineExceeded { waited, cause } => {
                let waited = humantime::format_duration(*waited);
                match cause {
                    Some(cause) => write!(f, "still pending after {waited}: {cause}"),
                    None => write!(f, "still pending after {waited}"),
                }
            }
            Self::ContainerCreating => f.write_str("container is being created"),
            Self::WaitingForResources => {
                f.write_str("waiting for resources (a free slot, or nodes scaling up)")
            }
            Self::WaitingForGpus {
                wanted,
                total,
                held,
                held_by,
            } => {
                let gpus = if *wanted == 1 { "GPU" } else { "GPUs" };
                write!(f, "waiting for {wanted} {gpus} of {total}")?;
                if held_by.is_empty() {
                    f.write_str(" (queued behind other GPU jobs)")
                } else {
                    write!(f, " ({held} held by {})", held_by.join(", "))
                }
            }
            Self::WaitingForSlice {
                pool,
                hosts,
                holds,
                in_use,
                ahead,
            } => {
                let slices = if *holds == 1 { "slice" } else { "slices" };
                write!(
                    f,
                    "waiting: pool {pool} holds {holds} {slices} of {hosts} hosts, {} in use",
                    in_use.len()
                )?;
                if !in_use.is_empty() {
                    write!(f, " ({})", in_use.join(", "))?;
                }
                if *ahead > 0 {
                    write!(f, ", {ahead} queued ahead")?;
                }
                Ok(())
            }
            Self::ExitCode { code } => write!(f, "exited with code {code}"),
            Self::Cancelled => f.write_str("cancelled"),
            // "collected" says the job had left its result, not that
            // anyone read it: the result stays in the store.
            Self::CleanedUp { collected: true } => {
                f.write_str("cleaned up; its result stays in the store")
            }
            Self::CleanedUp { collected: false } => {
                f.write_str("cleaned up before it left a result")
            }
            Self::Restarting { attempt, of, after } if after.is_infrastructure() => {
                write!(f, "{after}, restarting (attempt {attempt} of {of})")
            }
            Self::Restarting { attempt, of, .. } => {
                write!(f, "failed, retrying (attempt {attempt} of {of})")
            }
            Self::RestartsSpent {
                after,
                times,
                budget,
            } => f.write_str(&crate::budget::restarts_spent(*times, *budget, *after)),
            Self::BackendError { message } => write!(f, "backend error: {message}"),
            Self::HostLost {
                host: 0,
                pod,
                cause,
            } => write!(f, "leader (pod {pod}) {cause}"),
            Self::HostLost { host, pod, cause } => write!(f, "worker {host} (pod {pod}) {cause}"),
        }
    }
}

/// A job's status with the reason for it, when the backend knows one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobState {
    /// The status.
    pub status: JobStatus,
    /// Why the job is in it (pending or failed), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<StatusReason>,
    /// The job's attempts as the backend sees them now, first first
    /// (empty when it keeps no history, see [`crate::budget`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<crate::budget::Attempt>,
}

impl JobState {
    /// A state without a reason.
    pub fn new(status: JobStatus) -> Self {
        Self {
            status,
            reason: None,
            attempts: Vec::new(),
        }
    }

    /// The same state with the job's attempts.
    pub fn with_attempts(mut self, attempts: Vec<crate::budget::Attempt>) -> Self {
        self.attempts = attempts;
        self
    }

    /// The same state with a reason.
    pub fn with_reason(mut self, reason: StatusReason) -> Self {
        self.reason = Some(reason);
        self
    }

    /// True when the job is not terminal and its reason says waiting will
    /// not help ([`StatusReason::is_blocking`]).
    pub fn is_blocked(&self) -> bool {
        !self.status.is_terminal() && self.reason.as_ref().is_some_and(StatusReason::is_blocking)
    }
}

impl From<JobStatus> for JobState {
    fn from(status: JobStatus) -> Self {
        Self::new(status)
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            Some(reason) => write!(f, "{} ({reason})", self.status),
            None => write!(f, "{}", self.status),
        }
    }
}

/// Serde for a [`Duration`] as a humantime string (`"1h 2m 3s"`).
mod humantime_serde_duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&humantime::format_duration(*d))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map_err(|e| {
            D::Error::custom(format!(
                "invalid duration '{text}': {e} (expected e.g. \"10m 30s\")"
            ))
        })
    }
}
