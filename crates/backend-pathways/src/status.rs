//! LeaderWorkerSet + its pods → job state: a pure function of the
//! objects and the time, with the typed reasons of the shared Kubernetes
//! layer. A slice runs as one: one host failing fails the job.
//!
//! Order of the rules:
//!
//! 1. A final state the backend wrote on the LeaderWorkerSet (cancelled,
//!    pending deadline exceeded, preempted, or the end it saw) wins.
//! 2. A host whose pod is being disrupted (a `DisruptionTarget`
//!    condition: spot preemption, eviction) fails the whole slice with
//!    that reason (`preempted`, `evicted`): a multi-host slice does not
//!    survive losing a host.
//! 3. A host whose pod failed fails the job, with that pod's reason (OOM
//!    killed, run deadline exceeded, exit code); the lowest worker index
//!    is the one reported.
//! 4. The leader's pod `Succeeded` → `SUCCEEDED` (its result is the
//!    job's).
//! 5. A StatefulSet recreates a pod that ended, within moments: its events
//!    about the group's pods tell what a poll may have missed. A failed
//!    pod recreated (`RecreatingFailedPod`) fails the job; the leader
//!    recreated after it ended (`RecreatingTerminatedPod`) ends it
//!    `SUCCEEDED`.
//! 6. A host still pending → `PENDING`, with the first pending reason in
//!    worker order; else a host running → `RUNNING`. Without pods, the
//!    leader StatefulSet's newest `FailedCreate` event gives
//!    `PodCreationFailed`.
//! 7. A `PENDING` state whose reason is blocking, older than the pending
//!    deadline, becomes `FAILED` with `PendingDeadlineExceeded`.

use std::time::SystemTime;

use k8s_openapi::api::core::v1::{Event, Pod};
use kinetic_core::status::{JobState, JobStatus, StatusReason};
use kinetic_kube::status::{
    apply_pending_deadline, failure_reason, final_state, pending_reason, pod_creation_failure,
    pod_phase,
};

use crate::lws::{LABEL_WORKER_INDEX, LeaderWorkerSet};
use crate::manifest::{LEADER_ENDED, WORKER_FINISHED};

/// The host index of a pod of the set named `set`: its
/// `leaderworkerset.sigs.k8s.io/worker-index` label, else its name (the
/// leader is `{set}-{group}`, worker `i` is `{set}-{group}-{i}`).
pub fn worker_index(pod: &Pod, set: &str) -> Option<u32> {
    if let Some(i) = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_WORKER_INDEX))
    {
        return i.parse().ok();
    }
    let rest = pod.metadata.name.as_deref()?.strip_prefix(set)?;
    let mut parts = rest.strip_prefix('-')?.split('-');
    let _group: u32 = parts.next()?.parse().ok()?;
    match parts.next() {
        None => Some(0),
        Some(i) => i.parse().ok(),
    }
}

fn disrupted(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "DisruptionTarget" && c.status == "True")
        })
}

/// The pods by host index (unknown indexes last), then by name.
fn by_host<'a>(pods: &'a [Pod], set: &str) -> Vec<&'a Pod> {
    let mut out: Vec<&Pod> = pods.iter().collect();
    out.sort_by_key(|p| {
        (
            worker_index(p, set).unwrap_or(u32::MAX),
            p.metadata.name.clone(),
        )
    });
    out
}

/// The job's state from its LeaderWorkerSet, the pods of its group, the
/// events about StatefulSets (read when it has no pod) and the time `now`.
pub fn lws_state(
    lws: &LeaderWorkerSet,
    pods: &[Pod],
    events: &[Event],
    now: SystemTime,
) -> JobState {
    if let Some(state) = final_state(&lws.metadata) {
        return state;
    }
    let set = lws.metadata.name.as_deref().unwrap_or_default();
    let hosts = by_host(pods, set);
    let failed = JobState::new(JobStatus::Failed);
    if let Some(reason) = hosts
        .iter()
        .filter(|p| disrupted(p))
        .find_map(|p| failure_reason(p))
    {
        return failed.with_reason(reason);
    }
    if let Some(pod) = hosts.iter().find(|p| pod_phase(p) == "Failed") {
        return match failure_reason(pod) {
            Some(reason) => failed.with_reason(reason),
            None => failed,
        };
    }
    let live: Vec<&Pod> = hosts
        .iter()
        .copied()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    if live
        .iter()
        .any(|p| worker_index(p, set) == Some(0) && pod_phase(p) == "Succeeded")
    {
        return JobState::new(JobStatus::Succeeded);
    }
    if let Some(ended) = ended_by_events(lws, events) {
        return ended;
    }
    let pending: Vec<&Pod> = live
        .iter()
        .copied()
        .filter(|p| pod_phase(p) == "Pending")
        .collect();
    let state = if !pending.is_empty() {
        match pending.iter().find_map(|p| pending_reason(p)) {
            Some(reason) => JobState::new(JobStatus::Pending).with_reason(reason),
            None => JobState::new(JobStatus::Pending),
        }
    } else if live.iter().any(|p| pod_phase(p) == "Running") {
        JobState::new(JobStatus::Running)
    } else if let Some(message) = pods
        .is_empty()
        .then(|| {
            pod_creation_failure(events, |e| {
                e.involved_object.kind.as_deref() == Some("StatefulSet")
                    && e.involved_object.name.as_deref() == Some(set)
            })
        })
        .flatten()
    {
        JobState::new(JobStatus::Pending).with_reason(StatusReason::PodCreationFailed { message })
    } else {
        JobState::new(JobStatus::Pending)
    };
    apply_pending_deadline(&lws.metadata, state, now)
}

/// The end of the job the StatefulSets' events tell, if they tell one: an
/// event about this set's pods (`{set}-…`) saying one that failed is being
/// recreated fails the job; one saying the leader (`{set}-0`) ended is
/// being recreated ends it.
fn ended_by_events(lws: &LeaderWorkerSet, events: &[Event]) -> Option<JobState> {
    let set = lws.metadata.name.as_deref()?;
    let since = lws.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let ours = |e: &&Event| {
        e.involved_object.kind.as_deref() == Some("StatefulSet")
            && e.involved_object
                .name
                .as_deref()
                .is_some_and(|n| n == set || n.starts_with(&format!("{set}-")))
            && since.is_none_or(|s| {
                e.last_timestamp
                    .as_ref()
                    .or(e.first_timestamp.as_ref())
                    .is_none_or(|t| t.0 >= s)
            })
    };
    let pod_named = |e: &Event, pod: &str| {
        e.message
            .as_deref()
            .is_some_and(|m| m.split_whitespace().any(|w| w == pod))
    };
    let leader = format!("{set}-0");
    let mut succeeded = false;
    for e in events.iter().filter(ours) {
        match e.reason.as_deref() {
            Some("RecreatingFailedPod") => return Some(JobState::new(JobStatus::Failed)),
            Some("RecreatingTerminatedPod") if pod_named(e, &leader) => succeeded = true,
            _ => {}
        }
    }
    succeeded.then(|| JobState::new(JobStatus::Succeeded))
}

/// The end the leader's log tells: its last [`LEADER_ENDED`] line, exit
/// code 0 → `SUCCEEDED`, another → `FAILED` with that exit code.
pub fn leader_end(log_tail: &str) -> Option<JobState> {
    let code: i32 = log_tail
        .lines()
        .rev()
        .find_map(|l| l.trim_end().strip_prefix(LEADER_ENDED))?
        .trim()
        .parse()
        .ok()?;
    Some(if code == 0 {
        JobState::new(JobStatus::Succeeded)
    } else {
        JobState::new(JobStatus::Failed).with_reason(StatusReason::ExitCode { code })
    })
}

/// The end the hosts' logs tell (`tails[0]` the leader's, then the
/// workers' in order): the leader failing fails the job at once; the
/// leader succeeding ends it once every one of the `size - 1` workers
/// finished too (a worker that fails exits and fails the job through its
/// pod). With the leader's log alone, what the leader tells.
pub fn slice_end(tails: &[String], size: usize) -> Option<JobState> {
    let leader = leader_end(tails.first()?)?;
    if leader.status != JobStatus::Succeeded || tails.len() == 1 {
        return Some(leader);
    }
    let workers = &tails[1..];
    let finished = |t: &String| {
        t.lines()
            .any(|l| l.starts_with(WORKER_FINISHED) && l.contains(" finished"))
    };
    (workers.len() + 1 >= size && workers.iter().all(finished)).then_some(leader)
}
