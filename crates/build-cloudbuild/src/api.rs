//! A small client of the two REST APIs the builder needs: Artifact
//! Registry `GetTag` and Cloud Build `CreateBuild`/`GetBuild`, over the
//! `reqwest` that `object_store` already brings. Every call is retried on
//! 429, 5xx and transport failures under one `kinetic_core::retry` policy
//! ([`crate::retry`]); 401/403 become [`BuildError::PermissionDenied`]
//! naming the missing permission or API. Each error keeps the answer
//! ([`GoogleError`], parsed by `kinetic-gcp-common` as for every Google
//! adapter) or the transport error as its source.

use std::sync::Arc;
use std::time::Duration;

use kinetic_core::ports::BuildError;
use kinetic_gcp_common::GoogleError;
use kinetic_gcp_common::retry::retry_after;
use serde::Deserialize;
use serde_json::Value;

use crate::retry::{Decision, RetryPolicy, decide};
use crate::token::TokenSource;

/// Production endpoint of Cloud Build.
pub const CLOUDBUILD_ENDPOINT: &str = "https://cloudbuild.googleapis.com";
/// Production endpoint of Artifact Registry.
pub const ARTIFACTREGISTRY_ENDPOINT: &str = "https://artifactregistry.googleapis.com";

/// A Cloud Build build, as much of it as the builder reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Build {
    /// The build id.
    #[serde(default)]
    pub id: String,
    /// `QUEUED`, `WORKING`, `SUCCESS`, `FAILURE`, …
    #[serde(default)]
    pub status: String,
    /// Cloud Build's explanation of the status.
    #[serde(default)]
    pub status_detail: String,
    /// The console page of the build.
    #[serde(default)]
    pub log_url: String,
    /// The images pushed, with their digests (on success).
    #[serde(default)]
    pub results: BuildResults,
}

/// What a build produced.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct BuildResults {
    /// Images pushed.
    #[serde(default)]
    pub images: Vec<BuiltImage>,
}

/// One pushed image.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct BuiltImage {
    /// The image name as given.
    #[serde(default)]
    pub name: String,
    /// `sha256:…`.
    #[serde(default)]
    pub digest: String,
}

impl Build {
    /// True once the build has ended, well or badly.
    pub fn is_done(&self) -> bool {
        !matches!(
            self.status.as_str(),
            "" | "STATUS_UNKNOWN" | "PENDING" | "QUEUED" | "WORKING"
        )
    }

    /// True when it ended well.
    pub fn succeeded(&self) -> bool {
        self.status == "SUCCESS"
    }
}

/// The call being made, for error messages that name the missing
/// permission or API.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Call<'a> {
    /// Artifact Registry `GetTag`.
    GetTag { project: &'a str, resource: &'a str },
    /// Cloud Build `CreateBuild`.
    CreateBuild {
        project: &'a str,
        service_account: &'a str,
    },
    /// Cloud Build `GetBuild`.
    GetBuild { project: &'a str, id: &'a str },
}

impl Call<'_> {
    fn api(&self) -> (&'static str, &'static str) {
        match self {
            Self::GetTag { .. } => ("Artifact Registry", "artifactregistry.googleapis.com"),
            _ => ("Cloud Build", "cloudbuild.googleapis.com"),
        }
    }

    fn project(&self) -> &str {
        match self {
            Self::GetTag { project, .. }
            | Self::CreateBuild { project, .. }
            | Self::GetBuild { project, .. } => project,
        }
    }

    fn what(&self) -> String {
        match self {
            Self::GetTag { resource, .. } => format!("checking the image tag {resource}"),
            Self::CreateBuild { project, .. } => format!("creating a build in project {project}"),
            Self::GetBuild { id, .. } => format!("reading build {id}"),
        }
    }

    fn permission_hint(&self) -> String {
        match self {
            Self::GetTag { .. } => "the caller needs artifactregistry.tags.get on the repository (role roles/artifactregistry.reader)".to_owned(),
            Self::CreateBuild {
                service_account, ..
            } => format!(
                "the caller needs cloudbuild.builds.create in the project (role roles/cloudbuild.builds.editor) and iam.serviceAccounts.actAs on the build service account {service_account} (role roles/iam.serviceAccountUser)"
            ),
            Self::GetBuild { .. } => "the caller needs cloudbuild.builds.get in the project (role roles/cloudbuild.builds.viewer)".to_owned(),
        }
    }
}

/// The port error for a final HTTP error answer (not retried, or out of
/// retries after `attempts` attempts), with the answer as its source.
pub(crate) fn http_error(call: &Call<'_>, status: u16, body: &[u8], attempts: u32) -> BuildError {
    let google = GoogleError::from_answer(status, body);
    let (api_name, service) = call.api();
    let project = call.project();
    let said = google.to_string();
    let kind = match status {
        401 | 403 if google.service_disabled() => BuildError::permission_denied(format!(
            "{} failed: the {api_name} API is not enabled in project {project}: enable the {api_name} API (gcloud services enable {service} --project {project}); {api_name} said {said}",
            call.what()
        )),
        401 => BuildError::permission_denied(format!(
            "{} failed: {api_name} refused the credentials: refresh them (gcloud auth application-default login) or point GOOGLE_APPLICATION_CREDENTIALS at a valid key; {api_name} said {said}",
            call.what()
        )),
        403 => BuildError::permission_denied(format!(
            "{} failed: {}; {api_name} said {said}",
            call.what(),
            call.permission_hint()
        )),
        400 | 409 | 412 | 422 => BuildError::invalid_input(format!(
            "{} failed: {api_name} rejected the request: {said}",
            call.what()
        )),
        404 => BuildError::invalid_input(format!(
            "{} failed: not found in {api_name} (check the project, location and repository): {said}",
            call.what()
        )),
        s if decide(Some(s), None) != Decision::Stop => BuildError::Unavailable {
            message: format!(
                "{} failed after {attempts} attempt(s): {api_name} said {said}",
                call.what()
            ),
            // Only the end of the client's retries gets here.
            retried: true,
            source: None,
        },
        _ => BuildError::other(format!("{} failed: {api_name} said {said}", call.what())),
    };
    kind.with_source(google)
}

/// A final HTTP answer: status and body.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: bytes::Bytes,
}

/// How one attempt at a call failed.
#[derive(Debug)]
enum Failure {
    /// An answer that is not a success (nor a 404, which callers read).
    Status {
        status: u16,
        body: bytes::Bytes,
        retry_after: Option<Duration>,
    },
    /// No answer: the request failed on the way.
    Transport(reqwest::Error),
    /// No token to send.
    Token(BuildError),
}

impl Failure {
    /// The policy's *which failures*: [`decide`] on the status.
    fn decision(&self) -> Decision {
        match self {
            Self::Status {
                status,
                retry_after,
                ..
            } => decide(Some(*status), *retry_after),
            Self::Transport(_) => decide(None, None),
            Self::Token(_) => Decision::Stop,
        }
    }
}

/// The REST client.
#[derive(Debug, Clone)]
pub(crate) struct Api {
    http: reqwest::Client,
    tokens: Arc<dyn TokenSource>,
    cloudbuild: String,
    registry: String,
    retry: RetryPolicy,
}

impl Api {
    pub(crate) fn new(
        tokens: Arc<dyn TokenSource>,
        cloudbuild: &str,
        registry: &str,
        retry: RetryPolicy,
        request_timeout: Duration,
    ) -> Result<Self, BuildError> {
        let http = reqwest::Client::builder()
            .timeout(request_timeout)
            .build()
            .map_err(|e| {
                BuildError::other(format!("cannot create the HTTP client: {e}")).with_source(e)
            })?;
        Ok(Self {
            http,
            tokens,
            cloudbuild: cloudbuild.trim_end_matches('/').to_owned(),
            registry: registry.trim_end_matches('/').to_owned(),
            retry,
        })
    }

    /// One attempt: the answer for 2xx and 404 (callers decide what a 404
    /// means), or how it failed.
    async fn attempt(
        &self,
        call: &Call<'_>,
        method: &reqwest::Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<Answer, Failure> {
        let token = self.tokens.token().await.map_err(|e| {
            Failure::Token(
                BuildError::permission_denied(format!("{} failed: {e}", call.what()))
                    .with_source(e),
            )
        })?;
        let mut request = self
            .http
            .request(method.clone(), url)
            .bearer_auth(token)
            .header("x-goog-user-project", call.project());
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(Failure::Transport)?;
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let body = response.bytes().await.unwrap_or_default();
        if (200..300).contains(&status) || status == 404 {
            return Ok(Answer { status, body });
        }
        Err(Failure::Status {
            status,
            body,
            retry_after,
        })
    }

    /// Send one request under the client's [`RetryPolicy`], retrying what
    /// [`decide`] says to retry. Returns the final answer for 2xx and 404;
    /// every other final status is mapped with [`http_error`], and a
    /// failure the policy gave up on is reported as already retried.
    async fn send(
        &self,
        call: &Call<'_>,
        method: reqwest::Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<Answer, BuildError> {
        let outcome = kinetic_engine::retry::retry_if(&self.retry, Failure::decision, || {
            self.attempt(call, &method, url, body)
        })
        .await;
        let gave_up = match outcome {
            Ok(answer) => return Ok(answer),
            Err(gave_up) => gave_up,
        };
        let attempts = gave_up.attempts;
        Err(match gave_up.error {
            Failure::Status { status, body, .. } => http_error(call, status, &body, attempts),
            Failure::Transport(e) => BuildError::Unavailable {
                message: format!(
                    "{} failed after {attempts} attempt(s): cannot reach {url}: {e}",
                    call.what()
                ),
                retried: true,
                source: Some(Box::new(e)),
            },
            Failure::Token(e) => e,
        })
    }

    fn decode<T: for<'de> Deserialize<'de>>(
        call: &Call<'_>,
        answer: &Answer,
    ) -> Result<T, BuildError> {
        serde_json::from_slice(&answer.body).map_err(|e| {
            BuildError::other(format!(
                "{} failed: unexpected answer from {}: {e}",
                call.what(),
                call.api().0
            ))
            .with_source(e)
        })
    }

    /// Artifact Registry `GetTag`: whether the tag exists.
    pub(crate) async fn tag_exists(
        &self,
        project: &str,
        resource: &str,
    ) -> Result<bool, BuildError> {
        let call = Call::GetTag { project, resource };
        let url = format!("{}/v1/{resource}", self.registry);
        let answer = self.send(&call, reqwest::Method::GET, &url, None).await?;
        Ok(answer.status != 404)
    }

    /// Cloud Build `CreateBuild`: the build as the returned operation's
    /// metadata describes it.
    pub(crate) async fn create_build(
        &self,
        project: &str,
        location: &str,
        service_account: &str,
        body: &Value,
    ) -> Result<Build, BuildError> {
        let call = Call::CreateBuild {
            project,
            service_account,
        };
        let url = format!(
            "{}/v1/projects/{project}/locations/{location}/builds",
            self.cloudbuild
        );
        let answer = self
            .send(&call, reqwest::Method::POST, &url, Some(body))
            .await?;
        if answer.status == 404 {
            return Err(http_error(&call, 404, &answer.body, 1));
        }
        #[derive(Deserialize)]
        struct Metadata {
            #[serde(default)]
            build: Build,
        }
        #[derive(Deserialize)]
        struct Operation {
            metadata: Metadata,
        }
        let op: Operation = Self::decode(&call, &answer)?;
        if op.metadata.build.id.is_empty() {
            return Err(BuildError::other(format!(
                "{} failed: the operation names no build id",
                call.what()
            )));
        }
        Ok(op.metadata.build)
    }

    /// Cloud Build `GetBuild`.
    pub(crate) async fn get_build(
        &self,
        project: &str,
        location: &str,
        id: &str,
    ) -> Result<Build, BuildError> {
        let call = Call::GetBuild { project, id };
        let url = format!(
            "{}/v1/projects/{project}/locations/{location}/builds/{id}",
            self.cloudbuild
        );
        let answer = self.send(&call, reqwest::Method::GET, &url, None).await?;
        if answer.status == 404 {
            return Err(http_error(&call, 404, &answer.body, 1));
        }
        Self::decode(&call, &answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAG: Call<'static> = Call::GetTag {
        project: "p",
        resource: "projects/p/locations/us/repositories/kn-c/packages/base/tags/cpu-1",
    };
    const CREATE: Call<'static> = Call::CreateBuild {
        project: "p",
        service_account: "kn-c-builds@p.iam.gserviceaccount.com",
    };

    fn body(status: &str, message: &str, reason: Option<&str>) -> Vec<u8> {
        let details = reason
            .map(|r| serde_json::json!([{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": r }]))
            .unwrap_or(serde_json::json!([]));
        serde_json::to_vec(&serde_json::json!({
            "error": { "code": 403, "message": message, "status": status, "details": details }
        }))
        .unwrap()
    }

    #[test]
    fn forbidden_names_the_missing_permission() {
        let e = http_error(&TAG, 403, &body("PERMISSION_DENIED", "denied", None), 1);
        assert!(matches!(e, BuildError::PermissionDenied { .. }));
        let text = e.to_string();
        assert!(text.contains("artifactregistry.tags.get"), "{text}");
        assert!(text.contains("denied"), "{text}");

        let text = http_error(&CREATE, 403, &body("PERMISSION_DENIED", "no", None), 1).to_string();
        assert!(text.contains("cloudbuild.builds.create"), "{text}");
        assert!(text.contains("iam.serviceAccounts.actAs"), "{text}");
        assert!(
            text.contains("kn-c-builds@p.iam.gserviceaccount.com"),
            "{text}"
        );
    }

    #[test]
    fn a_disabled_api_says_enable_it() {
        let b = body(
            "PERMISSION_DENIED",
            "Cloud Build API has not been used in project p before or it is disabled.",
            Some("SERVICE_DISABLED"),
        );
        let text = http_error(&CREATE, 403, &b, 1).to_string();
        assert!(text.contains("enable the Cloud Build API"), "{text}");
        assert!(
            text.contains("gcloud services enable cloudbuild.googleapis.com --project p"),
            "{text}"
        );
        let text = http_error(&TAG, 403, &b, 1).to_string();
        assert!(text.contains("enable the Artifact Registry API"), "{text}");
    }

    #[test]
    fn unauthenticated_says_refresh_the_credentials() {
        let e = http_error(
            &TAG,
            401,
            b"{\"error\":{\"message\":\"bad token\",\"status\":\"UNAUTHENTICATED\"}}",
            1,
        );
        assert!(matches!(e, BuildError::PermissionDenied { .. }));
        assert!(
            e.to_string()
                .contains("gcloud auth application-default login"),
            "{e}"
        );
        assert!(e.to_string().contains("bad token"), "{e}");
        let google = std::error::Error::source(&e)
            .and_then(|s| s.downcast_ref::<GoogleError>())
            .expect("the answer is the source");
        assert_eq!(google.code, 401);
        assert_eq!(google.status, "UNAUTHENTICATED");
    }

    #[test]
    fn overload_is_retryable_and_counts_attempts() {
        let e = http_error(&CREATE, 503, b"busy", 6);
        assert!(e.is_retryable() && e.is_retried());
        assert!(e.to_string().contains("after 6 attempt(s)"), "{e}");
        assert!(e.to_string().contains("busy"), "{e}");
        let e = http_error(&CREATE, 400, &body("INVALID_ARGUMENT", "bad tag", None), 1);
        assert!(matches!(e, BuildError::InvalidInput { .. }), "{e}");
    }

    #[test]
    fn build_states() {
        let b = |s: &str| Build {
            status: s.into(),
            ..Build::default()
        };
        for s in ["QUEUED", "WORKING", "PENDING", "STATUS_UNKNOWN", ""] {
            assert!(!b(s).is_done(), "{s}");
        }
        for s in [
            "SUCCESS",
            "FAILURE",
            "INTERNAL_ERROR",
            "TIMEOUT",
            "CANCELLED",
            "EXPIRED",
        ] {
            assert!(b(s).is_done(), "{s}");
        }
        assert!(b("SUCCESS").succeeded());
        assert!(!b("FAILURE").succeeded());
    }
}
