//! The rules that build the runner's one shipped file from its package.
//! Pure (the caller reads the files): `build.rs` runs them over
//! `runner/`, the crate's tests over examples, and `runner/assemble.py`
//! (which the runner's Python tests use) follows the same rules, byte for
//! byte (a test of this crate compares the two).
//!
//! The file is `#!/usr/bin/env python3`, the package's `__init__.py`
//! without its `from .module import *` lines (which give the modules'
//! order), a note, `from __future__ import annotations`, then each module
//! under a `# ---- kinetic_runner/{module}.py` line, without its
//! `from __future__` line and its `from .module import ...` lines. Taking
//! those lines out is sound because a module imports only modules listed
//! before it, and only by name; no two modules define the same top-level
//! name. The one `JOB_MODULE_SOURCE = None` line gets the job-side module's
//! text as a Python string literal.

use std::collections::HashMap;
use std::fmt::{self, Write as _};

/// The package's directory name under `runner/`.
pub const PACKAGE: &str = "kinetic_runner";
/// The job-side `kinetic` module, beside the package.
pub const JOB_MODULE_FILE: &str = "kinetic_job.py";
/// The name the built file is shipped under.
pub const RUNNER_FILE_NAME: &str = "kinetic_runner.py";

const FUTURE: &str = "from __future__ import annotations";
const PLACEHOLDER: &str = "\nJOB_MODULE_SOURCE = None\n";
const NOTE: &str = "# Built from runner/kinetic_runner/ (one module per concern, in the\n\
                    # order of its __init__.py) and runner/kinetic_job.py: edit those, not this file.\n";

/// Why the package cannot be built into one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssemblyError(pub String);

impl fmt::Display for AssemblyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AssemblyError {}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The leading identifier of `text` and the rest.
fn ident(text: &str) -> (&str, &str) {
    let end = text.find(|c: char| !is_word(c)).unwrap_or(text.len());
    text.split_at(end)
}

/// `from .{source} import {names}` (`source` may be empty).
fn relative_import(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix("from .")?;
    let (source, rest) = ident(rest);
    let names = rest.strip_prefix(" import ")?;
    Some((source, names))
}

/// The module a `from .module import *` line of `__init__.py` lists.
fn listed_module(line: &str) -> Option<&str> {
    let (source, names) = relative_import(line)?;
    (!source.is_empty() && names.starts_with('*')).then_some(source)
}

/// The top-level name a line defines (`def NAME`, `class NAME`, `NAME = …`,
/// `NAME: type = …`), if any.
fn defined_name(line: &str) -> Option<&str> {
    for keyword in ["def ", "class "] {
        if let Some(rest) = line.strip_prefix(keyword) {
            let (name, _) = ident(rest);
            if !name.is_empty() {
                return Some(name);
            }
        }
    }
    let (name, rest) = ident(line);
    if name.is_empty() {
        return None;
    }
    let mut rest = rest.trim_start();
    if let Some(annotated) = rest.strip_prefix(':') {
        rest = &annotated[annotated.find('=')?..];
    }
    let value = rest.strip_prefix('=')?;
    (!value.starts_with('=')).then_some(name)
}

/// `text` as a double-quoted Python string literal.
pub fn python_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The module's text without its intra-package imports and its
/// `from __future__` line; checks that it imports only `earlier` modules.
fn module_body(name: &str, text: &str, earlier: &[&str]) -> Result<String, AssemblyError> {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut kept = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line == FUTURE {
            i += 1;
            continue;
        }
        if let Some((source, names)) = relative_import(line) {
            if source.is_empty() || names.trim() == "*" {
                return Err(AssemblyError(format!(
                    "{PACKAGE}/{name}.py: {line:?}: import names from a module (from .module import name)"
                )));
            }
            if !earlier.contains(&source) {
                return Err(AssemblyError(format!(
                    "{PACKAGE}/{name}.py imports .{source}, which is not listed before it in __init__.py"
                )));
            }
            if names.trim().starts_with('(') {
                while !lines[i].contains(')') {
                    i += 1;
                    if i == lines.len() {
                        return Err(AssemblyError(format!(
                            "{PACKAGE}/{name}.py: unclosed {line:?}"
                        )));
                    }
                }
            }
            i += 1;
            continue;
        }
        if line.starts_with("from .") || line.starts_with("import .") {
            return Err(AssemblyError(format!(
                "{PACKAGE}/{name}.py: {line:?}: import names from a module (from .module import name)"
            )));
        }
        kept.push(line);
        i += 1;
    }
    Ok(format!("{}\n", kept.join("\n").trim_matches('\n')))
}

/// Builds the one file from the package's `__init__.py` (`init`), its
/// modules (`module(name)`: the text of `{name}.py`, `None` if there is
/// none) and the job-side module's text.
pub fn assemble(
    init: &str,
    module: impl Fn(&str) -> Option<String>,
    job_module: &str,
) -> Result<String, AssemblyError> {
    let mut order = Vec::new();
    let mut head = Vec::new();
    for line in init.split('\n') {
        match listed_module(line) {
            Some(name) => order.push(name),
            None => head.push(line),
        }
    }
    if order.is_empty() {
        return Err(AssemblyError(format!(
            "{PACKAGE}/__init__.py lists no module (from .module import *)"
        )));
    }
    let mut text = format!(
        "#!/usr/bin/env python3\n{}\n{NOTE}\n{FUTURE}\n",
        head.join("\n").trim_matches('\n')
    );
    let mut defined: HashMap<String, &str> = HashMap::new();
    for (index, name) in order.iter().enumerate() {
        let source = module(name).ok_or_else(|| {
            AssemblyError(format!(
                "{PACKAGE}/__init__.py lists {name}, but there is no {PACKAGE}/{name}.py"
            ))
        })?;
        let body = module_body(name, &source, &order[..index])?;
        for line in body.split('\n') {
            if let Some(symbol) = defined_name(line) {
                let owner = *defined.entry(symbol.to_owned()).or_insert(name);
                if owner != *name {
                    return Err(AssemblyError(format!(
                        "{symbol} is defined by both {PACKAGE}/{owner}.py and {PACKAGE}/{name}.py"
                    )));
                }
            }
        }
        let _ = write!(text, "\n\n# ---- {PACKAGE}/{name}.py\n{body}");
    }
    if text.matches(PLACEHOLDER).count() != 1 {
        return Err(AssemblyError(
            "the package must hold exactly one `JOB_MODULE_SOURCE = None` line".to_owned(),
        ));
    }
    let line = format!("\nJOB_MODULE_SOURCE = {}\n", python_string(job_module));
    Ok(text.replacen(PLACEHOLDER, &line, 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const JOB: &str = "\"\"\"job\"\"\"\n";

    fn build(init: &str, modules: &[(&str, &str)]) -> Result<String, AssemblyError> {
        let modules: HashMap<&str, &str> = modules.iter().copied().collect();
        assemble(init, |name| modules.get(name).map(|t| (*t).to_owned()), JOB)
    }

    const INIT: &str =
        "\"\"\"The runner.\"\"\"\nfrom .a import *  # noqa\nfrom .b import *  # noqa\n";

    #[test]
    fn modules_are_joined_in_order_without_their_package_imports() {
        let a = "\"\"\"A.\"\"\"\n\nfrom __future__ import annotations\n\nimport os\n\nJOB_MODULE_SOURCE = None\nX = 1\n";
        let b = "\"\"\"B.\"\"\"\n\nfrom __future__ import annotations\n\nfrom .a import (\n    X,\n)\nfrom .a import os\n\n\ndef f() -> int:\n    return X\n";
        let built = build(INIT, &[("a", a), ("b", b)]).unwrap();
        assert_eq!(
            built,
            format!(
                "#!/usr/bin/env python3\n\"\"\"The runner.\"\"\"\n{NOTE}\n{FUTURE}\n\n\n\
                 # ---- kinetic_runner/a.py\n\"\"\"A.\"\"\"\n\n\nimport os\n\n\
                 JOB_MODULE_SOURCE = \"\\\"\\\"\\\"job\\\"\\\"\\\"\\n\"\nX = 1\n\n\n\
                 # ---- kinetic_runner/b.py\n\"\"\"B.\"\"\"\n\n\n\n\ndef f() -> int:\n    return X\n"
            )
        );
    }

    #[test]
    fn a_module_importing_one_listed_after_it_is_refused() {
        let a = "from .b import g\nJOB_MODULE_SOURCE = None\n";
        let err = build(INIT, &[("a", a), ("b", "def g():\n    pass\n")]).unwrap_err();
        assert_eq!(
            err.0,
            "kinetic_runner/a.py imports .b, which is not listed before it in __init__.py"
        );
    }

    #[test]
    fn a_name_two_modules_define_is_refused() {
        let a = "JOB_MODULE_SOURCE = None\nLIMIT: int = 1\n";
        let b = "def LIMIT():\n    pass\n";
        let err = build(INIT, &[("a", a), ("b", b)]).unwrap_err();
        assert_eq!(
            err.0,
            "LIMIT is defined by both kinetic_runner/a.py and kinetic_runner/b.py"
        );
        // A comparison or a keyword argument at column 0 defines nothing.
        let b = "LIMIT == 2\nprint(end='')\n";
        build(INIT, &[("a", a), ("b", b)]).unwrap();
    }

    #[test]
    fn imports_the_built_file_could_not_keep_are_refused() {
        for line in ["from . import a", "from .a import *", "from .. import x"] {
            let b = format!("{line}\n");
            let err = build(INIT, &[("a", "JOB_MODULE_SOURCE = None\n"), ("b", &b)]).unwrap_err();
            assert!(err.0.starts_with("kinetic_runner/b.py: "), "{line}: {err}");
            assert!(
                err.0
                    .ends_with("import names from a module (from .module import name)"),
                "{err}"
            );
        }
        let err = build(
            INIT,
            &[
                ("a", "JOB_MODULE_SOURCE = None\n"),
                ("b", "from .a import (\n  x,\n"),
            ],
        )
        .unwrap_err();
        assert_eq!(err.0, "kinetic_runner/b.py: unclosed \"from .a import (\"");
    }

    #[test]
    fn a_listed_module_must_exist_and_the_list_must_not_be_empty() {
        let err = build(INIT, &[("a", "JOB_MODULE_SOURCE = None\n")]).unwrap_err();
        assert_eq!(
            err.0,
            "kinetic_runner/__init__.py lists b, but there is no kinetic_runner/b.py"
        );
        let err = build("\"\"\"Nothing.\"\"\"\n", &[]).unwrap_err();
        assert_eq!(
            err.0,
            "kinetic_runner/__init__.py lists no module (from .module import *)"
        );
    }

    #[test]
    fn the_job_module_line_is_needed_once() {
        let err = build(INIT, &[("a", "X = 1\n"), ("b", "Y = 2\n")]).unwrap_err();
        assert!(
            err.0
                .contains("exactly one `JOB_MODULE_SOURCE = None` line"),
            "{err}"
        );
        let twice = "JOB_MODULE_SOURCE = None\n";
        let err = build(INIT, &[("a", twice), ("b", "\nJOB_MODULE_SOURCE = None\n")]).unwrap_err();
        assert_eq!(
            err.0,
            "JOB_MODULE_SOURCE is defined by both kinetic_runner/a.py and kinetic_runner/b.py"
        );
    }

    #[test]
    fn python_strings_escape_what_a_literal_cannot_hold() {
        assert_eq!(
            python_string("a\"b\\c\nd\re\tf\u{1}\u{7f}é"),
            "\"a\\\"b\\\\c\\nd\\re\\tf\\x01\\x7fé\""
        );
    }
}
