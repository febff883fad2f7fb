//! Reading an object (name, namespace, uid, owners, whether it is being
//! deleted, a pod's phase and readiness) and writing a condition: plain
//! functions of the JSON, shared by the API server, the controllers and
//! the kubelet.

use serde_json::{Value, json};

/// The string at a JSON pointer, if there is one.
pub(crate) fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// `metadata.name` (empty when absent).
pub(crate) fn name_of(v: &Value) -> &str {
    str_at(v, "/metadata/name").unwrap_or_default()
}

/// `metadata.namespace` (empty when absent).
pub(crate) fn ns_of(v: &Value) -> &str {
    str_at(v, "/metadata/namespace").unwrap_or_default()
}

/// `metadata.uid` (empty when absent).
pub(crate) fn uid_of(v: &Value) -> &str {
    str_at(v, "/metadata/uid").unwrap_or_default()
}

/// The uids of `v`'s owners (`metadata.ownerReferences`).
pub(crate) fn owner_uids(v: &Value) -> Vec<String> {
    v.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `v` is being deleted (`metadata.deletionTimestamp` is set).
pub(crate) fn deleting(v: &Value) -> bool {
    v.pointer("/metadata/deletionTimestamp").is_some()
}

/// A pod's `status.phase` (`Pending` when absent).
pub(crate) fn phase(pod: &Value) -> &str {
    str_at(pod, "/status/phase").unwrap_or("Pending")
}

/// Whether a pod has the condition `Ready` true.
pub(crate) fn pod_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// A condition of type `kind`, true since now, with `reason` and `message`.
pub(crate) fn condition(kind: &str, reason: &str, message: &str) -> Value {
    let now = super::store::now_rfc3339();
    json!({"type": kind, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
           "reason": reason, "message": message})
}
