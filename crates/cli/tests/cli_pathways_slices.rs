//! Multi-host TPU slices on the fake cluster (LeaderWorkerSet installed,
//! four `v5litepod-16` hosts: a pool that holds one slice), released by
//! the cluster when their function ends (issue 24 point 9): a detached
//! slice job frees its nodes with no client polling, so the next slice job
//! runs; and placed whole (point 10): a map over slices runs them one at a
//! time, never two in part on the pool's nodes, attached or detached, and
//! a queued slice says what the pool holds.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kinetic_fake_gcp::k8s::ApiError;
use serde_json::Value;

mod sandbox;

use sandbox::world::World;
use sandbox::{stderr, stdout};

const WORK_PY: &str = r#"
import os


def answer():
    return 42


def host_id():
    return int(os.environ["KINETIC_NODE_RANK"])


def slow_square(x):
    import time
    time.sleep(1.5)
    return x * x
"#;

const LWS: &str = "leaderworkersets.leaderworkerset.x-k8s.io";

async fn slice_world(bound: bool) -> World {
    let mut builder = World::gke(WORK_PY).pyproject().pathways();
    if !bound {
        builder = builder.slice_hosts_unbound();
    }
    builder.start().await
}

async fn kinetic_json(w: &World, args: &[&str]) -> Value {
    let o = w.kinetic(args).await;
    assert!(o.status.success(), "kinetic {args:?}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| {
        panic!(
            "kinetic {args:?}: not JSON ({e}): {}\n{}",
            stdout(&o),
            stderr(&o)
        )
    })
}

/// `work.py:answer` submitted detached on the slice; its job id.
async fn detached_answer(w: &World) -> String {
    let v = kinetic_json(
        w,
        &[
            "run",
            "work.py:answer",
            "--accelerator",
            "v5litepod-16",
            "--detach",
            "--json",
        ],
    )
    .await;
    v["job_id"].as_str().unwrap().to_owned()
}

/// The slice's pods that hold a node (bound and not terminal).
fn holding_pods(w: &World) -> Vec<String> {
    w.cluster()
        .objects("pods", "default")
        .into_iter()
        .filter(|p| p.pointer("/spec/nodeName").is_some())
        .filter(|p| {
            !matches!(
                p.pointer("/status/phase").and_then(Value::as_str),
                Some("Succeeded" | "Failed")
            )
        })
        .filter_map(|p| p.pointer("/metadata/name")?.as_str().map(str::to_owned))
        .collect()
}

/// Wait (no `kinetic` command meanwhile) until `done` holds, or `limit`.
async fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    done()
}

/// The only LeaderWorkerSet's annotation `key`, if any.
fn lws_annotation(w: &World, key: &str) -> Option<String> {
    let sets = w.cluster().objects(LWS, "default");
    sets.first()?
        .pointer("/metadata/annotations")?
        .get(key)?
        .as_str()
        .map(str::to_owned)
}

/// Issue 24, point 9: a detached slice job's hosts end their slice
/// themselves once its function ended (each reports on the
/// LeaderWorkerSet with its pod's service account token; the last one
/// writes the final state and scales the set to zero), so its TPU nodes
/// are free within a minute with no client polling, and the next slice
/// job runs. Status, result and logs read as after a client ended it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detached_slice_frees_its_nodes_with_no_client_polling() {
    let w = slice_world(true).await;
    let job_id = detached_answer(&w).await;
    assert!(
        wait_until(Duration::from_secs(60), || holding_pods(&w).len() == 4).await,
        "the slice never ran on its 4 hosts: {:?}",
        holding_pods(&w)
    );
    let calls_before = w.cluster().calls().count("get", LWS);
    let freed = wait_until(Duration::from_secs(60), || {
        holding_pods(&w).is_empty() && lws_annotation(&w, "kinetic.dev/final-state").is_some()
    })
    .await;
    assert!(
        freed,
        "a minute on, with no client, the slice still holds {:?} (final state {:?})",
        holding_pods(&w),
        lws_annotation(&w, "kinetic.dev/final-state")
    );
    // The hosts read the set themselves: no client did.
    assert!(w.cluster().calls().count("get", LWS) > calls_before);
    let state: Value =
        serde_json::from_str(&lws_annotation(&w, "kinetic.dev/final-state").unwrap()).unwrap();
    assert_eq!(state["status"], "SUCCEEDED", "{state}");
    assert_eq!(
        lws_annotation(&w, "kinetic.dev/hosts-finished").as_deref(),
        Some("[0, 1, 2, 3]")
    );
    let sets = w.cluster().objects(LWS, "default");
    assert_eq!(sets[0]["spec"]["replicas"], 0, "{}", sets[0]);

    let s = kinetic_json(&w, &["--json", "jobs", "status", &job_id]).await;
    assert_eq!(s["status"], "SUCCEEDED", "{s}");
    let o = w.kinetic(&["jobs", "result", &job_id]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "42", "{}", stderr(&o));

    // The nodes are free: the next slice job runs to its end.
    let v = kinetic_json(
        &w,
        &[
            "run",
            "work.py:host_id",
            "--accelerator",
            "v5litepod-16",
            "--json",
        ],
    )
    .await;
    assert_eq!(v["value"], 0, "{v}");
}

/// Without the hosts Role bound to the jobs' service account, the hosts
/// cannot end their slice (the API server refuses them, as RBAC says),
/// say why in their logs, and hold: the slice waits for a client, which
/// ends it on its first poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_hosts_role_a_slice_waits_for_a_client() {
    let w = slice_world(false).await;
    let job_id = detached_answer(&w).await;
    let refused = wait_until(Duration::from_secs(60), || {
        w.cluster().objects("pods", "default").iter().any(|p| {
            let name = p["metadata"]["name"].as_str().unwrap_or_default();
            w.cluster()
                .pod_log("default", name)
                .is_some_and(|l| l.contains("cannot end the slice itself (403"))
        })
    })
    .await;
    assert!(refused, "no host was refused");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(holding_pods(&w).len(), 4, "the slice holds its nodes");
    assert_eq!(lws_annotation(&w, "kinetic.dev/final-state"), None);

    let s = kinetic_json(&w, &["--json", "jobs", "status", &job_id]).await;
    assert_eq!(s["status"], "SUCCEEDED", "{s}");
    assert!(
        wait_until(Duration::from_secs(30), || holding_pods(&w).is_empty()).await,
        "the client's poll ended the slice: {:?}",
        holding_pods(&w)
    );
}

/// The slices not ended yet (label `job-name`; no final state on their
/// set) whose live pods (not being deleted, not terminal) are bound to
/// nodes now. An ended slice's pods may still hold nodes while the
/// controllers delete them (the leader first, then its workers with their
/// StatefulSet): they are on their way out, and the next slice takes the
/// nodes they leave.
fn slices_on_nodes(w: &World) -> BTreeSet<String> {
    let ended: BTreeSet<String> = w
        .cluster()
        .objects(LWS, "default")
        .into_iter()
        .filter(|s| {
            s.pointer("/metadata/annotations")
                .and_then(|a| a.get("kinetic.dev/final-state"))
                .is_some()
        })
        .filter_map(|s| s["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    w.cluster()
        .objects("pods", "default")
        .into_iter()
        .filter(|p| p.pointer("/spec/nodeName").is_some())
        .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
        .filter(|p| {
            !matches!(
                p.pointer("/status/phase").and_then(Value::as_str),
                Some("Succeeded" | "Failed")
            )
        })
        .filter_map(|p| {
            p.pointer("/metadata/labels/job-name")?
                .as_str()
                .map(str::to_owned)
        })
        .filter(|name| !ended.contains(name))
        .collect()
}

/// Sample [`slices_on_nodes`] every 20 ms until `stop`, returning every
/// sample where more than one slice held nodes.
async fn watch_sharing(w: &World, stop: &AtomicBool) -> Vec<BTreeSet<String>> {
    let mut shared = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let slices = slices_on_nodes(w);
        if slices.len() > 1 {
            shared.push(slices);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shared
}

/// Issue 24, point 10: a map of three slice jobs on a pool that holds one
/// slice, all submitted at once, runs all to the end: each slice is
/// admitted only while the pool is free, so no two slices ever hold parts
/// of its nodes (kube-scheduler, as the fake's, places pods one by one:
/// without admission two sets took 1 + 3 nodes and neither started).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_map_over_slices_on_a_pool_of_one_slice_runs_them_whole() {
    let w = slice_world(true).await;
    let inputs = w.sandbox().write("home/project/in.jsonl", "1\n2\n3\n");
    let stop = AtomicBool::new(false);
    let map = async {
        let o = w
            .kinetic(&[
                "map",
                "work:slow_square",
                "--inputs",
                inputs.to_str().unwrap(),
                "--accelerator",
                "v5litepod-16",
                "--max-concurrent",
                "3",
                "--poll-interval",
                "0.2",
            ])
            .await;
        stop.store(true, Ordering::Relaxed);
        o
    };
    let (o, shared) = tokio::join!(map, watch_sharing(&w, &stop));
    assert!(o.status.success(), "{}", stderr(&o));
    let values: Vec<String> = stdout(&o).lines().map(str::to_owned).collect();
    assert_eq!(values, ["1", "4", "9"], "{}", stderr(&o));
    assert_eq!(w.cluster().calls().count("create", LWS), 3);
    assert!(
        shared.is_empty(),
        "two slices held parts of the pool at once: {:?}",
        shared.first()
    );
}

/// `work:slow_square` mapped detached over `inputs` (JSON lines) on
/// v5litepod-16 slices, every input at once; its group id.
async fn detached_slice_map(w: &World, inputs: &str) -> String {
    let inputs = w.sandbox().write("home/project/in.jsonl", inputs);
    let v = kinetic_json(
        w,
        &[
            "map",
            "work:slow_square",
            "--inputs",
            inputs.to_str().unwrap(),
            "--accelerator",
            "v5litepod-16",
            "--max-concurrent",
            "3",
            "--detach",
            "--json",
        ],
    )
    .await;
    v["group_id"].as_str().unwrap().to_owned()
}

/// Whether there are `n` LeaderWorkerSets, each ended as succeeded.
fn all_slices_succeeded(w: &World, n: usize) -> bool {
    let sets = w.cluster().objects(LWS, "default");
    sets.len() == n
        && sets.iter().all(|s| {
            s.pointer("/metadata/annotations")
                .and_then(|a| a.get("kinetic.dev/final-state"))
                .and_then(Value::as_str)
                .is_some_and(|t| t.contains("SUCCEEDED"))
        })
}

/// Each LeaderWorkerSet's name, replicas and final state.
fn slice_states(w: &World) -> Vec<(Value, Value, Value)> {
    w.cluster()
        .objects(LWS, "default")
        .iter()
        .map(|s| {
            (
                s["metadata"]["name"].clone(),
                s["spec"]["replicas"].clone(),
                s["metadata"]["annotations"]["kinetic.dev/final-state"].clone(),
            )
        })
        .collect()
}

/// `kinetic batch results GROUP`'s lines.
async fn batch_results(w: &World, group: &str) -> Vec<String> {
    let o = w.kinetic(&["batch", "results", group]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o).lines().map(str::to_owned).collect()
}

/// The same map, detached: the client submits and leaves; the queued
/// slices say what the pool holds, and each slice's hosts, ending it,
/// admit the next, so the whole map runs with no client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detached_map_over_slices_runs_one_slice_after_another_with_no_client() {
    let w = slice_world(true).await;
    let group = detached_slice_map(&w, "1\n2\n3\n").await;
    let sets = w.cluster().objects(LWS, "default");
    assert_eq!(sets.len(), 3, "{sets:?}");
    let admitted: Vec<&Value> = sets.iter().filter(|s| s["spec"]["replicas"] == 1).collect();
    assert_eq!(admitted.len(), 1, "one slice admitted at a time: {sets:?}");
    let queued = sets
        .iter()
        .find(|s| s["spec"]["replicas"] == 0)
        .expect("a queued slice");
    let job_id = queued["metadata"]["labels"]["job-id"].as_str().unwrap();
    let o = w.kinetic(&["jobs", "status", job_id]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("PENDING")
            && stdout(&o).contains(
                "waiting: pool tpu-v5-lite-podslice 4x4 holds 1 slice of 4 hosts, 1 in use"
            ),
        "{}",
        stdout(&o)
    );

    // No client from here on: the hosts admit one slice after another.
    let stop = AtomicBool::new(false);
    let done = async {
        let done = wait_until(Duration::from_secs(120), || all_slices_succeeded(&w, 3)).await;
        stop.store(true, Ordering::Relaxed);
        done
    };
    let (all_done, shared) = tokio::join!(done, watch_sharing(&w, &stop));
    assert!(
        all_done,
        "the slices did not all run with no client: {:?}",
        slice_states(&w)
    );
    assert!(
        shared.is_empty(),
        "two slices held parts of the pool at once: {:?}",
        shared.first()
    );
    assert_eq!(batch_results(&w, &group).await, ["1", "4", "9"]);
}

/// A detached map whose API server is busy when the first slice's host
/// admits the next (API Priority and Fairness answers 429, an overloaded
/// server 503): with no client to admit it later, the host tries again,
/// and the second slice runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detached_map_admits_its_next_slice_through_a_busy_api_server() {
    let w = slice_world(true).await;
    let group = detached_slice_map(&w, "1\n2\n").await;
    // The host's listing of the pool's slices is the only list call from
    // here on: the first two fail.
    let faults = w.cluster().faults();
    faults.fail_on(
        "list",
        0,
        ApiError::new(
            429,
            "TooManyRequests",
            "too many requests, please try again later",
        ),
    );
    faults.fail_on(
        "list",
        0,
        ApiError::new(
            503,
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        ),
    );
    let lists = faults.calls("list");
    let all_done = wait_until(Duration::from_secs(120), || all_slices_succeeded(&w, 2)).await;
    assert!(
        all_done,
        "the second slice never ran: {:?}",
        slice_states(&w)
    );
    assert!(faults.calls("list") >= lists + 3, "both faults were met");
    assert_eq!(batch_results(&w, &group).await, ["1", "4"]);
}
