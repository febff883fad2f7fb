//! `kinetic map` on worker processes (`--isolation workers`, the default)
//! on the local backend, through the real binary, the host's python3 and a
//! directory store: every input keeps its own job (value, error, attempts,
//! logs, cancel) while a few workers run them all, and an input that kills
//! its process ends alone.

mod local_world;

use std::collections::BTreeSet;
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use local_world::World;

const WORK_PY: &str = r#"
import os
import sys
import time


def who(x):
    # The process that started this input's process: its worker, or its
    # own supervisor.
    return [x * x, os.getppid()]


def exits_on_two(x):
    if x == 2:
        print("input 2 leaves its process", flush=True)
        os._exit(3)
    return [x, os.getppid()]


def exits_first_time(marker):
    if not os.path.exists(marker):
        open(marker, "w").write("tried")
        os._exit(7)
    return ["second attempt", os.environ["KINETIC_ATTEMPT"], os.environ["JOB_ID"]]


def says(x):
    print("line of input %d" % x, flush=True)
    print("stderr of input %d" % x, file=sys.stderr, flush=True)
    return x


def fails_at_40(x):
    # Quick inputs first (the pool's queue deepens with their rate), then
    # a failure, then inputs that leave a mark only after 0.3 s: one a
    # worker took just before the stop was seen is stopped before that.
    if x < 40:
        time.sleep(0.01)
    elif x == 40:
        raise ValueError("input 40 fails")
    else:
        time.sleep(0.3)
    open(os.path.join(os.environ["MARKS"], str(x)), "w").write("ran")
    return x


CALLS = []


def counts(x):
    # The calls this interpreter made, and what an earlier input left in
    # the environment (nothing: each input starts from the worker's).
    CALLS.append(x)
    left = os.environ.get("SET_BY_AN_INPUT")
    os.environ["SET_BY_AN_INPUT"] = str(x)
    if x == 3:
        os._exit(5)
    return [x, os.getpid(), len(CALLS), left]


def marks_and_sleeps(x):
    open(os.path.join(os.environ["MARKS"], str(x)), "w").write("started")
    time.sleep(60)
    return x


def fails_or_sleeps(x):
    if x == 0:
        raise ValueError("input 0 fails")
    time.sleep(60)
    return x
"#;

impl World {
    /// The folder `marks/` in the home, where the functions that take it
    /// from `MARKS` leave a file per input they ran, and the `--env`
    /// value that gives it to the jobs.
    fn marks(&self) -> (std::path::PathBuf, String) {
        let marks = self.home.join("marks");
        std::fs::create_dir_all(&marks).expect("mkdir");
        let env = format!("MARKS={}", marks.display());
        (marks, env)
    }

    /// `kinetic --json map ENTRY --inputs FILE ARGS…`, its JSON document.
    fn map_json(&self, entry: &str, inputs: &str, args: &[&str]) -> (Output, Value) {
        let mut all = vec!["--json", "map", entry, "--inputs", inputs];
        all.extend_from_slice(args);
        let o = self.kinetic(&all);
        let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {}\n{}",
                String::from_utf8_lossy(&o.stdout),
                stderr(&o)
            )
        });
        (o, v)
    }
}

/// Each input's job id, in input order, from a results document.
fn children(v: &Value) -> Vec<String> {
    v["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["job_id"].as_str().expect("a job id").to_owned())
        .collect()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn numbers(n: i64) -> Vec<Value> {
    (0..n).map(|i| json!(i)).collect()
}

/// The parent pids of `[value, ppid]` results.
fn parents(results: &Value) -> BTreeSet<i64> {
    results
        .as_array()
        .expect("results")
        .iter()
        .filter_map(|r| r["value"][1].as_i64())
        .collect()
}

#[test]
fn inputs_run_in_order_on_at_most_max_concurrent_workers_and_process_isolation_starts_one_each() {
    let w = World::new(WORK_PY);
    let inputs = w.inputs("in.jsonl", &numbers(12));
    let (o, v) = w.map_json(
        "work:who",
        &inputs,
        &["--max-concurrent", "2", "--poll-interval", "0.05"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let squares: Vec<i64> = v["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["value"][0].as_i64().expect("a value"))
        .collect();
    assert_eq!(squares, (0..12).map(|i| i * i).collect::<Vec<_>>());
    let workers = parents(&v["results"]);
    assert!(
        !workers.is_empty() && workers.len() <= 2,
        "12 inputs with --max-concurrent 2 ran under {} processes: {workers:?}",
        workers.len()
    );

    let (o, v) = w.map_json(
        "work:who",
        &inputs,
        &[
            "--max-concurrent",
            "2",
            "--poll-interval",
            "0.05",
            "--isolation",
            "process",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        parents(&v["results"]).len(),
        12,
        "process isolation: a supervisor per input"
    );

    let o = w.kinetic(&[
        "map",
        "work:who",
        "--inputs",
        &inputs,
        "--isolation",
        "threads",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--isolation") && stderr(&o).contains("workers or process"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn an_input_that_exits_its_process_fails_alone_and_its_worker_goes_on() {
    let w = World::new(WORK_PY);
    let inputs = w.inputs("in.jsonl", &numbers(8));
    let (o, v) = w.map_json(
        "work:exits_on_two",
        &inputs,
        &["--max-concurrent", "1", "--poll-interval", "0.05"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let results = v["results"].as_array().expect("results");
    assert_eq!(results.len(), 8, "{v}");
    for (i, r) in results.iter().enumerate() {
        if i == 2 {
            assert!(r["value"].is_null(), "{r}");
            let text = r.to_string();
            assert!(
                text.contains('3'),
                "input 2's error names its exit code: {r}"
            );
        } else {
            assert_eq!(r["value"][0], json!(i), "{r}");
        }
    }
    // One worker ran them all: the input that left its process took only
    // its worker's executor with it.
    assert_eq!(parents(&v["results"]).len(), 1, "{v}");
    let children = children(&v);
    let o = w.kinetic(&["jobs", "logs", &children[2]]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("input 2 leaves its process"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_worker_calls_its_function_for_input_after_input_in_one_interpreter_and_replaces_one_an_input_ended()
 {
    let w = World::new(WORK_PY);
    let inputs = w.inputs("in.jsonl", &numbers(6));
    let (o, v) = w.map_json(
        "work:counts",
        &inputs,
        &["--max-concurrent", "1", "--poll-interval", "0.05"],
    );
    assert_eq!(o.status.code(), Some(1), "{}\n{v}", stderr(&o));
    let results = v["results"].as_array().expect("results");
    let seen: Vec<(i64, i64, i64)> = results
        .iter()
        .filter(|r| !r["value"].is_null())
        .map(|r| {
            assert!(
                r["value"][3].is_null(),
                "no input sees another's variable: {r}"
            );
            let n = |i: usize| r["value"][i].as_i64().expect("a number");
            (n(0), n(1), n(2))
        })
        .collect();
    // The pool takes inputs oldest first among those queued, and the
    // engine queues a few at once, so their order may differ: what holds
    // is that the five other inputs ran in at most two interpreters (the
    // one input 3 ended, and the one the worker made after it), each
    // calling the function for its inputs in turn (its counts 1, 2, …;
    // one of them ran three at least). One fork per input would count 1
    // in five processes.
    assert_eq!(
        seen.iter().map(|s| s.0).collect::<Vec<_>>(),
        [0, 1, 2, 4, 5],
        "{v}"
    );
    let mut by_process: std::collections::BTreeMap<i64, Vec<i64>> = Default::default();
    for (_, pid, calls) in &seen {
        by_process.entry(*pid).or_default().push(*calls);
    }
    assert!(
        (1..=2).contains(&by_process.len()),
        "the interpreter input 3 ended and the one made after it ran the others: {v}"
    );
    for calls in by_process.values_mut() {
        calls.sort_unstable();
        let turns: Vec<i64> = (1..).take(calls.len()).collect();
        assert_eq!(
            *calls, turns,
            "one interpreter called the function for input after input: {v}"
        );
    }
    assert!(
        results[3]["value"].is_null() && results[3].to_string().contains('5'),
        "{v}"
    );
}

#[test]
fn an_input_that_exits_its_process_is_retried_alone_with_kinetic_attempt_2() {
    let w = World::new(WORK_PY);
    let markers: Vec<Value> = (0..3)
        .map(|i| json!(w.home.join(format!("marker-{i}")).to_string_lossy()))
        .collect();
    let inputs = w.inputs("markers.jsonl", &markers);
    let (o, v) = w.map_json(
        "work:exits_first_time",
        &inputs,
        &[
            "--retries",
            "1",
            "--max-concurrent",
            "2",
            "--poll-interval",
            "0.05",
        ],
    );
    assert!(o.status.success(), "{}\n{v}", stderr(&o));
    let children = children(&v);
    for (i, r) in v["results"].as_array().expect("results").iter().enumerate() {
        assert_eq!(r["value"][0], "second attempt", "{r}");
        assert_eq!(r["value"][1], "2", "input {i} retried as attempt 2: {r}");
        // JOB_ID is the input's own (the retry's), not its worker's first.
        assert_eq!(r["value"][2].as_str(), Some(children[i].as_str()), "{r}");
    }
}

#[test]
fn each_inputs_logs_hold_its_own_lines_only() {
    let w = World::new(WORK_PY);
    let inputs = w.inputs("in.jsonl", &numbers(6));
    let (o, v) = w.map_json(
        "work:says",
        &inputs,
        &[
            "--max-concurrent",
            "2",
            "--poll-interval",
            "0.05",
            "--no-cleanup",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let children = children(&v);
    assert_eq!(children.len(), 6);
    for (i, child) in children.iter().enumerate() {
        let o = w.kinetic(&["jobs", "logs", child]);
        assert!(o.status.success(), "{}", stderr(&o));
        let text = String::from_utf8_lossy(&o.stdout);
        let lines: Vec<&str> = text.lines().filter(|l| l.contains("of input")).collect();
        let mut want = vec![format!("line of input {i}"), format!("stderr of input {i}")];
        let mut got: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        want.sort();
        got.sort();
        assert_eq!(got, want, "job {child} (input {i}): {text}");
    }
}

#[test]
fn fail_fast_cancels_the_inputs_running_on_workers() {
    let w = World::new(WORK_PY);
    let inputs = w.inputs("in.jsonl", &numbers(6));
    let started = Instant::now();
    let (o, v) = w.map_json(
        "work:fails_or_sleeps",
        &inputs,
        &[
            "--max-concurrent",
            "3",
            "--poll-interval",
            "0.05",
            "--fail-fast",
            "--cancel-running-on-fail",
            "--no-cleanup",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}\n{v}", stderr(&o));
    assert!(
        started.elapsed() < Duration::from_secs(45),
        "the sleeping inputs were not cancelled: {:?}",
        started.elapsed()
    );
    let group = v["group_id"].as_str().expect("group_id").to_owned();
    let o = w.kinetic(&["batch", "status", &group, "--json"]);
    let status: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(
        status["counts"]["succeeded"].as_u64().unwrap_or(0),
        0,
        "{status}"
    );
    // No input's process is left running.
    for job in status["jobs"].as_array().expect("jobs") {
        assert_ne!(job["status"], "RUNNING", "{status}");
    }
}

#[test]
fn a_batch_cancelled_from_another_process_starts_no_input_after_the_cancel() {
    // `kinetic map` runs two inputs at a time; `kinetic batch cancel` from
    // another process stops them. The map reads them stopped: that must
    // not free their room for the four inputs it has not submitted yet.
    let w = World::new(WORK_PY);
    let (marks, marks_env) = w.marks();
    let inputs = w.inputs("in.jsonl", &numbers(6));
    let mut map = w
        .command(&[
            "--json",
            "map",
            "work:marks_and_sleeps",
            "--inputs",
            &inputs,
            "--max-concurrent",
            "2",
            "--poll-interval",
            "0.05",
            "--env",
            &marks_env,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kinetic map");
    // The pool takes the oldest input queued; the engine queues a few at
    // once, so which two start first may vary.
    let started = || {
        (0..6)
            .filter(|i| marks.join(i.to_string()).exists())
            .collect::<Vec<_>>()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while started().len() < 2 {
        assert!(Instant::now() < deadline, "two inputs never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = started();
    let groups: Vec<_> = std::fs::read_dir(w.home.join("local/groups"))
        .expect("groups")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(groups.len(), 1, "{groups:?}");
    let o = w.kinetic(&["batch", "cancel", &groups[0]]);
    assert!(o.status.success(), "{}", stderr(&o));
    let deadline = Instant::now() + Duration::from_secs(30);
    while map.try_wait().expect("wait").is_none() {
        assert!(
            Instant::now() < deadline,
            "kinetic map goes on after its batch was cancelled (inputs started: {:?})",
            started()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = map.wait_with_output().expect("output");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(started(), before, "no input started after the cancel");
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    let results = v["results"].as_array().expect("results");
    assert_eq!(results.len(), 6, "{v}");
    for r in results {
        assert!(r.to_string().contains("cancelled"), "{r}");
    }
}

/// A `work.py` whose import appends this process's pid to `imports.txt`
/// in the home, and whose `version` returns `[VERSION, x]`.
fn counted_work(home: &std::path::Path, version: &str) -> String {
    format!(
        r#"
import os

with open({imports:?}, "a") as f:
    f.write("%d\n" % os.getpid())

VERSION = {version:?}


def version(x):
    return [VERSION, x]
"#,
        imports = home.join("imports.txt").to_string_lossy(),
    )
}

/// The imports `counted_work` recorded so far.
fn imports(w: &World) -> usize {
    std::fs::read_to_string(w.home.join("imports.txt"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[test]
fn a_worker_imports_the_function_once_for_all_its_inputs_and_process_isolation_once_per_input() {
    let w = World::with_work(|home| counted_work(home, "v1"));
    let inputs = w.inputs("in.jsonl", &numbers(6));
    let (o, v) = w.map_json(
        "work:version",
        &inputs,
        &["--max-concurrent", "1", "--poll-interval", "0.05"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let values: Vec<Value> = v["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["value"].clone())
        .collect();
    assert_eq!(values, (0..6).map(|i| json!(["v1", i])).collect::<Vec<_>>());
    assert_eq!(imports(&w), 1, "one worker, one import for 6 inputs");

    let (o, _) = w.map_json(
        "work:version",
        &inputs,
        &[
            "--max-concurrent",
            "1",
            "--poll-interval",
            "0.05",
            "--isolation",
            "process",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        imports(&w),
        1 + 6,
        "process isolation: one import per input"
    );
}

#[test]
fn a_second_batch_after_the_project_changed_runs_the_new_code() {
    let w = World::with_work(|home| counted_work(home, "v1"));
    let inputs = w.inputs("in.jsonl", &numbers(3));
    let args = ["--max-concurrent", "1", "--poll-interval", "0.05"];
    let (o, v) = w.map_json("work:version", &inputs, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(v["results"][2]["value"], json!(["v1", 2]), "{v}");
    // At once, while the first batch's worker may still be there.
    std::fs::write(
        w.home.join("proj").join("work.py"),
        counted_work(&w.home, "v2"),
    )
    .expect("write");
    let (o, v) = w.map_json("work:version", &inputs, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    for (i, r) in v["results"].as_array().expect("results").iter().enumerate() {
        assert_eq!(r["value"], json!(["v2", i]), "{v}");
    }
    assert_eq!(imports(&w), 2, "one import per batch");
}

/// Each input's error (phase, type, message), as its `result.json` in
/// the store holds it, of `entry` mapped over 3 inputs with `--isolation
/// isolation`.
fn errors(w: &World, entry: &str, isolation: &str) -> Vec<Value> {
    let inputs = w.inputs("in.jsonl", &numbers(3));
    let (o, v) = w.map_json(
        entry,
        &inputs,
        &[
            "--max-concurrent",
            "1",
            "--poll-interval",
            "0.05",
            "--no-cleanup",
            "--isolation",
            isolation,
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}\n{v}", stderr(&o));
    children(&v)
        .iter()
        .map(|child| {
            let path = w.home.join("store").join(child).join("result.json");
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}\n{v}", path.display()));
            let doc: Value = serde_json::from_str(&text).expect("result.json");
            let e = &doc["error"];
            json!([e["phase"], e["type"], e["message"]])
        })
        .collect()
}

#[test]
fn a_failure_in_the_shared_phases_fails_each_input_as_process_isolation_does() {
    // The import raises (after the definition the client checks).
    let w = World::new(
        "import os\n\ndef version(x):\n    return x\n\nif not os.environ.get('NEVER_SET'):\n    raise RuntimeError('cannot import work')\n",
    );
    let workers = errors(&w, "work:version", "workers");
    assert_eq!(workers, errors(&w, "work:version", "process"));
    assert_eq!(workers.len(), 3);
    for e in &workers {
        assert_eq!(e[0], "entrypoint load", "{e}");
        assert_eq!(e[1], "RuntimeError", "{e}");
        assert_eq!(e[2], "cannot import work", "{e}");
    }
    // The module imports, but has no such function once imported.
    let w = World::new("def version(x):\n    return x\n\ndel version\n");
    let workers = errors(&w, "work:version", "workers");
    assert_eq!(workers, errors(&w, "work:version", "process"));
    for e in &workers {
        assert_eq!(e[0], "entrypoint load", "{e}");
        assert!(
            e[2].as_str().is_some_and(|m| m.contains("'version'")),
            "{e}"
        );
    }
}

#[test]
fn fail_fast_withdraws_the_inputs_queued_in_the_pool_before_they_start() {
    let w = World::new(WORK_PY);
    let (marks, marks_env) = w.marks();
    let inputs = w.inputs("in.jsonl", &numbers(400));
    let (o, v) = w.map_json(
        "work:fails_at_40",
        &inputs,
        &[
            "--max-concurrent",
            "1",
            "--poll-interval",
            "0.05",
            "--fail-fast",
            "--no-cleanup",
            "--env",
            &marks_env,
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}\n{v}", stderr(&o));
    let results = v["results"].as_array().expect("results");
    let ran = |i: usize| marks.join(i.to_string()).exists();
    let store = w.home.join("store");
    // The inputs before the failure ran; the failure is the batch's error.
    for (i, r) in results.iter().enumerate().take(40) {
        assert_eq!(r["value"], json!(i), "{r}");
        assert!(ran(i));
    }
    assert!(!ran(40));
    // Every later input either ran to its end (a worker had started it
    // before the failure was seen) or never started: no mark, no result.
    let mut withdrawn = 0;
    let mut finished = 0;
    for (i, r) in results.iter().enumerate().skip(41) {
        if r["value"] == json!(i) {
            finished += 1;
            assert!(ran(i));
            continue;
        }
        assert!(!ran(i), "skipped input {i} ran: {r}");
        if let Some(job) = r["job_id"].as_str() {
            // Submitted, queued in the pool, then withdrawn.
            withdrawn += 1;
            assert!(
                !store.join(job).join("result.json").exists(),
                "withdrawn input {i} has a result"
            );
        }
    }
    assert!(finished <= 2, "{finished} inputs ran after the failure");
    assert!(
        withdrawn >= 3,
        "the pool's queue held only {withdrawn} inputs at the failure"
    );
    let group = v["group_id"].as_str().expect("group_id").to_owned();
    let o = w.kinetic(&["batch", "status", &group, "--json"]);
    let status: Value = serde_json::from_slice(&o.stdout).expect("json");
    // Read again by another process: the inputs never submitted are
    // skipped; the withdrawn ones are named by the manifest and read as
    // their jobs ended, failed (cancelled), with the failing input.
    let never = 359 - finished - withdrawn;
    assert_eq!(
        status["counts"]["skipped"].as_u64(),
        Some(never),
        "{status}"
    );
    assert_eq!(
        status["counts"]["failed"].as_u64(),
        Some(1 + withdrawn),
        "{status}"
    );
}

#[test]
fn an_import_that_outlives_the_run_deadline_is_stopped_in_the_worker() {
    // The worker imports the function before it forks the input: its run
    // deadline must stop the import there too, or the worker would hold
    // every input behind a 60 s import.
    let w = World::new("import time\n\ntime.sleep(60)\n\ndef version(x):\n    return x\n");
    let inputs = w.inputs("in.jsonl", &numbers(2));
    let started = Instant::now();
    let (o, v) = w.map_json(
        "work:version",
        &inputs,
        &[
            "--max-concurrent",
            "1",
            "--poll-interval",
            "0.05",
            "--run-deadline",
            "2",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}\n{v}", stderr(&o));
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "the imports were not stopped: {:?}",
        started.elapsed()
    );
    for r in v["results"].as_array().expect("results") {
        assert!(
            r["error"].as_str().is_some_and(|e| e.contains("deadline")),
            "{r}"
        );
    }
}

/// A retried input's child is its input's attempt 2 (its function saw
/// `KINETIC_ATTEMPT=2`): its attempt history says so too, in `kinetic jobs
/// status CHILD` and in the history its batch's polls kept in the store,
/// instead of counting its one run from 1 again.
#[test]
fn a_retried_inputs_child_records_the_attempt_number_its_function_saw() {
    let w = World::new(WORK_PY);
    let marker = json!(w.home.join("marker").to_string_lossy());
    let inputs = w.inputs("one.jsonl", &[marker]);
    let (o, v) = w.map_json(
        "work:exits_first_time",
        &inputs,
        &["--retries", "1", "--poll-interval", "0.05", "--no-cleanup"],
    );
    assert!(o.status.success(), "{}\n{v}", stderr(&o));
    assert_eq!(v["results"][0]["value"][1], "2", "{v}");
    let child = &children(&v)[0];
    let numbers = |attempts: &Value| -> Vec<Value> {
        attempts
            .as_array()
            .unwrap_or_else(|| panic!("{attempts}"))
            .iter()
            .map(|a| a["number"].clone())
            .collect()
    };
    let kept = w.home.join("store").join(child).join("attempts.json");
    let kept: Value =
        serde_json::from_slice(&std::fs::read(&kept).expect("the kept history")).expect("JSON");
    assert_eq!(numbers(&kept["attempts"]), [json!(2)], "{kept}");
    let o = w.kinetic(&["--json", "jobs", "status", child]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(
        numbers(&s["attempts"]),
        [json!(2)],
        "the input's second run: {s}"
    );
}
