//! `kinetic pack SRC OUT`: write the `context.zip` that would be shipped for
//! a package root.

use std::path::PathBuf;
use std::time::Instant;

use kinetic_core::packaging::{
    DEFAULT_COMPRESSION_LEVEL, PackError, PackOptions, PackagingPlan, pack,
};
use kinetic_core::settings;

use super::threads_arg;
use crate::engine::Invocation;
use crate::error::CliError;
use crate::render::{self, Output, emit};

/// Arguments of `kinetic pack`.
#[derive(Debug, clap::Args)]
pub(crate) struct PackArgs {
    /// The package root to archive.
    src: PathBuf,
    /// Where to write the archive (written to a temporary file and renamed).
    out: PathBuf,
    /// A path to leave out with everything below it, e.g. a local Data
    /// directory (repeatable).
    #[arg(long = "exclude", value_name = "PATH")]
    exclude: Vec<PathBuf>,
    /// Packaging plan to store at .kinetic/plan.json:
    /// {"package_root","entry_rel","client_cwd_rel","sys_path_rel"}.
    #[arg(long = "plan-json", value_name = "JSON")]
    plan_json: Option<String>,
    /// Deflate level, 1 (fastest) to 9 (smallest).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_COMPRESSION_LEVEL,
          value_parser = clap::value_parser!(u32).range(1..=9))]
    level: u32,
    /// Compression threads (default: all cores; at most 256).
    #[arg(long, value_name = "N", value_parser = threads_arg())]
    threads: Option<u32>,
}

pub(crate) fn run(args: &PackArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    // Only the packaging settings: packing needs no profile.
    let (size_warn, warning) = settings::context_size_warn(inv.env());
    if let Some(warning) = warning {
        render::warn(&warning);
    }
    let mut options = PackOptions::default()
        .default_excludes(settings::default_excludes(inv.env()).value)
        .size_warn_bytes(size_warn.value)
        .compression_level(args.level)
        .threads(args.threads.map_or(0, |n| n as usize));
    for path in &args.exclude {
        options = options.exclude(path);
    }
    if let Some(json) = &args.plan_json {
        let plan = PackagingPlan::from_json(json)
            .map_err(|e| CliError::usage(format!("--plan-json: {e}")))?;
        options = options.plan(plan);
    }
    if let Some(parent) = args.out.parent().filter(|p| !p.as_os_str().is_empty())
        && !parent.is_dir()
    {
        return Err(CliError::usage(format!(
            "{}: the directory for OUT does not exist",
            parent.display()
        )));
    }

    let started = Instant::now();
    let report = pack(&args.src, &args.out, &options).map_err(|e| match e {
        PackError::RootNotFound { .. } | PackError::RootNotADirectory { .. } => {
            CliError::usage(format!("{e} (SRC must be an existing directory)"))
        }
        PackError::OutputNotAFile(_) => CliError::usage(format!(
            "OUT: {e}: refusing to replace it (give the path of a new or regular file)"
        )),
        other => CliError::failed(other.to_string()),
    })?;
    let seconds = started.elapsed().as_secs_f64();

    if out.is_json() {
        let warnings: Vec<String> = report.warnings.iter().map(ToString::to_string).collect();
        return Ok(out.json(&serde_json::json!({
            "path": report.path.display().to_string(),
            "entries": report.entries,
            "files": report.files,
            "dirs": report.dirs,
            "bytes_in": report.bytes_in,
            "bytes_out": report.bytes_out,
            "sha256": report.sha256,
            "seconds": seconds,
            "warnings": warnings,
        }))?);
    }
    for warning in &report.warnings {
        render::warn(&warning.to_string());
    }
    Ok(emit(&format!(
        "wrote {}: {} entries ({} files, {} empty dirs), {:.1} MB -> {:.1} MB in {:.2} s, sha256 {}\n",
        report.path.display(),
        report.entries,
        report.files,
        report.dirs,
        report.bytes_in as f64 / 1e6,
        report.bytes_out as f64 / 1e6,
        seconds,
        report.sha256
    ))?)
}
