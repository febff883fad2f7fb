//! Package root detection.
//!
//! Everything that Kinetic reads from the process (the entry directory, the
//! home directory, the current directory, `sys.path`, the
//! `KINETIC_PACKAGE_ROOT` variable) is an input here, so the caller decides
//! where the values come from; the function only looks at the file system
//! for the markers.
//!
//! 1. With an override (`KINETIC_PACKAGE_ROOT`): `~` expanded, made
//!    absolute; it must be an existing directory that is the entry directory
//!    or one of its ancestors.
//! 2. Otherwise walk up out of Python packages (directories holding
//!    `__init__.py`, stopping at `$HOME` or `/`), then up to the first
//!    directory holding a marker (`pyproject.toml`, `requirements.txt`,
//!    `setup.py`, `setup.cfg`, `.git`). `$HOME` and `/` are accepted only if
//!    the walk started there; without a marker the package-escape result is
//!    the root.
//! 3. `entry_rel`, `client_cwd_rel` and `sys_path_rel` are relative to the
//!    root; comparisons retry on canonical paths (`/tmp` vs `/private/tmp`).

use std::path::{Path, PathBuf};

use super::plan::PackagingPlan;
use crate::hashing::normalize_lexically;

/// Files or directories whose presence makes a directory a project root.
pub const PROJECT_MARKERS: &[&str] = &[
    "pyproject.toml",
    "requirements.txt",
    "setup.py",
    "setup.cfg",
    ".git",
];

/// What the package root detection looks at.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PackageRootInputs {
    /// Directory of the module that defines the job function (the client's
    /// working directory when there is no module file).
    pub entry_dir: PathBuf,
    /// The user's home directory (a bound of the upward walk).
    pub home_dir: PathBuf,
    /// The client's current directory (absolute; relative inputs are
    /// resolved against it).
    pub client_cwd: PathBuf,
    /// The client's `sys.path` (string entries only; Python's non-string
    /// entries are the caller's to drop).
    pub sys_path: Vec<String>,
    /// The value of `KINETIC_PACKAGE_ROOT`, if set (an empty value counts as
    /// unset).
    pub package_root_override: Option<String>,
}

impl PackageRootInputs {
    /// Inputs with an empty `sys.path` and no override.
    pub fn new(
        entry_dir: impl Into<PathBuf>,
        home_dir: impl Into<PathBuf>,
        client_cwd: impl Into<PathBuf>,
    ) -> Self {
        Self {
            entry_dir: entry_dir.into(),
            home_dir: home_dir.into(),
            client_cwd: client_cwd.into(),
            sys_path: Vec::new(),
            package_root_override: None,
        }
    }

    /// Sets the client's `sys.path`.
    pub fn sys_path<S: Into<String>>(mut self, entries: impl IntoIterator<Item = S>) -> Self {
        self.sys_path = entries.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the `KINETIC_PACKAGE_ROOT` value.
    pub fn package_root_override(mut self, value: Option<impl Into<String>>) -> Self {
        self.package_root_override = value.map(Into::into);
        self
    }
}

/// Why no package root could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PackageRootError {
    /// `KINETIC_PACKAGE_ROOT` does not name an existing directory.
    #[error("KINETIC_PACKAGE_ROOT={value:?} (resolved to {}) is not an existing directory.", resolved.display())]
    OverrideNotADirectory {
        /// The value as given.
        value: String,
        /// The absolute path it resolved to.
        resolved: PathBuf,
    },
    /// `KINETIC_PACKAGE_ROOT` is not the entry directory or an ancestor.
    #[error(
        "KINETIC_PACKAGE_ROOT={value:?} (resolved to {}) does not contain the code being packaged ({}). Set it to a parent directory of your project, or unset it.",
        resolved.display(),
        entry.display()
    )]
    OverrideDoesNotContainEntry {
        /// The value as given.
        value: String,
        /// The absolute path it resolved to.
        resolved: PathBuf,
        /// The entry directory.
        entry: PathBuf,
    },
    /// The client's current directory is not absolute.
    #[error("the client's current directory {} is not an absolute path", path.display())]
    RelativeClientCwd {
        /// The path given.
        path: PathBuf,
    },
    /// A path of the plan is not UTF-8, which the JSON plan cannot carry.
    #[error("{}: the path is not valid UTF-8, so it cannot go into the packaging plan", path.display())]
    NonUtf8Path {
        /// The path.
        path: PathBuf,
    },
}

/// Chooses the package root and computes the packaging plan.
pub fn detect_package_root(inputs: &PackageRootInputs) -> Result<PackagingPlan, PackageRootError> {
    let cwd = &inputs.client_cwd;
    if !cwd.is_absolute() {
        return Err(PackageRootError::RelativeClientCwd { path: cwd.clone() });
    }
    let cwd = normalize_lexically(cwd);
    let absolute = |p: &Path| normalize_lexically(&cwd.join(p));
    let entry = absolute(&inputs.entry_dir);
    let home = absolute(&inputs.home_dir);

    let root = match inputs
        .package_root_override
        .as_deref()
        .filter(|v| !v.is_empty())
    {
        Some(value) => {
            let resolved = absolute(&expand_user(value, &home));
            if !resolved.is_dir() {
                return Err(PackageRootError::OverrideNotADirectory {
                    value: value.to_owned(),
                    resolved,
                });
            }
            if relpath_under(&entry, &resolved).is_none() {
                return Err(PackageRootError::OverrideDoesNotContainEntry {
                    value: value.to_owned(),
                    resolved,
                    entry,
                });
            }
            resolved
        }
        None => {
            let base = escape_packages(&entry, &home);
            find_marker_root(&base, &home).unwrap_or(base)
        }
    };

    let entry_rel = relpath_under(&entry, &root).unwrap_or_default();
    let client_cwd_rel = relpath_under(&cwd, &root);
    let mut rels = std::collections::BTreeSet::new();
    for item in &inputs.sys_path {
        if item.is_empty() || item.contains("site-packages") || item.contains("dist-packages") {
            continue;
        }
        let path = absolute(Path::new(item));
        if !path.exists() {
            continue;
        }
        if let Some(rel) = relpath_under(&path, &root)
            && !rel.as_os_str().is_empty()
        {
            rels.insert(utf8(&rel)?);
        }
    }
    let mut sys_path_rel = vec![String::new()];
    sys_path_rel.extend(rels);
    Ok(PackagingPlan {
        package_root: utf8(&root)?,
        entry_rel: utf8(&entry_rel)?,
        client_cwd_rel: client_cwd_rel.map(|p| utf8(&p)).transpose()?,
        sys_path_rel,
    })
}

fn utf8(path: &Path) -> Result<String, PackageRootError> {
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| PackageRootError::NonUtf8Path {
            path: path.to_path_buf(),
        })
}

/// `os.path.expanduser` for `~` and `~/…` (other users are not looked up).
fn expand_user(value: &str, home: &Path) -> PathBuf {
    if value == "~" {
        home.to_path_buf()
    } else if let Some(rest) = value.strip_prefix("~/") {
        home.join(rest)
    } else {
        PathBuf::from(value)
    }
}

fn parent_or_self(dir: &Path) -> &Path {
    dir.parent().unwrap_or(dir)
}

/// Walks up while the directory is a Python package (holds `__init__.py`).
fn escape_packages(entry: &Path, home: &Path) -> PathBuf {
    let mut dir = entry;
    while dir.join("__init__.py").exists() {
        let parent = parent_or_self(dir);
        if parent == dir || dir == home {
            break;
        }
        dir = parent;
    }
    dir.to_path_buf()
}

fn has_marker(dir: &Path) -> bool {
    PROJECT_MARKERS.iter().any(|m| dir.join(m).exists())
}

/// The nearest directory at or above `base` with a project marker; `$HOME`
/// and `/` count only when the search starts there.
fn find_marker_root(base: &Path, home: &Path) -> Option<PathBuf> {
    let mut dir = base;
    loop {
        let bounded = dir == home || parent_or_self(dir) == dir;
        if (!bounded || dir == base) && has_marker(dir) {
            return Some(dir.to_path_buf());
        }
        if bounded {
            return None;
        }
        dir = parent_or_self(dir);
    }
}

/// `path` relative to `root` (`""` when equal), or `None` when outside.
/// Both are compared as given and then with symlinks resolved.
pub(crate) fn relpath_under(path: &Path, root: &Path) -> Option<PathBuf> {
    let lexical = (normalize_lexically(path), normalize_lexically(root));
    let resolved = (realpath(path), realpath(root));
    [lexical, resolved]
        .into_iter()
        .find_map(|(candidate, base)| candidate.strip_prefix(&base).ok().map(Path::to_path_buf))
}

/// `os.path.realpath` (non-strict): symlinks resolved as far as the path
/// exists, the rest appended as is.
pub(crate) fn realpath(path: &Path) -> PathBuf {
    if let Ok(resolved) = std::fs::canonicalize(path) {
        return resolved;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => realpath(parent).join(name),
        _ => normalize_lexically(path),
    }
}
