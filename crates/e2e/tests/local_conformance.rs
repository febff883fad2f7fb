//! The local backend passes the Backend conformance suite, running the
//! real runner on the host's python3 against a real directory store. The
//! backend reaches the store through a [`CountingStore`], so the suite
//! checks its calls per status poll as it checks the cluster backends'
//! API requests.

use std::sync::Arc;

use async_trait::async_trait;
use kinetic_backend_local::{LocalBackend, LocalOptions};
use kinetic_core::env::CapturedEnv;
use kinetic_core::ports::{Backend, ObjectStore, PreparedJob};
use kinetic_store_gcs::GcsStore;
use kinetic_testkit::conformance::backend::BackendHarness;
use kinetic_testkit::{ConformanceJob, CountingStore, prepare_python_job};

struct LocalHarness {
    _dir: tempfile::TempDir,
    store: Arc<dyn ObjectStore>,
    /// The store as the backend sees it: each call it makes is counted
    /// (the harness's own writes, preparing jobs, are not).
    counted: CountingStore,
    backend: Arc<dyn Backend>,
}

impl LocalHarness {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ObjectStore> =
            Arc::new(GcsStore::local_dir(&dir.path().join("store")).unwrap());
        let counted = CountingStore::new(store.clone());
        let backend = LocalBackend::new(
            LocalOptions::new(dir.path().join("root")).max_concurrent(4),
            Arc::new(counted.clone()),
        )
        .unwrap();
        Self {
            _dir: dir,
            store,
            counted,
            backend: Arc::new(backend),
        }
    }
}

#[async_trait]
impl BackendHarness for LocalHarness {
    fn backend(&self) -> Arc<dyn Backend> {
        self.backend.clone()
    }

    fn store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }

    /// The calls the backend made to its store.
    fn system_calls(&self) -> Option<u64> {
        Some(self.counted.calls())
    }

    async fn prepare(&self, job: ConformanceJob, env: CapturedEnv) -> PreparedJob {
        prepare_python_job(&self.store, "local", &job, env).await
    }
}

kinetic_testkit::backend_conformance_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    harness = LocalHarness::new();
    skips = [
        "submit_batch_runs_every_input_as_its_child",
        "a_cancelled_batch_reports_no_input_running",
        "a_batch_in_blocks_runs_and_retries_each_input_as_its_child",
    ];
}
