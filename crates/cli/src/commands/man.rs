//! `kinetic man`: the manual page (roff), generated from the command
//! line's own definitions (clap): `kinetic.1` on stdout, or with
//! `--out-dir DIR` one page per command (`kinetic.1`, `kinetic-run.1`,
//! `kinetic-batch-wait.1`, …) written there.

use std::path::PathBuf;

use crate::engine::Invocation;
use crate::error::CliError;
use crate::render::{self, Output, emit};

/// Arguments of `kinetic man`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Read it with `kinetic man | man -l -`.")]
pub(crate) struct ManArgs {
    /// Write a page per command into this directory instead.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
}

/// Print (or write) the manual page of `cli`, the whole command line.
pub(crate) fn run(
    args: &ManArgs,
    cli: clap::Command,
    inv: &Invocation,
    out: &Output,
) -> Result<(), CliError> {
    let Some(dir) = &args.out_dir else {
        let mut page = Vec::new();
        clap_mangen::Man::new(cli)
            .render(&mut page)
            .map_err(|e| CliError::failed(format!("cannot render the manual page: {e}")))?;
        return Ok(emit(&String::from_utf8_lossy(&page))?);
    };
    let dir = inv.cwd()?.join(dir);
    if !dir.is_dir() {
        return Err(CliError::usage(format!(
            "--out-dir {}: not a directory (create it first)",
            dir.display()
        )));
    }
    clap_mangen::generate_to(cli, &dir).map_err(|e| {
        CliError::failed(format!(
            "cannot write the manual pages into {}: {e}",
            dir.display()
        ))
    })?;
    Ok(render::done(
        "out_dir",
        &dir.display().to_string(),
        "manual pages written",
        out,
    )?)
}
