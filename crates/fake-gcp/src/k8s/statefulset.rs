//! The StatefulSet controller, as far as LeaderWorkerSets use it:
//! `podManagementPolicy: Parallel`, `ordinals.start`, pods named
//! `{set}-{ordinal}` with the set's service as their subdomain and their
//! name as hostname, a pod in a terminal phase deleted so that it is made
//! again, ordinals beyond the replicas removed, and the set's status
//! (`replicas`, `readyReplicas`, `currentReplicas`, `availableReplicas`).

use serde_json::{Value, json};

use super::controller::{delete, deleting, owner_uids, phase, pod_ready};
use super::events;
use super::meta::{name_of, ns_of, str_at, uid_of};
use super::store::{ApiError, Store};

pub(crate) const RESOURCE: &str = "statefulsets.apps";

/// One pass over every StatefulSet.
pub(crate) fn reconcile(store: &Store) {
    let pods = store.all("pods");
    for set in store.all(RESOURCE) {
        if deleting(&set) {
            continue;
        }
        let owned: Vec<&Value> = pods
            .iter()
            .filter(|p| owner_uids(p).iter().any(|u| u == uid_of(&set)))
            .collect();
        reconcile_set(store, &set, &owned);
    }
}

fn int_at(v: &Value, pointer: &str, default: i64) -> i64 {
    v.pointer(pointer)
        .and_then(Value::as_i64)
        .unwrap_or(default)
}

/// The ordinal of a pod of `set` named `{set}-{n}`.
fn ordinal(set: &str, pod: &str) -> Option<i64> {
    pod.strip_prefix(set)?.strip_prefix('-')?.parse().ok()
}

fn reconcile_set(store: &Store, set: &Value, pods: &[&Value]) {
    let (ns, name) = (ns_of(set).to_owned(), name_of(set).to_owned());
    let start = int_at(set, "/spec/ordinals/start", 0);
    let replicas = int_at(set, "/spec/replicas", 1);
    let wanted = start..start + replicas;
    for pod in pods {
        if deleting(pod) {
            continue;
        }
        let n = ordinal(&name, name_of(pod));
        if n.is_none_or(|n| !wanted.contains(&n)) {
            let _ = delete(store, "pods", &ns, name_of(pod), "Background");
            let message = format!(
                "delete Pod {} in StatefulSet {name} successful",
                name_of(pod)
            );
            record(store, set, "Normal", "SuccessfulDelete", &message);
        } else if matches!(phase(pod), "Failed" | "Succeeded") {
            // A pod in a terminal phase is deleted and made again, told as
            // the StatefulSet controller tells it (before Kubernetes 1.31):
            // a failed pod as a Warning, a succeeded one as Normal.
            let _ = delete(store, "pods", &ns, name_of(pod), "Background");
            let (kind, reason, what) = if phase(pod) == "Failed" {
                ("Warning", "RecreatingFailedPod", "failed")
            } else {
                ("Normal", "RecreatingTerminatedPod", "terminated")
            };
            let message = format!(
                "StatefulSet {ns}/{name} is recreating {what} Pod {}",
                name_of(pod)
            );
            record(store, set, kind, reason, &message);
        }
    }
    for n in wanted {
        let pod_name = format!("{name}-{n}");
        if store.get("pods", &ns, &pod_name).is_ok() {
            continue;
        }
        match create_pod(store, set, &pod_name, n) {
            Ok(_) => {
                let message = format!("create Pod {pod_name} in StatefulSet {name} successful");
                record(store, set, "Normal", "SuccessfulCreate", &message);
            }
            Err(e) => {
                let message = format!(
                    "create Pod {pod_name} in StatefulSet {name} failed error: {}",
                    e.message
                );
                record(store, set, "Warning", "FailedCreate", &message);
            }
        }
    }
    let live: Vec<&&Value> = pods.iter().filter(|p| !deleting(p)).collect();
    let ready = live.iter().filter(|p| pod_ready(p)).count();
    let generation = set.pointer("/metadata/generation").cloned();
    store.modify(RESOURCE, &ns, &name, |s| {
        s["status"]["observedGeneration"] = generation.unwrap_or(json!(1));
        s["status"]["replicas"] = json!(live.len());
        s["status"]["currentReplicas"] = json!(live.len());
        s["status"]["updatedReplicas"] = json!(live.len());
        s["status"]["readyReplicas"] = json!(ready);
        s["status"]["availableReplicas"] = json!(ready);
    });
}

/// A pod of `set` from its template, as the StatefulSet controller makes
/// it, through the API server's admission (which defaults a template's
/// `restartPolicy` to `Always`).
fn create_pod(store: &Store, set: &Value, pod_name: &str, n: i64) -> Result<Value, ApiError> {
    let template = set.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let mut labels = template
        .pointer("/metadata/labels")
        .cloned()
        .unwrap_or(json!({}));
    labels["statefulset.kubernetes.io/pod-name"] = json!(pod_name);
    labels["apps.kubernetes.io/pod-index"] = json!(n.to_string());
    let mut spec = template.get("spec").cloned().unwrap_or(json!({}));
    spec["hostname"] = json!(pod_name);
    if let Some(service) = str_at(set, "/spec/serviceName").filter(|s| !s.is_empty()) {
        spec["subdomain"] = json!(service);
    }
    if spec.get("restartPolicy").is_none() {
        spec["restartPolicy"] = json!("Always");
    }
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name,
            "labels": labels,
            "annotations": template.pointer("/metadata/annotations").cloned().unwrap_or(json!({})),
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "StatefulSet", "name": name_of(set),
                "uid": uid_of(set), "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": spec,
        "status": {"phase": "Pending", "conditions": []},
    });
    super::admission::admit_pod(store, ns_of(set), &mut pod)?;
    store.create("pods", ns_of(set), pod)
}

fn record(store: &Store, set: &Value, kind: &str, reason: &str, message: &str) {
    events::record(
        store,
        set,
        events::Event {
            kind,
            reason,
            message,
            component: "statefulset-controller",
        },
    );
}
