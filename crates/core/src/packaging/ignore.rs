//! What the archive leaves out: fixed directory names, default exclusions,
//! `.kineticignore` patterns, and the names that look like credentials.

use std::sync::LazyLock;

use super::fnmatch::FnPattern;

/// Directory names never archived, at any depth (a `.git` *file*, as in a
/// worktree, is archived).
pub const ALWAYS_EXCLUDED_DIRS: &[&str] = &[".git", "__pycache__"];

/// Directory names left out unless default exclusions are turned off
/// (`KINETIC_NO_DEFAULT_EXCLUDES=1` in Kinetic).
pub const DEFAULT_EXCLUDED_DIRS: &[&str] = &[
    ".venv",
    "venv",
    "node_modules",
    ".tox",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".ipynb_checkpoints",
];

/// File names left out unless default exclusions are turned off.
pub const DEFAULT_EXCLUDED_FILES: &[&str] = &[".DS_Store"];

/// `fnmatch` patterns of file names that look like credentials: archived,
/// but warned about.
pub const SECRET_FILE_PATTERNS: &[&str] = &[".env*", "*.pem", "id_rsa*"];

/// Name of the ignore file, read at the package root only.
pub const KINETICIGNORE: &str = ".kineticignore";

/// Whether a file name looks like a credential ([`SECRET_FILE_PATTERNS`]).
pub fn is_secret_name(name: &str) -> bool {
    static PATTERNS: LazyLock<Vec<FnPattern>> = LazyLock::new(|| {
        SECRET_FILE_PATTERNS
            .iter()
            .map(|p| FnPattern::new(p))
            .collect()
    });
    PATTERNS.iter().any(|p| p.matches(name))
}

/// The parsed patterns of a `.kineticignore` file.
///
/// One pattern per line, stripped of surrounding whitespace; blank lines and
/// lines starting with `#` are ignored (a `#` elsewhere is literal); a
/// trailing `/` makes the pattern apply to directories only; leading and
/// trailing `/` are removed. A path is excluded when a pattern matches its
/// relative path (with `/`) or its last component.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IgnoreRules {
    rules: Vec<(FnPattern, bool)>,
}

impl IgnoreRules {
    /// Parses the text of a `.kineticignore` file. Lines are split and
    /// stripped the way Python's `str.splitlines` and `str.strip` do.
    pub fn parse(text: &str) -> Self {
        let mut rules = Vec::new();
        for line in crate::pytext::splitlines(text) {
            let pattern = crate::pytext::py_strip(line);
            if pattern.is_empty() || pattern.starts_with('#') {
                continue;
            }
            let dir_only = pattern.ends_with('/');
            let pattern = pattern.trim_end_matches('/').trim_start_matches('/');
            if !pattern.is_empty() {
                rules.push((FnPattern::new(pattern), dir_only));
            }
        }
        Self { rules }
    }

    /// Number of patterns.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// True when there is no pattern.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether `rel` (relative to the root, `/`-separated) is excluded.
    pub fn matches(&self, rel: &str, is_dir: bool) -> bool {
        let name = rel.rsplit('/').next().unwrap_or(rel);
        self.rules.iter().any(|(pattern, dir_only)| {
            (is_dir || !dir_only) && (pattern.matches(rel) || pattern.matches(name))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_like_kinetic() {
        let rules = IgnoreRules::parse("# junk\n*.ckpt\r\n  data/  \n\n/abs/\nnot#comment\n#\n/\n");
        assert_eq!(rules.len(), 4);
        assert!(rules.matches("big.ckpt", false));
        assert!(rules.matches("deep/big.ckpt", false));
        assert!(rules.matches("data", true));
        assert!(
            !rules.matches("data", false),
            "data/ is for directories only"
        );
        assert!(rules.matches("x/data", true), "basename match");
        assert!(rules.matches("abs", true));
        assert!(rules.matches("not#comment", false));
        assert!(!rules.matches("junk", false));
    }

    #[test]
    fn star_crosses_slashes_on_the_relative_path() {
        let rules = IgnoreRules::parse("src/*.py\n");
        assert!(rules.matches("src/a/b.py", false));
        assert!(!rules.matches("lib/b.py", false));
    }

    #[test]
    fn secret_names() {
        for name in [".env", ".env.production", "key.pem", "id_rsa", "id_rsa.pub"] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["env", "pem", "my_id_rsa", "config.py"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }
}
