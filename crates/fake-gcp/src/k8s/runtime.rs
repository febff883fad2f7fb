//! The fake container runtime: a container's command runs as a local
//! process in its own process group, its output (stdout and stderr) goes to
//! a log file, and its exit code is recorded when it ends. Stopping sends
//! SIGTERM to the group, then SIGKILL after the grace period.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;

/// What became of a container's process: its exit code once it ended
/// (128 + the signal when a signal ended it).
pub(crate) type ExitCell = Arc<Mutex<Option<i32>>>;

/// The exit code, if the process ended.
pub(crate) fn exit_code(exit: &ExitCell) -> Option<i32> {
    *exit.lock().unwrap_or_else(|p| p.into_inner())
}

/// Record that the container ended with `code`.
pub(crate) fn record_exit(exit: &ExitCell, code: i32) {
    *exit.lock().unwrap_or_else(|p| p.into_inner()) = Some(code);
}

/// How to start one container process.
#[derive(Debug)]
pub(crate) struct ProcessSpec<'a> {
    /// The command and its arguments, paths already mapped to the host.
    pub(crate) argv: &'a [String],
    /// The container's environment (nothing of this process's but `PATH`).
    pub(crate) env: &'a BTreeMap<String, String>,
    /// `HOME` of the process.
    pub(crate) home: PathBuf,
    /// `HOSTNAME` of the process (the pod's name).
    pub(crate) hostname: &'a str,
    /// Its working directory.
    pub(crate) cwd: PathBuf,
    /// Where its output goes.
    pub(crate) log: &'a Path,
}

/// Start the process in its own process group; a task records its exit in
/// `exit`. Returns the process group id.
pub(crate) fn start(spec: &ProcessSpec<'_>, exit: ExitCell) -> Result<Option<i32>, String> {
    let Some((program, args)) = spec.argv.split_first() else {
        return Err("the container has no command".into());
    };
    let log =
        std::fs::File::create(spec.log).map_err(|e| format!("{}: {e}", spec.log.display()))?;
    let log2 = log.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .env_clear()
        .env(
            "PATH",
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
        )
        .env("HOME", &spec.home)
        .env("HOSTNAME", spec.hostname)
        .env("LANG", "C.UTF-8")
        .envs(spec.env)
        .current_dir(&spec.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log2))
        .process_group(0)
        .kill_on_drop(false);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {program:?}: {e}"))?;
    let pgid = child.id().and_then(|id| i32::try_from(id).ok());
    tokio::spawn(async move {
        let code = match child.wait().await {
            Ok(status) => status.code().unwrap_or_else(|| {
                use std::os::unix::process::ExitStatusExt;
                128 + status.signal().unwrap_or(9)
            }),
            Err(_) => 255,
        };
        record_exit(&exit, code);
    });
    Ok(pgid)
}

/// Signal a whole process group.
pub(crate) fn kill_group(pgid: i32, signal: Signal) {
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), signal);
}

/// SIGTERM the group now and SIGKILL it after `grace` unless it ended.
pub(crate) fn stop(pgid: i32, grace: Duration, exit: ExitCell) {
    kill_group(pgid, Signal::SIGTERM);
    tokio::spawn(async move {
        tokio::time::sleep(grace).await;
        if exit_code(&exit).is_none() {
            kill_group(pgid, Signal::SIGKILL);
        }
    });
}
