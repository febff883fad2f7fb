//! The fake Kubernetes API server as a real `kube::Client` sees it:
//! `Status` bodies for 404 and 409, `stringData`, label selectors, watches
//! from a version, a custom resource (LeaderWorkerSet) and scripted API
//! failures.

use std::collections::BTreeMap;

use futures_util::TryStreamExt;
use k8s_openapi::api::core::v1::Secret;
use kinetic_fake_gcp::k8s::{ApiError, FakeCluster, FakeClusterConfig};
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_answers_as_kubernetes_does() {
    let cluster = FakeCluster::start(FakeClusterConfig::default().controller(false))
        .await
        .unwrap();
    let client = kube::Client::try_from(kube::Config::new(cluster.url().parse().unwrap())).unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "ns");
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s1", "labels": {"app": "kinetic", "tier": "a"}},
        "stringData": {"K": "v"},
    }))
    .unwrap();
    let created = secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some() && created.metadata.resource_version.is_some());
    let Err(kube::Error::Api(status)) = secrets.create(&PostParams::default(), &secret).await
    else {
        panic!("a duplicate create must fail")
    };
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "AlreadyExists")
    );
    let Err(kube::Error::Api(status)) = secrets.get("nope").await else {
        panic!("a missing object must be 404")
    };
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
    assert!(
        status.message.contains("\"nope\" not found"),
        "{}",
        status.message
    );
    let got = secrets.get("s1").await.unwrap();
    assert_eq!(
        got.data.unwrap()["K"].0,
        b"v".to_vec(),
        "stringData folds into data"
    );

    // Label selectors.
    let mut other = secret.clone();
    other.metadata.name = Some("s2".into());
    other.metadata.labels = Some(BTreeMap::from([("app".into(), "other".into())]));
    secrets
        .create(&PostParams::default(), &other)
        .await
        .unwrap();
    let names = |l: kube::core::ObjectList<Secret>| -> Vec<String> {
        l.items
            .into_iter()
            .filter_map(|s| s.metadata.name)
            .collect()
    };
    assert_eq!(
        names(
            secrets
                .list(&ListParams::default().labels("app=kinetic"))
                .await
                .unwrap()
        ),
        ["s1"]
    );
    assert_eq!(
        names(
            secrets
                .list(&ListParams::default().labels("tier notin (a)"))
                .await
                .unwrap()
        ),
        ["s2"]
    );
    let all = secrets.list(&ListParams::default()).await.unwrap();
    let rv = all.metadata.resource_version.clone().unwrap();

    // Watch from a version: later changes arrive in order.
    let watch = secrets
        .watch(&WatchParams::default().timeout(5), &rv)
        .await
        .unwrap();
    secrets
        .delete("s2", &DeleteParams::default())
        .await
        .unwrap();
    let mut watch = Box::pin(watch);
    let first = watch.try_next().await.unwrap().unwrap();
    assert!(
        matches!(first, WatchEvent::Deleted(ref s) if s.metadata.name.as_deref() == Some("s2")),
        "{first:?}"
    );

    // A custom resource: LeaderWorkerSet, once its CRD is installed.
    cluster.install_leader_worker_set().unwrap();
    let gvk = GroupVersionKind::gvk("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "leaderworkersets");
    let lws: Api<DynamicObject> = Api::namespaced_with(client.clone(), "ns", &ar);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "keras-pathways-job-1", "labels": {"app": "kinetic-pathways"}},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2,
                 "workerTemplate": {"spec": {"containers": [{"name": "w", "image": "i"}]}}}},
    }))
    .unwrap();
    lws.create(&PostParams::default(), &obj).await.unwrap();
    let back = lws.get("keras-pathways-job-1").await.unwrap();
    assert_eq!(back.data["spec"]["leaderWorkerTemplate"]["size"], 2);
    assert_eq!(
        lws.list(&ListParams::default().labels("app=kinetic-pathways"))
            .await
            .unwrap()
            .items
            .len(),
        1
    );

    // Scripted API failures surface as Status errors.
    cluster
        .faults()
        .fail_next(ApiError::new(403, "Forbidden", "secrets is forbidden"));
    let Err(kube::Error::Api(status)) = secrets.get("s1").await else {
        panic!("the scripted fault")
    };
    assert_eq!(status.code, 403);
}

/// `POST pods/{name}/eviction`: the pod is marked with the
/// `DisruptionTarget` condition (`EvictionByEvictionAPI`) and deleted
/// gracefully; a missing pod is a 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_eviction_api_marks_and_deletes_the_pod() {
    use k8s_openapi::api::core::v1::Pod;
    let cluster = FakeCluster::start(FakeClusterConfig::default().controller(false))
        .await
        .unwrap();
    let client = kube::Client::try_from(kube::Config::new(cluster.url().parse().unwrap())).unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "ns");
    cluster
        .insert(
            "pods",
            "ns",
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p1"},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
                "status": {"phase": "Running", "conditions": []},
            }),
        )
        .unwrap();
    pods.evict("p1", &kube::api::EvictParams::default())
        .await
        .unwrap();
    let evicted = cluster.object("pods", "ns", "p1").expect("terminating");
    assert!(
        evicted["metadata"]["deletionTimestamp"].is_string(),
        "{evicted}"
    );
    let conditions = evicted["status"]["conditions"].as_array().unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c["type"] == "DisruptionTarget" && c["reason"] == "EvictionByEvictionAPI"),
        "{evicted}"
    );
    let Err(kube::Error::Api(status)) =
        pods.evict("nope", &kube::api::EvictParams::default()).await
    else {
        panic!("evicting a missing pod must be 404")
    };
    assert_eq!(status.code, 404);
}

/// The Job controller's counters only grow, as the real one's do (each
/// pod carries the `batch.kubernetes.io/job-tracking` finalizer until its
/// end is counted): a pod PodGC force-deletes once its node is gone is
/// counted once, not lost; failed pods deleted afterwards (explicitly, or
/// evicted) take nothing back from `status.failed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_failed_count_only_grows_whoever_deletes_its_pods() {
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::Pod;
    use kinetic_fake_gcp::k8s::FakeNode;
    use std::time::{Duration, Instant};
    let cluster = FakeCluster::start(
        FakeClusterConfig::default()
            .nodes(vec![FakeNode::cpu("n1"), FakeNode::cpu("n2")])
            .image("fake.registry.invalid/x:1", "python3"),
    )
    .await
    .unwrap();
    let client = kube::Client::try_from(kube::Config::new(cluster.url().parse().unwrap())).unwrap();
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let job = |name: &str, code: &str| -> Job {
        serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name},
            "spec": {"backoffLimit": 100, "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "fake.registry.invalid/x:1",
                                "command": ["python3", "-c", code]}]}}},
        }))
        .unwrap()
    };
    let failed = async |name: &str| {
        jobs.get(name)
            .await
            .unwrap()
            .status
            .and_then(|s| s.failed)
            .unwrap_or(0)
    };

    // A pod running on a node that goes: PodGC fails and force-deletes it;
    // the Job counts it once.
    jobs.create(
        &PostParams::default(),
        &job("lost", "import time; time.sleep(100)"),
    )
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (first, node) = loop {
        let listed = pods
            .list(&ListParams::default().labels("job-name=lost"))
            .await
            .unwrap();
        if let Some(p) = listed
            .items
            .iter()
            .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        {
            assert_eq!(
                p.metadata.finalizers.as_deref(),
                Some(&["batch.kubernetes.io/job-tracking".to_owned()][..]),
                "{p:?}"
            );
            break (
                p.metadata.name.clone().unwrap(),
                p.spec.as_ref().unwrap().node_name.clone().unwrap(),
            );
        }
        assert!(Instant::now() < deadline, "no running pod");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    cluster.delete_node(&node).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while pods.get_opt(&first).await.unwrap().is_some() || failed("lost").await == 0 {
        assert!(
            Instant::now() < deadline,
            "the lost pod was not counted and removed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for _ in 0..20 {
        assert_eq!(failed("lost").await, 1, "counted once");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Pods that fail at once: once three are counted, every pod of the Job
    // is deleted, one evicted; the count never goes down.
    jobs.create(
        &PostParams::default(),
        &job("failing", "raise SystemExit(3)"),
    )
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while failed("failing").await < 3 {
        assert!(Instant::now() < deadline, "three failures");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = failed("failing").await;
    let listed = pods
        .list(&ListParams::default().labels("job-name=failing"))
        .await
        .unwrap();
    for (i, p) in listed.items.iter().enumerate() {
        let name = p.metadata.name.as_deref().unwrap();
        if i == 0 {
            let _ = pods.evict(name, &kube::api::EvictParams::default()).await;
        } else {
            let _ = pods.delete(name, &DeleteParams::default()).await;
        }
    }
    let mut seen = before;
    for _ in 0..50 {
        let now = failed("failing").await;
        assert!(now >= seen, "status.failed went from {seen} down to {now}");
        seen = now;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
