//! The JAX filter.

use super::RequirementsWarning;
use super::lines::{LogicalLine, logical_lines, py_strip};

/// Normalised names of the packages the image installs itself.
pub const JAX_PACKAGES: [&str; 4] = ["jax", "jaxlib", "libtpu", "libtpu-nightly"];

/// The exact marker that keeps a line the filter would drop.
pub const KEEP_MARKER: &str = "# kn:keep";

/// Requirements text after the JAX filter, with a warning per dropped line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilteredRequirements {
    /// The kept text.
    pub text: String,
    /// One [`RequirementsWarning::JaxLineDropped`] per dropped logical line.
    pub warnings: Vec<RequirementsWarning>,
}

/// The leading distribution name of a stripped line, Kinetic's regex
/// `^([a-zA-Z0-9]([a-zA-Z0-9._-]*[a-zA-Z0-9])?)`: the longest run of
/// `[A-Za-z0-9._-]` starting with a letter or digit, cut back to end on one.
pub(crate) fn leading_name(stripped: &str) -> Option<&str> {
    let first = stripped.chars().next()?;
    if !first.is_ascii_alphanumeric() {
        return None;
    }
    let run_end = stripped
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        .unwrap_or(stripped.len());
    let run = &stripped[..run_end];
    Some(run.trim_end_matches(['.', '_', '-']))
}

/// PEP 503 normalisation: runs of `-`, `_`, `.` become one `-`; lower case.
pub fn normalize_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_sep {
                out.push('-');
            }
            in_sep = true;
        } else {
            out.extend(c.to_lowercase());
            in_sep = false;
        }
    }
    out
}

/// The name as written when the (logical) line installs a JAX package and
/// is not kept: blank lines, comments, pip options (`-…`) and lines holding
/// [`KEEP_MARKER`] are always kept.
pub(crate) fn dropped_jax_package(line: &str) -> Option<&str> {
    let stripped = py_strip(line);
    if stripped.is_empty() || stripped.starts_with('#') || stripped.starts_with('-') {
        return None;
    }
    if line.contains(KEEP_MARKER) {
        return None;
    }
    let name = leading_name(stripped)?;
    JAX_PACKAGES
        .contains(&normalize_name(name).as_str())
        .then_some(name)
}

/// Applies the filter to logical lines. With `joined`, each kept logical
/// line is written once, joined, ending in `\n` (prebuilt form); otherwise
/// its physical lines are written unchanged (bundled form).
pub(crate) fn filter_logical(lines: &[LogicalLine<'_>], joined: bool) -> FilteredRequirements {
    let mut text = String::new();
    let mut warnings = Vec::new();
    for line in lines {
        if let Some(package) = dropped_jax_package(&line.joined) {
            warnings.push(RequirementsWarning::JaxLineDropped {
                line: line.first_line,
                text: py_strip(&line.joined).to_owned(),
                package: package.to_owned(),
            });
            continue;
        }
        if joined {
            text.push_str(&line.joined);
            text.push('\n');
        } else {
            text.extend(line.physical.iter().copied());
        }
    }
    FilteredRequirements { text, warnings }
}

/// Drops the lines that would install JAX over the image's own,
/// keeping everything else byte for byte.
///
/// A line is dropped when its leading name normalises to `jax`, `jaxlib`,
/// `libtpu` or `libtpu-nightly` — whatever extras, versions, markers or URL
/// follow — unless it contains `# kn:keep` exactly. Blank lines, comments
/// and pip options are kept.
///
/// Backslash continuations are grouped first, so `jax==0.4 \` drops its
/// `--hash=…` continuation lines with it (Kinetic's bundled mode leaves them
/// orphaned). Kept lines are written as they were (physical
/// lines, original line endings).
///
/// ```
/// use kinetic_core::requirements::filter_jax;
///
/// let out = filter_jax("numpy==1.26\njax[tpu]>=0.4.6\nscipy\njaxlib\nkeras\njax==0.4.30  # kn:keep\n");
/// assert_eq!(out.text, "numpy==1.26\nscipy\nkeras\njax==0.4.30  # kn:keep\n");
/// assert_eq!(out.warnings.len(), 2);
/// ```
pub fn filter_jax(text: &str) -> FilteredRequirements {
    filter_logical(&logical_lines(text), false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_name_matches_kinetic_regex() {
        assert_eq!(leading_name("jax[tpu]>=0.4"), Some("jax"));
        assert_eq!(leading_name("libtpu_nightly"), Some("libtpu_nightly"));
        assert_eq!(leading_name("jax-"), Some("jax"));
        assert_eq!(leading_name("a"), Some("a"));
        assert_eq!(leading_name("jax.-_x"), Some("jax.-_x"));
        assert_eq!(leading_name("-e"), None);
        assert_eq!(leading_name(""), None);
        assert_eq!(leading_name("é"), None);
    }

    #[test]
    fn normalisation() {
        assert_eq!(normalize_name("LibTPU-_.Nightly"), "libtpu-nightly");
        assert_eq!(normalize_name("jax.lib"), "jax-lib");
    }
}
