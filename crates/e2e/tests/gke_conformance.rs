//! The GKE backend passes the Backend conformance suite over the fake
//! Kubernetes cluster, whose kubelet runs the real runner as a process
//! against the fake GCS server; the suite counts the API requests of a
//! group status.

use std::sync::Arc;

use async_trait::async_trait;
use kinetic_backend_gke::{GkeBackend, GkeOptions};
use kinetic_core::env::CapturedEnv;
use kinetic_core::ports::{Backend, ObjectStore, PreparedJob};
use kinetic_fake_gcp::FakeGcs;
use kinetic_fake_gcp::k8s::{FakeCluster, FakeClusterConfig};
use kinetic_store_gcs::{GcsOptions, GcsStore};
use kinetic_testkit::conformance::backend::{self, BackendHarness};
use kinetic_testkit::{ConformanceJob, prepare_python_job};

struct GkeHarness {
    _dir: tempfile::TempDir,
    _gcs: FakeGcs,
    cluster: FakeCluster,
    store: Arc<dyn ObjectStore>,
    backend: Arc<dyn Backend>,
}

impl GkeHarness {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let gcs = FakeGcs::with_buckets(&["kn-jobs"]).unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(
            GcsStore::open("gs://kn-jobs", &GcsOptions::emulator(&gcs.endpoint())).unwrap(),
        );
        let cluster = FakeCluster::start(
            FakeClusterConfig::default()
                .env("KINETIC_GCS_ENDPOINT", &gcs.endpoint())
                .kill_grace(std::time::Duration::from_millis(500)),
        )
        .await
        .unwrap();
        let client =
            kube::Client::try_from(kube::Config::new(cluster.url().parse().unwrap())).unwrap();
        let backend = GkeBackend::new(
            client,
            GkeOptions::new("default").poll_interval(std::time::Duration::from_millis(50)),
        );
        Self {
            _dir: dir,
            _gcs: gcs,
            cluster,
            store,
            backend: Arc::new(backend),
        }
    }
}

#[async_trait]
impl BackendHarness for GkeHarness {
    fn backend(&self) -> Arc<dyn Backend> {
        self.backend.clone()
    }

    fn store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }

    /// Requests to the fake Kubernetes API server.
    fn system_calls(&self) -> Option<u64> {
        Some(self.cluster.calls().total())
    }

    async fn prepare(&self, job: ConformanceJob, env: CapturedEnv) -> PreparedJob {
        let mut job = prepare_python_job(&self.store, "gke", &job, env).await;
        job.record.image_uri = "registry.invalid/kinetic/conformance:latest".into();
        job
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gke_backend_conforms_over_the_fake_cluster() {
    let h = GkeHarness::new().await;
    backend::run(&h).await;
    // Everything the suite cleaned up is gone from the cluster, Secrets included.
    let secrets = h.cluster.objects("secrets", "default");
    let jobs = h.cluster.objects("jobs.batch", "default");
    assert!(
        secrets.len() <= jobs.len(),
        "a Secret outlived its Job: {secrets:?}"
    );
}
