//! A fake of the Google Cloud control-plane APIs `kinetic up` drives, on
//! one loopback server: Service Usage (enable APIs), Kubernetes Engine
//! (clusters, node pools, operations), IAM (service accounts and their
//! policies), Cloud Resource Manager (the project and its policy) and
//! Artifact Registry (repositories and their policies). It can also serve
//! the published manifests `up` installs (LeaderWorkerSet, the NVIDIA
//! driver installer), as small stand-ins.
//!
//! It behaves as the real services do where a client can tell:
//!
//! - Requests need the bearer token ([`FakeGoogleApis::require_token`]),
//!   else 401 `UNAUTHENTICATED`.
//! - An API that is not enabled answers 403 `PERMISSION_DENIED` with an
//!   `ErrorInfo` of reason `SERVICE_DISABLED` naming the service; a denied
//!   permission ([`FakeGoogleApis::deny`]) answers 403 with reason
//!   `IAM_PERMISSION_DENIED` naming it.
//! - Creating what exists answers 409 `ALREADY_EXISTS`; missing things 404.
//! - Long-running operations take time ([`FakeGoogleApis::set_operation_time`]):
//!   clusters are `PROVISIONING` then `RUNNING`, node pools likewise, and
//!   GKE refuses a second operation on a cluster while one runs (400
//!   `FAILED_PRECONDITION`, "incompatible operation"). An operation can be
//!   made to fail ([`FakeGoogleApis::fail_next_operation`]); any call can be
//!   made to fail with a chosen status ([`FakeGoogleApis::fail`]).
//! - IAM is eventually consistent: a new service account can be named in
//!   a policy only after a while ([`FakeGoogleApis::set_iam_propagation`]),
//!   before which `setIamPolicy` answers 400 "does not exist"; Workload
//!   Identity members need a cluster with Workload Identity; a policy
//!   written with a stale etag answers 409 `ABORTED`.
//! - With a [`FakeCluster`] attached, a running cluster's API server is
//!   that cluster: node pools become node groups of its autoscaler, their
//!   nodes carrying what GKE gives them (the accelerator and TPU labels,
//!   the GPU/TPU taint, Spot, the pool's own labels and taints, the
//!   GPUs or TPU chips as allocatable resources); deleting a pool removes
//!   them, deleting the cluster empties it.
//!
//! Every successful creation is recorded ([`FakeGoogleApis::creations`]),
//! so a test can tell nothing was made twice.

// Handlers answer early with the error response itself; boxing it would
// only add noise.
#![allow(clippy::result_large_err)]

mod artifactregistry;
mod container;
mod iam;
mod nodes;
mod operations;
mod resourcemanager;
mod serviceusage;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::Value;

use crate::google::{Policy, error_with, google_error};
use crate::k8s::FakeCluster;

pub use nodes::node_template;

/// The title the console gives each service (in `SERVICE_DISABLED` messages).
const TITLES: &[(&str, &str)] = &[
    ("compute.googleapis.com", "Compute Engine API"),
    ("container.googleapis.com", "Kubernetes Engine API"),
    ("storage.googleapis.com", "Cloud Storage API"),
    ("artifactregistry.googleapis.com", "Artifact Registry API"),
    ("cloudbuild.googleapis.com", "Cloud Build API"),
    (
        "iam.googleapis.com",
        "Identity and Access Management (IAM) API",
    ),
    (
        "cloudresourcemanager.googleapis.com",
        "Cloud Resource Manager API",
    ),
    ("serviceusage.googleapis.com", "Service Usage API"),
    ("secretmanager.googleapis.com", "Secret Manager API"),
    ("logging.googleapis.com", "Cloud Logging API"),
    ("monitoring.googleapis.com", "Cloud Monitoring API"),
];

/// Services a new project has enabled.
const ENABLED_AT_START: &[&str] = &[
    "serviceusage.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "storage.googleapis.com",
];

fn title(service: &str) -> &str {
    TITLES
        .iter()
        .find(|(s, _)| *s == service)
        .map_or(service, |(_, t)| t)
}

/// A scripted failure of a call.
#[derive(Debug, Clone)]
struct Fault {
    call: String,
    status: u16,
    message: String,
    skip: usize,
    times: usize,
}

/// Everything the fake holds.
#[derive(Debug)]
pub(crate) struct ApisState {
    pub(crate) project: String,
    pub(crate) project_number: u64,
    token: Option<String>,
    pub(crate) enabled: BTreeSet<String>,
    denied: BTreeSet<String>,
    faults: Vec<Fault>,
    pub(crate) ops: operations::Operations,
    pub(crate) service_accounts: BTreeMap<String, iam::Account>,
    pub(crate) iam_propagation: Duration,
    pub(crate) project_policy: Policy,
    pub(crate) clusters: BTreeMap<String, container::Cluster>,
    pub(crate) repositories: BTreeMap<String, artifactregistry::Repository>,
    calls: BTreeMap<String, u64>,
    /// `User-Agent` of every call, `""` for none.
    pub(crate) agents: std::collections::BTreeSet<String>,
    creations: Vec<String>,
    pub(crate) manifests: BTreeMap<String, String>,
    /// The API server URL running clusters report.
    pub(crate) cluster_url: Option<String>,
}

impl ApisState {
    /// Whether the caller lacks `permission`.
    pub(crate) fn is_denied(&self, permission: &str) -> bool {
        self.denied.contains(permission)
    }

    /// Start an operation (see [`operations::Operations::start`]) and
    /// return it as its API renders it.
    pub(crate) fn start_op(
        &mut self,
        api: operations::Api,
        kind: &str,
        location: &str,
        target: &str,
        effect: operations::Effect,
        scale: f64,
    ) -> Value {
        let id = self.ops.start(api, kind, location, target, effect, scale);
        self.ops
            .get(&id)
            .map(|o| o.to_json(&self.project, self.project_number))
            .unwrap_or_default()
    }

    /// Record a successful creation (`"cluster c"`, `"nodePool p"`).
    pub(crate) fn created(&mut self, what: String) {
        self.creations.push(what);
    }
}

pub(crate) struct Shared {
    state: Mutex<ApisState>,
    pub(crate) cluster: Option<Arc<FakeCluster>>,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, ApisState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

pub(crate) type App = Arc<Shared>;

pub(crate) fn respond(status: u16, body: &Value) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, axum::Json(body.clone())).into_response()
}

pub(crate) fn error(status: u16, message: &str) -> Response {
    respond(status, &google_error(status, message, None))
}

/// 400 `FAILED_PRECONDITION` (the resource is not in a state for this).
pub(crate) fn failed_precondition(message: &str) -> Response {
    respond(
        400,
        &error_with(400, "FAILED_PRECONDITION", message, None, &[]),
    )
}

/// The checks every call passes first: counted, scripted faults, the
/// token, the service enabled, the permission held. Also advances the
/// operations due.
pub(crate) fn admit(
    app: &App,
    headers: &HeaderMap,
    call: &str,
    service: &str,
    permission: &str,
    resource: &str,
) -> Result<(), Response> {
    operations::advance(app);
    let mut st = app.lock();
    *st.calls.entry(call.to_owned()).or_default() += 1;
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    st.agents.insert(agent.to_owned());
    if let Some(f) = st.faults.iter_mut().find(|f| f.call == call && f.times > 0) {
        if f.skip > 0 {
            f.skip -= 1;
        } else {
            f.times -= 1;
            let (status, message) = (f.status, f.message.clone());
            st.faults.retain(|f| f.times > 0);
            return Err(error(status, &message));
        }
    }
    if let Some(token) = &st.token {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if given != Some(&format!("Bearer {token}")) {
            return Err(respond(
                401,
                &error_with(
                    401,
                    "UNAUTHENTICATED",
                    "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
                    Some("ACCESS_TOKEN_TYPE_UNSUPPORTED"),
                    &[],
                ),
            ));
        }
    }
    if !service.is_empty() && !st.enabled.contains(service) {
        let number = st.project_number.to_string();
        let message = format!(
            "{} has not been used in project {number} before or it is disabled. Enable it by visiting https://console.developers.google.com/apis/api/{service}/overview?project={number} then retry. If you enabled this API recently, wait a few minutes for the action to propagate to our systems and retry.",
            title(service)
        );
        return Err(respond(
            403,
            &error_with(
                403,
                "PERMISSION_DENIED",
                &message,
                Some("SERVICE_DISABLED"),
                &[
                    ("service", service),
                    ("consumer", &format!("projects/{number}")),
                ],
            ),
        ));
    }
    if st.denied.contains(permission) {
        let message = format!(
            "Permission '{permission}' denied on resource '{resource}' (or it may not exist)."
        );
        return Err(respond(
            403,
            &error_with(
                403,
                "PERMISSION_DENIED",
                &message,
                Some("IAM_PERMISSION_DENIED"),
                &[("permission", permission)],
            ),
        ));
    }
    Ok(())
}

/// The fake APIs' server. Dropping it stops the server.
#[derive(Debug)]
pub struct FakeGoogleApis {
    app: App,
    endpoint: String,
    task: tokio::task::JoinHandle<()>,
    ticker: tokio::task::JoinHandle<()>,
}

impl FakeGoogleApis {
    /// Start the fake for `project` on 127.0.0.1, with `cluster` as the
    /// API server of the GKE cluster it creates (none: clusters have no
    /// nodes). The project starts new: only Service Usage, Resource
    /// Manager and Cloud Storage enabled, nothing created. Needs a tokio
    /// runtime.
    pub async fn start(project: &str, cluster: Option<Arc<FakeCluster>>) -> std::io::Result<Self> {
        Self::start_with(project, cluster, None).await
    }

    /// [`FakeGoogleApis::start`], also serving `extra` routes (another
    /// fake's, so one endpoint serves a whole project).
    pub(crate) async fn start_with(
        project: &str,
        cluster: Option<Arc<FakeCluster>>,
        extra: Option<Router>,
    ) -> std::io::Result<Self> {
        let state = ApisState {
            project: project.to_owned(),
            project_number: 123_456_789_012,
            token: None,
            enabled: ENABLED_AT_START.iter().map(|s| (*s).to_owned()).collect(),
            denied: BTreeSet::new(),
            faults: Vec::new(),
            ops: operations::Operations::new(Duration::from_millis(200)),
            service_accounts: BTreeMap::new(),
            iam_propagation: Duration::ZERO,
            project_policy: Policy::default(),
            clusters: BTreeMap::new(),
            repositories: BTreeMap::new(),
            calls: BTreeMap::new(),
            agents: std::collections::BTreeSet::new(),
            creations: Vec::new(),
            manifests: BTreeMap::new(),
            cluster_url: cluster.as_ref().map(|c| c.url().to_owned()),
        };
        let app = Arc::new(Shared {
            state: Mutex::new(state),
            cluster,
        });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let router: Router = Router::new()
            .merge(serviceusage::routes())
            .merge(container::routes())
            .merge(iam::routes())
            .merge(resourcemanager::routes())
            .merge(artifactregistry::routes())
            .route("/manifests/{*path}", get(manifest))
            .fallback(|| async { error(404, "The requested URL was not found on this server.") })
            .with_state(app.clone());
        let router = match extra {
            Some(extra) => router.merge(extra),
            None => router,
        };
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                tracing::warn!("fake Google APIs stopped: {e}");
            }
        });
        // Operations finish on time even when nobody asks.
        let ticking = app.clone();
        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(25)).await;
                operations::advance(&ticking);
            }
        });
        Ok(Self {
            app,
            endpoint,
            task,
            ticker,
        })
    }

    /// The base URL of every API (`http://127.0.0.1:PORT`).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Require `Authorization: Bearer {token}` on every call.
    pub fn require_token(&self, token: &str) {
        self.app.lock().token = Some(token.to_owned());
    }

    /// Enable services directly (a project set up before).
    pub fn enable(&self, services: &[&str]) {
        let mut st = self.app.lock();
        st.enabled.extend(services.iter().map(|s| (*s).to_owned()));
    }

    /// Disable a service (a test taking it away).
    pub fn disable(&self, service: &str) {
        self.app.lock().enabled.remove(service);
    }

    /// The enabled services.
    pub fn enabled(&self) -> BTreeSet<String> {
        self.app.lock().enabled.clone()
    }

    /// Calls needing `permission` (`container.clusters.create`,
    /// `iam.serviceAccounts.create`, `resourcemanager.projects.setIamPolicy`, …)
    /// answer 403 from now on.
    pub fn deny(&self, permission: &str) {
        self.app.lock().denied.insert(permission.to_owned());
    }

    /// Grant `permission` again.
    pub fn allow(&self, permission: &str) {
        self.app.lock().denied.remove(permission);
    }

    /// The next `times` calls of `call` (after `skip` that succeed) answer
    /// `status` with Google's error body. Call names are the REST methods:
    /// `container.projects.locations.clusters.create`,
    /// `container.projects.locations.clusters.nodePools.create`,
    /// `iam.projects.serviceAccounts.create`,
    /// `cloudresourcemanager.projects.setIamPolicy`,
    /// `serviceusage.services.batchEnable`, … ([`FakeGoogleApis::calls`] lists them).
    pub fn fail(&self, call: &str, status: u16, skip: usize, times: usize) {
        self.app.lock().faults.push(Fault {
            call: call.to_owned(),
            status,
            message: format!("injected failure of {call} (HTTP {status})"),
            skip,
            times,
        });
    }

    /// The next operation of this type (`CREATE_CLUSTER`,
    /// `CREATE_NODE_POOL`, `DELETE_CLUSTER`, `enableServices`, …) ends in
    /// error with `message`; what it was creating is left in `ERROR`.
    pub fn fail_next_operation(&self, kind: &str, message: &str) {
        self.app.lock().ops.fail_next(kind, message);
    }

    /// How long long-running operations take (default 200 ms).
    pub fn set_operation_time(&self, time: Duration) {
        self.app.lock().ops.duration = time;
    }

    /// How long a new service account takes to be usable in policies
    /// (default 0).
    pub fn set_iam_propagation(&self, time: Duration) {
        self.app.lock().iam_propagation = time;
    }

    /// Serve `text` at `{endpoint}/manifests/{path}`.
    pub fn serve_manifest(&self, path: &str, text: &str) {
        self.app
            .lock()
            .manifests
            .insert(path.trim_start_matches('/').to_owned(), text.to_owned());
    }

    /// Calls answered so far, by REST method name.
    pub fn calls(&self) -> BTreeMap<String, u64> {
        self.app.lock().calls.clone()
    }

    /// The `User-Agent` of every call so far, `""` standing for calls
    /// without one.
    pub fn user_agents(&self) -> Vec<String> {
        self.app.lock().agents.iter().cloned().collect()
    }

    /// Everything created so far, in order (`"cluster c"`,
    /// `"nodePool c/gpu-l4-1a2b"`, `"serviceAccount e"`, `"repository r"`,
    /// `"manifest lws/…"` fetches are not creations).
    pub fn creations(&self) -> Vec<String> {
        self.app.lock().creations.clone()
    }

    /// The service accounts' e-mails.
    pub fn service_accounts(&self) -> Vec<String> {
        self.app.lock().service_accounts.keys().cloned().collect()
    }

    /// Remove a service account (a test taking it away).
    pub fn remove_service_account(&self, email: &str) {
        self.app.lock().service_accounts.remove(email);
    }

    /// Whether `member` holds `role` on the project.
    pub fn project_binding(&self, role: &str, member: &str) -> bool {
        self.app.lock().project_policy.has(role, member)
    }

    /// Whether `member` holds `role` on the service account `email`.
    pub fn service_account_binding(&self, email: &str, role: &str, member: &str) -> bool {
        self.app
            .lock()
            .service_accounts
            .get(email)
            .is_some_and(|a| a.policy.has(role, member))
    }

    /// Remove a binding from a service account's policy.
    pub fn remove_service_account_binding(&self, email: &str, role: &str, member: &str) {
        if let Some(a) = self.app.lock().service_accounts.get_mut(email) {
            a.policy.remove(role, member);
        }
    }

    /// The clusters' names and statuses.
    pub fn clusters(&self) -> Vec<(String, String)> {
        self.app
            .lock()
            .clusters
            .iter()
            .map(|(n, c)| (n.clone(), c.status.clone()))
            .collect()
    }

    /// A cluster's resource as `clusters.get` returns it.
    pub fn cluster_json(&self, name: &str) -> Option<Value> {
        let st = self.app.lock();
        st.clusters.get(name).map(|c| c.to_json(&st))
    }

    /// The node pools of a cluster, with their statuses.
    pub fn node_pools(&self, cluster: &str) -> Vec<(String, String)> {
        self.app
            .lock()
            .clusters
            .get(cluster)
            .map(|c| {
                c.pools
                    .iter()
                    .map(|(n, p)| (n.clone(), p.status.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Remove a node pool and its nodes at once (a test taking it away).
    pub fn remove_node_pool(&self, cluster: &str, pool: &str) {
        if let Some(c) = self.app.lock().clusters.get_mut(cluster) {
            c.pools.remove(pool);
        }
        if let Some(k8s) = &self.app.cluster {
            k8s.remove_node_group(pool);
        }
    }

    /// The repositories' resource names.
    pub fn repositories(&self) -> Vec<String> {
        self.app.lock().repositories.keys().cloned().collect()
    }

    /// Remove a repository (a test taking it away).
    pub fn remove_repository(&self, name: &str) {
        self.app.lock().repositories.remove(name);
    }

    /// Create, at once, a running cluster made without `kinetic up` (in
    /// the console, or by `gcloud container clusters create`), in `zone`,
    /// with Workload Identity and the GCS FUSE driver on and its default
    /// pool (one node) running as the project's Compute Engine default
    /// service account, which GKE gives as `serviceAccount: default`.
    pub fn add_cluster(&self, zone: &str, cluster: &str) {
        container::provision(&self.app, zone, cluster, "default");
    }

    /// Create, at once, what `kinetic up` would: a running cluster with
    /// Workload Identity and the GCS FUSE driver and its default pool (one
    /// node), in `zone`, with `node_service_account`; the repository
    /// `repository` (`projects/p/locations/l/repositories/r`). For a fake
    /// project that starts provisioned.
    pub fn provision(
        &self,
        zone: &str,
        cluster: &str,
        repository: &str,
        node_service_account: &str,
    ) {
        {
            let mut st = self.app.lock();
            let services: Vec<String> = TITLES.iter().map(|(s, _)| (*s).to_owned()).collect();
            st.enabled.extend(services);
            st.repositories.insert(
                repository.to_owned(),
                artifactregistry::Repository::new(repository, "DOCKER"),
            );
        }
        container::provision(&self.app, zone, cluster, node_service_account);
    }
}

async fn manifest(
    axum::extract::State(app): axum::extract::State<App>,
    axum::extract::Path(path): axum::extract::Path<String>,
) -> Response {
    match app.lock().manifests.get(&path) {
        Some(text) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/x-yaml")],
            text.clone(),
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "Not Found").into_response(),
    }
}

impl Drop for FakeGoogleApis {
    fn drop(&mut self) {
        self.task.abort();
        self.ticker.abort();
    }
}
