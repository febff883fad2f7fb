//! Batches that lose their submitting process: `kinetic map` killed at
//! several points and `kinetic batch resume` finishing the batch with
//! nothing submitted twice and nothing lost; a detached map's manifest;
//! results collected twice; `batch list` and `batch cleanup`. Through the
//! real binary, on the local backend with the host's python3 and a
//! directory store.

mod local_world;

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use local_world::World;

const INPUTS: usize = 10;

/// A home whose `slow` appends each input it is called with to
/// `calls.log` outside the project (so the test sees how many times each
/// input ran), with `INPUTS` inputs in `proj/inputs.jsonl`.
fn world() -> World {
    let w = World::with_work(|home| {
        format!(
            "import time\n\nLOG = {:?}\n\n\ndef slow(x):\n    with open(LOG, \"a\") as f:\n        f.write(f\"{{x}}\\n\")\n    time.sleep(0.3)\n    return x * 10\n",
            home.join("calls.log").display().to_string()
        )
    });
    let inputs: String = (0..INPUTS).map(|i| format!("{i}\n")).collect();
    fs::write(w.home.join("proj/inputs.jsonl"), inputs).expect("write");
    w
}

impl World {
    fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn kinetic")
    }

    fn groups(&self) -> PathBuf {
        self.home.join("store/_groups")
    }

    /// The batch's id, once its manifest exists.
    fn group_id(&self) -> Option<String> {
        let entries = fs::read_dir(self.groups()).ok()?;
        entries
            .flatten()
            .find(|e| e.path().join("manifest.json").is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
    }

    fn manifest(&self, group: &str) -> Value {
        let bytes = fs::read(self.groups().join(group).join("manifest.json")).expect("manifest");
        serde_json::from_slice(&bytes).expect("manifest JSON")
    }

    /// The inputs the function was called with, one entry per call.
    fn calls(&self) -> Vec<usize> {
        let text = fs::read_to_string(self.home.join("calls.log")).unwrap_or_default();
        let mut calls: Vec<usize> = text.lines().map(|l| l.parse().expect("a number")).collect();
        calls.sort_unstable();
        calls
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn expected_values() -> String {
    (0..INPUTS).map(|i| format!("{}\n", i * 10)).collect()
}

/// Wait (at most a minute) for `ready`, then SIGKILL `child`.
fn kill_when(mut child: Child, what: &str, ready: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("kinetic ended ({status}) before {what}");
        }
        assert!(Instant::now() < deadline, "never saw {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().expect("kill");
    child.wait().expect("reap");
}

fn map_args() -> Vec<&'static str> {
    vec![
        "map",
        "work:slow",
        "--inputs",
        "inputs.jsonl",
        "--max-concurrent",
        "2",
        "--poll-interval",
        "0.2",
    ]
}

/// `kinetic ARGS…` run to its end, or killed after `limit` with what the
/// batch and its jobs' directories looked like: a resume that never ends
/// is a failure that says where it stopped, not a test killed silently.
fn kinetic_within(w: &World, args: &[&str], group: &str, limit: Duration) -> Output {
    let out = w.home.join("within.out");
    let err = w.home.join("within.err");
    let mut child = w
        .command(args)
        .stdout(fs::File::create(&out).expect("create"))
        .stderr(fs::File::create(&err).expect("create"))
        .spawn()
        .expect("spawn kinetic");
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().expect("kill");
            child.wait().expect("reap");
            let status = w.kinetic(&["batch", "status", group, "--json"]);
            let jobs: Vec<String> = fs::read_dir(w.home.join("local/jobs"))
                .into_iter()
                .flatten()
                .flatten()
                .map(|job| {
                    let mut files: Vec<String> = fs::read_dir(job.path())
                        .into_iter()
                        .flatten()
                        .flatten()
                        .map(|f| f.file_name().to_string_lossy().into_owned())
                        .collect();
                    files.sort();
                    format!("{}: {}", job.file_name().to_string_lossy(), files.join(" "))
                })
                .collect();
            panic!(
                "kinetic {args:?} still ran after {limit:?}\nits stderr:\n{}\nbatch status:\n{}{}\njob directories:\n{}",
                fs::read_to_string(&err).unwrap_or_default(),
                stdout(&status),
                stderr(&status),
                jobs.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: fs::read(&out).expect("stdout"),
        stderr: fs::read(&err).expect("stderr"),
    }
}

/// Resume, which must print every value in input order.
fn resume_to_the_end(w: &World, group: &str) {
    let o = kinetic_within(
        w,
        &["batch", "resume", group],
        group,
        Duration::from_secs(150),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), expected_values(), "{}", stderr(&o));
    assert_eq!(
        w.calls(),
        (0..INPUTS).collect::<Vec<_>>(),
        "each input runs once"
    );
    // The values were recorded before the jobs were cleaned: asking again
    // gives the same, at once.
    let o = w.kinetic(&["batch", "results", group]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), expected_values());
}

#[test]
fn a_map_killed_once_its_manifest_exists_resumes_even_after_a_killed_resume() {
    let w = world();
    let child = w.spawn(&map_args());
    kill_when(child, "the manifest", || w.group_id().is_some());
    let group = w.group_id().expect("group");
    // The batch commands tell the truth about the stranded inputs, at once.
    let started = Instant::now();
    let o = w.kinetic(&["batch", "wait", &group]);
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "no command waits on inputs it cannot find"
    );
    let err = stderr(&o);
    if !w.manifest(&group)["submission_complete"]
        .as_bool()
        .unwrap_or(false)
    {
        assert!(
            err.contains("never submitted")
                && err.contains(&format!("kinetic batch resume {group}")),
            "{err}"
        );
    }
    // A resume killed in its turn, then one that finishes.
    let child = w.spawn(&["batch", "resume", &group]);
    kill_when(child, "4 calls", || w.calls().len() >= 4);
    resume_to_the_end(&w, &group);
}

#[test]
fn a_map_killed_midway_or_late_resumes_with_nothing_twice_and_nothing_lost() {
    for calls in [3, INPUTS - 2] {
        let w = world();
        let child = w.spawn(&map_args());
        kill_when(child, &format!("{calls} calls"), || {
            w.calls().len() >= calls
        });
        let group = w.group_id().expect("group");
        resume_to_the_end(&w, &group);
    }
}

#[test]
fn detach_returns_with_every_child_named_and_results_read_the_same_twice() {
    let w = world();
    let mut args = map_args();
    args.push("--detach");
    let o = w.kinetic(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let group = stdout(&o).trim().to_owned();
    let manifest = w.manifest(&group);
    assert_eq!(
        manifest["children"].as_array().map(Vec::len),
        Some(INPUTS),
        "{manifest}"
    );
    assert_eq!(manifest["submission_complete"], Value::Bool(true));
    // What resume needs, with no environment value in it.
    assert_eq!(manifest["resume"]["max_concurrent"], Value::from(2));

    let first = w.kinetic(&["batch", "results", &group]);
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(stdout(&first), expected_values());
    let started = Instant::now();
    let second = w.kinetic(&["batch", "results", &group]);
    assert!(second.status.success(), "{}", stderr(&second));
    assert_eq!(stdout(&second), expected_values());
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "no command waits on inputs it cannot find"
    );
    let manifest = w.manifest(&group);
    let outcomes: Vec<&Value> = manifest["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["outcome"])
        .collect();
    assert!(
        outcomes
            .iter()
            .all(|o| o["status"] == "SUCCEEDED" && o["cleaned"] == true),
        "{manifest}"
    );

    let o = w.kinetic(&["batch", "list", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listed: Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(listed["batches"][0]["group_id"], Value::from(group.clone()));
    assert_eq!(listed["batches"][0]["collected"], Value::from(INPUTS));

    let o = w.kinetic(&["batch", "cleanup", &group]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        !w.groups().join(&group).exists(),
        "the batch's folder is gone"
    );
    let o = w.kinetic(&["batch", "list"]);
    assert!(!stdout(&o).contains(&group), "{}", stdout(&o));
}

#[test]
fn inputs_no_job_is_known_for_are_named_at_once() {
    let w = world();
    let mut args = map_args();
    args.push("--detach");
    let o = w.kinetic(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let group = stdout(&o).trim().to_owned();
    let o = w.kinetic(&["batch", "results", &group]);
    assert!(o.status.success(), "{}", stderr(&o));
    // An older manifest that names no child and every job cleaned: no
    // command waits on what it cannot find. (`results` keeps the
    // children's stored artifacts; remove them as a cleanup would.)
    let path = w.groups().join(&group).join("manifest.json");
    let mut manifest = w.manifest(&group);
    let children = manifest["children"].as_array().expect("children").clone();
    assert_eq!(children.len(), INPUTS, "{manifest}");
    for child in &children {
        let id = child["job_id"].as_str().expect("a child's job_id");
        fs::remove_dir_all(w.home.join("store").join(id)).expect("remove a child's objects");
    }
    manifest["children"] = Value::Array(vec![]);
    manifest
        .as_object_mut()
        .unwrap()
        .remove("submission_complete");
    fs::write(&path, manifest.to_string()).expect("write");
    let started = Instant::now();
    for command in ["status", "wait", "results"] {
        let o = w.kinetic(&["batch", command, &group]);
        let err = stderr(&o);
        assert!(
            err.contains(&format!("{INPUTS} of {INPUTS} inputs were never submitted")),
            "{command}: {err}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "no command waits on inputs it cannot find"
    );
}

#[test]
fn batch_wait_fails_and_status_does_not_count_inputs_never_submitted_as_done() {
    let w = world();
    let mut args = map_args();
    args.push("--detach");
    let o = w.kinetic(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let group = stdout(&o).trim().to_owned();
    let o = w.kinetic(&["batch", "results", &group]);
    assert!(o.status.success(), "{}", stderr(&o));
    // As a map stopped after three submissions leaves it: the manifest
    // names three jobs, and no job exists for the other inputs.
    let path = w.groups().join(&group).join("manifest.json");
    let mut manifest = w.manifest(&group);
    let children = manifest["children"].as_array().expect("children").clone();
    // Inputs 0, 1 and 2 keep their jobs (the manifest lists them in the
    // order they were submitted).
    let (kept, lost): (Vec<Value>, Vec<Value>) = children
        .into_iter()
        .partition(|c| c["group_index"].as_u64().expect("a child's group_index") < 3);
    assert_eq!(kept.len(), 3, "{manifest}");
    for child in &lost {
        let id = child["job_id"].as_str().expect("a child's job_id");
        fs::remove_dir_all(w.home.join("store").join(id)).expect("remove a child's objects");
    }
    manifest["children"] = Value::Array(kept);
    manifest
        .as_object_mut()
        .unwrap()
        .remove("submission_complete");
    fs::write(&path, manifest.to_string()).expect("write");

    let o = w.kinetic(&["batch", "status", &group]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        format!("{group}: 3/{INPUTS} done: 3 succeeded; 7 never submitted\n")
    );
    let o = w.kinetic(&["batch", "status", &group, "--json"]);
    let status: Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(
        (&status["done"], &status["never_submitted"]),
        (&Value::from(3), &Value::from(7)),
        "{status}"
    );

    let o = w.kinetic(&["batch", "wait", &group]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        format!("{group}: 3/{INPUTS} done: 3 succeeded; 7 never submitted\n")
    );
    assert!(
        stderr(&o).contains(&format!(
            "error: batch {group}: 7 of {INPUTS} inputs were never submitted (inputs 3, 4, 5, 6, 7, 8, 9); resume with `kinetic batch resume {group}`"
        )),
        "{}",
        stderr(&o)
    );

    // Resumed, the batch is done, and the wait says so.
    let o = w.kinetic(&["batch", "resume", &group]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = w.kinetic(&["batch", "wait", &group]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        format!("{group}: {INPUTS}/{INPUTS} done: {INPUTS} succeeded\n")
    );
}
