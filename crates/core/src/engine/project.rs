//! The user's project as the engine ships it: the package root and plan
//! for an entrypoint, the packed context, and data hashes. Blocking
//! filesystem work; the engine runs it off the executor.

use std::path::{Path, PathBuf};

use crate::hashing::{HashKind, HashOptions, content_hash_with};
use crate::packaging::{self, PackageRootInputs, PackagingPlan};
use crate::plan::ProjectFacts;
use crate::protocol::{RunnerEntrypoint, RunnerPlan};

use super::EngineError;
use super::spec::{Entrypoint, SpecError, absolute};

/// Where the project is and how the runner finds the entrypoint in it.
#[derive(Debug, Clone)]
pub(crate) struct Project {
    /// The package root (what `context.zip` holds).
    pub(crate) root: PathBuf,
    /// The plan, as packaging writes it.
    pub(crate) packaging_plan: PackagingPlan,
    /// What planning needs: the plan as `spec.json` carries it, and the
    /// entrypoint relative to the workspace.
    pub(crate) facts: ProjectFacts,
}

impl Project {
    /// The entry directory, where the dependency file search starts.
    pub(crate) fn entry_dir(&self) -> PathBuf {
        Path::new(&self.packaging_plan.package_root).join(&self.packaging_plan.entry_rel)
    }
}

/// Find the package root and plan for `entrypoint` run from `cwd`.
pub(crate) fn resolve(
    entrypoint: &Entrypoint,
    cwd: &Path,
    home: Option<&Path>,
    package_root_override: Option<&str>,
) -> Result<Project, EngineError> {
    let file = match entrypoint {
        Entrypoint::File { path, .. } => {
            let abs = absolute(path, cwd);
            if !abs.is_file() {
                return Err(SpecError::Entrypoint {
                    input: entrypoint.to_string(),
                    reason: format!("the file {} does not exist", abs.display()),
                }
                .into());
            }
            Some(abs)
        }
        _ => None,
    };
    let entry_dir = file
        .as_deref()
        .and_then(Path::parent)
        .map_or_else(|| cwd.to_path_buf(), Path::to_path_buf);
    let inputs = PackageRootInputs::new(&entry_dir, home.unwrap_or(Path::new("/")), cwd)
        .sys_path([entry_dir.to_string_lossy().into_owned()])
        .package_root_override(package_root_override);
    let plan = packaging::detect_package_root(&inputs)
        .map_err(|e| EngineError::project_caused_by(e.to_string(), e))?;
    let root = PathBuf::from(&plan.package_root);
    let runner_entrypoint = match entrypoint {
        Entrypoint::Module { module, function } => RunnerEntrypoint::Function {
            module: Some(module.clone()),
            path: None,
            function: function.clone(),
        },
        Entrypoint::File { function, .. } => {
            let abs = file.unwrap_or_default();
            let rel = relative_to(&abs, &root).ok_or_else(|| EngineError::project(format!(
                    "the entrypoint file {} is outside the package root {} (set KINETIC_PACKAGE_ROOT to a directory that holds it)",
                    abs.display(),
                    root.display()
                )))?;
            RunnerEntrypoint::Function {
                module: None,
                path: Some(rel),
                function: function.clone(),
            }
        }
        Entrypoint::Command { argv } => RunnerEntrypoint::Command { argv: argv.clone() },
    };
    Ok(Project {
        root,
        facts: ProjectFacts {
            plan: RunnerPlan {
                package_root: plan.package_root.clone(),
                entry_rel: plan.entry_rel.clone(),
                client_cwd_rel: plan.client_cwd_rel.clone(),
                sys_path_rel: plan.sys_path_rel.clone(),
            },
            entrypoint: runner_entrypoint,
        },
        packaging_plan: plan,
    })
}

/// `path` relative to `root` with `/` separators, retrying on canonical paths.
fn relative_to(path: &Path, root: &Path) -> Option<String> {
    let rel = path
        .strip_prefix(root)
        .ok()
        .map(Path::to_path_buf)
        .or_else(|| {
            let p = path.canonicalize().ok()?;
            let r = root.canonicalize().ok()?;
            p.strip_prefix(r).ok().map(Path::to_path_buf)
        })?;
    Some(
        rel.components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/"),
    )
}

/// How the engine packs: the packaging settings it was given.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PackSettings {
    /// Leave `.venv`, `node_modules` and the like out.
    pub(crate) default_excludes: bool,
    /// Warn above this many bytes (0 = never).
    pub(crate) size_warn_bytes: u64,
    /// What the runner will extract: a larger archive is refused here,
    /// before it is uploaded.
    pub(crate) limits: crate::protocol::ExtractLimits,
}

/// The packed context.
#[derive(Debug, Clone)]
pub(crate) struct PackedContext {
    /// SHA-256 of the archive.
    pub(crate) sha256: [u8; 32],
    /// Entries in the archive.
    pub(crate) entries: usize,
    /// Archive size.
    pub(crate) bytes: u64,
    /// Warnings for the user, as text.
    pub(crate) warnings: Vec<String>,
}

/// Write `context.zip` for the project at `out`, leaving out `excludes`.
pub(crate) fn pack(
    project: &Project,
    out: &Path,
    excludes: &[PathBuf],
    settings: PackSettings,
) -> Result<PackedContext, EngineError> {
    // The archive is a temporary file the engine uploads at once: no fsync.
    let mut options = packaging::PackOptions::default()
        .plan(project.packaging_plan.clone())
        .default_excludes(settings.default_excludes)
        .size_warn_bytes(settings.size_warn_bytes)
        .durable(false);
    for path in excludes {
        options = options.exclude(path.clone());
    }
    let report = packaging::pack(&project.root, out, &options)
        .map_err(|e| EngineError::project_caused_by(e.to_string(), e))?;
    if let Some(why) =
        settings
            .limits
            .refuse(report.entries as u64, report.bytes_in, report.bytes_out)
    {
        return Err(EngineError::project(format!(
            "{why}, which the job's runner would refuse to extract: leave large or generated files out of {} (a .gitignore, .kineticignore), ship data as data, or raise the limit",
            project.root.display()
        )));
    }
    let sha256 = crate::hashing::file_sha256(out).map_err(|e| {
        EngineError::project_caused_by(format!("cannot hash the packed context: {e}"), e)
    })?;
    Ok(PackedContext {
        sha256,
        entries: report.entries,
        bytes: report.bytes_out,
        warnings: report.warnings.iter().map(ToString::to_string).collect(),
    })
}

/// The content hash of a data path, whether it is a directory, and the
/// files it holds (what its cache entry will hold).
pub(crate) fn hash_data(path: &Path) -> Result<crate::plan::DataFacts, EngineError> {
    let report = content_hash_with(path, &HashOptions::default().listing(true))
        .map_err(|e| EngineError::project_caused_by(format!("cannot hash data: {e}"), e))?;
    Ok(
        crate::plan::DataFacts::new(report.hash, report.kind == HashKind::Dir)
            .with_listing(report.listing),
    )
}
