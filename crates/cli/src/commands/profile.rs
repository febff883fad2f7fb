//! `kinetic profile` (being written).

use crate::output::{CliError, Output};

/// Arguments of `kinetic profile`.
#[derive(Debug, clap::Args)]
pub(crate) struct ProfileArgs {}

pub(crate) fn run(_args: &ProfileArgs, _out: &Output) -> Result<(), CliError> {
    Err(CliError::failed("kinetic profile is being written"))
}
