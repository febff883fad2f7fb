//! The engine's error: one enum, organised by what the caller does next.

use std::time::Duration;

use crate::accelerators::AcceleratorError;
use crate::env::EnvError;
use crate::ports::{BackendError, BuildError, RegistryError, StoreError};
use crate::protocol::RemoteError;
use crate::status::JobState;

use super::spec::SpecError;

/// Everything that can go wrong submitting, watching or collecting a job.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The job's specification is not acceptable (nothing was uploaded).
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The accelerator spelling is not known.
    #[error(transparent)]
    Accelerator(#[from] AcceleratorError),
    /// The environment request failed (e.g. required variables not set).
    #[error(transparent)]
    Env(#[from] EnvError),
    /// No backend fits the job.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The project could not be packaged or its data hashed.
    #[error("{message}")]
    Project {
        /// What failed, naming the path.
        message: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The backend failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The image could not be resolved or built.
    #[error(transparent)]
    Image(#[from] BuildError),
    /// No record of this job in the store.
    #[error("no job {job_id} in {uri} (never submitted here, or cleaned up)")]
    JobNotFound {
        /// The job.
        job_id: String,
        /// Where its record was looked for.
        uri: String,
    },
    /// The user's function raised, or a runner phase failed; the remote
    /// type, message, traceback and phase are kept.
    #[error("job {job_id} failed: {error}")]
    Remote {
        /// The job.
        job_id: String,
        /// What the runner reported.
        error: Box<RemoteError>,
    },
    /// The job ended without a result the engine could use (killed,
    /// cancelled, evicted, out of memory…); the state says why.
    #[error("job {job_id} ended {state_text} and left no result at {uri}{logs}", state_text = describe(state), logs = tail_note(.log_tail))]
    NoResult {
        /// The job.
        job_id: String,
        /// Its last observed state.
        state: Box<JobState>,
        /// Where the result was expected.
        uri: String,
        /// The last lines of its output, when the backend had them.
        log_tail: Option<String>,
    },
    /// The result object exists but is not a valid `result.json`.
    #[error("job {job_id} wrote an invalid result at {uri}: {message} (artifacts were kept)")]
    InvalidResult {
        /// The job.
        job_id: String,
        /// Where.
        uri: String,
        /// What is wrong with it.
        message: String,
    },
    /// Waiting for the job took longer than the caller allowed; the job
    /// keeps running and its handle stays valid.
    #[error("timed out waiting for job {job_id} after {}", humantime::format_duration(*.after))]
    Timeout {
        /// The job.
        job_id: String,
        /// How long the caller waited.
        after: Duration,
    },
    /// A local worker thread of the engine failed.
    #[error("internal error: {message}")]
    Internal {
        /// What happened.
        message: String,
    },
}

fn describe(state: &JobState) -> String {
    match &state.reason {
        Some(reason) => format!("{} ({reason})", state.status.as_str()),
        None => state.status.as_str().to_owned(),
    }
}

fn tail_note(tail: &Option<String>) -> String {
    match tail {
        Some(t) if !t.trim().is_empty() => {
            format!("\n--- last lines of its output ---\n{}", t.trim_end())
        }
        _ => String::new(),
    }
}

impl From<crate::plan::PlanError> for EngineError {
    fn from(e: crate::plan::PlanError) -> Self {
        use crate::plan::PlanError;
        match e {
            PlanError::Requirements(e) => Self::Project {
                message: e.to_string(),
            },
            PlanError::Key(e) => Self::Store(e),
            other => Self::Internal {
                message: other.to_string(),
            },
        }
    }
}

impl EngineError {
    /// True when retrying the same call later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Store(e) => e.is_retryable(),
            Self::Backend(e) => e.is_retryable(),
            Self::Image(e) => e.is_retryable(),
            _ => false,
        }
    }

    /// True when the error is about the user's input (a CLI exits 2):
    /// the spec, accelerator, environment or backend name, or an image
    /// setting that cannot serve the job (a fixed image and requirements).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Self::Spec(_)
                | Self::Accelerator(_)
                | Self::Env(_)
                | Self::Registry(_)
                | Self::Backend(
                    BackendError::Unsupported { .. } | BackendError::InvalidInput { .. }
                )
                | Self::Image(BuildError::Unsupported { .. })
        )
    }

    /// The remote error, when the job itself failed.
    pub fn remote(&self) -> Option<&RemoteError> {
        match self {
            Self::Remote { error, .. } => Some(error),
            _ => None,
        }
    }
}
