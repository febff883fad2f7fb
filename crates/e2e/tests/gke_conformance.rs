//! The GKE backend passes the Backend conformance suite over the fake
//! Kubernetes cluster.

mod support;

use std::sync::Arc;
use std::time::Duration;

use kinetic_backend_gke::{GkeBackend, GkeOptions};
use kinetic_testkit::conformance::backend;
use support::cluster_harness::ClusterHarness;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gke_backend_conforms_over_the_fake_cluster() {
    let h = ClusterHarness::new(
        |_| {},
        |client| {
            Arc::new(GkeBackend::new(
                client,
                GkeOptions::new("default").poll_interval(Duration::from_millis(50)),
            ))
        },
    )
    .await;
    backend::run(&h).await;
    // Everything the suite cleaned up is gone from the cluster, Secrets included.
    let secrets = h.cluster.objects("secrets", "default");
    let jobs = h.cluster.objects("jobs.batch", "default");
    assert!(
        secrets.len() <= jobs.len(),
        "a Secret outlived its Job: {secrets:?}"
    );
}
