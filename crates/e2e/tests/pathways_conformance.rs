//! The Pathways backend passes the Backend conformance suite over the fake
//! Kubernetes cluster with LeaderWorkerSet installed: each job is a
//! LeaderWorkerSet whose group the fake controller creates as pods the
//! fake kubelet runs.

mod support;

use std::sync::Arc;
use std::time::Duration;

use kinetic_backend_pathways::{PathwaysBackend, PathwaysOptions};
use kinetic_testkit::conformance::backend;
use support::cluster_harness::ClusterHarness;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pathways_backend_conforms_over_the_fake_cluster() {
    let h = ClusterHarness::new(
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
    .await;
    backend::run(&h).await;
    let secrets = h.cluster.objects("secrets", "default");
    let sets = h
        .cluster
        .objects("leaderworkersets.leaderworkerset.x-k8s.io", "default");
    assert!(
        secrets.len() <= sets.len(),
        "a Secret outlived its LeaderWorkerSet: {secrets:?}"
    );
}
