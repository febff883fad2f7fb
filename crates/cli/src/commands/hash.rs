//! `kinetic hash` (being written).

use crate::output::{CliError, Output};

/// Arguments of `kinetic hash`.
#[derive(Debug, clap::Args)]
pub(crate) struct HashArgs {}

pub(crate) fn run(_args: &HashArgs, _out: &Output) -> Result<(), CliError> {
    Err(CliError::failed("kinetic hash is being written"))
}
