//! The HTTP side of the fake: routes, request admission (counting, token,
//! injected errors) and the JSON it answers with.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State as AxumState};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{Bucket, BuildOutcome, BuildSchedule, FakeBuild, FakeRoute, State, google_error, lock};

type Shared = Arc<Mutex<State>>;

pub(super) fn route_name(route: FakeRoute) -> &'static str {
    match route {
        FakeRoute::CreateBuild => "create_build",
        FakeRoute::GetBuild => "get_build",
        FakeRoute::GetTag => "get_tag",
        FakeRoute::Any => "any",
    }
}

pub(super) fn router(state: Shared) -> Router {
    routes()
        .fallback(|| async { respond(404, &google_error(404, "no such route in the fake", None)) })
        .with_state(state)
}

/// The routes, without a fallback (so other fakes can serve them too).
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route(
            "/v1/projects/{project}/locations/{location}/builds",
            post(create_build),
        )
        .route("/v1/projects/{project}/builds", post(create_build_global))
        .route(
            "/v1/projects/{project}/locations/{location}/builds/{id}",
            get(get_build),
        )
        .route("/v1/projects/{project}/builds/{id}", get(get_build_global))
        .route(
            "/v1/projects/{project}/locations/{location}/repositories/{repository}/packages/{package}/tags/{tag}",
            get(get_tag),
        )
}

fn respond(status: u16, body: &Value) -> Response {
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Count the call, check the token, hand out an injected error if one is due.
fn admit(state: &Shared, route: FakeRoute, headers: &HeaderMap) -> Option<Response> {
    let mut st = lock(state);
    *st.requests.entry(route_name(route)).or_default() += 1;
    if let Some(injected) = st
        .injected
        .iter_mut()
        .find(|i| i.remaining > 0 && (i.route == route || i.route == FakeRoute::Any))
    {
        injected.remaining -= 1;
        let (status, body) = (injected.status, injected.body.clone());
        st.injected.retain(|i| i.remaining > 0);
        return Some(respond(status, &body));
    }
    if let Some(token) = &st.token {
        let expected = format!("Bearer {token}");
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if given != Some(expected.as_str()) {
            return Some(respond(
                401,
                &google_error(
                    401,
                    "Request had invalid authentication credentials. Expected OAuth 2 access token.",
                    None,
                ),
            ));
        }
    }
    None
}

fn is_done(status: &str) -> bool {
    !matches!(status, "QUEUED" | "WORKING" | "PENDING")
}

fn digest(image: &str, id: &str) -> String {
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(format!("{image}@{id}").as_bytes()))
    )
}

fn build_json(build: &FakeBuild, schedule: &BuildSchedule) -> Value {
    let mut value = json!({
        "id": build.id,
        "projectId": build.project,
        "status": build.status,
        "logUrl": format!(
            "https://console.cloud.google.com/cloud-build/builds;region={}/{}?project={}",
            build.location, build.id, build.project
        ),
        "logsBucket": build.request["logsBucket"],
        "images": build.request["images"],
        "createTime": "2025-01-01T00:00:00Z",
    });
    if build.status == "SUCCESS" {
        value["results"] = json!({
            "images": build.images().iter().map(|i| json!({"name": i, "digest": digest(i, &build.id)})).collect::<Vec<_>>(),
        });
    } else if let (true, BuildOutcome::Failure { detail, .. }) =
        (is_done(&build.status), &schedule.outcome)
    {
        value["statusDetail"] = json!(detail);
    }
    value
}

/// `gs://bucket/prefix` → (bucket, prefix).
fn split_gs(uri: &str) -> Option<(&str, &str)> {
    let rest = uri.strip_prefix("gs://")?;
    Some(match rest.split_once('/') {
        Some((bucket, prefix)) => (bucket, prefix.trim_matches('/')),
        None => (rest, ""),
    })
}

async fn fetch_source(
    source: &Bucket,
    bucket: &str,
    object: &str,
) -> Result<BTreeMap<String, String>, String> {
    let missing = |e: String| format!("cannot fetch the source gs://{bucket}/{object}: {e}");
    let bytes = source.read(bucket, object).await.map_err(missing)?;
    let mut files = BTreeMap::new();
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&bytes[..]));
    let entries = archive.entries().map_err(|e| missing(e.to_string()))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| missing(e.to_string()))?;
        let name = entry
            .path()
            .map_err(|e| missing(e.to_string()))?
            .display()
            .to_string();
        let mut text = String::new();
        entry
            .read_to_string(&mut text)
            .map_err(|e| missing(e.to_string()))?;
        files.insert(name, text);
    }
    if !files.contains_key("Dockerfile") {
        return Err(missing("the archive has no Dockerfile".into()));
    }
    Ok(files)
}

async fn create_build_global(
    state: AxumState<Shared>,
    Path(project): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    create(state.0, project, "global".into(), headers, body).await
}

async fn create_build(
    state: AxumState<Shared>,
    Path((project, location)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    create(state.0, project, location, headers, body).await
}

async fn create(
    state: Shared,
    project: String,
    location: String,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(r) = admit(&state, FakeRoute::CreateBuild, &headers) {
        return r;
    }
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            return respond(
                400,
                &google_error(400, "the build body is not a JSON object", None),
            );
        }
    };
    let source = &request["source"]["storageSource"];
    let (Some(bucket), Some(object)) = (source["bucket"].as_str(), source["object"].as_str())
    else {
        return respond(
            400,
            &google_error(
                400,
                "source.storageSource.bucket and .object are required",
                None,
            ),
        );
    };
    if request["steps"].as_array().is_none_or(Vec::is_empty) {
        return respond(
            400,
            &google_error(400, "invalid build: at least one step is required", None),
        );
    }
    let source = Bucket::find(&lock(&state), bucket);
    let (files, source_error) = match source {
        Some(source) => match fetch_source(&source, bucket, object).await {
            Ok(files) => (files, None),
            Err(e) => (BTreeMap::new(), Some(e)),
        },
        None => (BTreeMap::new(), None),
    };
    let mut st = lock(&state);
    let id = format!("00000000-0000-4000-8000-{:012x}", st.builds.len() + 1);
    let mut schedule = match st.next_schedules.pop_front() {
        Some(s) => s,
        None => st.schedule.clone(),
    };
    if let Some(message) = source_error {
        schedule = BuildSchedule {
            queued_polls: 0,
            working_polls: 0,
            outcome: BuildOutcome::Failure {
                status: "FAILURE".into(),
                detail: message.clone(),
                log: format!("FETCHSOURCE\n{message}\nERROR\n"),
            },
        };
    }
    let build = FakeBuild {
        id: id.clone(),
        project: project.clone(),
        location: location.clone(),
        request,
        status: "QUEUED".into(),
        polls: 0,
        files,
    };
    let body = json!({
        "name": format!("projects/{project}/locations/{location}/operations/op-{id}"),
        "metadata": {
            "@type": "type.googleapis.com/google.devtools.cloudbuild.v1.BuildOperationMetadata",
            "build": build_json(&build, &schedule),
        }
    });
    if let (Some(images), BuildOutcome::Success, false) =
        (st.images.clone(), &schedule.outcome, build.files.is_empty())
        && images.builds()
    {
        // The image's environment is made as the build runs; the build
        // stays WORKING until it is there.
        let (targets, files) = (build.images(), build.files.clone());
        // Environments made before are there at once.
        let reused: Option<String> = targets
            .iter()
            .map(|image| images.reuse(image, &files))
            .collect();
        let cell = Arc::new(Mutex::new(reused.map(Ok)));
        st.env_builds.insert(id.clone(), cell.clone());
        let made = cell.lock().unwrap_or_else(|p| p.into_inner()).is_some();
        std::thread::spawn(move || {
            if made {
                return;
            }
            let mut result = Ok(String::new());
            for image in targets {
                match (result, images.build(&image, &files)) {
                    (Ok(mut log), Ok(more)) => {
                        log.push_str(&more);
                        result = Ok(log);
                    }
                    (Ok(log) | Err(log), Err(more)) | (Err(log), Ok(more)) => {
                        result = Err(log + &more);
                    }
                }
            }
            *cell.lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
        });
    }
    st.schedules.insert(id, schedule);
    st.builds.push(build);
    respond(200, &body)
}

async fn get_build_global(
    state: AxumState<Shared>,
    Path((project, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    poll(state.0, project, id, headers).await
}

async fn get_build(
    state: AxumState<Shared>,
    Path((project, _location, id)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    poll(state.0, project, id, headers).await
}

/// The log object a finished build writes: (where, bucket, object, text).
type LogWrite = (Bucket, String, String, String);

async fn poll(state: Shared, project: String, id: String, headers: HeaderMap) -> Response {
    if let Some(r) = admit(&state, FakeRoute::GetBuild, &headers) {
        return r;
    }
    let (body, log): (Value, Option<LogWrite>) = {
        let mut st = lock(&state);
        let Some(index) = st
            .builds
            .iter()
            .position(|b| b.id == id && b.project == project)
        else {
            return respond(
                404,
                &google_error(404, &format!("build {id} not found"), None),
            );
        };
        let mut schedule = st.schedules.get(&id).cloned().unwrap_or_default();
        // An environment still being made keeps the build WORKING; a failed
        // one fails it.
        let made = st
            .env_builds
            .get(&id)
            .map(|cell| cell.lock().unwrap_or_else(|p| p.into_inner()).clone());
        match &made {
            Some(None) if !is_done(&st.builds[index].status) => {
                st.builds[index].status = "WORKING".into();
                return respond(200, &build_json(&st.builds[index], &schedule));
            }
            Some(Some(Err(log))) => {
                schedule = BuildSchedule {
                    queued_polls: 0,
                    working_polls: 0,
                    outcome: BuildOutcome::Failure {
                        status: "FAILURE".into(),
                        detail: "Build step 0 \"gcr.io/cloud-builders/docker\" failed: step exited with non-zero status: 1".into(),
                        log: format!("Step #0: {}ERROR\n", log.replace('\n', "\nStep #0: ")),
                    },
                };
                st.schedules.insert(id.clone(), schedule.clone());
                st.env_builds.remove(&id);
            }
            _ => {}
        }
        let mut log = None;
        if !is_done(&st.builds[index].status) {
            let build = &mut st.builds[index];
            build.polls += 1;
            build.status = schedule.status_after(build.polls).to_owned();
            if is_done(&build.status) {
                let build = build.clone();
                let text = match &schedule.outcome {
                    BuildOutcome::Failure { log, .. } => log.clone(),
                    _ => format!(
                        "{}Step #0: Successfully built\nStep #0: Successfully tagged {}\nDONE\n",
                        match &made {
                            // What the image's environment was made of.
                            Some(Some(Ok(env_log))) => env_log
                                .lines()
                                .map(|l| format!("Step #0: {l}\n"))
                                .collect::<String>(),
                            _ => String::new(),
                        },
                        build.images().join(", ")
                    ),
                };
                if build.status == "SUCCESS" {
                    for image in build.images() {
                        match super::tag_resource_for_image(&image) {
                            Some(resource) => {
                                st.tags.insert(resource);
                            }
                            None => {
                                st.pushed.insert(image);
                            }
                        }
                    }
                }
                if let Some((bucket, prefix)) =
                    build.request["logsBucket"].as_str().and_then(split_gs)
                {
                    let name = if prefix.is_empty() {
                        format!("log-{id}.txt")
                    } else {
                        format!("{prefix}/log-{id}.txt")
                    };
                    if let Some(target) = Bucket::find(&st, bucket) {
                        log = Some((target, bucket.to_owned(), name, text));
                    }
                }
            }
        }
        (build_json(&st.builds[index], &schedule), log)
    };
    // Written before the answer, so that a client that sees the final
    // status can read the log at once.
    if let Some((target, bucket, object, text)) = log
        && let Err(e) = target.write_text(&bucket, &object, text).await
    {
        tracing::warn!("fake Cloud Build could not write its log gs://{bucket}/{object}: {e}");
    }
    respond(200, &body)
}

async fn get_tag(
    state: AxumState<Shared>,
    Path((project, location, repository, package, tag)): Path<(
        String,
        String,
        String,
        String,
        String,
    )>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = admit(&state, FakeRoute::GetTag, &headers) {
        return r;
    }
    let resource = format!(
        "projects/{project}/locations/{location}/repositories/{repository}/packages/{package}/tags/{tag}"
    );
    if lock(&state).tags.contains(&resource) {
        respond(
            200,
            &json!({
                "name": resource,
                "version": format!(
                    "projects/{project}/locations/{location}/repositories/{repository}/packages/{package}/versions/{}",
                    digest(&resource, "")
                ),
            }),
        )
    } else {
        respond(
            404,
            &google_error(
                404,
                &format!("Requested entity was not found: {resource}"),
                None,
            ),
        )
    }
}
