//! The StatefulSet controller, as far as LeaderWorkerSets use it:
//! `podManagementPolicy: Parallel`, `ordinals.start`, pods named
//! `{set}-{ordinal}` with the set's service as their subdomain and their
//! name as hostname, a pod in a terminal phase deleted so that it is made
//! again (silently, as Kubernetes 1.32 does: `SuccessfulDelete` then
//! `SuccessfulCreate`, no event saying it had failed), ordinals beyond the
//! replicas removed, and the set's status
//! (`replicas`, `readyReplicas`, `currentReplicas`, `availableReplicas`).
//!
//! A StatefulSet written through the API (or by a controller) is admitted
//! as the API server admits it ([`admit`]): its pod template's
//! `restartPolicy` defaults to `Always` and may be nothing else, and
//! `activeDeadlineSeconds` is refused.

use serde_json::{Value, json};

use super::deletion::delete;
use super::events;
use super::meta::{deleting, name_of, ns_of, owner_uids, phase, pod_ready, str_at, uid_of};
use super::store::{Admission, ApiError, Phase, Store, Write};

pub(crate) const RESOURCE: &str = "statefulsets.apps";

/// One pass over every StatefulSet.
pub(crate) fn reconcile(store: &Store) {
    let sets = store.all(RESOURCE);
    if sets.is_empty() {
        return;
    }
    let pods = store.all("pods");
    for set in sets {
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

/// [`admit`] as the store runs it: on a StatefulSet created, updated or
/// patched through the API.
pub(crate) const ADMISSION: Admission = Admission {
    resource: RESOURCE,
    phase: Phase::Mutating,
    writes: &[Write::Create, Write::Update],
    admit: |_, _, set| admit(set),
    patched: Some(admit),
};

/// The API server's defaulting and validation of a StatefulSet (apps/v1
/// `SetDefaults_PodSpec`, `ValidateStatefulSetSpec`): the template's
/// `restartPolicy` defaults to `Always`; another value is refused
/// (`FieldValueNotSupported`), as is `activeDeadlineSeconds`
/// (`FieldValueForbidden`), with a 422 `Invalid` Status listing each cause.
pub(crate) fn admit(set: &mut Value) -> Result<(), ApiError> {
    let name = name_of(set).to_owned();
    if !set["spec"].is_object() {
        set["spec"] = json!({});
    }
    if !set["spec"]["template"].is_object() {
        set["spec"]["template"] = json!({});
    }
    let spec = &mut set["spec"]["template"]["spec"];
    if !spec.is_object() {
        *spec = json!({});
    }
    match spec.get("restartPolicy").and_then(Value::as_str) {
        None | Some("") => spec["restartPolicy"] = json!("Always"),
        _ => {}
    }
    let mut causes = Vec::new();
    match spec.get("restartPolicy") {
        Some(Value::String(p)) if p == "Always" => {}
        other => {
            let shown = match other {
                Some(Value::String(p)) => format!("\"{p}\""),
                Some(v) => v.to_string(),
                None => "null".to_owned(),
            };
            causes.push((
                "FieldValueNotSupported",
                format!("Unsupported value: {shown}: supported values: \"Always\""),
                "spec.template.spec.restartPolicy",
            ));
        }
    }
    if spec
        .get("activeDeadlineSeconds")
        .is_some_and(|v| !v.is_null())
    {
        causes.push((
            "FieldValueForbidden",
            "Forbidden: activeDeadlineSeconds in StatefulSet is not Supported".to_owned(),
            "spec.template.spec.activeDeadlineSeconds",
        ));
    }
    if causes.is_empty() {
        return Ok(());
    }
    let causes: Vec<(&str, String, String)> = causes
        .into_iter()
        .map(|(reason, message, field)| (reason, field.to_owned(), message))
        .collect();
    Err(ApiError::invalid("StatefulSet", "apps", &name, &causes))
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
        let condemned = n.is_none_or(|n| !wanted.contains(&n));
        // A pod beyond the replicas goes; so does one in a terminal phase,
        // to be made again under the same name (a new UID). Kubernetes
        // 1.32's controller tells both alike, with its pod control's
        // `SuccessfulDelete` (then `SuccessfulCreate`): nothing says that
        // the pod had failed (the `RecreatingFailedPod` warning of older
        // releases is gone).
        if condemned || matches!(phase(pod), "Failed" | "Succeeded") {
            let _ = delete(store, "pods", &ns, name_of(pod), "Background");
            let message = format!(
                "delete Pod {} in StatefulSet {name} successful",
                name_of(pod)
            );
            record(store, set, "Normal", "SuccessfulDelete", &message);
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
    store.admit(Write::Create, "pods", ns_of(set), &mut pod)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pod_spec: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "job-1"},
               "spec": {"replicas": 1, "template": {"spec": pod_spec}}})
    }

    #[test]
    fn admission_defaults_the_restart_policy_to_always() {
        let mut s = set(json!({"containers": [{"name": "c"}]}));
        admit(&mut s).unwrap();
        assert_eq!(s["spec"]["template"]["spec"]["restartPolicy"], "Always");
        let mut s = set(json!({"restartPolicy": "Always", "containers": [{"name": "c"}]}));
        admit(&mut s).unwrap();
    }

    #[test]
    fn admission_refuses_never_and_an_active_deadline_as_the_api_server_does() {
        let mut s = set(json!({"restartPolicy": "Never", "containers": [{"name": "c"}]}));
        let e = admit(&mut s).unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
        assert_eq!(
            e.message,
            "StatefulSet.apps \"job-1\" is invalid: spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""
        );
        let status = e.to_status();
        assert_eq!(status["details"]["kind"], "StatefulSet");
        assert_eq!(
            status["details"]["causes"][0]["reason"],
            "FieldValueNotSupported"
        );
        assert_eq!(
            status["details"]["causes"][0]["field"],
            "spec.template.spec.restartPolicy"
        );

        let mut s = set(json!({"activeDeadlineSeconds": 60, "containers": [{"name": "c"}]}));
        let e = admit(&mut s).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message.ends_with(
                "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in StatefulSet is not Supported"
            ),
            "{}",
            e.message
        );
        let causes = e.to_status()["details"]["causes"].clone();
        assert_eq!(causes[0]["reason"], "FieldValueForbidden");

        let mut s = set(json!({"restartPolicy": "OnFailure", "activeDeadlineSeconds": 5}));
        let e = admit(&mut s).unwrap_err();
        assert_eq!(
            e.to_status()["details"]["causes"].as_array().unwrap().len(),
            2
        );
        assert!(e.message.contains(": ["), "{}", e.message);
    }
}
