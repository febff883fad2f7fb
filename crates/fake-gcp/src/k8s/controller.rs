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
use super::indexes::Intervals;
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
    // A succeeded pod the controller counted already (its tracking
    // finalizer gone) and nobody deletes counts for nothing more: its
    // index is in `completedIndexes`, its success in `succeeded`, as the
    // real controller reads them from the Job's status. Failed pods stay
    // (a replacement's index failure count comes from them).
    let pods = store.all_where("pods", |p| {
        phase(p) != "Succeeded" || deleting(p) || has_finalizer(p, JOB_TRACKING)
    });
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
    let orphaned = store.all_where("pods", |p| {
        str_at(p, "/spec/nodeName").is_some_and(|node| !nodes.contains(node))
    });
    for pod in orphaned {
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
///
/// Only the objects it acts on are copied (an orphan, an object being
/// deleted and its dependents), not every pod and event of the cluster on
/// each pass.
fn collect_garbage(store: &Store) {
    let uids: BTreeSet<String> = OWNED.iter().flat_map(|r| store.uids(r)).collect();
    let orphaned = |v: &Value| {
        let owners = owner_uids(v);
        !owners.is_empty() && !owners.iter().any(|u| uids.contains(u))
    };
    let mut orphans: Vec<(&str, Value)> = Vec::new();
    for r in OWNED {
        orphans.extend(store.all_where(r, orphaned).into_iter().map(|v| (*r, v)));
    }
    for (resource, object) in &orphans {
        let _ = delete(
            store,
            resource,
            ns_of(object),
            name_of(object),
            "Background",
        );
    }
    let mut going: Vec<(&str, Value)> = Vec::new();
    for r in OWNED.iter().filter(|r| **r != "pods") {
        going.extend(store.all_where(r, deleting).into_iter().map(|v| (*r, v)));
    }
    for (resource, object) in &going {
        let uid = uid_of(object);
        let mut dependents: Vec<(&str, Value)> = Vec::new();
        for r in OWNED {
            dependents.extend(
                store
                    .all_where(r, |d| owner_uids(d).iter().any(|u| u == uid))
                    .into_iter()
                    .map(|v| (*r, v)),
            );
        }
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
///   60 s; each pod created is a `SuccessfulCreate` event;
/// - an Indexed Job (`completionMode: Indexed`) runs a pod per pending
///   index instead, up to `parallelism` (see [`Indexed::manage`]):
///   `status.succeeded` is the number of `status.completedIndexes`;
///   with `backoffLimitPerIndex` an index fails past its limit or on a
///   `FailIndex` rule (`status.failedIndexes`), `backoffLimit` defaults to
///   no limit, and the Job fails with `MaxFailedIndexesExceeded` or
///   `FailedIndexes` (after the reasons above); success deletes any pod
///   still running.
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
    let mut indexed = Indexed::of(job);
    let (mut new_succeeded, mut new_failed) = (Vec::new(), Vec::new());
    for p in pods.iter().filter(|p| has_finalizer(p, JOB_TRACKING)) {
        match phase(p) {
            "Succeeded" if indexed.is_some() => new_succeeded.extend(completion_index(p)),
            "Succeeded" => succeeded += 1,
            "Failed" => {
                let action = super::pod_failure_policy::match_pod(job, p);
                if let Some(ix) = &indexed
                    && ix.delays(job, p, &action, pods)
                {
                    // Counted once its replacement exists.
                    continue;
                }
                match action {
                    Action::Ignore => {}
                    Action::Count => {
                        failed += 1;
                        if let Some(ix) = &indexed
                            && ix
                                .per_index
                                .is_some_and(|limit| failure_counts(p).0 >= limit)
                        {
                            new_failed.extend(completion_index(p));
                        }
                    }
                    Action::FailIndex => {
                        failed += 1;
                        if indexed.as_ref().is_some_and(|ix| ix.per_index.is_some()) {
                            new_failed.extend(completion_index(p));
                        }
                    }
                    Action::FailJob(message) => {
                        failed += 1;
                        fail_job.get_or_insert(message);
                    }
                }
            }
            _ => continue,
        }
        remove_pod_finalizer(store, ns_of(p), name_of(p), JOB_TRACKING);
    }
    if let Some(ix) = &mut indexed {
        let within = |i: &usize| *i < ix.completions;
        ix.succeeded = ix.succeeded.with(new_succeeded.into_iter().filter(within));
        ix.failed = ix.failed.with(new_failed.into_iter().filter(within));
        succeeded = ix.succeeded.total();
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
        if let Some(ix) = &indexed {
            ix.write(j);
        }
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
    // `SetDefaults_Job`: 6, or no limit (MaxInt32) beside a per-index one.
    let default_backoff = match indexed.as_ref().and_then(|ix| ix.per_index) {
        Some(_) => i32::MAX as u64,
        None => 6,
    };
    let backoff = seconds_at(job, "/spec/backoffLimit").unwrap_or(default_backoff) as usize;
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
        indexed.as_ref().and_then(Indexed::failure)
    };
    if let Some((reason, message)) = failure {
        delete_active();
        store.modify("jobs.batch", &ns, &name, |j| {
            push_condition(j, condition("FailureTarget", reason, &message));
            counters(j, 0);
        });
        return;
    }
    let every_index_succeeded = indexed
        .as_ref()
        .is_some_and(|ix| succeeded >= ix.completions);
    if every_index_succeeded || (succeeded >= completions && active.is_empty()) {
        if every_index_succeeded {
            // Pods still running (of indexes that succeeded twice) go,
            // and `Complete` waits for them.
            delete_active();
        }
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
    if let Some(ix) = &indexed {
        active_now = ix.manage(store, job, pods, now);
    } else if active.is_empty() && terminating == 0 && creation_due(store, job, now) {
        match create_pod(store, job, None) {
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

/// What an Indexed Job's pod carries beyond its template: its completion
/// index and, with `backoffLimitPerIndex`, the failures of its index so
/// far (counted, ignored by the pod failure policy).
struct PodIndex {
    index: usize,
    failures: Option<(usize, usize)>,
}

/// Create the Job's pod from its template, as the controller does
/// (`generateName: {job}-`, the Job as its controlling owner), through the
/// pod admission plugins. An Indexed Job's pod is `{job}-{index}-…`, with
/// hostname `{job}-{index}`, the index as annotation and label
/// `batch.kubernetes.io/job-completion-index`, `JOB_COMPLETION_INDEX` in
/// each container's and init container's environment (from that label,
/// through the downward API), and the index's failure counts as
/// annotations.
fn create_pod(store: &Store, job: &Value, index: Option<PodIndex>) -> Result<Value, ApiError> {
    let name = name_of(job);
    let uid = uid_of(job);
    let mut template = job.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let mut generate_name = format!("{name}-");
    if let Some(ix) = &index {
        let i = ix.index.to_string();
        template["metadata"]["annotations"][COMPLETION_INDEX] = json!(i);
        template["metadata"]["labels"][COMPLETION_INDEX] = json!(i);
        if let Some((counted, ignored)) = ix.failures {
            let annotations = &mut template["metadata"]["annotations"];
            annotations[INDEX_FAILURE_COUNT] = json!(counted.to_string());
            if ignored > 0 {
                annotations[INDEX_IGNORED_FAILURE_COUNT] = json!(ignored.to_string());
            }
        }
        template["spec"]["hostname"] = json!(format!("{name}-{i}"));
        for list in ["initContainers", "containers"] {
            if let Some(Value::Array(cs)) = template.pointer_mut(&format!("/spec/{list}")) {
                for c in cs {
                    add_index_env(c);
                }
            }
        }
        generate_name = generate_name_with_index(name, ix.index);
    }
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
            "generateName": generate_name,
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

/// The annotation (and label) with a pod's completion index.
const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// The annotation with the failures of a pod's index before it, counted
/// against `backoffLimitPerIndex`.
const INDEX_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-failure-count";
/// The annotation with the failures of a pod's index before it that the
/// pod failure policy ignored (absent when none).
const INDEX_IGNORED_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-ignored-failure-count";
/// The longest `generateName` the API server extends (`names.MaxGeneratedNameLength`).
const MAX_GENERATED_NAME: usize = 58;

/// `{job}-{index}-`, the job's name cut so that it fits
/// [`MAX_GENERATED_NAME`] (`podGenerateNameWithIndex`).
fn generate_name_with_index(job: &str, index: usize) -> String {
    let suffix = format!("-{index}-");
    let whole = format!("{job}{suffix}");
    if whole.len() <= MAX_GENERATED_NAME {
        return whole;
    }
    let keep = MAX_GENERATED_NAME - suffix.len();
    format!("{}{suffix}", &whole[..keep])
}

/// Add `JOB_COMPLETION_INDEX` to a container's environment unless it has
/// one (`addCompletionIndexEnvVariable`, `PodIndexLabel` on: from the
/// label).
fn add_index_env(container: &mut Value) {
    let env = container
        .as_object_mut()
        .map(|c| c.entry("env").or_insert_with(|| json!([])));
    let Some(Value::Array(env)) = env else { return };
    if env.iter().any(|e| e["name"] == "JOB_COMPLETION_INDEX") {
        return;
    }
    env.push(json!({
        "name": "JOB_COMPLETION_INDEX",
        "valueFrom": {"fieldRef": {"fieldPath": format!("metadata.labels['{COMPLETION_INDEX}']")}},
    }));
}

/// A pod's completion index, from its annotation (`getCompletionIndex`).
fn completion_index(pod: &Value) -> Option<usize> {
    str_at(
        pod,
        &format!(
            "/metadata/annotations/{}",
            COMPLETION_INDEX.replace('/', "~1")
        ),
    )?
    .parse()
    .ok()
}

/// A pod's `(counted, ignored)` failures of its index before it, from its
/// annotations (0 when absent or malformed).
fn failure_counts(pod: &Value) -> (usize, usize) {
    let read = |key: &str| {
        str_at(
            pod,
            &format!("/metadata/annotations/{}", key.replace('/', "~1")),
        )
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
    };
    (read(INDEX_FAILURE_COUNT), read(INDEX_IGNORED_FAILURE_COUNT))
}

/// An Indexed Job's (`completionMode: Indexed`) state in one pass of the
/// controller: its spec's limits and the indexes counted so far (from its
/// status, then with this pass's terminal pods).
struct Indexed {
    completions: usize,
    parallelism: usize,
    /// `backoffLimitPerIndex`.
    per_index: Option<usize>,
    max_failed: Option<usize>,
    succeeded: Intervals,
    failed: Intervals,
}

impl Indexed {
    /// The Job's indexed state, or `None` for a NonIndexed Job.
    fn of(job: &Value) -> Option<Indexed> {
        if str_at(job, "/spec/completionMode") != Some("Indexed") {
            return None;
        }
        let completions = seconds_at(job, "/spec/completions").unwrap_or(0) as usize;
        let indexes = |key: &str| {
            Intervals::parse(
                str_at(job, &format!("/status/{key}")).unwrap_or(""),
                completions,
            )
        };
        Some(Indexed {
            completions,
            parallelism: seconds_at(job, "/spec/parallelism").unwrap_or(1) as usize,
            per_index: seconds_at(job, "/spec/backoffLimitPerIndex").map(|v| v as usize),
            max_failed: seconds_at(job, "/spec/maxFailedIndexes").map(|v| v as usize),
            succeeded: indexes("completedIndexes"),
            failed: indexes("failedIndexes"),
        })
    }

    /// Whether the count of failed `pod` waits (its tracking finalizer
    /// kept) until its index's replacement exists, so that the
    /// replacement's failure counts build on it even if the pod is deleted
    /// meanwhile (`podsWithDelayedDeletionPerIndex`): with
    /// `backoffLimitPerIndex`, for the latest failed pod of an index that
    /// is to be retried, while the Job is not finishing.
    fn delays(&self, job: &Value, pod: &Value, action: &Action, pods: &[Value]) -> bool {
        let Some(limit) = self.per_index else {
            return false;
        };
        let Some(index) = completion_index(pod).filter(|i| *i < self.completions) else {
            return false;
        };
        let ends_index = match action {
            Action::Count => failure_counts(pod).0 >= limit,
            Action::FailIndex | Action::FailJob(_) => true,
            Action::Ignore => false,
        };
        if ends_index
            || condition_of(job, "FailureTarget").is_some()
            || self.succeeded.has(index)
            || self.failed.has(index)
        {
            return false;
        }
        let tries = |p: &Value| {
            let (counted, ignored) = failure_counts(p);
            counted + ignored
        };
        let superseded = pods.iter().any(|q| {
            uid_of(q) != uid_of(pod)
                && completion_index(q) == Some(index)
                && (tries(q) > tries(pod) || phase(q) == "Succeeded")
        });
        !superseded
    }

    /// The Job's failure from its indexes, if any: more failed indexes
    /// than `maxFailedIndexes` (at once), or every index done and some
    /// failed.
    fn failure(&self) -> Option<(&'static str, String)> {
        self.per_index?;
        let failed = self.failed.total();
        if self.max_failed.is_some_and(|m| failed > m) {
            return Some((
                "MaxFailedIndexesExceeded",
                "Job has exceeded the specified maximal number of failed indexes".to_owned(),
            ));
        }
        if failed > 0 && failed + self.succeeded.total() >= self.completions {
            return Some(("FailedIndexes", "Job has failed indexes".to_owned()));
        }
        None
    }

    /// Write the index sets into the Job's status: `completedIndexes`
    /// (omitted while empty) and, with `backoffLimitPerIndex`,
    /// `failedIndexes` (`""` while none).
    fn write(&self, job: &mut Value) {
        let completed = self.succeeded.to_string();
        if let Some(status) = job["status"].as_object_mut() {
            if completed.is_empty() {
                status.remove("completedIndexes");
            } else {
                status.insert("completedIndexes".to_owned(), json!(completed));
            }
            if self.per_index.is_some() {
                status.insert("failedIndexes".to_owned(), json!(self.failed.to_string()));
            }
        }
    }

    /// The failure counts the replacement of `index` starts with: those of
    /// the index's latest failed pod, plus that pod's own failure, counted
    /// or ignored as the pod failure policy says (`getNewIndexFailureCounts`).
    fn failures_for(&self, job: &Value, index: usize, pods: &[Value]) -> Option<(usize, usize)> {
        self.per_index?;
        let latest = pods
            .iter()
            .filter(|p| phase(p) == "Failed" && completion_index(p) == Some(index))
            .max_by_key(|p| {
                let (c, i) = failure_counts(p);
                c + i
            });
        let Some(pod) = latest else {
            return Some((0, 0));
        };
        let (counted, ignored) = failure_counts(pod);
        Some(match super::pod_failure_policy::match_pod(job, pod) {
            Action::Ignore => (counted, ignored + 1),
            _ => (counted + 1, ignored),
        })
    }

    /// `manageJob` for an Indexed Job: delete the active pods of an index
    /// that is done, out of range or taken twice, then those beyond
    /// `min(parallelism, indexes left)` (not ready first, highest index
    /// first); then create pods for the lowest pending indexes (neither
    /// succeeded, failed, active nor held by a pod still terminating) up
    /// to that number. Returns the active pods left.
    fn manage(&self, store: &Store, job: &Value, pods: &[Value], now: SystemTime) -> usize {
        let want = self
            .parallelism
            .min(self.completions.saturating_sub(self.succeeded.total()));
        let mut keep: Vec<(&Value, usize)> = Vec::new();
        let mut remove: Vec<&Value> = Vec::new();
        let mut active: Vec<&Value> = pods
            .iter()
            .filter(|p| !deleting(p) && !matches!(phase(p), "Succeeded" | "Failed"))
            .collect();
        active.sort_by_key(|p| completion_index(p));
        for p in active {
            match completion_index(p) {
                Some(i)
                    if i < self.completions
                        && !self.succeeded.has(i)
                        && !self.failed.has(i)
                        && keep.last().is_none_or(|(_, last)| *last != i) =>
                {
                    keep.push((p, i))
                }
                _ => remove.push(p),
            }
        }
        if keep.len() > want {
            keep.sort_by_key(|(p, i)| (pod_ready(p), std::cmp::Reverse(*i)));
            let extra = keep.len() - want;
            remove.extend(keep.drain(..extra).map(|(p, _)| p));
        }
        for p in remove {
            let _ = delete(store, "pods", ns_of(p), name_of(p), "Background");
        }
        let terminating: Vec<usize> = pods
            .iter()
            .filter(|p| deleting(p) && !matches!(phase(p), "Succeeded" | "Failed"))
            .filter_map(completion_index)
            .collect();
        let busy = Intervals::default().with(
            keep.iter()
                .map(|(_, i)| *i)
                .chain(terminating.iter().copied()),
        );
        let room = want.saturating_sub(keep.len() + terminating.len());
        let mut active_now = keep.len();
        if room == 0 || !creation_due(store, job, now) {
            return active_now;
        }
        let pending =
            self.succeeded
                .merged(&self.failed)
                .first_missing(&busy, room, self.completions);
        for index in pending {
            let failures = self.failures_for(job, index, pods);
            match create_pod(store, job, Some(PodIndex { index, failures })) {
                Ok(pod) => {
                    active_now += 1;
                    let message = format!("Created pod: {}", name_of(&pod));
                    job_event(store, job, "Normal", "SuccessfulCreate", &message);
                }
                Err(e) => {
                    let message = format!("Error creating: {}", e.message);
                    job_event(store, job, "Warning", "FailedCreate", &message);
                    break;
                }
            }
        }
        active_now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_indexed_pods_generate_name_keeps_its_index_within_58_characters() {
        assert_eq!(generate_name_with_index("job", 7), "job-7-");
        let long = "j".repeat(60);
        let cut = generate_name_with_index(&long, 12345);
        assert_eq!(cut.len(), MAX_GENERATED_NAME);
        assert!(cut.ends_with("j-12345-"), "{cut}");
    }

    #[test]
    fn the_index_variable_is_added_once_and_a_containers_own_wins() {
        let mut plain = json!({"name": "c"});
        add_index_env(&mut plain);
        add_index_env(&mut plain);
        assert_eq!(
            plain["env"],
            json!([{"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                "fieldPath": "metadata.labels['batch.kubernetes.io/job-completion-index']"}}}])
        );
        let mut own = json!({"name": "c", "env": [{"name": "JOB_COMPLETION_INDEX", "value": "9"}]});
        add_index_env(&mut own);
        assert_eq!(
            own["env"],
            json!([{"name": "JOB_COMPLETION_INDEX", "value": "9"}])
        );
    }
}
