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

/// The finalizers an object carries.
fn finalizers(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// Remove a pod whose containers stopped (the kubelet, once a deletion's
/// grace period is over) or that is force-deleted (the pod garbage
/// collector): gone at once, unless a finalizer holds it (the Job
/// controller's `batch.kubernetes.io/job-tracking`). Then, as the API
/// server does, it stays with its `deletionTimestamp`, in a terminal phase
/// (`Failed` unless it already ended: the kubelet ends a deleted pod's
/// phase), until the last finalizer is removed
/// ([`remove_pod_finalizer`]).
pub(crate) fn remove_pod(store: &Store, ns: &str, name: &str) {
    let Ok(pod) = store.get("pods", ns, name) else {
        return;
    };
    if finalizers(&pod).is_empty() {
        store.remove("pods", ns, name);
        return;
    }
    if deleting(&pod) && matches!(phase(&pod), "Succeeded" | "Failed") {
        return;
    }
    store.modify("pods", ns, name, |p| {
        if !deleting(p) {
            p["metadata"]["deletionTimestamp"] = Value::String(now_rfc3339());
        }
        if !matches!(phase(p), "Succeeded" | "Failed") {
            p["status"]["phase"] = json!("Failed");
        }
    });
}

/// Remove `finalizer` from pod `name`; a pod whose deletion is through
/// (its containers stopped: [`remove_pod`] ended its phase) and that has no
/// finalizer left is gone, as the API server does on that update. A pod
/// still stopping stays, for the kubelet to remove.
pub(crate) fn remove_pod_finalizer(store: &Store, ns: &str, name: &str, finalizer: &str) {
    let Ok(pod) = store.get("pods", ns, name) else {
        return;
    };
    let mut left = finalizers(&pod);
    if !left.iter().any(|f| f == finalizer) {
        return;
    }
    left.retain(|f| f != finalizer);
    if left.is_empty() && deleting(&pod) && matches!(phase(&pod), "Succeeded" | "Failed") {
        store.remove("pods", ns, name);
        return;
    }
    store.modify("pods", ns, name, |p| {
        p["metadata"]["finalizers"] = json!(left);
    });
}

/// Whether an object carries `finalizer`.
pub(crate) fn has_finalizer(object: &Value, finalizer: &str) -> bool {
    finalizers(object).iter().any(|f| f == finalizer)
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
