//! The real runner on every host of a LeaderWorkerSet group of the fake
//! cluster: 4 processes, each with its own rank and the same host list
//! (the hosts' names resolved to their pods' addresses);
//! the leader writes `result.json`, a failing worker its
//! `result-worker-{N}.json`, which the client reads in host order; the
//! failure recreates the whole group.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kinetic_core::env::{EnvSnapshot, capture};
use kinetic_core::ports::{GetOptions, ObjectPath, ObjectStore, PreparedJob};
use kinetic_core::protocol::{RunnerResult, worker_results_in_order};
use kinetic_fake_gcp::k8s::FakeCluster;
use kinetic_fake_gcp_server::RUNNER_IMAGE_PATH;
use kinetic_store_gcs::GcsStore;
use kinetic_testkit::{ConformanceJob, prepare_python_job_on};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

struct World {
    dir: tempfile::TempDir,
    cluster: FakeCluster,
    client: kube::Client,
    store: Arc<dyn ObjectStore>,
}

impl World {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("hosts")).unwrap();
        let store: Arc<dyn ObjectStore> =
            Arc::new(GcsStore::local_dir(&dir.path().join("store")).unwrap());
        let cluster = FakeCluster::start(
            kinetic_fake_gcp_server::fake_cluster_config()
                // The image the slice runs: no build makes it, so it is
                // named with the host's interpreter.
                .image("registry.invalid/kinetic:1", "python3")
                .kill_grace(Duration::from_millis(300)),
        )
        .await
        .unwrap();
        cluster.install_leader_worker_set().unwrap();
        let client =
            kube::Client::try_from(kube::Config::new(cluster.url().parse().unwrap())).unwrap();
        Self {
            dir,
            cluster,
            client,
            store,
        }
    }

    /// A 4-host job (`v5litepod-16`) whose hosts fail as `fail_on` says,
    /// submitted as a LeaderWorkerSet of one group of 4 running the runner.
    async fn submit(&self, fail_on: Vec<u32>) -> PreparedJob {
        let job = ConformanceJob::Topology {
            dir: self.dir.path().join("hosts").display().to_string(),
            fail_on,
        };
        let env = capture(&[], &EnvSnapshot::new()).unwrap();
        let prepared =
            prepare_python_job_on(&self.store, "pathways", &job, env, Some("v5litepod-16")).await;
        let template = json!({
            "metadata": {"labels": {"app": "kinetic-pathways", "job-id": prepared.record.job_id.as_str()}},
            "spec": {"containers": [{
                "name": "kinetic-worker", "image": "registry.invalid/kinetic:1",
                "command": ["python3", "-u", RUNNER_IMAGE_PATH, "--spec", prepared.spec_uri],
                "env": [{"name": "MEGASCALE_COORDINATOR_ADDRESS", "value": "$(LWS_LEADER_ADDRESS)"},
                        {"name": "MEGASCALE_NUM_SLICES", "value": "4"},
                        {"name": "TPU_WORKER_ID", "value": "$(LWS_WORKER_INDEX)"}],
            }]},
        });
        let lws: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": format!("keras-pathways-{}", prepared.record.job_id.as_str())},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {
                "size": 4, "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": template, "workerTemplate": template}},
        }))
        .unwrap();
        let gvk = GroupVersionKind::gvk("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet");
        Api::<DynamicObject>::namespaced_with(
            self.client.clone(),
            "default",
            &ApiResource::from_gvk_with_plural(&gvk, "leaderworkersets"),
        )
        .create(&PostParams::default(), &lws)
        .await
        .unwrap();
        prepared
    }

    async fn read(&self, job: &PreparedJob, name: &str) -> Option<RunnerResult> {
        let path = ObjectPath::parse(format!("{}/{name}", job.record.job_id.as_str())).unwrap();
        let bytes = self.store.get(&path, GetOptions::default()).await.ok()?;
        Some(RunnerResult::from_json(&bytes).unwrap())
    }

    /// What each host wrote of its topology, once all 4 have.
    async fn hosts(&self) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let read: Vec<Value> = (0..4)
                .filter_map(|i| {
                    let path = self.dir.path().join(format!("hosts/host-{i}.json"));
                    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
                })
                .collect();
            if read.len() == 4 {
                return read;
            }
            assert!(Instant::now() < deadline, "hosts wrote {read:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn wait_for<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_hosts_see_their_rank_and_the_same_hosts_and_the_leader_answers() {
    let world = World::new().await;
    let job = world.submit(vec![]).await;
    // The pods' addresses as they run (a host that ended restarts, which
    // recreates the group: the pods may be gone once the result is there).
    let mut pod_ips = std::collections::BTreeMap::new();
    let result = wait_for("the leader's result", async || {
        for p in world.cluster.objects("pods", "default") {
            if let (Some(name), Some(ip)) = (
                p["metadata"]["name"].as_str(),
                p["status"]["podIP"].as_str(),
            ) {
                pod_ips
                    .entry(name.to_owned())
                    .or_insert_with(|| ip.to_owned());
            }
        }
        world.read(&job, "result.json").await
    })
    .await;
    assert!(result.success, "{result:?}");
    assert_eq!(result.host_index, 0);
    let hosts = world.hosts().await;
    // Each host's name (`LWS_LEADER_ADDRESS` and the workers' beside it)
    // resolved through the cluster's DNS: its pod's IP address.
    let name = format!("keras-pathways-{}", job.record.job_id.as_str());
    let addresses: Vec<String> = std::iter::once(format!("{name}-0"))
        .chain((1..4).map(|i| format!("{name}-0-{i}")))
        .map(|pod| {
            pod_ips
                .get(&pod)
                .unwrap_or_else(|| panic!("pod {pod} never had an address: {pod_ips:?}"))
                .clone()
        })
        .collect();
    for (rank, info) in hosts.iter().enumerate() {
        assert_eq!(info["node_rank"], rank, "{info}");
        assert_eq!(info["num_nodes"], 4);
        assert_eq!(info["node_ips"], json!(addresses));
        assert_eq!(info["num_accelerators_per_node"], 4);
        assert_eq!(info["task_id"], job.record.job_id.as_str());
    }
    assert_eq!(result.value, hosts[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_workers_write_their_own_results_and_the_group_is_recreated() {
    let world = World::new().await;
    let job = world.submit(vec![2, 3]).await;
    let (three, two) = wait_for("both workers' results", async || {
        Some((
            world.read(&job, "result-worker-3.json").await?,
            world.read(&job, "result-worker-2.json").await?,
        ))
    })
    .await;
    for (host, result) in [(2, &two), (3, &three)] {
        assert!(!result.success);
        assert_eq!(result.host_index, host);
        let error = result.error.as_ref().unwrap();
        assert_eq!(
            (error.type_name.as_str(), error.message.clone()),
            ("ValueError", format!("host {host} failed"))
        );
    }
    // The client reads them in host order.
    let prefix = ObjectPath::parse(job.record.job_id.as_str()).unwrap();
    let listed = world.store.list(Some(&prefix)).await.unwrap();
    let order: Vec<u32> = worker_results_in_order(listed.iter().map(|m| m.path.file_name()))
        .into_iter()
        .map(|(h, _)| h)
        .collect();
    assert_eq!(order, [2, 3]);
    // A failed host takes its group with it: the leader is deleted and made again.
    wait_for("the group recreated", async || {
        world
            .cluster
            .objects("events", "default")
            .into_iter()
            .find(|e| e["reason"] == "RecreateGroupOnPodRestart")
    })
    .await;
}
