//! [`BatchError`], what went wrong for a whole batch, and [`ChildError`],
//! what went wrong for one input.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::{EngineError, JobHandle};
use kinetic_core::batch::SkipReason;
use kinetic_core::ids::{GroupId, JobId};

/// Why one input has no value.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ChildError {
    /// The job ran and failed (the function raised, or it ended without a
    /// usable result); the engine's error says how.
    #[error("input {index} (job {job_id}): {error}")]
    Job {
        /// The input.
        index: usize,
        /// Its job.
        job_id: JobId,
        /// What collecting its result gave.
        error: Arc<EngineError>,
    },
    /// The input could not be submitted.
    #[error("input {index} could not be submitted after {attempts} attempt(s): {error}")]
    Submission {
        /// The input.
        index: usize,
        /// Attempts made.
        attempts: u32,
        /// The last submission error.
        error: Arc<EngineError>,
    },
    /// The input was never submitted, or its job cannot be followed.
    #[error("input {index}: {reason}")]
    NotSubmitted {
        /// The input.
        index: usize,
        /// Why.
        reason: SkipReason,
    },
    /// The job failed, as recorded in the manifest when an earlier
    /// `results` collected it.
    #[error("input {index} (job {job_id}) failed (recorded when it was collected): {message}")]
    Recorded {
        /// The input.
        index: usize,
        /// Its job.
        job_id: JobId,
        /// The error collecting it gave, as text.
        message: String,
    },
}

impl ChildError {
    /// The error as `front` shows it ([`EngineError::message_for`]); the
    /// `Display` is the command line's.
    pub fn message_for(&self, front: kinetic_core::advice::FrontEnd) -> String {
        match self {
            Self::Job {
                index,
                job_id,
                error,
            } => format!("input {index} (job {job_id}): {}", error.message_for(front)),
            Self::Submission {
                index,
                attempts,
                error,
            } => format!(
                "input {index} could not be submitted after {attempts} attempt(s): {}",
                error.message_for(front)
            ),
            other => other.to_string(),
        }
    }

    /// The input.
    pub fn index(&self) -> usize {
        match self {
            Self::Job { index, .. }
            | Self::Submission { index, .. }
            | Self::NotSubmitted { index, .. }
            | Self::Recorded { index, .. } => *index,
        }
    }

    /// The engine's error, when there is one (the remote traceback is in it).
    pub fn engine_error(&self) -> Option<&EngineError> {
        match self {
            Self::Job { error, .. } | Self::Submission { error, .. } => Some(error),
            Self::NotSubmitted { .. } | Self::Recorded { .. } => None,
        }
    }
}

/// A job of the batch that failed, with its error.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FailedChild {
    /// The input.
    pub index: usize,
    /// Its job (for logs, status, cleanup).
    pub job: JobHandle,
    /// What went wrong.
    pub error: ChildError,
}

/// Some inputs of a batch failed. Carries the failed jobs, the inputs that
/// were never submitted, and the values of every other input.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BatchFailure {
    /// The batch.
    pub group_id: GroupId,
    /// Number of inputs.
    pub total: usize,
    /// Jobs that ran and failed, by input index.
    pub failures: Vec<FailedChild>,
    /// Inputs that could not be submitted or were skipped, by index.
    pub submission_failures: BTreeMap<usize, ChildError>,
    /// The value of every input, by index: `None` where it failed.
    pub partial_results: Vec<Option<Value>>,
}

impl BatchFailure {
    /// Inputs without a value: failed jobs plus inputs never submitted.
    pub fn failed_count(&self) -> usize {
        self.failures.len() + self.submission_failures.len()
    }
}

impl fmt::Display for BatchFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Kinetic divides by the number of results it kept, which with
        // `ordered=False` counts only the successes (a Kinetic bug);
        // here the total is always the number of inputs.
        write!(
            f,
            "batch {}: {} of {} inputs failed",
            self.group_id,
            self.failed_count(),
            self.total
        )?;
        if let Some(first) = self
            .failures
            .first()
            .map(|c| &c.error)
            .or_else(|| self.submission_failures.values().next())
        {
            write!(f, " (first: {first})")?;
        }
        Ok(())
    }
}

impl std::error::Error for BatchFailure {}

/// Everything that can go wrong with a batch, organised by what the caller
/// does next.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// The inputs or options are not acceptable (nothing was submitted).
    #[error("{message}")]
    InvalidInput {
        /// What is wrong and what is accepted.
        message: String,
    },
    /// No batch of this id in the store.
    #[error(
        "no batch {group_id}: its manifest is not at {uri} (never submitted here, or cleaned up)"
    )]
    GroupNotFound {
        /// The batch.
        group_id: String,
        /// Where the manifest was looked for.
        uri: String,
    },
    /// The manifest or the stored inputs cannot be read.
    #[error("batch {group_id}: cannot read {uri}: {message}")]
    InvalidManifest {
        /// The batch.
        group_id: GroupId,
        /// The object.
        uri: String,
        /// What is wrong.
        message: String,
    },
    /// Waiting took longer than the caller allowed; the batch goes on and
    /// its handle stays valid.
    #[error("timed out waiting for batch {group_id} after {}", humantime::format_duration(*.after))]
    Timeout {
        /// The batch.
        group_id: GroupId,
        /// How long the caller waited.
        after: Duration,
    },
    /// The submission loop stopped before every input was submitted (its
    /// future was dropped, e.g. the process is exiting): attach to the
    /// batch and [`BatchHandle::resume`](crate::BatchHandle::resume) it.
    #[error(
        "batch {group_id}: submission stopped with {unsubmitted} input(s) not submitted; resume it with `kinetic batch resume {group_id}`"
    )]
    SubmissionStopped {
        /// The batch.
        group_id: GroupId,
        /// Inputs not known to be submitted.
        unsubmitted: usize,
    },
    /// Some inputs failed; the results of the others are kept.
    #[error(transparent)]
    Failed(Box<BatchFailure>),
    /// The engine failed (store, backend, spec…).
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl BatchError {
    /// True when retrying the same call later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Engine(e) => e.is_retryable(),
            Self::Timeout { .. } => true,
            _ => false,
        }
    }

    /// True when the error is about the caller's input (a CLI exits 2).
    pub fn is_invalid_input(&self) -> bool {
        match self {
            Self::InvalidInput { .. } => true,
            Self::Engine(e) => e.is_invalid_input(),
            _ => false,
        }
    }

    /// The failure report, when some inputs failed.
    pub fn failure(&self) -> Option<&BatchFailure> {
        match self {
            Self::Failed(f) => Some(f),
            _ => None,
        }
    }
}

impl From<kinetic_core::ports::StoreError> for BatchError {
    fn from(e: kinetic_core::ports::StoreError) -> Self {
        Self::Engine(e.into())
    }
}

impl From<kinetic_core::ports::BackendError> for BatchError {
    fn from(e: kinetic_core::ports::BackendError) -> Self {
        Self::Engine(e.into())
    }
}
/// A [`BatchError::InvalidInput`] saying `message`.
pub(super) fn invalid(message: impl Into<String>) -> BatchError {
    BatchError::InvalidInput {
        message: message.into(),
    }
}
