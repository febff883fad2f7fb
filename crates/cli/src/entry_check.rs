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
//!
//! Starting `python3` costs more than the rest of a local job's submission,
//! so a passed check is remembered in the user's cache directory
//! (`$XDG_CACHE_HOME/kinetic/entry-check`, else `~/.cache/kinetic/…`): one
//! small file per interpreter, source file and function, holding the
//! SHA-256 of everything the verdict depends on (this check's code, the
//! interpreter's path and its file's identity — device, inode, size,
//! modification time — the function's name and the source's bytes, which
//! are handed to the interpreter on stdin so that the verdict is about
//! exactly the bytes hashed). A changed file or interpreter therefore misses
//! and is checked again. Only passes are remembered: a refusal is checked
//! afresh every time, so an interpreter that changed behind an unchanged
//! file (a version manager's shim selecting another version) can at worst
//! let a job go on that the job itself then reports, never refuse one. The
//! entries are written aside and renamed into place, so a reader sees a
//! whole entry or none.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use kinetic_core::config::EnvLookup;
use kinetic_engine::Entrypoint;
use sha2::{Digest, Sha256};

use crate::engine::Invocation;
use crate::error::CliError;

/// Parses the source on stdin (the file named by `sys.argv[1]`) and says
/// whether it binds the name `sys.argv[2]` at module level: `ok`,
/// `missing<TAB>defined functions` or `syntax<TAB>message`; `skip` when the
/// source cannot be parsed for another reason.
const CHECK_PY: &str = r#"
import ast, sys
path, name = sys.argv[1], sys.argv[2].split(".")[0]  # `C.m`: the class C binds it
try:
    tree = ast.parse(sys.stdin.buffer.read(), filename=path)
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
/// does not define the function, when that can be told locally; a pass is
/// remembered in the user's cache directory.
pub(crate) fn check(entry: &Entrypoint, inv: &Invocation) -> Result<(), CliError> {
    let cwd = inv.cwd()?;
    let cache = CheckCache::for_env(inv.env());
    check_with(entry, cwd, inv.env().var("PATH").as_deref(), cache.as_ref())
}

/// [`check`] with `python3` looked up on `path_var` and passes remembered
/// in `cache`, if any.
fn check_with(
    entry: &Entrypoint,
    cwd: &Path,
    path_var: Option<&str>,
    cache: Option<&CheckCache>,
) -> Result<(), CliError> {
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
    let Some(python) = path_var.and_then(Interpreter::on_path) else {
        return Ok(()); // no local python3: the job finds out
    };
    let Ok(source) = std::fs::read(&file) else {
        return Ok(()); // unreadable here: the job finds out
    };
    let remembered = cache.map(|cache| {
        let entry = cache.entry(&python, &file, function);
        let key = verdict_key(&python, function, &source);
        (entry, key)
    });
    if let Some((entry, key)) = &remembered
        && entry.holds(key)
    {
        return Ok(());
    }
    let Some(answer) = python.ask(&file, function, &source) else {
        return Ok(()); // the interpreter could not be run: the job finds out
    };
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
        "ok" => {
            if let Some((entry, key)) = &remembered {
                entry.remember(key);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The `python3` the check runs: the first executable of that name on
/// `PATH`, and what tells one version of it from another on disk.
#[derive(Debug)]
struct Interpreter {
    path: PathBuf,
    /// The resolved file's path, device, inode, size and modification time.
    identity: String,
}

impl Interpreter {
    fn on_path(path_var: &str) -> Option<Self> {
        let path = std::env::split_paths(path_var)
            .filter(|dir| dir.is_absolute())
            .map(|dir| dir.join("python3"))
            .find(|candidate| {
                std::fs::metadata(candidate)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })?;
        let real = std::fs::canonicalize(&path).ok()?;
        let meta = std::fs::metadata(&real).ok()?;
        let identity = format!(
            "{} dev={} ino={} size={} mtime={}.{:09}",
            real.display(),
            meta.dev(),
            meta.ino(),
            meta.len(),
            meta.mtime(),
            meta.mtime_nsec()
        );
        Some(Self { path, identity })
    }

    /// The check's answer for `source` (read from `file`), or `None` when
    /// the interpreter could not be run.
    fn ask(&self, file: &Path, function: &str, source: &[u8]) -> Option<String> {
        let mut child = Command::new(&self.path)
            .args(["-I", "-S", "-c", CHECK_PY])
            .arg(file)
            .arg(function)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        if let Some(mut stdin) = child.stdin.take() {
            // A write that fails (the interpreter exited early) shows in
            // its answer, which is then not `ok`.
            let _ = stdin.write_all(source);
        }
        let output = child.wait_with_output().ok()?;
        Some(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

/// The SHA-256 of everything a verdict depends on, as hex.
fn verdict_key(python: &Interpreter, function: &str, source: &[u8]) -> String {
    let mut hasher = Sha256::new();
    for part in [
        b"kinetic entry check 1".as_slice(),
        CHECK_PY.as_bytes(),
        python.identity.as_bytes(),
        function.as_bytes(),
    ] {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    hasher.update(source);
    hex::encode(hasher.finalize())
}

/// Where passed checks are remembered.
#[derive(Debug)]
struct CheckCache {
    dir: PathBuf,
}

impl CheckCache {
    /// `$XDG_CACHE_HOME/kinetic/entry-check` (when absolute), else
    /// `$HOME/.cache/kinetic/entry-check`; `None` without either.
    fn for_env(env: &dyn EnvLookup) -> Option<Self> {
        let base = env
            .non_empty("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| kinetic_core::settings::home(env).map(|home| home.join(".cache")))?;
        Some(Self {
            dir: base.join("kinetic").join("entry-check"),
        })
    }

    /// The entry of `function` in `file` checked by `python`: one per
    /// such triple, so an edited file replaces its entry.
    fn entry(&self, python: &Interpreter, file: &Path, function: &str) -> CacheEntry<'_> {
        let mut hasher = Sha256::new();
        for part in [
            python.identity.as_bytes(),
            file.as_os_str().as_encoded_bytes(),
            function.as_bytes(),
        ] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part);
        }
        CacheEntry {
            cache: self,
            path: self.dir.join(hex::encode(hasher.finalize())),
        }
    }
}

/// One remembered pass: a file holding the key it was given for.
#[derive(Debug)]
struct CacheEntry<'a> {
    cache: &'a CheckCache,
    path: PathBuf,
}

impl CacheEntry<'_> {
    fn holds(&self, key: &str) -> bool {
        std::fs::read(&self.path).is_ok_and(|held| held == key.as_bytes())
    }

    /// Writes the entry aside and renames it into place. A cache that
    /// cannot be written only costs the next check its speed.
    fn remember(&self, key: &str) {
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(&self.cache.dir)?;
            let mut tmp = tempfile::NamedTempFile::new_in(&self.cache.dir)?;
            tmp.write_all(key.as_bytes())?;
            tmp.persist(&self.path).map_err(|e| e.error)?;
            Ok(())
        };
        let _ = write();
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

    /// The test process's `PATH`, which must lead to a `python3`.
    fn path_var() -> String {
        let path = std::env::var("PATH").unwrap_or_default();
        assert!(
            Interpreter::on_path(&path).is_some(),
            "these tests need python3 on PATH"
        );
        path
    }

    fn check(entry: &Entrypoint, cwd: &Path) -> Result<(), CliError> {
        check_with(entry, cwd, Some(&path_var()), None)
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

    #[test]
    fn a_pass_is_remembered_until_the_file_or_the_interpreter_changes() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("proj");
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(&bin).unwrap();
        let real = Interpreter::on_path(&path_var()).unwrap().path;
        // A python3 that counts its starts before running the real one.
        let starts = dir.path().join("starts");
        let wrapper = |comment: &str| {
            let script = format!(
                "#!/bin/sh\n# {comment}\necho >> '{}'\nexec '{}' \"$@\"\n",
                starts.display(),
                real.display()
            );
            std::fs::write(bin.join("python3"), script).unwrap();
            let mode = std::fs::Permissions::from_mode(0o755);
            std::fs::set_permissions(bin.join("python3"), mode).unwrap();
        };
        wrapper("first");
        let started = || {
            std::fs::read_to_string(&starts)
                .map(|s| s.lines().count())
                .unwrap_or(0)
        };
        let path = bin.display().to_string();
        let cache = CheckCache {
            dir: dir.path().join("cache"),
        };
        let run = |text: &str| check_with(&entry(text), &cwd, Some(&path), Some(&cache));

        std::fs::write(cwd.join("work.py"), "def square(x):\n    return x * x\n").unwrap();
        run("work:square").unwrap();
        assert_eq!(started(), 1);
        run("work:square").unwrap();
        run("work.py:square").unwrap();
        assert_eq!(started(), 1, "the pass was remembered");

        // Refusals are never remembered: each is checked again.
        for _ in 0..2 {
            let err = run("work:cube").unwrap_err();
            assert!(err.to_string().contains("no function 'cube'"), "{err}");
        }
        assert_eq!(started(), 3);

        // An edited file is checked again, and its new verdict holds.
        std::fs::write(cwd.join("work.py"), "def cube(x):\n    return x ** 3\n").unwrap();
        let err = run("work:square").unwrap_err();
        assert!(err.to_string().contains("it defines: cube"), "{err}");
        run("work:cube").unwrap();
        run("work:cube").unwrap();
        assert_eq!(started(), 5);

        // Another interpreter (here: its file rewritten) is asked again.
        wrapper("second, a longer line");
        run("work:cube").unwrap();
        run("work:cube").unwrap();
        assert_eq!(started(), 6);

        // An entry that does not hold the key (torn or foreign) is a miss.
        for file in std::fs::read_dir(&cache.dir).unwrap() {
            std::fs::write(file.unwrap().path(), "0123").unwrap();
        }
        run("work:cube").unwrap();
        assert_eq!(started(), 7);
        let leftovers: Vec<_> = std::fs::read_dir(&cache.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|name| name.len() != 64)
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    }
}
