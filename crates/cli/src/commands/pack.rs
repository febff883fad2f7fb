//! `kinetic pack` (being written).

use crate::output::{CliError, Output};

/// Arguments of `kinetic pack`.
#[derive(Debug, clap::Args)]
pub(crate) struct PackArgs {}

pub(crate) fn run(_args: &PackArgs, _out: &Output) -> Result<(), CliError> {
    Err(CliError::failed("kinetic pack is being written"))
}
