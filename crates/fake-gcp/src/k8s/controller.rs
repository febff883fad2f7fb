//! The fake control plane: deletion (foreground, background, orphan), the
//! garbage collector, and the Job controller (a Job gets a Pod; the Pod's
//! end ends the Job; deadlines, suspension, back-off and TTL). It works on
//! the object store only; the kubelet runs beside it (see the control loop
//! in the parent module).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::meta::{name_of, ns_of, str_at, uid_of};
use super::store::{ApiError, Store, now_rfc3339, parse_time};

/// Resources the garbage collector and foreground deletion look at.
const OWNED: &[&str] = &[
    "pods",
    "secrets",
    "jobs.batch",
    "configmaps",
    "events",
    "leaderworkersets.leaderworkerset.x-k8s.io",
];

fn owner_uids(v: &Value) -> Vec<String> {
    v.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn deleting(v: &Value) -> bool {
    v.pointer("/metadata/deletionTimestamp").is_some()
}

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

/// One pass of the garbage collector and the Job controller over everything.
pub(crate) fn reconcile(store: &Store) {
    collect_garbage(store);
    let pods = store.all("pods");
    let mut pods_by_owner: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for p in &pods {
        for uid in owner_uids(p) {
            pods_by_owner.entry(uid).or_default().push(p.clone());
        }
    }
    for job in store.all("jobs.batch") {
        if deleting(&job) {
            continue;
        }
        let owned = pods_by_owner.remove(uid_of(&job)).unwrap_or_default();
        reconcile_job(store, &job, &owned);
    }
}

/// Remove objects whose owners are gone, and finish foreground deletions.
fn collect_garbage(store: &Store) {
    let mut all: Vec<(&str, Value)> = Vec::new();
    for r in OWNED {
        all.extend(store.all(r).into_iter().map(|v| (*r, v)));
    }
    let uids: BTreeSet<String> = all.iter().map(|(_, v)| uid_of(v).to_owned()).collect();
    for (resource, object) in &all {
        let owners = owner_uids(object);
        if !owners.is_empty() && !owners.iter().any(|u| uids.contains(u)) {
            let _ = delete(
                store,
                resource,
                ns_of(object),
                name_of(object),
                "Background",
            );
        }
    }
    for (resource, object) in &all {
        if *resource == "pods" || !deleting(object) {
            continue;
        }
        let uid = uid_of(object);
        let dependents: Vec<&(&str, Value)> = all
            .iter()
            .filter(|(_, d)| owner_uids(d).iter().any(|u| u == uid))
            .collect();
        for (r, d) in &dependents {
            if !deleting(d) {
                let _ = delete(store, r, ns_of(d), name_of(d), "Foreground");
            }
        }
        if dependents.is_empty() {
            store.remove(resource, ns_of(object), name_of(object));
        }
    }
}

fn condition(kind: &str, reason: &str, message: &str) -> Value {
    let now = now_rfc3339();
    json!({"type": kind, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
           "reason": reason, "message": message})
}

fn has_condition(job: &Value, kind: &str) -> bool {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(kind)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

fn phase(pod: &Value) -> &str {
    str_at(pod, "/status/phase").unwrap_or("Pending")
}

fn pod_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

fn seconds_at(v: &Value, pointer: &str) -> Option<u64> {
    v.pointer(pointer).and_then(Value::as_u64)
}

fn reconcile_job(store: &Store, job: &Value, pods: &[Value]) {
    let (ns, name) = (ns_of(job).to_owned(), name_of(job).to_owned());
    let now = SystemTime::now();
    if has_condition(job, "Complete") || has_condition(job, "Failed") {
        if let Some(ttl) = seconds_at(job, "/spec/ttlSecondsAfterFinished") {
            let finished = str_at(job, "/status/completionTime")
                .or_else(|| {
                    job.pointer("/status/conditions")
                        .and_then(Value::as_array)
                        .and_then(|cs| cs.last())
                        .and_then(|c| c.get("lastTransitionTime"))
                        .and_then(Value::as_str)
                })
                .and_then(parse_time);
            if finished.is_some_and(|t| now >= t + Duration::from_secs(ttl)) {
                let _ = delete(store, "jobs.batch", &ns, &name, "Background");
            }
        }
        return;
    }
    let active: Vec<&Value> = pods
        .iter()
        .filter(|p| !deleting(p) && !matches!(phase(p), "Succeeded" | "Failed"))
        .collect();
    if job.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true) {
        for p in &active {
            let _ = delete(store, "pods", ns_of(p), name_of(p), "Background");
        }
        store.modify("jobs.batch", &ns, &name, |j| {
            if !has_condition(j, "Suspended") {
                push_condition(j, condition("Suspended", "JobSuspended", "Job suspended"));
            }
            j["status"]["active"] = json!(0);
            j["status"]["ready"] = json!(0);
        });
        return;
    }
    let started = str_at(job, "/status/startTime").and_then(parse_time);
    if started.is_none() {
        store.modify("jobs.batch", &ns, &name, |j| {
            j["status"]["startTime"] = Value::String(now_rfc3339());
        });
    }
    let started = started.unwrap_or(now);
    if let Some(deadline) = seconds_at(job, "/spec/activeDeadlineSeconds")
        && now >= started + Duration::from_secs(deadline)
    {
        for p in &active {
            let _ = delete(store, "pods", ns_of(p), name_of(p), "Background");
        }
        let failed = pods.iter().filter(|p| phase(p) == "Failed").count() + active.len();
        store.modify("jobs.batch", &ns, &name, |j| {
            push_condition(
                j,
                condition(
                    "Failed",
                    "DeadlineExceeded",
                    "Job was active longer than specified deadline",
                ),
            );
            j["status"]["active"] = json!(0);
            j["status"]["ready"] = json!(0);
            j["status"]["failed"] = json!(failed);
        });
        return;
    }
    let succeeded = pods.iter().filter(|p| phase(p) == "Succeeded").count();
    let failed = pods.iter().filter(|p| phase(p) == "Failed").count();
    let completions = seconds_at(job, "/spec/completions").unwrap_or(1) as usize;
    let backoff = seconds_at(job, "/spec/backoffLimit").unwrap_or(6) as usize;
    let ready = active.iter().filter(|p| pod_ready(p)).count();
    let active_count = active.len();
    if succeeded >= completions {
        store.modify("jobs.batch", &ns, &name, |j| {
            push_condition(
                j,
                condition(
                    "Complete",
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                ),
            );
            j["status"]["completionTime"] = Value::String(now_rfc3339());
            j["status"]["succeeded"] = json!(succeeded);
            j["status"]["failed"] = json!(failed);
            j["status"]["active"] = json!(0);
            j["status"]["ready"] = json!(0);
        });
        return;
    }
    if failed > backoff {
        store.modify("jobs.batch", &ns, &name, |j| {
            push_condition(
                j,
                condition(
                    "Failed",
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                ),
            );
            j["status"]["failed"] = json!(failed);
            j["status"]["active"] = json!(0);
            j["status"]["ready"] = json!(0);
        });
        return;
    }
    let terminating = pods.iter().any(deleting);
    if active.is_empty() && !terminating {
        create_pod(store, job);
    }
    store.modify("jobs.batch", &ns, &name, |j| {
        j["status"]["active"] =
            json!(active_count.max(usize::from(active.is_empty() && !terminating)));
        j["status"]["ready"] = json!(ready);
        if failed > 0 {
            j["status"]["failed"] = json!(failed);
        }
    });
}

fn push_condition(job: &mut Value, c: Value) {
    let conditions = job["status"]
        .as_object_mut()
        .map(|s| s.entry("conditions").or_insert_with(|| json!([])));
    if let Some(Value::Array(cs)) = conditions {
        cs.push(c);
    }
}

fn random_suffix() -> String {
    uuid::Uuid::new_v4()
        .simple()
        .to_string()
        .chars()
        .filter(char::is_ascii_lowercase)
        .chain("abcde".chars())
        .take(5)
        .collect()
}

fn create_pod(store: &Store, job: &Value) {
    let name = name_of(job);
    let uid = uid_of(job);
    let template = job.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let mut labels = template
        .pointer("/metadata/labels")
        .cloned()
        .unwrap_or(json!({}));
    for (k, v) in [
        ("job-name", name),
        ("batch.kubernetes.io/job-name", name),
        ("controller-uid", uid),
        ("batch.kubernetes.io/controller-uid", uid),
    ] {
        labels[k] = Value::String(v.to_owned());
    }
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("{name}-{}", random_suffix()),
            "labels": labels,
            "annotations": template.pointer("/metadata/annotations").cloned().unwrap_or(json!({})),
            "ownerReferences": [{
                "apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid,
                "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": template.get("spec").cloned().unwrap_or(json!({})),
        "status": {"phase": "Pending", "conditions": []},
    });
    if let Err(e) = store.create("pods", ns_of(job), pod) {
        tracing::warn!(
            "fake job controller could not create a pod for {name}: {}",
            e.message
        );
    }
}
