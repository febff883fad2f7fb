//! Failure budgets end to end through the real `kinetic` binary: on the
//! fake cluster (GKE Jobs whose pods the fake kubelet runs, preempted as a
//! real node shutdown marks them) and on the local backend.

use std::process::Output;
use std::time::Duration;

use kinetic_fake_gcp::k8s::{FakeNode, PodScript};
use serde_json::Value;

const WORK_PY: &str = r#"
def square(x):
    print("squaring", x, flush=True)
    return x * x


def fail():
    raise RuntimeError("deliberate failure")


def flaky(marker):
    """Fails on its first attempt (no marker yet), succeeds on the next."""
    import os
    if not os.path.exists(marker):
        open(marker, "w").write("tried")
        raise RuntimeError("first attempt fails")
    return ["second attempt", os.environ.get("KINETIC_ATTEMPT")]
"#;

mod sandbox;

use sandbox::Sandbox;
use sandbox::world::{PYPROJECT, World};

/// `kinetic ARGS` in the sandbox with `env` ([`Sandbox::kinetic_async`]).
async fn kinetic(sb: &Sandbox, env: Vec<(String, String)>, args: &[&str]) -> Output {
    sb.kinetic_async(args, &env).await
}

/// A sandbox whose project is `work.py` and a `pyproject.toml`.
fn project() -> Sandbox {
    let sb = Sandbox::new(WORK_PY);
    sb.write("home/project/pyproject.toml", PYPROJECT);
    sb
}

/// A fake cluster whose kubelet gives pods 300 ms between SIGTERM and
/// SIGKILL, the same project.
async fn cluster() -> World {
    World::gke(WORK_PY)
        .pyproject()
        .kill_grace(Duration::from_millis(300))
        .start()
        .await
}

fn texts(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn preempted() -> PodScript {
    PodScript::Preempted {
        after: Duration::from_millis(300),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preempted_spot_job_restarts_and_keeps_its_history_after_cleanup() {
    let w = cluster().await;
    let cluster = w.cluster();
    // A Spot node (labelled and tainted as GKE's Spot pools are).
    let spot = FakeNode::cpu("spot-0")
        .label("cloud.google.com/gke-spot", "true")
        .taint("cloud.google.com/gke-spot", "true", "NoSchedule");
    cluster.add_node(&spot).unwrap();
    cluster.script_next(preempted());
    let o = w
        .kinetic(&[
            "run",
            "work.py:square",
            "--arg",
            "7",
            "--backend",
            "gke",
            "--spot",
            "--json",
        ])
        .await;
    let (out, err) = texts(&o);
    assert!(o.status.success(), "stdout: {out}\nstderr: {err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["value"], 49, "stderr: {err}");
    let job_id = v["job_id"].as_str().unwrap().to_owned();
    assert!(
        err.contains("RUNNING (preempted, restarting (attempt 2 of 4))")
            || err.contains("PENDING (preempted, restarting (attempt 2 of 4))"),
        "the restart is told: {err}"
    );
    // The Job had a pod failure policy and was cleaned up after success.
    assert!(
        cluster.objects("jobs.batch", "default").is_empty(),
        "cleaned up"
    );
    let o = w.kinetic(&["jobs", "status", &job_id, "--json"]).await;
    let (out, err) = texts(&o);
    assert!(o.status.success(), "stdout: {out}\nstderr: {err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let attempts = v["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 2, "{v}");
    assert_eq!(attempts[0]["outcome"], "preempted", "{v}");
    assert_eq!(attempts[1]["outcome"], "succeeded", "{v}");
    assert_ne!(attempts[0]["host"], attempts[1]["host"], "two pods");
    let o = w.kinetic(&["jobs", "status", &job_id]).await;
    let (out, _) = texts(&o);
    assert!(
        out.contains("attempt 1 on") && out.contains(": preempted (node was preempted)"),
        "{out}"
    );
    assert!(
        out.contains("attempt 2 on") && out.contains(": succeeded"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_preempted_past_its_budget_fails_as_preempted_naming_it() {
    let w = cluster().await;
    let cluster = w.cluster();
    // Every pod is preempted, more often than the budget allows.
    for _ in 0..8 {
        cluster.script_next(preempted());
    }
    let o = w
        .kinetic(&[
            "run",
            "work.py:square",
            "--arg",
            "7",
            "--backend",
            "gke",
            "--restarts",
            "3",
        ])
        .await;
    let (out, err) = texts(&o);
    assert!(!o.status.success(), "stdout: {out}\nstderr: {err}");
    assert!(
        err.contains(
            "more than its infrastructure restart budget of 3; raise it with `--restarts N`"
        ),
        "{err}"
    );
    assert!(err.contains("preempted"), "{err}");
    // The Job is stopped with its verdict written on it.
    let jobs = cluster.objects("jobs.batch", "default");
    assert_eq!(jobs.len(), 1, "a failed job is kept");
    let job = &jobs[0];
    let verdict = job["metadata"]["annotations"]["kinetic.dev/final-state"]
        .as_str()
        .unwrap_or_default();
    assert!(verdict.contains("restarts_spent"), "{job}");
    assert_eq!(job["spec"]["activeDeadlineSeconds"], 1, "{job}");
    assert_eq!(
        job["spec"]["podFailurePolicy"]["rules"][0]["action"], "Ignore",
        "{job}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exception_without_retries_fails_at_once() {
    let w = cluster().await;
    let cluster = w.cluster();
    let o = w
        .kinetic(&["run", "work.py:fail", "--backend", "gke"])
        .await;
    let (out, err) = texts(&o);
    assert!(!o.status.success(), "stdout: {out}\nstderr: {err}");
    assert!(err.contains("deliberate failure"), "{err}");
    assert_eq!(cluster.objects("pods", "default").len(), 1, "one attempt");
    let jobs = cluster.objects("jobs.batch", "default");
    assert_eq!(jobs[0]["spec"]["backoffLimit"], 0);
    assert!(
        jobs[0]["spec"].get("podFailurePolicy").is_none(),
        "no budget, Kinetic's Job"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_on_the_cluster_absorbs_one_failure() {
    let w = cluster().await;
    let (sb, cluster) = (w.sandbox(), w.cluster());
    let marker = sb.path("").join("marker");
    let arg = serde_json::to_string(&marker.display().to_string()).unwrap();
    let o = w
        .kinetic(&[
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
        ])
        .await;
    let (out, err) = texts(&o);
    assert!(o.status.success(), "stdout: {out}\nstderr: {err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["value"][0], "second attempt", "{v}");
    let jobs = cluster.objects("jobs.batch", "default");
    assert_eq!(jobs[0]["spec"]["backoffLimit"], 1);
    // No restart budget asked: a disruption would fail the Job at once
    // rather than spend the retry.
    assert_eq!(
        jobs[0]["spec"]["podFailurePolicy"]["rules"][0]["action"],
        "FailJob"
    );
    assert_eq!(
        cluster.objects("pods", "default").len(),
        2,
        "the failed pod and its retry"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_retries_rerun_the_runner_and_keep_each_attempt() {
    let sb = project();
    let marker = sb.path("").join("marker");
    let arg = serde_json::to_string(&marker.display().to_string()).unwrap();
    let env = vec![(
        "KINETIC_STORE_URL".to_owned(),
        format!("file://{}", sb.path("").join("store").display()),
    )];
    let o = kinetic(
        &sb,
        env.clone(),
        &[
            "run",
            "work.py:flaky",
            "--arg",
            &arg,
            "--backend",
            "local",
            "--retries",
            "2",
            "--json",
        ],
    )
    .await;
    let (out, err) = texts(&o);
    assert!(o.status.success(), "stdout: {out}\nstderr: {err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["value"],
        serde_json::json!(["second attempt", "2"]),
        "{v}"
    );
    let job_id = v["job_id"].as_str().unwrap().to_owned();
    let o = kinetic(&sb, env.clone(), &["jobs", "status", &job_id, "--json"]).await;
    let (out, err) = texts(&o);
    assert!(o.status.success(), "stdout: {out}\nstderr: {err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["reason"]["kind"], "cleaned_up",
        "the history outlives the job: {v}"
    );
    let attempts = v["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 2, "{v}");
    assert_eq!(attempts[0]["outcome"], "failed");
    assert_eq!(attempts[0]["reason"], "exited with code 1");
    assert_eq!(attempts[1]["outcome"], "succeeded");

    // Without retries the same failure ends the job at once.
    std::fs::remove_file(&marker).unwrap();
    let o = kinetic(
        &sb,
        env.clone(),
        &["run", "work.py:flaky", "--arg", &arg, "--backend", "local"],
    )
    .await;
    let (out, err) = texts(&o);
    assert!(!o.status.success(), "stdout: {out}\nstderr: {err}");
    assert!(err.contains("first attempt fails"), "{err}");

    // A budget that is not a number is refused before anything runs.
    let o = kinetic(
        &sb,
        env,
        &["run", "work.py:square", "--arg", "1", "--retries", "many"],
    )
    .await;
    let (_, err) = texts(&o);
    assert!(!o.status.success());
    assert!(
        err.contains(
            "--retries: invalid retries budget 'many': expected a whole number from 0 to 100"
        ),
        "{err}"
    );
}
