//! [`GkeBackend`]: the shared Kubernetes backend over the batch/v1 Job
//! kind.

use std::collections::BTreeMap;
use std::time::SystemTime;

use async_trait::async_trait;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kinetic_core::batch::BlockMarker;
use kinetic_core::ports::{
    BackendCapabilities, BackendError, GroupStatus, PreparedBatch, PreparedJob,
};
use kinetic_core::status::JobState;
use kinetic_kube::pod::{APP_KINETIC, ManifestOptions, owner_reference};
use kinetic_kube::{BlockReads, KubeBackend, KubeOptions, Workload, WorkloadTraits};
use kube::api::Api;
use serde_json::json;

use crate::{indexed, manifest, status};

/// Settings of a [`GkeBackend`].
pub type GkeOptions = KubeOptions;

/// The GKE backend: one batch/v1 Job (and, when env was captured, one
/// Secret it owns) per single-host job.
pub type GkeBackend = KubeBackend<JobKind>;

/// The batch/v1 Job as a workload kind: one pod, `backoffLimit` 0, ended
/// by `activeDeadlineSeconds: 1` (the Job controller stops its pod and
/// marks it `Failed` — terminal, so `ttlSecondsAfterFinished` collects
/// it; a suspended Job would never finish nor be collected).
#[derive(Debug, Clone, Copy, Default)]
pub struct JobKind;

#[async_trait]
impl Workload for JobKind {
    type Object = Job;

    /// A Job makes its pods and records its own end: the defaults, and
    /// `activeDeadlineSeconds: 1` to stop its pod.
    fn traits(&self) -> WorkloadTraits {
        WorkloadTraits::new(
            "gke",
            "Job",
            "jobs",
            APP_KINETIC,
            BackendCapabilities::single_host()
                .with_image(true)
                .with_port_forward(true)
                .with_indexed_batches(true),
        )
        .end_patch(json!({"spec": {"activeDeadlineSeconds": 1}}))
    }

    async fn api(&self, client: &kube::Client, namespace: &str) -> Result<Api<Job>, BackendError> {
        Ok(Api::namespaced(client.clone(), namespace))
    }

    fn build(&self, job: &PreparedJob, options: &ManifestOptions) -> Job {
        manifest::job_manifest(job, options)
    }

    /// One Indexed Job for the whole batch ([`crate::indexed`]).
    fn build_batch(&self, batch: &PreparedBatch, options: &ManifestOptions) -> Option<Job> {
        Some(indexed::batch_manifest(batch, options))
    }

    fn batch_states(
        &self,
        job: &Job,
        pods: &[Pod],
        markers: &BTreeMap<usize, Vec<BlockMarker>>,
    ) -> Option<GroupStatus> {
        indexed::batch_states(job, pods, markers)
    }

    fn batch_block_reads(&self, job: &Job, pods: &[Pod]) -> Option<BlockReads> {
        indexed::block_reads(job, pods)
    }

    fn batch_stop_patch(&self, job: &Job, pods: &[Pod]) -> Option<serde_json::Value> {
        indexed::stop_patch(job, pods)
    }

    fn owner(&self, created: &Job) -> OwnerReference {
        owner_reference(
            "batch/v1",
            "Job",
            created.metadata.name.as_deref().unwrap_or_default(),
            created.metadata.uid.as_deref().unwrap_or_default(),
        )
    }

    fn needs_pods(&self, job: &Job) -> bool {
        status::needs_pods(job)
    }

    /// A Job with failure budgets: its `SuccessfulCreate` events name the
    /// pods it had, those deleted since (by the pod garbage collector, an
    /// eviction) too, each an attempt that spent the budget.
    fn reads_events(&self, job: &Job) -> bool {
        status::budgets(job).is_some() && status::final_state(job).is_none()
    }

    fn state(&self, job: &Job, pods: &[Pod], events: &[Event], now: SystemTime) -> JobState {
        status::job_state_with_events(job, pods, events, now)
    }

    fn is_finished(&self, job: &Job) -> bool {
        status::final_state(job).is_some()
            || job
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter().any(|c| {
                        (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True"
                    })
                })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kinetic_core::status::{JobStatus, StatusReason};
    use kinetic_kube::Keeps;

    #[test]
    fn a_job_is_named_read_and_ended_as_one() {
        let t = JobKind.traits();
        assert_eq!(
            (t.backend, t.kind, t.plural, t.app),
            ("gke", "Job", "jobs", "kinetic")
        );
        assert_eq!(t.event_kinds, vec!["Job"]);
        assert_eq!(t.log_selector("kinetic-abc"), "job-name=kinetic-abc");
        assert!(!t.saves_logs, "a Job's pods stay after it ends");
        assert!(!t.ends_in_pods, "a Job records its own end");
        assert_eq!(t.keeps, Keeps::Failures);
        assert_eq!(t.end_patch, json!({"spec": {"activeDeadlineSeconds": 1}}));
        assert!(t.capabilities.port_forward && t.capabilities.needs_image);
        assert_eq!(t.capabilities.max_hosts, 1);
    }

    #[test]
    fn a_job_keeps_only_the_failures_it_cannot_record() {
        let t = JobKind.traits();
        let failed = |r| JobState::new(JobStatus::Failed).with_reason(r);
        assert!(t.keeps.keeps(&failed(StatusReason::Preempted)));
        assert!(!t.keeps.keeps(&failed(StatusReason::ExitCode { code: 1 })));
        assert!(!t.keeps.keeps(&JobState::new(JobStatus::Succeeded)));
    }
}
