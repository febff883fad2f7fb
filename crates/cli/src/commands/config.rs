//! `kinetic config` (being written).

use crate::output::{CliError, Output};

/// Arguments of `kinetic config`.
#[derive(Debug, clap::Args)]
pub(crate) struct ConfigArgs {}

pub(crate) fn run(
    _args: &ConfigArgs,
    _profile: Option<&str>,
    _out: &Output,
) -> Result<(), CliError> {
    Err(CliError::failed("kinetic config is being written"))
}
