//! Service Usage: which APIs are enabled (`services.list` with
//! `filter=state:ENABLED`, `services.get`) and `services.batchEnable`, a
//! long-running operation polled at `/v1/operations/{id}`.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::operations::{Api, Effect};
use super::{ApisState, App, TITLES, admit, error, respond, title};

const SERVICE: &str = "serviceusage.googleapis.com";

pub(crate) fn routes() -> Router<App> {
    Router::new()
        .route("/v1/projects/{project}/services", get(list))
        .route(
            "/v1/projects/{project}/services:batchEnable",
            post(batch_enable),
        )
        .route("/v1/projects/{project}/services/{service}", get(get_one))
        .route("/v1/operations/{id}", get(operation))
}

fn service_json(st: &ApisState, service: &str) -> Value {
    let number = st.project_number;
    json!({
        "name": format!("projects/{number}/services/{service}"),
        "parent": format!("projects/{number}"),
        "config": {"name": service, "title": title(service)},
        "state": if st.enabled.contains(service) { "ENABLED" } else { "DISABLED" },
    })
}

async fn list(
    State(app): State<App>,
    Path(project): Path<String>,
    Query(q): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = admit(
        &app,
        &headers,
        "serviceusage.services.list",
        SERVICE,
        "serviceusage.services.list",
        &format!("projects/{project}"),
    ) {
        return r;
    }
    let st = app.lock();
    if project != st.project {
        return error(
            403,
            &format!(
                "Permission denied to list services for consumer container [projects/{project}]"
            ),
        );
    }
    let param = |k: &str| q.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    let enabled_only = param("filter") == Some("state:ENABLED");
    let page: usize = param("pageSize")
        .and_then(|p| p.parse().ok())
        .unwrap_or(50)
        .clamp(1, 200);
    let start: usize = param("pageToken").and_then(|t| t.parse().ok()).unwrap_or(0);
    let all: Vec<&str> = if enabled_only {
        st.enabled.iter().map(String::as_str).collect()
    } else {
        TITLES.iter().map(|(s, _)| *s).collect()
    };
    let services: Vec<Value> = all
        .iter()
        .skip(start)
        .take(page)
        .map(|s| service_json(&st, s))
        .collect();
    let mut v = json!({"services": services});
    if start + page < all.len() {
        v["nextPageToken"] = json!((start + page).to_string());
    }
    respond(200, &v)
}

async fn get_one(
    State(app): State<App>,
    Path((project, service)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = admit(
        &app,
        &headers,
        "serviceusage.services.get",
        SERVICE,
        "serviceusage.services.get",
        &format!("projects/{project}/services/{service}"),
    ) {
        return r;
    }
    let st = app.lock();
    respond(200, &service_json(&st, &service))
}

async fn batch_enable(
    State(app): State<App>,
    Path(project): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(r) = admit(
        &app,
        &headers,
        "serviceusage.services.batchEnable",
        SERVICE,
        "serviceusage.services.enable",
        &format!("projects/{project}"),
    ) {
        return r;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or_default();
    let services: Vec<String> = body["serviceIds"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect();
    if services.is_empty() || services.len() > 20 {
        return error(
            400,
            "Invalid request: between 1 and 20 serviceIds are accepted.",
        );
    }
    if let Some(unknown) = services
        .iter()
        .find(|s| !TITLES.iter().any(|(t, _)| t == s))
    {
        return error(
            403,
            &format!("Not found or permission denied for service(s): {unknown}."),
        );
    }
    let mut st = app.lock();
    if project != st.project {
        return error(
            403,
            &format!(
                "Permission denied to enable services for consumer container [projects/{project}]"
            ),
        );
    }
    for s in &services {
        st.created(format!("enable {s}"));
    }
    let target = format!("projects/{project}");
    let op = st.start_op(
        Api::ServiceUsage,
        "enableServices",
        "global",
        &target,
        Effect::ServicesEnabled { services },
        0.5,
    );
    respond(200, &op)
}

async fn operation(State(app): State<App>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    if let Err(r) = admit(
        &app,
        &headers,
        "serviceusage.operations.get",
        "",
        "serviceusage.operations.get",
        &format!("operations/{id}"),
    ) {
        return r;
    }
    let st = app.lock();
    match st.ops.get(&id) {
        Some(o) => respond(200, &o.to_json(&st.project, st.project_number)),
        None => error(404, &format!("Operation operations/{id} not found.")),
    }
}
