//! The user's Python dependencies: find the file, read it, filter it.
//!
//! Kinetic's rules, as pure functions with the filesystem
//! reads kept in [`discover`] and [`read_dependency_file`]:
//!
//! 1. [`discover`]: walk up from the entry directory to the first
//!    `requirements.txt` (preferred) or `pyproject.toml`, stopping at the
//!    repository root (`.git`), the home directory or `/`.
//! 2. [`read_dependency_file`]: a requirements file is read as is; from a
//!    `pyproject.toml` only `[project].dependencies` is taken
//!    ([`parse_pyproject`]), with a warning when it declares none.
//! 3. [`prepare`]: join backslash continuations, refuse lines that point at
//!    local files ([`unusable_reason`]), and drop the JAX packages the image
//!    installs itself ([`filter_jax`], `# kn:keep` keeps a line).
//!
//! [`resolve`] does all three. Warnings are returned as
//! [`RequirementsWarning`] values, never printed.
//!
//! # Modes
//!
//! In [`RequirementsMode::Prebuilt`] the text is installed at pod start;
//! the output is Kinetic's: one joined logical line per `\n`-terminated
//! line, and `None` when nothing is left.
//!
//! In [`RequirementsMode::Bundled`] the text is baked into the image.
//! Kinetic filters physical lines only there and refuses nothing, so a
//! dropped `jax==… \` leaves its `--hash=…` continuation lines
//! orphaned and a `-e .` line fails late inside the image build. Here both
//! modes group continuations and refuse unusable lines the same way; bundled
//! mode then writes each kept logical line as its original physical lines,
//! byte for byte.
//!
//! One more deliberate difference in both modes: a comment line ending in
//! `\` does not continue (pip's reading); Kinetic would glue the next
//! requirement into the comment and silently drop it.
//!
//! ```
//! use std::path::PathBuf;
//! use kinetic_core::requirements::{prepare, DependencyFile, DependencyFileKind, RequirementsMode};
//!
//! let file = DependencyFile { path: PathBuf::from("/src/requirements.txt"), kind: DependencyFileKind::RequirementsTxt };
//! let text = "numpy \\\n  --hash=sha256:aa\njax==0.4.30 \\\n  --hash=sha256:bb\n";
//! let bundled = prepare(text, RequirementsMode::Bundled, &file).unwrap();
//! assert_eq!(bundled.text, "numpy \\\n  --hash=sha256:aa\n");
//! let prebuilt = prepare(text, RequirementsMode::Prebuilt, &file).unwrap();
//! assert_eq!(prebuilt.text, "numpy --hash=sha256:aa\n");
//!
//! let err = prepare("-e .\n", RequirementsMode::Prebuilt, &file).unwrap_err();
//! assert!(err.to_string().starts_with("Unusable requirement in /src/requirements.txt line 1: '-e .'"));
//! ```

mod discovery;
mod filter;
mod lines;
mod pyproject;
mod usable;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use discovery::{
    DependencyFile, DependencyFileKind, Discovery, PYPROJECT_TOML, REQUIREMENTS_TXT, discover,
    normalize_path,
};
pub use filter::{FilteredRequirements, JAX_PACKAGES, KEEP_MARKER, filter_jax, normalize_name};
pub use pyproject::{IgnoredDependencySource, PyprojectDependencies, parse_pyproject};
pub use usable::{UnusableReason, unusable_reason};

/// How dependencies reach the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequirementsMode {
    /// Baked into an image built for them (Kinetic's default).
    #[default]
    Bundled,
    /// Installed at pod start into a prebuilt base image.
    Prebuilt,
}

impl RequirementsMode {
    /// `bundled` or `prebuilt`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bundled => "bundled",
            Self::Prebuilt => "prebuilt",
        }
    }
}

impl fmt::Display for RequirementsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode string that is not `bundled` or `prebuilt`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid requirements mode '{input}': expected bundled or prebuilt")]
#[non_exhaustive]
pub struct ParseModeError {
    /// The text that was given.
    pub input: String,
}

impl FromStr for RequirementsMode {
    type Err = ParseModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "bundled" => Ok(Self::Bundled),
            "prebuilt" => Ok(Self::Prebuilt),
            _ => Err(ParseModeError {
                input: s.to_owned(),
            }),
        }
    }
}

/// Where an unusable requirement is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "in", content = "number", rename_all = "snake_case")]
pub enum RequirementPosition {
    /// 1-based physical line of a requirements file (the first line of a
    /// continued logical line).
    Line(usize),
    /// 1-based entry of `[project].dependencies`.
    DependencyEntry(usize),
}

impl fmt::Display for RequirementPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Line(n) => write!(f, "line {n}"),
            Self::DependencyEntry(n) => write!(f, "[project].dependencies entry {n}"),
        }
    }
}

/// Why requirements could not be found, read or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequirementsError {
    /// The entry directory does not exist or is not a directory.
    #[error("entry directory {} does not exist or is not a directory", path.display())]
    NotADirectory {
        /// The directory, absolute.
        path: PathBuf,
    },
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A `pyproject.toml` is not valid, or its `[project].dependencies` is
    /// not a list of strings.
    #[error("invalid {}: {message}", path.display())]
    InvalidPyproject {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A requirement points at a local file the remote machine cannot see.
    #[error(
        "Unusable requirement in {} {position}: '{line}' — {reason}. Your project sources are shipped automatically; remove this line, or publish the package and require it by name or URL.",
        path.display()
    )]
    Unusable {
        /// The dependency file.
        path: PathBuf,
        /// Where in it.
        position: RequirementPosition,
        /// The (joined) line, stripped.
        line: String,
        /// Why it cannot work.
        reason: UnusableReason,
    },
}

/// Something worth telling the user about their dependencies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RequirementsWarning {
    /// Informational: both files exist in one directory; `requirements.txt`
    /// is used.
    PyprojectShadowed {
        /// The file used.
        requirements: PathBuf,
        /// The file ignored.
        pyproject: PathBuf,
    },
    /// The file was found above the entry directory and no repository root
    /// (`.git`) bounds the search, so it may belong to another project.
    OutsideCodeDirectory {
        /// The file used.
        path: PathBuf,
        /// Where the search started.
        entry_dir: PathBuf,
    },
    /// The selected `pyproject.toml` has no `[project].dependencies`; it is
    /// still used (nothing is installed) and files higher up are not
    /// considered.
    PyprojectDeclaresNoDependencies {
        /// The file.
        path: PathBuf,
        /// Other declarations found, which are not installed.
        ignored: Vec<IgnoredDependencySource>,
    },
    /// A line installing a JAX package was dropped.
    JaxLineDropped {
        /// 1-based number of its (first) physical line.
        line: usize,
        /// The (joined) line, stripped.
        text: String,
        /// The package name as written.
        package: String,
    },
}

impl RequirementsWarning {
    /// True for notes that need no action (Kinetic logs them at info level).
    pub fn is_informational(&self) -> bool {
        matches!(self, Self::PyprojectShadowed { .. })
    }
}

impl fmt::Display for RequirementsWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PyprojectShadowed {
                requirements,
                pyproject,
            } => write!(
                f,
                "both {} and {} exist; using {}",
                requirements.display(),
                pyproject.display(),
                REQUIREMENTS_TXT
            ),
            Self::OutsideCodeDirectory { path, entry_dir } => write!(
                f,
                "dependency file {} lives outside your code directory {} and no .git bounds the search; make sure it belongs to this project",
                path.display(),
                entry_dir.display()
            ),
            Self::PyprojectDeclaresNoDependencies { path, ignored } => {
                write!(
                    f,
                    "{} declares no [project].dependencies; nothing will be installed",
                    path.display()
                )?;
                if !ignored.is_empty() {
                    let list: Vec<String> = ignored.iter().map(ToString::to_string).collect();
                    write!(
                        f,
                        " (found {}, which are not installed: move them to [project].dependencies or use a requirements.txt)",
                        list.join(", ")
                    )?;
                }
                Ok(())
            }
            Self::JaxLineDropped {
                line,
                text,
                package,
            } => write!(
                f,
                "line {line}: dropped '{text}': {package} is installed with the image for the accelerator; add '{KEEP_MARKER}' to the line to keep it"
            ),
        }
    }
}

/// The text of a dependency file, as requirements lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DependencyText {
    /// The file.
    pub file: DependencyFile,
    /// Requirements text: the file itself, or a pyproject's
    /// `[project].dependencies` one per line.
    pub text: String,
    /// Warnings from reading it.
    pub warnings: Vec<RequirementsWarning>,
}

/// Reads a dependency file (a UTF-8 BOM is dropped).
pub fn read_dependency_file(file: &DependencyFile) -> Result<DependencyText, RequirementsError> {
    let raw = std::fs::read_to_string(&file.path).map_err(|source| RequirementsError::Io {
        path: file.path.clone(),
        source,
    })?;
    let raw = raw.strip_prefix('\u{feff}').unwrap_or(&raw);
    dependency_text(file, raw)
}

/// Turns a dependency file's content into requirements text (pure half of
/// [`read_dependency_file`]).
pub fn dependency_text(
    file: &DependencyFile,
    content: &str,
) -> Result<DependencyText, RequirementsError> {
    match file.kind {
        DependencyFileKind::RequirementsTxt => Ok(DependencyText {
            file: file.clone(),
            text: content.to_owned(),
            warnings: Vec::new(),
        }),
        DependencyFileKind::PyprojectToml => {
            let parsed = parse_pyproject(content, &file.path)?;
            let mut warnings = Vec::new();
            if parsed.dependencies.is_empty() {
                warnings.push(RequirementsWarning::PyprojectDeclaresNoDependencies {
                    path: file.path.clone(),
                    ignored: parsed.ignored_sources.clone(),
                });
            }
            Ok(DependencyText {
                file: file.clone(),
                text: parsed.requirements_text(),
                warnings,
            })
        }
    }
}

/// Kinetic's continuation joining: each logical line once,
/// joined, ending in `\n`.
///
/// A line ending in `\` (trailing spaces ignored) contributes its text
/// without the `\`, right-stripped, plus a space; the line that ends the
/// run is appended stripped. Unlike Kinetic, a comment line never
/// continues (see the module documentation).
///
/// ```
/// use kinetic_core::requirements::join_continuations;
///
/// assert_eq!(join_continuations("numpy \\"), "numpy\n");
/// assert_eq!(join_continuations("x\n\ny"), "x\n\ny\n");
/// ```
pub fn join_continuations(text: &str) -> String {
    let mut out = String::new();
    for line in lines::logical_lines(text) {
        out.push_str(&line.joined);
        out.push('\n');
    }
    out
}

/// Fails on the first line that cannot be installed remotely
/// ([`unusable_reason`]); `file` names the file in the error.
pub fn check_usable(text: &str, file: &DependencyFile) -> Result<(), RequirementsError> {
    check_logical(&lines::logical_lines(text), file)
}

fn check_logical(
    logical: &[lines::LogicalLine<'_>],
    file: &DependencyFile,
) -> Result<(), RequirementsError> {
    for line in logical {
        if let Some(reason) = unusable_reason(&line.joined) {
            let position = match file.kind {
                DependencyFileKind::RequirementsTxt => RequirementPosition::Line(line.first_line),
                DependencyFileKind::PyprojectToml => {
                    RequirementPosition::DependencyEntry(line.first_line)
                }
            };
            return Err(RequirementsError::Unusable {
                path: file.path.clone(),
                position,
                line: lines::py_strip(&line.joined).to_owned(),
                reason,
            });
        }
    }
    Ok(())
}

/// Requirements ready for a mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedRequirements {
    /// The mode they were prepared for.
    pub mode: RequirementsMode,
    /// The text: physical lines (bundled) or joined lines (prebuilt).
    pub text: String,
    /// Warnings (one per dropped JAX line).
    pub warnings: Vec<RequirementsWarning>,
}

impl PreparedRequirements {
    /// The text to install, or `None` when it is blank (then nothing is
    /// uploaded, and the image tag equals the no-requirements tag).
    pub fn install_text(&self) -> Option<&str> {
        (!lines::py_strip(&self.text).is_empty()).then_some(self.text.as_str())
    }
}

/// Prepares requirements text for `mode` (see the module documentation):
/// unusable lines are refused, JAX lines dropped.
pub fn prepare(
    text: &str,
    mode: RequirementsMode,
    file: &DependencyFile,
) -> Result<PreparedRequirements, RequirementsError> {
    let logical = lines::logical_lines(text);
    check_logical(&logical, file)?;
    let filtered = filter::filter_logical(&logical, mode == RequirementsMode::Prebuilt);
    Ok(PreparedRequirements {
        mode,
        text: filtered.text,
        warnings: filtered.warnings,
    })
}

/// Everything known about a project's dependencies for one mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedRequirements {
    /// The entry directory, absolute and normalised.
    pub entry_dir: PathBuf,
    /// The mode.
    pub mode: RequirementsMode,
    /// The dependency file, if one was found.
    pub file: Option<DependencyFile>,
    /// The requirements to install, or `None` when there is no file or
    /// nothing is left to install.
    pub requirements: Option<String>,
    /// Every warning, discovery's first.
    pub warnings: Vec<RequirementsWarning>,
}

/// [`discover`], [`read_dependency_file`] and [`prepare`] in one call.
pub fn resolve(
    entry_dir: &Path,
    home: Option<&Path>,
    mode: RequirementsMode,
) -> Result<ResolvedRequirements, RequirementsError> {
    let discovery = discover(entry_dir, home)?;
    let mut warnings = discovery.warnings;
    let requirements = match &discovery.file {
        None => None,
        Some(file) => {
            let read = read_dependency_file(file)?;
            warnings.extend(read.warnings);
            let prepared = prepare(&read.text, mode, file)?;
            warnings.extend(prepared.warnings.iter().cloned());
            prepared.install_text().map(str::to_owned)
        }
    };
    Ok(ResolvedRequirements {
        entry_dir: discovery.entry_dir,
        mode,
        file: discovery.file,
        requirements,
        warnings,
    })
}
