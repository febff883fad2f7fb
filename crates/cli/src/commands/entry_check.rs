//! Before a function job is submitted: does its entry resolve? The entry
//! module's source, when it is found under the working directory, is parsed
//! by the local `python3` (`ast.parse`: nothing is imported or run), so a
//! syntax error or a function the module does not define is refused before
//! anything is hashed, uploaded or submitted.
//!
//! The check only refuses what it can be sure of: a module found nowhere
//! under the working directory (an installed package), a module that
//! binds names dynamically (`from x import *`, `globals()`, a module
//! `__getattr__`), or no local `python3` let the job go on as before.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use kinetic_core::engine::Entrypoint;

use crate::error::CliError;

/// Parses the file named by `sys.argv[1]` and says whether it binds the
/// name `sys.argv[2]` at module level: `ok`, `missing<TAB>defined functions`
/// or `syntax<TAB>message`; `skip` when the file cannot be read.
const CHECK_PY: &str = r#"
import ast, sys
path, name = sys.argv[1], sys.argv[2]
try:
    with open(path, "rb") as f:
        tree = ast.parse(f.read(), filename=path)
except SyntaxError as e:
    where = "line %s" % e.lineno if e.lineno else "?"
    text = (e.text or "").strip()
    print("syntax\t%s: %s: %s%s" % (where, type(e).__name__, e.msg, (" (" + text + ")") if text else ""))
    sys.exit(0)
except (OSError, ValueError):
    print("skip")
    sys.exit(0)
names, funcs, dynamic = set(), [], False
def bind(t):
    if isinstance(t, ast.Name):
        names.add(t.id)
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            bind(e)
    elif isinstance(t, ast.Starred):
        bind(t.value)
def walk(body):
    global dynamic
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if not isinstance(node, ast.ClassDef):
                funcs.append(node.name)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                bind(t)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            bind(node.target)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                if a.name == "*":
                    dynamic = True
                else:
                    names.add(a.asname or a.name.split(".")[0])
        else:
            for field in ("target", "targets"):
                t = getattr(node, field, None)
                for x in (t if isinstance(t, list) else [t]):
                    if x is not None:
                        bind(x)
            for item in getattr(node, "items", []) or []:
                if getattr(item, "optional_vars", None) is not None:
                    bind(item.optional_vars)
            for field in ("body", "orelse", "finalbody"):
                walk(getattr(node, field, []) or [])
            for h in (getattr(node, "handlers", []) or []) + (getattr(node, "cases", []) or []):
                walk(h.body)
walk(tree.body)
for node in ast.walk(tree):
    if isinstance(node, ast.Name) and node.id in ("globals", "exec", "setattr", "vars", "__import__"):
        dynamic = True
    elif isinstance(node, ast.Global) and name in node.names:
        names.add(name)
    elif type(node).__name__ == "NamedExpr":
        bind(node.target)
if name in names or dynamic or "__getattr__" in names:
    print("ok")
else:
    print("missing\t" + ", ".join(funcs))
"#;

/// Refuses (as a usage error) an entry whose module has a syntax error or
/// does not define the function, when that can be told locally.
pub(crate) fn check(entry: &Entrypoint, cwd: &Path) -> Result<(), CliError> {
    let (file, function) = match entry {
        Entrypoint::Module { module, function } => match module_file(cwd, module) {
            Some(file) => (file, function),
            None => return Ok(()),
        },
        Entrypoint::File { path, function } => {
            let file = cwd.join(path);
            if !file.is_file() {
                return Ok(()); // the submission names the missing file
            }
            (file, function)
        }
        Entrypoint::Command { .. } => return Ok(()),
    };
    let Ok(output) = Command::new("python3")
        .args(["-I", "-S", "-c", CHECK_PY])
        .arg(&file)
        .arg(function)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
    else {
        return Ok(()); // no local python3: the job finds out
    };
    let answer = String::from_utf8_lossy(&output.stdout);
    let (verdict, detail) = answer
        .trim_end()
        .split_once('\t')
        .unwrap_or((answer.trim_end(), ""));
    let shown = file.strip_prefix(cwd).unwrap_or(&file).display();
    match verdict {
        "syntax" => Err(CliError::usage(format!(
            "{shown} cannot be imported: {detail}; nothing was submitted"
        ))),
        "missing" => Err(CliError::usage(format!(
            "{shown} has no function '{function}' ({}); nothing was submitted",
            if detail.is_empty() {
                "it defines no functions".to_owned()
            } else {
                format!("it defines: {detail}")
            }
        ))),
        _ => Ok(()),
    }
}

/// The source of `module` (dotted) under `cwd`, as Python would find it
/// from there: `a/b.py` or the package `a/b/__init__.py`.
fn module_file(cwd: &Path, module: &str) -> Option<PathBuf> {
    let rel: PathBuf = module.split('.').collect();
    let file = cwd.join(&rel).with_extension("py");
    if file.is_file() {
        return Some(file);
    }
    let init = cwd.join(rel).join("__init__.py");
    init.is_file().then_some(init)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str) -> Entrypoint {
        Entrypoint::parse(text).unwrap()
    }

    #[test]
    fn refuses_a_missing_function_and_a_syntax_error_only() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        std::fs::write(
            cwd.join("work.py"),
            "import os\nfrom json import dumps as d\nif True:\n    def inner():\n        pass\nX = 1\ndef square(x):\n    return x * x\n",
        )
        .unwrap();
        for ok in [
            "work:square",
            "work:inner",
            "work:X",
            "work:d",
            "work.py:square",
        ] {
            check(&entry(ok), cwd).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        let err = check(&entry("work:sqare"), cwd).unwrap_err();
        assert_eq!(err.exit_code(), 2, "a usage error");
        assert!(
            err.to_string()
                .contains("work.py has no function 'sqare' (it defines: inner, square)"),
            "{err}"
        );

        std::fs::create_dir(cwd.join("pkg")).unwrap();
        std::fs::write(cwd.join("pkg/__init__.py"), "def f(:\n").unwrap();
        let err = check(&entry("pkg:f"), cwd).unwrap_err();
        assert!(err.to_string().contains("SyntaxError"), "{err}");
        assert!(err.to_string().contains("line 1"), "{err}");

        // Dynamic modules and modules found nowhere are left to the job.
        std::fs::write(cwd.join("star.py"), "from os.path import *\n").unwrap();
        check(&entry("star:join"), cwd).unwrap();
        check(&entry("installed.somewhere:f"), cwd).unwrap();
    }
}
