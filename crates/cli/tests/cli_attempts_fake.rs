//! The attempt number and history on the fake cluster, through the real
//! `kinetic` binary: each pod of a GKE Job claims its attempt under
//! `{job_id}/starts/` in the (fake) GCS bucket and the function sees it in
//! `KINETIC_ATTEMPT`; a batch child's attempts are kept in its
//! `attempts.json` as a single job's are.

use std::process::Output;
use std::time::Duration;

use kinetic_fake_gcp::FakeGcs;
use kinetic_fake_gcp::k8s::{FakeCluster, PodScript};
use serde_json::Value;

mod sandbox;

use sandbox::world::{JOBS_BUCKET, World};

const WORK_PY: &str = r#"
import os


def flaky(marker):
    """Fails on its first attempt (no marker yet), then says which it is."""
    if not os.path.exists(marker):
        open(marker, "w").write("tried")
        raise RuntimeError("first attempt fails")
    return ["second attempt", os.environ["KINETIC_ATTEMPT"]]


def attempt(x):
    return [x, os.environ["KINETIC_ATTEMPT"]]
"#;

/// A fake cluster whose pods get 300 ms between SIGTERM and SIGKILL.
async fn world() -> World {
    World::gke(WORK_PY)
        .pyproject()
        .kill_grace(Duration::from_millis(300))
        .start()
        .await
}

/// `kinetic ARGS`, which must succeed; its stdout as JSON.
async fn kinetic_json(w: &World, args: &[&str]) -> Value {
    let o: Output = w.kinetic(args).await;
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{args:?}\nstdout: {out}\nstderr: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The start markers of `job_id` in the bucket: (name, the pod it names).
fn start_markers(gcs: &FakeGcs, job_id: &str) -> Vec<(String, String)> {
    let prefix = format!("{job_id}/starts/");
    gcs.list_objects(JOBS_BUCKET)
        .into_iter()
        .filter(|(name, _)| name.starts_with(&prefix))
        .map(|(name, _)| {
            let body: Value =
                serde_json::from_slice(&gcs.object(JOBS_BUCKET, &name).unwrap()).unwrap();
            let pod = body["pod"].as_str().unwrap_or_default().to_owned();
            (name[prefix.len()..].to_owned(), pod)
        })
        .collect()
}

fn pod_names(cluster: &FakeCluster) -> Vec<String> {
    let mut names: Vec<String> = cluster
        .objects("pods", "default")
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_pod_sees_kinetic_attempt_2_and_cleanup_removes_the_markers() {
    let w = world().await;
    let (gcs, cluster) = (w.gcs(), w.cluster());
    let marker = w.sandbox().path("").join("marker");
    let arg = serde_json::to_string(&marker.display().to_string()).unwrap();
    let v = kinetic_json(
        &w,
        &[
            "run",
            "work.py:flaky",
            "--arg",
            &arg,
            "--backend",
            "gke",
            "--retries",
            "1",
            "--json",
            "--no-cleanup",
        ],
    )
    .await;
    assert_eq!(
        v["value"],
        serde_json::json!(["second attempt", "2"]),
        "{v}"
    );
    let job_id = v["job_id"].as_str().unwrap().to_owned();

    // One marker per pod, each naming its own pod (the downward API's
    // metadata.name), numbered in the order the pods ran.
    let markers = start_markers(gcs, &job_id);
    let names: Vec<&str> = markers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["00000001", "00000002"], "{markers:?}");
    let mut pods: Vec<String> = markers.iter().map(|(_, p)| p.clone()).collect();
    assert_ne!(pods[0], pods[1], "{markers:?}");
    pods.sort();
    assert_eq!(pods, pod_names(cluster), "the markers name the Job's pods");
    let job = &cluster.objects("jobs.batch", "default")[0];
    let env_of_pod = &job["spec"]["template"]["spec"]["containers"][0]["env"];
    assert!(
        env_of_pod
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "KINETIC_POD_NAME"
                && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"),
        "{env_of_pod}"
    );

    // Cleaning up the job's store objects removes its markers too.
    let o = w.kinetic(&["jobs", "cleanup", &job_id]).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(start_markers(gcs, &job_id), Vec::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_childs_attempts_outlive_its_kubernetes_objects() {
    let w = world().await;
    let (gcs, cluster) = (w.gcs(), w.cluster());
    // The child's first pod is preempted; its restart budget runs it again.
    cluster.script_next(PodScript::Preempted {
        after: Duration::from_millis(300),
    });
    let inputs = w.sandbox().path("inputs.jsonl");
    std::fs::write(&inputs, "5\n").unwrap();
    let v = kinetic_json(
        &w,
        &[
            "map",
            "work.py:attempt",
            "--inputs",
            inputs.to_str().unwrap(),
            "--backend",
            "gke",
            "--restarts",
            "1",
            "--poll-interval",
            "0.2",
            "--json",
        ],
    )
    .await;
    assert_eq!(v["failed"], 0, "{v}");
    let child = v["results"][0]["job_id"].as_str().unwrap().to_owned();
    assert_eq!(v["results"][0]["value"][0], 5, "{v}");
    // The preempted pod may or may not have reached the runner: the run
    // that returned claimed the last number there is.
    let markers = start_markers(gcs, &child);
    assert!(!markers.is_empty() && markers.len() <= 2, "{markers:?}");
    assert_eq!(
        v["results"][0]["value"][1],
        markers.len().to_string(),
        "{v} {markers:?}"
    );

    // The batch cleaned the child up after collecting it: its history is
    // read from the store.
    assert!(
        cluster.objects("jobs.batch", "default").is_empty(),
        "cleaned up"
    );
    assert!(
        gcs.object(JOBS_BUCKET, &format!("{child}/attempts.json"))
            .is_some(),
        "the batch kept the child's attempts"
    );
    let s = kinetic_json(&w, &["jobs", "status", &child, "--json"]).await;
    let attempts = s["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 2, "{s}");
    assert_eq!(attempts[0]["outcome"], "preempted", "{s}");
    assert_eq!(attempts[1]["outcome"], "succeeded", "{s}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_inputs_retry_sees_kinetic_attempt_2_as_a_single_jobs_retry_does() {
    // Issue 26.8: `map --retries` runs a failed input again as a new job,
    // which saw KINETIC_ATTEMPT=1 again.
    let w = world().await;
    let marker = w.sandbox().path("").join("batch-marker");
    let inputs = w.sandbox().path("inputs.jsonl");
    std::fs::write(
        &inputs,
        format!(
            "{}\n",
            serde_json::to_string(&marker.display().to_string()).unwrap()
        ),
    )
    .unwrap();
    let v = kinetic_json(
        &w,
        &[
            "map",
            "work.py:flaky",
            "--inputs",
            inputs.to_str().unwrap(),
            "--backend",
            "gke",
            "--retries",
            "1",
            "--poll-interval",
            "0.2",
            "--json",
        ],
    )
    .await;
    assert_eq!(v["failed"], 0, "{v}");
    assert_eq!(
        v["results"][0]["value"],
        serde_json::json!(["second attempt", "2"]),
        "{v}"
    );
}
