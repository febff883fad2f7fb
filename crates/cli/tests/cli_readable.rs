//! What a person reads, through the real binary: `--help` in the order
//! commands are used, with an example each; plans and tables within the
//! terminal's width; `up` answered no is not an error; a job whose
//! project has no buckets says so and names `kinetic up`; a setting the
//! local backend cannot honour is a warning that says what happens.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod sandbox;

use sandbox::world::{PROJECT_FLAGS, World};
use sandbox::{COMMAND_LIMIT, Sandbox, stderr, stdout};

const WORK_PY: &str = "def square(x):\n    return x * x\n";

#[test]
fn help_lists_commands_in_the_order_they_are_used_with_examples() {
    let sb = Sandbox::new(WORK_PY);
    let o = sb.kinetic(&["--help"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let help = stdout(&o);
    let listed: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        &listed[..6],
        ["run", "map", "jobs", "batch", "doctor", "up"],
        "{help}"
    );
    let run = listed.iter().position(|c| *c == "run");
    let hash = listed.iter().position(|c| *c == "hash");
    assert!(run < hash, "{help}");
    assert!(
        help.contains("Examples:\n  kinetic run train.py:main --accelerator l4"),
        "{help}"
    );
    for command in ["run", "map", "up", "doctor", "hash"] {
        let o = sb.kinetic(&[command, "--help"]);
        let text = stdout(&o);
        assert!(
            text.contains(&format!("Example:\n  kinetic {command}")),
            "{command}: {text}"
        );
    }
}

/// `kinetic` on a terminal of `cols` columns (`script` makes it), `input`
/// typed; the exit code and the screen.
fn on_terminal(sb: &Sandbox, args: &[&str], cols: u16, input: &str) -> (Option<i32>, String) {
    let inner = sb.command(args, &[]);
    let quote = |s: &std::ffi::OsStr| format!("'{}'", s.to_string_lossy().replace('\'', "'\\''"));
    let mut line = format!(
        "stty cols {cols} rows 40; exec {}",
        quote(inner.get_program())
    );
    for a in inner.get_args() {
        line.push(' ');
        line.push_str(&quote(a));
    }
    let mut cmd = Command::new("script");
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
        .stderr(Stdio::null())
        .spawn()
        .expect("script (util-linux) makes the terminal");
    // Typed ahead: the terminal keeps the line until kinetic reads it.
    let mut stdin = child.stdin.take();
    if let Some(s) = stdin.as_mut() {
        s.write_all(input.as_bytes()).expect("type");
        s.flush().expect("type");
    }
    let mut out = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = out.read_to_end(&mut text);
        String::from_utf8_lossy(&text).into_owned()
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > COMMAND_LIMIT {
            let _ = child.kill();
            panic!("kinetic {args:?} did not end");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(stdin);
    (status.code(), reader.join().unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_answered_no_changes_nothing_and_is_not_an_error() {
    let w = World::project(WORK_PY)
        .new_project(Duration::from_secs(1))
        .start()
        .await;
    let sb = w.sandbox().with_env(w.sandbox().env().to_vec());
    let (code, seen) = tokio::task::spawn_blocking(move || on_terminal(&sb, &["up"], 100, "n\n"))
        .await
        .expect("join");
    assert_eq!(code, Some(0), "{seen}");
    assert!(seen.contains("Carry out this plan? [y/N]"), "{seen}");
    assert!(seen.contains("Nothing was changed."), "{seen}");
    assert!(!seen.contains("error"), "{seen}");
    // Every line of the plan fits the terminal's 100 columns.
    for line in seen.lines() {
        let one_word = line.split_whitespace().count() == 1;
        assert!(
            line.trim_end().chars().count() <= 100 || one_word,
            "{line:?}\n{seen}"
        );
    }
    assert!(w.cloud().apis().creations().is_empty());
    assert!(!w.sandbox().path("home/.kinetic/profiles.json").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_wider_than_the_terminal_wraps_under_its_step() {
    let w = World::project(WORK_PY)
        .new_project(Duration::from_secs(1))
        .start()
        .await;
    let o = w
        .kinetic_env(
            &["up", "--dry-run", "--accelerator", "l4"],
            &[("COLUMNS", "80")],
        )
        .await;
    assert!(o.status.success(), "{}", stderr(&o));
    let plan = stdout(&o);
    for line in plan.lines() {
        // Only a word longer than the terminal (a URL) goes past it.
        let one_word = line.split_whitespace().count() == 1;
        assert!(line.chars().count() <= 80 || one_word, "{line:?}\n{plan}");
    }
    // A grant's roles continue on indented lines under its number.
    let grant = plan
        .lines()
        .position(|l| l.contains(". grant "))
        .unwrap_or_else(|| panic!("{plan}"));
    let next = plan.lines().nth(grant + 1).unwrap_or_default();
    assert!(
        next.starts_with("      ") && !next.trim().is_empty(),
        "{plan}"
    );
    // On a pipe without COLUMNS nothing wraps: one line per step.
    let o = w.kinetic(&["up", "--dry-run", "--accelerator", "l4"]).await;
    assert!(
        stdout(&o).lines().any(|l| l.chars().count() > 200),
        "{}",
        stdout(&o)
    );
}

#[test]
fn a_table_wider_than_the_terminal_wraps_within_its_columns() {
    let sb = Sandbox::new(WORK_PY);
    let wide = sb.kinetic(&["accelerators"]);
    assert!(wide.status.success(), "{}", stderr(&wide));
    let longest = stdout(&wide)
        .lines()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0);
    assert!(longest > 60, "{}", stdout(&wide));
    let o = sb.kinetic_env(&["accelerators"], &[("COLUMNS", "60")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for line in text.lines() {
        assert!(line.chars().count() <= 60, "{line:?}\n{text}");
    }
    // Nothing is lost: every word of the wide table is still there.
    let words = |t: &str| -> std::collections::BTreeSet<String> {
        t.split_whitespace().map(str::to_owned).collect()
    };
    let (before, after) = (words(&stdout(&wide)), words(&text));
    let lost: Vec<&String> = before
        .iter()
        .filter(|w| !after.contains(*w) && !text.contains(w.as_str()))
        .collect();
    assert!(lost.len() < before.len() / 10, "{lost:?}\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_for_a_cluster_without_buckets_names_kinetic_up() {
    let w = World::project(WORK_PY)
        .new_project(Duration::from_secs(1))
        .file("pyproject.toml", sandbox::world::PYPROJECT)
        .start()
        .await;
    let mut args = vec!["run", "work:square", "--arg", "3", "--backend", "gke"];
    args.extend(PROJECT_FLAGS);
    let o = w.kinetic(&args).await;
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(last.contains("does not exist"), "{err}");
    assert!(last.contains("`kinetic up`"), "{err}");
    assert!(!last.contains("image builder error"), "{err}");
    assert!(!last.contains("object not found"), "{err}");
}

#[test]
fn settings_the_local_backend_cannot_honour_are_warnings_that_say_what_happens() {
    let sb = Sandbox::new(WORK_PY);
    let o = sb.kinetic_env(
        &[
            "run",
            "work:square",
            "--arg",
            "4",
            "--container-image",
            "us-docker.pkg.dev/p/r/img:1",
            "--env",
            "API_TOKEN",
        ],
        &[("API_TOKEN", "t0k3n")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "16\n");
    let err = stderr(&o);
    assert!(
        err.contains(
            "warning: the local backend runs jobs without a container image, so the container image us-docker.pkg.dev/p/r/img:1 is not used"
        ),
        "{err}"
    );
    // The local backend keeps captured values in the job's environment:
    // no Kubernetes Secret is named.
    assert!(err.contains("look like credentials"), "{err}");
    assert!(err.contains("API_TOKEN"), "{err}");
    assert!(!err.contains("Kubernetes"), "{err}");
}

/// Without credentials nothing else can be read: `doctor` says so once,
/// with the one fix, and shows the other checks as not run, never as
/// facts it did not read; no error names GCS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_without_credentials_fails_once_and_runs_nothing_that_needs_them() {
    let w = World::project(WORK_PY).start().await;
    let sb = w
        .sandbox()
        .without(&[kinetic_core::settings::vars::ACCESS_TOKEN])
        .with_var(
            "GOOGLE_APPLICATION_CREDENTIALS",
            &w.sandbox().path("no-such-key.json").display().to_string(),
        );
    let o = sb.kinetic_async(&["doctor"], &[]).await;
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("FAIL Google credentials: "), "{out}");
    assert!(
        out.contains("fix: gcloud auth application-default login"),
        "{out}"
    );
    let failed = lines.iter().filter(|l| l.starts_with("FAIL")).count();
    let skipped = lines.iter().filter(|l| l.starts_with("skip")).count();
    assert_eq!(failed, 1, "{out}");
    assert!(skipped > 5, "{out}");
    assert!(
        lines
            .iter()
            .filter(|l| l.starts_with("skip"))
            .all(|l| l.ends_with(": not run: needs Google credentials")),
        "{out}"
    );
    assert!(
        !out.contains("not enabled") && !out.contains("missing"),
        "{out}"
    );
    assert!(!out.contains("GCS") && !err.contains("GCS"), "{out}\n{err}");
    assert!(
        out.contains(&format!(
            "1 of {} checks failed; {skipped} were not run",
            failed + skipped
        )),
        "{out}"
    );
}
