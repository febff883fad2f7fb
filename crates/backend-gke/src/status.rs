//! Kubernetes objects → job state: a pure function of the Job, its pods
//! and the time, with a typed reason for every state that has one.
//!
//! Order of the rules:
//!
//! 1. A final state the backend wrote on the Job (cancelled, pending
//!    deadline exceeded: [`ANNOTATION_FINAL_STATE`]) wins.
//! 2. `Complete` (or `succeeded ≥ 1`) → `SUCCEEDED`.
//! 3. `Failed`, or more failed pods than `backoffLimit` → `FAILED`, with
//!    the reason: `DeadlineExceeded` from the Job's condition, else from
//!    the newest failed pod (OOM killed, preempted or evicted through a
//!    `DisruptionTarget` condition, an exit code).
//! 4. The newest live pod: `Running` → `RUNNING`; `Pending` → `PENDING`
//!    with why (unschedulable with the scheduler's message and a hint,
//!    image pull error, container config error, container creating).
//!    Without pods, a Job whose `status.ready ≥ 1` is `RUNNING` (so a
//!    batch poll can skip the pod LIST, see [`needs_pods`]); a Job whose
//!    pod the API server refused (the Job controller's newest
//!    `FailedCreate` event on it, see [`pod_creation_failure`]) is
//!    `PENDING` with `PodCreationFailed` and the server's message.
//! 5. A `PENDING` state whose reason is blocking, older than the Job's
//!    pending deadline ([`ANNOTATION_PENDING_DEADLINE`]), becomes `FAILED`
//!    with `PendingDeadlineExceeded` and that reason as its cause.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStatus, Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kinetic_core::status::{JobState, JobStatus, StatusReason};

use crate::manifest::{ANNOTATION_FINAL_STATE, ANNOTATION_PENDING_DEADLINE};

/// Waiting reasons that mean the image cannot be pulled.
const IMAGE_PULL_REASONS: [&str; 4] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
];

/// Waiting reasons that mean the container cannot be created as configured.
const CONFIG_REASONS: [&str; 2] = ["CreateContainerConfigError", "CreateContainerError"];

fn to_system_time(t: &Time) -> SystemTime {
    let secs = t.0.as_second();
    if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs())
    } else {
        UNIX_EPOCH
    }
}

fn job_condition<'a>(
    job: &'a Job,
    kind: &str,
) -> Option<&'a k8s_openapi::api::batch::v1::JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind && c.status == "True")
}

/// The final state written on the Job by the backend, if any.
pub fn final_state(job: &Job) -> Option<JobState> {
    let text = job
        .metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION_FINAL_STATE)?;
    serde_json::from_str(text).ok()
}

/// The pending deadline the Job carries, if any.
pub fn pending_deadline(job: &Job) -> Option<Duration> {
    job.metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION_PENDING_DEADLINE)?
        .parse()
        .ok()
        .map(Duration::from_secs)
}

fn succeeded(job: &Job) -> bool {
    job_condition(job, "Complete").is_some()
        || job
            .status
            .as_ref()
            .and_then(|s| s.succeeded)
            .is_some_and(|n| n >= 1)
}

fn failed(job: &Job) -> bool {
    let limit = job.spec.as_ref().and_then(|s| s.backoff_limit).unwrap_or(6);
    job_condition(job, "Failed").is_some()
        || job
            .status
            .as_ref()
            .and_then(|s| s.failed)
            .is_some_and(|n| n > limit)
}

/// True when [`job_state`] needs the Job's pods to be exact: the Job is
/// neither finished successfully nor known running (`status.ready`), or it
/// failed (the reason lives on its pod). A batch poll lists pods only then.
pub fn needs_pods(job: &Job) -> bool {
    if final_state(job).is_some() || succeeded(job) {
        return false;
    }
    if failed(job) {
        return job_condition(job, "Failed").and_then(|c| c.reason.as_deref())
            != Some("DeadlineExceeded");
    }
    let ready = job.status.as_ref().and_then(|s| s.ready).unwrap_or(0);
    ready < 1
}

fn created(obj_time: Option<&Time>) -> SystemTime {
    obj_time.map_or(UNIX_EPOCH, to_system_time)
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

fn first_container(pod: &Pod) -> Option<&ContainerStatus> {
    pod.status.as_ref()?.container_statuses.as_ref()?.first()
}

/// The job's state from its Job, its pods and the time `now`, for a Job
/// whose events were not read (see [`job_state_with_events`]).
pub fn job_state(job: &Job, pods: &[Pod], now: SystemTime) -> JobState {
    job_state_with_events(job, pods, &[], now)
}

/// Why the API server refused the Job's pod, from the events about the
/// Job: the message of the newest `FailedCreate` (the Job controller's
/// `Error creating: …`), unless a pod was created after it
/// (`SuccessfulCreate`).
pub fn pod_creation_failure(job: &Job, events: &[Event]) -> Option<String> {
    let uid = job.metadata.uid.as_deref()?;
    let when = |e: &Event| {
        e.last_timestamp
            .as_ref()
            .or(e.first_timestamp.as_ref())
            .map(|t| t.0)
    };
    let newest = events
        .iter()
        .filter(|e| e.involved_object.uid.as_deref() == Some(uid))
        .filter(|e| {
            matches!(
                e.reason.as_deref(),
                Some("FailedCreate" | "SuccessfulCreate")
            )
        })
        .max_by_key(|e| (when(e), e.count.unwrap_or(1)))?;
    (newest.reason.as_deref() == Some("FailedCreate"))
        .then(|| newest.message.clone().unwrap_or_default())
}

/// The job's state from its Job, its pods, the events about the Job
/// (read when it has no pod) and the time `now`.
pub fn job_state_with_events(
    job: &Job,
    pods: &[Pod],
    events: &[Event],
    now: SystemTime,
) -> JobState {
    if let Some(state) = final_state(job) {
        return state;
    }
    if succeeded(job) {
        return JobState::new(JobStatus::Succeeded);
    }
    if failed(job) {
        let state = JobState::new(JobStatus::Failed);
        if job_condition(job, "Failed").and_then(|c| c.reason.as_deref())
            == Some("DeadlineExceeded")
        {
            return state.with_reason(StatusReason::DeadlineExceeded);
        }
        let mut failed_pods: Vec<&Pod> = pods.iter().filter(|p| phase(p) == "Failed").collect();
        failed_pods.sort_by_key(|p| created(p.metadata.creation_timestamp.as_ref()));
        return match failed_pods.last().and_then(|p| failure_reason(p)) {
            Some(reason) => state.with_reason(reason),
            None => state,
        };
    }
    let mut live: Vec<&Pod> = pods
        .iter()
        .filter(|p| {
            p.metadata.deletion_timestamp.is_none() && !matches!(phase(p), "Succeeded" | "Failed")
        })
        .collect();
    live.sort_by_key(|p| created(p.metadata.creation_timestamp.as_ref()));
    let state = match live.iter().find(|p| phase(p) == "Running").or(live.last()) {
        Some(pod) if phase(pod) == "Running" => JobState::new(JobStatus::Running),
        Some(pod) => match pending_reason(pod) {
            Some(reason) => JobState::new(JobStatus::Pending).with_reason(reason),
            None => JobState::new(JobStatus::Pending),
        },
        None => {
            let ready = job.status.as_ref().and_then(|s| s.ready).unwrap_or(0);
            if ready >= 1 && pods.is_empty() {
                JobState::new(JobStatus::Running)
            } else if let Some(message) = pods
                .is_empty()
                .then(|| pod_creation_failure(job, events))
                .flatten()
            {
                JobState::new(JobStatus::Pending)
                    .with_reason(StatusReason::PodCreationFailed { message })
            } else {
                JobState::new(JobStatus::Pending)
            }
        }
    };
    apply_pending_deadline(job, state, now)
}

fn apply_pending_deadline(job: &Job, state: JobState, now: SystemTime) -> JobState {
    if state.status != JobStatus::Pending || !state.is_blocked() {
        return state;
    }
    let Some(deadline) = pending_deadline(job) else {
        return state;
    };
    let since = created(job.metadata.creation_timestamp.as_ref());
    let waited = now.duration_since(since).unwrap_or_default();
    if waited <= deadline {
        return state;
    }
    let waited = Duration::from_secs(waited.as_secs());
    JobState::new(JobStatus::Failed).with_reason(StatusReason::PendingDeadlineExceeded {
        waited,
        cause: state.reason.map(Box::new),
    })
}

/// Why a failed pod failed, where it says.
pub fn failure_reason(pod: &Pod) -> Option<StatusReason> {
    let status = pod.status.as_ref()?;
    if let Some(c) = status.conditions.as_ref().and_then(|cs| {
        cs.iter()
            .find(|c| c.type_ == "DisruptionTarget" && c.status == "True")
    }) {
        let evicted = status.reason.as_deref() == Some("Evicted")
            || c.reason.as_deref() == Some("EvictionByEvictionAPI");
        return Some(if evicted {
            StatusReason::Evicted {
                message: status
                    .message
                    .clone()
                    .or_else(|| c.message.clone())
                    .unwrap_or_default(),
            }
        } else {
            StatusReason::Preempted
        });
    }
    match status.reason.as_deref() {
        Some("Evicted") => {
            return Some(StatusReason::Evicted {
                message: status.message.clone().unwrap_or_default(),
            });
        }
        Some("DeadlineExceeded") => return Some(StatusReason::DeadlineExceeded),
        _ => {}
    }
    let cs = first_container(pod)?;
    let terminated = cs
        .state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .or_else(|| cs.last_state.as_ref().and_then(|s| s.terminated.as_ref()))?;
    if terminated.reason.as_deref() == Some("OOMKilled") {
        return Some(StatusReason::OomKilled);
    }
    (terminated.exit_code != 0).then_some(StatusReason::ExitCode {
        code: terminated.exit_code,
    })
}

/// Why a pending pod is pending, where it says.
pub fn pending_reason(pod: &Pod) -> Option<StatusReason> {
    if let Some(cs) = first_container(pod)
        && let Some(w) = cs.state.as_ref().and_then(|s| s.waiting.as_ref())
    {
        let reason = w.reason.clone().unwrap_or_default();
        let message = w.message.clone().unwrap_or_default();
        if IMAGE_PULL_REASONS.contains(&reason.as_str()) {
            return Some(StatusReason::ImagePullError {
                image: cs.image.clone(),
                reason,
                message,
            });
        }
        if CONFIG_REASONS.contains(&reason.as_str()) {
            return Some(StatusReason::ContainerConfigError { reason, message });
        }
        if matches!(reason.as_str(), "ContainerCreating" | "PodInitializing") {
            return Some(StatusReason::ContainerCreating);
        }
    }
    let status = pod.status.as_ref()?;
    let scheduled = status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")?;
    match scheduled.reason.as_deref() {
        Some("Unschedulable") => {
            let selector = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_selector.clone())
                .unwrap_or_default();
            Some(StatusReason::Unschedulable {
                message: explain_unschedulable(
                    scheduled.message.as_deref().unwrap_or_default(),
                    &selector,
                ),
            })
        }
        Some("SchedulingGated") => Some(StatusReason::WaitingForResources),
        _ => None,
    }
}

/// The scheduler's message, prefixed with what it most likely means for a
/// Kinetic job: no node pool for the accelerator, or not enough capacity
/// or quota.
pub fn explain_unschedulable(
    message: &str,
    node_selector: &std::collections::BTreeMap<String, String>,
) -> String {
    let selector = node_selector
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    // "Insufficient X" means some node matched the selector but lacked
    // capacity; only when every node mismatched is the pool missing.
    let hint = if let Some(resource) = ["nvidia.com/gpu", "google.com/tpu", "cpu", "memory"]
        .into_iter()
        .find(|r| message.contains(&format!("Insufficient {r}")))
    {
        format!(
            "not enough free {resource} in the cluster: the node pool is at its capacity or quota (it may scale up)"
        )
    } else if message.contains("didn't match Pod's node affinity/selector")
        || message.contains("node(s) didn't match node selector")
    {
        if selector.is_empty() {
            "no node matches this job's placement".to_owned()
        } else {
            format!(
                "no node pool exists for this accelerator (node selector {selector}); add one with `kinetic pool add`"
            )
        }
    } else {
        String::new()
    };
    if hint.is_empty() {
        message.to_owned()
    } else if message.is_empty() {
        hint
    } else {
        format!("{hint}; scheduler: {message}")
    }
}
