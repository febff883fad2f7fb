//! `kinetic run` and `kinetic jobs` through the real binary, on the local
//! backend with its state and store in a temporary directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const WORK_PY: &str = r#"
import os
import time


def square(x):
    print("squaring", x, flush=True)
    return x * x


def greet(name, punctuation="!"):
    return "hello " + name + punctuation


def fail():
    raise RuntimeError("deliberate failure")


def secret_length(name):
    return len(os.environ[name])


def nap(seconds):
    time.sleep(seconds)
    return seconds


def output_dir():
    return os.environ["KINETIC_OUTPUT_DIR"]


def read_text(path):
    with open(path) as f:
        return f.read()


def shipped(path):
    return os.path.exists(path)


def clears_screen():
    print("before\x1b[2Jafter", flush=True)
    return 1


class Scaler:
    @staticmethod
    def double(x):
        return 2 * x
"#;

struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("home/project");
        std::fs::create_dir_all(project.join("data")).unwrap();
        std::fs::write(
            project.join("pyproject.toml"),
            "[project]\nname = \"p\"\ndependencies = []\n",
        )
        .unwrap();
        std::fs::write(project.join("work.py"), WORK_PY).unwrap();
        std::fs::write(project.join("data/words.txt"), "one two three").unwrap();
        Self { dir }
    }

    fn project(&self) -> PathBuf {
        self.dir.path().join("home/project")
    }

    fn kinetic(&self, args: &[&str]) -> Output {
        self.kinetic_env(args, &[])
    }

    fn kinetic_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kinetic"));
        cmd.args(args)
            .current_dir(self.project())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.dir.path().join("home"))
            .env("KINETIC_LOCAL_ROOT", self.dir.path().join("local"))
            .env(
                "KINETIC_PROFILES_FILE",
                self.dir.path().join("profiles.json"),
            );
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn job_status(sb: &Sandbox, job: &str) -> String {
    stdout(&sb.kinetic(&["jobs", "status", job]))
}

fn wait_for(sb: &Sandbox, job: &str, want: &str) -> String {
    for _ in 0..200 {
        let s = job_status(sb, job);
        if s.contains(want) {
            return s;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    job_status(sb, job)
}

#[test]
fn run_prints_the_value_and_streams_logs_to_stderr() {
    let sb = Sandbox::new();
    let o = sb.kinetic(&["run", "work:square", "--arg", "7"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "49\n");
    assert!(stderr(&o).contains("squaring 7"), "{}", stderr(&o));
    assert!(
        !stderr(&o).contains("[kinetic]"),
        "runner lines are hidden without -v: {}",
        stderr(&o)
    );

    let o = sb.kinetic(&[
        "run",
        "work.py:greet",
        "--arg",
        "\"ada\"",
        "--kwargs",
        "{\"punctuation\": \"?\"}",
    ]);
    assert_eq!(stdout(&o), "hello ada?\n");
    let o = sb.kinetic(&["--json", "run", "work.py:greet", "--arg", "\"ada\""]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON");
    assert_eq!(v["value"], "hello ada!", "{v}");
    assert!(v["job_id"].as_str().unwrap().starts_with("job-"), "{v}");
    let o = sb.kinetic(&["run", "-v", "work:square", "--arg", "2"]);
    assert!(stderr(&o).contains("[kinetic] startup"), "{}", stderr(&o));
}

#[test]
fn a_dotted_function_name_reaches_the_nested_attribute() {
    // Issue 25.9: `work.py:C.m` was refused though the runner protocol
    // allows dotted names.
    let sb = Sandbox::new();
    for entry in ["work.py:Scaler.double", "work:Scaler.double"] {
        let o = sb.kinetic(&["run", entry, "--arg", "21"]);
        assert!(o.status.success(), "{entry}: {}", stderr(&o));
        assert_eq!(stdout(&o), "42\n", "{entry}");
    }
    let o = sb.kinetic(&["run", "work.py:Scaler.", "--arg", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = sb.kinetic(&["run", "work.py:Nothing.double", "--arg", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no function 'Nothing.double'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn data_arguments_and_commands() {
    let sb = Sandbox::new();
    let o = sb.kinetic(&[
        "run",
        "--",
        "python3",
        "-c",
        "import os,sys; print('in', os.path.basename(os.getcwd()) or '/', file=sys.stderr)",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "", "a command's null value prints nothing");
    let o = sb.kinetic(&["--json", "run", "--", "python3", "-c", "pass"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON");
    assert_eq!(v["value"], serde_json::Value::Null, "{v}");
    let o = sb.kinetic(&["run", "--", "python3", "-c", "import sys; sys.exit(4)"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("CommandFailed"), "{}", stderr(&o));
    let o = sb.kinetic(&[
        "run",
        "--",
        "python3",
        "-c",
        "import pathlib; print(len(pathlib.Path('work.py').read_text()))",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn settings_reach_the_job_through_the_cli() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.project().join(".venv")).unwrap();
    std::fs::write(sb.project().join(".venv/marker"), "x").unwrap();
    // KINETIC_OUTPUT_DIR becomes the job's output directory.
    let o = sb.kinetic_env(
        &["run", "work:output_dir"],
        &[("KINETIC_OUTPUT_DIR", "/tmp/kinetic-out-x")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "/tmp/kinetic-out-x\n");
    // `~` in a data path is the HOME the command was given.
    let o = sb.kinetic(&[
        "run",
        "work:read_text",
        "--arg",
        "data:~/project/data/words.txt",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "one two three\n");
    // Default excludes apply unless KINETIC_NO_DEFAULT_EXCLUDES=1.
    let shipped = |env: &[(&str, &str)]| {
        let o = sb.kinetic_env(&["run", "work:shipped", "--arg", "\".venv/marker\""], env);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    assert_eq!(shipped(&[]), "false\n");
    assert_eq!(shipped(&[("KINETIC_NO_DEFAULT_EXCLUDES", "1")]), "true\n");
    // KINETIC_PACKAGE_ROOT replaces detection; one outside the code is refused.
    let o = sb.kinetic_env(
        &["run", "work:square", "--arg", "3"],
        &[("KINETIC_PACKAGE_ROOT", "/nonexistent-root")],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("/nonexistent-root"), "{}", stderr(&o));
    // An invalid setting names the variable and what is accepted (exit 2).
    let o = sb.kinetic_env(
        &["run", "work:square", "--arg", "3"],
        &[("KINETIC_LOCAL_MAX_CONCURRENT", "lots")],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "error: KINETIC_LOCAL_MAX_CONCURRENT=\"lots\" is not accepted: expected a positive integer, at most 1024\n"
    );
}

#[test]
fn failures_exit_one_with_the_remote_traceback() {
    let sb = Sandbox::new();
    let o = sb.kinetic(&["run", "work:fail"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    // The streamed output carried the user's traceback: it is not printed
    // again, and no runner frame is in it.
    assert_eq!(err.matches("in fail").count(), 1, "{err}");
    assert!(!err.contains("--- remote traceback ---"), "{err}");
    assert!(!err.contains("kinetic_runner"), "{err}");
    // Without the streamed output, it is printed once with the error.
    let o = sb.kinetic(&["run", "--no-logs", "work:fail"]);
    let quiet = stderr(&o);
    assert_eq!(quiet.matches("in fail").count(), 1, "{quiet}");
    assert!(quiet.contains("--- remote traceback ---"), "{quiet}");
    assert!(
        err.contains("error: job job-") && err.contains("RuntimeError: deliberate failure"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_input_exits_two_with_one_line() {
    let sb = Sandbox::new();
    let cases: &[(&[&str], &str)] = &[
        (&["run", "work:square", "--arg", "seven"], "is not JSON"),
        (&["run", "work"], "expected 'module.path:function'"),
        (&["run", "work:square", "--accelerator", "h9000"], "h9000"),
        (
            &["run", "work:square", "--accelerator", "v5litepod-4"],
            "TPU",
        ),
        (
            &["run", "work:square", "--backend", "mars"],
            "unknown backend 'mars'",
        ),
        (
            &["run", "work:square", "--env", "NOT_SET_ANYWHERE"],
            "NOT_SET_ANYWHERE",
        ),
        (&["run", "work:square", "--volume", "data"], "MOUNT=PATH"),
        (
            &["run", "work:square", "--arg", "data:missing-dir"],
            "missing-dir",
        ),
        (&["run"], "nothing to run"),
        (
            &["run", "work:square", "--container-image", "two words"],
            "--container-image",
        ),
        (&["jobs", "status", "job-nothex!"], "not a job id"),
    ];
    for (args, needle) in cases {
        let o = sb.kinetic(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{args:?}: one line, got {err}"
        );
    }
}

#[test]
fn a_jobs_control_sequences_are_escaped_on_a_terminal_only() {
    // Issue 25.10: a job's `\x1b[2J` in its stored log cleared the screen
    // of whoever ran `kinetic jobs logs`.
    let sb = Sandbox::new();
    let o = sb.kinetic(&["run", "--detach", "work:clears_screen"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let job = stdout(&o).trim().to_owned();
    wait_for(&sb, &job, "SUCCEEDED");
    // To a pipe: the bytes the job wrote.
    let piped = stdout(&sb.kinetic(&["jobs", "logs", &job]));
    assert!(piped.contains("before\x1b[2Jafter"), "{piped:?}");
    // To a terminal (script(1) gives the command one): escaped.
    let command = format!("{} jobs logs {job}", env!("CARGO_BIN_EXE_kinetic"));
    let o = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(sb.project())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", sb.dir.path().join("home"))
        .env("KINETIC_LOCAL_ROOT", sb.dir.path().join("local"))
        .env("KINETIC_PROFILES_FILE", sb.dir.path().join("profiles.json"))
        .output()
        .expect("script(1), from util-linux");
    let shown = stdout(&o);
    assert!(shown.contains("before\\x1b[2Jafter"), "{shown:?}");
    assert!(!shown.contains("\x1b[2J"), "{shown:?}");
}

#[test]
fn detach_then_follow_the_job_from_other_processes() {
    let sb = Sandbox::new();
    let o = sb.kinetic(&["run", "--detach", "work:square", "--arg", "9"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let job = stdout(&o).trim().to_owned();
    assert!(job.starts_with("job-") && job.len() == 12, "{job}");
    wait_for(&sb, &job, "SUCCEEDED");
    let list = stdout(&sb.kinetic(&["jobs", "list"]));
    assert!(list.contains(&job) && list.contains("square"), "{list}");
    let logs = stdout(&sb.kinetic(&["jobs", "logs", &job]));
    assert!(logs.contains("squaring 9"), "{logs}");
    let tail = stdout(&sb.kinetic(&["jobs", "tail", &job, "-n", "1"]));
    assert_eq!(tail.lines().count(), 1, "{tail}");
    let o = sb.kinetic(&["jobs", "result", &job, "--no-cleanup"]);
    assert_eq!(stdout(&o), "81\n", "{}", stderr(&o));
    let o = sb.kinetic(&["--json", "jobs", "status", &job]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["status"], "SUCCEEDED");
    let o = sb.kinetic(&["jobs", "cleanup", &job]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = sb.kinetic(&["jobs", "status", &job]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "a cleaned-up job is gone: {}",
        stderr(&o)
    );
}

#[test]
fn cancel_a_detached_sleeper_and_secrets_stay_out_of_the_store() {
    let sb = Sandbox::new();
    let o = sb.kinetic(&["run", "--detach", "work:nap", "--arg", "600"]);
    let job = stdout(&o).trim().to_owned();
    wait_for(&sb, &job, "RUNNING");
    let o = sb.kinetic(&["jobs", "cancel", &job]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = wait_for(&sb, &job, "FAILED");
    assert!(s.contains("FAILED (cancelled)"), "{s}");

    let sentinel = "cli-sentinel-0451";
    let o = sb.kinetic_env(
        &[
            "run",
            "--no-cleanup",
            "work:secret_length",
            "--arg",
            "\"API_TOKEN\"",
            "--secret",
            "API_TOKEN",
        ],
        &[("API_TOKEN", sentinel)],
    );
    assert_eq!(
        stdout(&o),
        format!("{}\n", sentinel.len()),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains(sentinel));
    assert_no_file_contains(&sb.dir.path().join("local"), sentinel.as_bytes());
}

fn assert_no_file_contains(dir: &Path, needle: &[u8]) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            assert_no_file_contains(&path, needle);
        } else if let Ok(bytes) = std::fs::read(&path) {
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle),
                "found in {}",
                path.display()
            );
        }
    }
}
