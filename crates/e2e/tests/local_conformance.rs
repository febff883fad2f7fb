//! The local backend passes the Backend conformance suite, running the
//! real runner on the host's python3 against a real directory store.

use std::sync::Arc;

use async_trait::async_trait;
use kinetic_backend_local::{LocalBackend, LocalOptions};
use kinetic_core::env::CapturedEnv;
use kinetic_core::ports::{Backend, ObjectStore, PreparedJob};
use kinetic_store_gcs::GcsStore;
use kinetic_testkit::conformance::backend::BackendHarness;
use kinetic_testkit::{ConformanceJob, prepare_python_job};

struct LocalHarness {
    _dir: tempfile::TempDir,
    store: Arc<dyn ObjectStore>,
    backend: Arc<dyn Backend>,
}

impl LocalHarness {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ObjectStore> =
            Arc::new(GcsStore::local_dir(&dir.path().join("store")).unwrap());
        let backend = LocalBackend::new(
            LocalOptions::new(dir.path().join("root")).max_concurrent(4),
            store.clone(),
        )
        .unwrap();
        Self {
            _dir: dir,
            store,
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

    async fn prepare(&self, job: ConformanceJob, env: CapturedEnv) -> PreparedJob {
        prepare_python_job(&self.store, "local", &job, env).await
    }
}

kinetic_testkit::backend_conformance_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    harness = LocalHarness::new();
    skips = [];
}
