//! One module per subcommand: each parses its arguments, calls the engine
//! (built by [`crate::engine`]) and prints through [`crate::render`].

use std::time::Duration;

use kinetic_core::json::{self, JsonError};
use serde_json::Value;

use crate::error::CliError;

pub(crate) mod accelerators;
pub(crate) mod batch;
pub(crate) mod build_image;
pub(crate) mod config;
pub(crate) mod deps;
pub(crate) mod hash;
pub(crate) mod image;
pub(crate) mod infra;
pub(crate) mod jobs;
pub(crate) mod map;
pub(crate) mod pack;
pub(crate) mod pool;
pub(crate) mod profile;
pub(crate) mod run;

/// A `--{flag} SECONDS` value: a positive number of seconds.
pub(crate) fn seconds(flag: &str, value: f64) -> Result<Duration, CliError> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            CliError::usage(format!(
                "--{flag} {value} is not accepted: expected a positive number of seconds"
            ))
        })
}

/// A JSON value given by the user (`what` names it: `--arg "7"`, `--inputs
/// FILE line 3`), read losslessly as the runner protocol carries values
/// (`kinetic_core::json`); `hint` says what is accepted when it is not JSON.
pub(crate) fn parse_json(what: &str, text: &str, hint: &str) -> Result<Value, CliError> {
    json::parse(text.as_bytes()).map_err(|e| match e {
        JsonError::Invalid { .. } => CliError::usage(format!("{what} is not JSON ({e}); {hint}")),
        _ => CliError::usage(format!("{what}: {e}")),
    })
}
