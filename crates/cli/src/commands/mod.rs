//! One module per subcommand: each parses its arguments, calls the engine
//! (built by [`crate::engine`]) and prints through [`crate::render`].

use std::time::Duration;

use kinetic_core::json::{self, JsonError};
use kinetic_core::settings;
use serde_json::Value;

use crate::error::CliError;

pub(crate) mod accelerators;
pub(crate) mod batch;
pub(crate) mod build_image;
pub(crate) mod completions;
pub(crate) mod config;
pub(crate) mod deps;
pub(crate) mod entry_check;
pub(crate) mod hash;
pub(crate) mod image;
pub(crate) mod infra;
pub(crate) mod jobs;
pub(crate) mod man;
pub(crate) mod map;
pub(crate) mod pack;
pub(crate) mod pool;
pub(crate) mod profile;
pub(crate) mod run;

/// The parser of a `--threads N` flag: `0` (all cores) up to
/// [`MAX_THREADS`](kinetic_core::hashing::MAX_THREADS); clap names the flag
/// and the range when a value is outside it.
pub(crate) fn threads_arg() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(0..=kinetic_core::hashing::MAX_THREADS as i64)
}

/// A `--{flag} SECONDS` value: a positive number of seconds, at most
/// [`MAX_SECONDS`](kinetic_core::settings::MAX_SECONDS).
pub(crate) fn seconds(flag: &str, value: f64) -> Result<Duration, CliError> {
    settings::positive_seconds(value).ok_or_else(|| {
        CliError::usage(format!(
            "--{flag} {value} is not accepted: expected {}",
            settings::SECONDS_EXPECTED
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
