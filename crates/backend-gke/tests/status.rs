//! Job + pods → state: every status and typed reason, from JSON objects as
//! the API server returns them.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kinetic_backend_gke::status::{job_state, job_state_with_events, needs_pods};
use kinetic_core::status::{JobState, JobStatus, StatusReason};
use serde_json::{Value, json};

const CREATED: &str = "2026-03-25T10:00:00Z";

fn at(secs_after_created: u64) -> SystemTime {
    humantime::parse_rfc3339(CREATED).unwrap() + Duration::from_secs(secs_after_created)
}

fn job(status: Value) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "kinetic-job-0a1b2c3d", "namespace": "default", "creationTimestamp": CREATED,
                     "annotations": {"kinetic.dev/pending-deadline-seconds": "60"}},
        "spec": {"backoffLimit": 0, "template": {"spec": {"containers": []}}},
        "status": status,
    }))
    .unwrap()
}

fn pod(status: Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "kinetic-job-0a1b2c3d-abcde", "namespace": "default", "creationTimestamp": CREATED},
        "spec": {"containers": [{"name": "kinetic-worker", "image": "img"}],
                 "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"}},
        "status": status,
    }))
    .unwrap()
}

fn failed_job() -> Job {
    job(
        json!({"failed": 1, "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}),
    )
}

fn waiting(reason: &str, message: &str) -> Value {
    json!({"phase": "Pending", "containerStatuses": [{"name": "kinetic-worker", "image": "us-docker.pkg.dev/p/r/img:tag",
           "imageID": "", "ready": false, "restartCount": 0,
           "state": {"waiting": {"reason": reason, "message": message}}}]})
}

fn terminated(reason: &str, code: i32) -> Value {
    json!({"phase": "Failed", "containerStatuses": [{"name": "kinetic-worker", "image": "img", "imageID": "",
           "ready": false, "restartCount": 0,
           "state": {"terminated": {"exitCode": code, "reason": reason}}}]})
}

#[test]
fn succeeded_and_running() {
    let done = job(json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}));
    assert_eq!(
        job_state(&done, &[], at(5)),
        JobState::new(JobStatus::Succeeded)
    );
    assert!(!needs_pods(&done));
    let active = job(json!({"active": 1, "ready": 0}));
    let running = pod(json!({"phase": "Running"}));
    assert_eq!(
        job_state(&active, &[running], at(5)).status,
        JobStatus::Running
    );
    assert!(needs_pods(&active));
    let ready = job(json!({"active": 1, "ready": 1}));
    assert!(!needs_pods(&ready), "a ready job needs no pod LIST");
    assert_eq!(job_state(&ready, &[], at(5)).status, JobStatus::Running);
    assert_eq!(
        job_state(&active, &[], at(5)),
        JobState::new(JobStatus::Pending)
    );
}

#[test]
fn failures_carry_their_reason() {
    let j = failed_job();
    assert!(needs_pods(&j), "the reason of a failure lives on its pod");
    let cases = [
        (terminated("OOMKilled", 137), StatusReason::OomKilled),
        (terminated("Error", 3), StatusReason::ExitCode { code: 3 }),
        (
            json!({"phase": "Failed", "reason": "Terminated", "message": "Pod was terminated in response to imminent node shutdown.",
                   "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}]}),
            StatusReason::Preempted,
        ),
        (
            json!({"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory.",
                   "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}]}),
            StatusReason::Evicted {
                message: "The node was low on resource: memory.".into(),
            },
        ),
        (
            json!({"phase": "Failed", "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"}]}),
            StatusReason::Evicted {
                message: "Eviction API: evicting".into(),
            },
        ),
    ];
    for (p, want) in cases {
        let state = job_state(&j, &[pod(p)], at(5));
        assert_eq!(state, JobState::new(JobStatus::Failed).with_reason(want));
    }
    let deadline = job(
        json!({"failed": 1, "conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]}),
    );
    assert!(!needs_pods(&deadline));
    assert_eq!(
        job_state(&deadline, &[], at(5)),
        JobState::new(JobStatus::Failed).with_reason(StatusReason::DeadlineExceeded)
    );
}

#[test]
fn pending_reasons() {
    let j = job(json!({"active": 1}));
    let unschedulable = pod(
        json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."}]}),
    );
    let state = job_state(&j, &[unschedulable], at(5));
    let Some(StatusReason::Unschedulable { message }) = &state.reason else {
        panic!("{state:?}")
    };
    assert!(
        message.contains("no node offers this accelerator yet"),
        "{message}"
    );
    assert!(
        message.contains("cloud.google.com/gke-accelerator=nvidia-l4"),
        "{message}"
    );
    assert!(message.contains("0/3 nodes are available"), "{message}");
    // The pool to add is named whole: `kinetic pool add` with its accelerator.
    assert!(
        message.contains("add one with `kinetic pool add --accelerator l4"),
        "{message}"
    );
    assert!(state.is_blocked());

    let quota = pod(
        json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}]}),
    );
    let Some(StatusReason::Unschedulable { message }) = job_state(&j, &[quota], at(5)).reason
    else {
        panic!()
    };
    assert!(
        message.starts_with("not enough free nvidia.com/gpu"),
        "{message}"
    );

    for reason in ["ErrImagePull", "ImagePullBackOff", "InvalidImageName"] {
        let state = job_state(&j, &[pod(waiting(reason, "not found"))], at(5));
        assert_eq!(
            state,
            JobState::new(JobStatus::Pending).with_reason(StatusReason::ImagePullError {
                image: "us-docker.pkg.dev/p/r/img:tag".into(),
                reason: reason.into(),
                message: "not found".into(),
            })
        );
    }
    let state = job_state(
        &j,
        &[pod(waiting(
            "CreateContainerConfigError",
            "secret \"x\" not found",
        ))],
        at(5),
    );
    assert!(
        matches!(
            state.reason,
            Some(StatusReason::ContainerConfigError { .. })
        ),
        "{state:?}"
    );
    let state = job_state(&j, &[pod(waiting("ContainerCreating", ""))], at(5));
    assert_eq!(state.reason, Some(StatusReason::ContainerCreating));
    assert!(!state.is_blocked());
}

#[test]
fn a_blocked_job_fails_after_its_pending_deadline() {
    let j = job(json!({"active": 1}));
    let p = pod(waiting("ImagePullBackOff", "Back-off pulling image"));
    assert_eq!(
        job_state(&j, std::slice::from_ref(&p), at(60)).status,
        JobStatus::Pending
    );
    let state = job_state(&j, &[p], at(61));
    assert_eq!(state.status, JobStatus::Failed);
    let Some(StatusReason::PendingDeadlineExceeded { waited, cause }) = &state.reason else {
        panic!("{state:?}")
    };
    assert_eq!(*waited, Duration::from_secs(61));
    assert!(matches!(
        cause.as_deref(),
        Some(StatusReason::ImagePullError { .. })
    ));
    // A slow but not blocked start is left alone.
    let slow = pod(waiting("ContainerCreating", ""));
    assert_eq!(job_state(&j, &[slow], at(600)).status, JobStatus::Pending);
}

fn job_event(
    uid: &str,
    reason: &str,
    message: &str,
    at: &str,
) -> k8s_openapi::api::core::v1::Event {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("kinetic-job-0a1b2c3d.{reason}"), "namespace": "default"},
        "involvedObject": {"kind": "Job", "name": "kinetic-job-0a1b2c3d", "namespace": "default",
                           "uid": uid, "apiVersion": "batch/v1"},
        "reason": reason, "message": message, "type": "Warning",
        "source": {"component": "job-controller"},
        "firstTimestamp": at, "lastTimestamp": at, "count": 1,
    }))
    .unwrap()
}

#[test]
fn a_job_whose_pod_is_refused_is_blocked_and_fails_after_its_pending_deadline() {
    let mut j = job(json!({"active": 0, "startTime": CREATED}));
    j.metadata.uid = Some("uid-1".into());
    let refused = "Error creating: pods \"kinetic-job-0a1b2c3d-x\" is forbidden: error looking up service account default/kinetic: serviceaccount \"kinetic\" not found";
    let events = [
        job_event("uid-1", "FailedCreate", refused, "2026-03-25T10:00:01Z"),
        // Another Job's success says nothing about this one.
        job_event(
            "uid-2",
            "SuccessfulCreate",
            "Created pod: p",
            "2026-03-25T10:00:02Z",
        ),
    ];
    // Without its events the job is pending for no known reason.
    assert_eq!(job_state(&j, &[], at(5)), JobState::new(JobStatus::Pending));
    let state = job_state_with_events(&j, &[], &events, at(5));
    assert_eq!(state.status, JobStatus::Pending);
    assert_eq!(
        state.reason,
        Some(StatusReason::PodCreationFailed {
            message: refused.to_owned()
        })
    );
    assert!(state.is_blocked());
    let state = job_state_with_events(&j, &[], &events, at(61));
    assert_eq!(state.status, JobStatus::Failed);
    assert!(
        matches!(&state.reason, Some(StatusReason::PendingDeadlineExceeded { cause: Some(c), .. }) if matches!(**c, StatusReason::PodCreationFailed { .. })),
        "{state:?}"
    );
    // Created after all: the refusal is history.
    let later = job_event(
        "uid-1",
        "SuccessfulCreate",
        "Created pod: p",
        "2026-03-25T10:00:09Z",
    );
    let events = [events[0].clone(), later];
    assert_eq!(
        job_state_with_events(&j, &[], &events, at(10)),
        JobState::new(JobStatus::Pending)
    );
}

#[test]
fn a_final_state_written_by_the_backend_wins() {
    let mut j = job(json!({"active": 1, "ready": 1}));
    let cancelled = JobState::new(JobStatus::Failed).with_reason(StatusReason::Cancelled);
    j.metadata.annotations.as_mut().unwrap().insert(
        "kinetic.dev/final-state".into(),
        serde_json::to_string(&cancelled).unwrap(),
    );
    assert_eq!(
        job_state(&j, &[pod(json!({"phase": "Running"}))], at(1)),
        cancelled
    );
    assert!(!needs_pods(&j));
}

/// A Job with failure budgets (`retries` in `backoffLimit`, `restarts` in
/// its annotation) and pods named `-a`, `-b`, … created a minute apart.
fn budgeted(retries: i32, restarts: u32, pod_statuses: &[Value]) -> (Job, Vec<Pod>) {
    let mut j = job(json!({"active": 1}));
    j.spec.as_mut().unwrap().backoff_limit = Some(retries);
    j.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert("kinetic.dev/restarts".into(), restarts.to_string());
    let pods = pod_statuses
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut p = pod(s.clone());
            p.metadata.name = Some(format!("kinetic-job-0a1b2c3d-{}", (b'a' + i as u8) as char));
            p.metadata.creation_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    format!("2026-03-25T10:0{i}:00Z").parse().unwrap(),
                ));
            p
        })
        .collect();
    (j, pods)
}

fn preempted_pod() -> Value {
    let mut s = terminated("Error", 137);
    s["conditions"] =
        json!([{"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}]);
    s
}

fn running_pod() -> Value {
    json!({"phase": "Running", "startTime": CREATED, "containerStatuses": [{"name": "kinetic-worker", "image": "img",
           "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {"startedAt": CREATED}}}]})
}

#[test]
fn a_replacement_after_a_preemption_says_which_attempt_it_is() {
    let (j, pods) = budgeted(0, 3, &[preempted_pod(), running_pod()]);
    assert!(needs_pods(&j), "a budgeted Job's pods are its attempts");
    let state = job_state(&j, &pods, at(120));
    assert_eq!(state.status, JobStatus::Running);
    assert_eq!(
        state.reason.as_ref().unwrap().to_string(),
        "preempted, restarting (attempt 2 of 4)"
    );
    let outcomes: Vec<_> = state.attempts.iter().map(|a| a.outcome).collect();
    assert_eq!(
        outcomes,
        [Some(kinetic_core::budget::Outcome::Preempted), None]
    );
    assert_eq!(state.attempts[0].host, "kinetic-job-0a1b2c3d-a");
    assert_eq!(state.attempts[1].number, 2);
}

#[test]
fn preemptions_past_the_budget_fail_the_job_whatever_runs_next() {
    let (j, pods) = budgeted(0, 1, &[preempted_pod(), preempted_pod(), running_pod()]);
    let state = job_state(&j, &pods, at(180));
    assert_eq!(state.status, JobStatus::Failed);
    assert_eq!(
        state.reason,
        Some(StatusReason::RestartsSpent {
            after: kinetic_core::budget::Outcome::Preempted,
            times: 2,
            budget: 1
        })
    );
    // Within the budget, the same history keeps running.
    let (j, pods) = budgeted(0, 2, &[preempted_pod(), preempted_pod(), running_pod()]);
    assert_eq!(job_state(&j, &pods, at(180)).status, JobStatus::Running);
}

#[test]
fn an_application_retry_says_so_and_a_job_without_budgets_is_unchanged() {
    let (j, pods) = budgeted(1, 0, &[terminated("Error", 1), running_pod()]);
    let state = job_state(&j, &pods, at(120));
    assert_eq!(
        state.reason.unwrap().to_string(),
        "failed, retrying (attempt 2 of 2)"
    );
    // No annotation: Kinetic's Job, no attempts reported.
    let plain = job(json!({"active": 1}));
    let state = job_state(&plain, &[pod(running_pod())], at(10));
    assert_eq!(state, JobState::new(JobStatus::Running));
}

#[test]
fn attempts_in_the_same_second_are_ordered_as_a_job_replaces_its_pods() {
    // The API lists pods by name, and timestamps have whole seconds: the
    // pod that succeeded may come first in the list though it replaced
    // the one that failed within the same second.
    let done = json!({"phase": "Succeeded", "startTime": CREATED, "containerStatuses": [{"name": "kinetic-worker",
        "image": "img", "imageID": "", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": CREATED}}}]});
    let mut failed = terminated("Error", 1);
    failed["startTime"] = json!(CREATED);
    failed["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = json!(CREATED);
    let (_, mut pods) = budgeted(1, 0, &[done, failed]);
    let same = pods[0].metadata.creation_timestamp.clone();
    pods[1].metadata.creation_timestamp = same;
    let attempts = kinetic_kube::status::pod_attempts(&pods);
    let outcomes: Vec<_> = attempts.iter().map(|a| a.outcome).collect();
    assert_eq!(
        outcomes,
        [
            Some(kinetic_core::budget::Outcome::Failed),
            Some(kinetic_core::budget::Outcome::Succeeded)
        ]
    );
    assert_eq!(attempts[0].host, "kinetic-job-0a1b2c3d-b");
    assert_eq!(attempts[1].number, 2);
}

/// Issue 24 point 8: a pod the kubelet took (`startTime` set) that is
/// still Pending (pulling its image) is a pending attempt, not a running
/// one; once its container runs it is running.
#[test]
fn an_attempt_whose_pod_is_still_pending_is_shown_pending() {
    let pulling = pod(json!({"phase": "Pending", "startTime": CREATED,
        "containerStatuses": [{"name": "kinetic-worker", "image": "img", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}]}));
    let attempts = kinetic_kube::status::pod_attempts(&[pulling]);
    assert_eq!(attempts[0].started, None);
    assert_eq!(
        attempts[0].to_string(),
        "attempt 1 on kinetic-job-0a1b2c3d-abcde: pending"
    );
    let running = pod(json!({"phase": "Running", "startTime": CREATED,
        "containerStatuses": [{"name": "kinetic-worker", "image": "img", "imageID": "", "ready": true,
            "restartCount": 0, "state": {"running": {"startedAt": CREATED}}}]}));
    let attempts = kinetic_kube::status::pod_attempts(&[running]);
    assert!(
        attempts[0]
            .to_string()
            .starts_with("attempt 1 on kinetic-job-0a1b2c3d-abcde: running, started "),
        "{}",
        attempts[0]
    );
}

/// Issue 24 point 6: a `cpu:spot` job cannot run on the default pool (it is
/// on-demand): the hint names the pool that fits. Without a word from the
/// cluster autoscaler, the scheduler's message is the same whether no
/// pool fits or one is at 0 nodes: the hint says the autoscaler has not
/// said yet, and what to add if `kinetic pool list` shows no pool.
#[test]
fn the_unschedulable_hint_fits_cpu_spot_and_pools_at_zero() {
    let message = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.";
    let spot = std::collections::BTreeMap::from([(
        "cloud.google.com/gke-spot".to_owned(),
        "true".to_owned(),
    )]);
    let hint = kinetic_kube::status::explain_unschedulable(message, &spot);
    assert!(
        hint.contains(
            "`kinetic pool add --accelerator cpu --spot` (the default pool is on-demand)"
        ),
        "{hint}"
    );
    assert!(
        hint.contains("the cluster autoscaler has not said yet whether a node pool can add one: if `kinetic pool list` shows no pool for it, add one with"),
        "{hint}"
    );
}

const UNSCHEDULABLE: &str =
    "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.";

/// A pending L4 pod (uid `pod-uid`) the scheduler could not place.
fn unplaced_pod() -> Pod {
    let mut p = pod(
        json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
               "reason": "Unschedulable", "message": UNSCHEDULABLE}]}),
    );
    p.metadata.uid = Some("pod-uid".into());
    p
}

/// An event of the cluster autoscaler about the pod, at `at` seconds.
fn autoscaler_event(reason: &str, message: &str, at: u64) -> k8s_openapi::api::core::v1::Event {
    let when = humantime::format_rfc3339_seconds(self::at(at)).to_string();
    serde_json::from_value(json!({
        "metadata": {"name": format!("kinetic-job-0a1b2c3d-abcde.{at}"), "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "kinetic-job-0a1b2c3d-abcde", "namespace": "default",
                           "uid": "pod-uid"},
        "reason": reason, "message": message, "type": "Normal",
        "source": {"component": "cluster-autoscaler"},
        "firstTimestamp": when, "lastTimestamp": when, "count": 1,
    }))
    .unwrap()
}

fn reason_with(events: &[k8s_openapi::api::core::v1::Event]) -> String {
    let j = job(json!({"active": 1}));
    let state = job_state_with_events(&j, &[unplaced_pod()], events, at(30));
    assert_eq!(state.status, JobStatus::Pending, "{state:?}");
    assert!(state.is_blocked(), "{state:?}");
    let Some(StatusReason::Unschedulable { message }) = state.reason else {
        panic!("{state:?}")
    };
    message
}

/// Issue 24 point 6: what the cluster autoscaler wrote on the pod tells
/// the cases apart: `NotTriggerScaleUp` (no pool can take it: the exact
/// `kinetic pool add` line), `TriggeredScaleUp` (a pool grows from 0:
/// which, 0 → 1, how long GKE takes), a pool at its maximum; the newest
/// word wins (a pool added after a refusal).
#[test]
fn the_unschedulable_hint_tells_no_pool_from_a_pool_scaling_up() {
    let refused = autoscaler_event(
        "NotTriggerScaleUp",
        "pod didn't trigger scale-up: 1 node(s) didn't match Pod's node affinity/selector",
        10,
    );
    let message = reason_with(std::slice::from_ref(&refused));
    assert!(
        message.starts_with(
            "no node pool offers this accelerator (node selector cloud.google.com/gke-accelerator=nvidia-l4; the cluster autoscaler: 1 node(s) didn't match Pod's node affinity/selector): add one with `kinetic pool add --accelerator l4`"
        ),
        "{message}"
    );
    assert!(!message.contains("is adding"), "{message}");

    let growing = autoscaler_event(
        "TriggeredScaleUp",
        "pod triggered scale-up: [{https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/instanceGroups/gke-fake-gpu-l4-1a2b-0badcafe-grp 0->1 (max: 10)}]",
        20,
    );
    let message = reason_with(&[refused.clone(), growing]);
    assert!(
        message.starts_with(
            "no node offers this accelerator yet (node selector cloud.google.com/gke-accelerator=nvidia-l4): node pool gpu-l4-1a2b is adding a node (0 → 1, at most 10); GKE takes about 2 to 5 minutes to start a node"
        ),
        "{message}"
    );
    assert!(!message.contains("kinetic pool add"), "{message}");

    let full = autoscaler_event(
        "NotTriggerScaleUp",
        "pod didn't trigger scale-up: 1 max node group size reached, 1 node(s) didn't match Pod's node affinity/selector",
        10,
    );
    let message = reason_with(&[full]);
    assert!(
        message.contains("the node pool that could add one is at its maximum size (the cluster autoscaler: 1 max node group size reached"),
        "{message}"
    );

    // An event about another pod (another uid) tells nothing of this one.
    let mut other = autoscaler_event("NotTriggerScaleUp", "pod didn't trigger scale-up: ", 10);
    other.involved_object.uid = Some("other-uid".into());
    let message = reason_with(&[other]);
    assert!(message.contains("has not said yet"), "{message}");
}

/// The node pool a GKE instance group names, for Kinetic's pool names;
/// another name is given as the instance group itself.
#[test]
fn an_instance_group_names_its_pool() {
    use kinetic_kube::status::pool_of_group;
    let url = |g: &str| {
        format!("https://www.googleapis.com/compute/v1/projects/p/zones/z/instanceGroups/{g}")
    };
    assert_eq!(
        pool_of_group(&url("gke-fake-gpu-l4-1a2b-0badcafe-grp")),
        "gpu-l4-1a2b"
    );
    assert_eq!(
        pool_of_group(&url(
            "gke-my-gpu-cluster-tpu-v5litepod-16-00ff-12345678-grp"
        )),
        "tpu-v5litepod-16-00ff"
    );
    assert_eq!(
        pool_of_group(&url("gke-fake-cpu-spot-0a0b-87654321-grp")),
        "cpu-spot-0a0b"
    );
    assert_eq!(
        pool_of_group(&url("gke-fake-default-pool-87654321-grp")),
        "default-pool"
    );
    assert_eq!(
        pool_of_group(&url("gke-fake-mine-87654321-grp")),
        "gke-fake-mine-87654321-grp"
    );
    assert_eq!(
        pool_of_group("aks-gpunp-98036146-vmss"),
        "aks-gpunp-98036146-vmss"
    );
}

/// Issue 24 point 8: an evicted pod that is still terminating (graceful
/// deletion, its replacement not made yet) leaves the job pending with the
/// eviction as its reason, not pending with none.
#[test]
fn a_terminating_evicted_pod_says_why_the_job_waits() {
    let j = job(json!({"active": 1}));
    let mut evicted = pod(json!({"phase": "Running", "startTime": CREATED,
        "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                        "message": "Eviction API: evicting"}]}));
    evicted.metadata.deletion_timestamp = evicted.metadata.creation_timestamp.clone();
    let state = job_state(&j, &[evicted], at(5));
    assert_eq!(state.status, JobStatus::Pending, "{state:?}");
    assert!(
        matches!(&state.reason, Some(StatusReason::Evicted { message }) if message == "Eviction API: evicting"),
        "{state:?}"
    );
}
