//! The runner as shipped: built from every module of the package, the same
//! bytes `runner/assemble.py` gives the runner's Python tests, and runnable
//! as `python3 kinetic_runner.py`.

use std::path::{Path, PathBuf};
use std::process::Command;

use kinetic_runner::{JOB_MODULE_SOURCE, RUNNER_FILE_NAME, RUNNER_SOURCE};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python() -> String {
    std::env::var("KINETIC_RUNNER_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

#[test]
fn the_built_runner_is_what_runner_assemble_py_builds() {
    let out = Command::new(python())
        .args(["runner/assemble.py", "-"])
        .current_dir(repo_root())
        .output()
        .expect("run python3 runner/assemble.py (the runner's tests need a python3)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout == RUNNER_SOURCE.as_bytes(),
        "runner/assemble.py and build.rs build different files"
    );
}

#[test]
fn every_module_of_the_package_is_built_in_once() {
    let package = repo_root().join("runner/kinetic_runner");
    let mut modules: Vec<String> = std::fs::read_dir(&package)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".py") && n != "__init__.py")
        .collect();
    modules.sort();
    assert!(modules.len() >= 10, "{modules:?}");
    for module in &modules {
        let marker = format!("\n# ---- kinetic_runner/{module}\n");
        assert_eq!(RUNNER_SOURCE.matches(&marker).count(), 1, "{module}");
    }
    assert_eq!(
        RUNNER_SOURCE.matches("\n# ---- kinetic_runner/").count(),
        modules.len()
    );
    assert!(RUNNER_SOURCE.starts_with("#!/usr/bin/env python3\n\"\"\"Kinetic runner, protocol v1"));
    assert_eq!(
        RUNNER_SOURCE
            .matches("\nfrom __future__ import annotations\n")
            .count(),
        1
    );
    assert!(
        !RUNNER_SOURCE.contains("\nfrom ."),
        "a package import was left in"
    );
}

#[test]
fn the_built_runner_carries_the_job_module() {
    assert!(!RUNNER_SOURCE.contains("\nJOB_MODULE_SOURCE = None\n"));
    assert!(
        RUNNER_SOURCE.contains("\nJOB_MODULE_SOURCE = \"\\\"\\\"\\\"Kinetic, as a job sees it")
    );
    assert!(JOB_MODULE_SOURCE.contains("def run("));
}

#[test]
fn the_built_runner_runs_as_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(RUNNER_FILE_NAME);
    std::fs::write(&path, RUNNER_SOURCE).unwrap();
    // Without --spec: the runner's own bad-invocation answer, exit 2.
    let out = Command::new(python())
        .arg("-u")
        .arg(&path)
        .current_dir(dir.path())
        .output()
        .expect("run python3");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr,
        "[kinetic] startup: bad invocation: --spec URI (or --batch-spec URI in an Indexed Job) is required\n"
    );
    let out = Command::new(python())
        .arg(&path)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("usage: kinetic_runner.py"));
}
