//! LeaderWorkerSet on the fake cluster, through a real `kube::Client`:
//! served only once its CRD is installed, a group of 4 hosts as real
//! processes with the controller's names, labels and variables, a failing
//! pod recreating its whole group, and deletion cascading to the pods.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kinetic_fake_gcp::k8s::{FakeCluster, FakeClusterConfig};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, LogParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

const NS: &str = "default";

fn lws_api(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet");
    Api::namespaced_with(
        client.clone(),
        NS,
        &ApiResource::from_gvk_with_plural(&gvk, "leaderworkersets"),
    )
}

/// A LeaderWorkerSet of one group of `size` pods running `script` (Python),
/// without a pod `restartPolicy`, as Kinetic's manifests have it.
fn lws(name: &str, size: u32, script: &str) -> DynamicObject {
    let template = json!({
        "metadata": {"labels": {"app": "kinetic-pathways"}},
        "spec": {"containers": [{
            "name": "kinetic-worker", "image": "fake.registry.invalid/runner:latest",
            "command": ["python3", "-c", script],
            "env": [{"name": "TPU_WORKER_ID", "value": "$(LWS_WORKER_INDEX)"},
                    {"name": "MEGASCALE_COORDINATOR_ADDRESS", "value": "$(LWS_LEADER_ADDRESS)"}],
        }]},
    });
    serde_json::from_value(json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "labels": {"app": "kinetic-pathways"}},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {
            "size": size, "restartPolicy": "RecreateGroupOnPodRestart",
            "leaderTemplate": template, "workerTemplate": template}},
    }))
    .unwrap()
}

async fn start() -> (FakeCluster, kube::Client) {
    let cluster = FakeCluster::start(
        FakeClusterConfig::default().image("fake.registry.invalid/runner:latest", "python3"),
    )
    .await
    .unwrap();
    let client = kube::Client::try_from(kube::Config::new(cluster.url().parse().unwrap())).unwrap();
    (cluster, client)
}

/// Poll `check` until it returns `Some`, for at most 30 s.
async fn wait_for<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn group_pods(client: &kube::Client, lws: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let mut items = pods
        .list(&ListParams::default().labels(&format!("leaderworkerset.sigs.k8s.io/name={lws}")))
        .await
        .unwrap()
        .items;
    items.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    items
}

fn running(pods: &[Pod], n: usize) -> bool {
    pods.len() == n
        && pods.iter().all(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
}

fn env_of(pod: &Pod) -> Vec<(String, String)> {
    pod.spec.as_ref().unwrap().containers[0]
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.name, e.value.unwrap_or_default()))
        .collect()
}

async fn raw_get(client: &kube::Client, path: &str) -> Result<Value, kube::Error> {
    let request = http::Request::get(path).body(Vec::new()).unwrap();
    client.request::<Value>(request).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_its_crd_the_group_is_not_served() {
    let (cluster, client) = start().await;
    let Err(kube::Error::Api(status)) = lws_api(&client)
        .create(&PostParams::default(), &lws("a", 2, "pass"))
        .await
    else {
        panic!("a LeaderWorkerSet without its CRD must be refused")
    };
    assert_eq!(status.code, 404, "{status:?}");
    assert!(status.message.contains("404 page not found"), "{status:?}");
    assert!(
        raw_get(&client, "/apis/leaderworkerset.x-k8s.io")
            .await
            .is_err()
    );
    let groups = raw_get(&client, "/apis").await.unwrap();
    assert!(!groups.to_string().contains("leaderworkerset.x-k8s.io"));

    cluster.install_leader_worker_set().unwrap();
    let group = raw_get(&client, "/apis/leaderworkerset.x-k8s.io")
        .await
        .unwrap();
    assert_eq!(
        group["preferredVersion"]["groupVersion"],
        "leaderworkerset.x-k8s.io/v1"
    );
    let groups = raw_get(&client, "/apis").await.unwrap();
    assert!(groups.to_string().contains("leaderworkerset.x-k8s.io/v1"));
    let resources = raw_get(&client, "/apis/leaderworkerset.x-k8s.io/v1")
        .await
        .unwrap();
    let names: Vec<&str> = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(names, ["leaderworkersets", "leaderworkersets/status"]);
    // An unserved version of an installed group is still not found.
    assert!(
        raw_get(&client, "/apis/leaderworkerset.x-k8s.io/v2")
            .await
            .is_err()
    );
    lws_api(&client)
        .create(&PostParams::default(), &lws("a", 2, "pass"))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_defaults_and_refuses_as_the_real_one() {
    let (cluster, client) = start().await;
    cluster.install_leader_worker_set().unwrap();
    let mut object = lws("d", 2, "pass");
    object.data["spec"]["leaderWorkerTemplate"]
        .as_object_mut()
        .unwrap()
        .remove("restartPolicy");
    let created = lws_api(&client)
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let spec = &created.data["spec"];
    assert_eq!(
        spec["leaderWorkerTemplate"]["restartPolicy"],
        "RecreateGroupOnPodRestart"
    );
    assert_eq!(spec["startupPolicy"], "LeaderCreated");
    assert_eq!(spec["networkConfig"]["subdomainPolicy"], "Shared");
    assert_eq!(spec["rolloutStrategy"]["type"], "RollingUpdate");

    // The CRD's schema (v0.5.1's enum) refuses another restart policy,
    // after the webhook made `Default` `None`.
    for (policy, kept) in [("Default", "None"), ("None", "None")] {
        let mut object = lws(&format!("p-{}", policy.to_lowercase()), 2, "pass");
        object.data["spec"]["leaderWorkerTemplate"]["restartPolicy"] = json!(policy);
        let created = lws_api(&client)
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
        assert_eq!(
            created.data["spec"]["leaderWorkerTemplate"]["restartPolicy"],
            kept
        );
    }
    for policy in ["RecreateGroupAfterStart", "Always"] {
        let mut object = lws("q", 2, "pass");
        object.data["spec"]["leaderWorkerTemplate"]["restartPolicy"] = json!(policy);
        let Err(kube::Error::Api(status)) = lws_api(&client)
            .create(&PostParams::default(), &object)
            .await
        else {
            panic!("{policy} must be refused by v0.5.1's CRD")
        };
        assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
        assert_eq!(
            status.message,
            format!(
                "LeaderWorkerSet.leaderworkerset.x-k8s.io \"q\" is invalid: spec.leaderWorkerTemplate.restartPolicy: Unsupported value: \"{policy}\": supported values: \"Default\", \"RecreateGroupOnPodRestart\", \"None\""
            )
        );
        let details = status.details.expect("the Status names its causes");
        assert_eq!(details.causes[0].reason, "FieldValueNotSupported");
        assert_eq!(
            details.causes[0].field,
            "spec.leaderWorkerTemplate.restartPolicy"
        );
    }
    // v0.9.0's CRD has RecreateGroupAfterStart.
    cluster.set_leader_worker_set_release("v0.9.0");
    let mut object = lws("r", 2, "pass");
    object.data["spec"]["leaderWorkerTemplate"]["restartPolicy"] = json!("RecreateGroupAfterStart");
    lws_api(&client)
        .create(&PostParams::default(), &object)
        .await
        .unwrap();

    let mut bad = lws("e", 0, "pass");
    bad.data["spec"]["leaderWorkerTemplate"]["size"] = json!(0);
    let Err(kube::Error::Api(status)) = lws_api(&client).create(&PostParams::default(), &bad).await
    else {
        panic!("size 0 must be refused")
    };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert!(
        status.message.contains("spec.leaderWorkerTemplate.size"),
        "{}",
        status.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_of_four_hosts_runs_with_the_controllers_names_labels_and_variables() {
    let (cluster, client) = start().await;
    cluster.install_leader_worker_set().unwrap();
    let script = "import os, sys, time\n\
        print('host', os.environ['TPU_WORKER_ID'], os.environ['LWS_GROUP_SIZE'], os.environ['MEGASCALE_COORDINATOR_ADDRESS'], flush=True)\n\
        time.sleep(60)";
    lws_api(&client)
        .create(&PostParams::default(), &lws("job", 4, script))
        .await
        .unwrap();
    let pods = wait_for("4 running pods", async || {
        let pods = group_pods(&client, "job").await;
        running(&pods, 4).then_some(pods)
    })
    .await;
    let names: Vec<&str> = pods
        .iter()
        .map(|p| p.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(names, ["job-0", "job-0-1", "job-0-2", "job-0-3"]);
    let leader_key =
        pods[0].metadata.labels.as_ref().unwrap()["leaderworkerset.sigs.k8s.io/group-key"].clone();
    for (i, pod) in pods.iter().enumerate() {
        let labels = pod.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["leaderworkerset.sigs.k8s.io/name"], "job");
        assert_eq!(labels["leaderworkerset.sigs.k8s.io/group-index"], "0");
        assert_eq!(
            labels["leaderworkerset.sigs.k8s.io/worker-index"],
            i.to_string()
        );
        assert_eq!(labels["leaderworkerset.sigs.k8s.io/group-key"], leader_key);
        assert_eq!(labels["app"], "kinetic-pathways");
        let annotations = pod.metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations["leaderworkerset.sigs.k8s.io/size"], "4");
        let env = env_of(pod);
        assert_eq!(
            &env[..3],
            [
                (
                    "LWS_LEADER_ADDRESS".to_owned(),
                    "job-0.job.default".to_owned()
                ),
                ("LWS_GROUP_SIZE".to_owned(), "4".to_owned()),
                ("LWS_WORKER_INDEX".to_owned(), i.to_string()),
            ]
        );
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.subdomain.as_deref(), Some("job"));
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(owner.kind, "StatefulSet");
        assert_eq!(owner.name, if i == 0 { "job" } else { "job-0" });
    }
    // Each process saw its own index, with the references expanded.
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    for (i, name) in names.iter().enumerate() {
        let log = wait_for("the host's line", async || {
            let log = api.logs(name, &LogParams::default()).await.ok()?;
            log.contains("host").then_some(log)
        })
        .await;
        assert_eq!(log.trim(), format!("host {i} 4 job-0.job.default"));
    }
    let status = wait_for("Available", async || {
        let l = lws_api(&client).get("job").await.ok()?;
        let status = l.data["status"].clone();
        (status["readyReplicas"] == 1).then_some(status)
    })
    .await;
    assert_eq!(status["replicas"], 1);
    let available = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Available")
        .unwrap();
    assert_eq!(
        (available["status"].as_str(), available["reason"].as_str()),
        (Some("True"), Some("AllGroupsReady"))
    );
}

/// The controller's headless Service gives the group's pods DNS names,
/// which their Python resolves to the pods' addresses (`status.podIP`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_groups_names_resolve_to_its_pods_addresses() {
    let (cluster, client) = start().await;
    cluster.install_leader_worker_set().unwrap();
    let script = "import socket, time\n\
        names = ['job-0.job.default', 'job-0-1.job.default.svc.cluster.local']\n\
        for _ in range(200):\n\
        \x20   try:\n\
        \x20       print('ips', *[socket.gethostbyname(n) for n in names], flush=True)\n\
        \x20       break\n\
        \x20   except OSError:\n\
        \x20       time.sleep(0.1)\n\
        time.sleep(60)";
    lws_api(&client)
        .create(&PostParams::default(), &lws("job", 2, script))
        .await
        .unwrap();
    let service = wait_for("the set's headless Service", async || {
        cluster
            .objects("services", NS)
            .into_iter()
            .find(|s| s["metadata"]["name"] == "job")
    })
    .await;
    assert_eq!(
        service["spec"],
        json!({"clusterIP": "None", "selector": {"leaderworkerset.sigs.k8s.io/name": "job"},
               "publishNotReadyAddresses": true})
    );
    let pods = wait_for("2 running pods", async || {
        let pods = group_pods(&client, "job").await;
        running(&pods, 2).then_some(pods)
    })
    .await;
    let ips: Vec<String> = pods
        .iter()
        .map(|p| p.status.as_ref().unwrap().pod_ip.clone().unwrap())
        .collect();
    assert_ne!(ips[0], ips[1]);
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    for pod in ["job-0", "job-0-1"] {
        let log = wait_for("the host's line", async || {
            let log = api.logs(pod, &LogParams::default()).await.ok()?;
            log.contains("ips").then_some(log)
        })
        .await;
        assert_eq!(log.trim(), format!("ips {} {}", ips[0], ips[1]), "{pod}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_failing_pod_recreates_the_group_and_deleting_the_set_removes_its_pods() {
    // v0.5.1 (what `kinetic up` installs) names the event after the policy.
    recreate_group_under("RecreateGroupOnPodRestart", None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_v0_9_a_recreated_group_is_told_as_recreate_group() {
    recreate_group_under("RecreateGroup", Some("v0.9.0")).await;
}

/// Worker 2 of a group of 4 fails once: the group is made again (every
/// pod new, the same names), told by an event `reason` on the
/// LeaderWorkerSet, with the controller at `release` (v0.5.1 by default);
/// deleting the set removes its pods.
async fn recreate_group_under(reason: &str, release: Option<&str>) {
    let (cluster, client) = start().await;
    cluster.install_leader_worker_set().unwrap();
    if let Some(release) = release {
        cluster.set_leader_worker_set_release(release);
    }
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("failed-once");
    // Worker 2 fails on its first run only; everything else runs on.
    let script = format!(
        "import os, sys, time\n\
         m = {marker:?}\n\
         if os.environ['LWS_WORKER_INDEX'] == '2' and not os.path.exists(m):\n    open(m, 'w').close(); time.sleep(0.5); sys.exit(3)\n\
         time.sleep(60)",
        marker = marker.display().to_string()
    );
    lws_api(&client)
        .create(&PostParams::default(), &lws("grp", 4, &script))
        .await
        .unwrap();
    let first = wait_for("the first group", async || {
        let pods = group_pods(&client, "grp").await;
        (pods.len() == 4).then_some(pods)
    })
    .await;
    let first_uids: Vec<String> = first
        .iter()
        .map(|p| p.metadata.uid.clone().unwrap())
        .collect();
    let second = wait_for("the group made again", async || {
        let pods = group_pods(&client, "grp").await;
        let fresh = pods
            .iter()
            .all(|p| !first_uids.contains(p.metadata.uid.as_ref().unwrap()));
        (running(&pods, 4) && fresh).then_some(pods)
    })
    .await;
    assert!(marker.exists());
    let names: Vec<&str> = second
        .iter()
        .map(|p| p.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(names, ["grp-0", "grp-0-1", "grp-0-2", "grp-0-3"]);
    let events = cluster.objects("events", NS);
    let recreate = events
        .iter()
        .find(|e| e["reason"] == reason)
        .unwrap_or_else(|| panic!("a {reason} event in {events:?}"));
    let other = if reason == "RecreateGroup" {
        "RecreateGroupOnPodRestart"
    } else {
        "RecreateGroup"
    };
    assert!(!events.iter().any(|e| e["reason"] == other), "{events:?}");
    assert_eq!(recreate["involvedObject"]["kind"], "LeaderWorkerSet");
    assert!(
        recreate["message"]
            .as_str()
            .unwrap()
            .starts_with("Worker pod grp-0-2 failed, deleted leader pod grp-0 to recreate group 0"),
        "{recreate}"
    );

    lws_api(&client)
        .delete("grp", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("every pod gone", async || {
        group_pods(&client, "grp").await.is_empty().then_some(())
    })
    .await;
    assert!(cluster.objects("statefulsets.apps", NS).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_crd_deletes_the_sets_and_their_pods() {
    let (cluster, client) = start().await;
    cluster.install_leader_worker_set().unwrap();
    lws_api(&client)
        .create(
            &PostParams::default(),
            &lws("c", 2, "import time; time.sleep(60)"),
        )
        .await
        .unwrap();
    wait_for("2 pods", async || {
        (group_pods(&client, "c").await.len() == 2).then_some(())
    })
    .await;
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    crds.delete(
        "leaderworkersets.leaderworkerset.x-k8s.io",
        &DeleteParams::default(),
    )
    .await
    .unwrap();
    wait_for("every pod gone", async || {
        group_pods(&client, "c").await.is_empty().then_some(())
    })
    .await;
    assert!(
        cluster
            .objects("leaderworkersets.leaderworkerset.x-k8s.io", NS)
            .is_empty()
    );
    assert!(
        raw_get(&client, "/apis/leaderworkerset.x-k8s.io/v1")
            .await
            .is_err()
    );
}

/// The API server refuses a StatefulSet whose pods would not restart, or
/// that carries a pod deadline; the LeaderWorkerSet controller, refused
/// so, tells it as a `FailedCreate` Warning on the set and makes no pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_a_statefulset_refuses_leaves_a_warning_and_no_pods() {
    use k8s_openapi::api::apps::v1::StatefulSet;
    use k8s_openapi::api::core::v1::Event;
    let (cluster, client) = start().await;
    cluster.install_leader_worker_set().unwrap();

    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    let set: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "direct"},
        "spec": {"serviceName": "direct", "selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}},
                              "spec": {"restartPolicy": "Never", "activeDeadlineSeconds": 30,
                                       "containers": [{"name": "c", "image": "i"}]}}},
    }))
    .unwrap();
    let Err(kube::Error::Api(status)) = sets.create(&PostParams::default(), &set).await else {
        panic!("a StatefulSet with restartPolicy Never must be refused")
    };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert!(
        status.message.starts_with("StatefulSet.apps \"direct\" is invalid: ")
            && status.message.contains(
                "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""
            )
            && status.message.contains(
                "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in StatefulSet is not Supported"
            ),
        "{}",
        status.message
    );
    let raw = serde_json::to_value(&set).unwrap();
    let mut fine = raw.clone();
    fine["spec"]["template"]["spec"] = json!({"containers": [{"name": "c", "image": "i"}]});
    let fine: StatefulSet = serde_json::from_value(fine).unwrap();
    let made = sets.create(&PostParams::default(), &fine).await.unwrap();
    assert_eq!(
        made.spec
            .unwrap()
            .template
            .spec
            .unwrap()
            .restart_policy
            .as_deref(),
        Some("Always")
    );

    let mut refused = lws("never", 2, "import time; time.sleep(60)");
    for t in ["leaderTemplate", "workerTemplate"] {
        refused.data["spec"]["leaderWorkerTemplate"][t]["spec"]["restartPolicy"] = json!("Never");
    }
    lws_api(&client)
        .create(&PostParams::default(), &refused)
        .await
        .unwrap();
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let warning = wait_for("a FailedCreate warning", async || {
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("FailedCreate")
                    && e.involved_object.kind.as_deref() == Some("LeaderWorkerSet")
                    && e.involved_object.name.as_deref() == Some("never")
            })
    })
    .await;
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert_eq!(
        warning.message.as_deref(),
        Some("Failed to create leader statefulset never")
    );
    // Tried again on later passes (the event counted up), never made.
    wait_for("the warning counted again", async || {
        let again = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|e| e.metadata.name == warning.metadata.name)?;
        (again.count.unwrap_or(1) > 1).then_some(())
    })
    .await;
    assert!(sets.get_opt("never").await.unwrap().is_none());
    assert!(group_pods(&client, "never").await.is_empty());
    drop(cluster);
}

/// Kubernetes 1.32's StatefulSet controller deletes a pod that ended
/// (evicted, here) and makes it again under its name, telling only
/// `SuccessfulDelete` and `SuccessfulCreate`: no event says it failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statefulset_replaces_a_failed_pod_silently() {
    let (cluster, client) = start().await;
    cluster.script_job(
        "evicted",
        kinetic_fake_gcp::k8s::PodScript::Evicted {
            after: Duration::from_millis(200),
            message: "The node was low on resource: memory.".to_owned(),
        },
    );
    let sets: Api<k8s_openapi::api::apps::v1::StatefulSet> = Api::namespaced(client.clone(), NS);
    let set = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "serviceName": "web", "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": {"job-id": "evicted"}},
                 "template": {"metadata": {"labels": {"job-id": "evicted"}},
                              "spec": {"containers": [{"name": "c", "image": "fake.registry.invalid/x:1",
                                                       "command": ["sleep", "60"]}]}}},
    }))
    .unwrap();
    sets.create(&PostParams::default(), &set).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let first = wait_for("the first pod", async || {
        pods.get_opt("web-0")
            .await
            .unwrap()
            .and_then(|p| p.metadata.uid)
    })
    .await;
    wait_for("the pod made again under its name", async || {
        let uid = pods.get_opt("web-0").await.unwrap()?.metadata.uid?;
        (uid != first).then_some(())
    })
    .await;
    let events = cluster.objects("events", NS);
    let about_set: Vec<&Value> = events
        .iter()
        .filter(|e| e["involvedObject"]["kind"] == "StatefulSet")
        .collect();
    let reasons: Vec<&str> = about_set
        .iter()
        .filter_map(|e| e["reason"].as_str())
        .collect();
    assert!(reasons.contains(&"SuccessfulDelete"), "{reasons:?}");
    assert!(
        reasons
            .iter()
            .all(|r| matches!(*r, "SuccessfulCreate" | "SuccessfulDelete")),
        "nothing but create and delete: {reasons:?}"
    );
    assert!(
        about_set.iter().all(|e| e["type"] == "Normal"),
        "{about_set:?}"
    );
    let delete = about_set
        .iter()
        .find(|e| e["reason"] == "SuccessfulDelete")
        .unwrap();
    assert_eq!(
        delete["message"],
        "delete Pod web-0 in StatefulSet web successful"
    );
}

/// The kubelet's hard eviction under node pressure: the running pod's
/// containers are killed at once and it ends `Failed`, reason `Evicted`,
/// marked `DisruptionTarget` (`TerminationByKubelet`), and is not
/// restarted whatever its `restartPolicy`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubelet_eviction_ends_a_running_pod_at_once() {
    let (cluster, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "busy"},
        "spec": {"restartPolicy": "Always", "containers": [{"name": "c",
                 "image": "fake.registry.invalid/runner:latest", "command": ["sleep", "60"]}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    wait_for("the pod running", async || {
        let p = pods.get("busy").await.unwrap();
        (p.status?.phase.as_deref() == Some("Running")).then_some(())
    })
    .await;
    assert!(!cluster.evict_by_kubelet(NS, "nothing-here", "x"));
    assert!(cluster.evict_by_kubelet(NS, "busy", "The node was low on resource: memory."));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let p = cluster.object("pods", NS, "busy").unwrap();
    assert_eq!(p["status"]["phase"], "Failed", "{p}");
    assert_eq!(p["status"]["reason"], "Evicted", "{p}");
    assert_eq!(
        p["status"]["message"],
        "The node was low on resource: memory."
    );
    let disruption = p["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "DisruptionTarget")
        .cloned()
        .unwrap_or_else(|| panic!("no DisruptionTarget in {p}"));
    assert_eq!(disruption["reason"], "TerminationByKubelet");
    let container = &p["status"]["containerStatuses"][0];
    assert_eq!(container["restartCount"], 0, "not restarted: {p}");
    assert_eq!(container["state"]["terminated"]["exitCode"], 137, "{p}");
}
