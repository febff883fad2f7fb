//! [`KubeBackend`]: the `Backend` port over a `kube::Client`, for any
//! [`Workload`] kind (a batch/v1 Job, a LeaderWorkerSet).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use futures_util::{AsyncBufReadExt, Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_core::ids::{GroupId, JobId};
use kinetic_core::ports::{
    Backend, BackendCapabilities, BackendError, CleanupWait, GroupQuery, GroupStatus, LogOptions,
    LogStream, PreparedJob, tail_lines, terminal_line,
};
use kinetic_core::record::JobRecord;
use kinetic_core::retry::{Backoff, RetryPolicy};
use kinetic_core::status::{JobState, JobStatus, StatusReason};
use kube::Resource;
use kube::api::{
    Api, DeleteParams, ListParams, LogParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::client::LazyClient;
use crate::error::{self, Context, api_status};
use crate::pod::{
    self, ANNOTATION_FINAL_STATE, ANNOTATION_SPEC_URI, CONTAINER_NAME, LABEL_APP, LABEL_GROUP_ID,
    LABEL_JOB_ID, LABEL_JOB_NAME, ManifestOptions,
};
use crate::status::{pod_started, sort_oldest_first};

/// A kind of Kubernetes workload a job runs as: what [`KubeBackend`] needs
/// to know of it. Everything else (client, errors, Secret, pods, logs,
/// final state, cleanup) is the same for every kind.
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

    /// The backend's name (`gke`, `pathways`).
    fn backend_name(&self) -> &'static str;

    /// The resource, plural, for messages and permissions (`jobs`).
    fn plural(&self) -> &'static str;

    /// The kind, as events name the objects they are about (`Job`).
    fn kind(&self) -> &'static str;

    /// The kinds whose events tell why the API server refused a pod or
    /// the object that makes them (`Job`; a LeaderWorkerSet's
    /// `StatefulSet`s and the LeaderWorkerSet itself).
    fn event_kinds(&self) -> Vec<&'static str> {
        vec![self.kind()]
    }

    /// The value of the `app` label on the kind's objects.
    fn app(&self) -> &'static str;

    /// What the backend offers.
    fn capabilities(&self) -> BackendCapabilities;

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

    /// The label selector of the pods whose log is the job's output (all of
    /// a Job's pods; a LeaderWorkerSet's leader).
    fn log_selector(&self, k8s_name: &str) -> String {
        format!("{LABEL_JOB_NAME}={k8s_name}")
    }

    /// True when [`Workload::state`] needs the object's pods to be exact.
    fn needs_pods(&self, object: &Self::Object) -> bool;

    /// The job's state from its object, all its pods (label
    /// `job-name={k8s name}`), the events about objects of the kind (read
    /// when it needs pods and has none) and the time `now`.
    fn state(
        &self,
        object: &Self::Object,
        pods: &[Pod],
        events: &[Event],
        now: SystemTime,
    ) -> JobState;

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

    /// The merge patch (besides the final-state annotation) that stops the
    /// object's pods once final state `state` is written (`null`: none).
    fn end_patch(&self, state: &JobState) -> serde_json::Value;

    /// True for a state [`KubeBackend`] writes on the object as its final
    /// state once it sees it, so that nothing later (a pod starting, a
    /// group recreated) turns it into another: by default an expired
    /// pending deadline and a preempted host.
    fn keeps(&self, state: &JobState) -> bool {
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

    /// True when the job's pods go as soon as it ends (a StatefulSet
    /// recreates a pod that ended), so the backend keeps the log of its
    /// log pods in a ConfigMap `{name}-log` the object owns, written with
    /// the final state and read by `logs` from then on.
    fn saves_logs(&self) -> bool {
        false
    }

    /// True when [`Workload::state`] needs the events about the pod
    /// creator even though the object has pods (they tell of pods that
    /// ended and were replaced). By default events are read only for an
    /// object that needs pods and has none.
    fn reads_events(&self, _object: &Self::Object) -> bool {
        false
    }

    /// True when the object alone cannot tell that the job ended (its
    /// pods do): `cancel` then reads the job's state first, so that it
    /// does not mark a finished job cancelled.
    fn ends_in_pods(&self) -> bool {
        false
    }

    /// The error for a 404 on listing the kind's objects, when the kind
    /// explains it (a missing CRD).
    async fn list_not_found(
        &self,
        _client: &kube::Client,
        _namespace: &str,
    ) -> Option<BackendError> {
        None
    }

    /// The error for a 404 on create, when the kind explains it better
    /// than "namespace not found" (a missing CRD).
    async fn create_not_found(
        &self,
        _client: &kube::Client,
        _namespace: &str,
        _error: &kube::Error,
    ) -> Option<BackendError> {
        None
    }
}

/// `call`, given at most `wait.timeout`: past it, `what` (the stop, the
/// deletion) of the job was not confirmed ([`BackendError::NotConfirmed`]);
/// the cluster goes on with it.
async fn within(
    record: &JobRecord,
    what: &str,
    wait: CleanupWait,
    call: impl std::future::Future<Output = Result<(), BackendError>>,
) -> Result<(), BackendError> {
    match tokio::time::timeout(wait.timeout, call).await {
        Ok(answer) => answer,
        Err(_) => Err(BackendError::not_confirmed(
            record.job_id.as_str(),
            what,
            wait.timeout,
        )),
    }
}

/// How a watch for an object's deletion ended.
enum Watched {
    /// It saw the object deleted.
    Deleted,
    /// It ended (its timeout, an expired version, a broken stream).
    Ended,
    /// It could not be opened.
    Failed,
}

/// The longest pause between polls of an object being deleted, when it
/// cannot be watched.
pub const MAX_DELETION_POLL: Duration = Duration::from_secs(5);

/// Settings of a [`KubeBackend`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct KubeOptions {
    /// Namespace `list` looks in (jobs themselves use their record's).
    pub namespace: String,
    /// Manifest settings (service account, TTL, default pending deadline…).
    pub manifest: ManifestOptions,
    /// Poll interval of `follow_logs`, and the first pause of `cleanup`'s
    /// polls when it cannot watch the object (default 250 ms; the pauses
    /// grow up to the call's [`CleanupWait::poll_interval`]).
    pub poll_interval: Duration,
    /// Attempts at writing a job's final state (cancel, an expired pending
    /// deadline) when the object keeps changing under the write (409 on its
    /// resource version): 5 attempts, 50 ms doubling, with jitter.
    pub conflict_retry: RetryPolicy,
}

impl Default for KubeOptions {
    fn default() -> Self {
        Self {
            namespace: "default".into(),
            manifest: ManifestOptions::default(),
            poll_interval: Duration::from_millis(250),
            conflict_retry: RetryPolicy::new(
                5,
                Backoff::new(Duration::from_millis(50), Duration::from_secs(1)).with_jitter(0.5),
            ),
        }
    }
}

impl KubeOptions {
    /// Options for `namespace` with every other default.
    pub fn new(namespace: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            ..Self::default()
        }
    }

    /// The same options with another default pending deadline (jobs that
    /// set `Deadlines::pending` keep theirs).
    pub fn pending_deadline(mut self, deadline: Duration) -> Self {
        self.manifest.pending_deadline = deadline;
        self
    }

    /// The same options with these manifest settings.
    pub fn manifest(mut self, manifest: ManifestOptions) -> Self {
        self.manifest = manifest;
        self
    }

    /// The same options with another poll interval.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// The same options with another policy for writes that conflict
    /// with a concurrent change ([`KubeOptions::conflict_retry`]).
    pub fn conflict_retry(mut self, policy: RetryPolicy) -> Self {
        self.conflict_retry = policy;
        self
    }
}

/// A Kubernetes backend: one workload object of kind `W` (and, when env
/// was captured, one Secret it owns) per job.
pub struct KubeBackend<W: Workload> {
    client: LazyClient,
    workload: Arc<W>,
    options: KubeOptions,
    /// Namespaces whose service account was found.
    accounts_seen: std::sync::Mutex<BTreeSet<String>>,
}

impl<W: Workload> Debug for KubeBackend<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeBackend")
            .field("kind", &self.workload.kind())
            .field("client", &self.client)
            .field("options", &self.options)
            .finish()
    }
}

impl<W: Workload + Default> KubeBackend<W> {
    /// A backend over `client`.
    pub fn new(client: kube::Client, options: KubeOptions) -> Self {
        Self::with_workload(LazyClient::given(client), W::default(), options)
    }

    /// A backend that reads its cluster from a kubeconfig when first used:
    /// `path` (else `KUBECONFIG`, else `~/.kube/config`) and `context`
    /// (else the current one). Building it does no IO.
    pub fn from_kubeconfig(
        path: Option<PathBuf>,
        context: Option<String>,
        options: KubeOptions,
    ) -> Self {
        Self::with_workload(
            LazyClient::from_kubeconfig(path, context),
            W::default(),
            options,
        )
    }
}

impl<W: Workload> KubeBackend<W> {
    /// A backend of `workload` objects over `client`.
    pub fn with_workload(client: LazyClient, workload: W, options: KubeOptions) -> Self {
        Self {
            client,
            workload: Arc::new(workload),
            options,
            accounts_seen: std::sync::Mutex::default(),
        }
    }

    /// The options.
    pub fn options(&self) -> &KubeOptions {
        &self.options
    }

    /// The workload kind.
    pub fn workload(&self) -> &W {
        &self.workload
    }

    fn name(&self) -> &'static str {
        self.workload.backend_name()
    }

    async fn objects(&self, namespace: &str) -> Result<Api<W::Object>, BackendError> {
        self.workload
            .api(&self.client.get().await?, namespace)
            .await
    }

    async fn pods(&self, namespace: &str) -> Result<Api<Pod>, BackendError> {
        Ok(Api::namespaced(self.client.get().await?, namespace))
    }

    fn cx<'a>(&self, verb: &'a str, name: Option<&'a str>, namespace: &'a str) -> Context<'a> {
        Context {
            verb,
            resource: self.workload.plural(),
            name,
            namespace,
        }
    }

    /// The object of a job, `None` when it does not exist.
    async fn get_object(&self, record: &Named) -> Result<Option<W::Object>, BackendError> {
        let api = self.objects(&record.namespace).await?;
        match api.get(&record.k8s_name).await {
            Ok(o) => Ok(Some(o)),
            Err(e) if error::code(&e) == Some(404) => Ok(None),
            Err(e) => Err(error::map(
                e,
                self.cx("get", Some(&record.k8s_name), &record.namespace),
            )),
        }
    }

    async fn list_pods(&self, namespace: &str, selector: &str) -> Result<Vec<Pod>, BackendError> {
        let api = self.pods(namespace).await?;
        let mut pods = api
            .list(&ListParams::default().labels(selector))
            .await
            .map(|l| l.items)
            .map_err(|e| {
                error::map(
                    e,
                    Context {
                        verb: "list",
                        resource: "pods",
                        name: None,
                        namespace,
                    },
                )
            })?;
        sort_oldest_first(&mut pods);
        Ok(pods)
    }

    /// The events about objects of the [`Workload::event_kinds`] in
    /// `namespace` (one LIST per kind, by field selector).
    async fn events(&self, namespace: &str) -> Result<Vec<Event>, BackendError> {
        let api: Api<Event> = Api::namespaced(self.client.get().await?, namespace);
        let mut out = Vec::new();
        for kind in self.workload.event_kinds() {
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
            tracing::debug!(
                "cannot read the events of the {}: {e}",
                self.workload.kind()
            );
            Vec::new()
        })
    }

    /// Check that the service account the job's pods run as exists in
    /// `namespace` (once per namespace): without it the controller cannot
    /// create the pods and the job would only wait. A caller that may not
    /// read service accounts is not stopped here.
    async fn check_service_account(&self, namespace: &str) -> Result<(), BackendError> {
        let seen = |ns: &str| {
            self.accounts_seen
                .lock()
                .map(|s| s.contains(ns))
                .unwrap_or(false)
        };
        if seen(namespace) {
            return Ok(());
        }
        let account = &self.options.manifest.service_account;
        let api: Api<ServiceAccount> = Api::namespaced(self.client.get().await?, namespace);
        match api.get(account).await {
            Ok(_) => {
                if let Ok(mut s) = self.accounts_seen.lock() {
                    s.insert(namespace.to_owned());
                }
                Ok(())
            }
            Err(e) if error::code(&e) == Some(404) => Err(BackendError::invalid_input(format!(
                "the service account '{account}' does not exist in namespace '{namespace}': the job's pods run as it, so the cluster would refuse to create them; create it with `kinetic up` (or `kubectl create serviceaccount {account} -n {namespace}`)"
            ))
            .with_source(e)),
            Err(e) if error::code(&e) == Some(403) => Ok(()),
            Err(e) => Err(error::map(
                e,
                Context {
                    verb: "get",
                    resource: "serviceaccounts",
                    name: Some(account),
                    namespace,
                },
            )),
        }
    }

    /// Write a final state on the object unless it already ended, and end
    /// it with the kind's [`Workload::end_patch`] (a Job's
    /// `activeDeadlineSeconds` becomes 1; a LeaderWorkerSet's replicas
    /// 0), so its pods stop and the state stays. A concurrent change of
    /// the object (409 on the resource version) is read again and retried
    /// under [`KubeOptions::conflict_retry`]; other failures go to the
    /// caller (the engine's retry decorator retries the transient ones).
    async fn finalise(&self, record: &Named, state: &JobState) -> Result<(), BackendError> {
        let api = self.objects(&record.namespace).await?;
        let text = serde_json::to_string(state).map_err(|e| {
            BackendError::other(format!("cannot encode a job state: {e}")).with_source(e)
        })?;
        let attempt = || async {
            let Some(object) = self.get_object(record).await? else {
                return Ok(());
            };
            if self.workload.is_finished(&object) {
                return Ok(());
            }
            if self.workload.saves_logs() {
                self.save_log(record, &object).await;
            }
            let mut patch = json!({
                "metadata": {
                    "resourceVersion": object.meta().resource_version,
                    "annotations": {ANNOTATION_FINAL_STATE: text},
                },
            });
            if let (Some(p), serde_json::Value::Object(end)) =
                (patch.as_object_mut(), self.workload.end_patch(state))
            {
                p.extend(end);
            }
            match api
                .patch(
                    &record.k8s_name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => Ok(()),
                Err(e) if error::code(&e) == Some(404) => Ok(()),
                Err(e) => Err(error::map(
                    e,
                    self.cx("patch", Some(&record.k8s_name), &record.namespace),
                )),
            }
        };
        let conflict = |e: &BackendError| api_status(e).is_some_and(|s| s.code == 409);
        kinetic_engine::retry::retry_if(&self.options.conflict_retry, conflict, attempt)
            .await
            .map_err(|gave_up| {
                if !gave_up.exhausted {
                    return gave_up.error;
                }
                // Out of attempts on conflicts: retried already, here.
                BackendError::Unavailable {
                    message: format!(
                        "job {} kept changing while its final state was being written (gave up after {} attempts)",
                        record.job_id, gave_up.attempts
                    ),
                    retried: true,
                    source: Some(Box::new(gave_up.error)),
                }
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

    /// Keep the log of the job's log pods in its ConfigMap (see
    /// [`Workload::saves_logs`]); a log that cannot be read or kept is
    /// only a warning: the final state matters more.
    async fn save_log(&self, record: &Named, object: &W::Object) {
        let text = match self.pod_logs(record, LogOptions::default()).await {
            Ok(text) => text,
            Err(e) => {
                tracing::warn!(job_id = %record.job_id, "could not read the job's log to keep it: {e}");
                return;
            }
        };
        // A ConfigMap holds at most 1 MiB: keep the end.
        let mut start = text.len().saturating_sub(SAVED_LOG_MAX);
        while !text.is_char_boundary(start) {
            start += 1;
        }
        let map = ConfigMap {
            metadata: ObjectMeta {
                name: Some(log_map_name(&record.k8s_name)),
                namespace: Some(record.namespace.clone()),
                labels: Some(BTreeMap::from([
                    (LABEL_APP.to_owned(), self.workload.app().to_owned()),
                    (LABEL_JOB_ID.to_owned(), record.job_id.to_string()),
                ])),
                owner_references: Some(vec![self.workload.owner(object)]),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(
                LOG_KEY.to_owned(),
                text[start..].to_owned(),
            )])),
            ..ConfigMap::default()
        };
        let result = match self.client.get().await {
            Ok(client) => Api::<ConfigMap>::namespaced(client, &record.namespace)
                .create(&PostParams::default(), &map)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = result {
            tracing::warn!(job_id = %record.job_id, "could not keep the job's log: {e}");
        }
    }

    /// The log kept in the job's ConfigMap, if any.
    async fn saved_log(&self, record: &JobRecord) -> Result<Option<String>, BackendError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.get().await?, &record.namespace);
        match api.get(&log_map_name(&record.k8s_name)).await {
            Ok(map) => Ok(map.data.and_then(|mut d| d.remove(LOG_KEY))),
            Err(e) if error::code(&e) == Some(404) => Ok(None),
            Err(e) => Err(error::map(
                e,
                Context {
                    verb: "get",
                    resource: "configmaps",
                    name: None,
                    namespace: &record.namespace,
                },
            )),
        }
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
        let pods = if objects.iter().any(|o| self.workload.needs_pods(o)) {
            self.list_pods(namespace, &selector).await?
        } else {
            Vec::new()
        };
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
        let podless = objects.iter().any(|o| {
            self.workload.reads_events(o)
                || self.workload.needs_pods(o)
                    && !by_name.contains_key(o.meta().name.as_deref().unwrap_or(""))
        });
        let events = if podless {
            self.events(namespace).await.unwrap_or_else(|e| {
                tracing::debug!("cannot read the events of the batch's objects: {e}");
                Vec::new()
            })
        } else {
            Vec::new()
        };
        let now = SystemTime::now();
        let mut out = BTreeMap::new();
        for object in &objects {
            let Some(id) = object
                .meta()
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_JOB_ID))
                .and_then(|v| v.parse::<JobId>().ok())
            else {
                continue;
            };
            let name = object.meta().name.clone().unwrap_or_default();
            let pods = by_name.remove(&name).unwrap_or_default();
            let state = self.workload.state(object, &pods, &events, now);
            let state = self.probed(namespace, object, &pods, state).await;
            if crate::status::final_state(object.meta()).is_none() && self.workload.keeps(&state) {
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
}

/// Lines of the probe pod's log read per observation.
const PROBE_LINES: i64 = 5;

/// The most of a job's log kept in its ConfigMap (whose limit is 1 MiB).
const SAVED_LOG_MAX: usize = 900 * 1024;
/// The ConfigMap key of a kept log.
const LOG_KEY: &str = "log";

/// Name of the ConfigMap keeping a job's log: `{name}-log`.
pub fn log_map_name(k8s_name: &str) -> String {
    format!("{k8s_name}-log")
}

/// What names a job's objects: its namespace, object name and id.
#[derive(Debug, Clone)]
struct Named {
    namespace: String,
    k8s_name: String,
    job_id: String,
}

impl Named {
    fn of(record: &JobRecord) -> Self {
        Self {
            namespace: record.namespace.clone(),
            k8s_name: record.k8s_name.clone(),
            job_id: record.job_id.to_string(),
        }
    }
}

fn not_found(backend: &str, record: &Named) -> BackendError {
    BackendError::not_found(backend.to_owned(), record.job_id.to_string())
}

type LineStream = Pin<Box<dyn Stream<Item = Result<String, BackendError>> + Send>>;

#[async_trait]
impl<W: Workload> Backend for KubeBackend<W> {
    fn name(&self) -> &str {
        self.workload.backend_name()
    }

    fn capabilities(&self) -> BackendCapabilities {
        self.workload.capabilities()
    }

    async fn group_status(&self, query: &GroupQuery) -> Result<GroupStatus, BackendError> {
        KubeBackend::group_status(self, &query.namespace, &query.group_id).await
    }

    /// What the capabilities declare.
    async fn check(&self, accelerator: &AcceleratorSpec) -> Result<(), BackendError> {
        self.capabilities().check(self.name(), accelerator)
    }

    async fn submit(&self, job: &PreparedJob) -> Result<(), BackendError> {
        let r = &job.record;
        check_fuse_mounts(self.name(), job)?;
        self.workload.check_job(job)?;
        let api = self.objects(&r.namespace).await?;
        self.check_service_account(&r.namespace).await?;
        let manifest = self.workload.build(job, &self.options.manifest);
        let created = match api.create(&PostParams::default(), &manifest).await {
            Ok(created) => created,
            Err(e) if error::code(&e) == Some(409) => {
                let existing = api
                    .get(&r.k8s_name)
                    .await
                    .map_err(|e| error::map(e, self.cx("get", Some(&r.k8s_name), &r.namespace)))?;
                let spec = existing
                    .meta()
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(ANNOTATION_SPEC_URI))
                    .cloned()
                    .unwrap_or_default();
                if spec != job.spec_uri {
                    return Err(BackendError::AlreadyExists {
                        backend: self.name().to_owned(),
                        job_id: r.job_id.to_string(),
                        message: format!(
                            "{} {} in namespace {} runs spec {spec}, not {}",
                            self.workload.kind(),
                            r.k8s_name,
                            r.namespace,
                            job.spec_uri
                        ),
                    });
                }
                existing
            }
            Err(e) if error::code(&e) == Some(404) => {
                let client = self.client.get().await?;
                return Err(
                    match self
                        .workload
                        .create_not_found(&client, &r.namespace, &e)
                        .await
                    {
                        Some(explained) => explained.with_source(e),
                        None => error::map(e, self.cx("create", None, &r.namespace)),
                    },
                );
            }
            Err(e) => return Err(error::map(e, self.cx("create", None, &r.namespace))),
        };
        let owner = self.workload.owner(&created);
        if let Some(secret) = pod::env_secret(job, self.workload.app(), owner) {
            let secrets: Api<Secret> = Api::namespaced(self.client.get().await?, &r.namespace);
            match secrets.create(&PostParams::default(), &secret).await {
                Ok(_) => {}
                Err(e) if error::code(&e) == Some(409) => {}
                Err(e) => {
                    // Without its Secret no pod can start: take the object back.
                    let _ = api.delete(&r.k8s_name, &DeleteParams::background()).await;
                    return Err(error::map(
                        e,
                        Context {
                            verb: "create",
                            resource: "secrets",
                            name: None,
                            namespace: &r.namespace,
                        },
                    ));
                }
            }
        }
        tracing::debug!(job_id = %r.job_id, name = %r.k8s_name, namespace = %r.namespace, kind = self.workload.kind(), "submitted");
        Ok(())
    }

    async fn status(&self, record: &JobRecord) -> Result<JobState, BackendError> {
        let Some(object) = self.get_object(&Named::of(record)).await? else {
            return Ok(JobState::new(JobStatus::NotFound));
        };
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
                &format!("{LABEL_JOB_NAME}={}", record.k8s_name),
            )
            .await?
        } else {
            Vec::new()
        };
        let events = match early {
            Some(events) => events,
            None => {
                self.events_if_podless(&object, &pods, &record.namespace)
                    .await
            }
        };
        let state = self
            .workload
            .state(&object, &pods, &events, SystemTime::now());
        let state = self.probed(&record.namespace, &object, &pods, state).await;
        if crate::status::final_state(object.meta()).is_none() {
            self.record_attempts(record, &object, &state).await;
        }
        if crate::status::final_state(object.meta()).is_none() && self.workload.keeps(&state) {
            // Keep the verdict: a pod must not start (or a group be
            // recreated) later and turn a reported failure into a run.
            if let Err(e) = self.finalise(&Named::of(record), &state).await {
                tracing::warn!(job_id = %record.job_id, "could not record the job's final state: {e}");
            }
        }
        Ok(state)
    }

    async fn logs(&self, record: &JobRecord, options: LogOptions) -> Result<String, BackendError> {
        if self.workload.saves_logs()
            && let Some(text) = self.saved_log(record).await?
        {
            return Ok(match options.tail {
                Some(n) => tail_lines(&text, n),
                None => text,
            });
        }
        self.pod_logs(&Named::of(record), options).await
    }

    async fn follow_logs(&self, record: &JobRecord) -> Result<LogStream, BackendError> {
        self.follow(record).await
    }

    async fn cancel(&self, record: &JobRecord, wait: CleanupWait) -> Result<(), BackendError> {
        let what = format!("the stop of {} {}", self.workload.kind(), record.k8s_name);
        within(record, &what, wait, self.cancel_job(record)).await
    }

    async fn cleanup(&self, record: &JobRecord, wait: CleanupWait) -> Result<(), BackendError> {
        let what = format!(
            "the deletion of {} {} in namespace {}",
            self.workload.kind(),
            record.k8s_name,
            record.namespace
        );
        within(record, &what, wait, self.cleanup_job(record, wait)).await
    }

    fn changes(&self) -> Option<kinetic_core::ports::ChangeFeed> {
        // Workloads on a cluster are polled.
        None
    }

    async fn list(&self) -> Result<Vec<JobId>, BackendError> {
        self.list_jobs().await
    }

    async fn port_forward(
        &self,
        job: &JobRecord,
        port: u16,
    ) -> Result<kinetic_core::ports::PortStream, BackendError> {
        self.forward_port(job, port).await
    }
}

/// The refusal to forward a port of a job that ended.
fn ended_forward(port: u16, named: &Named) -> BackendError {
    BackendError::invalid_input(format!(
        "cannot forward port {port} of job {}: it has ended",
        named.job_id
    ))
}

impl<W: Workload> KubeBackend<W> {
    /// [`Backend::port_forward`]: the API server's `pods/portforward` (a
    /// WebSocket) to the job's running pod, one per call.
    async fn forward_port(
        &self,
        job: &JobRecord,
        port: u16,
    ) -> Result<kinetic_core::ports::PortStream, BackendError> {
        if !self.capabilities().port_forward {
            return Err(BackendCapabilities::undeclared(self.name(), "port_forward"));
        }
        let named = Named::of(job);
        let mut pods = self
            .list_pods(
                &named.namespace,
                &self.workload.log_selector(&named.k8s_name),
            )
            .await?;
        if pods.is_empty() {
            return Err(match self.get_object(&named).await? {
                None => not_found(self.name(), &named),
                // An ended workload whose pods are gone (a slice is scaled
                // to no group when it ends).
                Some(object) if self.workload.is_finished(&object) => ended_forward(port, &named),
                Some(_) => BackendError::invalid_input(format!(
                    "cannot forward port {port} of job {}: it has no pod yet",
                    named.job_id
                )),
            });
        }
        sort_oldest_first(&mut pods);
        let running = pods
            .iter()
            .rev()
            .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
        let Some(pod) = running else {
            return Err(BackendError::invalid_input(format!(
                "cannot forward port {port} of job {}: its pod is not running",
                named.job_id
            )));
        };
        if let Some(object) = self.get_object(&named).await?
            && self.workload.is_finished(&object)
        {
            // A slice's hosts hold their containers after the job ended.
            return Err(ended_forward(port, &named));
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let api = self.pods(&named.namespace).await?;
        let mut forwarder = api.portforward(&name, &[port]).await.map_err(|e| {
            error::map(
                e,
                Context {
                    verb: "create",
                    resource: "pods/portforward",
                    name: Some(&name),
                    namespace: &named.namespace,
                },
            )
        })?;
        let (Some(stream), Some(error)) = (forwarder.take_stream(port), forwarder.take_error(port))
        else {
            return Err(BackendError::other(format!(
                "the port-forward to pod {name} gave no stream for port {port}"
            )));
        };
        Ok(Box::new(
            tokio_util::compat::TokioAsyncReadCompatExt::compat(
                crate::forward::ForwardedPort::new(
                    stream,
                    Box::pin(error),
                    forwarder,
                    format!("port {port} of pod {name}"),
                ),
            ),
        ))
    }

    /// The log of the job's log pods, across their restarts.
    async fn pod_logs(&self, record: &Named, options: LogOptions) -> Result<String, BackendError> {
        let pods = self
            .list_pods(
                &record.namespace,
                &self.workload.log_selector(&record.k8s_name),
            )
            .await?;
        if pods.is_empty() && self.get_object(record).await?.is_none() {
            return Err(not_found(self.name(), record));
        }
        let api = self.pods(&record.namespace).await?;
        let single = pods.len() == 1;
        let mut text = String::new();
        for pod in &pods {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let restarts = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first())
                .map_or(0, |c| c.restart_count);
            let mut params = LogParams {
                container: Some(CONTAINER_NAME.to_owned()),
                ..LogParams::default()
            };
            if restarts > 0 {
                params.previous = true;
                if let Ok(prev) = api.logs(&name, &params).await {
                    text.push_str(&prev);
                }
                params.previous = false;
            }
            if single && restarts == 0 {
                params.tail_lines = options.tail.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
            }
            match api.logs(&name, &params).await {
                Ok(t) => text.push_str(&t),
                // 400: the container has not started (pending): no output yet.
                Err(e) if matches!(error::code(&e), Some(400 | 404)) => {}
                Err(e) => {
                    return Err(error::map(
                        e,
                        Context {
                            verb: "get",
                            resource: "pods/log",
                            name: None,
                            namespace: &record.namespace,
                        },
                    ));
                }
            }
        }
        Ok(match options.tail {
            Some(n) => tail_lines(&text, n),
            None => text,
        })
    }

    async fn follow(&self, record: &JobRecord) -> Result<LogStream, BackendError> {
        let Some(object) = self.get_object(&Named::of(record)).await? else {
            return Err(not_found(self.name(), &Named::of(record)));
        };
        let follower = Follower {
            cx: FollowCtx {
                object,
                objects: self.objects(&record.namespace).await?,
                pods: self.pods(&record.namespace).await?,
                workload: self.workload.clone(),
                log_selector: self.workload.log_selector(&record.k8s_name),
                all_selector: format!("{LABEL_JOB_NAME}={}", record.k8s_name),
                name: record.k8s_name.clone(),
                poll: self.options.poll_interval,
            },
            seen: BTreeSet::new(),
            current: None,
            done: false,
        };
        Ok(Box::pin(futures_util::stream::unfold(
            follower,
            |mut f| async move {
                let item = f.next_line().await?;
                Some((item, f))
            },
        )))
    }

    async fn cancel_job(&self, record: &JobRecord) -> Result<(), BackendError> {
        if self.workload.ends_in_pods() && self.status(record).await?.status.is_terminal() {
            return Ok(());
        }
        let state = JobState::new(JobStatus::Failed).with_reason(StatusReason::Cancelled);
        self.finalise(&Named::of(record), &state).await
    }

    async fn cleanup_job(&self, record: &JobRecord, wait: CleanupWait) -> Result<(), BackendError> {
        let api = self.objects(&record.namespace).await?;
        match api
            .delete(&record.k8s_name, &DeleteParams::foreground())
            .await
        {
            Ok(_) => {}
            Err(e) if error::code(&e) == Some(404) => {}
            Err(e) => {
                return Err(error::map(
                    e,
                    self.cx("delete", Some(&record.k8s_name), &record.namespace),
                ));
            }
        }
        // Owned by the object, the Secret goes with it; delete it by name
        // too so that none outlives an object that was never fully created.
        let secrets: Api<Secret> = Api::namespaced(self.client.get().await?, &record.namespace);
        match secrets
            .delete(
                &pod::secret_name(&record.k8s_name),
                &DeleteParams::background(),
            )
            .await
        {
            Ok(_) => {}
            Err(e) if error::code(&e) == Some(404) => {}
            Err(e) => {
                tracing::warn!(job_id = %record.job_id, "could not delete the job's Secret: {e}")
            }
        }
        if self.workload.saves_logs() {
            let maps: Api<ConfigMap> = Api::namespaced(self.client.get().await?, &record.namespace);
            match maps
                .delete(&log_map_name(&record.k8s_name), &DeleteParams::background())
                .await
            {
                Ok(_) => {}
                Err(e) if error::code(&e) == Some(404) => {}
                Err(e) => {
                    tracing::warn!(job_id = %record.job_id, "could not delete the job's kept log: {e}")
                }
            }
        }
        self.wait_deleted(&Named::of(record), wait).await
    }

    /// Record the attempts `state` carries on the object
    /// ([`crate::pod::ANNOTATION_ATTEMPTS`]) when they differ from those
    /// recorded: the workload state merges them with what it sees next, so
    /// a budget spent stays spent once the pods and their events are gone.
    /// A failed write is logged; the next poll writes again.
    async fn record_attempts(&self, record: &JobRecord, object: &W::Object, state: &JobState) {
        if state.attempts.is_empty()
            || crate::status::recorded_attempts(object.meta()) == state.attempts
        {
            return;
        }
        let Ok(text) = serde_json::to_string(&state.attempts) else {
            return;
        };
        let patch = json!({"metadata": {"annotations": {crate::pod::ANNOTATION_ATTEMPTS: text}}});
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

    /// Wait for a foreground deletion to finish, for at most
    /// `wait.timeout`: a watch on the object, which the
    /// API server answers once when it goes, read again (with the object
    /// got afresh) when it ends or breaks; a watch that cannot be opened
    /// falls back to polling that backs off exponentially to
    /// `wait.poll_interval` (at most [`MAX_DELETION_POLL`]). A node that
    /// never confirms its pods' deletion thus costs a few requests, not
    /// several a second.
    async fn wait_deleted(&self, named: &Named, wait: CleanupWait) -> Result<(), BackendError> {
        let started = tokio::time::Instant::now();
        let deadline = started + wait.timeout;
        let longest = wait
            .poll_interval
            .clamp(Duration::from_millis(20), MAX_DELETION_POLL);
        let backoff = Backoff::new(
            self.options
                .poll_interval
                .clamp(Duration::from_millis(20), longest),
            longest,
        );
        let mut failures = 0u32;
        loop {
            let object = match self.get_object(named).await {
                Ok(None) => return Ok(()),
                Ok(Some(object)) => Some(object),
                Err(e) if e.is_retryable() => None,
                Err(e) => return Err(e),
            };
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(BackendError::not_confirmed(
                    &named.job_id,
                    &format!(
                        "the deletion of {} {} in namespace {}",
                        self.workload.kind(),
                        named.k8s_name,
                        named.namespace
                    ),
                    wait.timeout,
                ));
            }
            let left = deadline - now;
            let version = object
                .as_ref()
                .and_then(|o| o.meta().resource_version.clone());
            let opened = tokio::time::Instant::now();
            let watched = match version {
                Some(version) => self.watch_until_deleted(named, &version, left).await,
                None => Watched::Failed,
            };
            match watched {
                Watched::Deleted => continue,
                Watched::Ended if opened.elapsed() >= Duration::from_secs(1) => {
                    failures = 0;
                    continue;
                }
                Watched::Ended | Watched::Failed => {}
            }
            // No watch (refused, broken at once): poll, backing off.
            let pause = backoff.delay(failures).min(left);
            failures = failures.saturating_add(1);
            tokio::time::sleep(pause).await;
        }
    }

    /// Watch the object from `version` for at most `left` (whole seconds,
    /// at least one), until it is deleted.
    async fn watch_until_deleted(&self, named: &Named, version: &str, left: Duration) -> Watched {
        let Ok(api) = self.objects(&named.namespace).await else {
            return Watched::Failed;
        };
        let seconds = u32::try_from(left.as_secs().clamp(1, 290)).unwrap_or(290);
        let params = WatchParams::default()
            .fields(&format!("metadata.name={}", named.k8s_name))
            .timeout(seconds);
        let mut stream = match api.watch(&params, version).await {
            Ok(stream) => Box::pin(stream),
            Err(e) => {
                tracing::debug!(
                    "cannot watch {} {}: {e}",
                    self.workload.kind(),
                    named.k8s_name
                );
                return Watched::Failed;
            }
        };
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Deleted(_)) => return Watched::Deleted,
                // An expired version, a broken stream: get it again.
                Ok(WatchEvent::Error(_)) | Err(_) => return Watched::Ended,
                Ok(_) => {}
            }
        }
        Watched::Ended
    }

    async fn list_jobs(&self) -> Result<Vec<JobId>, BackendError> {
        let ns = &self.options.namespace;
        let api = self.objects(ns).await?;
        let listed = api
            .list(&ListParams::default().labels(&format!("{LABEL_APP}={}", self.workload.app())))
            .await;
        let objects = match listed {
            Ok(objects) => objects,
            Err(e) if error::code(&e) == Some(404) => {
                // A kind the cluster does not serve (a CRD not installed).
                let client = self.client.get().await?;
                return Err(match self.workload.list_not_found(&client, ns).await {
                    Some(why) => why.with_source(e),
                    None => error::map(e, self.cx("list", None, ns)),
                });
            }
            Err(e) => return Err(error::map(e, self.cx("list", None, ns))),
        };
        let mut ids: Vec<JobId> = objects
            .items
            .iter()
            .filter(|o| o.meta().deletion_timestamp.is_none())
            .filter_map(|o| o.meta().labels.as_ref()?.get(LABEL_JOB_ID)?.parse().ok())
            .collect();
        ids.sort();
        Ok(ids)
    }
}

struct FollowCtx<W: Workload> {
    /// The object as the follow began (for [`Workload::ended_in_logs`]).
    object: W::Object,
    objects: Api<W::Object>,
    pods: Api<Pod>,
    workload: Arc<W>,
    log_selector: String,
    all_selector: String,
    name: String,
    poll: Duration,
}

/// Follows a job's log pods one after the other (a retried pod's log, or
/// a recreated group's leader, follows the first's), ending once the job
/// ended and every started log pod was read to its end.
struct Follower<W: Workload> {
    cx: FollowCtx<W>,
    /// Pods already followed, by uid (a recreated pod keeps its name).
    seen: BTreeSet<String>,
    current: Option<LineStream>,
    done: bool,
}

fn pod_key(pod: &Pod) -> String {
    pod.metadata
        .uid
        .clone()
        .or_else(|| pod.metadata.name.clone())
        .unwrap_or_default()
}

impl<W: Workload> Follower<W> {
    async fn next_line(&mut self) -> Option<Result<String, BackendError>> {
        loop {
            if self.done {
                return None;
            }
            if let Some(stream) = self.current.as_mut() {
                match stream.next().await {
                    Some(item) => {
                        // A line that tells the job ended is its last.
                        if let Ok(line) = &item
                            && self
                                .cx
                                .workload
                                .ended_in_logs(&self.cx.object, std::slice::from_ref(line))
                                .is_some()
                        {
                            self.done = true;
                        }
                        return Some(item);
                    }
                    None => self.current = None,
                }
                continue;
            }
            let cx = &self.cx;
            let mut pods = match cx
                .pods
                .list(&ListParams::default().labels(&cx.all_selector))
                .await
            {
                Ok(l) => l.items,
                Err(e) => {
                    self.done = true;
                    return Some(Err(error::map(
                        e,
                        Context {
                            verb: "list",
                            resource: "pods",
                            name: None,
                            namespace: "",
                        },
                    )));
                }
            };
            sort_oldest_first(&mut pods);
            let log_pods = label_match(&pods, &cx.log_selector);
            if let Some(pod) = log_pods
                .into_iter()
                .find(|p| pod_started(p) && !self.seen.contains(&pod_key(p)))
            {
                let name = pod.metadata.name.clone().unwrap_or_default();
                self.seen.insert(pod_key(pod));
                let params = LogParams {
                    container: Some(CONTAINER_NAME.to_owned()),
                    follow: true,
                    ..LogParams::default()
                };
                match cx.pods.log_stream(&name, &params).await {
                    Ok(reader) => {
                        let lines = reader.lines().map(|l| {
                            l.map(|t| terminal_line(&t).to_owned()).map_err(|e| {
                                BackendError::unavailable(format!("log stream broke: {e}"))
                                    .with_source(e)
                            })
                        });
                        self.current = Some(Box::pin(lines));
                    }
                    Err(e) => tracing::debug!("cannot follow the log of pod {name}: {e}"),
                }
                continue;
            }
            let object = match cx.objects.get(&cx.name).await {
                Ok(o) => o,
                Err(_) => {
                    self.done = true;
                    return None;
                }
            };
            let state = cx.workload.state(&object, &pods, &[], SystemTime::now());
            if state.status.is_terminal() {
                self.done = true;
                return None;
            }
            tokio::time::sleep(cx.poll).await;
        }
    }
}

/// The pods whose labels match `selector` (`k=v` terms joined by `,`).
fn label_match<'a>(pods: &'a [Pod], selector: &str) -> Vec<&'a Pod> {
    let terms: Vec<(&str, &str)> = selector
        .split(',')
        .filter_map(|t| t.split_once('='))
        .collect();
    pods.iter()
        .filter(|p| {
            let labels = p.metadata.labels.as_ref();
            terms
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(*k)).is_some_and(|have| have == v))
        })
        .collect()
}

/// Refuses FUSE data the GCS FUSE CSI driver cannot mount: anything but a
/// `gs://` URI (data in a `file://` store, which no pod can see).
fn check_fuse_mounts(backend: &str, job: &PreparedJob) -> Result<(), BackendError> {
    match job.fuse_mounts.iter().find(|m| !m.uri.starts_with("gs://")) {
        None => Ok(()),
        Some(m) => Err(BackendError::unsupported(format!(
            "the {backend} backend mounts FUSE data through the GCS FUSE CSI driver, which reads gs:// buckets only; {} (for {}) is not in one: use a gs:// jobs bucket",
            m.uri, m.mount_path
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_match_labels_exactly() {
        let pod = |labels: &[(&str, &str)]| Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Pod::default()
        };
        let pods = [
            pod(&[("job-name", "a"), ("idx", "0")]),
            pod(&[("job-name", "a"), ("idx", "1")]),
            pod(&[("job-name", "b"), ("idx", "0")]),
        ];
        assert_eq!(label_match(&pods, "job-name=a").len(), 2);
        assert_eq!(label_match(&pods, "job-name=a,idx=0").len(), 1);
        assert_eq!(label_match(&pods, "job-name=c").len(), 0);
    }
}
