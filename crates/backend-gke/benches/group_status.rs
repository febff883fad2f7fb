//! Batch status cost: API calls and time of one status poll of a
//! 1,000-job batch over the fake cluster, against polling each job.
//!
//! `cargo bench -p kinetic-backend-gke --bench group_status`

use std::time::Instant;

use kinetic_backend_gke::{GkeBackend, GkeOptions};
use kinetic_core::ids::{GroupId, JobId};
use kinetic_core::ports::Backend;
use kinetic_core::record::{JobRecord, UtcTimestamp};
use kinetic_fake_gcp::k8s::{FakeCluster, FakeClusterConfig};
use serde_json::json;

const JOBS: usize = 1_000;

fn record(job_id: &JobId, group: &GroupId, index: u64) -> JobRecord {
    JobRecord {
        accelerator: "cpu".into(),
        backend: "gke".into(),
        bucket_name: "bench".into(),
        cluster_name: "bench".into(),
        created_at: UtcTimestamp::now(),
        debug: false,
        display_name: format!("kinetic-f-{job_id}"),
        entrypoint: None,
        func_name: "f".into(),
        group_id: Some(group.clone()),
        group_index: Some(index),
        group_kind: None,
        image_uri: "img".into(),
        job_id: job_id.clone(),
        k8s_name: format!("kinetic-{job_id}"),
        namespace: "default".into(),
        project: "bench".into(),
        store_url: None,
        zone: "z".into(),
    }
}

/// Put `JOBS` Jobs of one group in the cluster; every `pending_every`-th
/// is pending (with a pod), the others half running, half succeeded.
fn populate(cluster: &FakeCluster, group: &GroupId, pending_every: usize) -> Vec<JobRecord> {
    let mut records = Vec::new();
    for i in 0..JOBS {
        let id = JobId::new_random();
        let r = record(&id, group, i as u64);
        let status = if pending_every > 0 && i % pending_every == 0 {
            json!({"active": 1, "ready": 0})
        } else if i % 2 == 0 {
            json!({"active": 1, "ready": 1})
        } else {
            json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]})
        };
        let labels = json!({"app": "kinetic", "job-id": id.as_str(), "group-id": group.as_str(), "group-index": i.to_string()});
        cluster
            .insert(
                "jobs.batch",
                "default",
                json!({"apiVersion": "batch/v1", "kind": "Job",
                       "metadata": {"name": r.k8s_name, "labels": labels,
                                    "annotations": {"kinetic.dev/pending-deadline-seconds": "900"}},
                       "spec": {"backoffLimit": 0, "template": {"spec": {"containers": []}}},
                       "status": status}),
            )
            .expect("insert job");
        if pending_every > 0 && i % pending_every == 0 {
            let mut pod_labels = labels.clone();
            pod_labels["job-name"] = json!(r.k8s_name);
            cluster
                .insert(
                    "pods",
                    "default",
                    json!({"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": format!("{}-abcde", r.k8s_name), "labels": pod_labels},
                           "spec": {"containers": [{"name": "kinetic-worker", "image": "img"}]},
                           "status": {"phase": "Pending", "containerStatuses": [{"name": "kinetic-worker", "image": "img",
                               "imageID": "", "ready": false, "restartCount": 0,
                               "state": {"waiting": {"reason": "ContainerCreating"}}}]}}),
                )
                .expect("insert pod");
        }
        records.push(r);
    }
    records
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        for (label, pending_every) in [("running/succeeded", 0usize), ("10% pending", 10)] {
            let cluster = FakeCluster::start(FakeClusterConfig::default().controller(false))
                .await
                .expect("fake cluster");
            let client = kube::Client::try_from(kube::Config::new(
                cluster.url().parse().expect("url"),
            ))
            .expect("client");
            let backend = GkeBackend::new(client, GkeOptions::new("default"));
            let group: GroupId = GroupId::new_random();
            let records = populate(&cluster, &group, pending_every);

            // Warm the connection, then measure.
            backend.group_status("default", &group).await.expect("group status");
            let polls = 5;
            cluster.calls().reset();
            let start = Instant::now();
            for _ in 0..polls {
                let states = backend.group_status("default", &group).await.expect("group status");
                assert_eq!(states.len(), JOBS);
            }
            let per_poll = start.elapsed() / polls;
            let calls = cluster.calls().total() as f64 / f64::from(polls);
            println!(
                "group_status {JOBS} jobs ({label}): {calls} API call(s) per poll ({:?}), {per_poll:.2?} per poll",
                cluster.calls().snapshot()
            );

            cluster.calls().reset();
            let start = Instant::now();
            for r in &records {
                backend.status(r).await.expect("status");
            }
            println!(
                "status per job  {JOBS} jobs ({label}): {} API calls per poll, {:.2?} per poll",
                cluster.calls().total(),
                start.elapsed()
            );
        }
    });
}
