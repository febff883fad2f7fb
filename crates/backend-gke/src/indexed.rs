//! A batch submitted in one call ([`Backend::submit_batch`]) as one
//! Indexed Job: its manifest, and its children's states from the Job and
//! its pods. Pure functions.
//!
//! - The Job (`kinetic-{group_id}`): `completionMode: Indexed`,
//!   `completions` = the inputs, `parallelism`, `backoffLimitPerIndex` =
//!   the retries per input (so an index that failed runs again alone, in
//!   a new pod, and the others never notice), a `podFailurePolicy` that
//!   fails an index at once on the runner's bad-invocation exit (2: its
//!   batch spec or input cannot be read, which a retry cannot mend), and
//!   `restartPolicy: Never`. Its pods run the runner's index mode
//!   (`--batch-spec`), with `KINETIC_INDEX_FAILURE_COUNT` from the pod's
//!   `batch.kubernetes.io/job-index-failure-count` annotation (the
//!   downward API), from which the runner knows its attempt.
//! - States: each pod is the child of its index
//!   (`batch.kubernetes.io/job-completion-index`) and attempt (its failure
//!   count + 1), in its phase, with the pod as its one attempt numbered so
//!   (what the runner gives the function as `KINETIC_ATTEMPT`); every
//!   earlier attempt of an index failed;
//!   an index in `completedIndexes` or `failedIndexes` whose pod is gone
//!   is its latest attempt seen (else attempt 1) `SUCCEEDED` or `FAILED`;
//!   an index whose latest attempt failed within `backoffLimitPerIndex`
//!   (and not on the runner's bad-invocation exit) has its next attempt's
//!   child `PENDING`, as the controller will start it;
//!   an index with no pod yet is its attempt-1 child `PENDING` — or
//!   `FAILED` once the Job failed as a whole;
//!   once the Job is being deleted, every child not ended is `FAILED
//!   (cancelled)`: its pod is stopping and nothing starts again.
//!
//! [`Backend::submit_batch`]: kinetic_core::ports::Backend::submit_batch

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::batch::v1::{
    Job, JobSpec, PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement, PodFailurePolicyRule,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinetic_core::batch::{BlockMarker, BlockRules, BlockRun, block_states, child_job_id};
use kinetic_core::ids::GroupId;
use kinetic_core::ports::{GroupStatus, PreparedBatch};
use kinetic_core::status::{JobState, JobStatus, StatusReason};
use kinetic_kube::pod::{
    self, ANNOTATION_BATCH_STOPPING, APP_KINETIC, CONTAINER_NAME, LABEL_GROUP_INDEX, LABEL_JOB_ID,
    ManifestOptions,
};
use kinetic_kube::status::{failure_reason, is_live, pending_reason, pod_attempts, pod_phase};
use kinetic_kube::workload::{BlockReads, batch_object_name};
use serde_json::{Value, json};

/// The pod label (and annotation) holding an Indexed Job pod's index.
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// The pod annotation holding the failures of the pod's index so far
/// (Jobs with `backoffLimitPerIndex`).
pub const INDEX_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-failure-count";
/// The variable that gives the runner the failures of its index.
pub const INDEX_FAILURES_ENV: &str = "KINETIC_INDEX_FAILURE_COUNT";
/// The Job annotation of a batch in blocks: its inputs per index.
pub const ANNOTATION_BLOCK_SIZE: &str = "kinetic.dev/block-size";
/// The Job annotation of a batch in blocks: how many times its pods run
/// an input again (the runner does; the Job's per-index limit is the
/// block's pods').
pub const ANNOTATION_INPUT_RETRIES: &str = "kinetic.dev/input-retries";
/// The Job annotation of a batch in blocks: how many inputs (its last
/// block may hold fewer than the others).
pub const ANNOTATION_INPUTS: &str = "kinetic.dev/inputs";
/// The most pods one block may lose (`backoffLimitPerIndex` of a batch in
/// blocks): each lost pod costs the attempt it was running, so a block
/// needs at most one per attempt of its inputs.
const MAX_BLOCK_POD_FAILURES: usize = 1000;

/// The runner's exit on a bad invocation (its batch spec or input cannot
/// be read): the index fails at once, unretried.
pub const EXIT_BAD_INVOCATION: i32 = 2;

/// The Indexed Job of `batch` (see the module's documentation). The
/// shared job's labels are the Job's and its pods', but `job-id` and
/// `group-index` (each pod is a different child).
pub fn batch_manifest(batch: &PreparedBatch, options: &ManifestOptions) -> Job {
    let mut shared = batch.job.clone();
    shared.record.k8s_name = batch_object_name(&batch.group_id);
    shared.record.group_id = Some(batch.group_id.clone());
    shared.record.group_index = None;
    let mut labels = pod::labels(&shared, APP_KINETIC);
    labels.remove(LABEL_JOB_ID);
    labels.remove(LABEL_GROUP_INDEX);
    let settings = pod::PodSettings::new("Never").with_env(vec![
        pod::field_env(kinetic_core::budget::POD_NAME_ENV, "metadata.name"),
        pod::field_env(crate::manifest::NODE_IPS_ENV, "status.podIP"),
        pod::field_env(
            INDEX_FAILURES_ENV,
            &format!("metadata.annotations['{INDEX_FAILURE_COUNT}']"),
        ),
    ]);
    let mut template = pod::pod_template(&shared, options, APP_KINETIC, settings);
    if let Some(meta) = template.metadata.as_mut()
        && let Some(l) = meta.labels.as_mut()
    {
        l.remove(LABEL_JOB_ID);
        l.remove(LABEL_GROUP_INDEX);
    }
    if let Some(spec) = template.spec.as_mut() {
        for c in &mut spec.containers {
            if let Some(command) = c.command.as_mut() {
                for arg in command.iter_mut() {
                    if arg == "--spec" {
                        *arg = "--batch-spec".to_owned();
                    }
                }
            }
        }
    }
    let to_i32 = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let mut annotations = pod::annotations(&shared, options);
    let indexes = batch.indexes();
    // One input per index: the Job retries each input. In blocks: the
    // block's pod retries its inputs itself, and the Job replaces a pod
    // that died, once per attempt that pod can have been running at most.
    let per_index_limit = if batch.block_size > 1 {
        annotations.insert(
            ANNOTATION_BLOCK_SIZE.to_owned(),
            batch.block_size.to_string(),
        );
        annotations.insert(ANNOTATION_INPUTS.to_owned(), batch.inputs.to_string());
        annotations.insert(
            ANNOTATION_INPUT_RETRIES.to_owned(),
            batch.retries_per_input.to_string(),
        );
        let attempts = usize::try_from(batch.retries_per_input).unwrap_or(usize::MAX);
        batch
            .block_size
            .saturating_mul(attempts.saturating_add(1))
            .min(MAX_BLOCK_POD_FAILURES)
    } else {
        usize::try_from(batch.retries_per_input).unwrap_or(usize::MAX)
    };
    Job {
        metadata: ObjectMeta {
            name: Some(shared.record.k8s_name.clone()),
            namespace: Some(shared.record.namespace.clone()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".to_owned()),
            completions: Some(to_i32(indexes)),
            parallelism: Some(to_i32(batch.parallelism.min(indexes))),
            backoff_limit_per_index: Some(to_i32(per_index_limit)),
            pod_failure_policy: Some(PodFailurePolicy {
                rules: vec![PodFailurePolicyRule {
                    action: "FailIndex".to_owned(),
                    on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                        container_name: Some(CONTAINER_NAME.to_owned()),
                        operator: "In".to_owned(),
                        values: vec![EXIT_BAD_INVOCATION],
                    }),
                    on_pod_conditions: None,
                }],
            }),
            ttl_seconds_after_finished: Some(options.ttl_seconds_after_finished),
            template,
            ..JobSpec::default()
        }),
        status: None,
    }
}

/// The indexes a compressed interval string names (`"1,3-5"`): what the
/// Job controller writes in `completedIndexes` and `failedIndexes`.
pub fn parse_indexes(text: &str) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.trim().parse::<usize>(), b.trim().parse::<usize>()) {
            out.extend(a..=b);
        }
    }
    out
}

fn annotation_number(pod: &Pod, key: &str) -> Option<usize> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)?
        .trim()
        .parse()
        .ok()
}

fn pod_index(pod: &Pod) -> Option<usize> {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(COMPLETION_INDEX))
        .and_then(|v| v.parse().ok())
        .or_else(|| annotation_number(pod, COMPLETION_INDEX))
}

/// A pod's state as its child's, with the pod as the child's one
/// attempt, numbered `attempt` (its index's failures + 1, the number the
/// runner gives the function as `KINETIC_ATTEMPT`).
fn pod_state(pod: &Pod, attempt: u32) -> JobState {
    let attempts = pod_attempts(std::slice::from_ref(pod))
        .into_iter()
        .map(|a| kinetic_core::budget::Attempt {
            number: attempt,
            ..a
        })
        .collect();
    pod_phase_state(pod).with_attempts(attempts)
}

/// A pod's phase as its child's state.
fn pod_phase_state(pod: &Pod) -> JobState {
    match pod_phase(pod) {
        "Succeeded" => JobState::new(JobStatus::Succeeded),
        "Failed" => match failure_reason(pod) {
            Some(reason) => JobState::new(JobStatus::Failed).with_reason(reason),
            None => JobState::new(JobStatus::Failed),
        },
        "Running" => JobState::new(JobStatus::Running),
        _ => match pending_reason(pod) {
            Some(reason) => JobState::new(JobStatus::Pending).with_reason(reason),
            None => JobState::new(JobStatus::Pending),
        },
    }
}

fn failed_condition(job: &Job) -> Option<String> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Failed" && c.status == "True")
        .map(|c| {
            c.message
                .clone()
                .or_else(|| c.reason.clone())
                .unwrap_or_default()
        })
}

/// Every child's state of the batch `job` runs, from it and its pods (see
/// the module's documentation); `None` when `job` is not an Indexed Job.
pub fn batch_states(
    job: &Job,
    pods: &[Pod],
    markers: &BTreeMap<usize, Vec<BlockMarker>>,
) -> Option<GroupStatus> {
    let spec = job.spec.as_ref()?;
    if spec.completion_mode.as_deref() != Some("Indexed") {
        return None;
    }
    let (group, completions, completed, failed) = job_indexes(job)?;
    let job_failed = failed_condition(job);
    let retries = spec
        .backoff_limit_per_index
        .and_then(|r| u32::try_from(r).ok())
        .unwrap_or(0);
    let stopping = job
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANNOTATION_BATCH_STOPPING));
    let mut out = GroupStatus::new();
    if let Some(blocks) = Blocks::of(job) {
        let mut by_block: BTreeMap<usize, Vec<&Pod>> = BTreeMap::new();
        for p in pods {
            if let Some(index) = pod_index(p).filter(|i| *i < completions) {
                by_block.entry(index).or_default().push(p);
            }
        }
        let none = Vec::new();
        for block in 0..completions {
            let block_pods = by_block.get(&block).map_or(&[][..], Vec::as_slice);
            let run = if completed.contains(&block) {
                BlockRun::Completed
            } else if failed.contains(&block) {
                BlockRun::Ended(block_failure(block_pods, spec.backoff_limit_per_index))
            } else if let Some(message) = &job_failed {
                BlockRun::Ended(format!("the batch's Job failed: {message}"))
            } else if let Some(active) = block_pods.iter().find(|p| is_live(p)) {
                BlockRun::Active(active.metadata.name.clone().unwrap_or_default())
            } else if block_pods.iter().any(|p| pod_phase(p) == "Succeeded") {
                // Ended well, before the controller counted the index.
                BlockRun::Completed
            } else if block_pods.is_empty() {
                BlockRun::Waiting
            } else {
                BlockRun::Restarting
            };
            let rules = blocks.rules(block, stopping);
            let found = markers.get(&block).unwrap_or(&none);
            for (input, attempt, state) in block_states(&rules, found, &run) {
                out.insert(child_job_id(&group, input, attempt), state);
            }
        }
    } else {
        let indexes = Indexes {
            completions,
            completed,
            failed,
            job_failed,
            retries,
            stopping,
        };
        index_states(&mut out, &group, pods, &indexes);
    }
    if job.metadata.deletion_timestamp.is_some() {
        // The Job is being deleted (a cancel, a cleanup, or `kubectl
        // delete`): its pods are stopped and no index starts again, though
        // the Job stays until its pods are gone (a foreground deletion
        // waits their grace period). Read through that time, an index
        // would look running, or pending with its pod gone.
        for state in out.values_mut() {
            if !state.status.is_terminal() {
                *state = JobState::new(JobStatus::Failed)
                    .with_reason(StatusReason::Cancelled)
                    .with_attempts(std::mem::take(&mut state.attempts));
            }
        }
    }
    Some(out)
}

/// What a Job of one input per index says of its indexes.
struct Indexes {
    completions: usize,
    completed: BTreeSet<usize>,
    failed: BTreeSet<usize>,
    /// The message of its `Failed` condition.
    job_failed: Option<String>,
    /// `backoffLimitPerIndex`.
    retries: u32,
    stopping: bool,
}

/// The children's states of a batch of one input per index (see the
/// module's documentation).
fn index_states(out: &mut GroupStatus, group: &GroupId, pods: &[Pod], job: &Indexes) {
    let Indexes {
        completions,
        completed,
        failed,
        job_failed,
        retries,
        stopping,
    } = job;
    let (completions, retries, stopping) = (*completions, *retries, *stopping);
    // The latest attempt seen of each index, and the states by child.
    let mut latest: BTreeMap<usize, u32> = BTreeMap::new();
    let mut pods: Vec<&Pod> = pods.iter().collect();
    pods.sort_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0));
    for p in pods {
        let Some(index) = pod_index(p).filter(|i| *i < completions) else {
            continue;
        };
        let failures = annotation_number(p, INDEX_FAILURE_COUNT).unwrap_or(0);
        let attempt = u32::try_from(failures + 1).unwrap_or(u32::MAX);
        let entry = latest.entry(index).or_insert(attempt);
        *entry = (*entry).max(attempt);
        out.insert(child_job_id(group, index, attempt), pod_state(p, attempt));
    }
    for index in 0..completions {
        let seen = latest.get(&index).copied();
        let last = seen.unwrap_or(1);
        for earlier in 1..last {
            out.entry(child_job_id(group, index, earlier))
                .or_insert_with(|| JobState::new(JobStatus::Failed));
        }
        let id = child_job_id(group, index, last);
        let (current, attempts) = out
            .get(&id)
            .map_or((None, Vec::new()), |s| (Some(s.status), s.attempts.clone()));
        let settled = if completed.contains(&index) {
            Some(JobState::new(JobStatus::Succeeded))
        } else if failed.contains(&index) {
            Some(JobState::new(JobStatus::Failed))
        } else {
            None
        };
        match (settled, current) {
            (Some(state), Some(s)) if !s.is_terminal() || s != state.status => {
                // The pod is still its attempt.
                out.insert(id, state.with_attempts(attempts));
            }
            (Some(state), None) => {
                out.insert(id, state);
            }
            (None, None) => {
                let state = match job_failed {
                    Some(message) => {
                        JobState::new(JobStatus::Failed).with_reason(StatusReason::BackendError {
                            message: format!(
                                "the batch's Job failed before this input ran: {message}"
                            ),
                        })
                    }
                    None => JobState::new(JobStatus::Pending),
                };
                out.insert(id, state);
            }
            (None, Some(JobStatus::Failed)) if job_failed.is_none() && !stopping => {
                // Within its per-index limit, and not failed by the pod
                // failure policy, the controller runs the index again:
                // that attempt's child is pending already.
                let exit = out.get(&id).and_then(|s| match s.reason {
                    Some(StatusReason::ExitCode { code }) => Some(code),
                    _ => None,
                });
                if last <= retries && exit != Some(EXIT_BAD_INVOCATION) {
                    out.insert(
                        child_job_id(group, index, last + 1),
                        JobState::new(JobStatus::Pending),
                    );
                }
            }
            _ => {}
        }
    }
}

/// Why a block's index failed, from its pods: its last pod's bad
/// invocation (the runner's exit 2: its batch spec or its inputs could not
/// be read, which the Job's pod failure policy does not retry), or its
/// pods' failures past the Job's per-index limit.
fn block_failure(pods: &[&Pod], limit: Option<i32>) -> String {
    let failed: Vec<&&Pod> = pods.iter().filter(|p| pod_phase(p) == "Failed").collect();
    let last = failed
        .iter()
        .max_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0));
    let exit = last.and_then(|p| match failure_reason(p) {
        Some(StatusReason::ExitCode { code }) => Some(code),
        _ => None,
    });
    if exit == Some(EXIT_BAD_INVOCATION) {
        return format!(
            "its pod could not read the batch spec or its inputs (the runner's exit {EXIT_BAD_INVOCATION}, not retried; its log says why)"
        );
    }
    format!(
        "its pods failed {} time(s), past the Job's limit for one block ({})",
        failed.len(),
        limit.unwrap_or(0)
    )
}

/// A batch Job's group, its completions, and its completed and failed
/// indexes; `None` for a Job with no group label.
fn job_indexes(job: &Job) -> Option<(GroupId, usize, BTreeSet<usize>, BTreeSet<usize>)> {
    let group = job
        .metadata
        .labels
        .as_ref()?
        .get(pod::LABEL_GROUP_ID)?
        .parse()
        .ok()?;
    let completions = usize::try_from(job.spec.as_ref()?.completions.unwrap_or(0)).unwrap_or(0);
    let status = job.status.as_ref();
    let indexes = |text: Option<&str>| parse_indexes(text.unwrap_or(""));
    Some((
        group,
        completions,
        indexes(status.and_then(|s| s.completed_indexes.as_deref())),
        indexes(status.and_then(|s| s.failed_indexes.as_deref())),
    ))
}

/// What a batch in blocks says of its blocks (its annotations).
#[derive(Debug, Clone, Copy)]
struct Blocks {
    size: usize,
    inputs: usize,
    retries: u32,
}

impl Blocks {
    /// `None` for a batch of one input per index.
    fn of(job: &Job) -> Option<Self> {
        let number = |key: &str| {
            job.metadata
                .annotations
                .as_ref()?
                .get(key)?
                .trim()
                .parse::<usize>()
                .ok()
        };
        let size = number(ANNOTATION_BLOCK_SIZE).filter(|s| *s > 1)?;
        Some(Self {
            size,
            inputs: number(ANNOTATION_INPUTS)?,
            retries: number(ANNOTATION_INPUT_RETRIES)
                .and_then(|r| u32::try_from(r).ok())
                .unwrap_or(0),
        })
    }

    fn rules(&self, block: usize, stopping: bool) -> BlockRules {
        let first = block.saturating_mul(self.size);
        BlockRules {
            first,
            len: self.size.min(self.inputs.saturating_sub(first)),
            retries: self.retries,
            stopping,
        }
    }
}

/// The blocks of a batch in blocks whose markers a status read lists
/// ([`BlockReads`]), `None` for any other Job: each block a pod of which
/// the Job still has, each block whose index ended (its markers are then
/// final: listed once), and each block below the highest of those (the
/// Job controller starts indexes in order, so one there without a pod
/// lost it, to an eviction or the pod garbage collector). A block above
/// them has not started: its inputs are pending, nothing to list.
pub fn block_reads(job: &Job, pods: &[Pod]) -> Option<BlockReads> {
    Blocks::of(job)?;
    let (group, completions, mut ended, failed) = job_indexes(job)?;
    ended.extend(failed);
    let with_pods: BTreeSet<usize> = pods.iter().filter_map(pod_index).collect();
    let highest = ended.iter().chain(&with_pods).copied().max();
    let blocks = highest.map_or_else(Vec::new, |h| {
        (0..=h.min(completions.saturating_sub(1)))
            .map(|b| (b, ended.contains(&b)))
            .collect()
    });
    Some(BlockReads {
        group_id: group,
        blocks,
    })
}

/// The merge patch that keeps `job`'s running indexes and starts no
/// other: `parallelism` lowered to the pods still running or pending (the
/// Job controller keeps at most `parallelism` active pods and deletes the
/// newest beyond it, so the count of active pods keeps them all), and the
/// stopping annotation, so that each status read lowers it again as they
/// end. `None` when both are in place already.
pub fn stop_patch(job: &Job, pods: &[Pod]) -> Option<Value> {
    let active = pods.iter().filter(|p| is_live(p)).count();
    let parallelism = job
        .spec
        .as_ref()
        .and_then(|s| s.parallelism)
        .and_then(|p| usize::try_from(p).ok())
        .unwrap_or(1);
    let marked = job
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANNOTATION_BATCH_STOPPING));
    if marked && parallelism <= active {
        return None;
    }
    Some(json!({
        "metadata": {"annotations": {ANNOTATION_BATCH_STOPPING: "true"}},
        "spec": {"parallelism": active.min(parallelism)},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kinetic_core::ids::GroupId;

    const GROUP: &str = "grp-0a1b2c3d";

    fn job(completed: &str, failed: &str, conditions: Value) -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": "kinetic-grp-0a1b2c3d", "labels": {"group-id": GROUP}},
            "spec": {"completionMode": "Indexed", "completions": 5, "parallelism": 3,
                     "backoffLimitPerIndex": 1,
                     "template": {"spec": {"containers": []}}},
            "status": {"completedIndexes": completed, "failedIndexes": failed, "conditions": conditions},
        }))
        .expect("a Job")
    }

    fn pod(index: usize, failures: Option<usize>, phase: &str, exit: Option<i32>, at: &str) -> Pod {
        let mut annotations = json!({COMPLETION_INDEX: index.to_string()});
        if let Some(f) = failures {
            annotations[INDEX_FAILURE_COUNT] = json!(f.to_string());
        }
        let state = match exit {
            Some(code) => json!({"terminated": {"exitCode": code}}),
            None => json!({"running": {}}),
        };
        serde_json::from_value(json!({
            "metadata": {"name": format!("p-{index}-{at}"), "creationTimestamp": at,
                         "labels": {COMPLETION_INDEX: index.to_string()}, "annotations": annotations},
            "status": {"phase": phase, "containerStatuses": [{"name": CONTAINER_NAME, "state": state,
                       "ready": phase == "Running", "restartCount": 0, "image": "i", "imageID": ""}]},
        }))
        .expect("a Pod")
    }

    fn id(index: usize, attempt: u32) -> kinetic_core::ids::JobId {
        let g: GroupId = GROUP.parse().expect("group");
        child_job_id(&g, index, attempt)
    }

    #[test]
    fn each_index_is_its_latest_attempts_child_and_earlier_attempts_failed() {
        let pods = [
            pod(0, Some(0), "Succeeded", Some(0), "2026-01-01T00:00:00Z"),
            pod(1, Some(0), "Failed", Some(3), "2026-01-01T00:00:01Z"),
            pod(1, Some(1), "Running", None, "2026-01-01T00:00:05Z"),
            pod(3, None, "Failed", Some(3), "2026-01-01T00:00:02Z"),
        ];
        let states = batch_states(&job("0,4", "3", json!([])), &pods, &BTreeMap::new())
            .expect("an Indexed Job");
        let status = |i, a| states.get(&id(i, a)).map(|s| s.status);
        assert_eq!(status(0, 1), Some(JobStatus::Succeeded));
        assert_eq!(status(1, 1), Some(JobStatus::Failed));
        assert_eq!(
            states[&id(1, 1)].reason,
            Some(StatusReason::ExitCode { code: 3 })
        );
        assert_eq!(status(1, 2), Some(JobStatus::Running));
        // Each pod is its child's attempt, numbered as the index's.
        let attempts = |i, a| {
            states[&id(i, a)]
                .attempts
                .iter()
                .map(|t| (t.number, t.host.clone(), t.outcome))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            attempts(1, 1),
            [(
                1,
                "p-1-2026-01-01T00:00:01Z".to_owned(),
                Some(kinetic_core::budget::Outcome::Failed)
            )]
        );
        assert_eq!(
            attempts(1, 2),
            [(2, "p-1-2026-01-01T00:00:05Z".to_owned(), None)]
        );
        assert!(
            attempts(4, 1).is_empty(),
            "no pod, no attempt seen: {states:?}"
        );
        assert_eq!(status(2, 1), Some(JobStatus::Pending), "not started yet");
        assert_eq!(status(3, 1), Some(JobStatus::Failed));
        assert_eq!(
            status(4, 1),
            Some(JobStatus::Succeeded),
            "a completed index whose pod is gone"
        );
        assert_eq!(states.len(), 6, "{states:?}");
    }

    #[test]
    fn a_failed_attempt_within_the_limit_has_its_next_attempt_pending() {
        let pods = [
            pod(0, Some(0), "Failed", Some(3), "2026-01-01T00:00:00Z"),
            pod(
                1,
                Some(0),
                "Failed",
                Some(EXIT_BAD_INVOCATION),
                "2026-01-01T00:00:00Z",
            ),
            pod(2, Some(1), "Failed", Some(3), "2026-01-01T00:00:00Z"),
        ];
        let states =
            batch_states(&job("", "", json!([])), &pods, &BTreeMap::new()).expect("an Indexed Job");
        assert_eq!(states[&id(0, 1)].status, JobStatus::Failed);
        assert_eq!(
            states[&id(0, 2)].status,
            JobStatus::Pending,
            "retried by the controller"
        );
        assert!(
            !states.contains_key(&id(1, 2)),
            "FailIndex on exit 2: no retry"
        );
        assert_eq!(states[&id(2, 2)].status, JobStatus::Failed);
        assert!(
            !states.contains_key(&id(2, 3)),
            "past backoffLimitPerIndex 1: {states:?}"
        );
        let mut stopping = job("", "", json!([]));
        stopping.metadata.annotations =
            Some([(ANNOTATION_BATCH_STOPPING.to_owned(), "true".to_owned())].into());
        let states = batch_states(&stopping, &pods[..1], &BTreeMap::new()).expect("an Indexed Job");
        assert!(
            !states.contains_key(&id(0, 2)),
            "a stopping batch starts nothing: {states:?}"
        );
    }

    #[test]
    fn inputs_that_never_ran_fail_with_their_job() {
        let failed = json!([{"type": "Failed", "status": "True", "reason": "DeadlineExceeded",
                             "message": "Job was active longer than specified deadline"}]);
        let states =
            batch_states(&job("0", "", failed), &[], &BTreeMap::new()).expect("an Indexed Job");
        assert_eq!(states[&id(0, 1)].status, JobStatus::Succeeded);
        let never = &states[&id(2, 1)];
        assert_eq!(never.status, JobStatus::Failed);
        assert!(
            matches!(&never.reason, Some(StatusReason::BackendError { message }) if message.contains("longer than specified deadline")),
            "{never:?}"
        );
    }

    #[test]
    fn every_input_not_ended_of_a_job_being_deleted_is_cancelled() {
        let pods = [
            pod(0, Some(0), "Succeeded", Some(0), "2026-01-01T00:00:00Z"),
            pod(1, Some(0), "Running", None, "2026-01-01T00:00:01Z"),
            pod(2, Some(0), "Failed", Some(3), "2026-01-01T00:00:02Z"),
            pod(3, Some(0), "Failed", Some(3), "2026-01-01T00:00:03Z"),
            pod(3, Some(1), "Failed", Some(3), "2026-01-01T00:00:04Z"),
        ];
        let live = batch_states(&job("0", "3", json!([])), &pods, &BTreeMap::new())
            .expect("an Indexed Job");
        assert_eq!(live[&id(1, 1)].status, JobStatus::Running);
        assert_eq!(live[&id(2, 2)].status, JobStatus::Pending, "retried");
        assert_eq!(live[&id(4, 1)].status, JobStatus::Pending, "not started");
        let mut deleting = job("0", "3", json!([]));
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:05Z".parse().expect("a time"),
            ));
        deleting.metadata.finalizers = Some(vec!["foregroundDeletion".into()]);
        // Its pods are being deleted too: a terminating pod still runs.
        let states = batch_states(&deleting, &pods, &BTreeMap::new()).expect("an Indexed Job");
        let cancelled = JobState::new(JobStatus::Failed).with_reason(StatusReason::Cancelled);
        for (i, a) in [(1, 1), (2, 2), (4, 1)] {
            let state = &states[&id(i, a)];
            assert_eq!(
                (state.status, &state.reason),
                (cancelled.status, &cancelled.reason),
                "input {i} attempt {a}: {states:?}"
            );
        }
        assert_eq!(
            states[&id(1, 1)].attempts.len(),
            1,
            "the stopped pod is still its attempt"
        );
        // What ended stays as it ended.
        assert_eq!(states[&id(0, 1)].status, JobStatus::Succeeded);
        assert_eq!(
            states[&id(2, 1)].reason,
            Some(StatusReason::ExitCode { code: 3 })
        );
        assert_eq!(
            states[&id(3, 2)].reason,
            Some(StatusReason::ExitCode { code: 3 })
        );
        assert_eq!(states.len(), live.len(), "{states:?}");
    }

    #[test]
    fn a_job_of_one_input_is_no_batch() {
        let mut one = job("", "", json!([]));
        one.spec.as_mut().expect("spec").completion_mode = Some("NonIndexed".into());
        assert!(batch_states(&one, &[], &BTreeMap::new()).is_none());
    }

    #[test]
    fn stopping_lowers_parallelism_to_the_pods_running_until_it_is_there() {
        let running = [
            pod(0, None, "Running", None, "2026-01-01T00:00:00Z"),
            pod(1, None, "Pending", None, "2026-01-01T00:00:00Z"),
            pod(2, None, "Succeeded", Some(0), "2026-01-01T00:00:00Z"),
        ];
        let j = job("2", "", json!([]));
        let patch = stop_patch(&j, &running).expect("a patch");
        assert_eq!(patch["spec"]["parallelism"], 2);
        assert_eq!(
            patch["metadata"]["annotations"][ANNOTATION_BATCH_STOPPING],
            "true"
        );
        let mut stopped = j.clone();
        stopped.spec.as_mut().expect("spec").parallelism = Some(2);
        stopped.metadata.annotations =
            Some([(ANNOTATION_BATCH_STOPPING.to_owned(), "true".to_owned())].into());
        assert_eq!(stop_patch(&stopped, &running), None);
        // One of them ended: lower it again.
        let patch = stop_patch(&stopped, &running[..1]).expect("lower again");
        assert_eq!(patch["spec"]["parallelism"], 1);
    }

    /// A batch of 5 inputs in blocks of 2 (3 blocks), each input retried
    /// once by its block's pod.
    fn block_job(completed: &str, failed: &str) -> Job {
        let mut job = job(completed, failed, json!([]));
        job.spec.as_mut().expect("spec").completions = Some(3);
        job.metadata.annotations = Some(
            [
                (ANNOTATION_BLOCK_SIZE, "2"),
                (ANNOTATION_INPUTS, "5"),
                (ANNOTATION_INPUT_RETRIES, "1"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        );
        job
    }

    /// A marker of input `input`, written by its block's pod (blocks of
    /// two; block `b`'s pod is `pod(b, …)` made at second `b`).
    fn marker(input: usize, attempt: u32, code: Option<i32>, at_ms: u64) -> BlockMarker {
        let block = input / 2;
        BlockMarker {
            input,
            attempt,
            kind: code.map_or(kinetic_core::batch::MarkerKind::Start, |c| {
                kinetic_core::batch::MarkerKind::Exit(c)
            }),
            at_ms,
            pod: format!("p-{block}-2026-01-01T00:00:0{block}Z").into(),
        }
    }

    #[test]
    fn a_batch_in_blocks_reads_each_input_from_its_blocks_markers() {
        // Block 0 ended; block 1's pod runs input 2's retry; block 2 has
        // not started.
        let pods = [
            pod(0, None, "Succeeded", Some(0), "2026-01-01T00:00:00Z"),
            pod(1, None, "Running", None, "2026-01-01T00:00:01Z"),
        ];
        let markers = BTreeMap::from([
            (
                0,
                vec![
                    marker(0, 1, None, 1),
                    marker(0, 1, Some(0), 2),
                    marker(1, 1, None, 3),
                    marker(1, 1, Some(0), 4),
                ],
            ),
            (
                1,
                vec![
                    marker(2, 1, None, 5),
                    marker(2, 1, Some(1), 6),
                    marker(2, 2, None, 7),
                ],
            ),
        ]);
        let blocks = block_job("0", "");
        let states = batch_states(&blocks, &pods, &markers).expect("a batch");
        let status = |i, a| states.get(&id(i, a)).map(|s| s.status);
        assert_eq!(status(0, 1), Some(JobStatus::Succeeded));
        assert_eq!(status(1, 1), Some(JobStatus::Succeeded));
        assert_eq!(status(2, 1), Some(JobStatus::Failed));
        assert_eq!(status(2, 2), Some(JobStatus::Running));
        assert_eq!(status(3, 1), Some(JobStatus::Pending));
        assert_eq!(status(4, 1), Some(JobStatus::Pending));
        assert_eq!(states.len(), 6, "{states:?}");
        // The blocks to list: those with a pod, and the ended one as
        // final; block 2 is above them: nothing to list.
        let reads = block_reads(&blocks, &pods).expect("a batch in blocks");
        assert_eq!(reads.blocks, vec![(0, true), (1, false)]);
        assert_eq!(reads.group_id.to_string(), GROUP);
        // A block below the highest seen, with no pod and not ended, lost
        // its pod: it is listed too.
        let reads = block_reads(&block_job("", ""), &pods[1..]).expect("blocks");
        assert_eq!(reads.blocks, vec![(0, false), (1, false)]);
        assert!(
            block_reads(&job("", "", json!([])), &pods).is_none(),
            "one input per index"
        );
    }

    #[test]
    fn a_block_whose_pod_died_loses_its_running_attempt_and_a_failed_block_its_inputs() {
        let markers = BTreeMap::from([(0, vec![marker(0, 1, Some(0), 1), marker(1, 1, None, 2)])]);
        // Its pod failed; the Job runs the block again.
        let pods = [pod(0, None, "Failed", Some(137), "2026-01-01T00:00:00Z")];
        let states = batch_states(&block_job("", ""), &pods, &markers).expect("a batch");
        let status = |i, a| states.get(&id(i, a)).map(|s| s.status);
        assert_eq!(status(0, 1), Some(JobStatus::Succeeded));
        assert_eq!(status(1, 1), Some(JobStatus::Failed));
        assert_eq!(
            status(1, 2),
            Some(JobStatus::Pending),
            "the next pod runs it again"
        );
        // Past the Job's limit for the block: what it did not run fails.
        let states = batch_states(&block_job("", "0"), &pods, &markers).expect("a batch");
        let status = |i, a| states.get(&id(i, a)).map(|s| s.status);
        assert_eq!(status(1, 2), None);
        assert_eq!(status(1, 1), Some(JobStatus::Failed));
        assert_eq!(
            status(2, 1),
            Some(JobStatus::Pending),
            "block 1 has not started"
        );
        // Being deleted: every input not ended is cancelled.
        let mut deleting = block_job("", "");
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:09Z".parse().expect("a time"),
            ));
        let running = [pod(0, None, "Running", None, "2026-01-01T00:00:00Z")];
        let states = batch_states(&deleting, &running, &markers).expect("a batch");
        assert_eq!(states[&id(0, 1)].status, JobStatus::Succeeded);
        for (i, a) in [(1, 1), (2, 1), (4, 1)] {
            assert_eq!(
                states[&id(i, a)].reason,
                Some(StatusReason::Cancelled),
                "input {i}"
            );
        }
    }

    #[test]
    fn a_batch_in_blocks_is_a_job_of_one_index_per_block() {
        let group: GroupId = GROUP.parse().expect("group");
        let shared = kinetic_testkit::fixtures::fixed_job(
            "gke",
            "cpu",
            &[],
            kinetic_core::ports::Deadlines::default(),
        );
        let batch = PreparedBatch::new(group, shared, "gs://b/calls", 5, 4, 1)
            .expect("a batch")
            .with_block_size(2);
        let manifest = batch_manifest(&batch, &ManifestOptions::default());
        let spec = manifest.spec.as_ref().expect("spec");
        assert_eq!(spec.completions, Some(3));
        assert_eq!(spec.parallelism, Some(3), "no more pods than blocks");
        assert_eq!(
            spec.backoff_limit_per_index,
            Some(4),
            "a pod per attempt of its inputs"
        );
        let annotations = manifest.metadata.annotations.as_ref().expect("annotations");
        assert_eq!(annotations[ANNOTATION_BLOCK_SIZE], "2");
        assert_eq!(annotations[ANNOTATION_INPUTS], "5");
        assert_eq!(annotations[ANNOTATION_INPUT_RETRIES], "1");
        let one = PreparedBatch::new(
            batch.group_id.clone(),
            batch.job.clone(),
            "gs://b/calls",
            5,
            4,
            1,
        )
        .expect("a batch");
        let manifest = batch_manifest(&one, &ManifestOptions::default());
        assert_eq!(manifest.spec.as_ref().and_then(|s| s.completions), Some(5));
        assert!(
            !manifest
                .metadata
                .annotations
                .as_ref()
                .expect("annotations")
                .contains_key(ANNOTATION_BLOCK_SIZE)
        );
    }

    #[test]
    fn interval_strings_name_their_indexes() {
        assert_eq!(
            parse_indexes("1,3-5,9").into_iter().collect::<Vec<_>>(),
            vec![1, 3, 4, 5, 9]
        );
        assert!(parse_indexes("").is_empty());
    }
}
