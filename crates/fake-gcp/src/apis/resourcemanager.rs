//! Cloud Resource Manager: the project (`GET /v1/projects/{p}`) and its IAM
//! policy (`POST /v1/projects/{p}:getIamPolicy` / `:setIamPolicy`).

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method};
use axum::response::Response;
use axum::routing::any;
use serde_json::{Value, json};

use super::iam::{check_members, set_policy};
use super::{App, admit, error, respond};

const SERVICE: &str = "cloudresourcemanager.googleapis.com";

pub(crate) fn routes() -> Router<App> {
    Router::new().route("/v1/projects/{project}", any(project))
}

async fn project(
    State(app): State<App>,
    Path(rest): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (project, verb) = rest
        .split_once(':')
        .map_or((rest.as_str(), ""), |(p, v)| (p, v));
    let resource = format!("projects/{project}");
    let (call, permission) = match (&method, verb) {
        (&Method::GET, "") => (
            "cloudresourcemanager.projects.get",
            "resourcemanager.projects.get",
        ),
        (&Method::POST, "getIamPolicy") => (
            "cloudresourcemanager.projects.getIamPolicy",
            "resourcemanager.projects.getIamPolicy",
        ),
        (&Method::POST, "setIamPolicy") => (
            "cloudresourcemanager.projects.setIamPolicy",
            "resourcemanager.projects.setIamPolicy",
        ),
        _ => return error(404, "The requested URL was not found on this server."),
    };
    if let Err(r) = admit(&app, &headers, call, SERVICE, permission, &resource) {
        return r;
    }
    let mut st = app.lock();
    if project != st.project {
        // Resource Manager does not say whether a project it hides exists.
        return error(403, "The caller does not have permission");
    }
    match verb {
        "" => respond(
            200,
            &json!({"projectNumber": st.project_number.to_string(), "projectId": st.project,
                    "lifecycleState": "ACTIVE", "name": st.project,
                    "createTime": "2024-01-01T00:00:00.000Z", "parent": {"type": "organization", "id": "1"}}),
        ),
        "getIamPolicy" => respond(200, &st.project_policy.to_json()),
        _ => {
            let body: Value = serde_json::from_slice(&body).unwrap_or_default();
            if let Err(r) = check_members(&st, &body["policy"]) {
                return r;
            }
            set_policy(&mut st.project_policy, &body["policy"])
        }
    }
}
