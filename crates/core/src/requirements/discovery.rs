//! Finding the dependency file by walking up from the entry directory.

use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use super::{RequirementsError, RequirementsWarning};

/// `requirements.txt`.
pub const REQUIREMENTS_TXT: &str = "requirements.txt";
/// `pyproject.toml`.
pub const PYPROJECT_TOML: &str = "pyproject.toml";

/// Which kind of dependency file was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum DependencyFileKind {
    /// A pip requirements file.
    #[serde(rename = "requirements.txt")]
    RequirementsTxt,
    /// A `pyproject.toml`; only `[project].dependencies` is read.
    #[serde(rename = "pyproject.toml")]
    PyprojectToml,
}

impl DependencyFileKind {
    /// The file name: `requirements.txt` or `pyproject.toml`.
    pub fn file_name(self) -> &'static str {
        match self {
            Self::RequirementsTxt => REQUIREMENTS_TXT,
            Self::PyprojectToml => PYPROJECT_TOML,
        }
    }
}

/// A dependency file and its kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct DependencyFile {
    /// Absolute, normalised path of the file.
    pub path: PathBuf,
    /// Its kind.
    pub kind: DependencyFileKind,
}

/// The result of [`discover`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    /// The entry directory, absolute and normalised.
    pub entry_dir: PathBuf,
    /// The file selected, if any.
    pub file: Option<DependencyFile>,
    /// The first directory (walking up) containing `.git`, if one was
    /// reached before `home` or the filesystem root.
    pub repo_root: Option<PathBuf>,
    /// Informational notes and warnings about the choice.
    pub warnings: Vec<RequirementsWarning>,
}

/// `path` made absolute against the current directory (when relative) and
/// normalised lexically like Python's `os.path.abspath`: `.` removed, `..`
/// applied, symlinks not resolved.
pub fn normalize_path(path: &Path) -> Result<PathBuf, RequirementsError> {
    let absolute = std::path::absolute(path).map_err(|source| RequirementsError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut out = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                // `/..` stays `/`, as in Python.
                if out.parent().is_some() {
                    out.pop();
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    Ok(out)
}

/// The filesystem facts discovery needs about one directory.
fn is_regular_file(path: &Path) -> bool {
    // Follows symlinks, like Python's `os.path.isfile`.
    path.is_file()
}

fn has_git(dir: &Path) -> bool {
    // `.git` as a directory, a file (worktrees, submodules) or a symlink.
    dir.join(".git").symlink_metadata().is_ok()
}

/// Finds the dependency file for code whose entry directory is `entry_dir`.
///
/// Walks up from `entry_dir`. At each level a regular file
/// `requirements.txt` is selected, else a regular file `pyproject.toml`
/// (directories with those names are ignored); when both exist,
/// `requirements.txt` wins ([`RequirementsWarning::PyprojectShadowed`]).
/// The first selection is kept; the walk goes on only to find the
/// repository root, and stops after a directory containing `.git`, after
/// `home`, or at the filesystem root. When no `.git` was found and the file
/// is not in `entry_dir`, [`RequirementsWarning::OutsideCodeDirectory`] is
/// added.
///
/// `home` is the user's home directory (`$HOME`), passed in so callers and
/// tests decide it. Fails only when `entry_dir` is not a directory.
pub fn discover(entry_dir: &Path, home: Option<&Path>) -> Result<Discovery, RequirementsError> {
    let entry = normalize_path(entry_dir)?;
    if !entry.is_dir() {
        return Err(RequirementsError::NotADirectory { path: entry });
    }
    let home = home.map(normalize_path).transpose()?;
    let mut file: Option<DependencyFile> = None;
    let mut warnings = Vec::new();
    let mut repo_root = None;
    let mut dir: &Path = &entry;
    loop {
        if file.is_none() {
            let requirements = dir.join(REQUIREMENTS_TXT);
            let pyproject = dir.join(PYPROJECT_TOML);
            if is_regular_file(&requirements) {
                if is_regular_file(&pyproject) {
                    warnings.push(RequirementsWarning::PyprojectShadowed {
                        requirements: requirements.clone(),
                        pyproject,
                    });
                }
                file = Some(DependencyFile {
                    path: requirements,
                    kind: DependencyFileKind::RequirementsTxt,
                });
            } else if is_regular_file(&pyproject) {
                file = Some(DependencyFile {
                    path: pyproject,
                    kind: DependencyFileKind::PyprojectToml,
                });
            }
        }
        if has_git(dir) {
            repo_root = Some(dir.to_path_buf());
            break;
        }
        if home.as_deref() == Some(dir) {
            break;
        }
        match dir.parent() {
            Some(parent) => dir = parent,
            None => break,
        }
    }
    if let Some(found) = &file
        && repo_root.is_none()
        && found.path.parent() != Some(entry.as_path())
    {
        warnings.push(RequirementsWarning::OutsideCodeDirectory {
            path: found.path.clone(),
            entry_dir: entry.clone(),
        });
    }
    Ok(Discovery {
        entry_dir: entry,
        file,
        repo_root,
        warnings,
    })
}
