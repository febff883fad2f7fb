//! The GKE backend passes the Backend conformance suite over the fake
//! Kubernetes cluster.

mod support;

use std::sync::Arc;
use std::time::Duration;

use kinetic_backend_gke::{GkeBackend, GkeOptions};
use kinetic_testkit::conformance::backend;
use support::cluster_harness::ClusterHarness;

async fn harness() -> ClusterHarness {
    ClusterHarness::new(
        |_| {},
        |client, store| {
            Arc::new(GkeBackend::new(
                client,
                GkeOptions::new("default")
                    .poll_interval(Duration::from_millis(50))
                    .store(store),
            ))
        },
    )
    .await
}

kinetic_testkit::backend_conformance_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    harness = harness().await;
    skips = [];
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleaned_up_job_leaves_no_secret() {
    let h = harness().await;
    for case in [
        "cleanup_forgets_the_job",
        "env_reaches_the_job_and_nowhere_else",
    ] {
        backend::run_case(&h, case, &[]).await;
    }
    // Everything the cases cleaned up is gone from the cluster, Secrets included.
    let secrets = h.cluster.objects("secrets", "default");
    let jobs = h.cluster.objects("jobs.batch", "default");
    assert!(
        secrets.len() <= jobs.len(),
        "a Secret outlived its Job: {secrets:?}"
    );
}
