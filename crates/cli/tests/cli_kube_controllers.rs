//! The gke and pathways backends as Kubernetes' real components make them
//! behave, through the real `kinetic` binary against the fake cluster
//! (issue 24): a cluster without the LeaderWorkerSet CRD and a role
//! without `leaderworkersets`, deletions a node never confirms, and pods
//! deleted under a Job (a preempted node's, through PodGC; evicted ones).

use std::io::{BufRead, BufReader};
use std::process::{Output, Stdio};
use std::time::Duration;

use kinetic_fake_gcp::k8s::{FakeCluster, FakeNode};
use serde_json::Value;

mod sandbox;

use sandbox::world::{JOBS_BUCKET, World};

const WORK_PY: &str = r#"
def square(x):
    print("squaring", x, flush=True)
    return x * x


def wait_for(path):
    import os
    import time
    print("waiting", flush=True)
    while not os.path.exists(path):
        time.sleep(0.05)
    return "released"
"#;

/// `kinetic ARGS`, which must succeed; its stdout as JSON.
async fn kinetic_json(w: &World, args: &[&str]) -> Value {
    let o: Output = w.kinetic(args).await;
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{args:?}\nstdout: {out}\nstderr: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `jobs list` on a cluster that does not serve LeaderWorkerSets (404 on
/// their list) and for a user bound to `edit`, which has no
/// `leaderworkersets` (403 on their list): the gke jobs are listed, the
/// pathways backend is named with why, and the command succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_list_lists_the_gke_jobs_and_says_why_pathways_cannot_be_listed() {
    let w = World::gke(WORK_PY).pyproject().start().await;
    let v = kinetic_json(
        &w,
        &[
            "run",
            "work.py:square",
            "--arg",
            "7",
            "--backend",
            "gke",
            "--json",
            "--no-cleanup",
        ],
    )
    .await;
    assert_eq!(v["value"], 49, "{v}");
    let job_id = v["job_id"].as_str().unwrap().to_owned();

    // No LeaderWorkerSet CRD: its list is a 404.
    let o = w.kinetic(&["jobs", "list"]).await;
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "stdout: {out}\nstderr: {err}");
    assert!(out.contains(&job_id), "stdout: {out}\nstderr: {err}");
    assert!(
        err.contains("warning: the pathways backend's jobs are not listed")
            && err.contains("CRD is not installed"),
        "{err}"
    );
    let listed = kinetic_json(&w, &["--json", "jobs", "list"]).await;
    assert_eq!(listed[0]["job_id"], job_id.as_str(), "{listed}");

    // The CRD installed, and the caller bound to the documented `edit`
    // role, which does not aggregate LeaderWorkerSet's: a 403.
    w.cluster().install_leader_worker_set().unwrap();
    w.cluster().add_user("dev", "fake-token");
    w.cluster().bind_role("dev", "edit", "default").unwrap();
    let o = w.kinetic(&["jobs", "list"]).await;
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "stdout: {out}\nstderr: {err}");
    assert!(out.contains(&job_id), "stdout: {out}\nstderr: {err}");
    assert!(
        err.contains("warning: the pathways backend's jobs are not listed")
            && err.contains("leaderworkersets")
            && err.contains("missing permission"),
        "{err}"
    );
}

/// `work.py:square` of 7 on gke, kept (`--no-cleanup`); its job id.
async fn kept_square(w: &World) -> String {
    let v = kinetic_json(
        w,
        &[
            "run",
            "work.py:square",
            "--arg",
            "7",
            "--backend",
            "gke",
            "--json",
            "--no-cleanup",
        ],
    )
    .await;
    assert_eq!(v["value"], 49, "{v}");
    v["job_id"].as_str().unwrap().to_owned()
}

/// The node of the only pod, whose kubelet then stops confirming
/// deletions: the Job's foreground deletion waits on its pod.
fn unconfirming_node(cluster: &FakeCluster) -> String {
    let pods = cluster.objects("pods", "default");
    assert_eq!(pods.len(), 1, "{pods:?}");
    let node = pods[0]["spec"]["nodeName"].as_str().unwrap().to_owned();
    cluster.confirm_deletions(&node, false);
    node
}

/// True once the only Job is being deleted.
fn job_deleting(cluster: &FakeCluster) -> bool {
    cluster
        .objects("jobs.batch", "default")
        .iter()
        .any(|j| j["metadata"]["deletionTimestamp"].is_string())
}

/// `jobs cleanup` of a Job whose pod's node never confirms the deletion
/// waits on a watch: a GET or two, not several a second (it polled 710
/// times in 180 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_watches_a_deletion_the_node_does_not_confirm() {
    let w = World::gke(WORK_PY).pyproject().start().await;
    let cluster = w.cluster();
    let job_id = kept_square(&w).await;
    let node = unconfirming_node(cluster);
    cluster.calls().reset();
    let args = ["jobs", "cleanup", job_id.as_str()];
    let cleanup = w.kinetic(&args);
    let watch = async {
        // Until the waiter watches (or shows it polls instead)…
        while cluster.calls().count("watch", "jobs.batch") == 0
            && cluster.calls().count("get", "jobs.batch") < 20
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // …and a while longer, the Job held by its unconfirmed pod.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let calls = cluster.calls().snapshot();
        assert!(job_deleting(cluster), "the Job waits on its pod");
        cluster.confirm_deletions(&node, true);
        calls
    };
    let (o, calls) = tokio::join!(cleanup, watch);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let gets = calls.get("get jobs.batch").copied().unwrap_or(0);
    let watches = calls.get("watch jobs.batch").copied().unwrap_or(0);
    assert!(
        watches >= 1 && gets <= 3,
        "waited with {gets} GETs and {watches} watches: {calls:?}"
    );
    assert!(cluster.objects("jobs.batch", "default").is_empty());
}

/// `jobs result` prints the value it has before it waits on the cleanup
/// (it waited minutes on a slice's deletion first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_prints_the_value_before_the_cleanup_wait() {
    let w = World::gke(WORK_PY).pyproject().start().await;
    let cluster = w.cluster();
    let job_id = kept_square(&w).await;
    let node = unconfirming_node(cluster);
    let mut child = w
        .sandbox()
        .command(&["jobs", "result", &job_id], &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    // The value comes while the Job is still there (its deletion not
    // started, or held by the node); a value that waits for the node is
    // late.
    let mut held = 0;
    let line = loop {
        if let Ok(line) = rx.try_recv() {
            break Some(line);
        }
        if job_deleting(cluster) {
            held += 1;
            if held > 60 {
                break None;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let still_there = !cluster.objects("jobs.batch", "default").is_empty();
    cluster.confirm_deletions(&node, true);
    let out =
        tokio::task::spawn_blocking(move || sandbox::wait_within(child, Duration::from_secs(120)))
            .await
            .unwrap();
    let line = line.unwrap_or_else(|| {
        panic!(
            "no value while the cleanup waited on the node; stderr: {}",
            text(&out.stderr)
        )
    });
    assert_eq!(line.trim(), "49", "stderr: {}", text(&out.stderr));
    assert!(still_there, "the value came before the Job was gone");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(cluster.objects("jobs.batch", "default").is_empty());
}

/// The node of the job's pod once one runs (and is the only one not
/// ending), after `previous` pods were seen running.
async fn running_pod(cluster: &FakeCluster, seen: &[String]) -> (String, String) {
    for _ in 0..600 {
        let pods = cluster.objects("pods", "default");
        let running = pods.iter().find(|p| {
            p["status"]["phase"] == "Running"
                && p["metadata"]["deletionTimestamp"].is_null()
                && !seen
                    .iter()
                    .any(|s| p["metadata"]["name"].as_str() == Some(s.as_str()))
        });
        if let Some(p) = running {
            return (
                p["metadata"]["name"].as_str().unwrap().to_owned(),
                p["spec"]["nodeName"].as_str().unwrap().to_owned(),
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no new pod ran: {:?}", cluster.objects("pods", "default"));
}

/// The attempts kept in the store for `job_id`.
fn stored_attempts(w: &World, job_id: &str) -> Vec<Value> {
    let Some(bytes) = w
        .gcs()
        .object(JOBS_BUCKET, &format!("{job_id}/attempts.json"))
    else {
        return Vec::new();
    };
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    v["attempts"].as_array().cloned().unwrap_or_default()
}

/// GKE reclaims a Spot VM by deleting its node; the pod garbage collector
/// then force-deletes the node's pods, and the Job controller creates a
/// replacement. With `--restarts 1`, the second such loss spends the
/// budget whoever deleted the pods (counted from the pods alone, the
/// attempts started again with each deletion and the Job replaced pods
/// without limit): the Job's events still name the deleted pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_budget_is_spent_when_pod_gc_deletes_a_lost_nodes_pods() {
    let w = World::gke(WORK_PY).pyproject().start().await;
    let cluster = w.cluster();
    for i in 1..=2 {
        cluster
            .add_node(&FakeNode::cpu(&format!("spare-{i}")))
            .unwrap();
    }
    let never = w.sandbox().path("never-released");
    let arg = serde_json::to_string(&never.display().to_string()).unwrap();
    let v = kinetic_json(
        &w,
        &[
            "run",
            "work.py:wait_for",
            "--arg",
            &arg,
            "--backend",
            "gke",
            "--restarts",
            "1",
            "--detach",
            "--json",
        ],
    )
    .await;
    let job_id = v["job_id"].as_str().unwrap().to_owned();

    // The first node goes: its pod is force-deleted, and replaced.
    let (first, node) = running_pod(cluster, &[]).await;
    cluster.delete_node(&node).unwrap();
    let (second, node) = running_pod(cluster, std::slice::from_ref(&first)).await;
    assert!(
        !pod_names(cluster).contains(&first),
        "PodGC deleted the lost node's pod"
    );
    let s = kinetic_json(&w, &["--json", "jobs", "status", &job_id]).await;
    assert_eq!(s["status"], "RUNNING", "{s}");
    assert_eq!(s["attempts"].as_array().map(Vec::len), Some(2), "{s}");
    assert_eq!(stored_attempts(&w, &job_id).len(), 2);

    // The second node goes: one restart allowed, two spent.
    cluster.delete_node(&node).unwrap();
    let mut last = Value::Null;
    for _ in 0..200 {
        last = kinetic_json(&w, &["--json", "jobs", "status", &job_id]).await;
        if last["status"] == "FAILED" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last["status"], "FAILED", "{last}");
    assert_eq!(last["reason"]["kind"], "restarts_spent", "{last}");
    let kept = stored_attempts(&w, &job_id);
    assert!(kept.len() >= 3, "{kept:?}");
    assert_eq!(kept[0]["host"], first.as_str(), "{kept:?}");
    assert_eq!(kept[1]["host"], second.as_str(), "{kept:?}");
}

fn pod_names(cluster: &FakeCluster) -> Vec<String> {
    cluster
        .objects("pods", "default")
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// A history kept in the store is never written shorter by a process that
/// sees fewer attempts than it holds: here, once the Job's events expired
/// (after an hour on a real cluster) and PodGC deleted the first pod, a
/// new `jobs status` sees one pod and keeps both attempts, the first as
/// deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_process_never_writes_a_shorter_attempt_history() {
    let w = World::gke(WORK_PY).pyproject().start().await;
    let cluster = w.cluster();
    cluster.add_node(&FakeNode::cpu("spare-1")).unwrap();
    let never = w.sandbox().path("never-released");
    let arg = serde_json::to_string(&never.display().to_string()).unwrap();
    let v = kinetic_json(
        &w,
        &[
            "run",
            "work.py:wait_for",
            "--arg",
            &arg,
            "--backend",
            "gke",
            "--restarts",
            "3",
            "--detach",
            "--json",
        ],
    )
    .await;
    let job_id = v["job_id"].as_str().unwrap().to_owned();
    let (first, node) = running_pod(cluster, &[]).await;
    // Seen running, and kept.
    let s = kinetic_json(&w, &["--json", "jobs", "status", &job_id]).await;
    assert_eq!(s["attempts"].as_array().map(Vec::len), Some(1), "{s}");
    assert_eq!(stored_attempts(&w, &job_id).len(), 1);
    // Its node goes; the events naming it expire.
    cluster.delete_node(&node).unwrap();
    let (second, _) = running_pod(cluster, std::slice::from_ref(&first)).await;
    for e in cluster.objects("events", "default") {
        let name = e["metadata"]["name"].as_str().unwrap().to_owned();
        cluster.remove_object("events", "default", &name);
    }
    let s = kinetic_json(&w, &["--json", "jobs", "status", &job_id]).await;
    let kept = stored_attempts(&w, &job_id);
    assert_eq!(kept.len(), 2, "{kept:?} {s}");
    assert_eq!(kept[0]["host"], first.as_str(), "{kept:?}");
    assert_eq!(kept[0]["outcome"], "evicted", "{kept:?}");
    assert_eq!(kept[1]["host"], second.as_str(), "{kept:?}");
    assert_eq!(s["attempts"].as_array().map(Vec::len), Some(2), "{s}");
    assert_eq!(s["status"], "RUNNING", "{s}");
}

/// Two evictions through the Eviction API (`kubectl drain`, the cluster
/// autoscaler) with `--restarts 1`: each evicted pod is deleted once it
/// stopped, and the Job replaces it; the second spends the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_evictions_spend_a_restart_budget_of_one() {
    let w = World::gke(WORK_PY).pyproject().start().await;
    let cluster = w.cluster();
    let never = w.sandbox().path("never-released");
    let arg = serde_json::to_string(&never.display().to_string()).unwrap();
    let v = kinetic_json(
        &w,
        &[
            "run",
            "work.py:wait_for",
            "--arg",
            &arg,
            "--backend",
            "gke",
            "--restarts",
            "1",
            "--detach",
            "--json",
        ],
    )
    .await;
    let job_id = v["job_id"].as_str().unwrap().to_owned();
    let mut seen = Vec::new();
    for _ in 0..2 {
        let (pod, _) = running_pod(cluster, &seen).await;
        cluster.evict("default", &pod).unwrap();
        seen.push(pod);
    }
    let mut last = Value::Null;
    for _ in 0..200 {
        last = kinetic_json(&w, &["--json", "jobs", "status", &job_id]).await;
        if last["status"] == "FAILED" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last["status"], "FAILED", "{last}");
    assert_eq!(last["reason"]["kind"], "restarts_spent", "{last}");
    for pod in &seen {
        assert!(!pod_names(cluster).contains(pod), "{pod} was deleted");
    }
}

/// A budget spent stays spent once the pods and the events naming them
/// are gone: the attempts the backend saw are recorded on the Job, and
/// merged with what it sees next. With `--restarts 1`: the first node
/// goes (seen), the Job's events expire, the second node goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_budget_outlives_the_pods_and_their_events() {
    let w = World::gke(WORK_PY).pyproject().start().await;
    let cluster = w.cluster();
    for i in 1..=2 {
        cluster
            .add_node(&FakeNode::cpu(&format!("spare-{i}")))
            .unwrap();
    }
    let never = w.sandbox().path("never-released");
    let arg = serde_json::to_string(&never.display().to_string()).unwrap();
    let v = kinetic_json(
        &w,
        &[
            "run",
            "work.py:wait_for",
            "--arg",
            &arg,
            "--backend",
            "gke",
            "--restarts",
            "1",
            "--detach",
            "--json",
        ],
    )
    .await;
    let job_id = v["job_id"].as_str().unwrap().to_owned();
    let (first, node) = running_pod(cluster, &[]).await;
    cluster.delete_node(&node).unwrap();
    let (_, node) = running_pod(cluster, std::slice::from_ref(&first)).await;
    let s = kinetic_json(&w, &["--json", "jobs", "status", &job_id]).await;
    assert_eq!(s["status"], "RUNNING", "{s}");
    for e in cluster.objects("events", "default") {
        let name = e["metadata"]["name"].as_str().unwrap().to_owned();
        cluster.remove_object("events", "default", &name);
    }
    cluster.delete_node(&node).unwrap();
    let mut last = Value::Null;
    for _ in 0..200 {
        last = kinetic_json(&w, &["--json", "jobs", "status", &job_id]).await;
        if last["status"] == "FAILED" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last["status"], "FAILED", "{last}");
    assert_eq!(last["reason"]["kind"], "restarts_spent", "{last}");
}
