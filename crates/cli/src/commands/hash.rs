//! `kinetic hash PATH`: the content hash the data cache keys a local `Data`
//! path by (bit-compatible with Kinetic).

use std::path::PathBuf;
use std::time::Instant;

use kinetic_core::hashing::{HashError, HashOptions, content_hash_with};

use super::threads_arg;
use crate::error::CliError;
use crate::render::{self, Output, emit};

/// Arguments of `kinetic hash`.
#[derive(Debug, clap::Args)]
pub(crate) struct HashArgs {
    /// File or directory to hash (a symlink to either is followed).
    path: PathBuf,
    /// Hashing threads for a directory (default: all cores; at most 256).
    #[arg(long, value_name = "N", value_parser = threads_arg())]
    threads: Option<u32>,
}

pub(crate) fn run(args: &HashArgs, out: &Output) -> Result<(), CliError> {
    let path = &args.path;
    if std::fs::symlink_metadata(path).is_err() {
        return Err(CliError::usage(format!(
            "{}: no such file or directory (PATH must be an existing file or directory)",
            path.display()
        )));
    }
    let options = HashOptions::default().threads(args.threads.map_or(0, |n| n as usize));
    let started = Instant::now();
    let report = content_hash_with(path, &options).map_err(|e| match e {
        HashError::NotFound { .. } => CliError::usage(e.to_string()),
        other => CliError::failed(format!("cannot hash {}: {other}", path.display())),
    })?;
    let seconds = started.elapsed().as_secs_f64();
    for dir in &report.skipped_dirs {
        render::warn(&format!(
            "skipped unreadable directory {} (as Kinetic does; it is not part of the hash)",
            dir.display()
        ));
    }
    if out.is_json() {
        let mb_per_s = if seconds > 0.0 {
            report.bytes as f64 / seconds / 1e6
        } else {
            0.0
        };
        Ok(out.json(&serde_json::json!({
            "path": path.display().to_string(),
            "hash": report.hash.to_string(),
            "kind": report.kind,
            "files": report.files,
            "bytes": report.bytes,
            "seconds": seconds,
            "mb_per_s": mb_per_s,
        }))?)
    } else {
        Ok(emit(&format!("{}\n", report.hash))?)
    }
}
