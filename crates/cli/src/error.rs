//! A command's failure and its exit code: bad input exits 2, a failure of
//! the work exits 1. Each library error maps here once: an
//! [`EngineError`]'s variant says what the user does next, and
//! [`engine_error`] turns it into the exit code and the message.

use std::fmt;

use kinetic_core::config::ProfileError;
use kinetic_core::ports::BuildError;
use kinetic_core::settings::SettingsError;
use kinetic_engine::{BatchError, EngineError};

use crate::render;

/// A command's failure: bad input (exit 2) or a failure of the work (exit 1).
#[derive(Debug)]
pub(crate) enum CliError {
    /// The user's input was not acceptable; the message names it and what is accepted.
    Usage(String),
    /// The input was fine but the work failed.
    Failed(String),
    /// The user interrupted the command (Ctrl-C); the message says what
    /// goes on and how to reattach. Exits 130, as a shell reports SIGINT.
    Interrupted(String),
}

impl From<render::RenderError> for CliError {
    fn from(e: render::RenderError) -> Self {
        match e {
            render::RenderError::Usage(m) => Self::Usage(m),
            render::RenderError::Failed(m) => Self::Failed(m),
        }
    }
}

/// A command's failure, on stderr; an interruption is not an error and
/// speaks for itself (`interrupted: …`). With `--json`, one line of JSON
/// ([`json_error`]) instead.
pub(crate) fn print(err: &CliError, json: bool) {
    if json {
        eprintln!(
            "{}",
            json_error(err.kind(), &err.to_string(), err.exit_code())
        );
        return;
    }
    match err {
        CliError::Interrupted(_) => eprintln!("{err}"),
        _ => eprintln!("error: {err}"),
    }
}

/// The error object every failure under `--json` prints on stderr, on one
/// line: `{"error": {"kind": …, "message": …, "exit_code": …}}`. `kind` is
/// one of `usage` (exit 2), `failed` (exit 1), `interrupted` (exit 130);
/// scripts may rely on these names.
pub(crate) fn json_error(kind: &str, message: &str, exit_code: u8) -> String {
    serde_json::json!({"error": {"kind": kind, "message": message, "exit_code": exit_code}})
        .to_string()
}

impl CliError {
    pub(crate) fn usage(msg: impl Into<String>) -> Self {
        Self::Usage(msg.into())
    }

    pub(crate) fn failed(msg: impl Into<String>) -> Self {
        Self::Failed(msg.into())
    }

    /// Usage when `usage`, else a failure.
    fn of(usage: bool, msg: String) -> Self {
        if usage {
            Self::Usage(msg)
        } else {
            Self::Failed(msg)
        }
    }

    pub(crate) fn interrupted(msg: impl Into<String>) -> Self {
        Self::Interrupted(msg.into())
    }

    /// The stable name of the failure's kind, as `--json` prints it.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::Usage(_) => "usage",
            Self::Failed(_) => "failed",
            Self::Interrupted(_) => "interrupted",
        }
    }

    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => 2,
            Self::Failed(_) => 1,
            Self::Interrupted(_) => 130,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, always: a multi-line message is folded so scripts can grep it.
        let msg = match self {
            Self::Usage(m) | Self::Failed(m) | Self::Interrupted(m) => m,
        };
        write!(f, "{}", msg.trim().replace('\n', " "))
    }
}

/// The user's input (unknown profile, bad value) is a usage error; a broken
/// profiles file or a missing home directory a failure.
pub(crate) fn settings_error(e: SettingsError) -> CliError {
    CliError::of(e.is_invalid_input(), e.to_string())
}

/// Bad or unknown names are the user's input (exit 2); file trouble is a failure (exit 1).
pub(crate) fn profile_error(e: ProfileError) -> CliError {
    CliError::of(e.is_invalid_input(), e.to_string())
}

/// An engine error, mapped by what its variant tells the user to do: fix
/// the input exits 2; everything else exits 1, with a hint where the
/// variant calls for one. A remote failure prints the remote traceback
/// first. The one place engine errors become exit codes and messages.
pub(crate) fn engine_error(err: EngineError) -> CliError {
    if let Some(tb) = err.remote().and_then(|r| r.traceback.as_ref()) {
        render::remote_traceback(tb);
    }
    engine_error_quiet(err)
}

/// [`engine_error`] without printing the remote traceback, for a caller
/// that has shown it already (`kinetic run` streamed it with the job's
/// output) or prints it elsewhere (in `--json` output).
pub(crate) fn engine_error_quiet(err: EngineError) -> CliError {
    let mut message = err.to_string();
    // A job's bucket is missing: the project has no cluster of that name
    // set up, or the names are wrong.
    if message.starts_with("the bucket gs://") && message.contains("does not exist") {
        message.push_str(
            ": the project has no kinetic cluster of this name set up (or --project or --cluster is wrong); `kinetic up` creates its buckets, and `kinetic doctor` shows what is missing",
        );
    }
    match err {
        EngineError::InvalidInput { .. } => CliError::usage(message),
        EngineError::Unavailable { .. } => CliError::failed(format!("{message}; try again later")),
        EngineError::Internal { source: None, .. } => CliError::failed(format!(
            "{message} (this is a bug in kinetic: please report it)"
        )),
        // Fix the project's files, fix permissions, check the id, read
        // the job's or the build's error, wait longer: the message says
        // which and how.
        EngineError::Project { .. }
        | EngineError::PermissionDenied { .. }
        | EngineError::NotFound { .. }
        | EngineError::Remote { .. }
        | EngineError::NoResult { .. }
        | EngineError::InvalidResult { .. }
        | EngineError::ImageBuild { .. }
        | EngineError::Timeout { .. }
        | EngineError::Internal { .. } => CliError::failed(message),
        _ => CliError::failed(message),
    }
}

/// A planning error: a bad name or value, a missing pool, is the user's
/// input; a cluster in the wrong state is a failure.
pub(crate) fn core_infra_error(e: kinetic_infra_gcp::model::InfraError) -> CliError {
    CliError::of(e.is_invalid_input(), e.to_string())
}

/// An error of the infrastructure adapter.
pub(crate) fn infra_error(e: kinetic_infra_gcp::InfraError) -> CliError {
    CliError::of(e.is_invalid_input(), e.to_string())
}

/// A batch error: the caller's input exits 2, an engine error maps as
/// [`engine_error`] does, anything else (some inputs failed, no such
/// batch, a timeout) exits 1.
pub(crate) fn batch_error(err: BatchError) -> CliError {
    match err {
        BatchError::InvalidInput { .. } => CliError::usage(err.to_string()),
        BatchError::Engine(e) => engine_error(e),
        other => CliError::failed(other.to_string()),
    }
}

/// An image builder's error met outside the engine (`kinetic image`,
/// `kinetic build-image`): mapped as the engine maps it.
pub(crate) fn build_error(err: BuildError) -> CliError {
    engine_error(EngineError::from(err))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kinetic_core::ports::{BackendError, StoreError};

    #[test]
    fn each_engine_error_maps_once_to_an_exit_code_and_a_message() {
        let e = engine_error(BackendError::unsupported("no TPU here").into());
        assert_eq!(
            (e.exit_code(), e.to_string()),
            (2, "no TPU here".to_owned())
        );

        let e = engine_error(StoreError::unavailable("gs://b/x: HTTP 503").into());
        assert_eq!(e.exit_code(), 1);
        assert!(e.to_string().ends_with("; try again later"), "{e}");

        let e = engine_error(EngineError::internal("a worker thread panicked"));
        assert_eq!(e.exit_code(), 1);
        assert!(e.to_string().contains("please report it"), "{e}");

        // A service's odd answer is not called a bug of ours.
        let e = engine_error(BackendError::other("odd").into());
        assert_eq!(
            (e.exit_code(), e.to_string()),
            (1, "backend error: odd".to_owned())
        );

        let e = engine_error(StoreError::permission_denied("gs://b/x: 403").into());
        assert_eq!(e.exit_code(), 1);
        assert_eq!(e.to_string(), "permission denied: gs://b/x: 403");
    }

    #[test]
    fn batch_errors_map_through_the_engine_mapping() {
        let e = batch_error(BatchError::Engine(
            BackendError::unsupported("no GPU").into(),
        ));
        assert_eq!(e.exit_code(), 2);
        let e = batch_error(BatchError::InvalidInput {
            message: "no inputs".into(),
        });
        assert_eq!(e.exit_code(), 2);
    }
}
