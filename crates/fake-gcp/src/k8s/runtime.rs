//! The fake container runtime: a container's command runs as a local
//! process in its own process group, its output (stdout and stderr) goes to
//! a log file, and its exit code is recorded when it ends. Stopping sends
//! SIGTERM to the group, then SIGKILL after the grace period.
//!
//! As a CRI runtime does, the two streams are read from their own pipes and
//! written to the log a whole line at a time (a line longer than
//! [`MAX_LOG_LINE`] in pieces of that size), so a line of one stream is never
//! cut by output of the other; the exit is recorded only once both streams
//! are drained, and the end of the main process ends every process left in
//! its group, as the end of a container's init process ends the container.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};

/// The longest piece of a line written to the log at once (containerd's
/// maximum CRI log entry).
pub(crate) const MAX_LOG_LINE: usize = 16 * 1024;

/// How long the streams may stay open after the main process ended and its
/// group was killed (a process that left the group keeps them open).
const DRAIN_GRACE: Duration = Duration::from_secs(2);

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
    /// A directory put first on `PATH`: the image's own programs.
    pub(crate) bin: Option<&'a Path>,
}

/// Start the process in its own process group; a task records its exit in
/// `exit`. Returns the process group id.
pub(crate) fn start(spec: &ProcessSpec<'_>, exit: ExitCell) -> Result<Option<i32>, String> {
    let Some((program, args)) = spec.argv.split_first() else {
        return Err("the container has no command".into());
    };
    let log =
        std::fs::File::create(spec.log).map_err(|e| format!("{}: {e}", spec.log.display()))?;
    let log = Arc::new(Mutex::new(log));
    let mut cmd = tokio::process::Command::new(program);
    let host_path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
    let path = match spec.bin {
        Some(bin) => format!("{}:{host_path}", bin.display()),
        None => host_path,
    };
    cmd.args(args)
        .env_clear()
        .env("PATH", path)
        .env("HOME", &spec.home)
        .env("HOSTNAME", spec.hostname)
        .env("LANG", "C.UTF-8")
        .envs(spec.env)
        .current_dir(&spec.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(false);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {program:?}: {e}"))?;
    let pgid = child.id().and_then(|id| i32::try_from(id).ok());
    let streams = [
        child
            .stdout
            .take()
            .map(|s| tokio::spawn(copy_lines(s, log.clone()))),
        child
            .stderr
            .take()
            .map(|s| tokio::spawn(copy_lines(s, log))),
    ];
    tokio::spawn(async move {
        let code = match child.wait().await {
            Ok(status) => status.code().unwrap_or_else(|| {
                use std::os::unix::process::ExitStatusExt;
                128 + status.signal().unwrap_or(9)
            }),
            Err(_) => 255,
        };
        if let Some(pgid) = pgid {
            kill_group(pgid, Signal::SIGKILL);
        }
        for stream in streams.into_iter().flatten() {
            let _ = tokio::time::timeout(DRAIN_GRACE, stream).await;
        }
        record_exit(&exit, code);
    });
    Ok(pgid)
}

/// Copy one output stream to the log a line at a time.
async fn copy_lines(stream: impl AsyncRead + Unpin, log: Arc<Mutex<std::fs::File>>) {
    use std::io::Write;
    let mut reader = BufReader::with_capacity(MAX_LOG_LINE, stream);
    let mut line = Vec::with_capacity(MAX_LOG_LINE);
    loop {
        line.clear();
        // Read up to a newline, but never more than one entry's worth.
        let mut limited = (&mut reader).take(MAX_LOG_LINE as u64);
        match limited.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let mut file = log.lock().unwrap_or_else(|p| p.into_inner());
                if file.write_all(&line).is_err() {
                    return;
                }
            }
        }
    }
}

/// Signal a whole process group.
pub(crate) fn kill_group(pgid: i32, signal: Signal) {
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), signal);
}

/// SIGTERM's bit in a `/proc/PID/status` signal mask (`SigCgt`,
/// `SigIgn`): bit `signal - 1`.
const SIGTERM_BIT: u64 = 1 << (15 - 1);

/// What a process does with SIGTERM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Disposition {
    /// It installed a handler (`SigCgt`).
    Caught,
    /// It ignores it (`SigIgn`).
    Ignored,
    /// The default action (to end the process).
    Default,
}

/// How process `pid` disposes of SIGTERM, from its `/proc/PID/status`;
/// `None` when that cannot be read (the process is gone, or no `/proc`).
pub(crate) fn sigterm_disposition(pid: i32) -> Option<Disposition> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let mask = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
    };
    let (caught, ignored) = (mask("SigCgt:")?, mask("SigIgn:")?);
    Some(if caught & SIGTERM_BIT != 0 {
        Disposition::Caught
    } else if ignored & SIGTERM_BIT != 0 {
        Disposition::Ignored
    } else {
        Disposition::Default
    })
}

/// Stop a container as its runtime does on a pod's deletion: SIGTERM to
/// its main process only, then SIGKILL to everything in it after `grace`
/// unless it ended. The main process is the container's PID 1, to which
/// the kernel delivers a signal whose action is the default (SIGTERM's:
/// to end) only if the process installed a handler: one that catches
/// SIGTERM gets it (an ignored one stays ignored); one that does not (a
/// bare `sleep`, a Python program without a handler) goes on, and holds
/// the whole grace period until SIGKILL. Here the process is no PID 1, so
/// the signal is sent only where the kernel would deliver it: when
/// `/proc` says the process catches SIGTERM (or cannot be read).
pub(crate) fn stop(pgid: i32, grace: Duration, exit: ExitCell) {
    // The main process leads its group: its pid is the group's id.
    match sigterm_disposition(pgid) {
        Some(Disposition::Caught) | None => {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pgid), Signal::SIGTERM);
        }
        Some(Disposition::Ignored | Disposition::Default) => {}
    }
    tokio::spawn(async move {
        tokio::time::sleep(grace).await;
        if exit_code(&exit).is_none() {
            kill_group(pgid, Signal::SIGKILL);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn run(script: &str) -> (String, i32) {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let argv = ["sh".to_owned(), "-c".to_owned(), script.to_owned()];
        let exit = ExitCell::default();
        start(
            &ProcessSpec {
                argv: &argv,
                env: &BTreeMap::new(),
                home: dir.path().to_owned(),
                hostname: "pod",
                cwd: dir.path().to_owned(),
                log: &log,
                bin: None,
            },
            exit.clone(),
        )
        .unwrap();
        let started = std::time::Instant::now();
        let code = loop {
            if let Some(code) = exit_code(&exit) {
                break code;
            }
            assert!(started.elapsed() < Duration::from_secs(20), "never ended");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        (std::fs::read_to_string(&log).unwrap(), code)
    }

    #[tokio::test]
    async fn a_line_of_one_stream_is_never_cut_by_the_other() {
        let (log, code) = run(
            "printf 'out-'; sleep 0.2; printf 'err\\n' >&2; sleep 0.2; printf 'line\\n'; exit 3",
        )
        .await;
        assert_eq!(code, 3);
        let mut lines: Vec<&str> = log.lines().collect();
        lines.sort_unstable();
        assert_eq!(lines, ["err", "out-line"], "{log:?}");
    }

    #[tokio::test]
    async fn a_long_line_is_written_in_entries_and_a_last_partial_line_is_kept() {
        let (log, _) = run("head -c 40000 /dev/zero | tr '\\0' x; printf '\\nend'").await;
        assert_eq!(log.len(), 40000 + 4);
        assert!(log.ends_with("\nend"));
    }

    /// Start `argv`; its process group id and exit cell.
    fn spawn(argv: &[&str], dir: &Path) -> (i32, ExitCell) {
        let argv: Vec<String> = argv.iter().map(|a| (*a).to_owned()).collect();
        let exit = ExitCell::default();
        let pgid = start(
            &ProcessSpec {
                argv: &argv,
                env: &BTreeMap::new(),
                home: dir.to_owned(),
                hostname: "pod",
                cwd: dir.to_owned(),
                log: &dir.join("log"),
                bin: None,
            },
            exit.clone(),
        )
        .unwrap()
        .unwrap();
        (pgid, exit)
    }

    /// Stop a process `grace` long; how long it took and its exit code.
    async fn stopped(pgid: i32, exit: &ExitCell, grace: Duration) -> (Duration, i32) {
        let started = std::time::Instant::now();
        stop(pgid, grace, exit.clone());
        loop {
            if let Some(code) = exit_code(exit) {
                return (started.elapsed(), code);
            }
            assert!(started.elapsed() < Duration::from_secs(20), "never ended");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// As a container's PID 1: a process with no SIGTERM handler (`sleep`)
    /// does not get the SIGTERM and holds the whole grace period until
    /// SIGKILL; one that catches SIGTERM (a Python handler) exits on it at
    /// once.
    #[tokio::test]
    async fn sigterm_reaches_the_main_process_only_if_it_catches_it() {
        let dir = tempfile::tempdir().unwrap();
        let grace = Duration::from_millis(1500);

        let (pgid, exit) = spawn(&["sleep", "100"], dir.path());
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(sigterm_disposition(pgid), Some(Disposition::Default));
        let (took, code) = stopped(pgid, &exit, grace).await;
        assert!(
            took >= grace,
            "sleep ended after {took:?}, before its grace"
        );
        assert_eq!(code, 128 + 9, "killed");

        let handler = "import signal, sys, time\n\
                       signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n\
                       print('ready', flush=True)\n\
                       time.sleep(100)\n";
        let (pgid, exit) = spawn(&["python3", "-c", handler], dir.path());
        let ready = std::time::Instant::now();
        while !std::fs::read_to_string(dir.path().join("log"))
            .unwrap_or_default()
            .contains("ready")
        {
            assert!(
                ready.elapsed() < Duration::from_secs(20),
                "python never ready"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(sigterm_disposition(pgid), Some(Disposition::Caught));
        let (took, code) = stopped(pgid, &exit, grace).await;
        assert!(took < grace, "the handler did not run: {took:?}");
        assert_eq!(code, 0);

        // An ignored SIGTERM stays ignored: the grace period is held.
        let (pgid, exit) = spawn(&["sh", "-c", "trap '' TERM; sleep 100 & wait"], dir.path());
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(sigterm_disposition(pgid), Some(Disposition::Ignored));
        let (took, _) = stopped(pgid, &exit, grace).await;
        assert!(took >= grace, "{took:?}");
    }

    #[tokio::test]
    async fn the_end_of_the_main_process_ends_the_container() {
        // The background sleep holds the output open; the container ends anyway.
        let started = std::time::Instant::now();
        let (log, code) = run("sleep 60 & echo started").await;
        assert_eq!((log.as_str(), code), ("started\n", 0));
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
