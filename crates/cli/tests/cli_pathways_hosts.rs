//! A lost Pathways host is seen (issue 24, point 3): the real `kinetic`
//! binary on a four-host slice of the fake cluster, whose StatefulSet
//! controller deletes a failed pod silently (Kubernetes 1.32) and whose
//! LeaderWorkerSet controller tells a recreated group under its release's
//! name (`RecreateGroupOnPodRestart` in v0.5.1, `RecreateGroup` from
//! v0.9): the job fails with a reason naming the host, and `jobs logs`
//! shows every host's output, the failing host's first.

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;

mod sandbox;

use sandbox::world::World;

const LWS: &str = "leaderworkersets.leaderworkerset.x-k8s.io";

/// `hold` runs on every host for minutes; `die_on_2` kills host 2's
/// container (its whole process group, as the OOM killer ends a
/// container) and holds elsewhere; `g` fails on host 2 only.
const WORK_PY: &str = r#"
import os, signal, time


def hold():
    time.sleep(300)
    return "held"


def die_on_2():
    if os.environ["KINETIC_NODE_RANK"] == "2":
        time.sleep(1)
        os.killpg(os.getpgid(0), signal.SIGKILL)
    time.sleep(300)
    return "held"


def g():
    if os.environ["KINETIC_NODE_RANK"] == "2":
        raise ValueError("host 2 broke")
    return "fine"
"#;

async fn slice() -> World {
    let w = World::gke("").pyproject().pathways().start().await;
    w.sandbox().write("home/project/work.py", WORK_PY);
    w
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

async fn kinetic_json(w: &World, args: &[&str]) -> Value {
    let o: Output = w.kinetic(args).await;
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{args:?}\nstdout: {out}\nstderr: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Submit `func` detached on the slice; its job id.
async fn submit(w: &World, func: &str) -> String {
    let v = kinetic_json(
        w,
        &[
            "run",
            func,
            "--accelerator",
            "v5litepod-16",
            "--detach",
            "--json",
        ],
    )
    .await;
    v["job_id"].as_str().unwrap().to_owned()
}

/// Poll `check` every 100 ms until it returns `Some`, for at most 90 s.
async fn wait_for<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The slice's pods (name → pod), once all four run.
async fn running_hosts(w: &World) -> Vec<Value> {
    wait_for("four running hosts", async || {
        let pods: Vec<Value> = w
            .cluster()
            .objects("pods", "default")
            .into_iter()
            .filter(|p| p["metadata"]["labels"]["app"] == "kinetic-pathways")
            .filter(|p| p["metadata"].get("deletionTimestamp").is_none())
            .collect();
        let running = pods
            .iter()
            .filter(|p| p["status"]["phase"] == "Running")
            .count();
        (running == 4).then_some(pods)
    })
    .await
}

fn name(p: &Value) -> &str {
    p["metadata"]["name"].as_str().unwrap()
}

/// A worker evicted by its kubelet (phase `Failed`) is deleted by the
/// StatefulSet controller and made again under its name, with nothing but
/// `SuccessfulDelete`/`SuccessfulCreate` to tell it: the job is `FAILED`
/// with a reason naming worker 2 and its pod, never `PENDING` on the pod
/// made again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_lost_to_a_silent_statefulset_delete_fails_the_job_naming_it() {
    let w = slice().await;
    let job = submit(&w, "work.py:hold").await;
    let pods = running_hosts(&w).await;
    let s = kinetic_json(&w, &["--json", "jobs", "status", &job]).await;
    assert_eq!(s["status"], "RUNNING", "{s}");
    // That read recorded each host's pod UID on the LeaderWorkerSet.
    let set = &w.cluster().objects(LWS, "default")[0];
    let record: Value = serde_json::from_str(
        set["metadata"]["annotations"]["kinetic.dev/hosts"]
            .as_str()
            .unwrap_or_else(|| panic!("no record of the hosts on {set}")),
    )
    .unwrap();
    for p in &pods {
        assert_eq!(record[name(p)]["uid"], p["metadata"]["uid"], "{record}");
    }
    let worker = pods
        .iter()
        .find(|p| name(p).ends_with("-0-2"))
        .expect("worker 2")
        .clone();
    // Its kubelet evicts it under memory pressure; the StatefulSet deletes
    // the failed pod and makes it again under its name, before any poll.
    assert!(w.cluster().evict_by_kubelet(
        "default",
        name(&worker),
        "The node was low on resource: memory."
    ));
    let old_uid = worker["metadata"]["uid"].as_str().unwrap().to_owned();
    wait_for("worker 2 made again", async || {
        let now = w.cluster().object("pods", "default", name(&worker))?;
        (now["metadata"]["uid"].as_str() != Some(old_uid.as_str())).then_some(())
    })
    .await;
    // The first poll after it says so.
    let s = kinetic_json(&w, &["--json", "jobs", "status", &job]).await;
    assert_eq!(s["status"], "FAILED", "{s}");
    assert_eq!(s["reason"]["kind"], "host_lost", "{s}");
    assert_eq!(s["reason"]["host"], 2, "{s}");
    assert_eq!(s["reason"]["pod"], name(&worker), "{s}");
    let cause = s["reason"]["cause"].as_str().unwrap();
    assert!(cause.starts_with("failed"), "{s}");
    // The text says it as well.
    let o = w.kinetic(&["jobs", "status", &job]).await;
    let out = text(&o.stdout);
    assert!(
        out.contains(&format!("worker 2 (pod {})", name(&worker))),
        "{out}{}",
        text(&o.stderr)
    );
    // What the cluster told: a silent delete, no failure event.
    let events = w.cluster().objects("events", "default");
    let reasons: Vec<&str> = events
        .iter()
        .filter(|e| e["involvedObject"]["kind"] == "StatefulSet")
        .filter_map(|e| e["reason"].as_str())
        .collect();
    assert!(reasons.contains(&"SuccessfulDelete"), "{reasons:?}");
    assert!(!reasons.contains(&"RecreatingFailedPod"), "{reasons:?}");
    // The failure was recorded: the slice is scaled to no group.
    let lws = w.cluster().objects(LWS, "default");
    assert_eq!(lws[0]["spec"]["replicas"], 0, "{lws:?}");
}

/// Host 2's container is killed; the LeaderWorkerSet controller at
/// `release` recreates the group before any client looks, and the pods
/// made again all run: the first `jobs status` still says the job failed,
/// naming worker 2, from the controller's event under its release's name.
async fn a_group_recreated_before_any_poll_is_seen(release: Option<&str>, event: &str) {
    let w = slice().await;
    if let Some(release) = release {
        w.cluster().set_leader_worker_set_release(release);
    }
    let job = submit(&w, "work.py:die_on_2").await;
    let first: Vec<String> = running_hosts(&w)
        .await
        .iter()
        .map(|p| p["metadata"]["uid"].as_str().unwrap().to_owned())
        .collect();
    wait_for("the group made again", async || {
        let told = w
            .cluster()
            .objects("events", "default")
            .iter()
            .any(|e| e["reason"] == event);
        let pods = running_hosts(&w).await;
        let fresh = pods
            .iter()
            .all(|p| !first.contains(&p["metadata"]["uid"].as_str().unwrap().to_owned()));
        (told && fresh).then_some(())
    })
    .await;
    let s = kinetic_json(&w, &["--json", "jobs", "status", &job]).await;
    assert_eq!(s["status"], "FAILED", "{s}");
    assert_eq!(s["reason"]["kind"], "host_lost", "{s}");
    assert_eq!(s["reason"]["host"], 2, "{s}");
    let cause = s["reason"]["cause"].as_str().unwrap();
    assert!(cause.contains(&format!("({event})")), "{s}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_recreated_under_lws_v0_5_1_is_a_lost_host() {
    a_group_recreated_before_any_poll_is_seen(None, "RecreateGroupOnPodRestart").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_recreated_under_lws_v0_9_is_a_lost_host() {
    a_group_recreated_before_any_poll_is_seen(Some("v0.9.0"), "RecreateGroup").await;
}

/// `jobs logs` of a slice whose worker 2 raised: every host's output under
/// a header naming it, worker 2's first, with its traceback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_logs_shows_every_host_the_failed_workers_traceback_first() {
    let w = slice().await;
    let job = submit(&w, "work.py:g").await;
    let o = w.kinetic(&["jobs", "result", &job]).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let o = w.kinetic(&["jobs", "logs", &job]).await;
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    let first = out.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("==> host 2 (worker 2, failed: ValueError: host 2 broke"),
        "{out}"
    );
    let at = |needle: &str| {
        out.find(needle)
            .unwrap_or_else(|| panic!("{needle:?} not in {out}"))
    };
    let leader = at("==> host 0 (leader");
    assert!(at("Traceback (most recent call last)") < leader, "{out}");
    assert!(at("ValueError: host 2 broke") < leader, "{out}");
    // Every host has its section (a host the slice's end stopped before its
    // runner started says it stored nothing).
    for host in [1, 3] {
        assert!(
            leader < at(&format!("==> host {host} (worker {host}) <==")),
            "{out}"
        );
    }
    // --tail takes each host's last lines, the order kept.
    let o = w.kinetic(&["jobs", "logs", &job, "--tail", "2"]).await;
    let out = text(&o.stdout);
    assert!(out.starts_with("==> host 2 (worker 2, failed"), "{out}");
    assert_eq!(out.matches("==> host ").count(), 4, "{out}");
}
