//! Requirement lines that cannot work on the remote machine.
//!
//! The remote install sees only the requirements text: not the user's
//! files. A line that points at a local path can only fail there, so it is
//! refused before anything is uploaded. Kinetic's rules, with three gaps
//! closed (each would fail at install time on the pod instead):
//!
//! - glued short options (`-rbase.txt`, `-e.`) are read like `-r base.txt`;
//! - a direct reference to a local path is caught without spaces around `@`
//!   (`pkg@./v`);
//! - Windows drive paths (`C:\x\y`) are absolute paths;
//! - and `-f`/`--find-links` with a local directory is refused too.
//!
//! Remote `-r`/`-c` URLs (`-r https://…`) are accepted: pip fetches them.

use std::fmt;

use serde::Serialize;

use super::lines::{comment_start, is_py_space, py_rstrip, py_strip};

/// Why a requirement line cannot be installed remotely.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum UnusableReason {
    /// `-e`/`--editable` of a local path.
    EditableLocalPath,
    /// `-r`/`--requirement`/`-c`/`--constraint` of a local file.
    NestedRequirementsFile,
    /// A `file://` URL.
    FileUrl,
    /// A relative path (`./x`, `../x`, `.`, `..`).
    RelativePath,
    /// An absolute path (`/x`, `C:\x`).
    AbsolutePath,
    /// `name @ <local path>`.
    LocalDirectReference,
    /// `-f`/`--find-links` of a local directory.
    LocalFindLinks,
}

impl fmt::Display for UnusableReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::EditableLocalPath => "an editable install of a local path",
            Self::NestedRequirementsFile => {
                "a nested requirements or constraints file, which is not shipped"
            }
            Self::FileUrl => "a file:// URL to a local file",
            Self::RelativePath => "a relative local path",
            Self::AbsolutePath => "an absolute local path",
            Self::LocalDirectReference => "a direct reference to a local path",
            Self::LocalFindLinks => "a local --find-links directory",
        })
    }
}

fn starts_with_ci(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len()
        && s.is_char_boundary(prefix.len())
        && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

fn is_url(target: &str) -> bool {
    ["http://", "https://"]
        .iter()
        .any(|p| starts_with_ci(target, p))
}

fn is_vcs_or_url(target: &str) -> bool {
    is_url(target)
        || ["git+", "hg+", "bzr+", "svn+"]
            .iter()
            .any(|p| starts_with_ci(target, p))
}

fn is_windows_drive_path(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && matches!(b[2], b'\\' | b'/')
}

fn is_relative_path(s: &str) -> bool {
    s == "."
        || s == ".."
        || ["./", "../", ".\\", "..\\"]
            .iter()
            .any(|p| s.starts_with(p))
}

fn is_absolute_path(s: &str) -> bool {
    s.starts_with('/') || is_windows_drive_path(s)
}

fn is_local_path(s: &str) -> bool {
    is_relative_path(s) || is_absolute_path(s)
}

/// Splits an option line into (flag, target).
fn option_parts(s: &str) -> (&str, &str) {
    let (head, rest) = match s.find(is_py_space) {
        Some(i) => (&s[..i], py_strip(&s[i..])),
        None => (s, ""),
    };
    if head.starts_with("--") {
        match head.split_once('=') {
            Some((flag, target)) => (flag, target),
            None => (head, rest),
        }
    } else if head.len() > 2 && head.is_char_boundary(2) {
        // A short option with its value glued on: `-rbase.txt`, `-e.`, `-e=.`.
        let target = &head[2..];
        (&head[..2], target.strip_prefix('=').unwrap_or(target))
    } else {
        (head, rest)
    }
}

/// Why `line` (a logical requirement line) cannot be installed remotely,
/// or `None` when it can. Blank and comment lines are always fine; a
/// trailing comment is ignored.
pub fn unusable_reason(line: &str) -> Option<UnusableReason> {
    let stripped = py_strip(line);
    if stripped.is_empty() || stripped.starts_with('#') {
        return None;
    }
    let s = match comment_start(stripped) {
        Some(i) => py_rstrip(&stripped[..i]),
        None => stripped,
    };
    if s.to_ascii_lowercase().contains("file://") {
        return Some(UnusableReason::FileUrl);
    }
    if s.starts_with('-') {
        let (flag, target) = option_parts(s);
        return match flag {
            "-e" | "--editable" if !is_vcs_or_url(target) => {
                Some(UnusableReason::EditableLocalPath)
            }
            "-r" | "--requirement" | "-c" | "--constraint" if !is_url(target) => {
                Some(UnusableReason::NestedRequirementsFile)
            }
            "-f" | "--find-links" if !target.is_empty() && !target.contains("://") => {
                Some(UnusableReason::LocalFindLinks)
            }
            _ => None,
        };
    }
    if is_relative_path(s) {
        return Some(UnusableReason::RelativePath);
    }
    if is_absolute_path(s) {
        return Some(UnusableReason::AbsolutePath);
    }
    if let Some((_, target)) = s.split_once('@')
        && is_local_path(py_strip(target))
    {
        return Some(UnusableReason::LocalDirectReference);
    }
    None
}
