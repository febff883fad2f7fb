//! `kinetic deps` (being written).

use crate::output::{CliError, Output};

/// Arguments of `kinetic deps`.
#[derive(Debug, clap::Args)]
pub(crate) struct DepsArgs {}

pub(crate) fn run(_args: &DepsArgs, _out: &Output) -> Result<(), CliError> {
    Err(CliError::failed("kinetic deps is being written"))
}
