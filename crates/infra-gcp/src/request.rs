//! The request bodies, pure: specs of `crate::model` → the JSON
//! each REST API takes. Golden files under `tests/golden/` pin them.

use crate::model::{
    Binding, BucketSpec, ClusterSpec, PoolSpec, RepositorySpec, ServiceAccountSpec, Taint,
};
use serde_json::{Map, Value, json};

/// The scope node VMs get; what they may do is their service account's roles.
pub const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// Service Usage `services.batchEnable`.
pub fn batch_enable(apis: &[String]) -> Value {
    json!({ "serviceIds": apis })
}

/// IAM `projects.serviceAccounts.create`.
pub fn service_account(account: &ServiceAccountSpec) -> Value {
    json!({
        "accountId": account.account_id,
        "serviceAccount": {
            "displayName": account.display_name,
            "description": "Created by kinetic up; deleted by kinetic down.",
        },
    })
}

fn lifecycle(ttl_days: u32) -> Value {
    json!({"rule": [{"action": {"type": "Delete"}, "condition": {"age": ttl_days}}]})
}

/// Storage `buckets.insert`: location, labels, the delete rule, uniform
/// bucket-level access and public access prevention.
pub fn bucket(bucket: &BucketSpec) -> Value {
    json!({
        "name": bucket.name,
        "location": bucket.location,
        "storageClass": "STANDARD",
        "labels": bucket.labels,
        "lifecycle": lifecycle(bucket.ttl_days),
        "iamConfiguration": {
            "uniformBucketLevelAccess": {"enabled": bucket.uniform_access},
            "publicAccessPrevention": "enforced",
        },
    })
}

/// Storage `buckets.patch`: the delete rule and labels of an existing bucket.
pub fn bucket_patch(bucket: &BucketSpec) -> Value {
    json!({"labels": bucket.labels, "lifecycle": lifecycle(bucket.ttl_days)})
}

/// Artifact Registry `repositories.create` (the id goes in the query).
pub fn repository(repository: &RepositorySpec) -> Value {
    json!({
        "format": repository.format,
        "description": "Images of Kinetic jobs (kinetic up)",
        "labels": repository.labels,
    })
}

fn node_config(
    machine_type: &str,
    service_account: &str,
    labels: &Map<String, Value>,
) -> Map<String, Value> {
    let mut config = Map::new();
    config.insert("machineType".into(), json!(machine_type));
    config.insert("serviceAccount".into(), json!(service_account));
    config.insert("oauthScopes".into(), json!([CLOUD_PLATFORM_SCOPE]));
    config.insert(
        "workloadMetadataConfig".into(),
        json!({"mode": "GKE_METADATA"}),
    );
    config.insert("resourceLabels".into(), Value::Object(labels.clone()));
    config
}

fn labels(cluster_labels: &std::collections::BTreeMap<String, String>) -> Map<String, Value> {
    cluster_labels
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect()
}

/// Kubernetes Engine `clusters.create`: a zonal cluster on the STABLE
/// channel with Workload Identity, the GCS FUSE CSI driver, an autoscaler
/// that removes idle nodes fast, and the default pool.
pub fn cluster(cluster: &ClusterSpec) -> Value {
    let labels = labels(&cluster.labels);
    let mut config = node_config(
        &cluster.default_pool.machine_type,
        &cluster.node_service_account,
        &labels,
    );
    config.insert(
        "diskSizeGb".into(),
        json!(cluster.default_pool.disk_size_gb),
    );
    json!({
        "cluster": {
            "name": cluster.name,
            "description": "Kinetic cluster (kinetic up)",
            "resourceLabels": labels,
            "releaseChannel": {"channel": cluster.release_channel},
            "workloadIdentityConfig": {"workloadPool": cluster.workload_pool},
            "addonsConfig": {"gcsFuseCsiDriverConfig": {"enabled": cluster.gcs_fuse_csi}},
            "autoscaling": {"autoscalingProfile": cluster.autoscaling_profile},
            "nodePools": [{
                "name": cluster.default_pool.name,
                "initialNodeCount": cluster.default_pool.node_count,
                "config": config,
                "management": {"autoRepair": true, "autoUpgrade": true},
            }],
        }
    })
}

/// Kubernetes Engine `clusters.update` bodies (one change each, as the API
/// takes them): Workload Identity with `workload_pool`, the GCS FUSE CSI
/// driver.
pub fn cluster_updates(workload_pool: Option<&str>, gcs_fuse_csi: bool) -> Vec<Value> {
    let mut updates = Vec::new();
    if let Some(pool) = workload_pool {
        updates.push(json!({"update": {"desiredWorkloadIdentityConfig": {"workloadPool": pool}}}));
    }
    if gcs_fuse_csi {
        updates.push(json!({"update": {"desiredAddonsConfig": {"gcsFuseCsiDriverConfig": {"enabled": true}}}}));
    }
    updates
}

fn taint(t: &Taint) -> Value {
    let effect = match t.effect.as_str() {
        "NoSchedule" => "NO_SCHEDULE",
        "PreferNoSchedule" => "PREFER_NO_SCHEDULE",
        "NoExecute" => "NO_EXECUTE",
        other => other,
    };
    json!({"key": t.key, "value": t.value, "effect": effect})
}

/// Kubernetes Engine `nodePools.create`: the machine type, GPUs (their
/// driver installed by the NVIDIA installer `up` applies, not by GKE) or
/// the TPU slice's compact placement, the autoscaling bounds, Spot or a
/// reservation, the run-duration limit, and the labels and taints the
/// pool sets itself.
pub fn node_pool(
    pool: &PoolSpec,
    cluster_labels: &std::collections::BTreeMap<String, String>,
) -> Value {
    let mut config = node_config(
        pool.machine_type(),
        &pool.service_account,
        &labels(cluster_labels),
    );
    config.insert("labels".into(), json!(pool.labels()));
    let taints: Vec<Value> = pool.taints().iter().map(taint).collect();
    if !taints.is_empty() {
        config.insert("taints".into(), json!(taints));
    }
    if let Some((kind, count)) = pool.gpu() {
        config.insert(
            "accelerators".into(),
            json!([{
                "acceleratorType": kind,
                "acceleratorCount": count.to_string(),
                "gpuDriverInstallationConfig": {"gpuDriverVersion": "INSTALLATION_DISABLED"},
            }]),
        );
    }
    if pool.spot() {
        config.insert("spot".into(), json!(true));
    }
    if let Some(r) = &pool.reservation {
        config.insert(
            "reservationAffinity".into(),
            json!({
                "consumeReservationType": "SPECIFIC_RESERVATION",
                "key": "compute.googleapis.com/reservation-name",
                "values": [r],
            }),
        );
    }
    if let Some(d) = pool.max_run_duration {
        config.insert("maxRunDuration".into(), json!(format!("{}s", d.as_secs())));
    }
    let mut body = json!({
        "name": pool.name,
        "initialNodeCount": pool.min_nodes,
        "autoscaling": {"enabled": true, "minNodeCount": pool.min_nodes, "maxNodeCount": pool.max_nodes},
        "management": {"autoRepair": true, "autoUpgrade": true},
        "config": config,
    });
    if let Some(topology) = pool.tpu_topology() {
        body["placementPolicy"] = json!({"type": "COMPACT", "tpuTopology": topology});
    }
    json!({ "nodePool": body })
}

fn bindings_mut(policy: &mut Value) -> &mut Vec<Value> {
    if !policy["bindings"].is_array() {
        policy["bindings"] = json!([]);
    }
    match &mut policy["bindings"] {
        Value::Array(a) => a,
        _ => unreachable!("set to an array above"),
    }
}

/// `policy` with `bindings` added (to the unconditional binding of each
/// role, or a new one), its etag kept for the write; `None` when every
/// binding is there already.
pub fn grant(policy: &Value, bindings: &[Binding]) -> Option<Value> {
    let mut p = policy.clone();
    let mut changed = false;
    let list = bindings_mut(&mut p);
    for b in bindings {
        match list
            .iter_mut()
            .find(|x| x["role"] == b.role.as_str() && x.get("condition").is_none())
        {
            Some(x) => {
                if !x["members"].is_array() {
                    x["members"] = json!([]);
                }
                if let Value::Array(members) = &mut x["members"]
                    && !members.iter().any(|m| m == b.member.as_str())
                {
                    members.push(json!(b.member));
                    changed = true;
                }
            }
            None => {
                list.push(json!({"role": b.role, "members": [b.member]}));
                changed = true;
            }
        }
    }
    changed.then_some(p)
}

/// `policy` with `bindings` removed (emptied bindings dropped); `None`
/// when none of them is there.
pub fn revoke(policy: &Value, bindings: &[Binding]) -> Option<Value> {
    let mut p = policy.clone();
    let mut changed = false;
    let list = bindings_mut(&mut p);
    for b in bindings {
        for x in list
            .iter_mut()
            .filter(|x| x["role"] == b.role.as_str() && x.get("condition").is_none())
        {
            if let Value::Array(members) = &mut x["members"] {
                let before = members.len();
                members.retain(|m| m != b.member.as_str());
                changed |= members.len() != before;
            }
        }
    }
    list.retain(|x| x["members"].as_array().is_none_or(|m| !m.is_empty()));
    changed.then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(role: &str, member: &str) -> Binding {
        Binding::new(role, member)
    }

    #[test]
    fn grant_and_revoke_keep_the_rest_of_the_policy() {
        let policy = json!({"version": 3, "etag": "BwY1=", "bindings": [
            {"role": "roles/owner", "members": ["user:me@example.com"]},
            {"role": "roles/logging.logWriter", "members": ["user:x@example.com"],
             "condition": {"title": "t", "expression": "true"}},
        ]});
        let granted = grant(
            &policy,
            &[
                b("roles/logging.logWriter", "serviceAccount:a"),
                b("roles/owner", "serviceAccount:a"),
            ],
        )
        .unwrap();
        assert_eq!(granted["etag"], "BwY1=");
        assert_eq!(granted["version"], 3);
        assert_eq!(
            granted["bindings"][0]["members"],
            json!(["user:me@example.com", "serviceAccount:a"])
        );
        assert!(
            granted["bindings"][1].get("condition").is_some(),
            "a conditional binding is left alone"
        );
        assert_eq!(
            granted["bindings"][2],
            json!({"role": "roles/logging.logWriter", "members": ["serviceAccount:a"]})
        );
        assert_eq!(
            grant(&granted, &[b("roles/owner", "serviceAccount:a")]),
            None
        );
        let revoked = revoke(
            &granted,
            &[
                b("roles/logging.logWriter", "serviceAccount:a"),
                b("roles/owner", "serviceAccount:a"),
            ],
        )
        .unwrap();
        assert_eq!(revoked["bindings"], policy["bindings"]);
        assert_eq!(
            revoke(&policy, &[b("roles/owner", "serviceAccount:zz")]),
            None
        );
        assert!(grant(&json!({"etag": "e"}), &[b("roles/r", "m")]).is_some());
    }
}
