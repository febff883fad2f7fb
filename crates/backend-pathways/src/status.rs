//! LeaderWorkerSet + its pods → job state: a pure function of the
//! objects and the time, with the typed reasons of the shared Kubernetes
//! layer. A slice runs as one: one host failing fails the job.
//!
//! The pods restart `Always` (a StatefulSet's must), and each host's
//! command runs under the manifest's `HOLD_WORKERS` wrapper, which prints
//! how the command ended and keeps the container running: a host's end is
//! read in its log ([`slice_end`]), not in its pod.
//!
//! Order of the rules:
//!
//! 1. A final state the backend wrote on the LeaderWorkerSet (cancelled,
//!    pending or run deadline exceeded, preempted, or the end it saw) wins.
//! 2. A host whose pod is being disrupted (a `DisruptionTarget`
//!    condition: spot preemption, eviction) fails the whole slice with
//!    that reason (`preempted`, `evicted`): a multi-host slice does not
//!    survive losing a host.
//! 3. A host whose pod failed (evicted, say) fails the job, with a
//!    `HostLost` reason naming the host, its pod and how it ended; the
//!    lowest worker index is the one reported.
//! 4. A host whose container restarted anyway (killed outside the
//!    wrapper: OOM, a signal) fails the job the same way, with its last
//!    termination: the group is recreated, which would run the job again.
//! 5. A lost host ([`crate::hosts::lost_host`]) fails the job with a
//!    reason naming the host and its pod (`HostLost`), from what a poll may
//!    have missed: the LeaderWorkerSet controller recreating the group
//!    (its event `RecreateGroupOnPodRestart` in v0.5.1, `RecreateGroup`
//!    from v0.9), a StatefulSet's `SuccessfulDelete` of one of the slice's
//!    pods (Kubernetes 1.32 deletes a failed pod and makes it again
//!    silently), a pod under another UID than the one recorded on the
//!    LeaderWorkerSet, or its `Available` condition turned `False`.
//! 6. The leader's pod `Succeeded` → `SUCCEEDED` (its result is the
//!    job's).
//! 7. A host still pending → `PENDING`, with the first pending reason in
//!    worker order; else a host running → `RUNNING`. Without pods, the
//!    newest `FailedCreate` event of the leader StatefulSet (a pod
//!    refused) or of the LeaderWorkerSet itself (its StatefulSet refused)
//!    gives `PodCreationFailed`.
//! 8. A `PENDING` state whose reason is blocking, older than the pending
//!    deadline, becomes `FAILED` with `PendingDeadlineExceeded`; a
//!    `RUNNING` one whose slice started longer ago than the run deadline
//!    becomes `FAILED` with `DeadlineExceeded`.

use std::time::SystemTime;

use k8s_openapi::api::core::v1::{Event, Pod};
use kinetic_core::status::{JobState, JobStatus, StatusReason};
use kinetic_kube::status::{
    apply_pending_deadline, apply_run_deadline, failure_reason, final_state,
    pending_reason_with_events, pod_creation_failure, pod_phase, pod_start,
};

use crate::lws::{LABEL_WORKER_INDEX, LeaderWorkerSet};
use crate::manifest::{LEADER_ENDED, WORKER_ENDED, WORKER_FAILED};

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

/// Why a host whose container restarted ended its last run: the reason of
/// its last termination (its exit code, even 0: the wrapper never exits
/// of itself).
fn restarted(pod: &Pod) -> Option<StatusReason> {
    let c = pod
        .status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.restart_count > 0)?;
    let last = c.last_state.as_ref()?.terminated.as_ref()?;
    Some(failure_reason(pod).unwrap_or(StatusReason::ExitCode {
        code: last.exit_code,
    }))
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
    let named = |pod: &Pod, then: &str| {
        let how = crate::hosts::ended(pod).unwrap_or_else(|| "failed".to_owned());
        StatusReason::HostLost {
            host: worker_index(pod, set).unwrap_or_default(),
            pod: pod.metadata.name.clone().unwrap_or_default(),
            cause: format!("failed: {how}; {then}"),
        }
    };
    if let Some(pod) = hosts.iter().find(|p| pod_phase(p) == "Failed") {
        return failed.with_reason(named(
            pod,
            "its StatefulSet deletes the pod and makes it again",
        ));
    }
    if let Some(pod) = hosts.iter().find(|p| restarted(p).is_some()) {
        return failed.with_reason(named(
            pod,
            "its container restarted, so the LeaderWorkerSet controller recreates the slice",
        ));
    }
    let seen = crate::hosts::observe(crate::hosts::recorded(lws), pods);
    if let Some(reason) = crate::hosts::lost_host(lws, pods, events, &seen) {
        return failed.with_reason(reason);
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
    let pending: Vec<&Pod> = live
        .iter()
        .copied()
        .filter(|p| pod_phase(p) == "Pending")
        .collect();
    let state = if !pending.is_empty() {
        match pending
            .iter()
            .find_map(|p| pending_reason_with_events(p, events))
        {
            Some(reason) => JobState::new(JobStatus::Pending).with_reason(reason),
            None => JobState::new(JobStatus::Pending),
        }
    } else if live.iter().any(|p| pod_phase(p) == "Running") {
        JobState::new(JobStatus::Running)
    } else if let Some(message) = pods
        .is_empty()
        .then(|| creation_failure(lws, events))
        .flatten()
    {
        JobState::new(JobStatus::Pending).with_reason(StatusReason::PodCreationFailed { message })
    } else {
        JobState::new(JobStatus::Pending)
    };
    let started = live.iter().filter_map(|p| pod_start(p)).min();
    let state = apply_run_deadline(&lws.metadata, state, started, now);
    apply_pending_deadline(&lws.metadata, state, now)
}

/// Why a LeaderWorkerSet without pods has none, where its events say: the
/// API server refused a pod of its leader StatefulSet, or refused the
/// StatefulSet itself (the LeaderWorkerSet controller's `FailedCreate`
/// warning on the set, which names no cause).
fn creation_failure(lws: &LeaderWorkerSet, events: &[Event]) -> Option<String> {
    let set = lws.metadata.name.as_deref().unwrap_or_default();
    let pod = pod_creation_failure(events, |e| {
        e.involved_object.kind.as_deref() == Some("StatefulSet")
            && e.involved_object.name.as_deref() == Some(set)
    });
    pod.or_else(|| {
        let uid = lws.metadata.uid.as_deref();
        let message = pod_creation_failure(events, |e| {
            e.involved_object.kind.as_deref() == Some(crate::lws::KIND)
                && e.involved_object.name.as_deref() == Some(set)
                && (uid.is_none() || e.involved_object.uid.as_deref() == uid)
        })?;
        Some(format!(
            "the LeaderWorkerSet controller cannot create the leader StatefulSet ({message}): the API server refused it; its reason is in the controller's log (a pod template a StatefulSet does not accept, such as a restartPolicy other than Always or an activeDeadlineSeconds, or a quota)"
        ))
    })
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

/// The exit code a worker's log tells its command failed with: its last
/// `[kinetic] host N failed: exit code C` line.
pub fn worker_failure(log_tail: &str) -> Option<i32> {
    log_tail
        .lines()
        .rev()
        .filter_map(|l| l.trim_end().strip_prefix(WORKER_ENDED))
        .find_map(|rest| rest.split_once(WORKER_FAILED))?
        .1
        .trim()
        .parse()
        .ok()
}

/// The end the hosts' logs tell (`tails[0]` the leader's, then the
/// workers' in host order): the first host in that order whose command
/// failed fails the job with its exit code, at once (the others may wait
/// for it forever); the leader succeeding ends the job once every one of
/// the `size - 1` workers finished too. With the leader's log alone, what
/// the leader tells.
pub fn slice_end(tails: &[String], size: usize) -> Option<JobState> {
    let leader = leader_end(tails.first()?);
    if leader
        .as_ref()
        .is_some_and(|l| l.status != JobStatus::Succeeded)
    {
        return leader;
    }
    let workers = &tails[1..];
    if let Some(code) = workers.iter().find_map(|t| worker_failure(t)) {
        return Some(JobState::new(JobStatus::Failed).with_reason(StatusReason::ExitCode { code }));
    }
    let leader = leader?;
    if workers.is_empty() {
        return Some(leader);
    }
    let finished = |t: &String| {
        t.lines()
            .any(|l| l.starts_with(WORKER_ENDED) && l.contains(" finished"))
    };
    (workers.len() + 1 >= size && workers.iter().all(finished)).then_some(leader)
}
