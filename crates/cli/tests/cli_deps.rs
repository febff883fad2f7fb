//! `kinetic deps` through the real binary.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

struct Project {
    _tmp: tempfile::TempDir,
    /// Plays `$HOME` for the binary.
    home: PathBuf,
}

impl Project {
    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let home = tmp.path().canonicalize().expect("canonical");
        Self { _tmp: tmp, home }
    }

    fn repo(&self) -> PathBuf {
        let repo = self.home.join("repo");
        fs::create_dir_all(repo.join(".git")).expect("mkdir");
        repo
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.home.join(rel);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(&p, text).expect("write");
        p
    }

    fn kinetic(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_kinetic"))
            .args(args)
            .env("HOME", &self.home)
            .env_remove("KINETIC_PROFILE")
            .current_dir(&self.home)
            .output()
            .expect("run kinetic")
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(o)))
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn json_output_has_every_field() {
    let p = Project::new();
    let repo = p.repo();
    let file = p.write(
        "repo/requirements.txt",
        "numpy==1.26\njax[tpu]>=0.4.6\nscipy\njaxlib\nkeras\njax==0.4.30  # kn:keep\n",
    );
    let o = p.kinetic(&["deps", path_str(&repo), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    let keys: Vec<&str> = v
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "dir",
            "dependency_file",
            "kind",
            "mode",
            "requirements",
            "warnings"
        ]
    );
    assert_eq!(v["dir"], path_str(&repo));
    assert_eq!(v["dependency_file"], path_str(&file));
    assert_eq!(v["kind"], "requirements.txt");
    assert_eq!(v["mode"], "bundled");
    assert_eq!(
        v["requirements"],
        "numpy==1.26\nscipy\nkeras\njax==0.4.30  # kn:keep\n"
    );
    let warnings = v["warnings"].as_array().expect("array");
    assert_eq!(warnings.len(), 2);
    assert_eq!(warnings[0]["kind"], "jax_line_dropped");
    assert_eq!(warnings[0]["line"], 2);
    assert_eq!(warnings[0]["package"], "jax");
    assert!(
        warnings[0]["message"]
            .as_str()
            .expect("message")
            .contains("# kn:keep")
    );
}

#[test]
fn text_output_names_the_file_and_prints_requirements() {
    let p = Project::new();
    let repo = p.repo();
    let file = p.write("repo/requirements.txt", "numpy\njax\n");
    let o = p.kinetic(&["deps", path_str(&repo)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains(path_str(&file)), "{out}");
    assert!(out.contains("Mode: bundled"), "{out}");
    assert!(out.contains("numpy\n"), "{out}");
    assert!(!out.contains("jax"), "{out}");
    assert!(
        stderr(&o).contains("warning: line 2: dropped 'jax'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn default_dir_is_the_current_directory() {
    let p = Project::new();
    p.write("requirements.txt", "numpy\n");
    let o = p.kinetic(&["deps", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["dir"], path_str(&p.home));
    assert_eq!(v["requirements"], "numpy\n");
}

#[test]
fn no_dependency_file() {
    let p = Project::new();
    let repo = p.repo();
    let o = p.kinetic(&["deps", path_str(&repo), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["dependency_file"], Value::Null);
    assert_eq!(v["kind"], Value::Null);
    assert_eq!(v["requirements"], Value::Null);
    assert_eq!(v["warnings"], serde_json::json!([]));
    let o = p.kinetic(&["deps", path_str(&repo)]);
    assert!(stdout(&o).contains("none found"), "{}", stdout(&o));
}

#[test]
fn does_not_search_above_home() {
    // HOME is the temp dir: a requirements file above it is never found,
    // whatever the machine has in its real home.
    let p = Project::new();
    fs::create_dir_all(p.home.join("proj")).expect("mkdir");
    let o = p.kinetic(&["deps", "proj", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json(&o)["dependency_file"], Value::Null);
}

#[test]
fn prebuilt_mode_joins_continuations() {
    let p = Project::new();
    let repo = p.repo();
    p.write(
        "repo/requirements.txt",
        "numpy==1.26 \\\n    --hash=sha256:aa\njax==0.4 \\\n    --hash=sha256:bb\n",
    );
    let o = p.kinetic(&["deps", path_str(&repo), "--mode", "prebuilt", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["mode"], "prebuilt");
    assert_eq!(v["requirements"], "numpy==1.26 --hash=sha256:aa\n");
    let o = p.kinetic(&["deps", path_str(&repo), "--json"]);
    assert_eq!(
        json(&o)["requirements"],
        "numpy==1.26 \\\n    --hash=sha256:aa\n"
    );
}

#[test]
fn prebuilt_rejection_exits_1_with_one_line() {
    let p = Project::new();
    let repo = p.repo();
    p.write("repo/requirements.txt", "numpy\n-e .\n");
    for json_flag in [false, true] {
        let mut args = vec!["deps", path_str(&repo), "--mode", "prebuilt"];
        if json_flag {
            args.push("--json");
        }
        let o = p.kinetic(&args);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("requirements.txt line 2"), "{err}");
        assert!(err.contains("'-e .'"), "{err}");
        assert!(err.contains("editable"), "{err}");
        assert!(stdout(&o).is_empty());
    }
}

#[test]
fn pyproject_without_dependencies_warns() {
    let p = Project::new();
    let repo = p.repo();
    p.write(
        "repo/pyproject.toml",
        "[project]\nname = \"x\"\n[tool.poetry.dependencies]\nnumpy = \"*\"\n",
    );
    let o = p.kinetic(&["deps", path_str(&repo), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["kind"], "pyproject.toml");
    assert_eq!(v["requirements"], Value::Null);
    let w = &v["warnings"][0];
    assert_eq!(w["kind"], "pyproject_declares_no_dependencies");
    assert_eq!(
        w["ignored"],
        serde_json::json!(["[tool.poetry.dependencies]"])
    );
}

#[test]
fn invalid_pyproject_exits_1() {
    let p = Project::new();
    let repo = p.repo();
    p.write("repo/pyproject.toml", "[project\n");
    let o = p.kinetic(&["deps", path_str(&repo)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("pyproject.toml"), "{}", stderr(&o));
}

#[test]
fn missing_dir_exits_2_naming_it() {
    let p = Project::new();
    let o = p.kinetic(&["deps", "no-such-dir"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no-such-dir"), "{}", stderr(&o));
    let file = p.write("plain-file", "");
    let o = p.kinetic(&["deps", path_str(&file)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not a directory"), "{}", stderr(&o));
}

#[test]
fn bad_mode_exits_2() {
    let p = Project::new();
    let o = p.kinetic(&["deps", "--mode", "docker"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("docker"), "{err}");
    assert!(err.contains("bundled") && err.contains("prebuilt"), "{err}");
}
