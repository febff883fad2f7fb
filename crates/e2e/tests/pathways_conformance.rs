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
use kinetic_core::ports::CleanupWait;
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
        |client, _store| {
            Arc::new(PathwaysBackend::new(
                client,
                PathwaysOptions::new("default").poll_interval(Duration::from_millis(50)),
            ))
        },
    )
    .await
}

kinetic_testkit::backend_conformance_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    harness = harness().await;
    skips = [
        "submit_batch_runs_every_input_as_its_child",
        "a_cancelled_batch_reports_no_input_running",
        "a_batch_in_blocks_runs_and_retries_each_input_as_its_child",
    ];
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleaned_up_slice_leaves_no_secret() {
    let h = harness().await;
    for case in [
        "cleanup_forgets_the_job",
        "env_reaches_the_job_and_nowhere_else",
    ] {
        backend::run_case(&h, case, &[]).await;
    }
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

/// A job that sleeps on a `v5litepod-16` slice, and the slice's four TPU
/// nodes added to the cluster.
async fn sleeping_slice(h: &ClusterHarness) -> kinetic_core::ports::PreparedJob {
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
    job
}

/// One host of a 4-host slice loses its node (the kubelet marks the pod
/// with a `DisruptionTarget` condition, as a spot preemption does): the
/// whole slice fails with reason `preempted`, written on the set so that
/// the group's recreation cannot turn it into a run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preempted_host_fails_the_whole_slice_as_preempted() {
    let h = harness().await;
    let job = sleeping_slice(&h).await;
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

/// The leader's pod of a running slice: its name and IP, and the other
/// hosts' IPs.
fn slice_pods(h: &ClusterHarness) -> Option<(String, String, Vec<String>)> {
    let pods = h.cluster.objects("pods", "default");
    let running = |p: &&serde_json::Value| p["status"]["phase"] == "Running";
    let index = |p: &serde_json::Value| {
        p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"]
            .as_str()
            .map(str::to_owned)
    };
    if pods.len() < 4 || pods.iter().filter(running).count() < 4 {
        return None;
    }
    let ip = |p: &serde_json::Value| p["status"]["podIP"].as_str().unwrap().to_owned();
    let leader = pods.iter().find(|p| index(p).as_deref() == Some("0"))?;
    let workers = pods
        .iter()
        .filter(|p| index(p).as_deref() != Some("0"))
        .map(ip)
        .collect();
    Some((
        leader["metadata"]["name"].as_str()?.to_owned(),
        ip(leader),
        workers,
    ))
}

/// A debug job's port is the leader's: `port_forward` reaches the pod of
/// host 0 of the job's group at its own IP (each host listens on the same
/// port at its own IP here, and only the leader's answer comes back);
/// nothing listening is an error of the stream; an unknown job is not
/// found; an ended slice, whose pods are gone, is refused saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_forward_reaches_the_leader_of_the_slice_and_refuses_an_ended_one() {
    use tokio::io::AsyncReadExt;

    let h = harness().await;
    let b = h.backend();
    assert!(b.capabilities().port_forward);
    let job = sleeping_slice(&h).await;
    let unknown = b.port_forward(&job.record, 5678).await.err().unwrap();
    assert!(unknown.is_not_found(), "{unknown:?}");
    b.submit(&job).await.unwrap();
    let give_up = Instant::now() + Duration::from_secs(60);
    let (leader, leader_ip, worker_ips) = loop {
        if b.status(&job.record).await.unwrap().status == JobStatus::Running
            && let Some(pods) = slice_pods(&h)
        {
            break pods;
        }
        assert!(Instant::now() < give_up, "the slice never ran");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(leader_ip.starts_with("127.") && leader_ip != "127.0.0.1");
    assert!(!worker_ips.contains(&leader_ip), "each pod has its own IP");

    // Every host "listens" on one port at its IP; each answers its name.
    let listener = std::net::TcpListener::bind((leader_ip.as_str(), 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut listeners = vec![("leader", listener)];
    for ip in &worker_ips {
        listeners.push((
            "worker",
            std::net::TcpListener::bind((ip.as_str(), port)).unwrap(),
        ));
    }
    for (who, listener) in listeners {
        std::thread::spawn(move || {
            if let Ok((mut conn, _)) = listener.accept() {
                use std::io::Write;
                let _ = conn.write_all(who.as_bytes());
            }
        });
    }
    let mut stream = tokio_util::compat::FuturesAsyncReadCompatExt::compat(
        b.port_forward(&job.record, port).await.unwrap(),
    );
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert_eq!(answer, "leader", "port {port} of the leader's pod {leader}");

    // Nothing listens on the leader's port 1: an error of the stream.
    let mut closed = tokio_util::compat::FuturesAsyncReadCompatExt::compat(
        b.port_forward(&job.record, 1).await.unwrap(),
    );
    let mut buf = Vec::new();
    let err = closed.read_to_end(&mut buf).await.unwrap_err();
    assert!(err.to_string().contains(&leader), "{err}");

    b.cancel(&job.record, CleanupWait::default()).await.unwrap();
    let give_up = Instant::now() + Duration::from_secs(60);
    while !b.status(&job.record).await.unwrap().status.is_terminal() {
        assert!(Instant::now() < give_up, "the cancelled slice never ended");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ended = b.port_forward(&job.record, port).await.err().unwrap();
    assert!(ended.is_invalid_input(), "{ended:?}");
    assert!(ended.to_string().contains("it has ended"), "{ended}");
}
