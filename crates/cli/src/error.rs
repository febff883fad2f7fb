//! A command's failure and its exit code: bad input exits 2, a failure of
//! the work exits 1. Each library error maps here once.

use std::fmt;

use kinetic_core::config::ProfileError;
use kinetic_core::engine::{BatchError, EngineError};
use kinetic_core::settings::SettingsError;

use crate::render;

/// A command's failure: bad input (exit 2) or a failure of the work (exit 1).
#[derive(Debug)]
pub(crate) enum CliError {
    /// The user's input was not acceptable; the message names it and what is accepted.
    Usage(String),
    /// The input was fine but the work failed.
    Failed(String),
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

    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => 2,
            Self::Failed(_) => 1,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, always: a multi-line message is folded so scripts can grep it.
        let msg = match self {
            Self::Usage(m) | Self::Failed(m) => m,
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

/// An engine error; a remote failure prints the remote traceback first.
pub(crate) fn engine_error(err: EngineError) -> CliError {
    if let Some(tb) = err.remote().and_then(|r| r.traceback.as_ref()) {
        render::remote_traceback(tb);
    }
    CliError::of(err.is_usage(), err.to_string())
}

/// A planning error: a bad name or value, a missing pool, is the user's
/// input; a cluster in the wrong state is a failure.
pub(crate) fn core_infra_error(e: kinetic_core::infra::InfraError) -> CliError {
    CliError::of(e.is_invalid_input(), e.to_string())
}

/// An error of the infrastructure adapter.
pub(crate) fn infra_error(e: kinetic_infra_gcp::InfraError) -> CliError {
    CliError::of(e.is_invalid_input(), e.to_string())
}

/// A batch error.
pub(crate) fn batch_error(err: BatchError) -> CliError {
    CliError::of(err.is_usage(), err.to_string())
}
