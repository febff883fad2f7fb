//! Issue 27's batch promises on the cluster backends, through the real
//! `kinetic` binary (`map`, `batch`, `jobs`) against the fake cluster and
//! the fake GCS server of `kinetic-fake-gcp`: each scenario runs once on
//! gke and once on pathways ([`Cluster`]), with the default isolation
//! (`workers`: the backend decides which process runs an input), and
//! checks only what a user sees through the CLI, never how many
//! Kubernetes objects carry the batch: values in input order and each
//! value as its input completes, retries per input with
//! `KINETIC_ATTEMPT`, fail-fast, `batch cancel`, a resume after the map's
//! process was killed (SIGKILL), each input's own log and attempts, and an
//! input that kills its interpreter (`os._exit`).
//!
//! On gke the scenarios map more inputs than `--max-concurrent` (but the
//! one that checks `--cancel-running-on-fail`, which needs every input
//! running at once), so each pod runs a block of inputs, one after the
//! other, in forks of one interpreter (`docs/batches.md`).
//!
//! Pathways runs every input on its own multi-host slice (a
//! `v5litepod-16`: a leader and three workers): a slice is the unit of
//! scheduling and of failure there (a LeaderWorkerSet's replicas are whole
//! groups, and a preempted slice loses whatever it runs), so a batch keeps
//! one slice per input (docs/batches.md, "Plan for gke and pathways").
//! The world's pool holds one slice, admitted one at a time, so the
//! pathways scenarios keep to two or three inputs.
//!
//! Every host of a slice runs the function; the functions below record
//! their side effects (the calls the test counts) on the leader only,
//! but for a function that fails, whose slice may stop its leader once a
//! worker failed first.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod sandbox;

use sandbox::world::{JOBS_BUCKET, World};
use sandbox::{stderr, stdout};

/// The project's `work.py`; `marks` is the folder (outside the project)
/// where the functions leave what the test reads.
fn work_py(marks: &Path) -> String {
    format!(
        r#"
import os
import sys
import time

MARKS = {marks:?}


def leader():
    return os.environ.get("KINETIC_NODE_RANK", "0") == "0"


def note(kind, x):
    """One line `x` in MARKS/kind.log, from the leader only."""
    if leader():
        with open(os.path.join(MARKS, kind + ".log"), "a") as out:
            out.write("%s\n" % x)


def held(x):
    """Runs until the test writes MARKS/release-x."""
    note("started", x)
    while not os.path.exists(os.path.join(MARKS, "release-%d" % x)):
        time.sleep(0.05)
    return x * x


def flaky(x):
    attempt = os.environ["KINETIC_ATTEMPT"]
    print("input %d runs attempt %s" % (x, attempt), flush=True)
    print("input %d says so on stderr" % x, file=sys.stderr, flush=True)
    if attempt == "1":
        raise RuntimeError("input %d fails on attempt 1" % x)
    return [x * 10, attempt]


def first_fails(x):
    # From every host: a slice whose worker failed first may stop its
    # leader before the leader got here.
    with open(os.path.join(MARKS, "called.log"), "a") as out:
        out.write("%s\n" % x)
    if x == 0:
        raise ValueError("input 0 fails")
    time.sleep(1)
    return x


def beats(x):
    """Appends to MARKS/beats-x every 0.1 s until it is stopped."""
    note("started", x)
    beat(x)


def beat(x):
    while True:
        if leader():
            with open(os.path.join(MARKS, "beats-%d" % x), "a") as out:
                out.write(".")
        time.sleep(0.1)


def fails_once_others_run(x):
    """Input 0 fails once `others` more inputs started (or after 30 s);
    the others beat until they are stopped."""
    i, others = x
    note("started", i)
    if i != 0:
        beat(i)
    deadline = time.time() + 30
    while time.time() < deadline:
        with open(os.path.join(MARKS, "started.log")) as log:
            if len(log.read().split()) > others:
                break
        time.sleep(0.05)
    raise ValueError("input 0 fails")


def slow(x):
    note("called", x)
    time.sleep(0.3)
    return x * 10


def exits(x):
    """Ends its interpreter with exit code 3 on every attempt (`exits`
    "always"), on the first only ("first") or never."""
    attempt = os.environ["KINETIC_ATTEMPT"]
    if x["exits"] == "always" or (x["exits"] == "first" and attempt == "1"):
        print("input %d leaves its interpreter" % x["i"], flush=True)
        os._exit(3)
    return [x["i"], attempt]
"#,
        marks = marks.display().to_string()
    )
}

/// The cluster backend a scenario runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cluster {
    /// GKE Jobs on the fake cluster's CPU nodes.
    Gke,
    /// A `v5litepod-16` slice per input (four TPU hosts, one pool).
    Pathways,
}

impl Cluster {
    /// A fake cluster world for this backend: the project's `work.py`
    /// writes to `marks/` in the sandbox; pods get 300 ms between SIGTERM
    /// and SIGKILL.
    async fn world(self) -> World {
        let mut builder = World::gke("")
            .pyproject()
            .kill_grace(Duration::from_millis(300));
        if self == Cluster::Pathways {
            builder = builder.pathways();
        }
        let w = builder.start().await;
        let marks = w.sandbox().path("marks");
        std::fs::create_dir_all(&marks).unwrap();
        w.sandbox().write("home/project/work.py", &work_py(&marks));
        w
    }

    /// The flags that send a map to this backend.
    fn flags(self) -> &'static [&'static str] {
        match self {
            Cluster::Gke => &["--backend", "gke"],
            Cluster::Pathways => &["--accelerator", "v5litepod-16"],
        }
    }

    /// `gke` inputs on gke, fewer on pathways (one slice at a time).
    fn inputs(self, gke: usize, pathways: usize) -> usize {
        match self {
            Cluster::Gke => gke,
            Cluster::Pathways => pathways,
        }
    }
}

/// `kinetic map ENTRY` over `inputs` (JSON values) on `cluster`, with
/// `extra` flags, polling every 50 ms: the map's argument list.
fn map_args(
    w: &World,
    cluster: Cluster,
    entry: &str,
    inputs: &[Value],
    extra: &[&str],
) -> Vec<String> {
    let text: String = inputs.iter().map(|v| format!("{v}\n")).collect();
    let file = w.sandbox().write("home/project/inputs.jsonl", &text);
    let mut args: Vec<String> = ["map", entry, "--inputs"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(file.display().to_string());
    args.extend(cluster.flags().iter().map(|s| s.to_string()));
    args.extend(["--poll-interval", "0.05"].iter().map(|s| s.to_string()));
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

async fn kinetic(w: &World, args: &[String]) -> Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    w.kinetic(&args).await
}

/// `kinetic --json ARGS`, whatever its exit: its JSON document.
async fn kinetic_json(w: &World, args: &[&str]) -> (Output, Value) {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let o = w.kinetic(&all).await;
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "kinetic {args:?}: not JSON ({e}): {}\n{}",
            stdout(&o),
            stderr(&o)
        )
    });
    (o, v)
}

/// `0, 1, … n-1` as JSON inputs.
fn numbers(n: usize) -> Vec<Value> {
    (0..n).map(|i| json!(i)).collect()
}

/// The lines of `marks/{kind}.log`, as numbers, in the order written.
fn marks(w: &World, kind: &str) -> Vec<usize> {
    let path = w.sandbox().path(&format!("marks/{kind}.log"));
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| l.parse().expect("a number"))
        .collect()
}

/// Each input's job id, in input order, from a results document.
fn children(v: &Value) -> Vec<String> {
    v["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results in {v}"))
        .iter()
        .map(|r| r["job_id"].as_str().expect("a job id").to_owned())
        .collect()
}

/// Wait (at most `limit`) until `done` holds, checking every 100 ms.
async fn until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "never saw {what} in {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How long each of inputs `0..n`'s `marks/beats-{i}` is.
fn beat_lengths(w: &World, n: usize) -> Vec<u64> {
    (0..n)
        .map(|i| {
            std::fs::metadata(w.sandbox().path(&format!("marks/beats-{i}")))
                .map(|m| m.len())
                .unwrap_or(0)
        })
        .collect()
}

/// Wait (at most 20 s) until no input's beats grew for a second: their
/// processes stopped, `after` what.
async fn beats_stop(w: &World, n: usize, after: &str) {
    let start = Instant::now();
    loop {
        let before = beat_lengths(w, n);
        tokio::time::sleep(Duration::from_secs(1)).await;
        if beat_lengths(w, n) == before {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "inputs still run 20 s after {after}: {before:?}"
        );
    }
}

/// The batch's statuses (`kinetic batch status GROUP --json`): each
/// input's status and the kind of its reason (`FAILED (cancelled)`), in
/// input order.
async fn statuses(w: &World, group: &str) -> Vec<String> {
    let (o, v) = kinetic_json(w, &["batch", "status", group]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let mut jobs: Vec<(u64, String)> = v["jobs"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|j| {
            let status = j["status"].as_str().unwrap_or_default();
            let status = match j["reason"]["kind"].as_str() {
                Some(kind) => format!("{status} ({kind})"),
                None => status.to_owned(),
            };
            (j["index"].as_u64().expect("an index"), status)
        })
        .collect();
    jobs.sort();
    jobs.into_iter().map(|(_, s)| s).collect()
}

/// The id of the only batch in the jobs bucket, once its manifest exists.
fn group_id(w: &World) -> Option<String> {
    w.gcs()
        .list_objects(JOBS_BUCKET)
        .into_iter()
        .find_map(|(name, _)| {
            name.strip_prefix("_groups/")?
                .strip_suffix("/manifest.json")
                .map(str::to_owned)
        })
}

/// Runs `$scenario(Cluster::Gke)` and `$scenario(Cluster::Pathways)` as
/// two tests, `gke` and `pathways`, in a module named after the scenario.
macro_rules! on_both_clusters {
    ($scenario:ident) => {
        mod $scenario {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn gke() {
                super::$scenario(super::Cluster::Gke).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn pathways() {
                super::$scenario(super::Cluster::Pathways).await;
            }
        }
    };
}

/// Values in input order, and each value as its input completes: every
/// input runs until the test releases it; the test releases the running
/// input of highest index each time, reads its value with `jobs result`
/// while the others still run, and the batch's values come in input
/// order all the same (`kinetic batch results`).
async fn values_in_input_order_and_each_as_it_completes(cluster: Cluster) {
    let w = cluster.world().await;
    // On gke, two pods of three inputs each (a block per pod).
    let n = cluster.inputs(6, 2);
    let max = cluster.inputs(2, 2);
    let args = map_args(
        &w,
        cluster,
        "work:held",
        &numbers(n),
        &["--max-concurrent", &max.to_string(), "--detach"],
    );
    let o = kinetic(&w, &args).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let group = stdout(&o).trim().to_owned();
    // Wait until as many run as may (pathways admits one slice at a
    // time), so that they complete in the order they are released.
    let running = cluster.inputs(max, 1);
    until("the inputs running", Duration::from_secs(60), || {
        marks(&w, "started").len() == running
    })
    .await;
    let mut released: Vec<usize> = Vec::new();
    while released.len() < n {
        // The running input (started and not released) of highest index.
        let running = || {
            marks(&w, "started")
                .into_iter()
                .filter(|i| !released.contains(i))
                .max()
        };
        until("the next input running", Duration::from_secs(60), || {
            running().is_some()
        })
        .await;
        let next = running().expect("a running input");
        w.sandbox().write(&format!("marks/release-{next}"), "");
        released.push(next);
        // Its value is there as soon as it completed, the others still
        // running or waiting.
        let (o, v) = kinetic_json(&w, &["batch", "status", &group]).await;
        assert!(o.status.success(), "{}", stderr(&o));
        let job = v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["index"] == next)
            .unwrap_or_else(|| panic!("input {next} has no job: {v}"))["job_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let o = w.kinetic(&["jobs", "result", &job]).await;
        assert!(o.status.success(), "input {next}: {}", stderr(&o));
        assert_eq!(stdout(&o).trim(), (next * next).to_string());
        let now = statuses(&w, &group).await;
        for (i, status) in now.iter().enumerate() {
            if !released.contains(&i) {
                assert_ne!(status, "SUCCEEDED", "input {i} was never released: {now:?}");
            }
        }
    }
    let o = w.kinetic(&["batch", "results", &group]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let want: String = (0..n).map(|i| format!("{}\n", i * i)).collect();
    assert_eq!(stdout(&o), want, "{}", stderr(&o));
}
on_both_clusters!(values_in_input_order_and_each_as_it_completes);

/// `--retries 1` runs each input that failed again, alone, as attempt 2
/// (`KINETIC_ATTEMPT`): every value right; and each input's log
/// (`kinetic jobs logs CHILD`, read after the map cleaned its jobs up)
/// holds its own lines on stdout and stderr and no other input's, and
/// says which attempt it is (attempt 2 only: the first attempt's lines
/// are not mixed in).
async fn each_input_is_retried_with_kinetic_attempt_and_keeps_its_own_log(cluster: Cluster) {
    let w = cluster.world().await;
    let n = cluster.inputs(6, 2);
    let max = cluster.inputs(2, 3).to_string();
    let args = map_args(
        &w,
        cluster,
        "work:flaky",
        &numbers(n),
        &["--retries", "1", "--max-concurrent", &max, "--json"],
    );
    let o = kinetic(&w, &args).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), n, "{v}");
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r["value"], json!([i * 10, "2"]), "input {i}: {v}");
    }
    for (i, child) in children(&v).iter().enumerate() {
        let o = w.kinetic(&["jobs", "logs", child]).await;
        assert!(o.status.success(), "{}", stderr(&o));
        let log = stdout(&o);
        for line in [
            format!("input {i} runs attempt 2"),
            format!("input {i} says so on stderr"),
            format!("[kinetic] startup: job {child}"),
        ] {
            assert!(log.contains(&line), "{line:?} not in {child}'s log: {log}");
        }
        for line in log.lines() {
            if line.starts_with("input ") {
                assert!(
                    line.starts_with(&format!("input {i} ")),
                    "{child} (input {i}) shows another input's line {line:?}: {log}"
                );
            }
            if let Some(job) = line.strip_prefix("[kinetic] startup: job ") {
                assert!(job.starts_with(child.as_str()), "{child}'s log: {log}");
            }
            if let Some(attempt) = line.strip_prefix("[kinetic] startup: attempt ") {
                // "2 (claimed under …, after 1 earlier run(s) of this
                // batch input)": how the runner knows is the backend's.
                assert!(attempt.starts_with("2 ("), "{child}'s log: {log}");
            }
        }
        assert!(
            !log.contains(&format!("input {i} runs attempt 1")),
            "{child}'s log holds its first attempt's lines: {log}"
        );
        assert!(
            log.contains("[kinetic] startup: attempt 2 ("),
            "{child}'s log names no attempt: {log}"
        );
    }
}
on_both_clusters!(each_input_is_retried_with_kinetic_attempt_and_keeps_its_own_log);

/// `--fail-fast`: once input 0 failed for good, the later inputs are not
/// run (skipped, never submitted or cancelled), the map fails, and its
/// error names the input that failed and why.
async fn fail_fast_runs_no_later_input_and_names_the_failed_one(cluster: Cluster) {
    let w = cluster.world().await;
    let n = cluster.inputs(5, 3);
    let args = map_args(
        &w,
        cluster,
        "work:first_fails",
        &numbers(n),
        &["--fail-fast", "--max-concurrent", "1"],
    );
    let o = kinetic(&w, &args).await;
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("input 0 (job ") && l.contains("ValueError: input 0 fails")),
        "the error names input 0 and why it failed: {err}"
    );
    let called = marks(&w, "called");
    assert!(called.contains(&0), "input 0 never ran: {called:?}");
    assert!(
        !called.contains(&(n - 1)),
        "the last input ran after input 0 failed: {called:?}\n{err}"
    );
    // Each input's line: input 0's error, then the later inputs marked as
    // failed for the fail-fast (none of them has a value).
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), n, "{out}");
    assert!(
        lines[0].starts_with("!error 0: ") && lines[0].contains("ValueError: input 0 fails"),
        "{out}"
    );
    for (i, line) in lines.iter().enumerate().skip(1) {
        assert!(line.starts_with(&format!("!error {i}: ")), "{out}");
    }
    assert!(lines[n - 1].contains("fail-fast"), "{out}");
}
on_both_clusters!(fail_fast_runs_no_later_input_and_names_the_failed_one);

/// `kinetic batch cancel` stops a detached batch: every input ends
/// cancelled, the running inputs' processes stop, and no input waiting
/// for its turn starts.
async fn batch_cancel_stops_every_input(cluster: Cluster) {
    let w = cluster.world().await;
    let n = cluster.inputs(6, 2);
    let max = cluster.inputs(2, 2).to_string();
    let args = map_args(
        &w,
        cluster,
        "work:beats",
        &numbers(n),
        &["--max-concurrent", &max, "--detach"],
    );
    let o = kinetic(&w, &args).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let group = stdout(&o).trim().to_owned();
    until("an input running", Duration::from_secs(60), || {
        !marks(&w, "started").is_empty()
    })
    .await;
    let o = w.kinetic(&["batch", "cancel", &group]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let now = statuses(&w, &group).await;
    assert!(
        now.iter().all(|s| s == "FAILED (cancelled)"),
        "after batch cancel: {now:?}"
    );
    beats_stop(&w, n, "batch cancel").await;
    // And stay stopped: no input waiting for its turn starts later.
    let started = marks(&w, "started");
    let beats = beat_lengths(&w, n);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        marks(&w, "started"),
        started,
        "an input started after cancel"
    );
    assert_eq!(beat_lengths(&w, n), beats, "an input ran after cancel");
    let o = w.kinetic(&["batch", "wait", &group]).await;
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // What a person reads: the failures were the cancel.
    let o = w.kinetic(&["batch", "status", &group]).await;
    assert_eq!(
        stdout(&o),
        format!("{group}: {n}/{n} done: {n} failed ({n} cancelled)\n"),
        "{}",
        stderr(&o)
    );
}
on_both_clusters!(batch_cancel_stops_every_input);

/// `--fail-fast --cancel-running-on-fail` on gke: input 0 fails while
/// the others run, and the map stops them: it ends at once, each other
/// input with an error and no value, their processes stopped. (Gke only:
/// pathways runs one slice of a pool at a time, so nothing else runs
/// when a slice fails; its queued inputs are the fail-fast case above.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_fast_cancel_running_on_fail_stops_the_running_inputs_on_gke() {
    let cluster = Cluster::Gke;
    let w = cluster.world().await;
    let n = 3;
    let inputs: Vec<Value> = (0..n).map(|i| json!([[i, n - 1]])).collect();
    let args = map_args(
        &w,
        cluster,
        "work:fails_once_others_run",
        &inputs,
        &[
            "--max-concurrent",
            "3",
            "--fail-fast",
            "--cancel-running-on-fail",
            "--json",
        ],
    );
    let started = Instant::now();
    let o = kinetic(&w, &args).await;
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&o), stderr(&o)));
    assert_eq!(o.status.code(), Some(1), "{}\n{v}", stderr(&o));
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the running inputs were not stopped: {:?}",
        started.elapsed()
    );
    let mut ran = marks(&w, "started");
    ran.sort_unstable();
    assert_eq!(ran, (0..n).collect::<Vec<_>>(), "every input ran");
    let results = v["results"].as_array().unwrap();
    assert!(
        results[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("ValueError: input 0 fails")),
        "{v}"
    );
    for r in &results[1..] {
        assert!(r["value"].is_null() && r["error"].is_string(), "{v}");
    }
    beats_stop(&w, n, "the map ended").await;
}

/// A map whose process is killed (SIGKILL) once an input ran: `batch
/// wait` names the inputs it left unsubmitted, and `kinetic batch resume`
/// finishes the batch: every value in input order, each input run once.
async fn a_map_killed_by_sigkill_is_resumed_with_each_input_run_once(cluster: Cluster) {
    let w = cluster.world().await;
    let n = cluster.inputs(4, 3);
    let max = cluster.inputs(2, 1).to_string();
    let args = map_args(
        &w,
        cluster,
        "work:slow",
        &numbers(n),
        &["--max-concurrent", &max],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut map = w
        .sandbox()
        .command(&args, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while marks(&w, "called").is_empty() {
        if let Some(status) = map.try_wait().unwrap() {
            panic!("kinetic map ended ({status}) before any input ran");
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no input ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    map.kill().unwrap();
    map.wait().unwrap();
    let group = group_id(&w).expect("the batch's manifest");
    // `batch wait` says at once which inputs the killed map left
    // unsubmitted, and the command that submits them.
    let manifest: Value = serde_json::from_slice(
        &w.gcs()
            .object(JOBS_BUCKET, &format!("_groups/{group}/manifest.json"))
            .expect("the manifest"),
    )
    .unwrap();
    if manifest["submission_complete"] != true {
        let o = w.kinetic(&["batch", "wait", &group]).await;
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("were never submitted")
                && stderr(&o).contains(&format!("resume with `kinetic batch resume {group}`")),
            "{}",
            stderr(&o)
        );
    }
    let o = w.kinetic(&["batch", "resume", &group]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let want: String = (0..n).map(|i| format!("{}\n", i * 10)).collect();
    assert_eq!(stdout(&o), want, "{}", stderr(&o));
    let mut called = marks(&w, "called");
    called.sort_unstable();
    assert_eq!(called, (0..n).collect::<Vec<_>>(), "each input ran once");
}
on_both_clusters!(a_map_killed_by_sigkill_is_resumed_with_each_input_run_once);

/// An input that ends its interpreter (`os._exit(3)`) on every attempt
/// fails alone, its error naming the exit code; one that does so on its
/// first attempt only is retried alone (`--retries 1`), as attempt 2; the
/// other inputs run once, their values right.
async fn an_input_that_exits_its_interpreter_fails_or_is_retried_alone(cluster: Cluster) {
    let w = cluster.world().await;
    let exits: &[&str] = match cluster {
        Cluster::Gke => &["never", "always", "first", "never"],
        Cluster::Pathways => &["first", "always"],
    };
    let inputs: Vec<Value> = exits
        .iter()
        .enumerate()
        .map(|(i, exits)| json!([{"i": i, "exits": exits}]))
        .collect();
    let args = map_args(
        &w,
        cluster,
        "work:exits",
        &inputs,
        &["--retries", "1", "--max-concurrent", "2", "--json"],
    );
    let o = kinetic(&w, &args).await;
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&o), stderr(&o)));
    assert_eq!(o.status.code(), Some(1), "{}\n{v}", stderr(&o));
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), exits.len(), "{v}");
    for (i, (r, exits)) in results.iter().zip(exits).enumerate() {
        match *exits {
            "always" => {
                assert!(r["value"].is_null(), "{r}");
                let error = r["error"].as_str().unwrap_or_default();
                assert!(
                    error.contains("exited with code 3"),
                    "input {i}'s error names its exit code: {r}"
                );
            }
            "first" => assert_eq!(r["value"], json!([i, "2"]), "input {i}: {v}"),
            _ => assert_eq!(r["value"], json!([i, "1"]), "input {i}: {v}"),
        }
    }
    assert_eq!(v["failed"], 1, "{v}");
}
on_both_clusters!(an_input_that_exits_its_interpreter_fails_or_is_retried_alone);
