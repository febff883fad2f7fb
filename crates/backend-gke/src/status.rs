//! Kubernetes objects → job state: a pure function of the Job, its pods
//! and the time, with a typed reason for every state that has one.
//!
//! Order of the rules:
//!
//! 1. A final state the backend wrote on the Job (cancelled, pending
//!    deadline exceeded: [`ANNOTATION_FINAL_STATE`](crate::manifest::ANNOTATION_FINAL_STATE)) wins.
//! 2. `Complete` (or `succeeded ≥ 1`) → `SUCCEEDED`.
//! 3. `Failed`, or more failed pods than `backoffLimit` → `FAILED`, with
//!    the reason: `DeadlineExceeded` from the Job's condition, else from
//!    the newest failed pod (OOM killed, preempted or evicted through a
//!    `DisruptionTarget` condition, an exit code).
//! 4. The newest live pod: `Running` → `RUNNING`; `Pending` → `PENDING`
//!    with why (unschedulable with the scheduler's message and a hint that
//!    says what the cluster autoscaler did about the pod, from its events,
//!    image pull error, container config error, container creating).
//!    Without pods, a Job whose `status.ready ≥ 1` is `RUNNING` (so a
//!    batch poll can skip the pod LIST, see [`needs_pods`]); a Job whose
//!    pod the API server refused (the Job controller's newest
//!    `FailedCreate` event on it, see [`pod_creation_failure`]) is
//!    `PENDING` with `PodCreationFailed` and the server's message.
//! 5. A Job with failure budgets ([`budgets`]): its pods are its attempts;
//!    more preemptions or evictions than its restart budget make it
//!    `FAILED` with `RestartsSpent`, and a later attempt's state says
//!    which it is (`preempted, restarting (attempt 2 of 4)`).
//! 6. A `PENDING` state whose reason is blocking, older than the Job's
//!    pending deadline ([`ANNOTATION_PENDING_DEADLINE`](crate::manifest::ANNOTATION_PENDING_DEADLINE)), becomes `FAILED`
//!    with `PendingDeadlineExceeded` and that reason as its cause.

use std::time::SystemTime;

use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::api::core::v1::{Event, Pod};
use kinetic_core::budget::{Budgets, merge_attempts};
use kinetic_core::status::{JobState, JobStatus, StatusReason};
use kinetic_kube::status::{
    apply_budgets, apply_pending_deadline, created_at, job_attempts, live_pod_state_with_events,
    pod_phase,
};
pub use kinetic_kube::status::{explain_unschedulable, failure_reason, pending_reason};

fn job_condition<'a>(job: &'a Job, kind: &str) -> Option<&'a JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind && c.status == "True")
}

/// The final state written on the Job by the backend, if any.
pub fn final_state(job: &Job) -> Option<JobState> {
    kinetic_kube::status::final_state(&job.metadata)
}

/// The pending deadline the Job carries, if any.
pub fn pending_deadline(job: &Job) -> Option<std::time::Duration> {
    kinetic_kube::status::pending_deadline(&job.metadata)
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

/// The failure budgets a Job carries: `backoffLimit` application retries
/// and the restart budget of its annotation; `None` for a Job without one
/// (see [`crate::manifest::ANNOTATION_RESTARTS`]).
pub fn budgets(job: &Job) -> Option<Budgets> {
    let restarts = job
        .metadata
        .annotations
        .as_ref()?
        .get(crate::manifest::ANNOTATION_RESTARTS)?
        .parse()
        .ok()?;
    let retries = job
        .spec
        .as_ref()
        .and_then(|s| s.backoff_limit)
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(0);
    Some(Budgets { retries, restarts })
}

/// True when [`job_state`] needs the Job's pods to be exact: the Job has
/// failure budgets (its pods are its attempts), or is neither finished
/// successfully nor known running (`status.ready`), or it failed (the
/// reason lives on its pod). A batch poll lists pods only then.
pub fn needs_pods(job: &Job) -> bool {
    if final_state(job).is_none() && budgets(job).is_some() {
        return true;
    }
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
    kinetic_kube::status::pod_creation_failure(events, |e| {
        e.involved_object.uid.as_deref() == Some(uid)
    })
}

/// The pods the Job controller created for `job`, from its
/// `SuccessfulCreate` events (see [`kinetic_kube::status::created_pods`]).
pub fn created_pods_of(
    job: &Job,
    events: &[Event],
) -> Vec<(
    String,
    Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
)> {
    let Some(uid) = job.metadata.uid.as_deref() else {
        return Vec::new();
    };
    kinetic_kube::status::created_pods(events, |e| e.involved_object.uid.as_deref() == Some(uid))
}

/// The job's state from its Job, its pods, the events about the Job
/// (read when it has no pod) and about its unschedulable pods (the
/// cluster autoscaler's), and the time `now`.
pub fn job_state_with_events(
    job: &Job,
    pods: &[Pod],
    events: &[Event],
    now: SystemTime,
) -> JobState {
    let state = job_state_without_budgets(job, pods, events, now);
    match budgets(job) {
        Some(b) if final_state(job).is_none() => {
            let seen = job_attempts(pods, &created_pods_of(job, events));
            let recorded = kinetic_kube::status::recorded_attempts(&job.metadata);
            apply_budgets(state, b, merge_attempts(&recorded, &seen))
        }
        _ => state,
    }
}

fn job_state_without_budgets(
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
        let mut failed_pods: Vec<&Pod> = pods.iter().filter(|p| pod_phase(p) == "Failed").collect();
        failed_pods.sort_by_key(|p| created_at(&p.metadata));
        return match failed_pods.last().and_then(|p| failure_reason(p)) {
            Some(reason) => state.with_reason(reason),
            None => state,
        };
    }
    let state = live_pod_state_with_events(pods, events).unwrap_or_else(|| {
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
    });
    apply_pending_deadline(&job.metadata, state, now)
}
