//! [`GkeBackend`]: the `Backend` port over a `kube::Client`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use futures_util::{AsyncBufReadExt, Stream, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod, Secret, ServiceAccount};
use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_core::ids::{GroupId, JobId};
use kinetic_core::ports::{
    Backend, BackendCapabilities, BackendError, LogOptions, LogStream, PreparedJob, tail_lines,
    terminal_line,
};
use kinetic_core::record::JobRecord;
use kinetic_core::retry::{Backoff, RetryPolicy};
use kinetic_core::status::{JobState, JobStatus, StatusReason};
use kube::api::{Api, DeleteParams, ListParams, LogParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::OnceCell;

use crate::error::{self, Context, api_status};
use crate::manifest::{
    self, ANNOTATION_FINAL_STATE, ANNOTATION_SPEC_URI, APP_KINETIC, CONTAINER_NAME, LABEL_APP,
    LABEL_GROUP_ID, LABEL_JOB_ID, LABEL_JOB_NAME, ManifestOptions,
};
use crate::status;

/// Where the backend gets its Kubernetes client.
#[derive(Clone)]
enum ClientSource {
    Given(kube::Client),
    Kubeconfig {
        path: Option<PathBuf>,
        context: Option<String>,
    },
}

impl std::fmt::Debug for ClientSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Given(_) => f.write_str("Given(kube::Client)"),
            Self::Kubeconfig { path, context } => f
                .debug_struct("Kubeconfig")
                .field("path", path)
                .field("context", context)
                .finish(),
        }
    }
}

/// Settings of a [`GkeBackend`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GkeOptions {
    /// Namespace `list` looks in (jobs themselves use their record's).
    pub namespace: String,
    /// Manifest settings (service account, TTL, default pending deadline…).
    pub manifest: ManifestOptions,
    /// How long `cleanup` waits for the Job to be gone (default 180 s).
    pub cleanup_timeout: Duration,
    /// Poll interval of `cleanup` and `follow_logs` (default 250 ms).
    pub poll_interval: Duration,
    /// Attempts at writing a job's final state (cancel, an expired pending
    /// deadline) when the Job keeps changing under the write (409 on its
    /// resource version): 5 attempts, 50 ms doubling, with jitter.
    pub conflict_retry: RetryPolicy,
}

impl Default for GkeOptions {
    fn default() -> Self {
        Self {
            namespace: "default".into(),
            manifest: ManifestOptions::default(),
            cleanup_timeout: Duration::from_secs(180),
            poll_interval: Duration::from_millis(250),
            conflict_retry: RetryPolicy::new(
                5,
                Backoff::new(Duration::from_millis(50), Duration::from_secs(1)).with_jitter(0.5),
            ),
        }
    }
}

impl GkeOptions {
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
    /// with a concurrent change ([`GkeOptions::conflict_retry`]).
    pub fn conflict_retry(mut self, policy: RetryPolicy) -> Self {
        self.conflict_retry = policy;
        self
    }
}

/// The GKE backend: one batch/v1 Job (and, when env was captured, one
/// Secret it owns) per single-host job.
pub struct GkeBackend {
    source: ClientSource,
    client: OnceCell<kube::Client>,
    options: GkeOptions,
    /// Namespaces whose service account was found.
    accounts_seen: std::sync::Mutex<BTreeSet<String>>,
}

impl std::fmt::Debug for GkeBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GkeBackend")
            .field("source", &self.source)
            .field("connected", &self.client.initialized())
            .field("options", &self.options)
            .finish()
    }
}

const NAME: &str = "gke";

impl GkeBackend {
    /// A backend over `client`.
    pub fn new(client: kube::Client, options: GkeOptions) -> Self {
        Self {
            source: ClientSource::Given(client.clone()),
            client: OnceCell::new_with(Some(client)),
            options,
            accounts_seen: std::sync::Mutex::default(),
        }
    }

    /// A backend that reads its cluster from a kubeconfig when first used:
    /// `path` (else `KUBECONFIG`, else `~/.kube/config`) and `context`
    /// (else the current one). Building it does no IO.
    pub fn from_kubeconfig(
        path: Option<PathBuf>,
        context: Option<String>,
        options: GkeOptions,
    ) -> Self {
        Self {
            source: ClientSource::Kubeconfig { path, context },
            client: OnceCell::new(),
            options,
            accounts_seen: std::sync::Mutex::default(),
        }
    }

    /// The options.
    pub fn options(&self) -> &GkeOptions {
        &self.options
    }

    async fn client(&self) -> Result<kube::Client, BackendError> {
        self.client
            .get_or_try_init(|| async {
                match &self.source {
                    ClientSource::Given(c) => Ok(c.clone()),
                    ClientSource::Kubeconfig { path, context } => {
                        let config = kube_config(path.as_deref(), context.as_deref()).await?;
                        kube::Client::try_from(config).map_err(|e| {
                            BackendError::other(format!("cannot build a Kubernetes client: {e}"))
                                .with_source(e)
                        })
                    }
                }
            })
            .await
            .cloned()
    }

    async fn jobs(&self, namespace: &str) -> Result<Api<Job>, BackendError> {
        Ok(Api::namespaced(self.client().await?, namespace))
    }

    async fn pods(&self, namespace: &str) -> Result<Api<Pod>, BackendError> {
        Ok(Api::namespaced(self.client().await?, namespace))
    }

    async fn secrets(&self, namespace: &str) -> Result<Api<Secret>, BackendError> {
        Ok(Api::namespaced(self.client().await?, namespace))
    }

    /// The Job of a job, `None` when it does not exist.
    async fn get_job(&self, record: &JobRecord) -> Result<Option<Job>, BackendError> {
        let api = self.jobs(&record.namespace).await?;
        match api.get(&record.k8s_name).await {
            Ok(job) => Ok(Some(job)),
            Err(e) if error::code(&e) == Some(404) => Ok(None),
            Err(e) => Err(error::map(
                e,
                Context {
                    verb: "get",
                    resource: "jobs",
                    name: Some(&record.k8s_name),
                    namespace: &record.namespace,
                },
            )),
        }
    }

    async fn list_pods(&self, namespace: &str, selector: &str) -> Result<Vec<Pod>, BackendError> {
        let api = self.pods(namespace).await?;
        api.list(&ListParams::default().labels(selector))
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
            })
    }

    async fn job_pods(&self, record: &JobRecord) -> Result<Vec<Pod>, BackendError> {
        let mut pods = self
            .list_pods(
                &record.namespace,
                &format!("{LABEL_JOB_NAME}={}", record.k8s_name),
            )
            .await?;
        pods.sort_by(|a, b| {
            a.metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0)
                .cmp(&b.metadata.creation_timestamp.as_ref().map(|t| t.0))
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        });
        Ok(pods)
    }

    /// The events about Jobs in `namespace` (one LIST, by field selector).
    async fn job_events(&self, namespace: &str) -> Result<Vec<Event>, BackendError> {
        let api: Api<Event> = Api::namespaced(self.client().await?, namespace);
        api.list(&ListParams::default().fields("involvedObject.kind=Job"))
            .await
            .map(|l| l.items)
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
            })
    }

    /// The events of a Job that has no pod (where the API server's
    /// refusal of its pod is told); none otherwise. Events the caller
    /// may not read leave the state without that reason.
    async fn events_if_podless(&self, job: &Job, pods: &[Pod], namespace: &str) -> Vec<Event> {
        if !pods.is_empty() || !status::needs_pods(job) {
            return Vec::new();
        }
        self.job_events(namespace).await.unwrap_or_else(|e| {
            tracing::debug!("cannot read the events of the Job: {e}");
            Vec::new()
        })
    }

    /// Check that the service account the job's pod runs as exists in
    /// `namespace` (once per namespace): without it the Job controller
    /// cannot create the pod and the job would only wait. A caller that
    /// may not read service accounts is not stopped here.
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
        let api: Api<ServiceAccount> = Api::namespaced(self.client().await?, namespace);
        match api.get(account).await {
            Ok(_) => {
                if let Ok(mut s) = self.accounts_seen.lock() {
                    s.insert(namespace.to_owned());
                }
                Ok(())
            }
            Err(e) if error::code(&e) == Some(404) => Err(BackendError::invalid_input(format!(
                "the service account '{account}' does not exist in namespace '{namespace}': the job's pod runs as it, so the cluster would refuse to create it; create it with `kinetic up` (or `kubectl create serviceaccount {account} -n {namespace}`)"
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

    /// Write a final state on the Job unless it already ended, and end it:
    /// its `activeDeadlineSeconds` becomes 1, so the Job controller stops
    /// its pods and marks it `Failed` (`DeadlineExceeded`) — a terminal
    /// condition, after which `ttlSecondsAfterFinished` removes it, its
    /// pods and its Secret. (Suspending would stop the pods too, but a
    /// suspended Job never finishes and is never collected.) A concurrent change of the Job (409
    /// on the resource version) is read again and retried under
    /// [`GkeOptions::conflict_retry`]; other failures go to the caller
    /// (the engine's retry decorator retries the transient ones).
    async fn finalise(
        &self,
        record: &JobRecord,
        state: &JobState,
        only_if: impl Fn(&Job) -> bool,
    ) -> Result<(), BackendError> {
        let api = self.jobs(&record.namespace).await?;
        let text = serde_json::to_string(state).map_err(|e| {
            BackendError::other(format!("cannot encode a job state: {e}")).with_source(e)
        })?;
        let attempt = || async {
            let Some(job) = self.get_job(record).await? else {
                return Ok(());
            };
            if !only_if(&job) {
                return Ok(());
            }
            let patch = json!({
                "metadata": {
                    "resourceVersion": job.metadata.resource_version,
                    "annotations": {ANNOTATION_FINAL_STATE: text},
                },
                "spec": {"activeDeadlineSeconds": 1},
            });
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
                    Context {
                        verb: "patch",
                        resource: "jobs",
                        name: Some(&record.k8s_name),
                        namespace: &record.namespace,
                    },
                )),
            }
        };
        let conflict = |e: &BackendError| api_status(e).is_some_and(|s| s.code == 409);
        self.options
            .conflict_retry
            .retry_if(conflict, attempt)
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

    /// The state of every job of a batch, with one labelled LIST of Jobs
    /// (and one of pods, only when some job is pending or failed and its
    /// reason lives on its pod). Jobs of the group that the cluster no
    /// longer holds are absent from the map: their status is `NOT_FOUND`.
    pub async fn group_status(
        &self,
        namespace: &str,
        group_id: &GroupId,
    ) -> Result<BTreeMap<JobId, JobState>, BackendError> {
        let selector = format!("{LABEL_GROUP_ID}={group_id}");
        let api = self.jobs(namespace).await?;
        let jobs = api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| {
                error::map(
                    e,
                    Context {
                        verb: "list",
                        resource: "jobs",
                        name: None,
                        namespace,
                    },
                )
            })?
            .items;
        let pods = if jobs.iter().any(status::needs_pods) {
            self.list_pods(namespace, &selector).await?
        } else {
            Vec::new()
        };
        let mut by_job: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
        for p in pods {
            let job_name = p
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_JOB_NAME))
                .cloned()
                .unwrap_or_default();
            by_job.entry(job_name).or_default().push(p);
        }
        let podless = jobs.iter().any(|j| {
            status::needs_pods(j) && !by_job.contains_key(j.metadata.name.as_deref().unwrap_or(""))
        });
        let events = if podless {
            self.job_events(namespace).await.unwrap_or_else(|e| {
                tracing::debug!("cannot read the events of the batch's Jobs: {e}");
                Vec::new()
            })
        } else {
            Vec::new()
        };
        let now = SystemTime::now();
        let mut out = BTreeMap::new();
        for job in &jobs {
            let Some(id) = job
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_JOB_ID))
                .and_then(|v| v.parse::<JobId>().ok())
            else {
                continue;
            };
            let name = job.metadata.name.clone().unwrap_or_default();
            let pods = by_job.remove(&name).unwrap_or_default();
            out.insert(id, status::job_state_with_events(job, &pods, &events, now));
        }
        Ok(out)
    }
}

/// What the backend tells the API server it is: `kinetic/{version}`.
pub const USER_AGENT: &str = concat!("kinetic/", env!("CARGO_PKG_VERSION"));

/// The client configuration of `context` (else the current one) in the
/// kubeconfig at `path` (else `KUBECONFIG`'s files merged, else
/// `~/.kube/config`), identifying itself as [`USER_AGENT`]. A context the
/// kubeconfig lacks is an error naming the contexts it has and how to add
/// the cluster's.
async fn kube_config(
    path: Option<&std::path::Path>,
    context: Option<&str>,
) -> Result<kube::Config, BackendError> {
    let location = || {
        path.map_or_else(
            || "KUBECONFIG / ~/.kube/config".to_owned(),
            |p| p.display().to_string(),
        )
    };
    let read = match path {
        Some(p) => kube::config::Kubeconfig::read_from(p),
        None => kube::config::Kubeconfig::read(),
    };
    let kubeconfig = read.map_err(|e| {
        BackendError::invalid_input(format!(
            "cannot read the kubeconfig ({}): {e}; for GKE run `gcloud container clusters get-credentials CLUSTER --zone ZONE --project PROJECT`",
            location()
        ))
        .with_source(e)
    })?;
    if let Some(wanted) = context
        && !kubeconfig.contexts.iter().any(|c| c.name == wanted)
    {
        let have: Vec<&str> = kubeconfig
            .contexts
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        let fix = match wanted
            .strip_prefix("gke_")
            .map(|r| r.splitn(3, '_').collect::<Vec<_>>())
        {
            Some(parts) if parts.len() == 3 => format!(
                "run `gcloud container clusters get-credentials {} --zone {} --project {}`",
                parts[2], parts[1], parts[0]
            ),
            _ => "add it (or choose another with KINETIC_KUBE_CONTEXT)".to_owned(),
        };
        return Err(BackendError::invalid_input(format!(
            "the kubeconfig ({}) has no context '{wanted}' (it has: {}); {fix}, or set KINETIC_KUBE_CONTEXT to the context to use",
            location(),
            if have.is_empty() {
                "none".to_owned()
            } else {
                have.join(", ")
            }
        )));
    }
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_owned),
        ..Default::default()
    };
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| {
            BackendError::invalid_input(format!(
                "cannot load the Kubernetes configuration ({}): {e}; for GKE run `gcloud container clusters get-credentials CLUSTER --zone ZONE --project PROJECT`",
                location()
            ))
            .with_source(e)
        })?;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(USER_AGENT),
    ));
    Ok(config)
}

fn is_finished(job: &Job) -> bool {
    status::final_state(job).is_some()
        || job
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
            })
}

fn not_found(record: &JobRecord) -> BackendError {
    BackendError::not_found(NAME.to_owned(), record.job_id.to_string())
}

fn pod_started(pod: &Pod) -> bool {
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

type LineStream = Pin<Box<dyn Stream<Item = Result<String, BackendError>> + Send>>;

#[async_trait]
impl Backend for GkeBackend {
    fn name(&self) -> &str {
        NAME
    }

    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities::single_host().with_image(true)
    }

    async fn group_status(
        &self,
        query: &kinetic_core::ports::GroupQuery,
    ) -> Result<kinetic_core::ports::GroupStatus, BackendError> {
        GkeBackend::group_status(self, &query.namespace, &query.group_id).await
    }

    /// What the capabilities declare: single-host accelerators only.
    async fn check(&self, accelerator: &AcceleratorSpec) -> Result<(), BackendError> {
        self.capabilities().check(NAME, accelerator)
    }

    async fn submit(&self, job: &PreparedJob) -> Result<(), BackendError> {
        let r = &job.record;
        let api = self.jobs(&r.namespace).await?;
        self.check_service_account(&r.namespace).await?;
        let manifest = manifest::job_manifest(job, &self.options.manifest);
        let cx = |verb| Context {
            verb,
            resource: "jobs",
            name: None,
            namespace: &r.namespace,
        };
        let created = match api.create(&PostParams::default(), &manifest).await {
            Ok(created) => created,
            Err(e) if error::code(&e) == Some(409) => {
                let existing = api
                    .get(&r.k8s_name)
                    .await
                    .map_err(|e| error::map(e, cx("get")))?;
                let spec = existing
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(ANNOTATION_SPEC_URI))
                    .cloned()
                    .unwrap_or_default();
                if spec != job.spec_uri {
                    return Err(BackendError::AlreadyExists {
                        backend: NAME.to_owned(),
                        job_id: r.job_id.to_string(),
                        message: format!(
                            "Job {} in namespace {} runs spec {spec}, not {}",
                            r.k8s_name, r.namespace, job.spec_uri
                        ),
                    });
                }
                existing
            }
            Err(e) => return Err(error::map(e, cx("create"))),
        };
        let uid = created.metadata.uid.clone().unwrap_or_default();
        if let Some(secret) = manifest::env_secret(job, &uid) {
            let secrets = self.secrets(&r.namespace).await?;
            match secrets.create(&PostParams::default(), &secret).await {
                Ok(_) => {}
                Err(e) if error::code(&e) == Some(409) => {}
                Err(e) => {
                    // Without its Secret the pod cannot start: take the Job back.
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
        tracing::debug!(job_id = %r.job_id, job = %r.k8s_name, namespace = %r.namespace, "submitted");
        Ok(())
    }

    async fn status(&self, record: &JobRecord) -> Result<JobState, BackendError> {
        let Some(job) = self.get_job(record).await? else {
            return Ok(JobState::new(JobStatus::NotFound));
        };
        let pods = if status::needs_pods(&job) {
            self.job_pods(record).await?
        } else {
            Vec::new()
        };
        let events = self.events_if_podless(&job, &pods, &record.namespace).await;
        let state = status::job_state_with_events(&job, &pods, &events, SystemTime::now());
        if status::final_state(&job).is_none()
            && matches!(
                state.reason,
                Some(StatusReason::PendingDeadlineExceeded { .. })
            )
        {
            // Keep the verdict: the pod must not start later and turn a
            // reported failure into a run.
            if let Err(e) = self.finalise(record, &state, |j| !is_finished(j)).await {
                tracing::warn!(job_id = %record.job_id, "could not record the pending deadline on the Job: {e}");
            }
        }
        Ok(state)
    }

    async fn logs(&self, record: &JobRecord, options: LogOptions) -> Result<String, BackendError> {
        let pods = self.job_pods(record).await?;
        if pods.is_empty() && self.get_job(record).await?.is_none() {
            return Err(not_found(record));
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

    async fn follow_logs(&self, record: &JobRecord) -> Result<LogStream, BackendError> {
        if self.get_job(record).await?.is_none() {
            return Err(not_found(record));
        }
        let pods_api = self.pods(&record.namespace).await?;
        let follower = Follower {
            backend: FollowCtx {
                jobs: self.jobs(&record.namespace).await?,
                pods: pods_api,
                selector: format!("{LABEL_JOB_NAME}={}", record.k8s_name),
                job_name: record.k8s_name.clone(),
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

    async fn cancel(&self, record: &JobRecord) -> Result<(), BackendError> {
        let state = JobState::new(JobStatus::Failed).with_reason(StatusReason::Cancelled);
        self.finalise(record, &state, |j| !is_finished(j)).await
    }

    async fn cleanup(&self, record: &JobRecord) -> Result<(), BackendError> {
        let api = self.jobs(&record.namespace).await?;
        match api
            .delete(&record.k8s_name, &DeleteParams::foreground())
            .await
        {
            Ok(_) => {}
            Err(e) if error::code(&e) == Some(404) => {}
            Err(e) => {
                return Err(error::map(
                    e,
                    Context {
                        verb: "delete",
                        resource: "jobs",
                        name: Some(&record.k8s_name),
                        namespace: &record.namespace,
                    },
                ));
            }
        }
        // Owned by the Job, the Secret goes with it; delete it by name too
        // so that none outlives a Job that was never fully created.
        let secrets = self.secrets(&record.namespace).await?;
        match secrets
            .delete(
                &manifest::secret_name(&record.k8s_name),
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
        // Wait for the foreground deletion to finish: polls under a time
        // budget, through transient failures, with one retry policy.
        let poll = self.options.poll_interval.max(Duration::from_millis(20));
        let wait = RetryPolicy::new(u32::MAX, Backoff::new(Duration::from_millis(20), poll))
            .with_max_elapsed(self.options.cleanup_timeout);
        wait.call(|| async {
            match self.get_job(record).await? {
                None => Ok(()),
                Some(_) => Err(BackendError::unavailable(format!(
                    "Job {} in namespace {} is still being deleted after {:?}",
                    record.k8s_name, record.namespace, self.options.cleanup_timeout
                ))),
            }
        })
        .await
    }

    fn changes(&self) -> Option<kinetic_core::ports::ChangeFeed> {
        // Jobs on a cluster are polled.
        None
    }

    async fn list(&self) -> Result<Vec<JobId>, BackendError> {
        let ns = &self.options.namespace;
        let api = self.jobs(ns).await?;
        let jobs = api
            .list(&ListParams::default().labels(&format!("{LABEL_APP}={APP_KINETIC}")))
            .await
            .map_err(|e| {
                error::map(
                    e,
                    Context {
                        verb: "list",
                        resource: "jobs",
                        name: None,
                        namespace: ns,
                    },
                )
            })?;
        let mut ids: Vec<JobId> = jobs
            .items
            .iter()
            .filter(|j| j.metadata.deletion_timestamp.is_none())
            .filter_map(|j| j.metadata.labels.as_ref()?.get(LABEL_JOB_ID)?.parse().ok())
            .collect();
        ids.sort();
        Ok(ids)
    }
}

struct FollowCtx {
    jobs: Api<Job>,
    pods: Api<Pod>,
    selector: String,
    job_name: String,
    poll: Duration,
}

/// Follows a job's pods one after the other (a retried pod's log follows
/// the first's), ending once the job ended and every started pod's log was
/// read to its end.
struct Follower {
    backend: FollowCtx,
    seen: BTreeSet<String>,
    current: Option<LineStream>,
    done: bool,
}

impl Follower {
    async fn next_line(&mut self) -> Option<Result<String, BackendError>> {
        loop {
            if self.done {
                return None;
            }
            if let Some(stream) = self.current.as_mut() {
                match stream.next().await {
                    Some(item) => return Some(item),
                    None => self.current = None,
                }
                continue;
            }
            let cx = &self.backend;
            let mut pods = match cx
                .pods
                .list(&ListParams::default().labels(&cx.selector))
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
            pods.sort_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0));
            if let Some(pod) = pods.iter().find(|p| {
                pod_started(p) && !self.seen.contains(p.metadata.name.as_deref().unwrap_or(""))
            }) {
                let name = pod.metadata.name.clone().unwrap_or_default();
                self.seen.insert(name.clone());
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
            let job = match cx.jobs.get(&cx.job_name).await {
                Ok(job) => job,
                Err(_) => {
                    self.done = true;
                    return None;
                }
            };
            let state = status::job_state(&job, &pods, SystemTime::now());
            if state.status.is_terminal() {
                self.done = true;
                return None;
            }
            tokio::time::sleep(cx.poll).await;
        }
    }
}
