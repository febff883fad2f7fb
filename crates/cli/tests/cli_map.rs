//! `kinetic map` and `kinetic batch …` through the real binary, on the local
//! backend with the host's python3 and a directory store.

mod local_world;

use std::fs;
use std::process::Output;

use local_world::World;

use serde_json::{Value, json};

const WORK_PY: &str = r#"
def square(x):
    return x * x


def count_lines(path):
    import os
    if os.path.isdir(path):
        return sorted(os.listdir(path))
    with open(path) as f:
        return len(f.read().splitlines())


def nothing_or_raise(x):
    if x == 2:
        raise ValueError("two is not allowed")
    return None if x == 1 else {"error": "returned", "index": x}


def attempt_after_failing(marker):
    import os
    if not os.path.exists(marker):
        open(marker, "w").write("tried")
        raise RuntimeError("first attempt fails")
    return ["second attempt", os.environ["KINETIC_ATTEMPT"]]

def scaled(x, scale=1):
    if x == 3:
        raise ValueError("three is not allowed")
    return x * scale
"#;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn group_id(o: &Output) -> String {
    let err = stderr(o);
    err.split_whitespace()
        .find(|w| w.starts_with("grp-"))
        .map(|w| w.trim_end_matches(':').to_owned())
        .unwrap_or_else(|| panic!("no group id in: {err}"))
}

#[test]
fn map_prints_values_in_input_order_and_batch_commands_follow_it() {
    let w = World::new(WORK_PY);
    let inputs = w.inputs("in.jsonl", &(0..8).map(|i| json!(i)).collect::<Vec<_>>());
    let o = w.kinetic(&[
        "map",
        "work:square",
        "--inputs",
        &inputs,
        "--max-concurrent",
        "3",
        "--poll-interval",
        "0.05",
        "--no-cleanup",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let values: Vec<String> = stdout(&o).lines().map(str::to_owned).collect();
    assert_eq!(values, vec!["0", "1", "4", "9", "16", "25", "36", "49"]);
    let group = group_id(&o);

    let o = w.kinetic(&["batch", "status", &group, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let status: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(status["total"], 8);
    assert_eq!(status["counts"]["succeeded"], 8);
    assert_eq!(status["jobs"].as_array().map(Vec::len), Some(8));
    assert_eq!(status["submission_complete"], true);

    let o = w.kinetic(&["batch", "results", &group, "--json", "--no-cleanup"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let results: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(results["results"][7]["value"], 49);

    let o = w.kinetic(&["batch", "wait", &group]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("8/8 done"), "{}", stdout(&o));

    let o = w.kinetic(&["batch", "cleanup", &group]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = w.kinetic(&["batch", "status", &group]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("no batch"), "{}", stderr(&o));
}

#[test]
fn a_failed_input_fails_the_command_and_keeps_the_other_values() {
    let w = World::new(WORK_PY);
    let inputs = w.inputs(
        "kw.jsonl",
        &(0..5)
            .map(|i| json!({"x": i, "scale": 10}))
            .collect::<Vec<_>>(),
    );
    let o = w.kinetic(&[
        "map",
        "work:scaled",
        "--inputs",
        &inputs,
        "--poll-interval",
        "0.05",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 5, "{out}");
    assert!(out.starts_with("0\n10\n20\n!error 3: "), "{out}");
    assert!(out.ends_with("\n40\n"), "{out}");
    let err = stderr(&o);
    assert!(err.contains("1 of 5 inputs failed"), "{err}");
    assert!(err.contains("three is not allowed"), "{err}");
}

/// A script tells a failed input from any value its function returns: a
/// `None` prints `null`, a dict shaped like an error prints as JSON, and
/// only a failure prints a line that is not JSON, starting `!error INDEX:`.
#[test]
fn a_failed_input_is_marked_apart_from_none_and_from_any_returned_dict() {
    let w = World::new(WORK_PY);
    let inputs = w.inputs("xs.jsonl", &[json!(0), json!(1), json!(2)]);
    let o = w.kinetic(&[
        "map",
        "work:nothing_or_raise",
        "--inputs",
        &inputs,
        "--poll-interval",
        "0.05",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(lines[0], r#"{"error":"returned","index":0}"#);
    assert_eq!(lines[1], "null");
    assert!(lines[2].starts_with("!error 2: "), "{out}");
    assert!(lines[2].contains("two is not allowed"), "{out}");
    // Every value line is JSON; the failure's is not.
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(
            serde_json::from_str::<Value>(line).is_ok(),
            i != 2,
            "{line}"
        );
    }
}

/// Under `--json`, every error is one JSON object on stderr with a stable
/// `kind`: flags clap refuses, inputs kinetic refuses, a failed batch.
#[test]
fn with_json_every_error_is_a_json_object_on_stderr() {
    let w = World::new(WORK_PY);
    let bad = w.home.join("proj/bad.jsonl");
    fs::write(&bad, "1\n{nope\n").expect("write");
    let error_of = |o: &Output| -> Value {
        let err = stderr(o);
        let last = err.lines().last().unwrap_or_default().to_owned();
        let v: Value = serde_json::from_str(&last).unwrap_or_else(|e| panic!("{e}: {err}"));
        v["error"].clone()
    };
    let o = w.kinetic(&[
        "--json",
        "map",
        "work:square",
        "--inputs",
        bad.to_str().expect("utf-8"),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = error_of(&o);
    assert_eq!(
        (e["kind"].as_str(), e["exit_code"].as_u64()),
        (Some("usage"), Some(2)),
        "{e}"
    );
    assert!(
        e["message"].as_str().unwrap_or_default().contains("line 2"),
        "{e}"
    );

    let o = w.kinetic(&["map", "work:square", "--json", "--no-such-flag"]);
    assert_eq!(o.status.code(), Some(2));
    let e = error_of(&o);
    assert_eq!(e["kind"], "usage", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap_or_default()
            .contains("--no-such-flag"),
        "{e}"
    );

    let inputs = w.inputs("xs.jsonl", &[json!(0), json!(2)]);
    let o = w.kinetic(&[
        "map",
        "work:nothing_or_raise",
        "--inputs",
        &inputs,
        "--json",
        "--poll-interval",
        "0.05",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let e = error_of(&o);
    assert_eq!(e["kind"], "failed", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap_or_default()
            .contains("1 of 2 inputs failed"),
        "{e}"
    );
    // The results document on stdout still names the failed input.
    let doc: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(doc["results"][1]["index"], 1, "{doc}");
    assert!(doc["results"][1]["error"].is_string(), "{doc}");
}

#[test]
fn bad_input_files_and_flags_are_usage_errors() {
    let w = World::new(WORK_PY);
    let bad = w.home.join("proj/bad.jsonl");
    fs::write(&bad, "1\n{nope\n").expect("write");
    let o = w.kinetic(&[
        "map",
        "work:square",
        "--inputs",
        bad.to_str().expect("utf-8"),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("line 2"), "{}", stderr(&o));
    let good = w.inputs("one.jsonl", &[json!(1)]);
    let o = w.kinetic(&[
        "map",
        "work:square",
        "--inputs",
        &good,
        "--input-mode",
        "bogus",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("input mode"), "{}", stderr(&o));
    let o = w.kinetic(&["batch", "status", "grp-nothex!"]);
    assert_eq!(o.status.code(), Some(2));
}

/// `map` takes every job option `run` has, and the per-run target.
#[test]
fn map_accepts_every_job_option_of_run() {
    let w = World::new(WORK_PY);
    let inputs = w.inputs("in.jsonl", &[json!(1), json!(2)]);
    let o = w.kinetic(&[
        "map",
        "work.py:scaled",
        "--inputs",
        &inputs,
        "--kwargs",
        r#"{"scale": 10}"#,
        "--output-dir",
        "/tmp/kinetic-out",
        "--run-deadline",
        "120",
        "--container-image",
        "prebuilt",
        "--base-image-repo",
        "us-docker.pkg.dev/p/r",
        "--namespace",
        "ns",
        "--project",
        "p",
        "--zone",
        "europe-west4-a",
        "--cluster",
        "c",
        "-v",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let values: Vec<String> = stdout(&o).lines().map(str::to_owned).collect();
    assert_eq!(values, ["10", "20"], "{}", stderr(&o));
    assert!(
        stderr(&o).contains("backend: local (the default for CPU jobs)"),
        "{}",
        stderr(&o)
    );
    // The per-run target chooses the cluster a GPU batch goes to.
    let o = w.kinetic(&[
        "map",
        "work.py:square",
        "--inputs",
        &inputs,
        "--accelerator",
        "l4",
        "--project",
        "p",
        "--zone",
        "europe-west4-a",
        "--cluster",
        "c",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "gcloud container clusters get-credentials c --zone europe-west4-a --project p"
        ),
        "{}",
        stderr(&o)
    );
}

#[test]
fn input_data_gives_each_job_its_own_data() {
    let w = World::new(WORK_PY);
    let proj = w.home.join("proj");
    fs::create_dir_all(proj.join("shards/a")).expect("mkdir");
    fs::write(proj.join("shards/a/x.txt"), "x").expect("write");
    fs::write(proj.join("shards/b.txt"), "1\n2\n3\n").expect("write");
    let o = w.kinetic(&[
        "map",
        "work:count_lines",
        "--input-data",
        "shards/a",
        "shards/b.txt",
        "data:shards/a",
        "--poll-interval",
        "0.05",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "[\"x.txt\"]\n3\n[\"x.txt\"]\n");

    // A path that is not there is named before anything runs; --inputs and
    // --input-data do not mix.
    let o = w.kinetic(&["map", "work:count_lines", "--input-data", "shards/nope"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--input-data shards/nope"),
        "{}",
        stderr(&o)
    );
    let inputs = w.inputs("in.jsonl", &[json!(1)]);
    let o = w.kinetic(&[
        "map",
        "work:count_lines",
        "--inputs",
        &inputs,
        "--input-data",
        "shards/a",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
    let o = w.kinetic(&["map", "work:count_lines"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn a_batch_inputs_retry_sees_kinetic_attempt_2_as_a_single_jobs_retry_does() {
    // Issue 26.8, on the local backend: `map --retries` runs a failed input
    // again as a new job, which saw KINETIC_ATTEMPT=1 again.
    let w = World::new(WORK_PY);
    let marker = w.home.join("marker").to_string_lossy().into_owned();
    let inputs = w.inputs("markers.jsonl", &[json!(marker)]);
    let o = w.kinetic(&[
        "--json",
        "map",
        "work:attempt_after_failing",
        "--inputs",
        &inputs,
        "--retries",
        "1",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("JSON");
    assert_eq!(
        v["results"][0]["value"],
        json!(["second attempt", "2"]),
        "{v}"
    );
}
