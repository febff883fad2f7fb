//! Ctrl-C and long waits, through the real binary, read as a person sees
//! them: each waiting command interrupted at its stages (SIGINT sent to
//! the process, or ^C typed on a terminal) says what goes on running,
//! what was not done and the command that picks it up, and exits 130;
//! the command it names does pick the work up. A wait shows what it
//! waits for on a terminal (a pseudo-terminal made by `script`) and
//! nothing on a pipe.

mod sandbox;

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kinetic_fake_gcp::cloudbuild::BuildSchedule;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use sandbox::world::World;
use sandbox::{COMMAND_LIMIT, Sandbox, stderr, stdout};

/// Each call logs its input, then waits until the file `go` exists.
fn work_py(sb: &Sandbox) -> String {
    format!(
        "import os\nimport time\n\nGO = {:?}\nLOG = {:?}\n\n\ndef wait(x):\n    with open(LOG, \"a\") as f:\n        f.write(f\"{{x}}\\n\")\n    while not os.path.exists(GO):\n        time.sleep(0.05)\n    return x * 10\n",
        sb.path("go").display().to_string(),
        sb.path("calls.log").display().to_string(),
    )
}

/// A home whose store is the folder `store` in the sandbox.
fn sandbox() -> Sandbox {
    let sb = Sandbox::new("");
    sb.write("home/project/work.py", &work_py(&sb));
    let store = format!("file://{}", sb.path("store").display());
    sb.with_var("KINETIC_STORE_URL", &store)
        .with_var("KINETIC_LOCAL_MAX_CONCURRENT", "4")
}

/// Let every waiting call return.
fn go(sb: &Sandbox) {
    sb.write("go", "");
}

fn calls(sb: &Sandbox) -> usize {
    std::fs::read_to_string(sb.path("calls.log"))
        .unwrap_or_default()
        .lines()
        .count()
}

/// Poll `ready` (a file, the store) until it holds, failing after the
/// command limit.
fn until(what: &str, ready: impl Fn() -> bool) {
    let started = Instant::now();
    while !ready() {
        assert!(started.elapsed() < COMMAND_LIMIT, "never saw {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A running `kinetic`, its output gathered as it comes.
struct Running {
    child: Child,
    stdin: Option<ChildStdin>,
    /// What a person sees: stderr on a pipe, or the terminal's screen.
    seen: Arc<Mutex<Vec<u8>>>,
    stdout: Arc<Mutex<Vec<u8>>>,
}

fn gather(mut from: impl Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let into = Arc::new(Mutex::new(Vec::new()));
    let sink = into.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    into
}

impl Running {
    /// `kinetic ARGS` with stdout and stderr on pipes.
    fn piped(sb: &Sandbox, args: &[&str]) -> Self {
        Self::spawn(sb.command(args, &[]))
    }

    /// `kinetic ARGS` in a World's sandbox, on pipes.
    fn piped_env(sb: &Sandbox, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::spawn(sb.command(args, env))
    }

    fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let seen = gather(child.stderr.take().unwrap());
        let stdout = gather(child.stdout.take().unwrap());
        Self {
            child,
            stdin: None,
            seen,
            stdout,
        }
    }

    /// `kinetic ARGS` on a terminal of 160 columns (`script` makes it),
    /// typed into as a person types.
    fn terminal(sb: &Sandbox, args: &[&str]) -> Self {
        let inner = sb.command(args, &[]);
        let mut line = format!("stty cols 160 rows 40; exec {}", quote(inner.get_program()));
        for a in inner.get_args() {
            line.push(' ');
            line.push_str(&quote(a));
        }
        let mut cmd = Command::new("script");
        // A terminal emulator sets TERM; without it, no progress is drawn.
        cmd.args(["-qefc", &line, "/dev/null"])
            .env_clear()
            .env("TERM", "xterm");
        for (k, v) in inner.get_envs() {
            if let Some(v) = v {
                cmd.env(k, v);
            }
        }
        if let Some(dir) = inner.get_current_dir() {
            cmd.current_dir(dir);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("script (util-linux) makes the terminal of these tests");
        let stdin = child.stdin.take();
        let seen = gather(child.stdout.take().unwrap());
        let stdout = gather(child.stderr.take().unwrap());
        Self {
            child,
            stdin,
            seen,
            stdout,
        }
    }

    fn seen(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().unwrap()).into_owned()
    }

    /// Wait until `text` was shown; what was shown so far.
    fn wait_for(&mut self, text: &str) -> String {
        let started = Instant::now();
        loop {
            let seen = self.seen();
            if seen.contains(text) {
                return seen;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("kinetic ended ({status}) before showing {text:?}: {seen}");
            }
            assert!(
                started.elapsed() < COMMAND_LIMIT,
                "never showed {text:?}: {seen}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGINT to the process, as a terminal sends it on Ctrl-C.
    fn sigint(&self) {
        kill(Pid::from_raw(self.child.id() as i32), Signal::SIGINT).unwrap();
    }

    /// ^C typed on the terminal.
    fn type_ctrl_c(&mut self) {
        let stdin = self.stdin.as_mut().expect("a terminal");
        stdin.write_all(b"\x03").unwrap();
        stdin.flush().unwrap();
    }

    /// The exit code and everything shown.
    fn finish(mut self) -> (Option<i32>, String, String) {
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > COMMAND_LIMIT {
                let _ = self.child.kill();
                panic!("kinetic did not end: {}", self.seen());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // The readers end with the pipes.
        let drained = Instant::now();
        let mut last = usize::MAX;
        loop {
            std::thread::sleep(Duration::from_millis(50));
            let n = self.seen.lock().unwrap().len() + self.stdout.lock().unwrap().len();
            if n == last || drained.elapsed() > Duration::from_secs(5) {
                break;
            }
            last = n;
        }
        let out = String::from_utf8_lossy(&self.stdout.lock().unwrap()).into_owned();
        (status.code(), self.seen(), out)
    }
}

fn quote(s: &std::ffi::OsStr) -> String {
    format!("'{}'", s.to_string_lossy().replace('\'', r"'\''"))
}

/// The last `interrupted:` line, from those words on (a terminal's echoed
/// `^C` and escapes trimmed off).
fn interrupted_line(seen: &str) -> String {
    seen.split(['\n', '\r'])
        .rev()
        .find_map(|l| l.find("interrupted:").map(|at| &l[at..]))
        .unwrap_or_else(|| panic!("no `interrupted:` line: {seen}"))
        .to_owned()
}

#[test]
fn ctrl_c_in_run_and_jobs_result_leaves_the_job_running_and_names_jobs_result() {
    let sb = sandbox();
    // Waiting for the job: on a pipe, the id is shown at submit.
    let mut run = Running::piped(&sb, &["run", "work:wait", "--arg", "7"]);
    let seen = run.wait_for("submitted job-");
    let job = seen
        .split_whitespace()
        .find(|w| w.starts_with("job-"))
        .unwrap()
        .to_owned();
    run.sigint();
    let (code, seen, out) = run.finish();
    assert_eq!(code, Some(130), "{seen}");
    assert_eq!(out, "", "nothing on stdout");
    assert_eq!(
        interrupted_line(&seen),
        format!(
            "interrupted: job {job} keeps running on the local backend; its value was not collected; pick it up with `kinetic jobs result {job}` (stop it with `kinetic jobs cancel {job}`)"
        )
    );
    assert!(sb.kinetic(&["jobs", "status", &job]).status.success());
    assert!(
        stdout(&sb.kinetic(&["jobs", "status", &job])).contains("RUNNING"),
        "the job goes on"
    );

    // `jobs result`, the command named, interrupted in its turn on a terminal.
    let mut result = Running::terminal(&sb, &["jobs", "result", &job]);
    result.wait_for(&format!("waiting for {job}"));
    result.type_ctrl_c();
    let (code, seen, _) = result.finish();
    assert_eq!(code, Some(130), "{seen}");
    assert_eq!(
        interrupted_line(&seen),
        format!(
            "interrupted: job {job} keeps running on the local backend; its value was not collected; pick it up with `kinetic jobs result {job}` (stop it with `kinetic jobs cancel {job}`)"
        )
    );

    // And it picks the job up.
    go(&sb);
    let o = sb.kinetic(&["jobs", "result", &job]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "70\n");
}

#[test]
fn jobs_result_shows_what_it_waits_for_on_a_terminal_and_nothing_on_a_pipe() {
    let sb = sandbox();
    let o = sb.kinetic(&["run", "--detach", "work:wait", "--arg", "7"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let job = stdout(&o).trim().to_owned();
    until("the call", || calls(&sb) == 1);

    // On a terminal: what it waits for, the job's state and the time.
    let mut result = Running::terminal(&sb, &["jobs", "result", &job]);
    let seen = result.wait_for(&format!("waiting for {job}: RUNNING"));
    let line = seen
        .split(['\n', '\r'])
        .rfind(|l| l.contains(&format!("waiting for {job}: RUNNING")))
        .unwrap()
        .to_owned();
    assert!(line.ends_with("s]") || line.contains("s] "), "{line:?}");
    go(&sb);
    let (code, seen, _) = result.finish();
    assert_eq!(code, Some(0), "{seen}");
    // The spinner is cleared: the value is the last thing on the screen.
    assert!(seen.trim_end().ends_with("70"), "{seen:?}");

    // On a pipe: the value and nothing else.
    let o = sb.kinetic(&["jobs", "result", &job]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!((stdout(&o).as_str(), stderr(&o).as_str()), ("70\n", ""));

    // A job still running, waited for on a pipe: nothing is drawn.
    std::fs::remove_file(sb.path("go")).unwrap();
    let o = sb.kinetic(&["run", "--detach", "work:wait", "--arg", "8"]);
    let second = stdout(&o).trim().to_owned();
    until("the second call", || calls(&sb) == 2);
    let waiting = Running::piped(&sb, &["jobs", "result", &second]);
    until("its Ctrl-C listener", || {
        listening(waiting.child.id()) || waiting.seen().contains("error")
    });
    go(&sb);
    let (code, seen, out) = waiting.finish();
    assert_eq!((code, out.as_str()), (Some(0), "80\n"), "{seen}");
    assert_eq!(seen, "", "nothing on stderr but the value on stdout");
}

/// True once the process `pid` listens for Ctrl-C (its thread is up).
fn listening(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks.flatten().any(|t| {
                std::fs::read_to_string(t.path().join("comm"))
                    .is_ok_and(|c| c.trim() == "kinetic-ctrl-c")
            })
        })
        .unwrap_or(false)
}

#[test]
fn ctrl_c_in_map_and_batch_wait_names_the_inputs_never_submitted_and_batch_resume() {
    let sb = sandbox();
    let inputs: String = (0..21).map(|i| format!("{i}\n")).collect();
    sb.write("home/project/inputs.jsonl", &inputs);
    let mut map = Running::piped(
        &sb,
        &[
            "map",
            "work:wait",
            "--inputs",
            "inputs.jsonl",
            "--max-concurrent",
            "3",
            "--poll-interval",
            "0.2",
        ],
    );
    let seen = map.wait_for(": 21 inputs");
    let group = seen
        .split_whitespace()
        .find(|w| w.starts_with("grp-"))
        .unwrap()
        .trim_end_matches(':')
        .to_owned();
    // Three jobs running, on the batch's three workers, and one more queued
    // for each worker (a batch on workers keeps each worker's next input in
    // flight: docs/batches.md), so six submitted (the manifest names them);
    // the other inputs wait their turn.
    until("three calls", || calls(&sb) == 3);
    until("six jobs in the manifest", || children(&sb, &group) == 6);
    map.sigint();
    let (code, seen, out) = map.finish();
    assert_eq!(code, Some(130), "{seen}");
    assert_eq!(out, "");
    assert_eq!(
        interrupted_line(&seen),
        format!(
            "interrupted: batch {group} goes on: its 6 submitted jobs keep running; 15 of 21 inputs were never submitted, and no value was collected; pick it up with `kinetic batch resume {group}` (stop it with `kinetic batch cancel {group}`)"
        )
    );

    // `batch wait` says the same, and is interrupted the same way on a terminal.
    let mut wait = Running::terminal(&sb, &["batch", "wait", &group]);
    wait.wait_for("15 of 21 inputs were never submitted");
    wait.wait_for(&format!("{group} ["));
    wait.type_ctrl_c();
    let (code, seen, _) = wait.finish();
    assert_eq!(code, Some(130), "{seen}");
    assert_eq!(
        interrupted_line(&seen),
        format!(
            "interrupted: batch {group} goes on: its 6 submitted jobs keep running; 15 of 21 inputs were never submitted, and no value was collected; pick it up with `kinetic batch resume {group}` (stop it with `kinetic batch cancel {group}`)"
        )
    );

    // The command named picks the batch up: every value, in input order.
    go(&sb);
    let o = sb.kinetic(&["batch", "resume", &group]);
    assert!(o.status.success(), "{}", stderr(&o));
    let values: String = (0..21).map(|i| format!("{}\n", i * 10)).collect();
    assert_eq!(stdout(&o), values);
    assert_eq!(calls(&sb), 21, "each input ran once");
}

/// How many jobs the batch's manifest names.
fn children(sb: &Sandbox, group: &str) -> usize {
    std::fs::read(sb.path(&format!("store/_groups/{group}/manifest.json")))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|m| m["children"].as_array().map(Vec::len))
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_in_up_says_what_goes_on_in_the_cloud_and_to_run_it_again() {
    let w = World::project("def f():\n    return 1\n")
        .new_project(Duration::from_secs(3))
        .start()
        .await;
    let (cloud, sb) = (w.cloud(), w.sandbox().with_env(w.sandbox().env().to_vec()));

    // At the prompt: nothing was changed.
    let prompt = {
        let sb = sb.with_env(sb.env().to_vec());
        tokio::task::spawn_blocking(move || {
            let mut up = Running::terminal(&sb, &["up"]);
            up.wait_for("Carry out this plan? [y/N]");
            up.type_ctrl_c();
            up.finish()
        })
        .await
        .unwrap()
    };
    let (code, seen, _) = prompt;
    assert_eq!(code, Some(130), "{seen}");
    // The question stays on the screen, the answer under it.
    assert!(
        seen.contains("Carry out this plan? [y/N] ^C\r\ninterrupted: "),
        "{seen:?}"
    );
    assert_eq!(
        interrupted_line(&seen),
        "interrupted: nothing was changed; the plan was not carried out; run `kinetic up` again"
    );
    assert!(cloud.apis().creations().is_empty());

    // While the cluster is being created: it goes on in the cloud.
    let mut up = {
        let sb = sb.with_env(sb.env().to_vec());
        tokio::task::spawn_blocking(move || Running::piped_env(&sb, &["up", "--yes"], &[]))
            .await
            .unwrap()
    };
    let started = Instant::now();
    while cloud.apis().clusters().is_empty() {
        assert!(
            started.elapsed() < COMMAND_LIMIT,
            "the cluster never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seen = up.wait_for("create GKE cluster");
    let step = seen
        .lines()
        .rfind(|l| l.contains("create GKE cluster"))
        .and_then(|l| l.strip_prefix('['))
        .and_then(|l| l.split_once(']'))
        .map(|(n, _)| n.to_owned())
        .unwrap_or_else(|| panic!("no step line: {seen}"));
    let (index, total) = step.split_once('/').unwrap();
    up.sigint();
    let (code, seen, _) = tokio::task::spawn_blocking(move || up.finish())
        .await
        .unwrap();
    assert_eq!(code, Some(130), "{seen}");
    let line = interrupted_line(&seen);
    assert!(
        line.starts_with(&format!(
            "interrupted: what the cloud started for step {index}/{total} (create GKE cluster"
        )) && line.ends_with(&format!(
            ") goes on there; steps {index} to {total} of {total} were not finished (what was done stays done); run `kinetic up --yes` again"
        )),
        "{line}"
    );
    assert_eq!(
        cloud.apis().clusters(),
        vec![("fake".to_owned(), "PROVISIONING".to_owned())]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_in_pool_add_says_the_pool_goes_on_and_to_run_it_again() {
    let w = World::project("def f():\n    return 1\n")
        .new_project(Duration::from_secs(2))
        .start()
        .await;
    let o = w.kinetic(&["up", "--yes"]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let (cloud, sb) = (w.cloud(), w.sandbox().with_env(w.sandbox().env().to_vec()));
    let before = cloud.apis().node_pools("fake").len();
    let mut add = tokio::task::spawn_blocking(move || {
        Running::piped(&sb, &["pool", "add", "--accelerator", "l4", "--yes"])
    })
    .await
    .unwrap();
    let started = Instant::now();
    while cloud.apis().node_pools("fake").len() == before {
        assert!(
            started.elapsed() < COMMAND_LIMIT && add.child.try_wait().unwrap().is_none(),
            "the pool never started: {}",
            add.seen()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seen = add.wait_for("create node pool gpu-l4-");
    let step = seen
        .lines()
        .rfind(|l| l.contains("create node pool gpu-l4-"))
        .and_then(|l| l.strip_prefix('['))
        .and_then(|l| l.split_once(']'))
        .map(|(n, _)| n.to_owned())
        .unwrap_or_else(|| panic!("no step line: {seen}"));
    let (index, total) = step.split_once('/').unwrap();
    add.sigint();
    let (code, seen, _) = tokio::task::spawn_blocking(move || add.finish())
        .await
        .unwrap();
    assert_eq!(code, Some(130), "{seen}");
    let line = interrupted_line(&seen);
    let rest = if index == total {
        format!("step {total} of {total} was not finished")
    } else {
        format!("steps {index} to {total} of {total} were not finished (what was done stays done)")
    };
    assert!(
        line.starts_with(&format!(
            "interrupted: what the cloud started for step {index}/{total} (create node pool gpu-l4-"
        )) && line.ends_with(&format!(
            ") goes on there; {rest}; run `kinetic pool add --accelerator l4 --yes` again"
        )),
        "{line}"
    );
    let pools = cloud.apis().node_pools("fake");
    assert!(
        pools
            .iter()
            .any(|(name, status)| name.starts_with("gpu-l4-") && status == "PROVISIONING"),
        "the pool goes on: {pools:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_in_run_while_its_image_builds_says_the_build_goes_on_and_no_job_runs() {
    let w = World::project("def square(x):\n    return x * x\n")
        .file("requirements.txt", "six==1.16.0\n")
        .start()
        .await;
    let cloud = w.cloud();
    cloud
        .cloud_build()
        .set_schedule(BuildSchedule::never_finishes());
    let sb = w.sandbox().with_env(w.sandbox().env().to_vec());
    let args = ["run", "work.py:square", "--arg", "7", "--backend", "gke"];
    let mut run = tokio::task::spawn_blocking(move || Running::piped(&sb, &args))
        .await
        .unwrap();
    let started = Instant::now();
    while cloud.cloud_build().builds_created() == 0 {
        assert!(
            started.elapsed() < COMMAND_LIMIT && run.child.try_wait().unwrap().is_none(),
            "no build started: {}",
            run.seen()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    run.sigint();
    let (code, seen, out) = tokio::task::spawn_blocking(move || run.finish())
        .await
        .unwrap();
    assert_eq!((code, out.as_str()), (Some(130), ""), "{seen}");
    assert_eq!(
        interrupted_line(&seen),
        "interrupted: no job runs, but an image build it started goes on in the cloud (the next submission reuses the image); no job was submitted; run `kinetic run work.py:square --arg 7 --backend gke` again"
    );
    assert_eq!(w.cluster().calls().count("create", "jobs.batch"), 0);
}
