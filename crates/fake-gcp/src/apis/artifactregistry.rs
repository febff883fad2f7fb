//! Artifact Registry repositories: create (a long-running operation), get,
//! delete, and their IAM policies, under
//! `/v1/projects/{p}/locations/{l}/repositories`.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method};
use axum::response::Response;
use axum::routing::{any, post};
use serde_json::{Value, json};

use super::iam::{check_members, set_policy};
use super::operations::{Api, Effect};
use super::{App, admit, error, respond};
use crate::google::Policy;

const SERVICE: &str = "artifactregistry.googleapis.com";

/// A repository.
#[derive(Debug, Clone)]
pub(crate) struct Repository {
    name: String,
    format: String,
    labels: Value,
    created: String,
    /// Its create operation finished.
    pub(crate) ready: bool,
    policy: Policy,
}

impl Repository {
    pub(crate) fn new(name: &str, format: &str) -> Self {
        Self {
            name: name.to_owned(),
            format: format.to_owned(),
            labels: json!({}),
            created: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            ready: true,
            policy: Policy::default(),
        }
    }

    fn to_json(&self) -> Value {
        json!({"name": self.name, "format": self.format, "labels": self.labels,
               "createTime": self.created, "updateTime": self.created, "mode": "STANDARD_REPOSITORY"})
    }
}

pub(crate) fn routes() -> Router<App> {
    Router::new()
        .route(
            "/v1/projects/{project}/locations/{location}/repositories",
            post(create),
        )
        .route(
            "/v1/projects/{project}/locations/{location}/repositories/{repository}",
            any(one),
        )
}

async fn create(
    State(app): State<App>,
    Path((project, location)): Path<(String, String)>,
    Query(q): Query<Vec<(String, String)>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let parent = format!("projects/{project}/locations/{location}");
    if let Err(r) = admit(
        &app,
        &headers,
        "artifactregistry.projects.locations.repositories.create",
        SERVICE,
        "artifactregistry.repositories.create",
        &parent,
    ) {
        return r;
    }
    let Some(id) = q
        .iter()
        .find(|(k, _)| k == "repositoryId")
        .map(|(_, v)| v.clone())
    else {
        return error(400, "Invalid argument: repository_id is required.");
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or_default();
    let format = body["format"]
        .as_str()
        .unwrap_or("FORMAT_UNSPECIFIED")
        .to_owned();
    if format != "DOCKER" {
        return error(
            400,
            &format!("Invalid argument: unsupported format {format}."),
        );
    }
    let name = format!("{parent}/repositories/{id}");
    let mut st = app.lock();
    if project != st.project {
        return error(
            403,
            &format!(
                "Permission 'artifactregistry.repositories.create' denied on resource '{parent}' (or it may not exist)."
            ),
        );
    }
    if st.repositories.contains_key(&name) {
        return error(409, "the repository already exists");
    }
    let mut repo = Repository::new(&name, &format);
    repo.labels = body["labels"].clone();
    repo.ready = false;
    st.repositories.insert(name.clone(), repo);
    st.created(format!("repository {name}"));
    let op = st.start_op(
        Api::ArtifactRegistry,
        "createRepository",
        &location,
        &name,
        Effect::RepositoryCreated { name: name.clone() },
        0.25,
    );
    respond(200, &op)
}

/// `GET`/`DELETE` of a repository, `GET …:getIamPolicy`, `POST …:setIamPolicy`.
async fn one(
    State(app): State<App>,
    Path((project, location, rest)): Path<(String, String, String)>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (id, verb) = rest
        .split_once(':')
        .map_or((rest.as_str(), ""), |(i, v)| (i, v));
    let name = format!("projects/{project}/locations/{location}/repositories/{id}");
    let (call, permission) = match (&method, verb) {
        (&Method::GET, "") => (
            "artifactregistry.projects.locations.repositories.get",
            "artifactregistry.repositories.get",
        ),
        (&Method::DELETE, "") => (
            "artifactregistry.projects.locations.repositories.delete",
            "artifactregistry.repositories.delete",
        ),
        (&Method::GET, "getIamPolicy") => (
            "artifactregistry.projects.locations.repositories.getIamPolicy",
            "artifactregistry.repositories.getIamPolicy",
        ),
        (&Method::POST, "setIamPolicy") => (
            "artifactregistry.projects.locations.repositories.setIamPolicy",
            "artifactregistry.repositories.setIamPolicy",
        ),
        (&Method::POST, "testIamPermissions") => (
            "artifactregistry.projects.locations.repositories.testIamPermissions",
            "",
        ),
        _ => return error(404, "The requested URL was not found on this server."),
    };
    if let Err(r) = admit(&app, &headers, call, SERVICE, permission, &name) {
        return r;
    }
    let mut st = app.lock();
    if !st.repositories.get(&name).is_some_and(|r| r.ready) {
        return error(404, "Requested entity was not found.");
    }
    match (verb, &method) {
        ("", &Method::GET) => respond(200, &st.repositories[&name].to_json()),
        ("", _) => {
            let op = st.start_op(
                Api::ArtifactRegistry,
                "deleteRepository",
                &location,
                &name,
                Effect::RepositoryDeleted { name: name.clone() },
                0.25,
            );
            respond(200, &op)
        }
        ("getIamPolicy", _) => respond(200, &st.repositories[&name].policy.to_json()),
        ("testIamPermissions", _) => {
            let body: Value = serde_json::from_slice(&body).unwrap_or_default();
            let held: Vec<Value> = body["permissions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p.as_str().is_some_and(|p| !st.is_denied(p)))
                .cloned()
                .collect();
            respond(200, &json!({"permissions": held}))
        }
        _ => {
            let body: Value = serde_json::from_slice(&body).unwrap_or_default();
            if let Err(r) = check_members(&st, &body["policy"]) {
                return r;
            }
            let Some(repo) = st.repositories.get_mut(&name) else {
                return error(404, "Requested entity was not found.");
            };
            set_policy(&mut repo.policy, &body["policy"])
        }
    }
}
