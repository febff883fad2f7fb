//! The Backend conformance harness of a Kubernetes backend over the fake
//! cluster, whose kubelet runs the real runner as a process against the
//! fake GCS server; the suite counts the API requests of a group status.

use std::sync::Arc;

use async_trait::async_trait;
use kinetic_core::env::CapturedEnv;
use kinetic_core::ports::{Backend, ObjectStore, PreparedBatch, PreparedJob};
use kinetic_fake_gcp::FakeGcs;
use kinetic_fake_gcp::k8s::FakeCluster;
use kinetic_store_gcs::{GcsOptions, GcsStore};
use kinetic_testkit::conformance::backend::BackendHarness;
use kinetic_testkit::{
    ConformanceJob, prepare_python_batch, prepare_python_batch_in_blocks, prepare_python_batch_of,
    prepare_python_job,
};

/// The image the conformance jobs run.
pub const IMAGE: &str = "registry.invalid/kinetic/conformance:latest";

pub struct ClusterHarness {
    _gcs: FakeGcs,
    pub cluster: FakeCluster,
    store: Arc<dyn ObjectStore>,
    backend: Arc<dyn Backend>,
    name: &'static str,
}

impl ClusterHarness {
    /// The fake GCS and cluster, `setup` run on the cluster, and the
    /// backend `make` builds over a client of it and the jobs' store.
    pub async fn new(
        setup: impl FnOnce(&FakeCluster),
        make: impl FnOnce(kube::Client, Arc<dyn ObjectStore>) -> Arc<dyn Backend>,
    ) -> Self {
        let gcs = FakeGcs::with_buckets(&["kn-jobs"]).unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(
            GcsStore::open("gs://kn-jobs", &GcsOptions::emulator(&gcs.endpoint())).unwrap(),
        );
        let cluster = FakeCluster::start(
            kinetic_fake_gcp_server::fake_cluster_config()
                // The one image the jobs here run: no build makes it, so it
                // is named with the host's interpreter.
                .image(IMAGE, "python3")
                .env("KINETIC_GCS_ENDPOINT", &gcs.endpoint())
                .kill_grace(std::time::Duration::from_millis(500)),
        )
        .await
        .unwrap();
        setup(&cluster);
        let client =
            kube::Client::try_from(kube::Config::new(cluster.url().parse().unwrap())).unwrap();
        let backend = make(client, store.clone());
        let name = if backend.name() == "pathways" {
            "pathways"
        } else {
            "gke"
        };
        Self {
            _gcs: gcs,
            cluster,
            store,
            backend,
            name,
        }
    }
}

#[async_trait]
impl BackendHarness for ClusterHarness {
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

    // Stops take a grace period (the default) when the job ignores SIGTERM:
    // a gke pod's, and a pathways host's too: its entrypoint is a shell
    // (`HOLD_WORKERS`), the container's PID 1, that hands SIGTERM to the
    // command and waits for it (the fake kubelet delivers SIGTERM only to a
    // main process that catches it, as the kernel does to a PID namespace's
    // init).

    async fn prepare(&self, job: ConformanceJob, env: CapturedEnv) -> PreparedJob {
        let mut job = prepare_python_job(&self.store, self.name, &job, env).await;
        job.record.image_uri = IMAGE.into();
        job
    }

    async fn prepare_batch(&self, values: &[i64], parallelism: usize) -> PreparedBatch {
        let mut batch = prepare_python_batch(&self.store, self.name, values, parallelism, 0).await;
        batch.job.record.image_uri = IMAGE.into();
        batch
    }

    async fn prepare_sleeping_batch(&self, inputs: usize) -> PreparedBatch {
        let mut batch = prepare_python_batch_of(
            &self.store,
            self.name,
            "sleeps",
            vec![Vec::new(); inputs],
            inputs,
            0,
            CapturedEnv::default(),
        )
        .await;
        batch.job.record.image_uri = IMAGE.into();
        batch
    }

    async fn prepare_batch_in_blocks(
        &self,
        calls: Vec<Vec<serde_json::Value>>,
        parallelism: usize,
        retries: u32,
        block_size: usize,
    ) -> PreparedBatch {
        let mut batch = prepare_python_batch_in_blocks(
            &self.store,
            self.name,
            "flaky",
            calls,
            parallelism,
            retries,
            block_size,
        )
        .await;
        batch.job.record.image_uri = IMAGE.into();
        batch
    }
}
