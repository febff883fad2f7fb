//! Jobs and node pools match by construction: for every accelerator of the
//! registry, with and without Spot, the pod the GKE backend's manifest
//! code builds for a job schedules onto a node of the pool `kinetic pool
//! add` builds for it — the pool's request body turned into a node as GKE
//! makes one (labels, taints, allocatable accelerators), judged by the
//! fake scheduler's filters — and onto no pool built for another shape.

use std::time::Duration;

use kinetic_backend_gke::manifest::{ManifestOptions, job_manifest};
use kinetic_core::accelerators::{AcceleratorSpec, GPU_TYPES, TPU_TYPES};
use kinetic_core::ports::Deadlines;
use kinetic_fake_gcp::apis::node_template;
use kinetic_fake_gcp::k8s::schedule;
use kinetic_infra_gcp::model::{Desired, InfraTarget, PoolRequest, PoolSpec};
use kinetic_infra_gcp::request;
use kinetic_testkit::fixtures::fixed_job;
use serde_json::{Value, json};

fn every_accelerator() -> Vec<AcceleratorSpec> {
    let mut all = Vec::new();
    for g in GPU_TYPES {
        for shape in g.counts {
            all.push(AcceleratorSpec::gpu(g.name, shape.count).unwrap());
        }
    }
    for t in TPU_TYPES {
        for slice in t.slices {
            all.push(AcceleratorSpec::tpu(t.name, slice.chips).unwrap());
        }
    }
    all.into_iter()
        .flat_map(|a| [a.clone(), a.with_spot(true)])
        .collect()
}

/// The pod of a job on `accel`, as the GKE backend builds it.
fn pod(accel: &AcceleratorSpec) -> Value {
    // Planned as the engine plans a job on this accelerator.
    let job = fixed_job("gke", &accel.to_string(), &[], Deadlines::default());
    assert_eq!(&job.accelerator, accel, "{accel} reads back as itself");
    let manifest = serde_json::to_value(job_manifest(&job, &ManifestOptions::default())).unwrap();
    json!({"spec": manifest["spec"]["template"]["spec"]})
}

/// A node of the pool `kinetic pool add` makes for `accel`, as GKE makes it.
fn pool_node(accel: &AcceleratorSpec) -> Value {
    let desired =
        Desired::new(&InfraTarget::new("my-proj", "us-central1-a", "c", "default").unwrap());
    let pool = PoolSpec::new(&desired.target, &PoolRequest::new(accel.clone()), "0a1b").unwrap();
    let body = request::node_pool(&pool, &desired.cluster.labels);
    let (node, step) = node_template(&body["nodePool"], "us-central1-a")
        .unwrap_or_else(|e| panic!("{accel}: GKE would refuse the pool: {e}"));
    assert_eq!(
        step,
        accel.num_hosts(),
        "{accel}: one slice is {} VMs",
        accel.num_hosts()
    );
    // What the core says the nodes carry is what GKE gives them.
    for (k, v) in pool.node_labels() {
        if k != "cloud.google.com/gke-nodepool" {
            assert_eq!(node.labels.get(&k), Some(&v), "{accel}: label {k}");
        }
    }
    node.named(&format!("node-{}", accel.to_string().replace(':', "-")))
        .to_json()
}

#[test]
fn every_job_schedules_on_its_own_pool_and_no_other() {
    let accelerators = every_accelerator();
    assert!(accelerators.len() > 80, "{}", accelerators.len());
    let nodes: Vec<Value> = accelerators.iter().map(pool_node).collect();
    let started = std::time::Instant::now();
    for (i, accel) in accelerators.iter().enumerate() {
        let pod = pod(accel);
        let own = schedule(std::slice::from_ref(&nodes[i]), &pod);
        assert!(
            own.is_ok(),
            "{accel}: the job's pod does not fit its pool's node: {own:?}"
        );
        for (j, other) in accelerators.iter().enumerate() {
            if i == j || other == accel {
                continue;
            }
            // Only a node of the same accelerator and topology, Spot or
            // on-demand alike, may take it (a bigger GPU node of the same
            // model can); Spot and on-demand never mix.
            if let Ok(node) = schedule(std::slice::from_ref(&nodes[j]), &pod) {
                assert!(
                    other.spot() == accel.spot()
                        && other.gke_accelerator() == accel.gke_accelerator()
                        && other.topology() == accel.topology(),
                    "{accel}'s pod went to {other}'s node {node}"
                );
            }
        }
    }
    assert!(started.elapsed() < Duration::from_secs(60));
    // A CPU job stays off every accelerator pool: they are tainted.
    let cpu = pod(&AcceleratorSpec::CPU);
    let message = schedule(&nodes, &cpu).unwrap_err();
    assert!(message.contains("untolerated taint"), "{message}");
}
