//! Debug jobs through the real binary on the local backend: `kinetic run
//! --debug` starts debugpy in the runner, `kinetic jobs debug` forwards a
//! local port to it and prints the VS Code launch configuration, and a small
//! Debug Adapter Protocol client written here attaches through that port,
//! continues from the breakpoint, and the job's value comes back; the job
//! is kept after it succeeds.
//!
//! The jobs run on the interpreter of the venv `scripts/test.sh` builds
//! (`target/python-venv`, which has debugpy from PyPI).

mod dap;
mod sandbox;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use dap::WORK_PY;
use sandbox::{Sandbox, stderr, stdout, wait_within};

/// `PATH` with the venv's `bin` first, so the local backend's `python3` has debugpy.
fn path_with_debugpy() -> String {
    format!(
        "{}:{}",
        dap::venv_bin().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn a_debugger_attaches_through_jobs_debug_and_the_value_comes_back() {
    let sandbox = Sandbox::new(WORK_PY);
    let path = path_with_debugpy();
    let env = [("PATH", path.as_str())];
    let o = sandbox.kinetic_env(
        &["run", "--detach", "--debug", "work:square", "--arg", "7"],
        &env,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let job = stdout(&o).trim().to_owned();

    let mut debug = sandbox
        .command(
            &["jobs", "debug", &job, "--port", "0", "--working-dir", "."],
            &env,
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let launch = dap::read_launch(debug.stdout.take().unwrap());
    let config = &launch["configurations"][0];
    assert_eq!(config["type"], "debugpy", "{launch}");
    assert_eq!(config["request"], "attach", "{launch}");
    assert_eq!(config["connect"]["host"], "localhost", "{launch}");
    let port = u16::try_from(config["connect"]["port"].as_u64().unwrap()).unwrap();
    assert_ne!(port, 0);
    let project = sandbox.path("home/project");
    let local_root = PathBuf::from(config["pathMappings"][0]["localRoot"].as_str().unwrap());
    assert_eq!(
        local_root.canonicalize().unwrap(),
        project.canonicalize().unwrap()
    );
    let remote_root = config["pathMappings"][0]["remoteRoot"].as_str().unwrap();
    assert!(
        remote_root.ends_with("/workspace")
            && std::path::Path::new(remote_root).join("work.py").is_file(),
        "the remote root is the job's extracted project: {remote_root}"
    );

    // A debugger attaches through the forwarded port and lets the job go on.
    let stopped = dap::attach_and_continue(("127.0.0.1", port), Duration::from_secs(60));
    assert!(stopped.is_some(), "the job stopped before the call");

    // The forward ends with the job.
    let o = wait_within(debug, Duration::from_secs(60));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("ended (SUCCEEDED)"), "{}", stderr(&o));

    let o = sandbox.kinetic_env(&["jobs", "result", &job], &env);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "49");
    // A debug job is kept once its value came back (Kinetic's default).
    assert!(
        sandbox.path("local/jobs").join(&job).is_dir(),
        "{job} was cleaned up"
    );
    let o = sandbox.kinetic_env(&["jobs", "status", &job], &env);
    assert!(stdout(&o).contains("SUCCEEDED"), "{}", stdout(&o));
    let logs = stdout(&sandbox.kinetic_env(&["jobs", "logs", &job], &env));
    assert!(logs.contains("debugger attached"), "{logs}");
}

#[test]
fn without_debugpy_the_job_fails_in_debugger_setup_and_jobs_debug_says_it_ended_first() {
    let sandbox = Sandbox::new(WORK_PY);
    // debugpy made unimportable for this job whatever the host has: the
    // project's own module of that name shadows any installed one.
    std::fs::write(
        sandbox.path("home/project/debugpy.py"),
        "raise ImportError(\"No module named 'debugpy'\")\n",
    )
    .unwrap();
    let path = path_with_debugpy();
    let env = [("PATH", path.as_str())];
    let o = sandbox.kinetic_env(
        &["run", "--detach", "--debug", "work:square", "--arg", "3"],
        &env,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let job = stdout(&o).trim().to_owned();
    let o = sandbox.kinetic_env(&["jobs", "debug", &job, "--port", "0"], &env);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains(&format!(
            "Job {job} reached terminal state (FAILED) before debugpy server was ready. It ended: exited with code 1. Its logs say what happened (kinetic jobs logs {job}"
        )),
        "{}",
        stderr(&o)
    );
    let o = sandbox.kinetic_env(&["jobs", "result", &job], &env);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("debugger setup"), "{err}");
    assert!(
        err.contains("add `debugpy` to the project's requirements"),
        "{err}"
    );
}

#[test]
fn jobs_debug_refuses_a_job_run_without_debug() {
    let sandbox = Sandbox::new(WORK_PY);
    let o = sandbox.kinetic(&["run", "--detach", "work:square", "--arg", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let job = stdout(&o).trim().to_owned();
    let o = sandbox.kinetic(&["jobs", "debug", &job, "--port", "0"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("was not submitted with debug"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_command_cannot_run_under_the_debugger() {
    let sandbox = Sandbox::new(WORK_PY);
    let o = sandbox.kinetic(&["run", "--debug", "--", "true"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("a command cannot be debugged"),
        "{}",
        stderr(&o)
    );
}
