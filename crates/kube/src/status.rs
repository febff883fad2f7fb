//! Kubernetes objects → job state, the parts every workload kind shares:
//! pod states → typed reasons, the final state and pending deadline a
//! workload carries in its annotations, the API server's refusal of its
//! pods. Pure functions of objects and the time.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{ContainerStatus, Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kinetic_core::budget::{self, Attempt, Budgets, Decision, Outcome};
use kinetic_core::status::{JobState, JobStatus, StatusReason};

use crate::pod::{
    ANNOTATION_ATTEMPTS, ANNOTATION_FINAL_STATE, ANNOTATION_PENDING_DEADLINE,
    ANNOTATION_RUN_DEADLINE,
};

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
    pending_reason_with_events(pod, &[])
}

/// [`pending_reason`], with the events about the pod among `events`: an
/// unschedulable pod's reason then says what the cluster autoscaler last
/// said about it ([`autoscaler_verdict`]).
pub fn pending_reason_with_events(pod: &Pod, events: &[Event]) -> Option<StatusReason> {
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
                message: explain_unschedulable_with(
                    scheduled.message.as_deref().unwrap_or_default(),
                    &selector,
                    gpus_of(pod),
                    autoscaler_verdict(pod, events).as_ref(),
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
    explain_unschedulable_gpus(message, node_selector, None)
}

/// The GPUs a pod's containers ask for (`nvidia.com/gpu` limits), if any.
fn gpus_of(pod: &Pod) -> Option<u32> {
    let total: u32 = pod
        .spec
        .as_ref()?
        .containers
        .iter()
        .filter_map(|c| c.resources.as_ref()?.limits.as_ref()?.get("nvidia.com/gpu"))
        .filter_map(|q| q.0.parse::<u32>().ok())
        .sum();
    (total > 0).then_some(total)
}

/// The `--accelerator` (and `--spot`) that makes a pool for a pod's node
/// selector, as `kinetic pool add` spells them; `gpus` per pod when known.
fn pool_add_flags(
    node_selector: &std::collections::BTreeMap<String, String>,
    gpus: Option<u32>,
) -> Option<String> {
    use kinetic_core::accelerators::{
        GPU_TYPES, LABEL_GPU_ACCELERATOR, LABEL_SPOT, LABEL_TPU_ACCELERATOR, LABEL_TPU_TOPOLOGY,
        TPU_TYPES,
    };
    let accelerator = if let Some(label) = node_selector.get(LABEL_GPU_ACCELERATOR) {
        let gpu = GPU_TYPES.iter().find(|g| g.gke_label == label)?;
        match gpus {
            Some(n) if n > 1 => format!("{}x{n}", gpu.name),
            _ => gpu.name.to_owned(),
        }
    } else {
        let label = node_selector.get(LABEL_TPU_ACCELERATOR)?;
        let topology = node_selector.get(LABEL_TPU_TOPOLOGY)?;
        let tpu = TPU_TYPES.iter().find(|t| {
            t.gke_accelerator == label || t.single_host_accelerator == Some(label.as_str())
        })?;
        let slice = tpu.slice_with_topology(topology)?;
        format!("{}-{}", tpu.name, slice.chips)
    };
    let spot = if node_selector.get(LABEL_SPOT).is_some_and(|v| v == "true") {
        " --spot"
    } else {
        ""
    };
    Some(format!("--accelerator {accelerator}{spot}"))
}

/// [`explain_unschedulable`], knowing the GPUs the pod asks for, so the
/// `kinetic pool add` it suggests names the pool's accelerator whole.
pub fn explain_unschedulable_gpus(
    message: &str,
    node_selector: &std::collections::BTreeMap<String, String>,
    gpus: Option<u32>,
) -> String {
    explain_unschedulable_with(message, node_selector, gpus, None)
}

/// One node group the cluster autoscaler is growing for a pod, from its
/// `TriggeredScaleUp` event (`{GROUP-ID 0->1 (max: 3)}`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScaleUp {
    /// The node pool, where the group's id names it (on GKE the id is the
    /// URL of the pool's instance group `gke-{cluster}-{pool}-{hash}-grp`;
    /// see [`pool_of_group`]); else the group's id.
    pub pool: String,
    /// Its nodes before.
    pub from: u32,
    /// Its nodes once grown.
    pub to: u32,
    /// Its largest size.
    pub max: u32,
}

/// What the cluster autoscaler last said about a pending pod: its newest
/// `TriggeredScaleUp` or `NotTriggerScaleUp` event on the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AutoscalerVerdict {
    /// It is adding nodes that will take the pod.
    ScalingUp(Vec<ScaleUp>),
    /// No node group can take the pod: its reasons as it gave them, each
    /// counted per node group (`2 node(s) didn't match Pod's node
    /// affinity/selector, 1 max node group size reached`); empty when it
    /// considers no node group (no pool has autoscaling).
    NoScaleUp {
        /// The reasons.
        reasons: String,
    },
}

/// The node pool an autoscaler node group id names: on GKE the URL of the
/// pool's managed instance group, `…/instanceGroups/gke-{cluster}-{pool}-{hash}-grp`,
/// where Kinetic's pools are `default-pool`, `gpu-…`, `tpu-…` and
/// `cpu-spot-…` (the last of these in the name: a cluster's name may hold
/// one too). The cluster's name is not known here, so a pool of another
/// name is given as its instance group.
pub fn pool_of_group(id: &str) -> String {
    let group = id.rsplit('/').next().unwrap_or(id);
    let inner = group
        .strip_prefix("gke-")
        .and_then(|g| g.strip_suffix("-grp"))
        .and_then(|g| {
            let (rest, hash) = g.rsplit_once('-')?;
            (hash.len() == 8 && hash.chars().all(|c| c.is_ascii_hexdigit())).then_some(rest)
        });
    let Some(inner) = inner else {
        return group.to_owned();
    };
    ["-default-pool", "-gpu-", "-tpu-", "-cpu-spot-"]
        .iter()
        .filter_map(|p| inner.rfind(p))
        .max()
        .map_or_else(|| group.to_owned(), |at| inner[at + 1..].to_owned())
}

/// Parse a `TriggeredScaleUp` message: `pod triggered scale-up: [{ID 0->1
/// (max: 3)} {ID2 1->2 (max: 4)}]` (cluster-autoscaler's `ScaleUpInfo`).
fn parse_scale_ups(message: &str) -> Vec<ScaleUp> {
    let Some(list) = message.strip_prefix("pod triggered scale-up: ") else {
        return Vec::new();
    };
    list.split('{')
        .skip(1)
        .filter_map(|part| {
            let part = part.split('}').next()?;
            let mut words = part.split_whitespace();
            let id = words.next()?;
            let (from, to) = words.next()?.split_once("->")?;
            let max = words.nth(1)?.trim_end_matches(')');
            Some(ScaleUp {
                pool: pool_of_group(id),
                from: from.parse().ok()?,
                to: to.parse().ok()?,
                max: max.parse().ok()?,
            })
        })
        .collect()
}

/// What the cluster autoscaler last said about `pod`, from the events
/// about it among `events` (by uid, or by name when an event has none):
/// the newest `TriggeredScaleUp` or `NotTriggerScaleUp` (by last time; a
/// tie goes to the scale-up, which the autoscaler writes once where it
/// repeats the other every scan). `None` when it said nothing yet (or no
/// autoscaler runs).
pub fn autoscaler_verdict(pod: &Pod, events: &[Event]) -> Option<AutoscalerVerdict> {
    let name = pod.metadata.name.as_deref()?;
    let uid = pod.metadata.uid.as_deref();
    let newest = events
        .iter()
        .filter(|e| {
            let o = &e.involved_object;
            o.kind.as_deref() == Some("Pod")
                && o.name.as_deref() == Some(name)
                && (uid.is_none() || o.uid.is_none() || o.uid.as_deref() == uid)
                && matches!(
                    e.reason.as_deref(),
                    Some("TriggeredScaleUp" | "NotTriggerScaleUp")
                )
        })
        .max_by_key(|e| {
            (
                event_time(e),
                e.reason.as_deref() == Some("TriggeredScaleUp"),
            )
        })?;
    let message = newest.message.as_deref().unwrap_or_default();
    if newest.reason.as_deref() == Some("TriggeredScaleUp") {
        let groups = parse_scale_ups(message);
        return (!groups.is_empty()).then_some(AutoscalerVerdict::ScalingUp(groups));
    }
    let reasons = message
        .split_once(':')
        .map_or(message, |(_, r)| r)
        .trim()
        .to_owned();
    Some(AutoscalerVerdict::NoScaleUp { reasons })
}

/// How long GKE takes to start a node, as the hint says it.
fn start_time(node_selector: &std::collections::BTreeMap<String, String>) -> &'static str {
    if node_selector.contains_key(kinetic_core::accelerators::LABEL_TPU_ACCELERATOR) {
        "about 5 to 10 minutes for a TPU slice"
    } else {
        "about 2 to 5 minutes"
    }
}

/// `node pool X is adding a node (0 → 1); GKE takes about N minutes`.
fn scaling_up(
    groups: &[ScaleUp],
    node_selector: &std::collections::BTreeMap<String, String>,
) -> String {
    let each: Vec<String> = groups
        .iter()
        .map(|g| {
            let n = g.to.saturating_sub(g.from);
            let what = if n == 1 {
                "a node".to_owned()
            } else {
                format!("{n} nodes")
            };
            format!(
                "node pool {} is adding {what} ({} → {}, at most {})",
                g.pool, g.from, g.to, g.max
            )
        })
        .collect();
    format!(
        "{}; GKE takes {} to start a node, and the job starts on it",
        each.join(" and "),
        start_time(node_selector)
    )
}

/// [`explain_unschedulable_gpus`], told what the cluster autoscaler said
/// about the pod ([`autoscaler_verdict`]), which tells the cases apart
/// where the scheduler's message cannot: no node pool can take the job
/// (the hint names the `kinetic pool add` that makes one), a pool is
/// adding a node for it (which, from how many, and how long GKE takes),
/// or the autoscaler has not said yet (the hint says so, and what to add
/// if `kinetic pool list` shows no pool for it).
pub fn explain_unschedulable_with(
    message: &str,
    node_selector: &std::collections::BTreeMap<String, String>,
    gpus: Option<u32>,
    verdict: Option<&AutoscalerVerdict>,
) -> String {
    let selector = node_selector
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let add = || {
        if node_selector.len() == 1
            && node_selector
                .get("cloud.google.com/gke-spot")
                .map(String::as_str)
                == Some("true")
        {
            "`kinetic pool add --accelerator cpu --spot` (the default pool is on-demand)".to_owned()
        } else {
            let flags = pool_add_flags(node_selector, gpus)
                .unwrap_or_else(|| "--accelerator ACCELERATOR".to_owned());
            format!("`kinetic pool add {flags}`")
        }
    };
    let said = |reasons: &str| {
        if reasons.is_empty() {
            "the cluster autoscaler has no node pool it can grow".to_owned()
        } else {
            format!("the cluster autoscaler: {reasons}")
        }
    };
    let full = |reasons: &str| reasons.contains("max node group size reached");
    let backoff = |reasons: &str| reasons.contains("in backoff after failed scale-up");
    // "Insufficient X" means some node matched the selector but lacked
    // capacity; only when every node mismatched is the pool missing (or at
    // 0 nodes: the scheduler says the same, the autoscaler tells which).
    let hint = if let Some(resource) = ["nvidia.com/gpu", "google.com/tpu", "cpu", "memory"]
        .into_iter()
        .find(|r| message.contains(&format!("Insufficient {r}")))
    {
        match verdict {
            None => format!(
                "not enough free {resource} in the cluster: the node pool is at its capacity or quota (it may scale up)"
            ),
            Some(AutoscalerVerdict::ScalingUp(groups)) => format!(
                "not enough free {resource} in the cluster: {}",
                scaling_up(groups, node_selector)
            ),
            Some(AutoscalerVerdict::NoScaleUp { reasons }) if backoff(reasons) => format!(
                "not enough free {resource} in the cluster, and GKE failed to add a node (a quota, or no capacity in the zone): the autoscaler tries again later ({})",
                said(reasons)
            ),
            Some(AutoscalerVerdict::NoScaleUp { reasons }) => format!(
                "not enough free {resource} in the cluster, and no node pool can add a node for it{} ({}): the job waits for one to free up",
                if full(reasons) {
                    " (at its maximum size)"
                } else {
                    ""
                },
                said(reasons)
            ),
        }
    } else if message.contains("didn't match Pod's node affinity/selector")
        || message.contains("node(s) didn't match node selector")
    {
        if selector.is_empty() {
            "no node matches this job's placement".to_owned()
        } else {
            match verdict {
                None => format!(
                    "no node offers this accelerator yet (node selector {selector}), and the cluster autoscaler has not said yet whether a node pool can add one: if `kinetic pool list` shows no pool for it, add one with {}",
                    add()
                ),
                Some(AutoscalerVerdict::ScalingUp(groups)) => format!(
                    "no node offers this accelerator yet (node selector {selector}): {}",
                    scaling_up(groups, node_selector)
                ),
                Some(AutoscalerVerdict::NoScaleUp { reasons }) if backoff(reasons) => format!(
                    "no node offers this accelerator yet (node selector {selector}), and GKE failed to add one (a quota, or no capacity in the zone): the autoscaler tries again later ({})",
                    said(reasons)
                ),
                Some(AutoscalerVerdict::NoScaleUp { reasons }) if full(reasons) => format!(
                    "no node offers this accelerator (node selector {selector}), and the node pool that could add one is at its maximum size ({})",
                    said(reasons)
                ),
                Some(AutoscalerVerdict::NoScaleUp { reasons }) => format!(
                    "no node pool offers this accelerator (node selector {selector}; {}): add one with {}",
                    said(reasons),
                    add()
                ),
            }
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

/// The final state the backend wrote on a workload (cancelled, pending
/// deadline exceeded, preempted), if any: it wins over everything else.
pub fn final_state(meta: &ObjectMeta) -> Option<JobState> {
    let text = meta.annotations.as_ref()?.get(ANNOTATION_FINAL_STATE)?;
    serde_json::from_str(text).ok()
}

/// The attempts recorded on a workload ([`ANNOTATION_ATTEMPTS`]); none
/// when it has none (or they cannot be read).
pub fn recorded_attempts(meta: &ObjectMeta) -> Vec<Attempt> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_ATTEMPTS))
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// The pending deadline a workload carries, if any.
pub fn pending_deadline(meta: &ObjectMeta) -> Option<Duration> {
    meta.annotations
        .as_ref()?
        .get(ANNOTATION_PENDING_DEADLINE)?
        .parse()
        .ok()
        .map(Duration::from_secs)
}

/// The run deadline an object carries in its annotations, if any.
pub fn run_deadline(meta: &ObjectMeta) -> Option<Duration> {
    meta.annotations
        .as_ref()?
        .get(ANNOTATION_RUN_DEADLINE)?
        .parse()
        .ok()
        .map(Duration::from_secs)
}

/// When a pod started (its `status.startTime`), if it did.
pub fn pod_start(pod: &Pod) -> Option<SystemTime> {
    pod.status.as_ref()?.start_time.as_ref().map(to_system_time)
}

/// A `RUNNING` state of a workload that has run (since `started`) longer
/// than the run deadline it carries becomes `FAILED` with
/// `DeadlineExceeded`.
pub fn apply_run_deadline(
    meta: &ObjectMeta,
    state: JobState,
    started: Option<SystemTime>,
    now: SystemTime,
) -> JobState {
    if state.status != JobStatus::Running {
        return state;
    }
    let (Some(deadline), Some(started)) = (run_deadline(meta), started) else {
        return state;
    };
    if now.duration_since(started).unwrap_or_default() <= deadline {
        return state;
    }
    JobState::new(JobStatus::Failed).with_reason(StatusReason::DeadlineExceeded)
}

/// When an object was created (the epoch when it does not say).
pub fn created_at(meta: &ObjectMeta) -> SystemTime {
    created(meta.creation_timestamp.as_ref())
}

/// A pod's phase (`Pending` when it has no status yet).
pub fn pod_phase(pod: &Pod) -> &str {
    phase(pod)
}

/// Pods sorted oldest first (by creation time, then name).
pub fn sort_oldest_first(pods: &mut [Pod]) {
    pods.sort_by(|a, b| {
        a.metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0)
            .cmp(&b.metadata.creation_timestamp.as_ref().map(|t| t.0))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

/// The state of a job whose newest live pod (`Running` first) says it:
/// `RUNNING`, or `PENDING` with why; without a live pod, `PENDING` with
/// why a terminating pod was disrupted (evicted, preempted), if one was;
/// else `None`.
pub fn live_pod_state(pods: &[Pod]) -> Option<JobState> {
    live_pod_state_with_events(pods, &[])
}

/// Whether `pod` is live: not being deleted, and pending or running.
pub fn is_live(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase(pod), "Succeeded" | "Failed")
}

/// [`live_pod_state`], with the events about the pods among `events` (see
/// [`pending_reason_with_events`]).
pub fn live_pod_state_with_events(pods: &[Pod], events: &[Event]) -> Option<JobState> {
    let mut live: Vec<&Pod> = pods.iter().filter(|p| is_live(p)).collect();
    live.sort_by_key(|p| created(p.metadata.creation_timestamp.as_ref()));
    if live.is_empty() {
        // A pod evicted or preempted is deleted gracefully: while it
        // terminates (and before its replacement exists) the job waits,
        // for that reason.
        let mut terminating: Vec<&Pod> = pods
            .iter()
            .filter(|p| {
                p.metadata.deletion_timestamp.is_some()
                    && !matches!(phase(p), "Succeeded" | "Failed")
            })
            .collect();
        terminating.sort_by_key(|p| created(p.metadata.creation_timestamp.as_ref()));
        let reason = terminating.last().and_then(|p| failure_reason(p))?;
        return Some(JobState::new(JobStatus::Pending).with_reason(reason));
    }
    let pod = live
        .iter()
        .find(|p| phase(p) == "Running")
        .or(live.last())?;
    Some(if phase(pod) == "Running" {
        JobState::new(JobStatus::Running)
    } else {
        match pending_reason_with_events(pod, events) {
            Some(reason) => JobState::new(JobStatus::Pending).with_reason(reason),
            None => JobState::new(JobStatus::Pending),
        }
    })
}

/// The names of the pods the scheduler could not place (and that are not
/// being deleted): the pods whose events say what the cluster autoscaler
/// did about them.
pub fn unschedulable_pods(pods: &[Pod]) -> Vec<String> {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && phase(p) == "Pending")
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .any(|c| {
                    c.type_ == "PodScheduled"
                        && c.status == "False"
                        && c.reason.as_deref() == Some("Unschedulable")
                })
        })
        .filter_map(|p| p.metadata.name.clone())
        .collect()
}

/// When `e` last happened: its last time, or its first when it has none.
fn event_time(e: &Event) -> Option<&Time> {
    e.last_timestamp.as_ref().or(e.first_timestamp.as_ref())
}

/// Why the API server refused a workload's pod, from the events `about`
/// the controller object that creates its pods: the message of the newest
/// `FailedCreate` (the controller's `Error creating: …`), unless a pod
/// was created after it (`SuccessfulCreate`).
pub fn pod_creation_failure(events: &[Event], about: impl Fn(&Event) -> bool) -> Option<String> {
    let newest = events
        .iter()
        .filter(|e| about(e))
        .filter(|e| {
            matches!(
                e.reason.as_deref(),
                Some("FailedCreate" | "SuccessfulCreate")
            )
        })
        .max_by_key(|e| (event_time(e), e.count.unwrap_or(1)))?;
    (newest.reason.as_deref() == Some("FailedCreate"))
        .then(|| newest.message.clone().unwrap_or_default())
}

/// A `PENDING` state whose reason is blocking, older than the pending
/// deadline the workload carries, becomes `FAILED` with
/// `PendingDeadlineExceeded` and that reason as its cause.
pub fn apply_pending_deadline(meta: &ObjectMeta, state: JobState, now: SystemTime) -> JobState {
    if state.status != JobStatus::Pending || !state.is_blocked() {
        return state;
    }
    let Some(deadline) = pending_deadline(meta) else {
        return state;
    };
    let waited = now.duration_since(created_at(meta)).unwrap_or_default();
    if waited <= deadline {
        return state;
    }
    let waited = Duration::from_secs(waited.as_secs());
    JobState::new(JobStatus::Failed).with_reason(StatusReason::PendingDeadlineExceeded {
        waited,
        cause: state.reason.map(Box::new),
    })
}

/// True once a pod's container started (its log can be read).
pub fn pod_started(pod: &Pod) -> bool {
    let Some(s) = pod.status.as_ref() else {
        return false;
    };
    if matches!(s.phase.as_deref(), Some("Running" | "Succeeded" | "Failed")) {
        return s
            .container_statuses
            .as_ref()
            .and_then(|c| c.first())
            .and_then(|c| c.state.as_ref())
            .is_none_or(|st| st.waiting.is_none());
    }
    false
}

fn timestamp(t: &Time) -> kinetic_core::record::UtcTimestamp {
    let secs = t.0.as_second();
    kinetic_core::record::UtcTimestamp::from_unix_seconds(secs.max(0).unsigned_abs())
}

/// How a pod's attempt ended, if it did: succeeded, preempted or evicted
/// (its `DisruptionTarget` condition, or the kubelet's `Evicted`), else
/// failed (an exit, out of memory, a deadline).
pub fn pod_outcome(pod: &Pod) -> Option<Outcome> {
    match phase(pod) {
        "Succeeded" => Some(Outcome::Succeeded),
        "Failed" => Some(match failure_reason(pod) {
            Some(StatusReason::Preempted) => Outcome::Preempted,
            Some(StatusReason::Evicted { .. }) => Outcome::Evicted,
            _ => Outcome::Failed,
        }),
        _ => None,
    }
}

/// The attempts a job's pods made, one per pod in the order they ran:
/// by creation time, and within a second (creation times are whole
/// seconds) failed pods before the running or succeeded one, earlier
/// ends first, then by start; each with its
/// name, start, end (its container's `finishedAt`), outcome and, for a
/// failure, why.
pub fn pod_attempts(pods: &[Pod]) -> Vec<Attempt> {
    // Each pod's facts, read once: its outcome, its container's end and
    // its start.
    let mut seen: Vec<_> = pods
        .iter()
        .map(|pod| {
            let ended = first_container(pod)
                .and_then(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref());
            // A pod the kubelet took has a `startTime` while still
            // Pending (pulling its image): it has not started running.
            let started = pod
                .status
                .as_ref()
                .and_then(|s| s.start_time.as_ref())
                .filter(|_| phase(pod) != "Pending");
            (pod, pod_outcome(pod), ended, started)
        })
        .collect();
    // Timestamps have whole seconds, so a failed pod and its replacement
    // often tie. A Job replaces a pod only once it failed, so the one still
    // running or the one that succeeded is the newest, and a pod that
    // ended earlier ran earlier.
    seen.sort_by_key(|(pod, outcome, ended, started)| {
        (
            pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
            matches!(outcome, None | Some(Outcome::Succeeded)),
            ended.is_none(),
            ended.map(|t| t.0),
            started.map(|t| t.0),
        )
    });
    seen.into_iter()
        .enumerate()
        .map(|(i, (pod, outcome, ended, started))| Attempt {
            number: u32::try_from(i + 1).unwrap_or(u32::MAX),
            host: pod.metadata.name.clone().unwrap_or_default(),
            started: started.map(timestamp),
            ended: ended.map(timestamp).filter(|_| outcome.is_some()),
            outcome,
            reason: match outcome {
                Some(Outcome::Succeeded) | None => None,
                Some(_) => failure_reason(pod).map(|r| r.to_string()),
            },
        })
        .collect()
}

/// The pods a workload's controller created, from the events about it
/// that `about` picks: each `SuccessfulCreate` (`Created pod: NAME`) as
/// the pod's name and when it was created. Events outlive the pods: a pod
/// the pod garbage collector or an eviction deleted is still named here.
pub fn created_pods(
    events: &[Event],
    about: impl Fn(&Event) -> bool,
) -> Vec<(String, Option<Time>)> {
    let mut created: Vec<_> = events
        .iter()
        .filter(|e| about(e) && e.reason.as_deref() == Some("SuccessfulCreate"))
        .filter_map(|e| {
            let name = e.message.as_deref()?.strip_prefix("Created pod: ")?.trim();
            let when = e
                .first_timestamp
                .clone()
                .or_else(|| e.last_timestamp.clone());
            Some((name.to_owned(), when))
        })
        .collect();
    created.sort_by(|a, b| a.1.cmp(&b.1));
    created.dedup_by(|a, b| a.0 == b.0);
    created
}

/// The attempts of a job from its pods ([`pod_attempts`]) and the pods its
/// controller created ([`created_pods`]), keyed by pod: a created pod no
/// longer there (deleted by the pod garbage collector once its node was
/// gone, or evicted, before its end was seen) is an attempt that ended
/// [`Outcome::Evicted`], in the order the pods were created. So the count
/// of attempts, and a budget spent, do not start again when pods go.
pub fn job_attempts(pods: &[Pod], created: &[(String, Option<Time>)]) -> Vec<Attempt> {
    let present = pod_attempts(pods);
    let created_at = |name: &str| {
        pods.iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .and_then(|p| p.metadata.creation_timestamp.clone())
    };
    let mut gone: Vec<(Option<Time>, Attempt)> = created
        .iter()
        .filter(|(name, _)| !present.iter().any(|a| &a.host == name))
        .map(|(name, when)| {
            (
                when.clone(),
                Attempt {
                    number: 0,
                    host: name.clone(),
                    started: None,
                    ended: None,
                    outcome: Some(Outcome::Evicted),
                    reason: Some(budget::DELETED_POD.to_owned()),
                },
            )
        })
        .collect();
    if gone.is_empty() {
        return present;
    }
    // A deleted pod goes before the present pods created at or after it
    // (a pod is replaced only once it ended).
    let mut out: Vec<Attempt> = Vec::with_capacity(present.len() + gone.len());
    gone.reverse();
    for attempt in present {
        let at = created_at(&attempt.host);
        while let Some((when, _)) = gone.last() {
            if at.is_some() && when.is_some() && when > &at {
                break;
            }
            if let Some((_, g)) = gone.pop() {
                out.push(g);
            }
        }
        out.push(attempt);
    }
    out.extend(gone.into_iter().rev().map(|(_, g)| g));
    for (i, a) in out.iter_mut().enumerate() {
        a.number = u32::try_from(i + 1).unwrap_or(u32::MAX);
    }
    out
}

/// `state` under the job's failure budgets, from its attempts (see
/// [`kinetic_core::budget::decide`]): once more infrastructure failures
/// ended its attempts than `budgets.restarts` allows, the job is `FAILED`
/// with [`StatusReason::RestartsSpent`] (whatever its newest pod does);
/// while a later attempt runs, a state without a blocking reason says
/// which attempt it is ([`StatusReason::Restarting`]). The attempts go
/// with the state. A terminal state other than a success is kept.
pub fn apply_budgets(state: JobState, budgets: Budgets, attempts: Vec<Attempt>) -> JobState {
    let ended: Vec<Outcome> = attempts.iter().filter_map(|a| a.outcome).collect();
    if state.status != JobStatus::Succeeded
        && let Decision::Fail { after, .. } = budget::decide(budgets, &ended)
        && after.is_infrastructure()
    {
        let times = u32::try_from(ended.iter().filter(|o| o.is_infrastructure()).count())
            .unwrap_or(u32::MAX);
        return JobState::new(JobStatus::Failed)
            .with_reason(StatusReason::RestartsSpent {
                after,
                times,
                budget: budgets.restarts,
            })
            .with_attempts(attempts);
    }
    let live = attempts.last().is_some_and(|a| a.outcome.is_none());
    let previous = ended.last().copied();
    let mut state = state;
    if !state.status.is_terminal()
        && live
        && attempts.len() > 1
        && !state.reason.as_ref().is_some_and(StatusReason::is_blocking)
        && let Some(after) = previous
    {
        state.reason = Some(StatusReason::Restarting {
            attempt: u32::try_from(attempts.len()).unwrap_or(u32::MAX),
            of: budgets.max_attempts(),
            after,
        });
    }
    state.with_attempts(attempts)
}
