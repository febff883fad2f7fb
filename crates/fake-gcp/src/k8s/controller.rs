//! The fake control plane: deletion (foreground, background, orphan), the
//! garbage collector, and the Job controller (a Job gets a Pod; the Pod's
//! end ends the Job; deadlines, suspension, back-off and TTL). It works on
//! the object store only; the kubelet runs beside it (see the control loop
//! in the parent module).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::deletion::{OWNED, delete, has_finalizer, remove_pod_finalizer};
use super::events;
use super::meta::{
    condition, deleting, name_of, ns_of, owner_uids, phase, pod_ready, str_at, uid_of,
};
use super::pod_failure_policy::Action;
use super::store::{ApiError, Store, Write, now_rfc3339, parse_time};

/// One pass of the pod and owner garbage collectors, the service account
/// controller and the CustomResourceDefinition controller over
/// everything; the workload controllers ([`reconcile_jobs`] and those of
/// the parent module's control loop) run after it.
pub(crate) fn reconcile_cluster(store: &Store) {
    collect_orphaned_pods(store);
    collect_garbage(store);
    default_service_accounts(store);
    establish_crds(store);
}

/// One pass of the Job controller over every Job.
pub(crate) fn reconcile_jobs(store: &Store) {
    let pods = store.all("pods");
    let mut pods_by_owner: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for p in &pods {
        for uid in owner_uids(p) {
            pods_by_owner.entry(uid).or_default().push(p.clone());
        }
    }
    let mut tracked_by: BTreeSet<String> = BTreeSet::new();
    for job in store.all("jobs.batch") {
        if deleting(&job) {
            continue;
        }
        tracked_by.insert(uid_of(&job).to_owned());
        let owned = pods_by_owner.remove(uid_of(&job)).unwrap_or_default();
        reconcile_job(store, &job, &owned);
    }
    // A pod whose Job is gone or going has nothing left to count: its
    // tracking finalizer goes (the real controller's orphan pod cleanup).
    for p in &pods {
        if has_finalizer(p, JOB_TRACKING) && !owner_uids(p).iter().any(|u| tracked_by.contains(u)) {
            remove_pod_finalizer(store, ns_of(p), name_of(p), JOB_TRACKING);
        }
    }
}

/// The finalizer the Job controller puts on each pod it creates and
/// removes once it counted the pod's end in the Job's status (so an end is
/// counted once, even if the pod is deleted right after).
const JOB_TRACKING: &str = "batch.kubernetes.io/job-tracking";

/// The pod garbage collector's `gcOrphaned` (`pkg/controller/podgc`): a
/// pod bound to a node that no longer exists (a Spot VM reclaimed, a node
/// deleted) is marked `Failed` with a `DisruptionTarget` condition (reason
/// `DeletionByPodGC`) unless it already ended, then force-deleted: it is
/// gone at once, whoever counted on it (the Job controller replaces it).
/// The real one waits a quarantine (40 s) before acting; this one acts on
/// its next pass.
fn collect_orphaned_pods(store: &Store) {
    let nodes: BTreeSet<String> = store
        .all("nodes")
        .iter()
        .map(|n| name_of(n).to_owned())
        .collect();
    for pod in store.all("pods") {
        let Some(node) = str_at(&pod, "/spec/nodeName") else {
            continue;
        };
        if nodes.contains(node) {
            continue;
        }
        if deleting(&pod) && matches!(phase(&pod), "Succeeded" | "Failed") {
            // Force-deleted already, held by a finalizer until its owner
            // counts it.
            continue;
        }
        let (ns, name) = (ns_of(&pod).to_owned(), name_of(&pod).to_owned());
        store.modify("pods", &ns, &name, |p| {
            if !matches!(phase(p), "Succeeded" | "Failed") {
                p["status"]["phase"] = json!("Failed");
            }
            let c = condition(
                "DisruptionTarget",
                "DeletionByPodGC",
                "PodGC: node no longer exists",
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
        super::deletion::remove_pod(store, &ns, &name);
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

fn seconds_at(v: &Value, pointer: &str) -> Option<u64> {
    v.pointer(pointer).and_then(Value::as_u64)
}

/// The time `job` finished: its `Complete` or `Failed` condition's
/// `lastTransitionTime`, as the TTL-after-finished controller reads it.
fn finish_time(job: &Value) -> Option<SystemTime> {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| {
            matches!(
                c.get("type").and_then(Value::as_str),
                Some("Complete" | "Failed")
            ) && c.get("status").and_then(Value::as_str) == Some("True")
        })
        .and_then(|c| c.get("lastTransitionTime"))
        .and_then(Value::as_str)
        .and_then(parse_time)
}

fn condition_of<'a>(job: &'a Value, kind: &str) -> Option<&'a Value> {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| {
            c.get("type").and_then(Value::as_str) == Some(kind)
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
}

/// The Job controller's pass over one Job, as the real one (v1.32, with
/// `JobManagedBy` and `JobPodReplacementPolicy` on) behaves:
///
/// - a finished Job (`Complete` or `Failed`) is left alone, and removed
///   (foreground) `ttlSecondsAfterFinished` after it finished;
/// - a failed pod counts against `backoffLimit` as the Job's
///   `podFailurePolicy` says (see [`super::pod_failure_policy`]): not at
///   all (`Ignore`: a replacement is created), or it fails the Job at once
///   (`FailJob`: reason `PodFailurePolicy`); `status.failed` counts only
///   the counted ones, and, like `status.succeeded`, only grows: each pod
///   carries the `batch.kubernetes.io/job-tracking` finalizer, removed once
///   its end is counted, so a pod deleted later (PodGC, an eviction, a
///   user) is neither lost nor counted twice;
/// - a failure (a `FailJob` rule, `backoffLimit` exceeded, `activeDeadlineSeconds` passed
///   while not suspended) first adds `FailureTarget` and deletes the active
///   pods; `Failed`, with the same reason and message, follows once no pod
///   is left running or terminating; success adds `SuccessCriteriaMet`,
///   then `Complete` with `completionTime`;
/// - `spec.suspend` deletes the active pods and sets `Suspended`; while
///   suspended the deadline does not count, and resuming restarts it
///   (`startTime` is set again);
/// - otherwise a pod is created from the template, through admission; a
///   refusal is a `FailedCreate` event on the Job (`Error creating: …`),
///   and creation is tried again after a back-off of 1 s doubling up to
///   60 s; each pod created is a `SuccessfulCreate` event.
fn reconcile_job(store: &Store, job: &Value, pods: &[Value]) {
    let (ns, name) = (ns_of(job).to_owned(), name_of(job).to_owned());
    let now = SystemTime::now();
    if has_condition(job, "Complete") || has_condition(job, "Failed") {
        // A finished Job counts nothing more.
        for p in pods.iter().filter(|p| has_finalizer(p, JOB_TRACKING)) {
            remove_pod_finalizer(store, ns_of(p), name_of(p), JOB_TRACKING);
        }
        if let Some(ttl) = seconds_at(job, "/spec/ttlSecondsAfterFinished")
            && finish_time(job).is_some_and(|t| now >= t + Duration::from_secs(ttl))
        {
            let _ = delete(store, "jobs.batch", &ns, &name, "Foreground");
        }
        return;
    }
    let active: Vec<&Value> = pods
        .iter()
        .filter(|p| !deleting(p) && !matches!(phase(p), "Succeeded" | "Failed"))
        .collect();
    let terminating = pods
        .iter()
        .filter(|p| deleting(p) && !matches!(phase(p), "Succeeded" | "Failed"))
        .count();
    // The counters only grow: each pod's end is counted once, when the
    // pod is terminal and still carries the tracking finalizer, which then
    // goes; a pod deleted afterwards (by PodGC, an eviction, a user) takes
    // nothing back. Failed pods count against `backoffLimit` as the pod
    // failure policy says (terminal pods only: a pod still stopping is not
    // yet judged).
    let counted = |key: &str| seconds_at(job, &format!("/status/{key}")).unwrap_or(0) as usize;
    let mut succeeded = counted("succeeded");
    let mut failed = counted("failed");
    let mut fail_job: Option<String> = None;
    for p in pods.iter().filter(|p| has_finalizer(p, JOB_TRACKING)) {
        match phase(p) {
            "Succeeded" => succeeded += 1,
            "Failed" => match super::pod_failure_policy::match_pod(job, p) {
                Action::Ignore => {}
                Action::Count => failed += 1,
                Action::FailJob(message) => {
                    failed += 1;
                    fail_job.get_or_insert(message);
                }
            },
            _ => continue,
        }
        remove_pod_finalizer(store, ns_of(p), name_of(p), JOB_TRACKING);
    }
    let ready = active.iter().filter(|p| pod_ready(p)).count();
    let delete_active = || {
        for p in &active {
            let _ = delete(store, "pods", ns_of(p), name_of(p), "Background");
        }
    };
    let counters = |j: &mut Value, active_now: usize| {
        j["status"]["active"] = json!(active_now);
        j["status"]["ready"] = json!(if active_now == 0 { 0 } else { ready });
        j["status"]["terminating"] = json!(terminating);
        j["status"]["failed"] = json!(failed);
        j["status"]["succeeded"] = json!(succeeded);
    };

    // A decided outcome waits for the pods to be gone, then becomes final.
    if let Some(target) = condition_of(job, "FailureTarget").cloned() {
        delete_active();
        let gone = active.is_empty() && terminating == 0;
        store.modify("jobs.batch", &ns, &name, |j| {
            if gone {
                let text = |k: &str| {
                    target
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                };
                push_condition(j, condition("Failed", &text("reason"), &text("message")));
            }
            counters(j, 0);
        });
        return;
    }
    if condition_of(job, "SuccessCriteriaMet").is_some() {
        let gone = active.is_empty() && terminating == 0;
        store.modify("jobs.batch", &ns, &name, |j| {
            if gone {
                push_condition(
                    j,
                    condition(
                        "Complete",
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                    ),
                );
                j["status"]["completionTime"] = Value::String(now_rfc3339());
            }
            counters(j, active.len());
        });
        return;
    }

    let suspended = job.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
    let started = str_at(job, "/status/startTime").and_then(parse_time);
    let backoff = seconds_at(job, "/spec/backoffLimit").unwrap_or(6) as usize;
    let completions = seconds_at(job, "/spec/completions").unwrap_or(1) as usize;
    let past_deadline = !suspended
        && seconds_at(job, "/spec/activeDeadlineSeconds")
            .zip(started)
            .is_some_and(|(d, start)| now >= start + Duration::from_secs(d));
    let failure = if let Some(message) = fail_job {
        Some(("PodFailurePolicy", message))
    } else if failed > backoff {
        Some((
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit".to_owned(),
        ))
    } else if past_deadline {
        Some((
            "DeadlineExceeded",
            "Job was active longer than specified deadline".to_owned(),
        ))
    } else {
        None
    };
    if let Some((reason, message)) = failure {
        delete_active();
        store.modify("jobs.batch", &ns, &name, |j| {
            push_condition(j, condition("FailureTarget", reason, &message));
            counters(j, 0);
        });
        return;
    }
    if succeeded >= completions && active.is_empty() {
        store.modify("jobs.batch", &ns, &name, |j| {
            push_condition(
                j,
                condition(
                    "SuccessCriteriaMet",
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                ),
            );
            counters(j, 0);
        });
        return;
    }
    if suspended {
        delete_active();
        let newly = !has_condition(job, "Suspended");
        store.modify("jobs.batch", &ns, &name, |j| {
            if newly {
                set_condition(j, condition("Suspended", "JobSuspended", "Job suspended"));
            }
            counters(j, 0);
        });
        if newly {
            job_event(store, job, "Normal", "Suspended", "Job suspended");
        }
        return;
    }
    let resumed = has_condition(job, "Suspended");
    if resumed {
        job_event(store, job, "Normal", "Resumed", "Job resumed");
    }
    let mut active_now = active.len();
    if active.is_empty() && terminating == 0 && creation_due(store, job, now) {
        match create_pod(store, job) {
            Ok(pod) => {
                active_now = 1;
                let message = format!("Created pod: {}", name_of(&pod));
                job_event(store, job, "Normal", "SuccessfulCreate", &message);
            }
            Err(e) => {
                let message = format!("Error creating: {}", e.message);
                job_event(store, job, "Warning", "FailedCreate", &message);
            }
        }
    }
    store.modify("jobs.batch", &ns, &name, |j| {
        if started.is_none() || resumed {
            j["status"]["startTime"] = Value::String(now_rfc3339());
        }
        if resumed {
            let mut c = condition("Suspended", "JobResumed", "Job resumed");
            c["status"] = json!("False");
            set_condition(j, c);
        }
        counters(j, active_now);
    });
}

/// Whether the Job controller tries to create the Job's pod now: yes,
/// unless its last attempt was refused less than the back-off ago (1 s,
/// doubling with each refusal, at most 60 s).
fn creation_due(store: &Store, job: &Value, now: SystemTime) -> bool {
    let Some(event) = events::latest(store, job, "FailedCreate") else {
        return true;
    };
    let count = event.get("count").and_then(Value::as_u64).unwrap_or(1);
    let backoff =
        Duration::from_secs(1u64 << count.saturating_sub(1).min(6)).min(Duration::from_secs(60));
    let last = event
        .get("lastTimestamp")
        .and_then(Value::as_str)
        .and_then(parse_time);
    // The timestamp is whole seconds: the attempt was at most 1 s later.
    last.is_none_or(|t| now >= t + Duration::from_secs(1) + backoff)
}

fn job_event(store: &Store, job: &Value, kind: &str, reason: &str, message: &str) {
    events::record(
        store,
        job,
        events::Event {
            kind,
            reason,
            message,
            component: "job-controller",
        },
    );
}

/// Replace the condition of the same type, or add it.
fn set_condition(job: &mut Value, c: Value) {
    let kind = c.get("type").cloned();
    if let Some(Value::Array(cs)) = job.pointer_mut("/status/conditions")
        && let Some(existing) = cs.iter_mut().find(|x| x.get("type") == kind.as_ref())
    {
        *existing = c;
        return;
    }
    push_condition(job, c);
}

fn push_condition(job: &mut Value, c: Value) {
    let conditions = job["status"]
        .as_object_mut()
        .map(|s| s.entry("conditions").or_insert_with(|| json!([])));
    if let Some(Value::Array(cs)) = conditions {
        cs.push(c);
    }
}

/// Create the Job's pod from its template, as the controller does
/// (`generateName: {job}-`, the Job as its controlling owner), through the
/// pod admission plugins.
fn create_pod(store: &Store, job: &Value) -> Result<Value, ApiError> {
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
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": format!("{name}-"),
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
    pod["metadata"]["finalizers"] = json!([JOB_TRACKING]);
    store.admit(Write::Create, "pods", ns_of(job), &mut pod)?;
    store.create("pods", ns_of(job), pod)
}

/// Accept the names of each new CustomResourceDefinition and mark it
/// `Established`, as the apiextensions controllers do.
fn establish_crds(store: &Store) {
    for crd in store.all("customresourcedefinitions.apiextensions.k8s.io") {
        if crd.pointer("/status/acceptedNames").is_some() {
            continue;
        }
        let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
        let stored: Vec<Value> = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
            .filter_map(|v| v.get("name").cloned())
            .collect();
        let now = now_rfc3339();
        store.modify(
            "customresourcedefinitions.apiextensions.k8s.io",
            "",
            name_of(&crd),
            |c| {
                c["status"] = json!({
                    "acceptedNames": names,
                    "storedVersions": stored,
                    "conditions": [
                        {"type": "NamesAccepted", "status": "True", "lastTransitionTime": now,
                         "reason": "NoConflicts", "message": "no conflicts found"},
                        {"type": "Established", "status": "True", "lastTransitionTime": now,
                         "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
                    ],
                });
            },
        );
    }
}

/// Give every namespace its `default` service account, as the service
/// account controller does.
pub(crate) fn default_service_accounts(store: &Store) {
    for ns in store.all("namespaces") {
        let name = name_of(&ns);
        if deleting(&ns) || store.get("serviceaccounts", name, "default").is_ok() {
            continue;
        }
        let _ = store.create(
            "serviceaccounts",
            name,
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
        );
    }
}
