//! Deletion as the API server does it (graceful for pods; foreground,
//! background or orphaning for owners) and the Eviction API, on the store
//! only; the garbage collector (in `controller`) finishes what a
//! foreground deletion starts.

use serde_json::{Value, json};

use super::meta::{condition, deleting, name_of, ns_of, owner_uids, phase, uid_of};
use super::store::{ApiError, Store, now_rfc3339};

/// Resources the garbage collector and foreground deletion look at.
pub(crate) const OWNED: &[&str] = &[
    "pods",
    "secrets",
    "jobs.batch",
    "configmaps",
    "events",
    "leaderworkersets.leaderworkerset.x-k8s.io",
    "statefulsets.apps",
];

/// Delete an object as the API server does. `Some(object)` when the
/// deletion is in progress (a pod terminating, a foreground deletion
/// waiting for dependents), `None` when the object is gone.
pub(crate) fn delete(
    store: &Store,
    resource: &str,
    ns: &str,
    name: &str,
    policy: &str,
) -> Result<Option<Value>, ApiError> {
    let object = store.get(resource, ns, name)?;
    if deleting(&object) {
        return Ok(Some(object));
    }
    if resource == "pods" {
        // Graceful: the kubelet stops the containers, then removes the pod.
        let now = now_rfc3339();
        return Ok(store.modify(resource, ns, name, |p| {
            p["metadata"]["deletionTimestamp"] = Value::String(now);
        }));
    }
    match policy {
        "Foreground" => Ok(store.modify(resource, ns, name, |o| {
            o["metadata"]["deletionTimestamp"] = Value::String(now_rfc3339());
            let finalizers = o["metadata"]
                .as_object_mut()
                .map(|m| m.entry("finalizers").or_insert_with(|| json!([])));
            if let Some(Value::Array(f)) = finalizers
                && !f.iter().any(|x| x == "foregroundDeletion")
            {
                f.push(json!("foregroundDeletion"));
            }
        })),
        "Orphan" => {
            let uid = uid_of(&object).to_owned();
            for r in OWNED {
                for dep in store.all(r) {
                    if owner_uids(&dep).contains(&uid) {
                        store.modify(r, ns_of(&dep), name_of(&dep), |d| {
                            if let Some(Value::Array(refs)) =
                                d.pointer_mut("/metadata/ownerReferences")
                            {
                                refs.retain(|x| x.get("uid").and_then(Value::as_str) != Some(&uid));
                            }
                        });
                    }
                }
            }
            store.remove(resource, ns, name);
            Ok(None)
        }
        _ => {
            store.remove(resource, ns, name);
            Ok(None)
        }
    }
}

/// The Eviction API (`POST pods/{name}/eviction`), as the API server's
/// eviction REST handler does with no PodDisruptionBudget in the way: a
/// pod that has not ended gets the `DisruptionTarget` condition (reason
/// `EvictionByEvictionAPI`), then it is deleted gracefully; the kubelet
/// stops it and it is gone, and its Job replaces it.
pub(crate) fn evict(store: &Store, ns: &str, name: &str) -> Result<(), ApiError> {
    let pod = store.get("pods", ns, name)?;
    if !matches!(phase(&pod), "Succeeded" | "Failed") {
        store.modify("pods", ns, name, |p| {
            let c = condition(
                "DisruptionTarget",
                "EvictionByEvictionAPI",
                "Eviction API: evicting",
            );
            match p.pointer_mut("/status/conditions") {
                Some(Value::Array(cs)) => {
                    if !cs.iter().any(|x| x["type"] == "DisruptionTarget") {
                        cs.push(c);
                    }
                }
                _ => p["status"]["conditions"] = json!([c]),
            }
        });
    }
    delete(store, "pods", ns, name, "Background").map(|_| ())
}
