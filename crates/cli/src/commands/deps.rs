//! `kinetic deps [DIR] [--mode bundled|prebuilt]`: the dependency file found
//! for a directory, the requirements that would be installed, and why
//! lines were dropped.

use std::path::{Path, PathBuf};

use kinetic_core::requirements::{
    RequirementsError, RequirementsWarning, ResolvedRequirements, resolve,
};
use serde_json::{Value, json};

use crate::engine::Invocation;
use crate::error::CliError;
use crate::flags::ModeArg;
use crate::render::{self, Output, emit};

/// Arguments of `kinetic deps`.
#[derive(Debug, clap::Args)]
pub(crate) struct DepsArgs {
    /// Entry directory of the code; the search walks up from here
    /// (default: the current directory).
    dir: Option<PathBuf>,

    /// How dependencies reach the job: `bundled` (built into the image) or
    /// `prebuilt` (installed at pod start).
    #[arg(long, value_enum, default_value_t = ModeArg::Bundled)]
    mode: ModeArg,
}

pub(crate) fn run(args: &DepsArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    check_dir(&dir)?;
    let home = inv.home();
    let resolved = resolve(&dir, home.as_deref(), args.mode.into()).map_err(to_cli_error)?;
    if out.is_json() {
        Ok(out.json(&to_json(&resolved))?)
    } else {
        print_text(&resolved)
    }
}

fn check_dir(dir: &Path) -> Result<(), CliError> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(CliError::usage(format!(
            "DIR {} is not a directory: give the directory that holds your code",
            dir.display()
        ))),
        Err(_) => Err(CliError::usage(format!(
            "DIR {} does not exist: give the directory that holds your code",
            dir.display()
        ))),
    }
}

fn to_cli_error(err: RequirementsError) -> CliError {
    match err {
        RequirementsError::NotADirectory { .. } => CliError::usage(err.to_string()),
        other => CliError::failed(other.to_string()),
    }
}

fn warning_json(warning: &RequirementsWarning) -> Value {
    let mut value = serde_json::to_value(warning).unwrap_or_else(|_| json!({}));
    if let Value::Object(map) = &mut value {
        map.insert("message".into(), Value::String(warning.to_string()));
    }
    value
}

fn to_json(r: &ResolvedRequirements) -> Value {
    let path_text = |p: &Path| p.to_string_lossy().into_owned();
    json!({
        "dir": path_text(&r.entry_dir),
        "dependency_file": r.file.as_ref().map(|f| path_text(&f.path)),
        "kind": r.file.as_ref().map(|f| f.kind.file_name()),
        "mode": r.mode.as_str(),
        "requirements": r.requirements,
        "warnings": r.warnings.iter().map(warning_json).collect::<Vec<_>>(),
    })
}

fn print_text(r: &ResolvedRequirements) -> Result<(), CliError> {
    for warning in &r.warnings {
        render::notice(warning.is_informational(), &warning.to_string());
    }
    let mut text = match &r.file {
        Some(file) => format!(
            "Dependency file: {} ({})\n",
            file.path.display(),
            file.kind.file_name()
        ),
        None => format!(
            "Dependency file: none found from {} up to the repository root, home or /\n",
            r.entry_dir.display()
        ),
    };
    text.push_str(&format!("Mode: {}\n", r.mode));
    match &r.requirements {
        Some(requirements) => {
            text.push_str("Requirements:\n");
            text.push_str(requirements);
            if !requirements.ends_with('\n') {
                text.push('\n');
            }
        }
        None => text.push_str("Requirements: none (nothing to install)\n"),
    }
    Ok(emit(&text)?)
}
