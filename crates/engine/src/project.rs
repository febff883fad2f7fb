//! The user's project as the engine ships it: the package root and plan
//! for an entrypoint, the packed context, and data hashes. Blocking
//! filesystem work; the engine runs it off the executor.

use std::path::{Path, PathBuf};

use kinetic_core::hashing::{HashKind, HashOptions, content_hash_with};
use kinetic_core::packaging::{self, PackageRootInputs, PackagingPlan};
use kinetic_core::plan::ProjectFacts;
use kinetic_core::protocol::{RunnerEntrypoint, RunnerPlan};

use super::EngineError;
use kinetic_core::spec::{Entrypoint, SpecError, absolute};

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
    pub(crate) limits: kinetic_core::protocol::ExtractLimits,
}

/// The packed context.
#[derive(Debug, Clone)]
pub(crate) struct PackedContext {
    /// SHA-256 of the archive.
    pub(crate) sha256: [u8; 32],
    /// Entries in the archive.
    pub(crate) entries: usize,
    /// What the entries expand to.
    pub(crate) bytes_in: u64,
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
    let packed = pack_with(project, out, &pack_options(project, excludes, settings))?;
    check_limits(project, &packed, &settings.limits)?;
    Ok(packed)
}

/// How the engine packs `project`. The archive is a temporary or cached
/// file the engine can rebuild: no fsync.
fn pack_options(
    project: &Project,
    excludes: &[PathBuf],
    settings: PackSettings,
) -> packaging::PackOptions {
    let mut options = packaging::PackOptions::default()
        .plan(project.packaging_plan.clone())
        .default_excludes(settings.default_excludes)
        .size_warn_bytes(settings.size_warn_bytes)
        .durable(false);
    for path in excludes {
        options = options.exclude(path.clone());
    }
    options
}

fn pack_with(
    project: &Project,
    out: &Path,
    options: &packaging::PackOptions,
) -> Result<PackedContext, EngineError> {
    let report = packaging::pack(&project.root, out, options)
        .map_err(|e| EngineError::project_caused_by(e.to_string(), e))?;
    let mut sha256 = [0; 32];
    hex::decode_to_slice(&report.sha256, &mut sha256)
        .map_err(|e| EngineError::internal(format!("packing reported an invalid SHA-256: {e}")))?;
    Ok(PackedContext {
        sha256,
        entries: report.entries,
        bytes_in: report.bytes_in,
        bytes: report.bytes_out,
        warnings: report.warnings.iter().map(ToString::to_string).collect(),
    })
}

/// Refuse a packed context the job's runner would refuse to extract
/// (`limits`), before anything is uploaded; a cached archive too.
pub(crate) fn check_limits(
    project: &Project,
    packed: &PackedContext,
    limits: &kinetic_core::protocol::ExtractLimits,
) -> Result<(), EngineError> {
    match limits.refuse(packed.entries as u64, packed.bytes_in, packed.bytes) {
        Some(why) => Err(EngineError::project(format!(
            "{why}, which the job's runner would refuse to extract: leave large or generated files out of {} (a .gitignore, .kineticignore), ship data as data, or raise the limit",
            project.root.display()
        ))),
        None => Ok(()),
    }
}

/// How many packed projects the context cache keeps.
const CONTEXT_CACHE_KEEP: usize = 8;

/// A change this close to when a record was written (or later) cannot be
/// told apart by file times alone: such a record also keeps a hash of the
/// files' content, checked before the record is trusted.
const RACY_WINDOW_NS: i128 = 2_000_000_000;

/// What the context cache keeps beside an archive: `{fingerprint}.json`.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct CachedContext {
    sha256: String,
    entries: usize,
    /// What the entries expand to (checked against the extraction limits
    /// on every use).
    bytes_in: u64,
    bytes: u64,
    warnings: Vec<String>,
    /// SHA-256 of the files' content, when the record was written while
    /// some file was freshly changed.
    files_sha256: Option<String>,
}

/// SHA-256 over the content of `files`, in order, each prefixed by its length.
fn files_sha256(files: &[PathBuf]) -> Result<String, EngineError> {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    for file in files {
        let sha = kinetic_core::hashing::file_sha256(file).map_err(|e| {
            EngineError::project_caused_by(format!("cannot hash {}: {e}", file.display()), e)
        })?;
        h.update(sha);
    }
    Ok(hex::encode(h.finalize()))
}

/// [`pack`], through the context cache at `cache`: when the package root's
/// manifest (file names, sizes, modes, times, inodes) matches a cached
/// record, its archive is reused without packing or hashing the project
/// again; a record written while files were freshly changed is first
/// checked against the files' content. Submissions of one project pack it
/// one at a time (a lock file per manifest), so concurrent ones share one
/// archive. Returns the packed context and where its archive is.
///
/// The cache holds `{fingerprint}.json` (the record) and `{sha256}.zip`
/// (the archive, named by its own digest, so a record never points at
/// other bytes than it names).
pub(crate) fn pack_cached(
    project: &Project,
    cache: &Path,
    excludes: &[PathBuf],
    settings: PackSettings,
) -> Result<(PackedContext, PathBuf), EngineError> {
    let cache_err = |what: &str, path: &Path, e: std::io::Error| {
        EngineError::project_caused_by(
            format!("context cache: cannot {what} {}: {e}", path.display()),
            e,
        )
    };
    std::fs::create_dir_all(cache).map_err(|e| cache_err("create", cache, e))?;
    let mut excludes = excludes.to_vec();
    excludes.push(cache.to_path_buf());
    let options = pack_options(project, &excludes, settings);
    let manifest = packaging::manifest(&project.root, &options)
        .map_err(|e| EngineError::project_caused_by(e.to_string(), e))?;
    let name = hex::encode(manifest.fingerprint);
    let record_path = cache.join(format!("{name}.json"));
    let lock_path = cache.join(format!("{name}.lock"));
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| cache_err("open", &lock_path, e))?;
    lock.lock().map_err(|e| cache_err("lock", &lock_path, e))?;
    if let Some(hit) = cached_hit(cache, &record_path, &manifest)? {
        check_limits(project, &hit.0, &settings.limits)?;
        // Recently used records are the ones pruning keeps.
        if let Ok(file) = std::fs::File::options().write(true).open(&record_path) {
            let _ = file.set_modified(std::time::SystemTime::now());
        }
        return Ok(hit);
    }
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX));
    // Hashed before packing: a file changed meanwhile then fails the check.
    let files_sha = if manifest.newest_change_ns > now_ns - RACY_WINDOW_NS {
        Some(files_sha256(&manifest.files)?)
    } else {
        None
    };
    let tmp = tempfile::Builder::new()
        .prefix(".packing-")
        .suffix(".zip")
        .tempfile_in(cache)
        .map_err(|e| cache_err("write in", cache, e))?;
    let packed = pack_with(project, tmp.path(), &options)?;
    check_limits(project, &packed, &settings.limits)?;
    let zip = cache.join(format!("{}.zip", hex::encode(packed.sha256)));
    std::fs::rename(tmp.path(), &zip).map_err(|e| cache_err("write", &zip, e))?;
    let record = CachedContext {
        sha256: hex::encode(packed.sha256),
        entries: packed.entries,
        bytes_in: packed.bytes_in,
        bytes: packed.bytes,
        warnings: packed.warnings.clone(),
        files_sha256: files_sha,
    };
    let json = serde_json::to_vec(&record)
        .map_err(|e| EngineError::internal(format!("cannot encode a context record: {e}")))?;
    // Written whole or not at all.
    let tmp =
        tempfile::NamedTempFile::new_in(cache).map_err(|e| cache_err("write in", cache, e))?;
    std::fs::write(tmp.path(), json).map_err(|e| cache_err("write", tmp.path(), e))?;
    tmp.persist(&record_path)
        .map_err(|e| cache_err("write", &record_path, e.error))?;
    drop(lock);
    prune_cache(cache, &zip);
    Ok((packed, zip))
}

/// The cached context of `manifest` and its archive, when its record and
/// archive are whole and (for a record written amid changes) the files'
/// content matches.
fn cached_hit(
    cache: &Path,
    record_path: &Path,
    manifest: &packaging::Manifest,
) -> Result<Option<(PackedContext, PathBuf)>, EngineError> {
    let Ok(bytes) = std::fs::read(record_path) else {
        return Ok(None);
    };
    let Ok(record) = serde_json::from_slice::<CachedContext>(&bytes) else {
        return Ok(None);
    };
    let mut sha256 = [0; 32];
    if hex::decode_to_slice(&record.sha256, &mut sha256).is_err() {
        return Ok(None);
    }
    let zip = cache.join(format!("{}.zip", record.sha256));
    if std::fs::metadata(&zip).map(|m| m.len()).ok() != Some(record.bytes) {
        return Ok(None);
    }
    if let Some(expected) = &record.files_sha256
        && *expected != files_sha256(&manifest.files)?
    {
        return Ok(None);
    }
    let packed = PackedContext {
        sha256,
        entries: record.entries,
        bytes_in: record.bytes_in,
        bytes: record.bytes,
        warnings: record.warnings,
    };
    Ok(Some((packed, zip)))
}

/// Keep the newest [`CONTEXT_CACHE_KEEP`] records, the archives they name
/// and `keep` (the archive being submitted); remove the rest. Best effort:
/// a file another process removed first is not an error.
fn prune_cache(cache: &Path, keep: &Path) {
    let Ok(listing) = std::fs::read_dir(cache) else {
        return;
    };
    let paths: Vec<PathBuf> = listing.filter_map(Result::ok).map(|e| e.path()).collect();
    let has_ext = |p: &Path, ext: &str| p.extension().is_some_and(|x| x == ext);
    let mut records: Vec<(std::time::SystemTime, &PathBuf)> = paths
        .iter()
        .filter(|p| has_ext(p, "json"))
        .filter_map(|p| Some((std::fs::metadata(p).ok()?.modified().ok()?, p)))
        .collect();
    records.sort_by_key(|r| std::cmp::Reverse(r.0));
    let mut named = std::collections::HashSet::new();
    named.insert(keep.to_path_buf());
    for (i, (_, record)) in records.iter().enumerate() {
        let kept = i < CONTEXT_CACHE_KEEP
            && std::fs::read(record)
                .ok()
                .and_then(|b| serde_json::from_slice::<CachedContext>(&b).ok())
                .map(|r| named.insert(cache.join(format!("{}.zip", r.sha256))))
                .is_some();
        if !kept {
            let _ = std::fs::remove_file(record);
            let _ = std::fs::remove_file(record.with_extension("lock"));
        }
    }
    for zip in paths.iter().filter(|p| has_ext(p, "zip")) {
        let packing = zip
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if !packing && !named.contains(zip) {
            let _ = std::fs::remove_file(zip);
        }
    }
}

/// The content hash of a data path, whether it is a directory, and the
/// files it holds (what its cache entry will hold).
pub(crate) fn hash_data(path: &Path) -> Result<kinetic_core::plan::DataFacts, EngineError> {
    let report = content_hash_with(path, &HashOptions::default().listing(true))
        .map_err(|e| EngineError::project_caused_by(format!("cannot hash data: {e}"), e))?;
    Ok(
        kinetic_core::plan::DataFacts::new(report.hash, report.kind == HashKind::Dir)
            .with_listing(report.listing),
    )
}
