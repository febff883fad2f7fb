//! The HTTP face of the fake cluster: the Kubernetes REST routes a
//! `kube::Client` (or `kubectl`) uses, over the [`Store`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::auth::{self, RequestInfo, User, Users};
use super::logs::{LogBook, LogRequest};
use super::meta::str_at;
use super::resources::RESOURCES;
use super::selector::{FieldSelector, LabelSelector};
use super::store::{ApiError, Change, Store, Write};

/// The resource's kind: a built-in one's, or the one its
/// CustomResourceDefinition names.
fn kind_of(store: &Store, resource: &str) -> String {
    RESOURCES
        .iter()
        .find(|(r, _, _, _)| *r == resource)
        .map(|(_, k, _, _)| (*k).to_owned())
        .or_else(|| {
            let crd = store.get(CRDS, "", resource).ok()?;
            str_at(&crd, "/spec/names/kind").map(str::to_owned)
        })
        .unwrap_or_else(|| {
            let plural = resource.split('.').next().unwrap_or(resource);
            let singular = plural.strip_suffix('s').unwrap_or(plural);
            let mut c = singular.chars();
            c.next()
                .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
                .unwrap_or_default()
        })
}

const CRDS: &str = "customresourcedefinitions.apiextensions.k8s.io";

/// Whether `group` is one the API server serves itself (not through a
/// CustomResourceDefinition).
fn built_in_group(group: &str) -> bool {
    RESOURCES
        .iter()
        .any(|(_, _, av, _)| av.split_once('/').is_some_and(|(g, _)| g == group))
}

/// The CustomResourceDefinitions, not being deleted.
fn crds(store: &Store) -> Vec<Value> {
    store
        .all(CRDS)
        .into_iter()
        .filter(|c| c.pointer("/metadata/deletionTimestamp").is_none())
        .collect()
}

/// The served versions of a CRD, the preferred (by Kubernetes' version
/// priority: GA, then beta, then alpha, higher numbers first) first.
fn served_versions(crd: &Value) -> Vec<String> {
    let mut versions: Vec<String> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| v.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect();
    versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    versions
}

/// Kubernetes' ordering of version names: `v2` > `v1` > `v1beta2` >
/// `v1beta1` > `v1alpha1`, anything else last.
fn version_priority(version: &str) -> (u8, u64, u64) {
    let Some(rest) = version.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<u64>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    let minor = |t: &str| t.parse::<u64>().ok();
    if tail.is_empty() {
        (3, major, 0)
    } else if let Some(n) = tail.strip_prefix("beta").and_then(minor) {
        (2, major, n)
    } else if let Some(n) = tail.strip_prefix("alpha").and_then(minor) {
        (1, major, n)
    } else {
        (0, 0, 0)
    }
}

/// The API server's answer to a path nothing serves: the plain text
/// `404 page not found` of its last handler (not a `Status`).
fn page_not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "404 page not found\n",
    )
        .into_response()
}

/// Whether `/apis/{group}[/{version}[/…/{plural}…]]` is served: always
/// for built-in groups; for others only while a CustomResourceDefinition
/// of the group exists and serves the version (and the resource).
fn served(store: &Store, path: &str) -> bool {
    let Some(rest) = path.strip_prefix("/apis/") else {
        return true;
    };
    let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
    let Some(group) = parts.first() else {
        return true;
    };
    if built_in_group(group) {
        return true;
    }
    let plural = match parts.as_slice() {
        [_, _, "namespaces", _, plural, ..] | [_, _, plural, ..] => Some(*plural),
        _ => None,
    };
    crds(store).iter().any(|crd| {
        str_at(crd, "/spec/group") == Some(group)
            && parts
                .get(1)
                .is_none_or(|v| served_versions(crd).iter().any(|s| s == v))
            && plural.is_none_or(|p| str_at(crd, "/spec/names/plural") == Some(p))
    })
}

/// Counted API calls, by `"{verb} {resource}"` (`"list jobs.batch"`),
/// and the `User-Agent`s that made them.
#[derive(Debug, Default)]
pub struct ApiCalls {
    counts: Mutex<BTreeMap<String, u64>>,
    agents: Mutex<std::collections::BTreeSet<String>>,
    without_agent: std::sync::atomic::AtomicU64,
}

impl ApiCalls {
    /// How many requests came without a `User-Agent` header.
    pub fn without_user_agent(&self) -> u64 {
        self.without_agent
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn saw_agent(&self, agent: &str) {
        self.agents
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(agent.to_owned());
    }

    /// Every `User-Agent` header the API server was sent so far
    /// (requests without one are not counted here).
    pub fn user_agents(&self) -> Vec<String> {
        self.agents
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    fn add(&self, verb: &str, resource: &str) {
        *self
            .counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(format!("{verb} {resource}"))
            .or_default() += 1;
    }

    /// The counts so far.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Calls of `verb` on `resource` so far (`count("list", "jobs.batch")`).
    pub fn count(&self, verb: &str, resource: &str) -> u64 {
        self.snapshot()
            .get(&format!("{verb} {resource}"))
            .copied()
            .unwrap_or(0)
    }

    /// Every call so far.
    pub fn total(&self) -> u64 {
        self.snapshot().values().sum()
    }

    /// Start counting from zero.
    pub fn reset(&self) {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

pub(crate) struct ApiState {
    pub(crate) store: Arc<Store>,
    pub(crate) users: Arc<Users>,
    pub(crate) logs: Arc<LogBook>,
    pub(crate) calls: Arc<ApiCalls>,
    pub(crate) faults: Arc<super::faults::ApiFaults>,
}

type Shared = Arc<ApiState>;
type Params = Query<BTreeMap<String, String>>;

fn error_response(e: &ApiError) -> Response {
    let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, axum::Json(e.to_status())).into_response()
}

fn json_response(code: StatusCode, value: &Value) -> Response {
    (code, axum::Json(value.clone())).into_response()
}

fn resource_id(group: Option<&str>, plural: &str) -> String {
    match group {
        Some(g) if !g.is_empty() => format!("{plural}.{g}"),
        _ => plural.to_owned(),
    }
}

pub(crate) fn router(state: Shared) -> Router {
    Router::new()
        .route(
            "/api/v1/namespaces/{ns}/pods/{name}/portforward",
            get(pod_portforward).post(pod_portforward),
        )
        .route("/version", get(version))
        .route("/api", get(api_versions))
        .route("/apis", get(api_groups))
        .route("/api/v1", get(core_resources))
        .route("/apis/{group}", get(api_group))
        .route("/apis/{group}/{version}", get(group_resources))
        .route(
            "/api/v1/{plural}",
            get(core_list_all).post(cluster_core_create),
        )
        .route(
            "/api/v1/{plural}/{name}",
            get(cluster_core_get)
                .put(cluster_core_put)
                .patch(cluster_core_patch)
                .delete(cluster_core_delete),
        )
        .route(
            "/api/v1/{plural}/{name}/{sub}",
            get(cluster_core_get_sub)
                .put(cluster_core_put_sub)
                .patch(cluster_core_patch_sub),
        )
        .route(
            "/api/v1/namespaces/{name}",
            get(namespace_get)
                .put(namespace_put)
                .patch(namespace_patch)
                .delete(namespace_delete),
        )
        .route(
            "/api/v1/namespaces/{ns}/{plural}",
            get(core_list).post(core_create),
        )
        .route(
            "/api/v1/namespaces/{ns}/{plural}/{name}",
            get(core_get)
                .put(core_put)
                .patch(core_patch)
                .delete(core_delete),
        )
        .route(
            "/api/v1/namespaces/{ns}/{plural}/{name}/{sub}",
            get(core_sub_get)
                .put(core_sub_put)
                .patch(core_sub_patch)
                .post(core_sub_post),
        )
        .route(
            "/apis/{group}/{version}/{plural}",
            get(group_list_all).post(cluster_group_create),
        )
        .route(
            "/apis/{group}/{version}/{plural}/{name}",
            get(cluster_group_get)
                .put(cluster_group_put)
                .patch(cluster_group_patch)
                .delete(cluster_group_delete),
        )
        .route(
            "/apis/{group}/{version}/namespaces/{ns}/{plural}",
            get(group_list).post(group_create),
        )
        .route(
            "/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}",
            get(group_get)
                .put(group_put)
                .patch(group_patch)
                .delete(group_delete),
        )
        .route(
            "/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}/{sub}",
            get(group_get_sub).put(group_put_sub).patch(group_patch_sub),
        )
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authorize,
        ))
        .with_state(state)
}

/// The most a request body may hold (the API server's own limit is 3 MiB
/// for most objects).
const BODY_LIMIT: usize = 8 * 1024 * 1024;

/// Authentication, authorisation and the admission the authorizer takes
/// part in, before any route: the caller from its bearer token, RBAC on
/// what the request asks ([`RequestInfo`]), `OwnerReferencesPermissionEnforcement`
/// on what a write would store, and `SelfSubjectAccessReview`s answered
/// for the caller.
async fn authorize(
    State(s): State<Shared>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if let Some(agent) = request
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
    {
        s.calls.saw_agent(agent);
    } else {
        s.calls
            .without_agent
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if s.users.is_revoked(authorization) {
        return error_response(&ApiError::new(
            401,
            "Unauthorized",
            "Unauthorized".to_owned(),
        ));
    }
    let user = s.users.of_header(authorization);
    let Some(info) = RequestInfo::parse(
        request.method().as_str(),
        request.uri().path(),
        request.uri().query(),
    ) else {
        if !served(&s.store, request.uri().path()) {
            return page_not_found();
        }
        return next.run(request).await;
    };
    if !auth::allowed(&s.store, &user, &info) {
        return error_response(&auth::forbidden(&user, &info));
    }
    if !served(&s.store, request.uri().path()) {
        return page_not_found();
    }
    if !matches!(info.verb.as_str(), "create" | "update" | "patch") {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(b) => b,
        Err(e) => {
            return error_response(&ApiError::bad_request(format!(
                "cannot read the request body: {e}"
            )));
        }
    };
    if info.group == "authorization.k8s.io" && info.resource == "selfsubjectaccessreviews" {
        return match parse_body(&bytes) {
            Ok(review) => json_response(
                StatusCode::CREATED,
                &auth::self_subject_access_review(&s.store, &user, &review),
            ),
            Err(e) => error_response(&e),
        };
    }
    if let Err(e) = admit_write(&s.store, &user, &info, &bytes) {
        return error_response(&e);
    }
    next.run(axum::extract::Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// The admission a write meets before it is stored, for plugins that ask
/// who the caller is.
fn admit_write(
    store: &Store,
    user: &User,
    info: &RequestInfo,
    body: &Bytes,
) -> Result<(), ApiError> {
    if info.subresource.is_some() {
        return Ok(());
    }
    let Ok(sent) = serde_json::from_slice::<Value>(body) else {
        // The route answers a body that is not JSON.
        return Ok(());
    };
    let resource = resource_id(Some(&info.group), &info.resource);
    let old = info
        .name
        .as_ref()
        .and_then(|name| store.get(&resource, &info.namespace, name).ok());
    let new = match (info.verb.as_str(), &old) {
        ("patch", Some(old)) => {
            let mut merged = old.clone();
            super::store::merge_patch(&mut merged, &sent);
            merged
        }
        _ => sent,
    };
    auth::check_owner_references(store, user, info, &new, old.as_ref())
}

async fn version() -> Response {
    json_response(
        StatusCode::OK,
        &json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0-kinetic-fake", "platform": "linux/amd64"}),
    )
}

async fn api_versions() -> Response {
    json_response(
        StatusCode::OK,
        &json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
    )
}

async fn api_groups(State(s): State<Shared>) -> Response {
    let group = |name: &str, versions: &[String]| {
        let listed: Vec<Value> = versions
            .iter()
            .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
            .collect();
        json!({"name": name, "versions": listed, "preferredVersion": listed.first().cloned().unwrap_or(json!({}))})
    };
    let mut names: Vec<&str> = RESOURCES
        .iter()
        .filter_map(|(_, _, av, _)| av.split_once('/').map(|(g, _)| g))
        .collect();
    names.dedup();
    let mut groups: Vec<Value> = names
        .into_iter()
        .map(|g| group(g, &["v1".to_owned()]))
        .collect();
    groups.extend(crd_groups(&s.store).iter().map(|(g, v)| group(g, v)));
    json_response(
        StatusCode::OK,
        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
    )
}

/// The groups the CustomResourceDefinitions add, with their served
/// versions (preferred first).
fn crd_groups(store: &Store) -> Vec<(String, Vec<String>)> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for crd in crds(store) {
        let Some(g) = str_at(&crd, "/spec/group") else {
            continue;
        };
        let versions = groups.entry(g.to_owned()).or_default();
        for v in served_versions(&crd) {
            if !versions.contains(&v) {
                versions.push(v);
            }
        }
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    }
    groups.into_iter().collect()
}

/// `/apis/{group}`: the group's versions (404 if nothing serves it).
async fn api_group(State(s): State<Shared>, Path(group): Path<String>) -> Response {
    let versions = if built_in_group(&group) {
        vec!["v1".to_owned()]
    } else {
        match crd_groups(&s.store).into_iter().find(|(g, _)| *g == group) {
            Some((_, v)) => v,
            None => return page_not_found(),
        }
    };
    let listed: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json_response(
        StatusCode::OK,
        &json!({"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": listed,
                "preferredVersion": listed.first().cloned().unwrap_or(json!({}))}),
    )
}

fn resource_list(store: &Store, group_version: &str) -> Value {
    let verbs = json!([
        "create", "delete", "get", "list", "patch", "update", "watch"
    ]);
    let mut resources: Vec<Value> = RESOURCES
        .iter()
        .filter(|(_, _, av, _)| *av == group_version)
        .flat_map(|(r, k, _, namespaced)| {
            let plural = r.split('.').next().unwrap_or(r);
            let mut v = vec![json!({"name": plural, "singularName": "", "namespaced": namespaced, "kind": k, "verbs": verbs})];
            if plural == "pods" {
                v.push(json!({"name": "pods/log", "singularName": "", "namespaced": true, "kind": "Pod", "verbs": ["get"]}));
                v.push(json!({"name": "pods/portforward", "singularName": "", "namespaced": true, "kind": "PodPortForwardOptions", "verbs": ["create", "get"]}));
            }
            v
        })
        .collect();
    let (group, version) = group_version.split_once('/').unwrap_or(("", group_version));
    for crd in crds(store) {
        if str_at(&crd, "/spec/group") != Some(group)
            || !served_versions(&crd).iter().any(|v| v == version)
        {
            continue;
        }
        let names = |k: &str| {
            str_at(&crd, &format!("/spec/names/{k}"))
                .unwrap_or_default()
                .to_owned()
        };
        let plural = names("plural");
        let namespaced = str_at(&crd, "/spec/scope") == Some("Namespaced");
        resources.push(
            json!({"name": plural, "singularName": names("singular"), "namespaced": namespaced,
            "kind": names("kind"), "verbs": verbs,
            "shortNames": crd.pointer("/spec/names/shortNames").cloned().unwrap_or(json!([]))}),
        );
        let status = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|v| v.get("name").and_then(Value::as_str) == Some(version))
            .and_then(|v| v.pointer("/subresources/status"))
            .is_some();
        if status {
            resources.push(json!({"name": format!("{plural}/status"), "singularName": "",
                "namespaced": namespaced, "kind": names("kind"), "verbs": ["get", "patch", "update"]}));
        }
    }
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources})
}

async fn core_resources(State(s): State<Shared>) -> Response {
    json_response(StatusCode::OK, &resource_list(&s.store, "v1"))
}

async fn group_resources(
    State(s): State<Shared>,
    Path((group, version)): Path<(String, String)>,
) -> Response {
    json_response(
        StatusCode::OK,
        &resource_list(&s.store, &format!("{group}/{version}")),
    )
}

async fn core_list_all(
    State(s): State<Shared>,
    Path(plural): Path<String>,
    Query(q): Params,
) -> Response {
    list(s, plural, None, q).await
}
async fn core_list(
    State(s): State<Shared>,
    Path((ns, plural)): Path<(String, String)>,
    Query(q): Params,
) -> Response {
    list(s, plural, Some(ns), q).await
}
async fn group_list_all(
    State(s): State<Shared>,
    Path((group, _v, plural)): Path<(String, String, String)>,
    Query(q): Params,
) -> Response {
    list(s, resource_id(Some(&group), &plural), None, q).await
}
async fn group_list(
    State(s): State<Shared>,
    Path((group, _v, ns, plural)): Path<(String, String, String, String)>,
    Query(q): Params,
) -> Response {
    list(s, resource_id(Some(&group), &plural), Some(ns), q).await
}
async fn core_create(
    State(s): State<Shared>,
    Path((ns, plural)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    create(s, plural, ns, body).await
}
async fn group_create(
    State(s): State<Shared>,
    Path((group, _v, ns, plural)): Path<(String, String, String, String)>,
    body: Bytes,
) -> Response {
    create(s, resource_id(Some(&group), &plural), ns, body).await
}
async fn core_get(
    State(s): State<Shared>,
    Path((ns, plural, name)): Path<(String, String, String)>,
) -> Response {
    get_one(s, plural, ns, name).await
}
async fn group_get(
    State(s): State<Shared>,
    Path((group, _v, ns, plural, name)): Path<(String, String, String, String, String)>,
) -> Response {
    get_one(s, resource_id(Some(&group), &plural), ns, name).await
}
async fn core_put(
    State(s): State<Shared>,
    Path((ns, plural, name)): Path<(String, String, String)>,
    body: Bytes,
) -> Response {
    put(s, plural, ns, name, body).await
}
async fn group_put(
    State(s): State<Shared>,
    Path((group, _v, ns, plural, name)): Path<(String, String, String, String, String)>,
    body: Bytes,
) -> Response {
    put(s, resource_id(Some(&group), &plural), ns, name, body).await
}
async fn core_patch(
    State(s): State<Shared>,
    Path((ns, plural, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    patch(s, plural, ns, name, headers, body).await
}
async fn group_patch(
    State(s): State<Shared>,
    Path((group, _v, ns, plural, name)): Path<(String, String, String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    patch(
        s,
        resource_id(Some(&group), &plural),
        ns,
        name,
        headers,
        body,
    )
    .await
}
async fn core_delete(
    State(s): State<Shared>,
    Path((ns, plural, name)): Path<(String, String, String)>,
    Query(q): Params,
    body: Bytes,
) -> Response {
    delete(s, plural, ns, name, q, body).await
}
async fn group_delete(
    State(s): State<Shared>,
    Path((group, _v, ns, plural, name)): Path<(String, String, String, String, String)>,
    Query(q): Params,
    body: Bytes,
) -> Response {
    delete(s, resource_id(Some(&group), &plural), ns, name, q, body).await
}
async fn core_sub_get(
    State(s): State<Shared>,
    Path((ns, plural, name, sub)): Path<(String, String, String, String)>,
    Query(q): Params,
) -> Response {
    match (plural.as_str(), sub.as_str()) {
        ("pods", "log") => logs(s, ns, name, q).await,
        (_, "status") => get_one(s, plural, ns, name).await,
        _ => error_response(&ApiError::not_found(&format!("{plural}/{sub}"), &name)),
    }
}
async fn core_sub_post(
    State(s): State<Shared>,
    Path((ns, plural, name, sub)): Path<(String, String, String, String)>,
) -> Response {
    if (plural.as_str(), sub.as_str()) != ("pods", "eviction") {
        return error_response(&ApiError::not_found(&format!("{plural}/{sub}"), &name));
    }
    if let Err(e) = guard(&s, "create", "pods/eviction").await {
        return error_response(&e);
    }
    match super::deletion::evict(&s.store, &ns, &name) {
        Ok(()) => json_response(
            StatusCode::CREATED,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}),
        ),
        Err(e) => error_response(&e),
    }
}
async fn core_sub_put(
    State(s): State<Shared>,
    Path((ns, plural, name, _sub)): Path<(String, String, String, String)>,
    body: Bytes,
) -> Response {
    put(s, plural, ns, name, body).await
}
async fn core_sub_patch(
    State(s): State<Shared>,
    Path((ns, plural, name, _sub)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    patch(s, plural, ns, name, headers, body).await
}
async fn group_get_sub(
    State(s): State<Shared>,
    Path((group, _v, ns, plural, name, _sub)): Path<(
        String,
        String,
        String,
        String,
        String,
        String,
    )>,
) -> Response {
    get_one(s, resource_id(Some(&group), &plural), ns, name).await
}
async fn group_put_sub(
    State(s): State<Shared>,
    Path((group, _v, ns, plural, name, _sub)): Path<(
        String,
        String,
        String,
        String,
        String,
        String,
    )>,
    body: Bytes,
) -> Response {
    put(s, resource_id(Some(&group), &plural), ns, name, body).await
}
async fn group_patch_sub(
    State(s): State<Shared>,
    Path((group, _v, ns, plural, name, _sub)): Path<(
        String,
        String,
        String,
        String,
        String,
        String,
    )>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    patch(
        s,
        resource_id(Some(&group), &plural),
        ns,
        name,
        headers,
        body,
    )
    .await
}

// Cluster-scoped objects live in the store under the namespace "".

async fn cluster_core_create(
    State(s): State<Shared>,
    Path(plural): Path<String>,
    body: Bytes,
) -> Response {
    create(s, plural, String::new(), body).await
}
async fn cluster_core_get(
    State(s): State<Shared>,
    Path((plural, name)): Path<(String, String)>,
) -> Response {
    get_one(s, plural, String::new(), name).await
}
async fn cluster_core_put(
    State(s): State<Shared>,
    Path((plural, name)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    put(s, plural, String::new(), name, body).await
}
async fn cluster_core_patch(
    State(s): State<Shared>,
    Path((plural, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    patch(s, plural, String::new(), name, headers, body).await
}
async fn cluster_core_delete(
    State(s): State<Shared>,
    Path((plural, name)): Path<(String, String)>,
    Query(q): Params,
    body: Bytes,
) -> Response {
    delete(s, plural, String::new(), name, q, body).await
}
async fn cluster_core_get_sub(
    State(s): State<Shared>,
    Path((plural, name, _sub)): Path<(String, String, String)>,
) -> Response {
    get_one(s, plural, String::new(), name).await
}
async fn cluster_core_put_sub(
    State(s): State<Shared>,
    Path((plural, name, _sub)): Path<(String, String, String)>,
    body: Bytes,
) -> Response {
    put(s, plural, String::new(), name, body).await
}
async fn cluster_core_patch_sub(
    State(s): State<Shared>,
    Path((plural, name, _sub)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    patch(s, plural, String::new(), name, headers, body).await
}
async fn namespace_get(State(s): State<Shared>, Path(name): Path<String>) -> Response {
    get_one(s, "namespaces".into(), String::new(), name).await
}
async fn namespace_put(State(s): State<Shared>, Path(name): Path<String>, body: Bytes) -> Response {
    put(s, "namespaces".into(), String::new(), name, body).await
}
async fn namespace_patch(
    State(s): State<Shared>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    patch(s, "namespaces".into(), String::new(), name, headers, body).await
}
async fn namespace_delete(
    State(s): State<Shared>,
    Path(name): Path<String>,
    Query(q): Params,
    body: Bytes,
) -> Response {
    delete(s, "namespaces".into(), String::new(), name, q, body).await
}
async fn cluster_group_create(
    State(s): State<Shared>,
    Path((group, _v, plural)): Path<(String, String, String)>,
    body: Bytes,
) -> Response {
    create(s, resource_id(Some(&group), &plural), String::new(), body).await
}
async fn cluster_group_get(
    State(s): State<Shared>,
    Path((group, _v, plural, name)): Path<(String, String, String, String)>,
) -> Response {
    get_one(s, resource_id(Some(&group), &plural), String::new(), name).await
}
async fn cluster_group_put(
    State(s): State<Shared>,
    Path((group, _v, plural, name)): Path<(String, String, String, String)>,
    body: Bytes,
) -> Response {
    put(
        s,
        resource_id(Some(&group), &plural),
        String::new(),
        name,
        body,
    )
    .await
}
async fn cluster_group_patch(
    State(s): State<Shared>,
    Path((group, _v, plural, name)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    patch(
        s,
        resource_id(Some(&group), &plural),
        String::new(),
        name,
        headers,
        body,
    )
    .await
}
async fn cluster_group_delete(
    State(s): State<Shared>,
    Path((group, _v, plural, name)): Path<(String, String, String, String)>,
    Query(q): Params,
    body: Bytes,
) -> Response {
    delete(
        s,
        resource_id(Some(&group), &plural),
        String::new(),
        name,
        q,
        body,
    )
    .await
}

fn parse_body(body: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not JSON: {e}")))
}

async fn guard(s: &ApiState, verb: &'static str, resource: &str) -> Result<(), ApiError> {
    s.calls.add(verb, resource);
    let (latency, error) = s.faults.draw(verb);
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    error.map_or(Ok(()), Err)
}

async fn list(
    s: Shared,
    resource: String,
    ns: Option<String>,
    q: BTreeMap<String, String>,
) -> Response {
    let watching = q.get("watch").is_some_and(|w| w == "true" || w == "1");
    let verb = if watching { "watch" } else { "list" };
    if let Err(e) = guard(&s, verb, &resource).await {
        return error_response(&e);
    }
    let labels = match LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str)) {
        Ok(l) => l,
        Err(e) => return error_response(&ApiError::bad_request(e)),
    };
    let fields = match FieldSelector::parse(q.get("fieldSelector").map_or("", String::as_str)) {
        Ok(f) => f,
        Err(e) => return error_response(&ApiError::bad_request(e)),
    };
    if watching {
        return watch(s, resource, ns, labels, fields, &q);
    }
    let (items, rv) = s.store.list(&resource, ns.as_deref(), &labels, &fields);
    let api_version = RESOURCES
        .iter()
        .find(|(r, _, _, _)| *r == resource)
        .map(|(_, _, av, _)| (*av).to_owned())
        .or_else(|| {
            let crd = s.store.get(CRDS, "", &resource).ok()?;
            let version = served_versions(&crd).into_iter().next()?;
            Some(format!("{}/{version}", str_at(&crd, "/spec/group")?))
        })
        .unwrap_or_else(|| "v1".to_owned());
    json_response(
        StatusCode::OK,
        &json!({
            "apiVersion": api_version,
            "kind": format!("{}List", kind_of(&s.store, &resource)),
            "metadata": {"resourceVersion": rv.to_string()},
            "items": items,
        }),
    )
}

fn watch(
    s: Shared,
    resource: String,
    ns: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    q: &BTreeMap<String, String>,
) -> Response {
    let rv: u64 = q
        .get("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(Duration::from_secs(290), Duration::from_secs);
    let (initial, rx) = if rv == 0 {
        // "Any" version: the current objects as ADDED, then changes.
        let (items, current) = s.store.list(&resource, ns.as_deref(), &labels, &fields);
        match s.store.watch_from(current) {
            Ok((past, rx)) => {
                let mut events: Vec<Value> = items
                    .into_iter()
                    .map(|o| json!({"type": "ADDED", "object": o}))
                    .collect();
                events.extend(
                    past.into_iter()
                        .filter(|c| wanted(c, &resource, ns.as_deref(), &labels, &fields))
                        .map(|c| event_json(&c)),
                );
                (events, rx)
            }
            Err(e) => return error_response(&e),
        }
    } else {
        match s.store.watch_from(rv) {
            Ok((past, rx)) => (
                past.into_iter()
                    .filter(|c| wanted(c, &resource, ns.as_deref(), &labels, &fields))
                    .map(|c| event_json(&c))
                    .collect(),
                rx,
            ),
            Err(e) => {
                // A watch reports an expired version as an ERROR event.
                let body = format!("{}\n", json!({"type": "ERROR", "object": e.to_status()}));
                return (StatusCode::OK, body).into_response();
            }
        }
    };
    let deadline = tokio::time::Instant::now() + timeout;
    let head = futures_util::stream::iter(
        initial
            .into_iter()
            .map(|e| Ok::<Bytes, std::io::Error>(Bytes::from(format!("{e}\n")))),
    );
    let tail = futures_util::stream::unfold(Some(rx), move |rx| {
        let resource = resource.clone();
        let ns = ns.clone();
        let labels = labels.clone();
        let fields = fields.clone();
        async move {
            let mut rx = rx?;
            loop {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Err(_) => return None,
                    Ok(Ok(change)) => {
                        if wanted(&change, &resource, ns.as_deref(), &labels, &fields) {
                            let line = format!("{}\n", event_json(&change));
                            return Some((Ok(Bytes::from(line)), Some(rx)));
                        }
                    }
                    Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => {
                        let e = ApiError::new(410, "Expired", "watch fell behind; re-list");
                        let line =
                            format!("{}\n", json!({"type": "ERROR", "object": e.to_status()}));
                        return Some((Ok(Bytes::from(line)), None));
                    }
                    Ok(Err(_)) => return None,
                }
            }
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(head.chain(tail)))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn wanted(
    c: &Change,
    resource: &str,
    ns: Option<&str>,
    labels: &LabelSelector,
    fields: &FieldSelector,
) -> bool {
    c.resource == resource
        && ns.is_none_or(|n| n == c.namespace)
        && labels.matches(&c.object)
        && fields.matches(&c.object)
}

fn event_json(c: &Change) -> Value {
    json!({"type": c.kind.as_str(), "object": c.object})
}

async fn create(s: Shared, resource: String, ns: String, body: Bytes) -> Response {
    if let Err(e) = guard(&s, "create", &resource).await {
        return error_response(&e);
    }
    let result = parse_body(&body).and_then(|mut obj| {
        if obj.get("kind").is_none() {
            obj["kind"] = Value::String(kind_of(&s.store, &resource));
        }
        s.store.admit(Write::Create, &resource, &ns, &mut obj)?;
        if resource == "jobs.batch" && obj.get("status").is_none() {
            obj["status"] = json!({});
        }
        s.store.create(&resource, &ns, obj)
    });
    match result {
        Ok(obj) => json_response(StatusCode::CREATED, &obj),
        Err(e) => error_response(&e),
    }
}

async fn get_one(s: Shared, resource: String, ns: String, name: String) -> Response {
    if let Err(e) = guard(&s, "get", &resource).await {
        return error_response(&e);
    }
    match s.store.get(&resource, &ns, &name) {
        Ok(obj) => json_response(StatusCode::OK, &obj),
        Err(e) => error_response(&e),
    }
}

async fn put(s: Shared, resource: String, ns: String, name: String, body: Bytes) -> Response {
    if let Err(e) = guard(&s, "update", &resource).await {
        return error_response(&e);
    }
    let admitted = parse_body(&body).and_then(|mut obj| {
        s.store.admit(Write::Update, &resource, &ns, &mut obj)?;
        Ok(obj)
    });
    match admitted.and_then(|obj| s.store.update(&resource, &ns, &name, obj)) {
        Ok(obj) => json_response(StatusCode::OK, &obj),
        Err(e) => error_response(&e),
    }
}

async fn patch(
    s: Shared,
    resource: String,
    ns: String,
    name: String,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(e) = guard(&s, "patch", &resource).await {
        return error_response(&e);
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !(content_type.starts_with("application/merge-patch+json")
        || content_type.starts_with("application/strategic-merge-patch+json"))
    {
        return error_response(&ApiError::new(
            415,
            "UnsupportedMediaType",
            format!("the fake API server accepts merge patches only, not '{content_type}'"),
        ));
    }
    match parse_body(&body).and_then(|p| s.store.patch(&resource, &ns, &name, &p)) {
        Ok(obj) => json_response(StatusCode::OK, &obj),
        Err(e) => error_response(&e),
    }
}

async fn delete(
    s: Shared,
    resource: String,
    ns: String,
    name: String,
    q: BTreeMap<String, String>,
    body: Bytes,
) -> Response {
    if let Err(e) = guard(&s, "delete", &resource).await {
        return error_response(&e);
    }
    let from_body = serde_json::from_slice::<Value>(&body).ok().and_then(|b| {
        b.get("propagationPolicy")
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let policy = from_body
        .or_else(|| q.get("propagationPolicy").cloned())
        .unwrap_or_else(|| "Background".to_owned());
    match super::deletion::delete(&s.store, &resource, &ns, &name, &policy) {
        Ok(Some(obj)) => json_response(StatusCode::OK, &obj),
        Ok(None) => json_response(
            StatusCode::OK,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {"name": name, "kind": resource}}),
        ),
        Err(e) => error_response(&e),
    }
}

/// `pods/{name}/portforward`: a WebSocket to the pod's ports
/// ([`super::portforward`]).
async fn pod_portforward(
    State(s): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    Query(q): Params,
    req: axum::extract::Request,
) -> Response {
    if let Err(e) = guard(&s, "portforward", "pods").await {
        return error_response(&e);
    }
    let answer = super::portforward::parse_ports(q.get("ports").map(String::as_str))
        .and_then(|ports| {
            let pod = s.store.get("pods", &ns, &name)?;
            super::portforward::target(&pod, ports)
        })
        .and_then(|target| super::portforward::upgrade(req, target));
    answer.unwrap_or_else(|e| error_response(&e))
}

async fn logs(s: Shared, ns: String, name: String, q: BTreeMap<String, String>) -> Response {
    if let Err(e) = guard(&s, "log", "pods").await {
        return error_response(&e);
    }
    let flag = |k: &str| q.get(k).is_some_and(|v| v == "true" || v == "1");
    let request = LogRequest {
        namespace: ns,
        pod: name,
        container: q.get("container").cloned(),
        previous: flag("previous"),
        follow: flag("follow"),
        tail: q.get("tailLines").and_then(|v| v.parse().ok()),
    };
    match s.logs.stream(&s.store, request) {
        Ok(stream) => Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/plain")
            .body(Body::from_stream(stream))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response()),
        Err(e) => error_response(&e),
    }
}
