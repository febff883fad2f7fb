//! What GKE makes of a node pool's configuration: the nodes' labels,
//! taints and allocatable accelerators. GKE's own rules, written here from
//! its documentation — not from the code that builds the pools — so that
//! a pool and a job's pod that match in this fake match on GKE.
//!
//! - GPU pools (`config.accelerators[]`): label
//!   `cloud.google.com/gke-accelerator` = the accelerator type, taint
//!   `nvidia.com/gpu=present:NoSchedule`, `nvidia.com/gpu` allocatable.
//! - TPU pools (`ct*` machine types): labels
//!   `cloud.google.com/gke-tpu-accelerator` (from the machine family:
//!   `ct5lp` → `tpu-v5-lite-podslice`, `ct3` → `tpu-v3-device`, `ct3p` →
//!   `tpu-v3-slice`, …) and `cloud.google.com/gke-tpu-topology` (the
//!   placement policy's, or the machine's own on one host), taint
//!   `google.com/tpu=present:NoSchedule`, `google.com/tpu` allocatable =
//!   the machine's chips.
//! - Spot pools: label `cloud.google.com/gke-spot=true` (no taint: a pool
//!   that wants one sets it in `config.taints`).
//! - Every node: the pool's `config.labels` and `config.taints`, the
//!   instance type, the zone.

use serde_json::Value;

use crate::k8s::FakeNode;

/// TPU machine families: (prefix, accelerator label, 3-D topology).
const TPU_FAMILIES: &[(&str, &str, bool)] = &[
    ("ct3p-", "tpu-v3-slice", false),
    ("ct3-", "tpu-v3-device", false),
    ("ct4p-", "tpu-v4-podslice", true),
    ("ct5lp-", "tpu-v5-lite-podslice", false),
    ("ct5p-", "tpu-v5p-slice", true),
    ("ct6e-", "tpu-v6e-slice", false),
];

/// Chips of a TPU machine type (`ct5lp-hightpu-4t` → 4).
fn tpu_chips(machine_type: &str) -> Option<u64> {
    machine_type
        .rsplit('-')
        .next()?
        .strip_suffix('t')?
        .parse()
        .ok()
}

/// The topology of a single-host slice of `chips` chips.
fn single_host_topology(chips: u64, three_d: bool) -> String {
    match (chips, three_d) {
        (1, false) => "1x1".into(),
        (4, false) => "2x2".into(),
        (8, false) => "2x4".into(),
        (4, true) => "2x2x1".into(),
        (8, true) => "2x2x2".into(),
        (n, _) => format!("{n}x1"),
    }
}

/// Chips in a topology (`2x4` → 8).
fn topology_chips(topology: &str) -> Option<u64> {
    topology
        .split('x')
        .map(|d| d.parse::<u64>().ok())
        .try_fold(1u64, |acc, d| d.map(|d| acc * d))
}

fn effect(gke: &str) -> &str {
    match gke {
        "NO_SCHEDULE" => "NoSchedule",
        "PREFER_NO_SCHEDULE" => "PreferNoSchedule",
        "NO_EXECUTE" => "NoExecute",
        other => other,
    }
}

/// The node GKE makes for a pool (`nodePool` JSON as `nodePools.create`
/// receives it) in `zone`, and how many nodes one unit of the pool is (a
/// multi-host TPU slice's VMs; 1 otherwise). Errors name what GKE would
/// refuse.
pub fn node_template(pool: &Value, zone: &str) -> Result<(FakeNode, u32), String> {
    let config = &pool["config"];
    let machine_type = config["machineType"].as_str().unwrap_or("e2-medium");
    let mut node = FakeNode::cpu("template")
        .label("node.kubernetes.io/instance-type", machine_type)
        .label("topology.kubernetes.io/zone", zone)
        .label(
            "cloud.google.com/machine-family",
            machine_type.split('-').next().unwrap_or_default(),
        );
    for (k, v) in config["labels"].as_object().into_iter().flatten() {
        if k.starts_with("cloud.google.com/gke-") {
            return Err(format!(
                "Label key \"{k}\" is invalid: the prefix cloud.google.com/gke- is reserved"
            ));
        }
        node = node.label(k, v.as_str().unwrap_or_default());
    }
    for t in config["taints"].as_array().into_iter().flatten() {
        node = node.taint(
            t["key"].as_str().unwrap_or_default(),
            t["value"].as_str().unwrap_or_default(),
            effect(t["effect"].as_str().unwrap_or_default()),
        );
    }
    let spot = config["spot"].as_bool().unwrap_or(false)
        || config["preemptible"].as_bool().unwrap_or(false);
    node = node.label(
        "cloud.google.com/gke-provisioning",
        if spot { "spot" } else { "standard" },
    );
    if spot {
        node = node.label("cloud.google.com/gke-spot", "true");
    }
    let mut step = 1;
    if let Some(accelerators) = config["accelerators"].as_array().filter(|a| !a.is_empty()) {
        let a = &accelerators[0];
        let kind = a["acceleratorType"].as_str().unwrap_or_default();
        let count: u64 = a["acceleratorCount"]
            .as_str()
            .and_then(|c| c.parse().ok())
            .or_else(|| a["acceleratorCount"].as_u64())
            .unwrap_or(0);
        if !kind.starts_with("nvidia-") || count == 0 {
            return Err(format!(
                "Accelerator type \"{kind}\" ×{count} is not available"
            ));
        }
        node = node
            .label("cloud.google.com/gke-accelerator", kind)
            .label("cloud.google.com/gke-accelerator-count", &count.to_string())
            .capacity("nvidia.com/gpu", count)
            .taint("nvidia.com/gpu", "present", "NoSchedule");
    } else if let Some((_, label, three_d)) = TPU_FAMILIES
        .iter()
        .find(|(p, _, _)| machine_type.starts_with(p))
    {
        let chips = tpu_chips(machine_type)
            .ok_or_else(|| format!("Machine type \"{machine_type}\" is not a TPU machine type"))?;
        let topology = match pool
            .pointer("/placementPolicy/tpuTopology")
            .and_then(Value::as_str)
        {
            Some(t) => {
                let total = topology_chips(t)
                    .filter(|n| n % chips == 0)
                    .ok_or_else(|| {
                        format!("TPU topology \"{t}\" does not fit machine type \"{machine_type}\"")
                    })?;
                step = u32::try_from(total / chips).unwrap_or(u32::MAX);
                t.to_owned()
            }
            None => single_host_topology(chips, *three_d),
        };
        node = node
            .label("cloud.google.com/gke-tpu-accelerator", label)
            .label("cloud.google.com/gke-tpu-topology", &topology)
            .capacity("google.com/tpu", chips)
            .taint("google.com/tpu", "present", "NoSchedule");
    }
    Ok((node, step))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn gke_labels_taints_and_resources() {
        let (n, step) = node_template(
            &json!({"config": {"machineType": "g2-standard-24", "spot": true,
                "accelerators": [{"acceleratorType": "nvidia-l4", "acceleratorCount": "2"}],
                "taints": [{"key": "cloud.google.com/gke-spot", "value": "true", "effect": "NO_SCHEDULE"}],
                "labels": {"kinetic.dev/accelerator": "gpu-l4x2"}}}),
            "us-central1-a",
        )
        .unwrap();
        assert_eq!(step, 1);
        assert_eq!(n.labels["cloud.google.com/gke-accelerator"], "nvidia-l4");
        assert_eq!(n.labels["cloud.google.com/gke-spot"], "true");
        assert_eq!(n.labels["kinetic.dev/accelerator"], "gpu-l4x2");
        assert_eq!(n.capacity["nvidia.com/gpu"], 2);
        assert!(n.taints.contains(&(
            "nvidia.com/gpu".into(),
            "present".into(),
            "NoSchedule".into()
        )));
        assert!(n.taints.contains(&(
            "cloud.google.com/gke-spot".into(),
            "true".into(),
            "NoSchedule".into()
        )));

        let (n, step) = node_template(
            &json!({"config": {"machineType": "ct5lp-hightpu-4t"},
                    "placementPolicy": {"type": "COMPACT", "tpuTopology": "4x4"}}),
            "us-central1-a",
        )
        .unwrap();
        assert_eq!(step, 4);
        assert_eq!(
            n.labels["cloud.google.com/gke-tpu-accelerator"],
            "tpu-v5-lite-podslice"
        );
        assert_eq!(n.labels["cloud.google.com/gke-tpu-topology"], "4x4");
        assert_eq!(n.capacity["google.com/tpu"], 4);
        let (n, step) =
            node_template(&json!({"config": {"machineType": "ct3-hightpu-4t"}}), "z").unwrap();
        assert_eq!(
            (
                step,
                n.labels["cloud.google.com/gke-tpu-accelerator"].as_str()
            ),
            (1, "tpu-v3-device")
        );
        assert_eq!(n.labels["cloud.google.com/gke-tpu-topology"], "2x2");
        let (n, _) =
            node_template(&json!({"config": {"machineType": "ct4p-hightpu-4t"}}), "z").unwrap();
        assert_eq!(n.labels["cloud.google.com/gke-tpu-topology"], "2x2x1");

        let e = node_template(
            &json!({"config": {"labels": {"cloud.google.com/gke-spot": "true"}}}),
            "z",
        )
        .unwrap_err();
        assert!(e.contains("reserved"), "{e}");
        let e = node_template(
            &json!({"config": {"machineType": "ct5lp-hightpu-4t"}, "placementPolicy": {"tpuTopology": "3x3"}}),
            "z",
        )
        .unwrap_err();
        assert!(e.contains("does not fit"), "{e}");
    }
}
