//! The Storage JSON API's bucket calls, on the same server and buckets as
//! the XML API (as `storage.googleapis.com` serves both): insert, get,
//! patch and delete a bucket (location, labels, lifecycle rules, uniform
//! access), its IAM policy (read, modify, write with an etag;
//! `testPermissions`), and listing and deleting its objects. Answers and
//! errors are the JSON API's: 409 for a name already taken (by you, or by
//! someone else), 409 for deleting a bucket that is not empty, 403 naming
//! the missing `storage.*` permission, 412 for a stale policy etag.

// Handlers answer early with the error response itself; boxing it would
// only add noise.
#![allow(clippy::result_large_err)]

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State as AxumState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use super::state::{BucketMeta, State};
use crate::google::{PolicyError, storage_error};

type Shared = Arc<Mutex<State>>;

impl BucketMeta {
    fn to_json(&self, name: &str) -> Value {
        let multi = matches!(self.location.as_str(), "US" | "EU" | "ASIA");
        let mut v = json!({
            "kind": "storage#bucket",
            "selfLink": format!("https://www.googleapis.com/storage/v1/b/{name}"),
            "id": name,
            "name": name,
            "projectNumber": "123456789012",
            "metageneration": self.metageneration.to_string(),
            "location": self.location,
            "locationType": if multi { "multi-region" } else { "region" },
            "storageClass": "STANDARD",
            "etag": format!("CA{}=", self.metageneration),
            "timeCreated": self.created,
            "updated": now(),
            "iamConfiguration": {
                "bucketPolicyOnly": {"enabled": self.uniform},
                "uniformBucketLevelAccess": {"enabled": self.uniform},
                "publicAccessPrevention": "inherited",
            },
        });
        if !self.labels.is_empty() {
            v["labels"] = json!(self.labels);
        }
        if let Some(l) = &self.lifecycle {
            v["lifecycle"] = l.clone();
        }
        v
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn lock(state: &Shared) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

fn answer(status: u16, body: &Value) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, axum::Json(body.clone())).into_response()
}

fn not_found(bucket: &str) -> Response {
    answer(
        404,
        &storage_error(
            404,
            "notFound",
            &format!("The specified bucket does not exist: {bucket}"),
        ),
    )
}

/// The 403 of a missing permission, or `None` when it is held.
fn denied(state: &State, permission: &str, bucket: &str) -> Option<Response> {
    state.json_denied.contains(permission).then(|| {
        let resource = if permission == "storage.buckets.create" {
            "the Google Cloud project".to_owned()
        } else {
            format!("the Google Cloud Storage bucket {bucket}")
        };
        answer(
            403,
            &storage_error(
                403,
                "forbidden",
                &format!(
                    "{} does not have {permission} access to {resource}. Permission '{permission}' denied on resource (or it may not exist).",
                    state.caller
                ),
            ),
        )
    })
}

pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route("/storage/v1/b", get(list_buckets).post(insert))
        .route(
            "/storage/v1/b/{bucket}",
            get(get_bucket).patch(patch_bucket).delete(delete_bucket),
        )
        .route(
            "/storage/v1/b/{bucket}/iam",
            get(get_policy).put(set_policy),
        )
        .route(
            "/storage/v1/b/{bucket}/iam/testPermissions",
            get(test_permissions),
        )
        .route("/storage/v1/b/{bucket}/o", get(list_objects))
        .route(
            "/storage/v1/b/{bucket}/o/{*object}",
            axum::routing::delete(delete_object),
        )
}

type Params = Query<Vec<(String, String)>>;

fn param<'a>(q: &'a [(String, String)], key: &str) -> Option<&'a str> {
    q.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

fn body_json(body: &Bytes) -> Result<Value, Response> {
    serde_json::from_slice(body).map_err(|e| {
        answer(
            400,
            &storage_error(400, "parseError", &format!("Parse Error: {e}")),
        )
    })
}

fn check_name(name: &str) -> bool {
    (3..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// Apply the writable fields of a bucket body (insert or patch).
fn apply_fields(meta: &mut BucketMeta, body: &Value) -> Result<(), Response> {
    if let Some(labels) = body.get("labels") {
        match labels {
            Value::Object(m) => {
                for (k, v) in m {
                    match v {
                        Value::Null => {
                            meta.labels.remove(k);
                        }
                        Value::String(s) => {
                            meta.labels.insert(k.clone(), s.clone());
                        }
                        _ => {
                            return Err(answer(
                                400,
                                &storage_error(
                                    400,
                                    "invalid",
                                    "Invalid argument: label values must be strings.",
                                ),
                            ));
                        }
                    }
                }
            }
            Value::Null => meta.labels.clear(),
            _ => {
                return Err(answer(
                    400,
                    &storage_error(400, "invalid", "Invalid labels."),
                ));
            }
        }
    }
    if let Some(lifecycle) = body.get("lifecycle") {
        for rule in lifecycle["rule"].as_array().into_iter().flatten() {
            let kind = rule.pointer("/action/type").and_then(Value::as_str);
            if !matches!(
                kind,
                Some("Delete" | "SetStorageClass" | "AbortIncompleteMultipartUpload")
            ) {
                return Err(answer(
                    400,
                    &storage_error(
                        400,
                        "invalid",
                        "Invalid argument: lifecycle rule action type.",
                    ),
                ));
            }
            if rule
                .get("condition")
                .and_then(Value::as_object)
                .is_none_or(|c| c.is_empty())
            {
                return Err(answer(
                    400,
                    &storage_error(
                        400,
                        "invalid",
                        "A lifecycle rule must have at least one condition.",
                    ),
                ));
            }
        }
        meta.lifecycle = (!lifecycle.is_null()).then(|| lifecycle.clone());
    }
    if let Some(u) = body.pointer("/iamConfiguration/uniformBucketLevelAccess/enabled") {
        meta.uniform = u.as_bool().unwrap_or(false);
    }
    Ok(())
}

async fn insert(AxumState(state): AxumState<Shared>, Query(q): Params, body: Bytes) -> Response {
    let body = match body_json(&body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let Some(project) = param(&q, "project").map(str::to_owned) else {
        return answer(
            400,
            &storage_error(400, "required", "Required parameter: project"),
        );
    };
    let name = body["name"].as_str().unwrap_or_default().to_owned();
    let mut s = lock(&state);
    s.json_calls.push(format!("insert {name}"));
    if let Some(r) = denied(&s, "storage.buckets.create", &name) {
        return r;
    }
    if !check_name(&name) {
        return answer(
            400,
            &storage_error(400, "invalid", &format!("Invalid bucket name: '{name}'")),
        );
    }
    if let Some(existing) = s.bucket_meta(&name) {
        let yours = existing.project.as_deref().is_none_or(|p| p == project);
        let message = if yours {
            "Your previous request to create the named bucket succeeded and you already own it."
        } else {
            "The requested bucket name is not available. The bucket namespace is shared by all users of the system. Please select a different name and try again."
        };
        return answer(409, &storage_error(409, "conflict", message));
    }
    let location = body["location"].as_str().unwrap_or("US");
    let mut meta = BucketMeta::new(Some(&project), location);
    if let Err(r) = apply_fields(&mut meta, &body) {
        return r;
    }
    let json = meta.to_json(&name);
    s.insert_bucket(&name, meta);
    s.bucket_inserts.push(name);
    answer(200, &json)
}

async fn list_buckets(AxumState(state): AxumState<Shared>, Query(q): Params) -> Response {
    let project = param(&q, "project").unwrap_or_default().to_owned();
    let s = lock(&state);
    let items: Vec<Value> = s
        .bucket_names()
        .into_iter()
        .filter_map(|n| {
            let m = s.bucket_meta(&n)?;
            (m.project.as_deref().is_none_or(|p| p == project)).then(|| m.to_json(&n))
        })
        .collect();
    answer(200, &json!({"kind": "storage#buckets", "items": items}))
}

async fn get_bucket(AxumState(state): AxumState<Shared>, Path(bucket): Path<String>) -> Response {
    let mut s = lock(&state);
    s.json_calls.push(format!("get {bucket}"));
    if let Some(r) = denied(&s, "storage.buckets.get", &bucket) {
        return r;
    }
    match s.bucket_meta(&bucket) {
        Some(m) => answer(200, &m.to_json(&bucket)),
        None => not_found(&bucket),
    }
}

async fn patch_bucket(
    AxumState(state): AxumState<Shared>,
    Path(bucket): Path<String>,
    body: Bytes,
) -> Response {
    let body = match body_json(&body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let mut s = lock(&state);
    s.json_calls.push(format!("patch {bucket}"));
    if let Some(r) = denied(&s, "storage.buckets.update", &bucket) {
        return r;
    }
    let Some(mut meta) = s.bucket_meta(&bucket).cloned() else {
        return not_found(&bucket);
    };
    if let Err(r) = apply_fields(&mut meta, &body) {
        return r;
    }
    meta.metageneration += 1;
    let json = meta.to_json(&bucket);
    s.insert_bucket(&bucket, meta);
    answer(200, &json)
}

async fn delete_bucket(
    AxumState(state): AxumState<Shared>,
    Path(bucket): Path<String>,
) -> Response {
    let mut s = lock(&state);
    s.json_calls.push(format!("delete {bucket}"));
    if let Some(r) = denied(&s, "storage.buckets.delete", &bucket) {
        return r;
    }
    if s.bucket_meta(&bucket).is_none() {
        return not_found(&bucket);
    }
    if !s.objects(&bucket).is_empty() {
        return answer(
            409,
            &storage_error(
                409,
                "conflict",
                "The bucket you tried to delete is not empty.",
            ),
        );
    }
    s.remove_bucket(&bucket);
    StatusCode::NO_CONTENT.into_response()
}

async fn get_policy(AxumState(state): AxumState<Shared>, Path(bucket): Path<String>) -> Response {
    let s = lock(&state);
    if let Some(r) = denied(&s, "storage.buckets.getIamPolicy", &bucket) {
        return r;
    }
    match s.bucket_meta(&bucket) {
        Some(m) => {
            let mut p = m.policy.to_json();
            p["kind"] = json!("storage#policy");
            p["resourceId"] = json!(format!("projects/_/buckets/{bucket}"));
            answer(200, &p)
        }
        None => not_found(&bucket),
    }
}

async fn set_policy(
    AxumState(state): AxumState<Shared>,
    Path(bucket): Path<String>,
    body: Bytes,
) -> Response {
    let body = match body_json(&body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let mut s = lock(&state);
    s.json_calls.push(format!("setIamPolicy {bucket}"));
    if let Some(r) = denied(&s, "storage.buckets.setIamPolicy", &bucket) {
        return r;
    }
    let Some(mut meta) = s.bucket_meta(&bucket).cloned() else {
        return not_found(&bucket);
    };
    let result = match meta.policy.set(&body) {
        Ok(p) => p,
        Err(PolicyError::Stale) => {
            return answer(
                412,
                &storage_error(
                    412,
                    "conditionNotMet",
                    "At least one of the pre-conditions you specified did not hold.",
                ),
            );
        }
        Err(PolicyError::Invalid(m)) => return answer(400, &storage_error(400, "invalid", &m)),
    };
    s.insert_bucket(&bucket, meta);
    let mut p = result;
    p["kind"] = json!("storage#policy");
    answer(200, &p)
}

async fn test_permissions(
    AxumState(state): AxumState<Shared>,
    Path(bucket): Path<String>,
    Query(q): Params,
) -> Response {
    let s = lock(&state);
    if s.bucket_meta(&bucket).is_none() {
        return not_found(&bucket);
    }
    let held: Vec<&str> = q
        .iter()
        .filter(|(k, _)| k == "permissions")
        .map(|(_, v)| v.as_str())
        .filter(|p| !s.json_denied.contains(*p))
        .collect();
    answer(
        200,
        &json!({"kind": "storage#testIamPermissionsResponse", "permissions": held}),
    )
}

async fn list_objects(
    AxumState(state): AxumState<Shared>,
    Path(bucket): Path<String>,
    Query(q): Params,
) -> Response {
    let s = lock(&state);
    if let Some(r) = denied(&s, "storage.objects.list", &bucket) {
        return r;
    }
    if s.bucket_meta(&bucket).is_none() {
        return not_found(&bucket);
    }
    let start: usize = param(&q, "pageToken")
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    let max: usize = param(&q, "maxResults")
        .and_then(|t| t.parse().ok())
        .unwrap_or(1000)
        .clamp(1, 1000)
        .min(s.page_size);
    let all = s.objects(&bucket);
    let items: Vec<Value> = all
        .iter()
        .skip(start)
        .take(max)
        .map(|(name, size)| json!({"kind": "storage#object", "bucket": bucket, "name": name, "size": size.to_string()}))
        .collect();
    let mut v = json!({"kind": "storage#objects", "items": items});
    if start + max < all.len() {
        v["nextPageToken"] = json!((start + max).to_string());
    }
    answer(200, &v)
}

async fn delete_object(
    AxumState(state): AxumState<Shared>,
    Path((bucket, object)): Path<(String, String)>,
) -> Response {
    let mut s = lock(&state);
    if let Some(r) = denied(&s, "storage.objects.delete", &bucket) {
        return r;
    }
    match s.delete(&bucket, &object) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(f) if f.code == "NoSuchBucket" => not_found(&bucket),
        Err(_) => answer(
            404,
            &storage_error(
                404,
                "notFound",
                &format!("No such object: {bucket}/{object}"),
            ),
        ),
    }
}
