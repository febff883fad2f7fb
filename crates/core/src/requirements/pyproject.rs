//! Reading `[project].dependencies` from a `pyproject.toml`.

use std::fmt;
use std::path::Path;

use serde::Serialize;

use super::RequirementsError;

/// A place in a `pyproject.toml` that declares dependencies Kinetic does
/// not install (only `[project].dependencies` is read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub enum IgnoredDependencySource {
    /// `[tool.poetry.dependencies]`.
    #[serde(rename = "[tool.poetry.dependencies]")]
    PoetryDependencies,
    /// `[dependency-groups]` (PEP 735).
    #[serde(rename = "[dependency-groups]")]
    DependencyGroups,
    /// `[project.optional-dependencies]` (extras).
    #[serde(rename = "[project.optional-dependencies]")]
    OptionalDependencies,
    /// `"dependencies"` listed in `[project].dynamic`.
    #[serde(rename = "[project].dynamic")]
    DynamicDependencies,
}

impl fmt::Display for IgnoredDependencySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::PoetryDependencies => "[tool.poetry.dependencies]",
            Self::DependencyGroups => "[dependency-groups]",
            Self::OptionalDependencies => "[project.optional-dependencies]",
            Self::DynamicDependencies => "\"dependencies\" in [project].dynamic",
        })
    }
}

/// What a `pyproject.toml` declares.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PyprojectDependencies {
    /// `[project].dependencies`, in order (PEP 508 strings).
    pub dependencies: Vec<String>,
    /// Other dependency declarations present in the file, which are not
    /// installed.
    pub ignored_sources: Vec<IgnoredDependencySource>,
}

impl PyprojectDependencies {
    /// Kinetic's requirements text: the dependencies joined with `\n` plus
    /// a trailing `\n`, or `""` when there are none.
    pub fn requirements_text(&self) -> String {
        if self.dependencies.is_empty() {
            String::new()
        } else {
            let mut text = self.dependencies.join("\n");
            text.push('\n');
            text
        }
    }
}

fn invalid(path: &Path, message: impl Into<String>) -> RequirementsError {
    RequirementsError::InvalidPyproject {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Parses a `pyproject.toml`'s text; `path` only names the file in errors.
///
/// Fails when the text is not TOML, or `[project]` is not a table, or
/// `[project].dependencies` is not a list of strings.
pub fn parse_pyproject(
    text: &str,
    path: &Path,
) -> Result<PyprojectDependencies, RequirementsError> {
    let doc: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| invalid(path, e.message().to_owned()))?;
    let project = match doc.get("project") {
        None => None,
        Some(toml::Value::Table(t)) => Some(t),
        Some(_) => return Err(invalid(path, "[project] must be a table")),
    };
    let dependencies = match project.and_then(|p| p.get("dependencies")) {
        None => Vec::new(),
        Some(toml::Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                toml::Value::String(s) => Ok(s.clone()),
                _ => Err(invalid(
                    path,
                    format!(
                        "[project].dependencies entry {} must be a string (a PEP 508 requirement)",
                        i + 1
                    ),
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(invalid(
                path,
                "[project].dependencies must be a list of strings (PEP 508 requirements)",
            ));
        }
    };
    let mut ignored_sources = Vec::new();
    let has_table = |t: Option<&toml::Value>| matches!(t, Some(toml::Value::Table(_)));
    let poetry = doc
        .get("tool")
        .and_then(|t| t.get("poetry"))
        .and_then(|p| p.get("dependencies"));
    if has_table(poetry) {
        ignored_sources.push(IgnoredDependencySource::PoetryDependencies);
    }
    if has_table(doc.get("dependency-groups")) {
        ignored_sources.push(IgnoredDependencySource::DependencyGroups);
    }
    if has_table(project.and_then(|p| p.get("optional-dependencies"))) {
        ignored_sources.push(IgnoredDependencySource::OptionalDependencies);
    }
    let dynamic_deps = project
        .and_then(|p| p.get("dynamic"))
        .and_then(toml::Value::as_array)
        .is_some_and(|d| d.iter().any(|v| v.as_str() == Some("dependencies")));
    if dynamic_deps {
        ignored_sources.push(IgnoredDependencySource::DynamicDependencies);
    }
    Ok(PyprojectDependencies {
        dependencies,
        ignored_sources,
    })
}
