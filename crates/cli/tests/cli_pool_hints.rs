//! Issue 24 point 6: a job whose pod no node can take says which case it
//! is, from what the cluster autoscaler wrote on the pod, through the real
//! `kinetic` binary on a cluster `kinetic up` made on the fake cloud:
//! the autoscaler not running yet (no pool scales), no pool that can take
//! it (`NotTriggerScaleUp`: the hint names the `kinetic pool add` line), a
//! pool growing from zero (`TriggeredScaleUp`: which pool, 0 → 1, how long
//! GKE takes); `kinetic pool list` shows the pool's nodes and bounds.

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;

mod sandbox;

use sandbox::world::World;

const WORK_PY: &str = "def square(x):\n    print('squaring', x, flush=True)\n    return x * x\n";

async fn ok(w: &World, args: &[&str]) -> String {
    let o: Output = w.kinetic(args).await;
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert!(
        o.status.success(),
        "kinetic {args:?} failed\nstdout: {out}\nstderr: {err}"
    );
    out
}

/// `jobs status` until its pending reason contains `wanted`; the reason.
async fn reason_until(w: &World, job_id: &str, wanted: &str) -> String {
    let start = Instant::now();
    let mut last = Value::Null;
    while start.elapsed() < Duration::from_secs(60) {
        let out = ok(w, &["--json", "jobs", "status", job_id]).await;
        last = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        let message = last["reason"]["message"].as_str().unwrap_or_default();
        if message.contains(wanted) {
            assert_eq!(last["status"], "PENDING", "{last:#}");
            return message.to_owned();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no reason with {wanted:?} in 60 s; last status: {last:#}");
}

/// The row of `pool list` for the pool whose name starts with `prefix`.
async fn pool_row(w: &World, prefix: &str) -> String {
    let out = ok(w, &["pool", "list"]).await;
    out.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no pool {prefix}… in\n{out}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hint_tells_no_pool_from_a_pool_scaling_up_from_zero() {
    let w = World::project(WORK_PY)
        .new_project(Duration::from_millis(100))
        .scale_up_delay(Duration::from_secs(8))
        .start()
        .await;
    ok(&w, &["up", "--yes"]).await;

    // Only the default pool, which does not scale: no autoscaler runs, so
    // nothing has told whether a pool can take an L4 job; the hint says
    // so and what to add if `pool list` shows none.
    let out = ok(
        &w,
        &[
            "run",
            "work.py:square",
            "--arg",
            "7",
            "--backend",
            "gke",
            "--accelerator",
            "l4",
            "--detach",
            "--json",
        ],
    )
    .await;
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let job_id = v["job_id"].as_str().unwrap().to_owned();
    let message = reason_until(&w, &job_id, "has not said yet").await;
    assert!(
        message.contains(
            "if `kinetic pool list` shows no pool for it, add one with `kinetic pool add --accelerator l4`"
        ),
        "{message}"
    );

    // A Spot CPU pool (autoscaled, 0 nodes): the autoscaler runs and says
    // no pool can take the L4 pod (its template's first failing filter, the
    // Spot taint, as kube-scheduler's filter order gives it); the hint
    // names the pool to add.
    ok(
        &w,
        &["pool", "add", "--accelerator", "cpu", "--spot", "--yes"],
    )
    .await;
    let row = pool_row(&w, "cpu-spot-").await;
    assert!(row.contains("0 nodes (scales 0–10)"), "{row}");
    let message = reason_until(&w, &job_id, "no node pool offers this accelerator").await;
    assert!(
        message.contains(
            "(node selector cloud.google.com/gke-accelerator=nvidia-l4; the cluster autoscaler: 1 node(s) had untolerated taint {cloud.google.com/gke-spot: true}): add one with `kinetic pool add --accelerator l4`"
        ),
        "{message}"
    );
    assert!(!message.contains("is adding"), "{message}");

    // The L4 pool: at 0 nodes, growing for the pod; the hint names it.
    ok(&w, &["pool", "add", "--accelerator", "l4", "--yes"]).await;
    let pool = w
        .cloud()
        .apis()
        .node_pools("fake")
        .into_iter()
        .find(|(n, _)| n.starts_with("gpu-l4-"))
        .expect("a pool of L4 GPUs")
        .0;
    let message = reason_until(&w, &job_id, "is adding a node").await;
    assert!(
        message.contains(&format!(
            "node pool {pool} is adding a node (0 → 1, at most 10); GKE takes about 2 to 5 minutes to start a node"
        )),
        "{message}"
    );
    assert!(!message.contains("kinetic pool add"), "{message}");
    let row = pool_row(&w, &pool).await;
    assert!(row.contains("0 nodes (scales 0–10)"), "{row}");

    // Its node comes; the job runs there and succeeds.
    let out = ok(&w, &["jobs", "result", &job_id]).await;
    assert_eq!(out.trim(), "49");
    let row = pool_row(&w, &pool).await;
    assert!(row.contains("1 node (scales 0–10)"), "{row}");
}
