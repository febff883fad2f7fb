//! End to end: the engine, the GKE backend, the fake Kubernetes cluster
//! (whose kubelet runs the real runner as a process) and a directory store.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use kinetic_backend_gke::{GkeBackend, GkeOptions};
use kinetic_core::env::{EnvEntry, EnvSnapshot};
use kinetic_core::ports::{
    BuildError, Deadlines, ImageBuilder, ImageCapabilities, ImageRequest, ObjectStore,
    ResolvedImage,
};
use kinetic_core::status::{JobStatus, StatusReason};
use kinetic_engine::{Engine, EngineError, EngineSettings, Entrypoint, JobSpec, ResultOptions};
use kinetic_fake_gcp::images::ImageEnvironments;
use kinetic_fake_gcp::k8s::{FakeCluster, FakeClusterConfig};
use kinetic_fake_gcp::{FakeGcs, GcsOp};
use kinetic_store_gcs::{GcsOptions, GcsStore};
use kinetic_testkit::FakeImageBuilder;
use serde_json::json;

const WORK_PY: &str = r#"
import hashlib
import os
import time


def square(x):
    print("squaring %d" % x, flush=True)
    return x * x


def boom(message):
    raise ValueError(message)


def sleep_forever():
    print("going to sleep", flush=True)
    time.sleep(600)


def wait_for(path):
    print("waiting for release", flush=True)
    while not os.path.exists(path):
        time.sleep(0.02)
    print("released", flush=True)
    return "done"


def env_value_digest(name):
    print("digesting", name, flush=True)
    return hashlib.sha256(os.environ[name].encode()).hexdigest()
"#;

struct World {
    dir: tempfile::TempDir,
    gcs: FakeGcs,
    store: Arc<dyn ObjectStore>,
    cluster: FakeCluster,
    env: EnvSnapshot,
}

impl World {
    async fn new() -> Self {
        Self::with_cluster(kinetic_fake_gcp_server::fake_cluster_config()).await
    }

    async fn with_cluster(config: FakeClusterConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("home/proj");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(
            project.join("pyproject.toml"),
            "[project]\nname = \"proj\"\ndependencies = []\n",
        )
        .unwrap();
        std::fs::write(project.join("work.py"), WORK_PY).unwrap();
        let gcs = FakeGcs::with_buckets(&["kn-jobs"]).unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(
            GcsStore::open("gs://kn-jobs", &GcsOptions::emulator(&gcs.endpoint())).unwrap(),
        );
        let cluster = FakeCluster::start(
            config
                .env("KINETIC_GCS_ENDPOINT", &gcs.endpoint())
                .kill_grace(Duration::from_millis(500)),
        )
        .await
        .unwrap();
        let mut env = EnvSnapshot::new();
        env.insert("HOME", dir.path().join("home").to_string_lossy());
        Self {
            dir,
            gcs,
            store,
            cluster,
            env,
        }
    }

    fn project(&self) -> PathBuf {
        self.dir.path().join("home/proj")
    }

    fn engine_with(&self, images: Arc<dyn ImageBuilder>, env: EnvSnapshot) -> Engine {
        let client =
            kube::Client::try_from(kube::Config::new(self.cluster.url().parse().unwrap())).unwrap();
        let backend = GkeBackend::new(client, gke_options());
        self.engine_over(backend, images, env)
    }

    /// A backend that acts as the user `user`, bound to the ClusterRole
    /// `role` in `default`, through a kubeconfig with their token.
    fn backend_as(&self, user: &str, role: &str) -> GkeBackend {
        let kubeconfig = self.dir.path().join(format!("kubeconfig-{user}"));
        std::fs::write(
            &kubeconfig,
            FakeCluster::kubeconfig_with_contexts(&[(user, self.cluster.url())], user, "default"),
        )
        .unwrap();
        self.cluster.add_user(user, "fake-token");
        self.cluster.bind_role(user, role, "default").unwrap();
        GkeBackend::from_kubeconfig(Some(kubeconfig), None, gke_options())
    }

    fn engine_over(
        &self,
        backend: GkeBackend,
        images: Arc<dyn ImageBuilder>,
        env: EnvSnapshot,
    ) -> Engine {
        Engine::builder()
            .store(self.store.clone())
            .backend(Arc::new(backend))
            .default_backend("gke")
            .image_builder(images)
            .env_snapshot(env)
            .settings(EngineSettings::default().with_home(self.dir.path().join("home")))
            .build()
            .unwrap()
    }

    fn engine(&self) -> Engine {
        self.engine_with(self.images(), self.env.clone())
    }

    /// The tests' in-memory image builder, each image it pushes named to
    /// the cluster's registry with the host's `python3` (no build of the
    /// fake makes it): the cluster pulls those and no other.
    fn images(&self) -> Arc<dyn ImageBuilder> {
        Arc::new(NamedToCluster {
            inner: FakeImageBuilder::new("us-docker.pkg.dev/p/kn-c"),
            images: self.cluster.images().clone(),
        })
    }

    fn spec(&self, entry: &str) -> JobSpec {
        JobSpec::new(Entrypoint::parse(entry).unwrap()).working_dir(self.project())
    }
}

fn gke_options() -> GkeOptions {
    GkeOptions::new("default").poll_interval(Duration::from_millis(50))
}

/// A [`FakeImageBuilder`] whose images the fake cluster can pull: each
/// one it resolves is named to the cluster as a stand-in of the host's
/// `python3`.
#[derive(Debug)]
struct NamedToCluster {
    inner: FakeImageBuilder,
    images: Arc<ImageEnvironments>,
}

#[async_trait::async_trait]
impl ImageBuilder for NamedToCluster {
    fn capabilities(&self) -> ImageCapabilities {
        self.inner.capabilities()
    }

    async fn resolve(&self, request: &ImageRequest) -> Result<ResolvedImage, BuildError> {
        let resolved = self.inner.resolve(request).await?;
        self.images.add_stand_in(&resolved.uri, "python3");
        Ok(resolved)
    }
}

fn options() -> ResultOptions {
    let mut o = ResultOptions::default().timeout(Duration::from_secs(60));
    o.max_poll_interval = Duration::from_millis(200);
    o
}

fn short_pending() -> Deadlines {
    Deadlines {
        run: None,
        pending: Some(Duration::from_secs(1)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn returns_the_value_and_streams_the_pod_log() {
    let w = World::new().await;
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let opts = options().stream_logs(Arc::new(move |l: &str| {
        sink.lock().unwrap().push(l.to_owned())
    }));
    let value = w
        .engine()
        .run(w.spec("work:square").arg(json!(7)), opts)
        .await
        .unwrap();
    assert_eq!(value, json!(49));
    assert!(
        lines.lock().unwrap().iter().any(|l| l == "squaring 7"),
        "{:?}",
        lines.lock().unwrap()
    );
    // result() cleaned up: the Job, its pod and any Secret are gone.
    assert!(w.cluster.objects("jobs.batch", "default").is_empty());
    assert!(w.cluster.objects("secrets", "default").is_empty());
    // The runner in the pod read its spec and context from the fake GCS
    // server and wrote its result there.
    let requests = w.gcs.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.op == GcsOp::Get && r.name.starts_with("contexts/")),
        "{requests:?}"
    );
    assert!(
        requests
            .iter()
            .any(|r| r.op == GcsOp::Put && r.name.ends_with("/result.json")),
        "{requests:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_exception_comes_back_with_its_traceback() {
    let w = World::new().await;
    let err = w
        .engine()
        .run(w.spec("work:boom").arg(json!("it broke")), options())
        .await
        .unwrap_err();
    let remote = err.remote().expect("a remote error");
    assert_eq!(remote.type_name, "ValueError");
    assert_eq!(remote.message, "it broke");
    let tb = remote.traceback.as_deref().unwrap();
    assert!(
        tb.contains("in boom") && tb.contains("ValueError: it broke"),
        "{tb}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_job_fails_as_cancelled() {
    let w = World::new().await;
    let handle = w
        .engine()
        .submit(w.spec("work:sleep_forever"))
        .await
        .unwrap();
    let mut state = handle.status().await.unwrap();
    for _ in 0..400 {
        if state.status == JobStatus::Running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        state = handle.status().await.unwrap();
    }
    assert_eq!(state.status, JobStatus::Running, "{state:?}");
    handle.cancel().await.unwrap();
    let state = handle.status().await.unwrap();
    assert_eq!(state.status, JobStatus::Failed);
    assert_eq!(state.reason, Some(StatusReason::Cancelled));
    // The pod's process is stopped: the pod goes away.
    for _ in 0..200 {
        if w.cluster.objects("pods", "default").is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        w.cluster.objects("pods", "default").is_empty(),
        "the cancelled pod still runs"
    );
    let err = handle.result(options()).await.unwrap_err();
    assert!(matches!(err, EngineError::NoResult { .. }), "{err:?}");
    assert!(err.to_string().contains("cancelled"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unschedulable_job_fails_with_its_reason_after_the_pending_deadline() {
    let w = World::new().await;
    // The fake cluster has one CPU node: no node pool offers an L4.
    let handle = w
        .engine()
        .submit(
            w.spec("work:square")
                .arg(json!(3))
                .accelerator("l4")
                .deadlines(short_pending()),
        )
        .await
        .unwrap();
    let mut state = handle.status().await.unwrap();
    for _ in 0..100 {
        if state.reason.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        state = handle.status().await.unwrap();
    }
    assert_eq!(state.status, JobStatus::Pending, "{state:?}");
    assert!(
        matches!(&state.reason, Some(StatusReason::Unschedulable { message }) if message.contains("no node offers this accelerator yet")),
        "{state:?}"
    );
    let started = std::time::Instant::now();
    let err = handle.result(options()).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "result() waited too long"
    );
    let EngineError::NoResult { state, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(state.status, JobStatus::Failed);
    assert!(
        matches!(&state.reason, Some(StatusReason::PendingDeadlineExceeded { cause: Some(c), .. }) if matches!(**c, StatusReason::Unschedulable { .. })),
        "{state:?}"
    );
    assert!(err.to_string().contains("cannot be scheduled"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_pull_error_is_reported_as_such() {
    let w = World::new().await;
    let engine = w.engine_with(
        Arc::new(
            kinetic_core::ports::FixedImage::new("registry.invalid/kinetic/does-not-exist:1")
                .unwrap(),
        ),
        w.env.clone(),
    );
    let handle = engine
        .submit(
            w.spec("work:square")
                .arg(json!(2))
                .deadlines(short_pending()),
        )
        .await
        .unwrap();
    // The pod is created, scheduled, then its image pull fails: wait for
    // that verdict (or any end), however slowly a loaded machine gets there.
    let state = wait_for(&handle, |s| {
        s.status.is_terminal() || matches!(s.reason, Some(StatusReason::ImagePullError { .. }))
    })
    .await;
    // The verdict is the pull error itself, or — when a loaded machine's
    // first look comes after the short pending deadline — the deadline,
    // caused by that pull error.
    let pull_error = match &state.reason {
        Some(StatusReason::PendingDeadlineExceeded { cause: Some(c), .. }) => Some(&**c),
        other => other.as_ref(),
    };
    assert!(
        matches!(pull_error, Some(StatusReason::ImagePullError { image, .. }) if image.contains("does-not-exist")),
        "{state:?}"
    );
    let err = handle.result(options()).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("cannot pull image registry.invalid/kinetic/does-not-exist:1"),
        "{text}"
    );
}

/// Poll the job's state until `done` says so (at most 60 s).
async fn wait_for(
    handle: &kinetic_engine::JobHandle,
    done: impl Fn(&kinetic_core::status::JobState) -> bool,
) -> kinetic_core::status::JobState {
    let until = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let state = handle.status().await.unwrap();
        if done(&state) || std::time::Instant::now() > until {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_reaches_the_pod_and_nothing_else() {
    let w = World::new().await;
    let sentinel = "s3ntinel-gke-6b1d9e2a";
    let mut env = w.env.clone();
    env.insert("MY_SECRET_TOKEN", sentinel);
    let engine = w.engine_with(w.images(), env);
    let handle = engine
        .submit(
            w.spec("work:env_value_digest")
                .arg(json!("MY_SECRET_TOKEN"))
                .env(EnvEntry::parse_secret("MY_SECRET_TOKEN").unwrap()),
        )
        .await
        .unwrap();
    let value = handle.result(options().cleanup(false)).await.unwrap();
    use sha2::Digest;
    assert_eq!(
        value,
        json!(hex::encode(sha2::Sha256::digest(sentinel.as_bytes())))
    );
    // The Secret carries it, owned by the Job…
    let job = w
        .cluster
        .object("jobs.batch", "default", &handle.record().k8s_name)
        .unwrap();
    let secrets = w.cluster.objects("secrets", "default");
    assert_eq!(secrets.len(), 1);
    assert_eq!(
        secrets[0]["metadata"]["ownerReferences"][0]["uid"],
        job["metadata"]["uid"]
    );
    // …and nothing else does: not the Job, its pod, the events, the logs or the store.
    assert!(
        !job.to_string().contains(sentinel),
        "the Job spec holds the secret"
    );
    for resource in ["pods", "events"] {
        for o in w.cluster.objects(resource, "default") {
            assert!(
                !o.to_string().contains(sentinel),
                "a {resource} holds the secret"
            );
        }
    }
    let logs = handle.logs().await.unwrap();
    assert!(logs.contains("digesting MY_SECRET_TOKEN"), "{logs}");
    assert!(!logs.contains(sentinel));
    for meta in w.store.list(None).await.unwrap() {
        let bytes = w.store.get(&meta.path, Default::default()).await.unwrap();
        assert!(
            !contains(&bytes, sentinel.as_bytes()),
            "the secret is stored in {}",
            meta.path
        );
    }
    // Cleanup takes the Secret with the Job.
    handle.cleanup(Default::default()).await.unwrap();
    assert!(w.cluster.objects("jobs.batch", "default").is_empty());
    assert!(w.cluster.objects("secrets", "default").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_the_server_refuses_is_reported_and_fails_at_the_pending_deadline() {
    let w = World::new().await;
    w.cluster
        .insert(
            "resourcequotas",
            "default",
            json!({"apiVersion": "v1", "kind": "ResourceQuota",
                   "metadata": {"name": "no-pods"}, "spec": {"hard": {"pods": "0"}}}),
        )
        .unwrap();
    let handle = w
        .engine()
        .submit(w.spec("work:square").arg(json!(2)).deadlines(Deadlines {
            run: None,
            pending: Some(Duration::from_secs(3)),
        }))
        .await
        .unwrap();
    let state = wait_for(&handle, |s| s.reason.is_some() || s.status.is_terminal()).await;
    assert_eq!(state.status, JobStatus::Pending, "{state:?}");
    let Some(StatusReason::PodCreationFailed { message }) = &state.reason else {
        panic!("{state:?}")
    };
    assert!(message.contains("exceeded quota: no-pods"), "{message}");
    // The cluster's only trace is the Job controller's event.
    let events = w.cluster.objects("events", "default");
    assert!(
        events.iter().any(|e| e["reason"] == "FailedCreate"
            && e["involvedObject"]["name"] == json!(handle.record().k8s_name)),
        "{events:?}"
    );
    let err = handle.result(options()).await.unwrap_err();
    let EngineError::NoResult { state, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(
        matches!(&state.reason, Some(StatusReason::PendingDeadlineExceeded { cause: Some(c), .. }) if matches!(**c, StatusReason::PodCreationFailed { .. })),
        "{state:?}"
    );
    assert!(err.to_string().contains("exceeded quota"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_service_account_is_refused_at_submit() {
    let w =
        World::with_cluster(kinetic_fake_gcp_server::fake_cluster_config().service_accounts(&[]))
            .await;
    let err = w
        .engine()
        .submit(w.spec("work:square").arg(json!(2)))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("service account 'kinetic' does not exist in namespace 'default'")
            && text.contains("kubectl create serviceaccount kinetic -n default"),
        "{text}"
    );
    assert!(w.cluster.objects("jobs.batch", "default").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_job_ends_and_the_cluster_collects_it() {
    let w = World::new().await;
    let client =
        kube::Client::try_from(kube::Config::new(w.cluster.url().parse().unwrap())).unwrap();
    let backend = GkeBackend::new(
        client,
        gke_options().manifest(
            kinetic_backend_gke::ManifestOptions::default().with_ttl_seconds_after_finished(1),
        ),
    );
    let handle = w
        .engine_over(backend, w.images(), w.env.clone())
        .submit(w.spec("work:sleep_forever"))
        .await
        .unwrap();
    let state = wait_for(&handle, |s| s.status != JobStatus::Pending).await;
    assert_eq!(state.status, JobStatus::Running, "{state:?}");
    handle.cancel().await.unwrap();
    let name = handle.record().k8s_name.clone();
    // The Job controller ends it: a terminal condition, not a suspension…
    let mut failed = false;
    for _ in 0..400 {
        let Some(job) = w.cluster.object("jobs.batch", "default", &name) else {
            break;
        };
        assert_ne!(job["spec"]["suspend"], json!(true), "{job}");
        failed |= job["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Failed" && c["status"] == "True");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(failed, "the cancelled Job never got a Failed condition");
    // …so its TTL removes it, and with it its pod.
    assert!(
        w.cluster.object("jobs.batch", "default", &name).is_none(),
        "the cancelled Job was never collected"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_with_the_edit_role_runs_a_job_that_captures_env() {
    let w = World::new().await;
    let backend = w.backend_as("dev", "edit");
    let mut env = w.env.clone();
    env.insert("KERAS_BACKEND", "torch");
    let handle = w
        .engine_over(backend, w.images(), env)
        .submit(
            w.spec("work:env_value_digest")
                .arg(json!("KERAS_BACKEND"))
                .env(EnvEntry::parse_cli("KERAS_BACKEND").unwrap()),
        )
        .await
        .unwrap();
    let value = handle.result(options()).await.unwrap();
    use sha2::Digest;
    // The captured value, not the container's default (`jax`).
    assert_eq!(value, json!(hex::encode(sha2::Sha256::digest(b"torch"))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_call_names_the_permission_missing() {
    let w = World::new().await;
    let backend = w.backend_as("dev", "view");
    let err = w
        .engine_over(backend, w.images(), w.env.clone())
        .submit(w.spec("work:square").arg(json!(2)))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("missing permission: 'create' on 'jobs' (API group batch)")
            && text.contains("kubectl auth can-i create jobs.batch -n default"),
        "{text}"
    );
}

/// Kinetic's FAQ: on success the Job and pod are removed, a failed job is
/// kept so its logs can be read, bucket artifacts stay unless asked; a
/// cleaned-up job says so and its value can be read again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_follows_kinetics_faq() {
    let w = World::new().await;
    let engine = w.engine();
    let ok = engine
        .submit(w.spec("work:square").arg(json!(4)))
        .await
        .unwrap();
    assert_eq!(ok.result(options()).await.unwrap(), json!(16));
    assert!(
        w.cluster
            .object("jobs.batch", "default", &ok.record().k8s_name)
            .is_none(),
        "a succeeded job's Job is removed"
    );
    let state = ok.status().await.unwrap();
    assert_eq!(state.status, JobStatus::NotFound);
    assert_eq!(
        state.reason,
        Some(StatusReason::CleanedUp { collected: true })
    );
    assert_eq!(
        state.to_string(),
        "NOT_FOUND (cleaned up; its result stays in the store)"
    );
    // Asked again (from another process too): the value, from the bucket.
    let again = engine.attach(ok.id().as_str()).await.unwrap();
    assert_eq!(again.result(options()).await.unwrap(), json!(16));
    // Cancelling it says it had finished.
    let finished = again.cancel_if_running().await.unwrap();
    assert!(finished.is_some(), "{finished:?}");

    let failed = engine
        .submit(w.spec("work:boom").arg(json!("kept")))
        .await
        .unwrap();
    assert!(failed.result(options()).await.is_err());
    assert!(
        w.cluster
            .object("jobs.batch", "default", &failed.record().k8s_name)
            .is_some(),
        "a failed job's Job is kept for its logs"
    );
    let logs = failed.logs().await.unwrap();
    assert!(logs.contains("ValueError: kept"), "{logs}");
    let finished = failed.cancel_if_running().await.unwrap();
    assert_eq!(finished.map(|s| s.status), Some(JobStatus::Failed));
}

/// The runner copies the pod's output to the bucket while the job runs, so
/// its logs are readable there before it ends, and still after its pod and
/// Job are gone: `logs`, `tail` and a follower attached from elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_outlive_the_pod_and_the_job() {
    let w = World::new().await;
    let engine = w.engine();
    let release = w.dir.path().join("release");
    let handle = engine
        .submit(w.spec("work:wait_for").arg(json!(release)))
        .await
        .unwrap();
    let prefix = kinetic_core::layout::log_chunks(handle.id(), 0);
    let stored = || async {
        let mut text = Vec::new();
        let mut names = Vec::new();
        let mut metas = w.store.list(Some(&prefix)).await.unwrap();
        metas.sort_by(|a, b| a.path.cmp(&b.path));
        for meta in metas {
            text.extend(w.store.get(&meta.path, Default::default()).await.unwrap());
            names.push(meta.path.as_str().rsplit('/').next().unwrap().to_owned());
        }
        (String::from_utf8(text).unwrap(), names)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (text, names) = stored().await;
        if text.contains("waiting for release") {
            assert!(!names.iter().any(|n| n.ends_with(".end")), "{names:?}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never stored: {text:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    std::fs::write(&release, "").unwrap();
    assert_eq!(handle.result(options()).await.unwrap(), json!("done"));
    // The Job and its pod are gone…
    assert!(w.cluster.objects("jobs.batch", "default").is_empty());
    assert!(w.cluster.objects("pods", "default").is_empty());
    // …the log is not: read from another process's handle.
    let again = engine.attach(handle.id().as_str()).await.unwrap();
    let logs = again.logs().await.unwrap();
    for line in [
        "[kinetic] startup: job",
        "waiting for release",
        "released",
        "[kinetic] result upload: wrote",
    ] {
        assert!(logs.contains(line), "{line:?} missing from {logs}");
    }
    // The stored copy's last line; which stream's line is last may vary,
    // as the user's stdout and the runner's stderr are copied side by side.
    let tail = again.tail(1).await.unwrap();
    assert_eq!(tail.trim_end(), logs.lines().last().unwrap(), "{logs}");
    let followed: Vec<String> = again
        .follow_logs()
        .await
        .unwrap()
        .map(Result::unwrap)
        .collect()
        .await;
    assert_eq!(followed.join("\n") + "\n", logs);
    let (_, names) = stored().await;
    assert!(names.last().unwrap().ends_with(".end"), "{names:?}");
}
