//! `kinetic accelerators` (being written).

use crate::output::{CliError, Output};

/// Arguments of `kinetic accelerators`.
#[derive(Debug, clap::Args)]
pub(crate) struct AcceleratorsArgs {}

pub(crate) fn run(_args: &AcceleratorsArgs, _out: &Output) -> Result<(), CliError> {
    Err(CliError::failed("kinetic accelerators is being written"))
}
