//! GCS FUSE CSI volumes as GKE serves them: without the
//! `gke-gcsfuse/volumes: "true"` annotation no sidecar is injected, the pod
//! stays `ContainerCreating` and the kubelet reports `FailedMount`; with
//! it, the bucket's objects under `only-dir` are shown read-only to the
//! container, and a write fails (`EROFS`) whoever the process runs as.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kinetic_fake_gcp::FakeGcs;
use kinetic_fake_gcp::k8s::{FakeCluster, FakeClusterConfig};
use kube::api::{Api, LogParams, PostParams};
use serde_json::json;

/// A pod mounting `gs://data/sets/one/` at `/data`; its command reads a
/// file of the mount (shown under `../mounts/` from its working directory)
/// and tries to write one.
fn pod(name: &str, annotated: bool) -> Pod {
    let annotations = if annotated {
        json!({"gke-gcsfuse/volumes": "true"})
    } else {
        json!({})
    };
    let script = "import os\n\
        print(open('../mounts/data/x/a.txt').read(), flush=True)\n\
        print(sorted(os.listdir('../mounts/data')), flush=True)\n\
        try:\n    open('../mounts/data/new.txt', 'w')\nexcept OSError as e:\n    print('write:', e.strerror, flush=True)\n";
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"restartPolicy": "Never",
            "volumes": [{"name": "gcs-fuse-0", "csi": {"driver": "gcsfuse.csi.storage.gke.io",
                "volumeAttributes": {"bucketName": "data", "mountOptions": "implicit-dirs,only-dir=sets/one"}}}],
            "containers": [{
                "name": "c", "image": "fake.registry.invalid/x:1",
                "command": ["python3", "-c", script],
                "volumeMounts": [{"name": "gcs-fuse-0", "mountPath": "/data", "readOnly": true}],
            }]},
    }))
    .unwrap()
}

async fn wait_for(api: &Api<Pod>, name: &str, what: &str, check: impl Fn(&Pod) -> bool) -> Pod {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(p) = api.get(name).await
            && check(&p)
        {
            return p;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn phase(p: &Pod) -> Option<&str> {
    p.status.as_ref()?.phase.as_deref()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_needs_the_sidecar_annotation_and_mounts_read_only() {
    let gcs = FakeGcs::with_buckets(&["data"]).unwrap();
    gcs.put_object("data", "sets/one/x/a.txt", b"alpha");
    gcs.put_object("data", "sets/one/b.txt", b"beta");
    gcs.put_object("data", "sets/two/hidden.txt", b"not in the mount");
    let cluster = FakeCluster::start(
        FakeClusterConfig::default()
            .image("fake.registry.invalid/x:1", "python3")
            .env("KINETIC_GCS_ENDPOINT", &gcs.endpoint()),
    )
    .await
    .unwrap();
    let client = kube::Client::try_from(kube::Config::new(cluster.url().parse().unwrap())).unwrap();
    let api: Api<Pod> = Api::namespaced(client, "default");

    api.create(&PostParams::default(), &pod("bare", false))
        .await
        .unwrap();
    let stuck = wait_for(&api, "bare", "the mount to fail", |p| {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|s| s.first())
            .and_then(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone())
            .as_deref()
            == Some("ContainerCreating")
    })
    .await;
    assert_eq!(phase(&stuck), Some("Pending"));
    let events = cluster.objects("events", "default");
    let failed = events
        .iter()
        .find(|e| e["reason"] == "FailedMount" && e["involvedObject"]["name"] == "bare")
        .unwrap_or_else(|| panic!("no FailedMount event: {events:?}"));
    assert_eq!(failed["type"], "Warning");
    assert_eq!(
        failed["message"],
        "MountVolume.SetUp failed for volume \"gcs-fuse-0\" : rpc error: code = FailedPrecondition desc = failed to find the sidecar container in Pod spec"
    );

    api.create(&PostParams::default(), &pod("annotated", true))
        .await
        .unwrap();
    let done = wait_for(&api, "annotated", "the pod to end", |p| {
        matches!(phase(p), Some("Succeeded" | "Failed"))
    })
    .await;
    let log = api.logs("annotated", &LogParams::default()).await.unwrap();
    assert_eq!(phase(&done), Some("Succeeded"), "{log}");
    assert_eq!(
        log, "alpha\n['b.txt', 'x']\nwrite: Read-only file system\n",
        "only-dir's objects, read-only"
    );
    // The bare pod never started.
    let bare = api.get("bare").await.unwrap();
    assert_eq!(phase(&bare), Some("Pending"));
    assert!(gcs.object("data", "sets/one/new.txt").is_none());
}
