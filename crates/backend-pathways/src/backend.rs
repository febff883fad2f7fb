//! [`PathwaysBackend`]: the shared Kubernetes backend over the
//! LeaderWorkerSet kind.

use std::collections::BTreeMap;
use std::time::SystemTime;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kinetic_core::ports::{BackendCapabilities, BackendError, PreparedJob};
use kinetic_core::status::JobState;
use kinetic_kube::pod::{ManifestOptions, owner_reference};
use kinetic_kube::status::final_state;
use kinetic_kube::{Keeps, KindCall, KubeBackend, KubeOptions, Workload, WorkloadTraits};
use kube::api::Api;
use kube::core::ApiResource;
use serde_json::json;

use crate::admission;
use crate::lws::{self, LABEL_WORKER_INDEX, LeaderWorkerSet};
use crate::manifest::{self, APP_PATHWAYS};
use crate::status;

/// Settings of a [`PathwaysBackend`].
pub type PathwaysOptions = KubeOptions;

/// The Pathways backend: one LeaderWorkerSet (and, when env was captured,
/// one Secret it owns) per job, its group spanning the slice's hosts.
pub type PathwaysBackend = KubeBackend<LwsKind>;

/// The most hosts of any slice in the accelerator registry: the most a
/// LeaderWorkerSet of this backend spans.
pub fn max_hosts() -> u32 {
    kinetic_core::accelerators::tpus_by_preference()
        .flat_map(|t| t.slices.iter().map(|s| s.num_hosts))
        .max()
        .unwrap_or(1)
}

/// How the cluster serves LeaderWorkerSets, as discovery found it.
#[derive(Debug, Clone)]
enum Served {
    /// At this version.
    At(ApiResource),
    /// Not at all: the CRD is not installed.
    Missing,
}

/// The LeaderWorkerSet as a workload kind. Its version is the cluster's
/// preferred one, found by API discovery on first use (`v1` when discovery
/// fails for another reason than a missing group).
#[derive(Debug, Default)]
pub struct LwsKind {
    served: std::sync::Mutex<Option<ApiResource>>,
}

impl LwsKind {
    /// The LeaderWorkerSet resource the cluster serves, asked once
    /// found (a missing group is asked again next time: it may be
    /// installed since).
    async fn discover(&self, client: &kube::Client) -> Served {
        if let Some(ar) = self.served.lock().ok().and_then(|s| s.clone()) {
            return Served::At(ar);
        }
        let served = match kube::discovery::group(client, lws::GROUP).await {
            Ok(group) => match group.recommended_kind(lws::KIND) {
                Some((ar, _)) => Served::At(ar),
                None => Served::Missing,
            },
            Err(kube::Error::Discovery(_)) => Served::Missing,
            Err(e) => {
                tracing::debug!(
                    "LeaderWorkerSet discovery failed ({e}); using {}",
                    lws::DEFAULT_VERSION
                );
                return Served::At(lws::api_resource(lws::DEFAULT_VERSION));
            }
        };
        if let (Served::At(ar), Ok(mut cache)) = (&served, self.served.lock()) {
            *cache = Some(ar.clone());
        }
        served
    }

    fn resource(&self) -> ApiResource {
        self.served
            .lock()
            .ok()
            .and_then(|s| s.clone())
            .unwrap_or_else(|| lws::api_resource(lws::DEFAULT_VERSION))
    }
}

/// What a 404 on creating a LeaderWorkerSet means when the cluster does
/// not serve the kind.
pub fn crd_missing(namespace: &str) -> BackendError {
    crd_missing_to("create a LeaderWorkerSet", namespace)
}

/// [`crd_missing`] for another action than creating one (`list
/// LeaderWorkerSets`).
fn crd_missing_to(action: &str, namespace: &str) -> BackendError {
    BackendError::invalid_input(format!(
        "cannot {action} in namespace '{namespace}': the cluster does not serve {}/{} (the LeaderWorkerSet CRD is not installed); install it with `kinetic up`, or `kubectl apply --server-side -f https://github.com/kubernetes-sigs/lws/releases/download/v0.5.1/manifests.yaml`",
        lws::GROUP,
        lws::PLURAL
    ))
}

#[async_trait]
impl Workload for LwsKind {
    type Object = LeaderWorkerSet;

    /// A LeaderWorkerSet never finishes by itself and its StatefulSets
    /// recreate the pods that end:
    ///
    /// - events: the StatefulSets' (a pod refused, a pod recreated) and
    ///   the LeaderWorkerSet's (its StatefulSet refused, its group
    ///   recreated);
    /// - log pods: the leader's: its log is the job's output (each host's
    ///   runner prints to its own pod; the leader's carries the result),
    ///   and its ports are the job's (a debug job's debugger listens on
    ///   the leader);
    /// - the leader's log is kept when the job ends, since its pod goes;
    /// - the end is told by the pods, so `cancel` reads the state first,
    ///   and every end is written on the object, so that no later
    ///   recreation of the group can run the job again;
    /// - an ended slice is scaled to no group: the controller deletes its
    ///   pods (hosts still running would wait for a lost one forever, and
    ///   the StatefulSet would run an ended leader again).
    fn traits(&self) -> WorkloadTraits {
        WorkloadTraits::new(
            "pathways",
            lws::KIND,
            lws::PLURAL,
            APP_PATHWAYS,
            BackendCapabilities::single_host()
                .with_multi_host(max_hosts())
                .with_image(true)
                .with_port_forward(true),
        )
        .event_kinds(&["StatefulSet", lws::KIND])
        .log_pod_label(LABEL_WORKER_INDEX, "0")
        .saves_logs(true)
        .ends_in_pods(true)
        .keeps(Keeps::EveryEnd)
        .end_patch(json!({"spec": {"replicas": 0}}))
    }

    async fn api(
        &self,
        client: &kube::Client,
        namespace: &str,
    ) -> Result<Api<LeaderWorkerSet>, BackendError> {
        let ar = match self.discover(client).await {
            Served::At(ar) => ar,
            // The calls say what is missing (a 404 on create: the CRD).
            Served::Missing => lws::api_resource(lws::DEFAULT_VERSION),
        };
        Ok(Api::namespaced_with(client.clone(), namespace, &ar))
    }

    /// Failure budgets are not applied to a slice yet: a preempted host
    /// fails the whole slice as preempted. An explicitly asked non-zero
    /// budget is refused; the Spot default does not apply here.
    fn check_job(&self, job: &PreparedJob) -> Result<(), BackendError> {
        let asked = job.budget_request;
        let mut named = Vec::new();
        if let Some(n) = asked.retries.filter(|n| *n > 0) {
            named.push(format!("--retries {n}"));
        }
        if let Some(n) = asked.restarts.filter(|n| *n > 0) {
            named.push(format!("--restarts {n}"));
        }
        if named.is_empty() {
            return Ok(());
        }
        Err(BackendError::invalid_input(format!(
            "failure budgets ({}) are not supported on pathways yet: a preempted or failed host fails the whole slice; submit without them (or with 0), or run a single-host job on gke",
            named.join(", ")
        )))
    }

    fn build(&self, job: &PreparedJob, options: &ManifestOptions) -> LeaderWorkerSet {
        manifest::lws_manifest(job, options, &self.resource().api_version)
    }

    fn owner(&self, created: &LeaderWorkerSet) -> OwnerReference {
        owner_reference(
            &created.api_version,
            lws::KIND,
            created.metadata.name.as_deref().unwrap_or_default(),
            created.metadata.uid.as_deref().unwrap_or_default(),
        )
    }

    fn needs_pods(&self, object: &LeaderWorkerSet) -> bool {
        final_state(&object.metadata).is_none()
    }

    /// The events tell of a host that restarted or ended and was replaced
    /// between two polls.
    fn reads_events(&self, object: &LeaderWorkerSet) -> bool {
        final_state(&object.metadata).is_none()
    }

    fn state(
        &self,
        object: &LeaderWorkerSet,
        pods: &[Pod],
        events: &[Event],
        now: SystemTime,
    ) -> JobState {
        status::lws_state(object, pods, events, now)
    }

    /// The record of the hosts' pods ([`crate::hosts::ANNOTATION_HOSTS`]):
    /// each name's first UID and how that pod ended, grown by `pods`, so
    /// that a host whose pod is deleted and made again between two polls
    /// is seen (its new UID).
    fn record(&self, object: &LeaderWorkerSet, pods: &[Pod]) -> BTreeMap<String, String> {
        let before = crate::hosts::recorded(object);
        let seen = crate::hosts::observe(before.clone(), pods);
        if seen == before {
            return BTreeMap::new();
        }
        match serde_json::to_string(&seen) {
            Ok(text) => BTreeMap::from([(crate::hosts::ANNOTATION_HOSTS.to_owned(), text)]),
            Err(_) => BTreeMap::new(),
        }
    }

    /// The leader's pod while it runs, then its workers': each host's
    /// container keeps running after its command (see
    /// [`manifest::HOLD_WORKERS`]), so the logs tell how the commands
    /// ended: the leader's, and the workers' that finished or failed.
    fn probe(&self, object: &LeaderWorkerSet, pods: &[Pod]) -> Vec<String> {
        let Some(set) = object.metadata.name.as_deref() else {
            return Vec::new();
        };
        let live = |p: &&Pod| p.metadata.deletion_timestamp.is_none();
        let Some(leader) = pods.iter().filter(live).find(|p| {
            status::worker_index(p, set) == Some(0)
                && kinetic_kube::status::pod_phase(p) == "Running"
        }) else {
            return Vec::new();
        };
        let mut workers: Vec<&Pod> = pods
            .iter()
            .filter(live)
            .filter(|p| status::worker_index(p, set).is_some_and(|i| i > 0))
            .collect();
        workers.sort_by_key(|p| status::worker_index(p, set));
        std::iter::once(leader)
            .chain(workers)
            .filter_map(|p| p.metadata.name.clone())
            .collect()
    }

    fn ended_in_logs(&self, object: &LeaderWorkerSet, tails: &[String]) -> Option<JobState> {
        let size = object.spec.leader_worker_template.size.unwrap_or(1);
        status::slice_end(tails, usize::try_from(size).unwrap_or(1))
    }

    fn is_finished(&self, object: &LeaderWorkerSet) -> bool {
        final_state(&object.metadata).is_some()
    }

    /// A queued slice (see [`crate::admission`]): admit the next slice of
    /// its pool if the pool is free; while it still waits, its state says
    /// for what.
    async fn settle(
        &self,
        client: &kube::Client,
        namespace: &str,
        object: &LeaderWorkerSet,
    ) -> Result<Option<JobState>, BackendError> {
        let Some(pool) = admission::pool_label(object) else {
            return Ok(None);
        };
        if !admission::is_queued(object) {
            return Ok(None);
        }
        let api = self.api(client, namespace).await?;
        admission::settle(client, &api, namespace, pool, object).await
    }

    /// A 404 on a kind the cluster does not serve: the CRD is missing.
    async fn explain_not_found(
        &self,
        client: &kube::Client,
        namespace: &str,
        call: KindCall,
    ) -> Option<BackendError> {
        match self.discover(client).await {
            Served::Missing => Some(match call {
                KindCall::List => crd_missing_to("list LeaderWorkerSets", namespace),
                _ => crd_missing(namespace),
            }),
            Served::At(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kinetic_core::status::{JobStatus, StatusReason};

    #[test]
    fn a_leader_worker_set_reads_its_stateful_sets_and_its_leader() {
        let t = LwsKind::default().traits();
        assert_eq!(
            (t.backend, t.kind, t.plural, t.app),
            (
                "pathways",
                "LeaderWorkerSet",
                "leaderworkersets",
                "kinetic-pathways"
            )
        );
        assert_eq!(t.event_kinds, vec!["StatefulSet", "LeaderWorkerSet"]);
        assert_eq!(
            t.log_selector("kinetic-abc"),
            "job-name=kinetic-abc,leaderworkerset.sigs.k8s.io/worker-index=0"
        );
        assert!(
            t.saves_logs,
            "a StatefulSet recreates the leader that ended"
        );
        assert!(
            t.ends_in_pods,
            "the LeaderWorkerSet never finishes by itself"
        );
        assert_eq!(t.end_patch, json!({"spec": {"replicas": 0}}));
        assert!(t.capabilities.port_forward && t.capabilities.needs_image);
        assert_eq!(t.capabilities.max_hosts, max_hosts());
    }

    #[test]
    fn a_leader_worker_set_keeps_every_end() {
        let t = LwsKind::default().traits();
        assert_eq!(t.keeps, Keeps::EveryEnd);
        assert!(t.keeps.keeps(&JobState::new(JobStatus::Succeeded)));
        assert!(t.keeps.keeps(
            &JobState::new(JobStatus::Failed).with_reason(StatusReason::ExitCode { code: 1 })
        ));
        assert!(!t.keeps.keeps(&JobState::new(JobStatus::NotFound)));
        assert!(!t.keeps.keeps(&JobState::new(JobStatus::Running)));
    }
}
