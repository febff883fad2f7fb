//! IAM: service accounts (create, get, delete) and their IAM policies,
//! over `/v1/projects/{p}/serviceAccounts[/{email}[:getIamPolicy|:setIamPolicy]]`.
//! Also the rule every fake policy shares: a member that names a service
//! account must name one that exists (and has propagated), and a Workload
//! Identity member needs a cluster with Workload Identity.

use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method};
use axum::response::Response;
use axum::routing::{any, post};
use serde_json::{Value, json};

use super::{ApisState, App, admit, error, error_with, respond};
use crate::google::{Policy, PolicyError};

const SERVICE: &str = "iam.googleapis.com";

/// A service account.
#[derive(Debug, Clone)]
pub(crate) struct Account {
    unique_id: String,
    display_name: String,
    created: Instant,
    pub(crate) policy: Policy,
}

pub(crate) fn routes() -> Router<App> {
    Router::new()
        .route(
            "/v1/projects/{project}/serviceAccounts",
            post(create).get(list),
        )
        .route("/v1/projects/{project}/serviceAccounts/{rest}", any(one))
}

fn account_json(st: &ApisState, email: &str, a: &Account) -> Value {
    json!({
        "name": format!("projects/{}/serviceAccounts/{email}", st.project),
        "projectId": st.project,
        "uniqueId": a.unique_id,
        "email": email,
        "displayName": a.display_name,
        "etag": "MDEwMjE5MjA=",
        "oauth2ClientId": a.unique_id,
    })
}

fn valid_account_id(id: &str) -> bool {
    (6..=30).contains(&id.len())
        && id.starts_with(|c: char| c.is_ascii_lowercase())
        && !id.ends_with('-')
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

async fn create(
    State(app): State<App>,
    Path(project): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let resource = format!("projects/{project}");
    if let Err(r) = admit(
        &app,
        &headers,
        "iam.projects.serviceAccounts.create",
        SERVICE,
        "iam.serviceAccounts.create",
        &resource,
    ) {
        return r;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or_default();
    let id = body["accountId"].as_str().unwrap_or_default().to_owned();
    if !valid_account_id(&id) {
        return error(
            400,
            &format!(
                "Invalid form of account ID {id}. Should be [Alphanumeric] of length 6-30 (Regex: [a-z]([-a-z0-9]*[a-z0-9]))."
            ),
        );
    }
    let mut st = app.lock();
    if project != st.project {
        return error(404, &format!("The project {project} was not found."));
    }
    let email = format!("{id}@{project}.iam.gserviceaccount.com");
    if st.service_accounts.contains_key(&email) {
        return error(
            409,
            &format!("Service account {id} already exists within project projects/{project}."),
        );
    }
    let n = st.service_accounts.len() + 1;
    let account = Account {
        unique_id: format!("1{:020}", n),
        display_name: body
            .pointer("/serviceAccount/displayName")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        created: Instant::now(),
        policy: Policy::default(),
    };
    let json = account_json(&st, &email, &account);
    st.service_accounts.insert(email.clone(), account);
    st.created(format!("serviceAccount {email}"));
    respond(200, &json)
}

async fn list(State(app): State<App>, Path(project): Path<String>, headers: HeaderMap) -> Response {
    if let Err(r) = admit(
        &app,
        &headers,
        "iam.projects.serviceAccounts.list",
        SERVICE,
        "iam.serviceAccounts.list",
        &format!("projects/{project}"),
    ) {
        return r;
    }
    let st = app.lock();
    let accounts: Vec<Value> = st
        .service_accounts
        .iter()
        .map(|(e, a)| account_json(&st, e, a))
        .collect();
    respond(200, &json!({"accounts": accounts}))
}

/// `GET`/`DELETE` of an account, and `POST …:getIamPolicy` / `:setIamPolicy`.
async fn one(
    State(app): State<App>,
    Path((project, rest)): Path<(String, String)>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (email, verb) = rest
        .split_once(':')
        .map_or((rest.as_str(), ""), |(e, v)| (e, v));
    let resource = format!("projects/{project}/serviceAccounts/{email}");
    let (call, permission) = match (&method, verb) {
        (&Method::GET, "") => (
            "iam.projects.serviceAccounts.get",
            "iam.serviceAccounts.get",
        ),
        (&Method::DELETE, "") => (
            "iam.projects.serviceAccounts.delete",
            "iam.serviceAccounts.delete",
        ),
        (&Method::POST, "getIamPolicy") => (
            "iam.projects.serviceAccounts.getIamPolicy",
            "iam.serviceAccounts.getIamPolicy",
        ),
        (&Method::POST, "setIamPolicy") => (
            "iam.projects.serviceAccounts.setIamPolicy",
            "iam.serviceAccounts.setIamPolicy",
        ),
        _ => return error(404, "The requested URL was not found on this server."),
    };
    if let Err(r) = admit(&app, &headers, call, SERVICE, permission, &resource) {
        return r;
    }
    let mut st = app.lock();
    let email = email.to_owned();
    if !st.service_accounts.contains_key(&email) {
        return error(404, &format!("Unknown service account: {resource}"));
    }
    match verb {
        "" if method == Method::GET => {
            let a = &st.service_accounts[&email];
            respond(200, &account_json(&st, &email, a))
        }
        "" => {
            st.service_accounts.remove(&email);
            respond(200, &json!({}))
        }
        "getIamPolicy" => respond(200, &st.service_accounts[&email].policy.to_json()),
        _ => {
            let body: Value = serde_json::from_slice(&body).unwrap_or_default();
            if let Err(r) = check_members(&st, &body["policy"]) {
                return r;
            }
            let Some(account) = st.service_accounts.get_mut(&email) else {
                return error(404, &format!("Unknown service account: {resource}"));
            };
            set_policy(&mut account.policy, &body["policy"])
        }
    }
}

/// `setIamPolicy` on `policy`, with the answers IAM gives.
pub(crate) fn set_policy(policy: &mut Policy, body: &Value) -> Response {
    match policy.set(body) {
        Ok(p) => respond(200, &p),
        Err(PolicyError::Stale) => respond(
            409,
            &error_with(
                409,
                "ABORTED",
                "There were concurrent policy changes. Please retry the whole read-modify-write with exponential backoff. The request's ETag does not match the current policy's.",
                None,
                &[],
            ),
        ),
        Err(PolicyError::Invalid(m)) => error(400, &m),
    }
}

/// Every member of `policy` that names this project's service accounts or
/// its Workload Identity pool must exist: 400 as IAM answers otherwise.
pub(crate) fn check_members(st: &ApisState, policy: &Value) -> Result<(), Response> {
    let bindings = Policy::parse_bindings(policy).map_err(|e| match e {
        PolicyError::Invalid(m) => error(400, &m),
        PolicyError::Stale => error(409, "stale"),
    })?;
    let pool = format!("{}.svc.id.goog", st.project);
    let suffix = format!("@{}.iam.gserviceaccount.com", st.project);
    for (_, members) in bindings {
        for m in members {
            let Some(who) = m.strip_prefix("serviceAccount:") else {
                continue;
            };
            if let Some(rest) = who.strip_prefix(&format!("{pool}[")) {
                let has_pool = st.clusters.values().any(|c| {
                    c.status != "PROVISIONING"
                        && c.to_json(st)
                            .pointer("/workloadIdentityConfig/workloadPool")
                            .and_then(Value::as_str)
                            == Some(pool.as_str())
                });
                if !has_pool || !rest.ends_with(']') {
                    return Err(error(
                        400,
                        &format!(
                            "Identity Pool does not exist ({pool}). Please check that you specified a valid resource name as returned in the `name` attribute in the configuration API."
                        ),
                    ));
                }
            } else if who.ends_with(&suffix) {
                let visible = st
                    .service_accounts
                    .get(who)
                    .is_some_and(|a| a.created.elapsed() >= st.iam_propagation);
                if !visible {
                    return Err(error(
                        400,
                        &format!("Service account {who} does not exist."),
                    ));
                }
            }
        }
    }
    Ok(())
}
