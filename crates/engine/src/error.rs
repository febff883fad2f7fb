//! The engine's error: one enum whose variants say what the caller does
//! next — fix the input, fix the project's files, fix permissions, try
//! again later, read the job's own error, check the id, wait longer, or
//! report a bug. The error that caused it (a [`SpecError`], a port error
//! with its adapter's cause below it…) is kept as its `source`.

use std::time::Duration;

use kinetic_core::accelerators::AcceleratorError;
use kinetic_core::advice::FrontEnd;
use kinetic_core::env::EnvError;
use kinetic_core::ports::{BackendError, BoxError, BuildError, RegistryError, StoreError};
use kinetic_core::protocol::{HostReport, RemoteError};
use kinetic_core::status::JobState;

use kinetic_core::spec::SpecError;

/// Everything that can go wrong submitting, watching or collecting a job,
/// grouped by what the caller does next.
///
/// Each variant that wraps another error keeps it as its
/// [`source`](std::error::Error::source), so a program reaches the typed
/// cause with [`EngineError::downcast_ref`] (the [`SpecError`], the
/// [`StoreError`] and, below it, the `object_store::Error`…); the
/// `Display` is the cause's own sentence.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// Fix the input: the call's arguments or settings are not acceptable
    /// (the job spec, the accelerator, a required environment variable,
    /// the backend's name or what it runs, an image setting, a store URL).
    /// Nothing was submitted; the message names the input and what is
    /// accepted. Source: a [`SpecError`], [`AcceleratorError`],
    /// [`EnvError`], [`RegistryError`] or a port error of that kind.
    #[error("{source}")]
    InvalidInput {
        /// What was not acceptable.
        source: BoxError,
    },
    /// Fix the project's files: they could not be read, packaged or hashed
    /// (the message names the path). Nothing was submitted.
    #[error("{message}")]
    Project {
        /// What failed, naming the path.
        message: String,
        /// The I/O or packaging error, where there is one.
        source: Option<BoxError>,
    },
    /// Fix the credentials or permissions: they are missing, expired, or
    /// lack what the message names. Retrying will not help.
    #[error("{source}")]
    PermissionDenied {
        /// The port's error, with the service's answer below it.
        source: BoxError,
    },
    /// Try again later: a service could not be reached or was overloaded.
    /// When `retried` is true the call was already retried as its policy
    /// allows (by `object_store` for the store, by the engine's
    /// [`RetryBackend`](crate::layers::RetryBackend) for backends).
    #[error("{source}")]
    Unavailable {
        /// The call was already retried as its policy allows.
        retried: bool,
        /// The port's error, with the service's answer below it.
        source: BoxError,
    },
    /// Check the id: no such job (never submitted here, or cleaned up), or
    /// an object or job a call needed is gone.
    #[error("{message}")]
    NotFound {
        /// What was looked for, and where.
        message: String,
        /// The port's error, where one said so.
        source: Option<BoxError>,
    },
    /// The job failed remotely: the user's function raised, or a runner
    /// phase failed; the remote type, message, traceback and phase are kept.
    #[error("job {job_id} failed: {error}{}", host_note(.host.as_ref()))]
    Remote {
        /// The job.
        job_id: String,
        /// What the runner reported.
        error: Box<RemoteError>,
        /// For a multi-host job whose leader left no usable result: the
        /// host whose failure this is, and the others that failed too.
        host: Option<HostReport>,
    },
    /// The job failed remotely without a result the engine could use
    /// (killed, cancelled, evicted, out of memory…); the state says why.
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
    /// The result object exists but is not a valid `result.json` (or a
    /// stored record is not valid JSON).
    #[error("job {job_id} wrote an invalid result at {uri}: {message} (artifacts were kept)")]
    InvalidResult {
        /// The job.
        job_id: String,
        /// Where.
        uri: String,
        /// What is wrong with it.
        message: String,
    },
    /// The job's image could not be built: the build ran remotely and
    /// failed, or did not finish in time; the message has its log.
    #[error("{source}")]
    ImageBuild {
        /// The [`BuildError`].
        source: BoxError,
    },
    /// Wait longer: waiting for the job took longer than the caller
    /// allowed; the job keeps running and its handle stays valid.
    #[error("timed out waiting for job {job_id} after {}", humantime::format_duration(*.after))]
    Timeout {
        /// The job.
        job_id: String,
        /// How long the caller waited.
        after: Duration,
    },
    /// A debug job ended (or is gone) before its debugger listened: read
    /// its logs ([`crate::JobHandle::wait_debug_ready`]).
    #[error("Job {job_id} reached terminal state ({status}) before debugpy server was ready.{}", debug_not_ready_detail(job_id, reason.as_deref()))]
    DebugNotReady {
        /// The job.
        job_id: String,
        /// Its state (`SUCCEEDED`, `FAILED`, `NOT_FOUND`).
        status: String,
        /// Why it ended, as its status says (`exited with code 1`), when
        /// the backend says.
        reason: Option<String>,
    },
    /// Report a bug: the engine failed in a way no input explains, or a
    /// service gave an answer nothing expected.
    #[error("{message}")]
    Internal {
        /// What happened.
        message: String,
        /// The error that revealed it, where there is one.
        source: Option<BoxError>,
    },
}

fn describe(state: &JobState) -> String {
    match &state.reason {
        Some(reason) => format!("{} ({reason})", state.status.as_str()),
        None => state.status.as_str().to_owned(),
    }
}

fn host_note(host: Option<&HostReport>) -> String {
    host.map(|h| format!(" ({h})")).unwrap_or_default()
}

fn tail_note(tail: &Option<String>) -> String {
    match tail {
        Some(t) if !t.trim().is_empty() => {
            format!("\n--- last lines of its output ---\n{}", t.trim_end())
        }
        _ => String::new(),
    }
}

impl EngineError {
    /// The error as `front` shows it: where the cause carries advice on
    /// what to set (a backend's refusal of an accelerator…), the settings
    /// are named as that front end names them; the `Display` is the
    /// command line's.
    pub fn message_for(&self, front: FrontEnd) -> String {
        let advised = match self {
            Self::InvalidInput { source } => source
                .downcast_ref::<BackendError>()
                .filter(|e| e.advice().is_some()),
            _ => None,
        };
        match advised {
            Some(e) => e.message_for(front),
            None => self.to_string(),
        }
    }

    /// [`EngineError::InvalidInput`] wrapping `source`.
    pub fn invalid_input(source: impl Into<BoxError>) -> Self {
        Self::InvalidInput {
            source: source.into(),
        }
    }

    /// [`EngineError::Project`] with no underlying error.
    pub fn project(message: impl Into<String>) -> Self {
        Self::Project {
            message: message.into(),
            source: None,
        }
    }

    /// [`EngineError::Project`] caused by `source`.
    pub fn project_caused_by(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Project {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// [`EngineError::NotFound`] for a job whose record is not at `uri`.
    pub fn job_not_found(job_id: &str, uri: &str) -> Self {
        Self::NotFound {
            message: format!("no job {job_id} in {uri} (never submitted here, or cleaned up)"),
            source: None,
        }
    }

    /// [`EngineError::Internal`]: a failure of the engine itself.
    pub fn internal(message: impl std::fmt::Display) -> Self {
        Self::Internal {
            message: format!("internal error: {message}"),
            source: None,
        }
    }

    /// True for [`EngineError::InvalidInput`]: fix the input (a CLI exits 2).
    pub fn is_invalid_input(&self) -> bool {
        matches!(self, Self::InvalidInput { .. })
    }

    /// True for [`EngineError::PermissionDenied`].
    pub fn is_permission_denied(&self) -> bool {
        matches!(self, Self::PermissionDenied { .. })
    }

    /// True for [`EngineError::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    /// True when retrying the same call later may succeed
    /// ([`EngineError::Unavailable`]).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }

    /// True when the failed call was already retried as its policy allows:
    /// retrying it at once would stack retries.
    pub fn is_retried(&self) -> bool {
        matches!(self, Self::Unavailable { retried: true, .. })
    }

    /// True when the job ran and failed remotely ([`EngineError::Remote`],
    /// [`EngineError::NoResult`], [`EngineError::InvalidResult`]).
    pub fn is_job_failure(&self) -> bool {
        matches!(
            self,
            Self::Remote { .. } | Self::NoResult { .. } | Self::InvalidResult { .. }
        )
    }

    /// The remote error, when the job itself failed.
    pub fn remote(&self) -> Option<&RemoteError> {
        match self {
            Self::Remote { error, .. } => Some(error),
            _ => None,
        }
    }

    /// Which host of a multi-host job reported the remote error, when it
    /// came from a worker's result.
    pub fn reporting_host(&self) -> Option<&HostReport> {
        match self {
            Self::Remote { host, .. } => host.as_ref(),
            _ => None,
        }
    }

    /// The first error of type `T` in this error's chain of causes (the
    /// [`SpecError`] of an invalid input, the [`StoreError`] of an
    /// unavailable store, the `object_store::Error` below it…).
    ///
    /// ```
    /// use kinetic_engine::{EngineError, SpecError};
    /// use kinetic_core::ports::StoreError;
    /// let err = EngineError::from(StoreError::unavailable("gs://b/x: 503"));
    /// assert!(err.is_retryable());
    /// assert!(err.downcast_ref::<StoreError>().is_some());
    /// assert!(err.downcast_ref::<SpecError>().is_none());
    /// ```
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        let mut cause = std::error::Error::source(self);
        while let Some(e) = cause {
            if let Some(found) = e.downcast_ref::<T>() {
                return Some(found);
            }
            cause = e.source();
        }
        None
    }
}

impl From<SpecError> for EngineError {
    fn from(e: SpecError) -> Self {
        Self::invalid_input(e)
    }
}

impl From<AcceleratorError> for EngineError {
    fn from(e: AcceleratorError) -> Self {
        Self::invalid_input(e)
    }
}

impl From<EnvError> for EngineError {
    fn from(e: EnvError) -> Self {
        Self::invalid_input(e)
    }
}

impl From<RegistryError> for EngineError {
    fn from(e: RegistryError) -> Self {
        Self::invalid_input(e)
    }
}

/// What a port error asks of its caller, as [`EngineError`]'s variants
/// group it.
enum Action {
    NotFound,
    InvalidInput,
    PermissionDenied,
    Unavailable { retried: bool },
    ImageBuild,
    Internal,
}

impl EngineError {
    /// The variant for a port error, keeping it as the source.
    fn from_port(action: Action, e: impl std::error::Error + Send + Sync + 'static) -> Self {
        let source: BoxError = Box::new(e);
        match action {
            Action::NotFound => Self::NotFound {
                message: source.to_string(),
                source: Some(source),
            },
            Action::InvalidInput => Self::InvalidInput { source },
            Action::PermissionDenied => Self::PermissionDenied { source },
            Action::Unavailable { retried } => Self::Unavailable { retried, source },
            Action::ImageBuild => Self::ImageBuild { source },
            Action::Internal => Self::Internal {
                message: source.to_string(),
                source: Some(source),
            },
        }
    }
}

/// `From` a port error: by its predicates, with `$found` for the kind
/// only its port has (not found; a failed build).
macro_rules! from_port_error {
    ($error:ty, $found:expr) => {
        impl From<$error> for EngineError {
            fn from(e: $error) -> Self {
                let found: Option<Action> = $found(&e);
                let action = found.unwrap_or(if e.is_invalid_input() {
                    Action::InvalidInput
                } else if e.is_permission_denied() {
                    Action::PermissionDenied
                } else if e.is_retryable() {
                    Action::Unavailable {
                        retried: e.is_retried(),
                    }
                } else {
                    Action::Internal
                });
                Self::from_port(action, e)
            }
        }
    };
}

from_port_error!(StoreError, |e: &StoreError| e
    .is_not_found()
    .then_some(Action::NotFound));
from_port_error!(BackendError, |e: &BackendError| e
    .is_not_found()
    .then_some(Action::NotFound));
from_port_error!(BuildError, |e: &BuildError| e
    .is_build_failure()
    .then_some(Action::ImageBuild));

impl From<kinetic_core::plan::PlanError> for EngineError {
    fn from(e: kinetic_core::plan::PlanError) -> Self {
        use kinetic_core::plan::PlanError;
        match e {
            PlanError::Requirements(e) => Self::project_caused_by(e.to_string(), e),
            PlanError::Key(e) => Self::from(e),
            other => Self::Internal {
                message: format!("internal error: {other}"),
                source: Some(Box::new(other)),
            },
        }
    }
}

/// What [`EngineError::DebugNotReady`] adds to Kinetic's sentence: why the
/// job ended, when known, and where to read what happened.
fn debug_not_ready_detail(job_id: &str, reason: Option<&str>) -> String {
    let why = reason
        .map(|r| format!(" It ended: {r}."))
        .unwrap_or_default();
    format!(
        "{why} Its logs say what happened (kinetic jobs logs {job_id}, or the handle's logs())."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_errors_land_in_the_variant_that_says_what_to_do() {
        let e = EngineError::from(StoreError::unavailable("x"));
        assert!(e.is_retryable() && !e.is_retried());
        let e = EngineError::from(BackendError::Unavailable {
            message: "x".into(),
            retried: true,
            source: None,
        });
        assert!(e.is_retried());
        assert!(EngineError::from(StoreError::not_found("x")).is_not_found());
        assert!(EngineError::from(BackendError::not_found("gke", "job-1")).is_not_found());
        assert!(EngineError::from(BackendError::unsupported("no TPU")).is_invalid_input());
        assert!(EngineError::from(BuildError::unsupported("fixed")).is_invalid_input());
        assert!(EngineError::from(StoreError::permission_denied("x")).is_permission_denied());
        assert!(matches!(
            EngineError::from(BuildError::Timeout {
                build_id: "b".into(),
                seconds: 1
            }),
            EngineError::ImageBuild { .. }
        ));
        assert!(matches!(
            EngineError::from(BackendError::other("odd")),
            EngineError::Internal { .. }
        ));
    }

    #[test]
    fn the_message_is_the_causes_and_the_cause_is_kept() {
        let store = StoreError::permission_denied("gs://b/x: 403");
        let text = store.to_string();
        let e = EngineError::from(store);
        assert_eq!(e.to_string(), text);
        assert!(
            e.downcast_ref::<StoreError>()
                .is_some_and(StoreError::is_permission_denied)
        );
    }
}
