//! The Pathways backend passes the Backend conformance suite over the fake
//! Kubernetes cluster with LeaderWorkerSet installed: each job is a
//! LeaderWorkerSet whose group the fake controller creates as pods the
//! fake kubelet runs. Its pods restart `Always` (as the StatefulSets the
//! controller makes require), so the run deadline is the backend's.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use kinetic_backend_pathways::{PathwaysBackend, PathwaysOptions};
use kinetic_core::env::CapturedEnv;
use kinetic_core::status::{JobState, JobStatus, StatusReason};
use kinetic_testkit::ConformanceJob;
use kinetic_testkit::conformance::backend::{self, BackendHarness};
use support::cluster_harness::ClusterHarness;

const LWS: &str = "leaderworkersets.leaderworkerset.x-k8s.io";

async fn harness() -> ClusterHarness {
    ClusterHarness::new(
        |cluster| {
            cluster.install_leader_worker_set().unwrap();
        },
        |client| {
            Arc::new(PathwaysBackend::new(
                client,
                PathwaysOptions::new("default").poll_interval(Duration::from_millis(50)),
            ))
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pathways_backend_conforms_over_the_fake_cluster() {
    let h = harness().await;
    backend::run(&h).await;
    let secrets = h.cluster.objects("secrets", "default");
    let sets = h.cluster.objects(LWS, "default");
    assert!(
        secrets.len() <= sets.len(),
        "a Secret outlived its LeaderWorkerSet: {secrets:?}"
    );
}

/// A slice that runs past its run deadline (from its pods' start) is
/// ended by the backend: `FAILED` with `DeadlineExceeded`, written on the
/// set, and the set scaled to no group, its pods gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slice_past_its_run_deadline_is_failed_and_scaled_down() {
    let h = harness().await;
    let mut job = h
        .prepare(ConformanceJob::Sleeps, CapturedEnv::default())
        .await;
    // Long enough that a poll sees the slice running first: a pod's
    // `startTime` has whole seconds only, so the deadline may come up to a
    // second early.
    job.deadlines.run = Some(Duration::from_secs(3));
    let b = h.backend();
    b.submit(&job).await.unwrap();
    let set = &h.cluster.objects(LWS, "default")[0];
    assert_eq!(
        set["metadata"]["annotations"]["kinetic.dev/run-deadline-seconds"],
        "3"
    );
    let pod_spec = &set["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"];
    assert!(
        pod_spec.get("activeDeadlineSeconds").is_none(),
        "{pod_spec}"
    );
    let give_up = Instant::now() + Duration::from_secs(60);
    let mut seen_running = false;
    let state = loop {
        let s = b.status(&job.record).await.unwrap();
        seen_running |= s.status == JobStatus::Running;
        if s.status.is_terminal() {
            break s;
        }
        assert!(Instant::now() < give_up, "still {s:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(seen_running, "the slice ran before its deadline");
    assert_eq!(
        state,
        JobState::new(JobStatus::Failed).with_reason(StatusReason::DeadlineExceeded)
    );
    let set = &h.cluster.objects(LWS, "default")[0];
    assert_eq!(set["spec"]["replicas"], 0, "{set}");
    assert!(
        set["metadata"]["annotations"]["kinetic.dev/final-state"]
            .as_str()
            .is_some_and(|s| s.contains("DeadlineExceeded") || s.contains("deadline")),
        "{set}"
    );
    loop {
        let pods = h.cluster.objects("pods", "default");
        if pods.is_empty() {
            break;
        }
        assert!(Instant::now() < give_up, "pods left: {pods:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One host of a 4-host slice loses its node (the kubelet marks the pod
/// with a `DisruptionTarget` condition, as a spot preemption does): the
/// whole slice fails with reason `preempted`, written on the set so that
/// the group's recreation cannot turn it into a run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preempted_host_fails_the_whole_slice_as_preempted() {
    let h = harness().await;
    let mut job = kinetic_testkit::prepare_python_job_on(
        &h.store(),
        "pathways",
        &ConformanceJob::Sleeps,
        CapturedEnv::default(),
        Some("v5litepod-16"),
    )
    .await;
    job.record.image_uri = "registry.invalid/kinetic/conformance:latest".into();
    for i in 0..4 {
        let node = kinetic_fake_gcp::k8s::FakeNode::cpu(&format!("tpu-{i}"))
            .label(
                "cloud.google.com/gke-tpu-accelerator",
                "tpu-v5-lite-podslice",
            )
            .label("cloud.google.com/gke-tpu-topology", "4x4")
            .capacity("google.com/tpu", 4);
        h.cluster.add_node(&node).unwrap();
    }
    h.cluster
        .script_next(kinetic_fake_gcp::k8s::PodScript::Preempted {
            after: Duration::from_millis(300),
        });
    let b = h.backend();
    b.submit(&job).await.unwrap();
    let give_up = Instant::now() + Duration::from_secs(60);
    let state = loop {
        let s = b.status(&job.record).await.unwrap();
        if s.status.is_terminal() {
            break s;
        }
        assert!(Instant::now() < give_up, "still {s:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        state,
        JobState::new(JobStatus::Failed).with_reason(StatusReason::Preempted)
    );
    // Read again later, the verdict stands.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(b.status(&job.record).await.unwrap(), state);
}
