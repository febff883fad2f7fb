//! The GKE backend over the fake cluster's scripted outcomes, with the
//! runner reading a directory store: OOM, preemption, eviction, exit codes,
//! slow starts, quota, the run deadline, retried pods' logs, the batch
//! status in one LIST, and what `kube::runtime::watcher` sees of a job.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use kinetic_backend_gke::{GkeBackend, GkeOptions, ManifestOptions, api_status};
use kinetic_core::env::{EnvSnapshot, capture};
use kinetic_core::ids::GroupId;
use kinetic_core::ports::{Backend, CleanupWait, Deadlines, LogOptions, ObjectStore, PreparedJob};
use kinetic_core::retry::{Backoff, RetryPolicy};
use kinetic_core::status::{JobState, JobStatus, StatusReason};
use kinetic_engine::layers::RetryBackend;
use kinetic_fake_gcp::k8s::{ApiError, FakeCluster, FakeClusterConfig, FakeNode, PodScript};
use kinetic_store_gcs::GcsStore;
use kinetic_testkit::{ConformanceJob, prepare_python_job};
use kube::api::{Api, ListParams};

struct World {
    _dir: tempfile::TempDir,
    cluster: FakeCluster,
    client: kube::Client,
    store: Arc<dyn ObjectStore>,
}

impl World {
    async fn new(config: FakeClusterConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ObjectStore> =
            Arc::new(GcsStore::local_dir(&dir.path().join("store")).unwrap());
        // The image the jobs run: no build makes it, so it is named with
        // the host's interpreter.
        let config = config.image("registry.invalid/kinetic:1", "python3");
        let cluster = FakeCluster::start(config.kill_grace(Duration::from_millis(300)))
            .await
            .unwrap();
        let client =
            kube::Client::try_from(kube::Config::new(cluster.url().parse().unwrap())).unwrap();
        Self {
            _dir: dir,
            cluster,
            client,
            store,
        }
    }

    fn backend(&self, manifest: ManifestOptions) -> GkeBackend {
        GkeBackend::new(
            self.client.clone(),
            GkeOptions::new("default")
                .manifest(manifest)
                .poll_interval(Duration::from_millis(50)),
        )
    }

    async fn job(&self, job: ConformanceJob) -> PreparedJob {
        let env = capture(&[], &EnvSnapshot::new()).unwrap();
        let mut p = prepare_python_job(&self.store, "gke", &job, env).await;
        p.record.image_uri = "registry.invalid/kinetic:1".into();
        p
    }
}

async fn until(
    backend: &GkeBackend,
    job: &PreparedJob,
    done: impl Fn(&JobState) -> bool,
) -> JobState {
    let start = Instant::now();
    loop {
        let s = backend.status(&job.record).await.unwrap();
        if done(&s) {
            return s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "gave up waiting: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripted_pod_outcomes_become_typed_reasons() {
    let w = World::new(kinetic_fake_gcp_server::fake_cluster_config()).await;
    let backend = w.backend(ManifestOptions::default());
    let short = Duration::from_millis(150);
    let cases = [
        (
            PodScript::OomKilled { after: short },
            StatusReason::OomKilled,
        ),
        (
            PodScript::Preempted { after: short },
            StatusReason::Preempted,
        ),
        (
            PodScript::Evicted {
                after: short,
                message: "The node was low on resource: memory.".into(),
            },
            StatusReason::Evicted {
                message: "The node was low on resource: memory.".into(),
            },
        ),
        (
            PodScript::Exit {
                code: 7,
                after: short,
            },
            StatusReason::ExitCode { code: 7 },
        ),
    ];
    for (script, want) in cases {
        let job = w.job(ConformanceJob::Returns42).await;
        w.cluster
            .script_job(job.record.job_id.as_str(), script.clone());
        backend.submit(&job).await.unwrap();
        let state = until(&backend, &job, |s| s.status.is_terminal()).await;
        assert_eq!(
            state,
            JobState::new(JobStatus::Failed).with_reason(want),
            "{script:?}"
        );
    }
    // A slow start is pending with ContainerCreating, then runs to its value.
    let job = w.job(ConformanceJob::Returns42).await;
    w.cluster.script_job(
        job.record.job_id.as_str(),
        PodScript::SlowStart(Duration::from_millis(600)),
    );
    backend.submit(&job).await.unwrap();
    let state = until(&backend, &job, |s| {
        s.reason.is_some() || s.status.is_terminal()
    })
    .await;
    assert_eq!(
        state.reason,
        Some(StatusReason::ContainerCreating),
        "{state:?}"
    );
    let state = until(&backend, &job, |s| s.status.is_terminal()).await;
    assert_eq!(state.status, JobStatus::Succeeded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_and_the_run_deadline() {
    // A GPU node with one L4: a job asking for two is short of capacity.
    let w = World::new(kinetic_fake_gcp_server::fake_cluster_config().nodes(vec![
        FakeNode::cpu("cpu-0"),
        FakeNode::cpu("gpu-0")
            .label("cloud.google.com/gke-accelerator", "nvidia-l4")
            .capacity("nvidia.com/gpu", 1),
    ]))
    .await;
    let backend = w.backend(ManifestOptions::default());
    let mut job = w.job(ConformanceJob::Returns42).await;
    job.accelerator = kinetic_core::accelerators::AcceleratorSpec::parse("l4x2").unwrap();
    backend.submit(&job).await.unwrap();
    let state = until(&backend, &job, |s| s.reason.is_some()).await;
    let Some(StatusReason::Unschedulable { message }) = &state.reason else {
        panic!("{state:?}")
    };
    assert!(
        message.contains("not enough free nvidia.com/gpu")
            && message.contains("1 Insufficient nvidia.com/gpu"),
        "{message}"
    );

    // The run deadline becomes activeDeadlineSeconds: DeadlineExceeded.
    let mut job = w.job(ConformanceJob::Sleeps).await;
    job.deadlines = Deadlines {
        run: Some(Duration::from_secs(1)),
        pending: None,
    };
    backend.submit(&job).await.unwrap();
    let state = until(&backend, &job, |s| s.status.is_terminal()).await;
    assert_eq!(
        state,
        JobState::new(JobStatus::Failed).with_reason(StatusReason::DeadlineExceeded)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_follow_a_retried_pod() {
    let w = World::new(kinetic_fake_gcp_server::fake_cluster_config()).await;
    let mut manifest = ManifestOptions::default();
    manifest.backoff_limit = 1;
    let backend = w.backend(manifest);
    let job = w.job(ConformanceJob::Prints(2)).await;
    // The first pod fails; the Job's controller starts a second one.
    w.cluster.script_next(PodScript::Exit {
        code: 1,
        after: Duration::from_millis(100),
    });
    backend.submit(&job).await.unwrap();
    let lines: Vec<String> = backend
        .follow_logs(&job.record)
        .await
        .unwrap()
        .map(|l| l.unwrap())
        .collect()
        .await;
    assert!(lines.iter().any(|l| l == "line 1"), "{lines:?}");
    let state = until(&backend, &job, |s| s.status.is_terminal()).await;
    assert_eq!(state.status, JobStatus::Succeeded);
    let pods = w.cluster.objects("pods", "default");
    assert_eq!(pods.len(), 2, "one failed pod and its retry");
    let logs = backend
        .logs(&job.record, LogOptions::default())
        .await
        .unwrap();
    // The runner's own lines go to stderr: as on a real node, a line of one
    // stream may land between two lines of the other, never inside one.
    let printed: Vec<&str> = logs
        .lines()
        .filter(|l| !l.starts_with("[kinetic]"))
        .collect();
    assert!(
        printed.windows(2).any(|w| w == ["line 0", "line 1"]),
        "{logs}"
    );
    assert_eq!(
        backend
            .logs(&job.record, LogOptions::tail(1))
            .await
            .unwrap()
            .lines()
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_status_is_one_labelled_list() {
    let w = World::new(kinetic_fake_gcp_server::fake_cluster_config()).await;
    let backend = w.backend(ManifestOptions::default());
    let group: GroupId = "grp-0badc0de".parse().unwrap();
    let mut jobs = Vec::new();
    for i in 0..3 {
        let mut job = w.job(ConformanceJob::Returns42).await;
        job.record.group_id = Some(group.clone());
        job.record.group_index = Some(i);
        backend.submit(&job).await.unwrap();
        jobs.push(job);
    }
    let other = w.job(ConformanceJob::Returns42).await;
    backend.submit(&other).await.unwrap();
    let start = Instant::now();
    let states = loop {
        let states = backend.group_status("default", &group).await.unwrap();
        if states.values().all(|s| s.status.is_terminal()) && states.len() == 3 {
            break states;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{states:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        states.values().all(|s| s.status == JobStatus::Succeeded),
        "{states:?}"
    );
    assert!(
        !states.contains_key(&other.record.job_id),
        "only the group's jobs"
    );
    w.cluster.calls().reset();
    backend.group_status("default", &group).await.unwrap();
    assert_eq!(
        w.cluster.calls().total(),
        1,
        "{:?}",
        w.cluster.calls().snapshot()
    );
    assert_eq!(w.cluster.calls().count("list", "jobs.batch"), 1);
    // A Job object of the cluster carries the group label.
    let jobs_api: Api<Job> = Api::namespaced(w.client.clone(), "default");
    let listed = jobs_api
        .list(&ListParams::default().labels(&format!("group-id={group}")))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_runtime_watcher_sees_a_jobs_pod_come_and_go() {
    use kube::runtime::watcher;
    let w = World::new(kinetic_fake_gcp_server::fake_cluster_config()).await;
    let backend = w.backend(ManifestOptions::default());
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(w.client.clone(), "default");
    let mut events = Box::pin(watcher(
        pods,
        watcher::Config::default().labels("app=kinetic"),
    ));
    // The initial list (empty) completes first.
    loop {
        match events.try_next().await.unwrap().unwrap() {
            watcher::Event::InitDone => break,
            _ => continue,
        }
    }
    let job = w.job(ConformanceJob::Returns42).await;
    backend.submit(&job).await.unwrap();
    let mut phases = Vec::new();
    let collect = async {
        while let Some(ev) = events.try_next().await.unwrap() {
            match ev {
                watcher::Event::Apply(p) => {
                    let phase = p.status.and_then(|s| s.phase).unwrap_or_default();
                    phases.push(phase.clone());
                    if phase == "Succeeded" {
                        break;
                    }
                }
                watcher::Event::Delete(_) => break,
                _ => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), collect)
        .await
        .expect("the pod ran to its end");
    // Phases only move forward; on a loaded machine the watcher may first
    // see the pod already running, so Pending is not required.
    let rank = |p: &str| match p {
        "" | "Pending" => 0,
        "Running" => 1,
        "Succeeded" | "Failed" => 2,
        other => panic!("unexpected phase {other}"),
    };
    assert!(
        phases.windows(2).all(|w| rank(&w[0]) <= rank(&w[1])),
        "{phases:?}"
    );
    assert!(
        phases.len() >= 2,
        "the watcher saw the pod change: {phases:?}"
    );
    assert_eq!(
        phases.last().map(String::as_str),
        Some("Succeeded"),
        "{phases:?}"
    );
}

/// Writing a final state (here: cancel) reads the Job again and retries
/// when the API server answers 409 (the Job changed under the write), up to
/// the backend's conflict budget; past it the error says it was retried,
/// keeps the API Status, and the engine's retry decorator does not try the
/// call again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_state_that_keeps_conflicting_is_given_up_after_its_budget() {
    let w = World::new(kinetic_fake_gcp_server::fake_cluster_config()).await;
    let quick = |attempts| {
        RetryPolicy::new(
            attempts,
            Backoff::new(Duration::from_millis(1), Duration::from_millis(4)),
        )
    };
    let backend = GkeBackend::new(
        w.client.clone(),
        GkeOptions::new("default")
            .poll_interval(Duration::from_millis(50))
            .conflict_retry(quick(3)),
    );
    let conflict = || ApiError::new(409, "Conflict", "the object has been modified");

    // One scripted conflict: read again and written. Once its pod runs:
    // the Job's own status changes while its pod starts may each cost an
    // attempt, as they would on a real cluster, and two of them besides
    // the scripted one spent the budget under load.
    let job = w.job(ConformanceJob::Sleeps).await;
    backend.submit(&job).await.unwrap();
    until(&backend, &job, |s| s.status == JobStatus::Running).await;
    let patches = w.cluster.faults().calls("patch");
    w.cluster.faults().fail_on("patch", 0, conflict());
    backend
        .cancel(&job.record, CleanupWait::default())
        .await
        .unwrap();
    assert!(w.cluster.faults().calls("patch") - patches >= 2);
    let state = until(&backend, &job, |s| s.status.is_terminal()).await;
    assert_eq!(state.reason, Some(StatusReason::Cancelled), "{state:?}");

    // Conflicts past the budget, behind the engine's retry decorator.
    let job = w.job(ConformanceJob::Sleeps).await;
    backend.submit(&job).await.unwrap();
    for _ in 0..20 {
        w.cluster.faults().fail_on("patch", 0, conflict());
    }
    let retrying = RetryBackend::new(Arc::new(backend), quick(5));
    let patches = w.cluster.faults().calls("patch");
    let err = retrying
        .cancel(&job.record, CleanupWait::default())
        .await
        .unwrap_err();
    assert_eq!(
        w.cluster.faults().calls("patch") - patches,
        3,
        "the backend's budget, not multiplied by the decorator's: {err:?}"
    );
    assert!(err.is_retryable() && err.is_retried(), "{err:?}");
    assert!(err.to_string().contains("kept changing"), "{err}");
    let status = api_status(&err).expect("the API Status is kept");
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    w.cluster.faults().clear();
    retrying
        .cancel(&job.record, CleanupWait::default())
        .await
        .unwrap();
}
