//! Inputs that must never do harm, through the real binary: a path the
//! command writes is never replaced when it is not a regular file, a job
//! record whose ids were edited is never acted on, and no count or
//! duration a user gives makes the program panic or run away.

mod sandbox;

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use sandbox::{Sandbox, stderr, stdout};

const WORK_PY: &str = "def square(x):\n    return x * x\n";

fn sandbox() -> Sandbox {
    let sb = Sandbox::new(WORK_PY);
    std::fs::write(sb.path("home/project/inputs.jsonl"), "1\n2\n").unwrap();
    sb
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo failed");
}

fn is_fifo(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .map(|m| m.file_type().is_fifo())
        .unwrap_or(false)
}

/// A usage error: exit 2, one line naming `needle`, and no panic.
#[track_caller]
fn assert_usage(o: &Output, needle: &str) {
    let err = stderr(o);
    assert_refused(o, needle);
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
}

/// Exit 2 with an error whose first line names `needle` (the argument
/// parser's own errors add a usage hint below it), and no panic.
#[track_caller]
fn assert_refused(o: &Output, needle: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("error: ") && first.contains(needle),
        "expected {needle:?} in the first line of: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn pack_never_replaces_an_out_that_is_not_a_regular_file() {
    let sb = sandbox();
    let src = sb.path("home/project");

    // A FIFO (as a device like /dev/null would be) stays what it is.
    let fifo = sb.path("out.fifo");
    mkfifo(&fifo);
    let o = sb.kinetic(&["pack", s(&src), s(&fifo)]);
    assert_usage(&o, "is a FIFO, not a regular file");
    assert!(is_fifo(&fifo), "the FIFO was replaced");

    let dir = sb.path("out-dir");
    std::fs::create_dir(&dir).unwrap();
    let o = sb.kinetic(&["pack", s(&src), s(&dir)]);
    assert_usage(&o, "is a directory");
    assert!(dir.is_dir());

    // A symlink to a FIFO is refused too; one to a regular file is written
    // through and stays a symlink.
    let to_fifo = sb.path("to-fifo.zip");
    std::os::unix::fs::symlink(&fifo, &to_fifo).unwrap();
    assert_usage(&sb.kinetic(&["pack", s(&src), s(&to_fifo)]), "FIFO");
    assert!(is_fifo(&fifo));
    let real = sb.path("real.zip");
    std::fs::write(&real, b"old").unwrap();
    let link = sb.path("link.zip");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let o = sb.kinetic(&["pack", s(&src), s(&link)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert!(std::fs::read(&real).unwrap().starts_with(b"PK"));

    // A regular file is replaced, as before.
    let o = sb.kinetic(&["pack", s(&src), s(&real)]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_profiles_file_that_is_not_a_regular_file_is_neither_read_nor_replaced() {
    let sb = sandbox();
    let fifo = sb.path("profiles.fifo");
    mkfifo(&fifo);
    // Reading a FIFO would block forever; writing would replace it.
    // Like any broken profiles file, it is a failure (exit 1) named in one line.
    let broken = |o: &Output, needle: &str| {
        let err = stderr(o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains(needle), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    };
    let env = [("KINETIC_PROFILES_FILE", s(&fifo))];
    broken(&sb.kinetic_env(&["profile", "list"], &env), "is a FIFO");
    let o = sb.kinetic_env(&["profile", "create", "dev", "--project", "p"], &env);
    broken(&o, "is a FIFO");
    assert!(is_fifo(&fifo));

    let dir = sb.path("profiles-dir");
    std::fs::create_dir(&dir).unwrap();
    let o = sb.kinetic_env(
        &["profile", "create", "dev", "--project", "p"],
        &[("KINETIC_PROFILES_FILE", s(&dir))],
    );
    broken(&o, "is a directory");
    assert!(dir.is_dir());
}

#[test]
fn a_record_whose_ids_were_edited_is_never_acted_on() {
    let sb = sandbox();
    let submit = |x: &str| {
        let o = sb.kinetic(&["run", "--detach", "work:square", "--arg", x]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o).trim().to_owned()
    };
    let (a, b) = (submit("2"), submit("3"));
    let store = sb.path("local/store");
    let record_of = |job: &str| store.join(job).join("handle.json");
    for job in [&a, &b] {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !stdout(&sb.kinetic(&["jobs", "status", job])).contains("SUCCEEDED") {
            assert!(Instant::now() < deadline, "{job} never succeeded");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    // A's record now claims to be B's.
    let original = std::fs::read_to_string(record_of(&a)).unwrap();
    std::fs::write(record_of(&a), original.replace(&a, &b)).unwrap();
    let o = sb.kinetic(&["jobs", "cleanup", &a]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("job_id"), "{}", stderr(&o));
    assert!(record_of(&b).is_file(), "cleaning up A deleted B's objects");
    assert!(store.join(&b).join("result.json").is_file());

    // Only the Kubernetes object name was changed: refused as well.
    let k8s_name_of_b = format!("\"k8s_name\":\"kinetic-{b}\"");
    let tampered = original.replace(&format!("\"k8s_name\":\"kinetic-{a}\""), &k8s_name_of_b);
    assert_ne!(tampered, original, "{original}");
    std::fs::write(record_of(&a), tampered).unwrap();
    let o = sb.kinetic(&["jobs", "cleanup", &a]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("k8s_name"), "{}", stderr(&o));

    // The untouched record still works.
    std::fs::write(record_of(&a), &original).unwrap();
    let o = sb.kinetic(&["jobs", "result", &a]);
    assert_eq!(stdout(&o), "4\n", "{}", stderr(&o));
    assert!(record_of(&b).is_file());
}

#[test]
fn counts_and_durations_are_bounded_never_a_panic() {
    let sb = sandbox();
    let src = sb.path("home/project");
    let out = sb.path("out.zip");
    for (args, needle) in [
        (vec!["hash", s(&src), "--threads", "1000000"], "--threads"),
        (
            vec!["pack", s(&src), s(&out), "--threads", "1000000"],
            "--threads",
        ),
        (
            vec!["run", "work:square", "--arg", "2", "--timeout", "1e19"],
            "--timeout",
        ),
        (
            vec!["run", "work:square", "--arg", "2", "--run-deadline", "1e30"],
            "at most",
        ),
        (
            vec![
                "map",
                "work:square",
                "--inputs",
                "inputs.jsonl",
                "--retries",
                "4000000000",
            ],
            "retries",
        ),
        (
            vec![
                "map",
                "work:square",
                "--inputs",
                "inputs.jsonl",
                "--poll-interval",
                "1e19",
            ],
            "--poll-interval",
        ),
    ] {
        let o = sb.kinetic(&args);
        assert_refused(&o, needle);
    }
    // A limit of a trillion local slots would open a trillion lock files.
    let o = sb.kinetic_env(
        &["run", "work:square", "--arg", "2"],
        &[("KINETIC_LOCAL_MAX_CONCURRENT", "1000000000000")],
    );
    assert_usage(&o, "at most 1024");
    // The bounds themselves are accepted.
    let o = sb.kinetic(&["hash", s(&src), "--threads", "256"]);
    assert!(o.status.success(), "{}", stderr(&o));
}
