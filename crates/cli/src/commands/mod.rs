//! One module per subcommand: each parses its arguments, calls the engine
//! (built by [`crate::engine`]) and prints through [`crate::render`].

use std::time::Duration;

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
