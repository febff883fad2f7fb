//! Nodes, taints and the autoscaler of the fake cluster, and the
//! cluster-scoped objects `kinetic up` installs, as a real `kube::Client`
//! sees them.

use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Event, Namespace, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kinetic_fake_gcp::k8s::{FakeCluster, FakeClusterConfig, FakeNode, NodeGroup};
use kube::api::{Api, ListParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::json;

fn client(cluster: &FakeCluster) -> kube::Client {
    kube::Client::try_from(kube::Config::new(cluster.url().parse().unwrap())).unwrap()
}

fn gpu_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": "img", "command": ["sleep", "30"],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}}],
        },
    }))
    .unwrap()
}

async fn until<T>(what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_pod_grows_its_node_group_and_an_idle_node_goes() {
    let cluster = FakeCluster::start(
        FakeClusterConfig::default()
            .image("img", "python3")
            .scale_up_delay(Duration::from_millis(100))
            .scale_down_after(Duration::from_millis(300)),
    )
    .await
    .unwrap();
    let client = client(&cluster);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let nodes: Api<Node> = Api::all(client.clone());
    assert_eq!(
        nodes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );

    // No node for it: Pending, with the scheduler's reason.
    pods.create(&PostParams::default(), &gpu_pod("p1"))
        .await
        .unwrap();
    let message = until("unschedulable", async || {
        let p = pods.get("p1").await.ok()?;
        let c = p
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "PodScheduled")?;
        (c.reason.as_deref() == Some("Unschedulable")).then(|| c.message.unwrap_or_default())
    })
    .await;
    assert!(
        message.contains("1 node(s) didn't match Pod's node affinity/selector"),
        "{message}"
    );

    // A pool for it: the autoscaler adds a node, the pod runs there.
    let template = FakeNode::cpu("t")
        .label("cloud.google.com/gke-accelerator", "nvidia-l4")
        .capacity("nvidia.com/gpu", 1)
        .taint("nvidia.com/gpu", "present", "NoSchedule");
    cluster.set_node_group(
        NodeGroup {
            name: "gpu-l4-0000".into(),
            id: "https://www.googleapis.com/compute/v1/projects/p/zones/z/instanceGroups/gke-c-gpu-l4-0000-1a2b3c4d-grp".into(),
            autoscaled: true,
            node_prefix: "gke-c-gpu-l4-0000-1a2b3c4d-".into(),
            template,
            min: 0,
            max: 2,
            step: 1,
        },
        0,
    );
    let node = until("scheduled", async || {
        pods.get("p1").await.ok()?.spec?.node_name
    })
    .await;
    assert!(node.starts_with("gke-c-gpu-l4-0000-1a2b3c4d-"), "{node}");
    let n = nodes.get(&node).await.unwrap();
    assert_eq!(
        n.metadata.labels.unwrap()["cloud.google.com/gke-nodepool"],
        "gpu-l4-0000"
    );
    assert_eq!(n.spec.unwrap().taints.unwrap()[0].key, "nvidia.com/gpu");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let reasons: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    assert!(
        reasons.contains(&"TriggeredScaleUp".to_owned()),
        "{reasons:?}"
    );
    assert!(
        reasons.contains(&"FailedScheduling".to_owned()),
        "{reasons:?}"
    );

    // The pod ends (deleted): the idle node goes, down to the minimum.
    pods.delete("p1", &Default::default()).await.unwrap();
    until("scale down", async || {
        nodes.get_opt(&node).await.ok()?.is_none().then_some(())
    })
    .await;

    // Removing the group removes its nodes.
    cluster.set_node_group(
        NodeGroup {
            name: "gpu-l4-0001".into(),
            id: "gke-c-gpu-l4-0001-0-grp".into(),
            autoscaled: false,
            node_prefix: "gke-c-gpu-l4-0001-0-".into(),
            template: FakeNode::cpu("t"),
            min: 1,
            max: 1,
            step: 1,
        },
        1,
    );
    assert_eq!(cluster.nodes().len(), 2);
    cluster.remove_node_group("gpu-l4-0001");
    assert_eq!(cluster.nodes().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_scoped_objects_and_discovery() {
    let cluster = FakeCluster::start(FakeClusterConfig::default().controller(false))
        .await
        .unwrap();
    let client = client(&cluster);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    assert!(namespaces.get("default").await.is_ok());
    assert!(namespaces.get("kube-system").await.is_ok());
    assert!(namespaces.get_opt("team-a").await.unwrap().is_none());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team-a"}})).unwrap();
    let created = namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    assert_eq!(created.metadata.namespace, None, "cluster-scoped");

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "names": {"kind": "Widget", "plural": "widgets"},
                 "scope": "Namespaced",
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    assert!(crds.get("widgets.example.com").await.is_ok());
    let Err(kube::Error::Api(s)) = crds.create(&PostParams::default(), &crd).await else {
        panic!("duplicate")
    };
    assert_eq!(s.code, 409);

    // Discovery finds the kinds a manifest names, with their scope.
    for (group, kind, namespaced) in [
        ("apps", "DaemonSet", true),
        ("apiextensions.k8s.io", "CustomResourceDefinition", false),
        ("rbac.authorization.k8s.io", "ClusterRole", false),
        ("", "ServiceAccount", true),
    ] {
        let gvk = GroupVersionKind::gvk(group, "v1", kind);
        let (ar, caps) = kube::discovery::pinned_kind(&client, &gvk).await.unwrap();
        assert_eq!(ar.kind, kind);
        assert_eq!(
            caps.scope == kube::discovery::Scope::Namespaced,
            namespaced,
            "{kind}"
        );
    }
    let daemonsets: Api<DaemonSet> = Api::namespaced(client, "kube-system");
    assert!(
        daemonsets
            .get_opt("nvidia-driver-installer")
            .await
            .unwrap()
            .is_none()
    );
}

/// The events the cluster autoscaler writes on a pending pod, as its
/// `EventingScaleUpStatusProcessor` does: `NotTriggerScaleUp` with each
/// reason counted once per autoscaled group (a pool without autoscaling is
/// none of its groups), `TriggeredScaleUp` naming the group's id (on GKE
/// its instance group's URL) and its size change, and `max node group size
/// reached` for a group that fits but is full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_autoscaler_tells_a_pod_no_pool_fits_or_which_pool_grows() {
    let cluster = FakeCluster::start(
        FakeClusterConfig::default()
            .scale_up_delay(Duration::from_secs(30))
            .scale_down_after(Duration::from_secs(600)),
    )
    .await
    .unwrap();
    let client = client(&cluster);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let said = |pod: &'static str, reason: &'static str| {
        let events = events.clone();
        async move {
            events
                .list(&ListParams::default().fields(&format!(
                    "involvedObject.kind=Pod,involvedObject.name={pod},reason={reason}"
                )))
                .await
                .ok()?
                .items
                .into_iter()
                .filter(|e| {
                    e.source.as_ref().and_then(|s| s.component.as_deref())
                        == Some("cluster-autoscaler")
                })
                .map(|e| e.message.unwrap_or_default())
                .next_back()
        }
    };
    // A fixed pool (no autoscaling): the autoscaler does not run at all.
    cluster.set_node_group(
        NodeGroup {
            name: "default-pool".into(),
            id: "https://www.googleapis.com/compute/v1/projects/p/zones/z/instanceGroups/gke-c-default-pool-00000000-grp".into(),
            autoscaled: false,
            node_prefix: "gke-c-default-pool-00000000-".into(),
            template: FakeNode::cpu("t"),
            min: 1,
            max: 1,
            step: 1,
        },
        1,
    );
    pods.create(&PostParams::default(), &gpu_pod("p1"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(said("p1", "NotTriggerScaleUp").await, None);

    // An autoscaled CPU pool that cannot take it: not triggered, and why.
    cluster.set_node_group(
        NodeGroup {
            name: "cpu-spot-0000".into(),
            id: "https://www.googleapis.com/compute/v1/projects/p/zones/z/instanceGroups/gke-c-cpu-spot-0000-11111111-grp".into(),
            autoscaled: true,
            node_prefix: "gke-c-cpu-spot-0000-11111111-".into(),
            template: FakeNode::cpu("t").label("cloud.google.com/gke-spot", "true"),
            min: 0,
            max: 3,
            step: 1,
        },
        0,
    );
    let message = until("NotTriggerScaleUp", async || {
        said("p1", "NotTriggerScaleUp").await
    })
    .await;
    assert_eq!(
        message,
        "pod didn't trigger scale-up: 1 node(s) didn't match Pod's node affinity/selector"
    );

    // A pool of L4 nodes at 0, at most 1: it grows for the pod.
    let l4 = FakeNode::cpu("t")
        .label("cloud.google.com/gke-accelerator", "nvidia-l4")
        .capacity("nvidia.com/gpu", 1)
        .taint("nvidia.com/gpu", "present", "NoSchedule");
    cluster.set_node_group(
        NodeGroup {
            name: "gpu-l4-0000".into(),
            id: "https://www.googleapis.com/compute/v1/projects/p/zones/z/instanceGroups/gke-c-gpu-l4-0000-22222222-grp".into(),
            autoscaled: true,
            node_prefix: "gke-c-gpu-l4-0000-22222222-".into(),
            template: l4,
            min: 0,
            max: 1,
            step: 1,
        },
        0,
    );
    let message = until("TriggeredScaleUp", async || {
        said("p1", "TriggeredScaleUp").await
    })
    .await;
    assert_eq!(
        message,
        "pod triggered scale-up: [{https://www.googleapis.com/compute/v1/projects/p/zones/z/instanceGroups/gke-c-gpu-l4-0000-22222222-grp 0->1 (max: 1)}]"
    );

    // Once its node is there (the pool at its maximum), another pod is
    // told the pool is full; the CPU pool still does not match.
    cluster.set_node_group(
        NodeGroup {
            name: "gpu-l4-0000".into(),
            id: "https://www.googleapis.com/compute/v1/projects/p/zones/z/instanceGroups/gke-c-gpu-l4-0000-22222222-grp".into(),
            autoscaled: true,
            node_prefix: "gke-c-gpu-l4-0000-22222222-".into(),
            template: FakeNode::cpu("t")
                .label("cloud.google.com/gke-accelerator", "nvidia-l4")
                .capacity("nvidia.com/gpu", 1)
                .taint("nvidia.com/gpu", "present", "NoSchedule"),
            min: 0,
            max: 1,
            step: 1,
        },
        1,
    );
    until("p1 scheduled", async || {
        pods.get("p1").await.ok()?.spec?.node_name
    })
    .await;
    pods.create(&PostParams::default(), &gpu_pod("p2"))
        .await
        .unwrap();
    let message = until("NotTriggerScaleUp for p2", async || {
        said("p2", "NotTriggerScaleUp").await
    })
    .await;
    assert_eq!(
        message,
        "pod didn't trigger scale-up: 1 max node group size reached, 1 node(s) didn't match Pod's node affinity/selector"
    );
}
