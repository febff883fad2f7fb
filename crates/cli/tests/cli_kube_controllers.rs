//! The gke and pathways backends as Kubernetes' real components make them
//! behave, through the real `kinetic` binary against the fake cluster
//! (issue 24): a cluster without the LeaderWorkerSet CRD and a role
//! without `leaderworkersets`, deletions a node never confirms, and pods
//! deleted under a Job (a preempted node's, through PodGC; evicted ones).

use std::process::Output;

use serde_json::Value;

mod sandbox;

use sandbox::world::World;

const WORK_PY: &str = r#"
def square(x):
    print("squaring", x, flush=True)
    return x * x
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
