//! [`Workload`]: a kind of Kubernetes object a job runs as, told to
//! [`KubeBackend`](crate::KubeBackend) in two parts: what differs between
//! kinds as a value ([`WorkloadTraits`]: names, the events to read, the
//! log pods, the end patch, whether logs are kept, which states are
//! written as final), and what each kind does as methods (building the
//! object, reading a state from it and its pods).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::SystemTime;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kinetic_core::batch::BlockMarker;
use kinetic_core::ids::GroupId;
use kinetic_core::ports::{
    BackendCapabilities, BackendError, GroupStatus, PreparedBatch, PreparedJob,
};
use kinetic_core::status::{JobState, JobStatus, StatusReason};
use kube::api::Api;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::pod::{LABEL_JOB_NAME, ManifestOptions};

/// Which states [`KubeBackend`](crate::KubeBackend) writes on a job's
/// object as its final state once it sees them, so that nothing later (a
/// pod starting, a group recreated) turns them into another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Keeps {
    /// The failures the object itself cannot record: an expired pending
    /// deadline, a preempted host, spent restarts (a Job records its own
    /// end otherwise).
    Failures,
    /// Every end (an object that never finishes by itself, such as a
    /// LeaderWorkerSet, whose group the controller would recreate).
    EveryEnd,
}

impl Keeps {
    /// True when `state` is one this policy writes as final.
    pub fn keeps(self, state: &JobState) -> bool {
        match self {
            Self::Failures => {
                state.status == JobStatus::Failed
                    && matches!(
                        state.reason,
                        Some(
                            StatusReason::PendingDeadlineExceeded { .. }
                                | StatusReason::Preempted
                                | StatusReason::RestartsSpent { .. }
                        )
                    )
            }
            Self::EveryEnd => state.status.is_terminal() && state.status != JobStatus::NotFound,
        }
    }
}

/// What differs between workload kinds, as data: read once, when the
/// backend is built ([`Workload::traits`]).
///
/// Built with [`WorkloadTraits::new`] (the defaults fit a kind whose object
/// makes its pods itself and records its own end, a batch/v1 Job) and
/// changed with the builder methods.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WorkloadTraits {
    /// The backend's name (`gke`, `pathways`).
    pub backend: &'static str,
    /// The kind, as events name the objects they are about (`Job`).
    pub kind: &'static str,
    /// The resource, plural, for messages and permissions (`jobs`).
    pub plural: &'static str,
    /// The value of the `app` label on the kind's objects.
    pub app: &'static str,
    /// What the backend offers.
    pub capabilities: BackendCapabilities,
    /// The kinds whose events tell why the API server refused a pod or
    /// the object that makes them (default: the kind itself).
    pub event_kinds: Vec<&'static str>,
    /// The labels, besides `job-name`, that pick the pods whose log is the
    /// job's output and whose ports are the job's (default none: all of
    /// the job's pods).
    pub log_pod_labels: Vec<(&'static str, &'static str)>,
    /// True when the job's pods go as soon as it ends (a StatefulSet
    /// recreates a pod that ended), so the backend keeps the log of its
    /// log pods in a ConfigMap `{name}-log` the object owns, written with
    /// the final state and read by `logs` from then on (default false).
    pub saves_logs: bool,
    /// True when the object alone cannot tell that the job ended (its pods
    /// do): `cancel` then reads the job's state first, so that it does not
    /// mark a finished job cancelled (default false).
    pub ends_in_pods: bool,
    /// The states written on the object as final (default
    /// [`Keeps::Failures`]).
    pub keeps: Keeps,
    /// The merge patch (besides the final-state annotation) that stops the
    /// object's pods once a final state is written (default `null`: none).
    pub end_patch: serde_json::Value,
}

impl WorkloadTraits {
    /// The traits of kind `kind` (plural `plural`) of backend `backend`,
    /// labelled `app`, offering `capabilities`, with every other default.
    pub fn new(
        backend: &'static str,
        kind: &'static str,
        plural: &'static str,
        app: &'static str,
        capabilities: BackendCapabilities,
    ) -> Self {
        Self {
            backend,
            kind,
            plural,
            app,
            capabilities,
            event_kinds: vec![kind],
            log_pod_labels: Vec::new(),
            saves_logs: false,
            ends_in_pods: false,
            keeps: Keeps::Failures,
            end_patch: serde_json::Value::Null,
        }
    }

    /// The same traits reading the events about these kinds.
    pub fn event_kinds(mut self, kinds: &[&'static str]) -> Self {
        self.event_kinds = kinds.to_vec();
        self
    }

    /// The same traits taking as log pods only those labelled `key=value`
    /// (as well as any label given before).
    pub fn log_pod_label(mut self, key: &'static str, value: &'static str) -> Self {
        self.log_pod_labels.push((key, value));
        self
    }

    /// The same traits keeping (or not) the log pods' log when the job ends.
    pub fn saves_logs(mut self, saves: bool) -> Self {
        self.saves_logs = saves;
        self
    }

    /// The same traits with the end told by the pods (or not).
    pub fn ends_in_pods(mut self, ends_in_pods: bool) -> Self {
        self.ends_in_pods = ends_in_pods;
        self
    }

    /// The same traits writing these states as final.
    pub fn keeps(mut self, keeps: Keeps) -> Self {
        self.keeps = keeps;
        self
    }

    /// The same traits stopping the object's pods with this merge patch.
    pub fn end_patch(mut self, patch: serde_json::Value) -> Self {
        self.end_patch = patch;
        self
    }

    /// The label selector of the pods whose log is the output of the job
    /// named `k8s_name`: `job-name={k8s_name}` and the
    /// [`WorkloadTraits::log_pod_labels`].
    pub fn log_selector(&self, k8s_name: &str) -> String {
        let mut selector = format!("{LABEL_JOB_NAME}={k8s_name}");
        for (key, value) in &self.log_pod_labels {
            selector.push_str(&format!(",{key}={value}"));
        }
        selector
    }

    /// The label selector of all the pods of the job named `k8s_name`.
    pub fn pods_selector(k8s_name: &str) -> String {
        format!("{LABEL_JOB_NAME}={k8s_name}")
    }
}

/// The blocks of a batch in blocks whose markers a status read lists
/// ([`Workload::batch_block_reads`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockReads {
    /// The batch: its blocks' folders are under its group's.
    pub group_id: GroupId,
    /// Each block to list, and whether its markers are final (its index
    /// ended: listed once, then kept).
    pub blocks: Vec<(usize, bool)>,
}

/// The name of the one object that runs batch `group_id` when it was
/// submitted in one call: `kinetic-{group_id}` (`kinetic-grp-0a1b2c3d`).
pub fn batch_object_name(group_id: &GroupId) -> String {
    format!("kinetic-{group_id}")
}

/// The call whose 404 a kind may explain ([`Workload::explain_not_found`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KindCall {
    /// Creating a job's object.
    Create,
    /// Listing the kind's objects.
    List,
}

/// A kind of Kubernetes workload a job runs as: what [`KubeBackend`]
/// needs to know of it. Everything else (client, errors, Secret, pods,
/// logs, final state, cleanup) is the same for every kind.
///
/// [`KubeBackend`]: crate::KubeBackend
#[async_trait]
pub trait Workload: Send + Sync + 'static {
    /// The object (`Job`, `LeaderWorkerSet`).
    type Object: kube::Resource
        + Clone
        + Debug
        + DeserializeOwned
        + Serialize
        + Send
        + Sync
        + 'static;

    /// What differs from other kinds, as data (read once, when the backend
    /// is built).
    fn traits(&self) -> WorkloadTraits;

    /// The kind's API in `namespace`.
    async fn api(
        &self,
        client: &kube::Client,
        namespace: &str,
    ) -> Result<Api<Self::Object>, BackendError>;

    /// Refuse a job the kind cannot run as asked (an explicitly asked
    /// failure budget it cannot honour), before anything is created.
    fn check_job(&self, _job: &PreparedJob) -> Result<(), BackendError> {
        Ok(())
    }

    /// The object of a prepared job (called after [`Workload::api`]).
    fn build(&self, job: &PreparedJob, options: &ManifestOptions) -> Self::Object;

    /// A reference to `created` as the owner of the job's Secret.
    fn owner(&self, created: &Self::Object) -> OwnerReference;

    /// True when [`Workload::state`] needs the object's pods to be exact.
    fn needs_pods(&self, object: &Self::Object) -> bool;

    /// True when [`Workload::state`] needs the events about the pod
    /// creator even though the object has pods (they tell of pods that
    /// ended and were replaced). By default events are read only for an
    /// object that needs pods and has none.
    fn reads_events(&self, _object: &Self::Object) -> bool {
        false
    }

    /// The job's state from its object, all its pods (label
    /// `job-name={k8s name}`), the events about objects of the
    /// [`WorkloadTraits::event_kinds`] (read when it needs pods and has
    /// none, or [`Workload::reads_events`]) and the time `now`.
    fn state(
        &self,
        object: &Self::Object,
        pods: &[Pod],
        events: &[Event],
        now: SystemTime,
    ) -> JobState;

    /// Annotations the kind keeps on its object as a record of what status
    /// reads saw (the UIDs of a slice's pods, say), from the object and
    /// all its pods: the backend merges them into the object after a read
    /// whose object has no final state, when they differ from the
    /// object's. None by default.
    fn record(
        &self,
        _object: &Self::Object,
        _pods: &[Pod],
    ) -> std::collections::BTreeMap<String, String> {
        std::collections::BTreeMap::new()
    }

    /// The pods whose logs' last lines may tell that the job ended while
    /// its pods still run, the deciding one first (see
    /// [`Workload::ended_in_logs`]); none by default.
    fn probe(&self, _object: &Self::Object, _pods: &[Pod]) -> Vec<String> {
        Vec::new()
    }

    /// The end of the job the last lines of the [`Workload::probe`] pods'
    /// logs tell (`tails[i]` is pod `i`'s), if they tell one. Called with
    /// every pod's when polled, with a line of the first pod's alone when
    /// following.
    fn ended_in_logs(&self, _object: &Self::Object, _tails: &[String]) -> Option<JobState> {
        None
    }

    /// True when the object reached its end (nothing may change its state).
    fn is_finished(&self, object: &Self::Object) -> bool;

    /// What the kind does on the cluster's behalf when one of its objects
    /// is submitted, and each time an unfinished one is polled (a
    /// LeaderWorkerSet admits the next queued slice of its node pool); the
    /// state of an object that still waits for it, which stands for the
    /// state its pods would tell. Nothing and `None` by default.
    async fn settle(
        &self,
        _client: &kube::Client,
        _namespace: &str,
        _object: &Self::Object,
    ) -> Result<Option<JobState>, BackendError> {
        Ok(None)
    }

    /// The object that runs a whole batch
    /// ([`Backend::submit_batch`](kinetic_core::ports::Backend::submit_batch)),
    /// for a kind whose traits declare `indexed_batches`; its name is the
    /// batch's [`batch_object_name`] and its Secret's that name's
    /// [`secret_name`](crate::pod::secret_name). `None` (the default): the
    /// kind runs no batch from one object.
    fn build_batch(
        &self,
        _batch: &PreparedBatch,
        _options: &ManifestOptions,
    ) -> Option<Self::Object> {
        None
    }

    /// The state of every child of the batch `object` runs, from it, its
    /// pods (label `job-name={its name}`) and, for a batch in blocks, the
    /// markers of the blocks [`Workload::batch_block_reads`] asked for (by
    /// block), by child job id; `None` when `object` runs one job, not a
    /// batch (the default).
    fn batch_states(
        &self,
        _object: &Self::Object,
        _pods: &[Pod],
        _markers: &BTreeMap<usize, Vec<BlockMarker>>,
    ) -> Option<GroupStatus> {
        None
    }

    /// For a batch `object` runs in blocks, the blocks whose markers a
    /// status read lists from the store; `None` (the default) for any
    /// other object.
    fn batch_block_reads(&self, _object: &Self::Object, _pods: &[Pod]) -> Option<BlockReads> {
        None
    }

    /// The merge patch that lets the batch `object`'s running inputs
    /// finish and starts no other
    /// ([`BatchEnd::StopStarting`](kinetic_core::ports::BatchEnd)), given
    /// its pods; `None` when nothing is left to stop (the default).
    fn batch_stop_patch(&self, _object: &Self::Object, _pods: &[Pod]) -> Option<serde_json::Value> {
        None
    }

    /// The error for a 404 on `call`, when the kind explains it better
    /// than "namespace not found" (a missing CRD); `None` by default.
    async fn explain_not_found(
        &self,
        _client: &kube::Client,
        _namespace: &str,
        _call: KindCall,
    ) -> Option<BackendError> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job_traits() -> WorkloadTraits {
        WorkloadTraits::new(
            "gke",
            "Job",
            "jobs",
            "kinetic",
            BackendCapabilities::single_host(),
        )
    }

    #[test]
    fn defaults_fit_a_kind_that_makes_its_pods() {
        let t = job_traits();
        assert_eq!(t.event_kinds, vec!["Job"]);
        assert_eq!(t.log_selector("kinetic-abc"), "job-name=kinetic-abc");
        assert!(!t.saves_logs);
        assert!(!t.ends_in_pods);
        assert_eq!(t.keeps, Keeps::Failures);
        assert_eq!(t.end_patch, serde_json::Value::Null);
    }

    #[test]
    fn log_selector_adds_the_log_pod_labels() {
        let t = job_traits()
            .log_pod_label("worker-index", "0")
            .log_pod_label("role", "leader");
        assert_eq!(
            t.log_selector("kinetic-abc"),
            "job-name=kinetic-abc,worker-index=0,role=leader"
        );
        assert_eq!(
            WorkloadTraits::pods_selector("kinetic-abc"),
            "job-name=kinetic-abc"
        );
    }

    #[test]
    fn builders_set_what_they_name() {
        let t = job_traits()
            .event_kinds(&["StatefulSet", "LeaderWorkerSet"])
            .saves_logs(true)
            .ends_in_pods(true)
            .keeps(Keeps::EveryEnd)
            .end_patch(serde_json::json!({"spec": {"replicas": 0}}));
        assert_eq!(t.event_kinds, vec!["StatefulSet", "LeaderWorkerSet"]);
        assert!(t.saves_logs && t.ends_in_pods);
        assert_eq!(t.keeps, Keeps::EveryEnd);
        assert_eq!(t.end_patch["spec"]["replicas"], 0);
    }

    fn failed(reason: StatusReason) -> JobState {
        JobState::new(JobStatus::Failed).with_reason(reason)
    }

    #[test]
    fn failures_keeps_only_what_the_object_cannot_record() {
        let keeps = |s: &JobState| Keeps::Failures.keeps(s);
        assert!(keeps(&failed(StatusReason::Preempted)));
        assert!(keeps(&failed(StatusReason::PendingDeadlineExceeded {
            waited: std::time::Duration::from_secs(60),
            cause: None,
        })));
        assert!(!keeps(&failed(StatusReason::Cancelled)));
        assert!(!keeps(&failed(StatusReason::ExitCode { code: 1 })));
        assert!(!keeps(&JobState::new(JobStatus::Succeeded)));
        assert!(!keeps(&JobState::new(JobStatus::Failed)));
        assert!(!keeps(&JobState::new(JobStatus::Running)));
    }

    #[test]
    fn every_end_keeps_each_terminal_state_but_not_found() {
        let keeps = |s: &JobState| Keeps::EveryEnd.keeps(s);
        assert!(keeps(&JobState::new(JobStatus::Succeeded)));
        assert!(keeps(&JobState::new(JobStatus::Failed)));
        assert!(keeps(&failed(StatusReason::Cancelled)));
        assert!(!keeps(&JobState::new(JobStatus::NotFound)));
        assert!(!keeps(&JobState::new(JobStatus::Running)));
        assert!(!keeps(&JobState::new(JobStatus::Pending)));
    }
}
