//! Status: a job's state from its object, pods, events and probe logs;
//! a batch's with one labelled LIST; the attempts and final states it
//! records on the objects.

use std::collections::BTreeMap;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinetic_core::ids::{GroupId, JobId};
use kinetic_core::ports::BackendError;
use kinetic_core::record::JobRecord;
use kinetic_core::status::{JobState, JobStatus, StatusReason};
use kube::Resource;
use kube::api::{Api, ListParams, LogParams, Patch, PatchParams};
use serde_json::json;

use super::{KubeBackend, Named};
use crate::error::{self, Context};
use crate::pod::{
    ANNOTATION_ATTEMPTS, CONTAINER_NAME, LABEL_GROUP_ID, LABEL_JOB_ID, LABEL_JOB_NAME,
};
use crate::status::{final_state, recorded_attempts, unschedulable_pods};
use crate::workload::{Workload, WorkloadTraits, batch_object_name};

impl<W: Workload> KubeBackend<W> {
    /// [`Backend::status`](kinetic_core::ports::Backend::status): the
    /// object, its pods when the kind needs them, the events when it reads
    /// them, the probe pods' logs while it runs; a state the kind keeps is
    /// written on the object as final.
    pub(super) async fn job_status(&self, record: &JobRecord) -> Result<JobState, BackendError> {
        let Some(object) = self.get_object(&Named::of(record)).await? else {
            return Ok(JobState::new(JobStatus::NotFound));
        };
        if let Some(waiting) = self.settled(&record.namespace, &object).await {
            return Ok(waiting);
        }
        // Events read before the pods: a pod they say was created and the
        // LIST then lacks was deleted, not created after the LIST.
        let early = if self.workload.reads_events(&object) {
            Some(
                self.events_if_podless(&object, &[], &record.namespace)
                    .await,
            )
        } else {
            None
        };
        let pods = if self.workload.needs_pods(&object) {
            self.list_pods(
                &record.namespace,
                &WorkloadTraits::pods_selector(&record.k8s_name),
            )
            .await?
        } else {
            Vec::new()
        };
        let mut events = match early {
            Some(events) => events,
            None => {
                self.events_if_podless(&object, &pods, &record.namespace)
                    .await
            }
        };
        let mut state = self
            .workload
            .state(&object, &pods, &events, SystemTime::now());
        if waits_for_a_node(&state) {
            // What the cluster autoscaler said about the pods the
            // scheduler could not place tells a pool scaling up from none.
            let unplaced = unschedulable_pods(&pods);
            if !unplaced.is_empty() {
                events.extend(self.pod_events(&record.namespace, &unplaced).await);
                state = self
                    .workload
                    .state(&object, &pods, &events, SystemTime::now());
            }
        }
        let state = self.probed(&record.namespace, &object, &pods, state).await;
        if final_state(object.meta()).is_none() {
            self.record_attempts(record, &object, &state).await;
            self.record_seen(&record.namespace, &record.k8s_name, &object, &pods)
                .await;
        }
        if final_state(object.meta()).is_none() && self.traits.keeps.keeps(&state) {
            // Keep the verdict: a pod must not start (or a group be
            // recreated) later and turn a reported failure into a run.
            if let Err(e) = self.finalise(&Named::of(record), &state).await {
                tracing::warn!(job_id = %record.job_id, "could not record the job's final state: {e}");
            }
        }
        Ok(state)
    }

    /// The events about objects of the [`WorkloadTraits::event_kinds`] in
    /// `namespace` (one LIST per kind, by field selector).
    async fn events(&self, namespace: &str) -> Result<Vec<Event>, BackendError> {
        let api: Api<Event> = Api::namespaced(self.client.get().await?, namespace);
        let mut out = Vec::new();
        for kind in &self.traits.event_kinds {
            let listed = api
                .list(&ListParams::default().fields(&format!("involvedObject.kind={kind}")))
                .await
                .map_err(|e| {
                    error::map(
                        e,
                        Context {
                            verb: "list",
                            resource: "events",
                            name: None,
                            namespace,
                        },
                    )
                })?;
            out.extend(listed.items);
        }
        Ok(out)
    }

    /// The events about the pods `names` (one LIST by name for one pod,
    /// else one of every pod's events in the namespace). Events the caller
    /// may not read tell nothing.
    async fn pod_events(&self, namespace: &str, names: &[String]) -> Vec<Event> {
        let fields = match names {
            [one] => format!("involvedObject.kind=Pod,involvedObject.name={one}"),
            _ => "involvedObject.kind=Pod".to_owned(),
        };
        let listed = match self.client.get().await {
            Ok(client) => {
                let api: Api<Event> = Api::namespaced(client, namespace);
                api.list(&ListParams::default().fields(&fields))
                    .await
                    .map(|l| l.items)
                    .map_err(|e| e.to_string())
            }
            Err(e) => Err(e.to_string()),
        };
        listed.unwrap_or_else(|e| {
            tracing::debug!("cannot read the events of the unschedulable pods: {e}");
            Vec::new()
        })
    }

    /// The events about an object that has no pod (where the API server's
    /// refusal of its pod is told); none otherwise. Events the caller may
    /// not read leave the state without that reason.
    async fn events_if_podless(
        &self,
        object: &W::Object,
        pods: &[Pod],
        namespace: &str,
    ) -> Vec<Event> {
        let podless = pods.is_empty() && self.workload.needs_pods(object);
        if !podless && !self.workload.reads_events(object) {
            return Vec::new();
        }
        self.events(namespace).await.unwrap_or_else(|e| {
            tracing::debug!("cannot read the events of the {}: {e}", self.traits.kind);
            Vec::new()
        })
    }

    /// `state`, or the end the probe pods' logs tell while `state` is not
    /// terminal (see [`Workload::probe`]; every probe pod's tail is read,
    /// one request each). A log that cannot be read tells nothing.
    async fn probed(
        &self,
        namespace: &str,
        object: &W::Object,
        pods: &[Pod],
        state: JobState,
    ) -> JobState {
        if state.status.is_terminal() {
            return state;
        }
        let probe = self.workload.probe(object, pods);
        let Some(first) = probe.first() else {
            return state;
        };
        let Ok(api) = self.pods(namespace).await else {
            return state;
        };
        let params = LogParams {
            container: Some(CONTAINER_NAME.to_owned()),
            tail_lines: Some(PROBE_LINES),
            ..LogParams::default()
        };
        let tail = |pod: String| {
            let (api, params) = (&api, &params);
            async move {
                api.logs(&pod, params).await.unwrap_or_else(|e| {
                    tracing::debug!("cannot read the log of pod {pod}: {e}");
                    String::new()
                })
            }
        };
        let mut tails = vec![tail(first.clone()).await];
        for pod in &probe[1..] {
            tails.push(tail(pod.clone()).await);
        }
        self.workload.ended_in_logs(object, &tails).unwrap_or(state)
    }

    /// The state of every job of a batch, with one labelled LIST of
    /// objects (and one of pods, only when some job needs its pods). Jobs
    /// of the group that the cluster no longer holds are absent from the
    /// map: their status is `NOT_FOUND`.
    pub async fn group_status(
        &self,
        namespace: &str,
        group_id: &GroupId,
    ) -> Result<BTreeMap<JobId, JobState>, BackendError> {
        let selector = format!("{LABEL_GROUP_ID}={group_id}");
        let api = self.objects(namespace).await?;
        let objects = api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| error::map(e, self.cx("list", None, namespace)))?
            .items;
        // The object of a batch submitted in one call answers for all its
        // children; the others each for their one job.
        let batch_name = batch_object_name(group_id);
        let (batches, objects): (Vec<_>, Vec<_>) = objects
            .into_iter()
            .partition(|o| o.meta().name.as_deref() == Some(batch_name.as_str()));
        let read_events = || async {
            self.events(namespace).await.unwrap_or_else(|e| {
                tracing::debug!("cannot read the events of the batch's objects: {e}");
                Vec::new()
            })
        };
        // Events read before the pods, as for one job: a pod they say was
        // created and the LIST then lacks was deleted, not created after
        // the LIST (read the other way round, a replacement pod created
        // between the two reads counted as a lost attempt).
        let early = if objects.iter().any(|o| self.workload.reads_events(o)) {
            Some(read_events().await)
        } else {
            None
        };
        let pods = if !batches.is_empty() || objects.iter().any(|o| self.workload.needs_pods(o)) {
            self.list_pods(namespace, &selector).await?
        } else {
            Vec::new()
        };
        let mut by_name = by_job_name(pods);
        let mut events = match early {
            Some(events) => events,
            None if objects.iter().any(|o| {
                self.workload.needs_pods(o)
                    && !by_name.contains_key(o.meta().name.as_deref().unwrap_or(""))
            }) =>
            {
                read_events().await
            }
            None => Vec::new(),
        };
        let now = SystemTime::now();
        // One LIST of the pods' events when some job waits for a node: what
        // the cluster autoscaler said about its pods.
        let unplaced: Vec<String> = objects
            .iter()
            .filter_map(|o| {
                let pods = by_name.get(o.meta().name.as_deref().unwrap_or(""))?;
                let names = unschedulable_pods(pods);
                (!names.is_empty() && waits_for_a_node(&self.workload.state(o, pods, &events, now)))
                    .then_some(names)
            })
            .flatten()
            .collect();
        if !unplaced.is_empty() {
            events.extend(self.pod_events(namespace, &unplaced).await);
        }
        let mut out = BTreeMap::new();
        for object in &batches {
            let pods = by_name.remove(&batch_name).unwrap_or_default();
            let markers = match self.workload.batch_block_reads(object, &pods) {
                Some(reads) => self.block_markers(object, &reads).await?,
                None => BTreeMap::new(),
            };
            if let Some(states) = self.workload.batch_states(object, &pods, &markers) {
                self.keep_batch_stopped(namespace, object, &pods).await;
                out.extend(states);
            }
        }
        for object in &objects {
            let Some(id) = job_id(object.meta()) else {
                continue;
            };
            let name = object.meta().name.clone().unwrap_or_default();
            let pods = by_name.remove(&name).unwrap_or_default();
            if let Some(waiting) = self.settled(namespace, object).await {
                out.insert(id, waiting);
                continue;
            }
            let state = self.workload.state(object, &pods, &events, now);
            let state = self.probed(namespace, object, &pods, state).await;
            if final_state(object.meta()).is_none() {
                self.record_seen(namespace, &name, object, &pods).await;
            }
            if final_state(object.meta()).is_none() && self.traits.keeps.keeps(&state) {
                let named = Named {
                    namespace: namespace.to_owned(),
                    k8s_name: name,
                    job_id: id.to_string(),
                };
                if let Err(e) = self.finalise(&named, &state).await {
                    tracing::warn!(job_id = %id, "could not record the job's final state: {e}");
                }
            }
            out.insert(id, state);
        }
        Ok(out)
    }

    /// Merge the kind's [`Workload::record`] of what this read saw into
    /// the object's annotations, when it differs from theirs. A failed
    /// write is logged; the next poll writes again.
    async fn record_seen(&self, namespace: &str, k8s_name: &str, object: &W::Object, pods: &[Pod]) {
        let wanted = self.workload.record(object, pods);
        let current = object.meta().annotations.as_ref();
        let changed: BTreeMap<&String, &String> = wanted
            .iter()
            .filter(|(k, v)| current.and_then(|a| a.get(*k)) != Some(*v))
            .collect();
        if changed.is_empty() {
            return;
        }
        let patch = json!({"metadata": {"annotations": changed}});
        let written = match self.objects(namespace).await {
            Ok(api) => api
                .patch(k8s_name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = written {
            tracing::debug!(k8s_name, "could not record what the status read saw: {e}");
        }
    }

    /// [`Workload::settle`] for an unfinished object: the state it
    /// waits in, if any. A failure is logged; the next poll tries again.
    async fn settled(&self, namespace: &str, object: &W::Object) -> Option<JobState> {
        if self.workload.is_finished(object) {
            return None;
        }
        let client = self.client.get().await.ok()?;
        match self.workload.settle(&client, namespace, object).await {
            Ok(waiting) => waiting,
            Err(e) => {
                tracing::debug!("could not settle the {}: {e}", self.traits.kind);
                None
            }
        }
    }

    /// Record the attempts `state` carries on the object
    /// ([`ANNOTATION_ATTEMPTS`]) when they differ from those
    /// recorded: the workload state merges them with what it sees next, so
    /// a budget spent stays spent once the pods and their events are gone.
    /// A failed write is logged; the next poll writes again.
    async fn record_attempts(&self, record: &JobRecord, object: &W::Object, state: &JobState) {
        if state.attempts.is_empty() || recorded_attempts(object.meta()) == state.attempts {
            return;
        }
        let Ok(text) = serde_json::to_string(&state.attempts) else {
            return;
        };
        let patch = json!({"metadata": {"annotations": {ANNOTATION_ATTEMPTS: text}}});
        let written = match self.objects(&record.namespace).await {
            Ok(api) => api
                .patch(
                    &record.k8s_name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = written {
            tracing::debug!(job_id = %record.job_id, "could not record the job's attempts: {e}");
        }
    }
}

/// True when `state` is a wait for a node (unschedulable, or a pending
/// deadline that expired on it): what the autoscaler did says more.
fn waits_for_a_node(state: &JobState) -> bool {
    let unschedulable = |r: &StatusReason| matches!(r, StatusReason::Unschedulable { .. });
    match &state.reason {
        Some(r) if unschedulable(r) => true,
        Some(StatusReason::PendingDeadlineExceeded { cause: Some(c), .. }) => unschedulable(c),
        _ => false,
    }
}

/// Lines of the probe pod's log read per observation.
const PROBE_LINES: i64 = 5;

/// A batch's pods by the name of their job's object (label `job-name`).
fn by_job_name(pods: Vec<Pod>) -> BTreeMap<String, Vec<Pod>> {
    let mut by_name: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
    for p in pods {
        let name = p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_JOB_NAME))
            .cloned()
            .unwrap_or_default();
        by_name.entry(name).or_default().push(p);
    }
    by_name
}

/// The job id an object is labelled with, if it is one.
fn job_id(meta: &ObjectMeta) -> Option<JobId> {
    meta.labels.as_ref()?.get(LABEL_JOB_ID)?.parse().ok()
}
