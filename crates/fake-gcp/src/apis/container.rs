//! Kubernetes Engine: clusters and node pools, with their long-running
//! operations, over `/v1/projects/{p}/locations/{zone}/…`.

use std::collections::BTreeMap;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;
use serde_json::{Value, json};

use super::operations::{Api, Effect};
use super::{ApisState, App, admit, error, node_template, respond};
use crate::k8s::NodeGroup;

const SERVICE: &str = "container.googleapis.com";

/// A node pool, as its create request gave it, and its status.
#[derive(Debug, Clone)]
pub(crate) struct Pool {
    pub(crate) status: String,
    status_message: String,
    spec: Value,
}

/// A cluster, as its create request gave it, its status and its pools.
#[derive(Debug, Clone)]
pub(crate) struct Cluster {
    name: String,
    zone: String,
    pub(crate) status: String,
    status_message: String,
    spec: Value,
    created: String,
    pub(crate) pools: BTreeMap<String, Pool>,
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl Pool {
    fn to_json(&self, project: &str, zone: &str, cluster: &str) -> Value {
        let mut v = self.spec.clone();
        let name = v["name"].as_str().unwrap_or_default().to_owned();
        v["status"] = json!(self.status);
        if !self.status_message.is_empty() {
            v["statusMessage"] = json!(self.status_message);
        }
        v["version"] = json!("1.33.1-gke.1107000");
        v["selfLink"] = json!(format!(
            "https://container.googleapis.com/v1/projects/{project}/zones/{zone}/clusters/{cluster}/nodePools/{name}"
        ));
        v["locations"] = json!([zone]);
        v["instanceGroupUrls"] = json!([format!(
            "https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}/instanceGroupManagers/{}",
            instance_group(cluster, &name)
        )]);
        v
    }
}

impl Cluster {
    fn path(&self, project: &str) -> String {
        format!(
            "projects/{project}/locations/{}/clusters/{}",
            self.zone, self.name
        )
    }

    pub(crate) fn to_json(&self, st: &ApisState) -> Value {
        let mut v = self.spec.clone();
        let project = &st.project;
        v["name"] = json!(self.name);
        v["location"] = json!(self.zone);
        v["zone"] = json!(self.zone);
        v["status"] = json!(self.status);
        if !self.status_message.is_empty() {
            v["statusMessage"] = json!(self.status_message);
        }
        v["createTime"] = json!(self.created);
        v["currentMasterVersion"] = json!("1.33.1-gke.1107000");
        v["selfLink"] = json!(format!(
            "https://container.googleapis.com/v1/{}",
            self.path(project)
        ));
        if self.status != "PROVISIONING" {
            v["endpoint"] = json!(st_endpoint(st));
            v["masterAuth"] = json!({"clusterCaCertificate": ""});
        }
        v["nodePools"] = json!(
            self.pools
                .values()
                .map(|p| p.to_json(project, &self.zone, &self.name))
                .collect::<Vec<_>>()
        );
        v
    }
}

/// The API server address a cluster reports: the attached fake cluster's URL.
fn st_endpoint(st: &ApisState) -> String {
    st.cluster_url
        .clone()
        .unwrap_or_else(|| "34.118.0.1".to_owned())
}

pub(crate) fn routes() -> Router<App> {
    let base = "/v1/projects/{project}/locations/{location}";
    Router::new()
        .route(
            &format!("{base}/clusters"),
            get(list_clusters).post(create_cluster),
        )
        .route(
            &format!("{base}/clusters/{{cluster}}"),
            get(get_cluster).put(update_cluster).delete(delete_cluster),
        )
        .route(
            &format!("{base}/clusters/{{cluster}}/nodePools"),
            get(list_pools).post(create_pool),
        )
        .route(
            &format!("{base}/clusters/{{cluster}}/nodePools/{{pool}}"),
            get(get_pool).delete(delete_pool),
        )
        .route(&format!("{base}/operations/{{op}}"), get(get_operation))
}

fn wrong_project(st: &ApisState, project: &str) -> Option<Response> {
    (project != st.project && project != st.project_number.to_string()).then(|| {
        error(
            403,
            &format!("Permission denied on resource project {project}."),
        )
    })
}

fn not_found(path: &str) -> Response {
    error(404, &format!("Not found: {path}."))
}

fn parse(body: &Bytes) -> Result<Value, Response> {
    serde_json::from_slice(body)
        .map_err(|e| error(400, &format!("Invalid JSON payload received. {e}")))
}

fn check_name(name: &str, what: &str) -> Result<(), Response> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(error(
            400,
            &format!(
                "Invalid value for field '{what}': \"{name}\". Must be a match of regex '(?:[a-z](?:[-a-z0-9]{{0,38}}[a-z0-9])?)' (only alphanumerics and '-' allowed, must start with a letter and end with an alphanumeric, and must be no longer than 40 characters)."
            ),
        ))
    }
}

/// A pool's config as GKE keeps it: nodes given no service account run
/// as the Compute Engine default one, which GKE gives as `default`.
fn with_default_service_account(mut pool: Value) -> Value {
    if pool.pointer("/config/serviceAccount").is_none() {
        if !pool["config"].is_object() {
            pool["config"] = json!({});
        }
        pool["config"]["serviceAccount"] = json!("default");
    }
    pool
}

fn check_service_account(st: &ApisState, config: &Value) -> Result<(), Response> {
    match config["serviceAccount"].as_str() {
        Some(sa) if sa != "default" && !st.service_accounts.contains_key(sa) => Err(error(
            400,
            &format!("Service account \"{sa}\" does not exist."),
        )),
        _ => Ok(()),
    }
}

/// The name GKE gives a pool's managed instance group (and, with a
/// suffix, its nodes): `gke-{cluster}-{pool}-{hash}-grp`.
fn instance_group(cluster: &str, pool: &str) -> String {
    let hash = format!(
        "{:08x}",
        pool.bytes()
            .fold(2_166_136_261u32, |h, b| (h ^ u32::from(b))
                .wrapping_mul(16_777_619))
    );
    format!("gke-{cluster}-{pool}-{hash}-grp")
}

/// The pool's node group for the autoscaler.
fn node_group(
    project: &str,
    cluster: &str,
    zone: &str,
    pool: &Value,
) -> Result<(NodeGroup, u32), String> {
    let name = pool["name"].as_str().unwrap_or_default().to_owned();
    let (template, step) = node_template(pool, zone)?;
    let initial = pool["initialNodeCount"].as_u64().unwrap_or(0) as u32;
    let autoscaled = pool.pointer("/autoscaling/enabled") == Some(&json!(true));
    let (min, max) = if autoscaled {
        (
            pool.pointer("/autoscaling/minNodeCount")
                .and_then(Value::as_u64)
                .unwrap_or(0) as u32,
            pool.pointer("/autoscaling/maxNodeCount")
                .and_then(Value::as_u64)
                .unwrap_or(0) as u32,
        )
    } else {
        (initial, initial)
    };
    let group = instance_group(cluster, &name);
    Ok((
        NodeGroup {
            node_prefix: format!("{}-", group.trim_end_matches("-grp")),
            id: format!(
                "https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}/instanceGroups/{group}"
            ),
            autoscaled,
            name,
            template,
            min,
            max,
            step,
        },
        initial,
    ))
}

fn start_nodes(app: &App, cluster: &str, zone: &str, pool: &Value) {
    let project = app.lock().project.clone();
    if let (Some(k8s), Ok((group, initial))) =
        (&app.cluster, node_group(&project, cluster, zone, pool))
    {
        k8s.set_node_group(group, initial);
    }
}

async fn list_clusters(
    State(app): State<App>,
    Path((project, location)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let resource = format!("projects/{project}/locations/{location}");
    if let Err(r) = admit(
        &app,
        &headers,
        "container.projects.locations.clusters.list",
        SERVICE,
        "container.clusters.list",
        &resource,
    ) {
        return r;
    }
    let st = app.lock();
    if let Some(r) = wrong_project(&st, &project) {
        return r;
    }
    let clusters: Vec<Value> = st
        .clusters
        .values()
        .filter(|c| location == "-" || c.zone == location)
        .map(|c| c.to_json(&st))
        .collect();
    respond(200, &json!({"clusters": clusters}))
}

async fn create_cluster(
    State(app): State<App>,
    Path((project, location)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let resource = format!("projects/{project}/locations/{location}");
    if let Err(r) = admit(
        &app,
        &headers,
        "container.projects.locations.clusters.create",
        SERVICE,
        "container.clusters.create",
        &resource,
    ) {
        return r;
    }
    let body = match parse(&body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let mut spec = body["cluster"].clone();
    let name = spec["name"].as_str().unwrap_or_default().to_owned();
    if let Err(r) = check_name(&name, "cluster.name") {
        return r;
    }
    let mut st = app.lock();
    if let Some(r) = wrong_project(&st, &project) {
        return r;
    }
    if st.clusters.contains_key(&name) {
        return error(
            409,
            &format!("Already exists: projects/{project}/locations/{location}/clusters/{name}."),
        );
    }
    if let Some(pool) = spec
        .pointer("/workloadIdentityConfig/workloadPool")
        .and_then(Value::as_str)
        && pool != format!("{project}.svc.id.goog")
    {
        return error(
            400,
            &format!(
                "Workload Identity pool \"{pool}\" is invalid: it must be {project}.svc.id.goog."
            ),
        );
    }
    let pools_in = spec["nodePools"].as_array().cloned().unwrap_or_default();
    if pools_in.is_empty() {
        return error(
            400,
            "Cluster.initial_node_count must be greater than zero, or node pools given.",
        );
    }
    let mut pools = BTreeMap::new();
    for p in pools_in {
        let p = with_default_service_account(p);
        let pname = p["name"].as_str().unwrap_or_default().to_owned();
        if let Err(r) = check_name(&pname, "cluster.node_pools.name") {
            return r;
        }
        if let Err(r) = check_service_account(&st, &p["config"]) {
            return r;
        }
        if let Err(e) = node_template(&p, &location) {
            return error(400, &e);
        }
        pools.insert(
            pname,
            Pool {
                status: "PROVISIONING".into(),
                status_message: String::new(),
                spec: p,
            },
        );
    }
    if let Some(o) = spec.as_object_mut() {
        o.remove("nodePools");
    }
    let cluster = Cluster {
        name: name.clone(),
        zone: location.clone(),
        status: "PROVISIONING".into(),
        status_message: String::new(),
        spec,
        created: now(),
        pools,
    };
    let target = cluster.path(&project);
    st.clusters.insert(name.clone(), cluster);
    st.created(format!("cluster {name}"));
    let op = st.start_op(
        Api::Container,
        "CREATE_CLUSTER",
        &location,
        &target,
        Effect::ClusterCreated { name },
        1.0,
    );
    respond(200, &op)
}

/// The cluster `name`, or the 404 naming it.
fn cluster_or_404<'a>(
    st: &'a ApisState,
    project: &str,
    location: &str,
    name: &str,
) -> Result<&'a Cluster, Response> {
    st.clusters
        .get(name)
        .filter(|c| c.zone == location)
        .ok_or_else(|| {
            not_found(&format!(
                "projects/{project}/locations/{location}/clusters/{name}"
            ))
        })
}

async fn get_cluster(
    State(app): State<App>,
    Path((project, location, name)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let resource = format!("projects/{project}/locations/{location}/clusters/{name}");
    if let Err(r) = admit(
        &app,
        &headers,
        "container.projects.locations.clusters.get",
        SERVICE,
        "container.clusters.get",
        &resource,
    ) {
        return r;
    }
    let st = app.lock();
    if let Some(r) = wrong_project(&st, &project) {
        return r;
    }
    match cluster_or_404(&st, &project, &location, &name) {
        Ok(c) => respond(200, &c.to_json(&st)),
        Err(r) => r,
    }
}

/// The 400 GKE gives while another operation changes the cluster.
fn busy(st: &ApisState, cluster: &Cluster, project: &str) -> Option<Response> {
    if let Some(op) = st.ops.running_on(&cluster.path(project)) {
        return Some(super::failed_precondition(&format!(
            "Cluster is running incompatible operation {}.",
            op.id
        )));
    }
    (cluster.status != "RUNNING").then(|| {
        super::failed_precondition(&format!(
            "Cluster is not running (status {}).",
            cluster.status
        ))
    })
}

async fn update_cluster(
    State(app): State<App>,
    Path((project, location, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let resource = format!("projects/{project}/locations/{location}/clusters/{name}");
    if let Err(r) = admit(
        &app,
        &headers,
        "container.projects.locations.clusters.update",
        SERVICE,
        "container.clusters.update",
        &resource,
    ) {
        return r;
    }
    let body = match parse(&body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let mut st = app.lock();
    let cluster = match cluster_or_404(&st, &project, &location, &name) {
        Ok(c) => c.clone(),
        Err(r) => return r,
    };
    if let Some(r) = busy(&st, &cluster, &project) {
        return r;
    }
    let update = body["update"].clone();
    let fields = update.as_object().map_or(0, |o| o.len());
    if fields != 1 {
        return error(
            400,
            "Exactly one update can be applied to a cluster in each request.",
        );
    }
    if let Some(c) = st.clusters.get_mut(&name) {
        c.status = "RECONCILING".into();
    }
    let target = cluster.path(&project);
    let op = st.start_op(
        Api::Container,
        "UPDATE_CLUSTER",
        &location,
        &target,
        Effect::ClusterUpdated { name, update },
        0.5,
    );
    respond(200, &op)
}

async fn delete_cluster(
    State(app): State<App>,
    Path((project, location, name)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let resource = format!("projects/{project}/locations/{location}/clusters/{name}");
    if let Err(r) = admit(
        &app,
        &headers,
        "container.projects.locations.clusters.delete",
        SERVICE,
        "container.clusters.delete",
        &resource,
    ) {
        return r;
    }
    let mut st = app.lock();
    let target = match cluster_or_404(&st, &project, &location, &name) {
        Ok(c) if c.status == "STOPPING" => {
            return super::failed_precondition("Cluster is already being deleted.");
        }
        Ok(c) => c.path(&project),
        Err(r) => return r,
    };
    if let Some(c) = st.clusters.get_mut(&name) {
        c.status = "STOPPING".into();
    }
    let op = st.start_op(
        Api::Container,
        "DELETE_CLUSTER",
        &location,
        &target,
        Effect::ClusterDeleted { name },
        1.0,
    );
    respond(200, &op)
}

async fn list_pools(
    State(app): State<App>,
    Path((project, location, name)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let resource = format!("projects/{project}/locations/{location}/clusters/{name}");
    if let Err(r) = admit(
        &app,
        &headers,
        "container.projects.locations.clusters.nodePools.list",
        SERVICE,
        "container.clusters.get",
        &resource,
    ) {
        return r;
    }
    let st = app.lock();
    match cluster_or_404(&st, &project, &location, &name) {
        Ok(c) => respond(
            200,
            &json!({"nodePools": c.pools.values().map(|p| p.to_json(&project, &location, &name)).collect::<Vec<_>>()}),
        ),
        Err(r) => r,
    }
}

async fn create_pool(
    State(app): State<App>,
    Path((project, location, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let resource = format!("projects/{project}/locations/{location}/clusters/{name}");
    if let Err(r) = admit(
        &app,
        &headers,
        "container.projects.locations.clusters.nodePools.create",
        SERVICE,
        "container.clusters.update",
        &resource,
    ) {
        return r;
    }
    let body = match parse(&body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let spec = with_default_service_account(body["nodePool"].clone());
    let pool = spec["name"].as_str().unwrap_or_default().to_owned();
    if let Err(r) = check_name(&pool, "node_pool.name") {
        return r;
    }
    let mut st = app.lock();
    let cluster = match cluster_or_404(&st, &project, &location, &name) {
        Ok(c) => c.clone(),
        Err(r) => return r,
    };
    if cluster.pools.contains_key(&pool) {
        return error(
            409,
            &format!(
                "Already exists: {}/nodePools/{pool}.",
                cluster.path(&project)
            ),
        );
    }
    if let Some(r) = busy(&st, &cluster, &project) {
        return r;
    }
    let config = &spec["config"];
    if config["spot"].as_bool().unwrap_or(false)
        && config
            .pointer("/reservationAffinity/consumeReservationType")
            .and_then(Value::as_str)
            == Some("SPECIFIC_RESERVATION")
    {
        return error(400, "Spot VMs cannot consume a specific reservation.");
    }
    if let Some(a) = spec
        .get("autoscaling")
        .filter(|a| a["enabled"] == json!(true))
    {
        let (min, max) = (
            a["minNodeCount"].as_u64().unwrap_or(0),
            a["maxNodeCount"].as_u64().unwrap_or(0),
        );
        if max == 0 || min > max {
            return error(
                400,
                &format!("Invalid autoscaling bounds: minNodeCount {min}, maxNodeCount {max}."),
            );
        }
    }
    if let Err(r) = check_service_account(&st, config) {
        return r;
    }
    if let Err(e) = node_template(&spec, &location) {
        return error(400, &e);
    }
    let target = format!("{}/nodePools/{pool}", cluster.path(&project));
    if let Some(c) = st.clusters.get_mut(&name) {
        c.pools.insert(
            pool.clone(),
            Pool {
                status: "PROVISIONING".into(),
                status_message: String::new(),
                spec,
            },
        );
    }
    st.created(format!("nodePool {name}/{pool}"));
    let op = st.start_op(
        Api::Container,
        "CREATE_NODE_POOL",
        &location,
        &target,
        Effect::PoolCreated {
            cluster: name,
            pool,
        },
        0.5,
    );
    respond(200, &op)
}

async fn get_pool(
    State(app): State<App>,
    Path((project, location, name, pool)): Path<(String, String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let resource =
        format!("projects/{project}/locations/{location}/clusters/{name}/nodePools/{pool}");
    if let Err(r) = admit(
        &app,
        &headers,
        "container.projects.locations.clusters.nodePools.get",
        SERVICE,
        "container.clusters.get",
        &resource,
    ) {
        return r;
    }
    let st = app.lock();
    match cluster_or_404(&st, &project, &location, &name) {
        Ok(c) => match c.pools.get(&pool) {
            Some(p) => respond(200, &p.to_json(&project, &location, &name)),
            None => not_found(&resource),
        },
        Err(r) => r,
    }
}

async fn delete_pool(
    State(app): State<App>,
    Path((project, location, name, pool)): Path<(String, String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let resource =
        format!("projects/{project}/locations/{location}/clusters/{name}/nodePools/{pool}");
    if let Err(r) = admit(
        &app,
        &headers,
        "container.projects.locations.clusters.nodePools.delete",
        SERVICE,
        "container.clusters.update",
        &resource,
    ) {
        return r;
    }
    let mut st = app.lock();
    let cluster = match cluster_or_404(&st, &project, &location, &name) {
        Ok(c) => c.clone(),
        Err(r) => return r,
    };
    if !cluster.pools.contains_key(&pool) {
        return not_found(&resource);
    }
    if let Some(r) = busy(&st, &cluster, &project) {
        return r;
    }
    if let Some(p) = st
        .clusters
        .get_mut(&name)
        .and_then(|c| c.pools.get_mut(&pool))
    {
        p.status = "STOPPING".into();
    }
    let op = st.start_op(
        Api::Container,
        "DELETE_NODE_POOL",
        &location,
        &resource,
        Effect::PoolDeleted {
            cluster: name,
            pool,
        },
        0.5,
    );
    respond(200, &op)
}

/// GKE's and Artifact Registry's operations share this path.
async fn get_operation(
    State(app): State<App>,
    Path((project, location, op)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let resource = format!("projects/{project}/locations/{location}/operations/{op}");
    if let Err(r) = admit(
        &app,
        &headers,
        "projects.locations.operations.get",
        "",
        "container.operations.get",
        &resource,
    ) {
        return r;
    }
    let st = app.lock();
    match st.ops.get(&op) {
        Some(o) => respond(200, &o.to_json(&project, st.project_number)),
        None => not_found(&resource),
    }
}

/// A running cluster with its default pool, made at once (a project that
/// starts provisioned).
pub(crate) fn provision(app: &App, zone: &str, name: &str, node_service_account: &str) {
    let project = app.lock().project.clone();
    let pool = json!({
        "name": "default-pool",
        "initialNodeCount": 1,
        "config": {"machineType": "e2-standard-4", "diskSizeGb": 50,
                   "serviceAccount": node_service_account,
                   "oauthScopes": ["https://www.googleapis.com/auth/cloud-platform"],
                   "workloadMetadataConfig": {"mode": "GKE_METADATA"}},
    });
    let spec = json!({
        "workloadIdentityConfig": {"workloadPool": format!("{project}.svc.id.goog")},
        "addonsConfig": {"gcsFuseCsiDriverConfig": {"enabled": true}},
        "resourceLabels": {"kinetic": "true"},
    });
    {
        let mut st = app.lock();
        let mut pools = BTreeMap::new();
        pools.insert(
            "default-pool".to_owned(),
            Pool {
                status: "RUNNING".into(),
                status_message: String::new(),
                spec: pool.clone(),
            },
        );
        st.clusters.insert(
            name.to_owned(),
            Cluster {
                name: name.to_owned(),
                zone: zone.to_owned(),
                status: "RUNNING".into(),
                status_message: String::new(),
                spec,
                created: now(),
                pools,
            },
        );
    }
    start_nodes(app, name, zone, &pool);
}

/// Apply a finished operation's effect (`error`: it failed).
pub(crate) fn finish(app: &App, effect: Effect, error: Option<String>) {
    let mut st = app.lock();
    match effect {
        Effect::ClusterCreated { name } => {
            let Some(c) = st.clusters.get_mut(&name) else {
                return;
            };
            if let Some(e) = error {
                c.status = "ERROR".into();
                c.status_message = e;
                return;
            }
            c.status = "RUNNING".into();
            let zone = c.zone.clone();
            let pools: Vec<Value> = c
                .pools
                .values_mut()
                .map(|p| {
                    p.status = "RUNNING".into();
                    p.spec.clone()
                })
                .collect();
            drop(st);
            for p in pools {
                start_nodes(app, &name, &zone, &p);
            }
        }
        Effect::ClusterDeleted { name } => {
            if error.is_some() {
                if let Some(c) = st.clusters.get_mut(&name) {
                    c.status = "ERROR".into();
                }
                return;
            }
            st.clusters.remove(&name);
            drop(st);
            if let Some(k8s) = &app.cluster {
                k8s.reset();
            }
        }
        Effect::ClusterUpdated { name, update } => {
            let Some(c) = st.clusters.get_mut(&name) else {
                return;
            };
            c.status = "RUNNING".into();
            if error.is_some() {
                return;
            }
            if let Some(wi) = update.get("desiredWorkloadIdentityConfig") {
                c.spec["workloadIdentityConfig"] = wi.clone();
            }
            if let Some(Value::Object(addons)) = update.get("desiredAddonsConfig") {
                for (k, v) in addons {
                    c.spec["addonsConfig"][k] = v.clone();
                }
            }
        }
        Effect::PoolCreated { cluster, pool } => {
            let Some(c) = st.clusters.get_mut(&cluster) else {
                return;
            };
            let zone = c.zone.clone();
            let Some(p) = c.pools.get_mut(&pool) else {
                return;
            };
            if let Some(e) = error {
                p.status = "ERROR".into();
                p.status_message = e;
                return;
            }
            p.status = "RUNNING".into();
            let spec = p.spec.clone();
            drop(st);
            start_nodes(app, &cluster, &zone, &spec);
        }
        Effect::PoolDeleted { cluster, pool } => {
            if let Some(c) = st.clusters.get_mut(&cluster) {
                c.pools.remove(&pool);
            }
            drop(st);
            if let Some(k8s) = &app.cluster {
                k8s.remove_node_group(&pool);
            }
        }
        Effect::ServicesEnabled { services } => {
            if error.is_none() {
                st.enabled.extend(services);
            }
        }
        Effect::RepositoryCreated { name } => {
            if error.is_some() {
                st.repositories.remove(&name);
            } else if let Some(r) = st.repositories.get_mut(&name) {
                r.ready = true;
            }
        }
        Effect::RepositoryDeleted { name } => {
            if error.is_none() {
                st.repositories.remove(&name);
            }
        }
    }
}
