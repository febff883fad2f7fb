//! The local backend and `kinetic run`/`jobs` under conditions that broke
//! them, through the real binary: run deadlines, the job's environment,
//! `--env '*'` from a shell, a killed supervisor, a store no job can read,
//! Ctrl-C, entries that cannot resolve, and the machine-readable outputs.

mod sandbox;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use sandbox::{Sandbox, output_within, stderr, stdout, wait_within};

const WORK_PY: &str = r#"
import os
import subprocess
import sys
import time


def square(x):
    print("squaring", x, flush=True)
    return x * x


def nap(seconds):
    time.sleep(seconds)
    return seconds


def nap_with_child(seconds, pid_file):
    child = subprocess.Popen(["sleep", str(seconds)])
    with open(pid_file, "w") as f:
        f.write(str(child.pid))
    time.sleep(seconds)
    return seconds


def env_names():
    return sorted(os.environ)


def env_value(name):
    return os.environ.get(name)


def fail():
    raise RuntimeError("deliberate failure")


def chatter(n):
    for i in range(n):
        print("chatter", i, flush=True)
    print("token", os.environ["CHATTER_TOKEN"], flush=True)
    return n
"#;

trait LocalJobs {
    fn detach(&self, args: &[&str]) -> String;
    fn status(&self, job: &str) -> String;
    fn wait_ended(&self, job: &str) -> String;
    fn job_dir(&self, job: &str) -> PathBuf;
}

impl LocalJobs for Sandbox {
    fn detach(&self, args: &[&str]) -> String {
        let mut all = vec!["run", "--detach"];
        all.extend_from_slice(args);
        let o = self.kinetic(&all);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o).trim().to_owned()
    }

    fn status(&self, job: &str) -> String {
        stdout(&self.kinetic(&["jobs", "status", job]))
    }

    /// Poll the job's status until it is no longer PENDING or RUNNING.
    fn wait_ended(&self, job: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let s = self.status(job);
            if !s.contains("PENDING") && !s.contains("RUNNING") {
                return s;
            }
            assert!(Instant::now() < deadline, "{job} never ended: {s}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn job_dir(&self, job: &str) -> PathBuf {
        self.path("local/jobs").join(job)
    }
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_str(&stdout(o))
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", stdout(o), stderr(o)))
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {sig} {pid}");
}

fn process_alive(pid: u32) -> bool {
    // A zombie has exited; only a live process counts.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

fn python3() -> PathBuf {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 is needed by these tests");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

#[test]
fn a_run_deadline_kills_the_job_and_its_children_and_says_so() {
    let sb = Sandbox::new(WORK_PY);
    let pid_file = sb.path("child.pid");
    let pid_arg = format!("\"{}\"", pid_file.display());
    let started = Instant::now();
    let o = sb.kinetic(&[
        "run",
        "--no-cleanup",
        "--run-deadline",
        "2",
        "work:nap_with_child",
        "--arg",
        "60",
        "--arg",
        &pid_arg,
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("running deadline exceeded"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "the 60 s job was not stopped"
    );
    // The job's own child went with it: the whole group was killed.
    let child: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let gone_by = Instant::now() + Duration::from_secs(10);
    while process_alive(child) {
        assert!(Instant::now() < gone_by, "the job's child {child} lives on");
        std::thread::sleep(Duration::from_millis(50));
    }
    let job = err
        .split_whitespace()
        .find(|w| w.starts_with("job-"))
        .unwrap()
        .trim_end_matches(|c: char| !c.is_ascii_hexdigit())
        .to_owned();
    let v = json(&sb.kinetic(&["--json", "jobs", "status", &job]));
    assert_eq!(v["status"], "FAILED", "{v}");
    assert!(v["reason"].to_string().contains("deadline_exceeded"), "{v}");
}

#[test]
fn a_job_gets_a_pods_environment_not_the_clients() {
    let sb = Sandbox::new(WORK_PY);
    let env = [("LEAKY_SETTING", "from-the-client")];
    let o = sb.kinetic_env(&["--json", "run", "work:env_names"], &env);
    let v = json(&o);
    let names: Vec<&str> = v["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(!names.contains(&"LEAKY_SETTING"), "{names:?}");
    assert!(!names.contains(&"KINETIC_LOCAL_ROOT"), "{names:?}");
    for pod in ["PATH", "HOME", "JOB_ID", "KERAS_BACKEND", "JAX_PLATFORMS"] {
        assert!(names.contains(&pod), "{pod} missing: {names:?}");
    }
    // Captured, it arrives.
    let o = sb.kinetic_env(
        &[
            "run",
            "--env",
            "LEAKY_SETTING",
            "work:env_value",
            "--arg",
            "\"LEAKY_SETTING\"",
        ],
        &env,
    );
    assert_eq!(stdout(&o), "from-the-client\n", "{}", stderr(&o));
}

#[test]
fn env_star_works_from_a_shell_through_an_interpreter_shim() {
    let sb = Sandbox::new(WORK_PY);
    // A `python3` that, like pyenv's shims, is a script that starts the
    // real interpreter without the shell's `_`.
    let bin = sb.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let shim = bin.join("python3");
    std::fs::write(
        &shim,
        format!("#!/bin/sh\nexec env -u _ {} \"$@\"\n", python3().display()),
    )
    .unwrap();
    let mut perms = std::fs::metadata(&shim).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&shim, perms).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let kinetic = env!("CARGO_BIN_EXE_kinetic");
    let cmd = sb.command(
        &[],
        &[("PATH", &path), ("MY_FLAG", "on"), ("KINETIC_BIN", kinetic)],
    );
    // bash exports `_`, `SHLVL`, `PWD` and `OLDPWD` to what it starts.
    let mut bash = Command::new("bash");
    bash.args([
        "-c",
        r#"cd .. && cd project && "$KINETIC_BIN" run --env '*' work:env_value --arg '"MY_FLAG"'"#,
    ]);
    bash.current_dir(cmd.get_current_dir().unwrap());
    bash.env_clear();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            bash.env(k, v);
        }
    }
    let o = output_within(bash, Duration::from_secs(120));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "on\n", "{}", stderr(&o));
}

#[test]
fn a_killed_supervisor_does_not_turn_a_success_into_a_failure() {
    let sb = Sandbox::new(WORK_PY);
    let job = sb.detach(&["work:nap", "--arg", "2"]);
    let pid_file = sb.job_dir(&job).join("pid");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !sb.job_dir(&job).join("started").exists() {
        assert!(Instant::now() < deadline, "{job} never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let supervisor: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    signal(supervisor, "-KILL");
    // The runner goes on without its supervisor: still RUNNING, then done.
    let s = sb.status(&job);
    assert!(s.contains("RUNNING"), "{s}");
    let s = sb.wait_ended(&job);
    assert!(s.contains("SUCCEEDED"), "{s}");
    let o = sb.kinetic(&["jobs", "result", &job]);
    assert_eq!(stdout(&o), "2\n", "{}", stderr(&o));
}

#[test]
fn an_in_process_store_is_refused_up_front() {
    let sb = Sandbox::new(WORK_PY);
    let o = sb.kinetic_env(
        &["run", "work:square", "--arg", "2"],
        &[("KINETIC_STORE_URL", "memory://")],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error: KINETIC_STORE_URL=memory://: ") && err.contains("file:///"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let jobs = sb.path("local/jobs");
    assert!(
        !jobs.exists() || std::fs::read_dir(&jobs).unwrap().next().is_none(),
        "a job was started"
    );
}

#[test]
fn ctrl_c_names_the_job_and_how_to_reattach() {
    let sb = Sandbox::new(WORK_PY);
    let mut child = sb
        .command(&["run", "work:nap", "--arg", "30"], &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The id is on stderr at submit, though stderr is no terminal.
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("submitted job-"), "{first}");
    let job = first.split_whitespace().nth(1).unwrap().to_owned();
    signal(child.id(), "-INT");
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let o = wait_within(child, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(130), "{rest:?}");
    let last = rest.last().cloned().unwrap_or_default();
    assert!(
        last.contains(&format!("`kinetic jobs result {job}`")) && last.contains("keeps running"),
        "{rest:?}"
    );
    let s = sb.status(&job);
    assert!(
        s.contains("RUNNING") || s.contains("PENDING"),
        "the job was stopped: {s}"
    );
    let o = sb.kinetic(&["jobs", "cancel", &job]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn an_entry_that_cannot_resolve_is_refused_before_upload() {
    let sb = Sandbox::new(WORK_PY);
    let o = sb.kinetic(&["run", "work:sqare", "--arg", "2"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("work.py has no function 'sqare'") && err.contains("square"),
        "{err}"
    );
    std::fs::write(sb.path("home/project/broken.py"), "def f(:\n    pass\n").unwrap();
    let o = sb.kinetic(&["run", "broken:f"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("SyntaxError") && err.contains("line 1"),
        "{err}"
    );
    // Nothing was uploaded or submitted.
    assert!(!sb.path("local/store").exists(), "something was uploaded");
    assert!(
        !sb.path("local/jobs").exists() || sb.kinetic(&["jobs", "list"]).stdout == b"no jobs\n"
    );
}

#[test]
fn machine_readable_runs_lists_and_logs() {
    let sb = Sandbox::new(WORK_PY);
    // run --json: the job id with the value, or a JSON error object.
    let v = json(&sb.kinetic(&["--json", "run", "work:square", "--arg", "3", "--no-cleanup"]));
    assert_eq!(v["value"], 9, "{v}");
    let job = v["job_id"].as_str().unwrap().to_owned();
    let o = sb.kinetic(&["--json", "run", "work:fail"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v = json(&o);
    assert!(v["job_id"].as_str().unwrap().starts_with("job-"), "{v}");
    assert_eq!(v["error"]["remote"]["type"], "RuntimeError", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("deliberate failure"),
        "{v}"
    );

    // jobs list: a status column, and a status key in JSON.
    let text = stdout(&sb.kinetic(&["jobs", "list"]));
    let header = text.lines().next().unwrap();
    assert!(header.contains("STATUS"), "{text}");
    let row = text.lines().find(|l| l.starts_with(&job)).unwrap();
    assert!(row.contains("SUCCEEDED"), "{text}");
    let v = json(&sb.kinetic(&["--json", "jobs", "list"]));
    let entry = v
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["job_id"] == job.as_str())
        .unwrap();
    assert_eq!(entry["status"], "SUCCEEDED", "{v}");

    // jobs logs -f --json: JSON Lines.
    let o = sb.kinetic(&["--json", "jobs", "logs", "-f", &job]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["line"] == "squaring 3" && l["job_id"] == job.as_str()),
        "{lines:?}"
    );
}

#[test]
fn errors_blame_the_setting_or_flag_at_fault_and_exit_two() {
    let sb = Sandbox::new(WORK_PY);
    let o = sb.kinetic_env(
        &["jobs", "list"],
        &[("KINETIC_LOCAL_ROOT", "relative/root")],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("KINETIC_LOCAL_ROOT") && !err.contains("KINETIC_STORE_URL"),
        "{err}"
    );

    let file = sb.path("a-file");
    std::fs::write(&file, "").unwrap();
    let o = sb.kinetic_env(
        &["jobs", "list"],
        &[("KINETIC_LOCAL_ROOT", file.to_str().unwrap())],
    );
    let err = stderr(&o);
    assert!(
        err.contains("KINETIC_LOCAL_ROOT") && !err.contains("KINETIC_STORE_URL"),
        "{err}"
    );

    let o = sb.kinetic(&["build-image", "--repo", "example.com/r", "--tag", "bad tag"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--tag \"bad tag\" is not accepted"), "{err}");
}

/// Every `kinetic …` command that a message of the program points to is
/// one the binary has.
#[test]
fn messages_point_only_to_commands_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut commands = std::collections::BTreeSet::new();
    let mut stack = vec![root.join("crates"), root.join("runner")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().map(Result::unwrap) {
            let path = entry.path();
            if path.is_dir() {
                if !path.ends_with("tests") && !path.ends_with("target") {
                    stack.push(path);
                }
                continue;
            }
            if !matches!(path.extension().and_then(|e| e.to_str()), Some("rs" | "py")) {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (i, _) in text.match_indices("`kinetic ") {
                let words: Vec<String> = text[i + 9..]
                    .split(|c: char| !(c.is_ascii_lowercase() || c == '-' || c == ' '))
                    .next()
                    .unwrap_or_default()
                    .split(' ')
                    .take(2)
                    .filter(|w| !w.is_empty() && !w.starts_with('-'))
                    .map(str::to_owned)
                    .collect();
                if !words.is_empty() {
                    commands.insert(words);
                }
            }
        }
    }
    assert!(commands.len() > 10, "{commands:?}");
    let sb = Sandbox::new(WORK_PY);
    for words in &commands {
        let mut args: Vec<&str> = words.iter().map(String::as_str).collect();
        // A second word may be an argument (`kinetic run work:f`): only a
        // command with subcommands must know it.
        let o = sb.kinetic(&[args[0], "--help"]);
        assert!(o.status.success(), "`kinetic {}` does not exist", args[0]);
        let has_subcommands = stdout(&o).contains("Commands:");
        if args.len() == 2 && has_subcommands {
            args.push("--help");
            let o = sb.kinetic(&args);
            assert!(
                o.status.success(),
                "`kinetic {} {}` does not exist: {}",
                args[0],
                args[1],
                stderr(&o)
            );
        }
    }
}

/// The backend copies the job's output to the store, in the runner's chunk
/// layout, once the job ended; once the job's local directory is cleaned
/// up, `jobs logs`, `tail` and `logs -f` read that copy (redacted), and no
/// whole-log archive of the old layout is written beside it.
#[test]
fn logs_outlive_the_job_directory() {
    let sb = Sandbox::new(WORK_PY);
    let secret = "chatter-s3cret-41d7";
    let o = sb.kinetic_env(
        &[
            "run",
            "--detach",
            "work:chatter",
            "--arg",
            "3",
            "--secret",
            "CHATTER_TOKEN",
        ],
        &[("CHATTER_TOKEN", secret)],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let job = stdout(&o).trim().to_owned();
    let ended = sb.wait_ended(&job);
    assert!(ended.contains("SUCCEEDED"), "{ended}");
    let o = sb.kinetic(&["jobs", "cleanup", "--keep-store", &job]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!sb.job_dir(&job).exists());

    let chunks = sb.path("local/store").join(&job).join("logs/host-0");
    let mut names: Vec<String> = std::fs::read_dir(&chunks)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.last().unwrap().ends_with(".end"), "{names:?}");
    assert!(
        !sb.path("local/store")
            .join(&job)
            .join("logs/output.log")
            .exists()
    );
    for name in &names {
        let bytes = std::fs::read(chunks.join(name)).unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains(secret), "{name}");
    }

    let logs = stdout(&sb.kinetic(&["jobs", "logs", &job]));
    for line in [
        "chatter 0",
        "chatter 2",
        "token <redacted>",
        "[kinetic] result upload: wrote",
    ] {
        assert!(logs.contains(line), "{line:?} missing from {logs}");
    }
    assert!(!logs.contains(secret));
    let tail = stdout(&sb.kinetic(&["jobs", "tail", "-n", "1", &job]));
    assert_eq!(tail.trim_end(), logs.lines().last().unwrap(), "{logs}");
    let o = output_within(
        sb.command(&["jobs", "logs", "-f", &job], &[]),
        Duration::from_secs(60),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), logs);
}

/// `data:hf://…` reaches the runner, which loads the dataset on the host:
/// with no hub reachable (and `datasets` absent or offline) the job fails
/// in its data phase naming the dataset; bad URIs and options are refused
/// before anything is submitted.
#[test]
fn hugging_face_data_reaches_the_runners_data_phase() {
    let sb = Sandbox::new(WORK_PY);
    let o = sb.kinetic_env(
        &[
            "--json",
            "run",
            "work:env_value",
            "--arg",
            "data+trust:hf://imdb?split=train",
        ],
        &[("HF_HUB_OFFLINE", "1")],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["error"]["remote"]["phase"], "data resolve", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("hf://imdb"),
        "{v}"
    );
    for (arg, part) in [
        ("data:hf://imdb?shard=1", "unknown query key \"shard\""),
        ("data+fast:hf://imdb", "unknown data option \"fast\""),
        (
            "data+trust:gs://b/x",
            "hf_trust_remote_code applies to Hugging Face datasets",
        ),
    ] {
        let o = sb.kinetic(&["run", "work:env_value", "--arg", arg]);
        assert_eq!(o.status.code(), Some(2), "{arg}: {}", stderr(&o));
        assert!(stderr(&o).contains(part), "{arg}: {}", stderr(&o));
    }
}

/// The files named `name` under `dir`, at any depth.
fn files_named(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_named(&path, name));
        } else if path.ends_with(name) {
            found.push(path);
        }
    }
    found
}

#[test]
fn jobs_list_says_which_live_job_has_no_handle_and_keeps_to_its_namespace() {
    // Issue 26.6: a job the backend holds whose handle.json is missing was
    // dropped without a word, and every namespace's local jobs were listed.
    let sb = Sandbox::new(WORK_PY);
    let kept = sb.detach(&["work:square", "--arg", "2"]);
    let lost = sb.detach(&["work:square", "--arg", "3"]);
    let other = sb.detach(&["work:square", "--arg", "4", "--namespace", "team-b"]);
    for job in [&kept, &lost, &other] {
        assert!(sb.wait_ended(job).contains("SUCCEEDED"), "{job}");
    }
    let handles = files_named(&sb.path("local"), &format!("{lost}/handle.json"));
    assert_eq!(handles.len(), 1, "{handles:?}");
    std::fs::remove_file(&handles[0]).unwrap();

    for args in [&["jobs", "list"][..], &["--json", "jobs", "list"][..]] {
        let o = sb.kinetic(args);
        assert!(o.status.success(), "{}", stderr(&o));
        let (out, err) = (stdout(&o), stderr(&o));
        assert!(out.contains(&kept), "{out}");
        assert!(!out.contains(&lost) && !out.contains(&other), "{out}");
        assert!(
            err.contains(&format!(
                "skipping job {lost}: the local backend holds it but its handle could not be loaded"
            )),
            "{err}"
        );
    }
    let o = sb.kinetic_env(&["jobs", "list"], &[("KINETIC_NAMESPACE", "team-b")]);
    let out = stdout(&o);
    assert!(out.contains(&other), "{out}");
    assert!(!out.contains(&kept), "{out}");
}
