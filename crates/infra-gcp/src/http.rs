//! One REST client for every Google API the adapter calls: the bearer
//! token from the shared [`TokenSource`], retries of what retrying can fix,
//! and Google's error bodies turned into [`InfraError`]s that name the
//! missing permission or API and the way to get it.
//!
//! Retrying is the project's one mechanism: the adapter's
//! [`RetryPolicy`] (how many attempts, how long between them) runs the
//! loop of `kinetic_core::retry`, asking [`decision`] which failures to
//! try again — the rule every Google adapter shares
//! ([`kinetic_gcp_common::retry::decide`]: throttling, server errors,
//! transport failures, `Retry-After` honoured), and an API that `up` has
//! just enabled but Google has not propagated yet.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kinetic_core::retry::{Backoff, Decision, GaveUp, RetryPolicy};
use kinetic_gcp_common::retry::{decide, decide_transport, error_chain, retry_after};
use kinetic_gcp_common::{GoogleError, TokenSource};
use serde_json::Value;

use crate::error::InfraError;

/// How long after `up` enabled APIs a "not enabled" answer is taken for
/// Google still propagating the change, and retried.
const PROPAGATION: Duration = Duration::from_secs(180);

/// The API a call goes to, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Service {
    /// `container.googleapis.com`.
    pub(crate) name: &'static str,
    /// `Kubernetes Engine`.
    pub(crate) title: &'static str,
}

pub(crate) const CONTAINER: Service = Service {
    name: "container.googleapis.com",
    title: "Kubernetes Engine",
};
pub(crate) const IAM: Service = Service {
    name: "iam.googleapis.com",
    title: "IAM",
};
pub(crate) const RESOURCE_MANAGER: Service = Service {
    name: "cloudresourcemanager.googleapis.com",
    title: "Cloud Resource Manager",
};
pub(crate) const SERVICE_USAGE: Service = Service {
    name: "serviceusage.googleapis.com",
    title: "Service Usage",
};
pub(crate) const STORAGE: Service = Service {
    name: "storage.googleapis.com",
    title: "Cloud Storage",
};
pub(crate) const ARTIFACT_REGISTRY: Service = Service {
    name: "artifactregistry.googleapis.com",
    title: "Artifact Registry",
};

/// A final answer: the status and the JSON body (`null` when empty).
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: Value,
    raw: bytes::Bytes,
}

impl Answer {
    /// Google's error in the body.
    pub(crate) fn error(&self) -> GoogleError {
        GoogleError::from_answer(self.status, &self.raw)
    }
}

/// The retries of every API call by default: 6 attempts, waiting 0.5 s
/// doubling up to 8 s (15.5 s of waiting in all).
pub(crate) fn default_retry() -> RetryPolicy {
    RetryPolicy::new(
        6,
        Backoff::new(Duration::from_millis(500), Duration::from_secs(8)),
    )
}

/// How one attempt at a call failed.
#[derive(Debug)]
enum Failure {
    /// An answer that is neither a success nor one the caller accepts.
    Status {
        google: GoogleError,
        retry_after: Option<Duration>,
    },
    /// No answer: the request or its body failed on the way.
    Transport(reqwest::Error),
    /// No token to send.
    Token(InfraError),
}

/// Whether an answer with HTTP `status` (`None`: a transport failure) is
/// worth another try: what every Google adapter retries
/// ([`decide`], honouring `retry_after`), and, while APIs just enabled
/// are `propagating`, a "not enabled" answer.
pub(crate) fn decision(
    status: Option<u16>,
    error: &GoogleError,
    retry_after: Option<Duration>,
    propagating: bool,
) -> Decision {
    match status {
        Some(403) if propagating && error.service_disabled() => Decision::Retry,
        _ => decide(status, retry_after),
    }
}

impl Failure {
    fn decision(&self, propagating: bool) -> Decision {
        match self {
            Self::Status {
                google,
                retry_after,
            } => decision(Some(google.code), google, *retry_after, propagating),
            Self::Transport(e) => decide_transport(e),
            Self::Token(_) => Decision::Stop,
        }
    }

    /// Why it failed, in a few words.
    fn reason(&self, title: &str) -> String {
        match self {
            Self::Status { google, .. } => format!("{title} said {google}"),
            Self::Transport(e) => error_chain(e),
            Self::Token(e) => e.to_string(),
        }
    }
}

/// The REST client.
#[derive(Debug, Clone)]
pub(crate) struct Rest {
    http: reqwest::Client,
    tokens: Arc<dyn TokenSource>,
    project: String,
    retry: RetryPolicy,
    enabled_at: Arc<Mutex<Option<Instant>>>,
    notice: Option<crate::RetryNotice>,
}

impl Rest {
    pub(crate) fn new(
        tokens: Arc<dyn TokenSource>,
        project: &str,
        retry: RetryPolicy,
    ) -> Result<Self, InfraError> {
        let http = reqwest::Client::builder()
            .user_agent(crate::USER_AGENT)
            .timeout(Duration::from_secs(120))
            .build()
            .map_err(|e| InfraError::other(format!("cannot create the HTTP client: {e}")))?;
        Ok(Self {
            http,
            tokens,
            project: project.to_owned(),
            retry,
            enabled_at: Arc::default(),
            notice: None,
        })
    }

    /// The same client, telling `notice` of each call tried again.
    pub(crate) fn with_notice(mut self, notice: Option<crate::RetryNotice>) -> Self {
        self.notice = notice;
        self
    }

    /// The HTTP client (for fetching published manifests).
    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// A bearer token.
    pub(crate) async fn token(&self) -> Result<String, InfraError> {
        self.tokens
            .token()
            .await
            .map_err(|e| InfraError::PermissionDenied {
                message: e.to_string(),
            })
    }

    /// Note that APIs were just enabled (their first answers may still say
    /// they are not).
    pub(crate) fn enabled_apis(&self) {
        *self.enabled_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    }

    fn propagating(&self) -> bool {
        self.enabled_at
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|t| t.elapsed() < PROPAGATION)
    }

    /// One attempt: the answer for 2xx and the statuses in `accept`, or
    /// how it failed.
    async fn attempt(
        &self,
        method: &reqwest::Method,
        url: &str,
        body: Option<&Value>,
        accept: &[u16],
    ) -> Result<Answer, Failure> {
        let token = self.token().await.map_err(Failure::Token)?;
        let mut request = self
            .http
            .request(method.clone(), url)
            .bearer_auth(token)
            .header("x-goog-user-project", &self.project);
        if let Some(b) = body {
            request = request.json(b);
        }
        let response = request.send().await.map_err(Failure::Transport)?;
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let raw = response.bytes().await.map_err(Failure::Transport)?;
        if (200..300).contains(&status) || accept.contains(&status) {
            let body = serde_json::from_slice(&raw).unwrap_or(Value::Null);
            return Ok(Answer { status, body, raw });
        }
        Err(Failure::Status {
            google: GoogleError::from_answer(status, &raw),
            retry_after,
        })
    }

    /// Send a request under the client's [`RetryPolicy`], retrying what
    /// [`decision`] says to. Returns the answer for 2xx and for the
    /// statuses in `accept` (the caller decides what a 404 or 409 means);
    /// every other status becomes an error naming `what` was being done.
    pub(crate) async fn send(
        &self,
        service: Service,
        what: &str,
        method: reqwest::Method,
        url: &str,
        body: Option<&Value>,
        accept: &[u16],
    ) -> Result<Answer, InfraError> {
        let started = Instant::now();
        let mut failed = 0u32;
        kinetic_engine::retry::retry_if(
            &self.retry,
            |failure: &Failure| {
                failed += 1;
                let decision = failure.decision(self.propagating());
                if decision != Decision::Stop
                    && let Some(notice) = &self.notice
                    && self.retry.next_delay(failed, started.elapsed()).is_some()
                {
                    notice.say(&format!(
                        "{what}: {}; trying again (attempt {} of {})",
                        failure.reason(service.title),
                        failed + 1,
                        self.retry.max_attempts
                    ));
                }
                decision
            },
            || self.attempt(&method, url, body, accept),
        )
        .await
        .map_err(
            |GaveUp {
                 error, attempts, ..
             }| match error {
                Failure::Status { google, .. } => {
                    http_error(service, &self.project, what, &google, attempts)
                }
                Failure::Transport(e)
                    if kinetic_gcp_common::retry::connection_refused(&e) =>
                {
                    InfraError::Unavailable {
                        message: format!(
                            "{what} failed: cannot reach {url}: {}; nothing listens there, so it was not tried again (is the endpoint right?)",
                            error_chain(&e)
                        ),
                    }
                }
                Failure::Transport(e) => InfraError::Unavailable {
                    message: format!(
                        "{what} failed after {attempts} attempt(s): cannot reach {url}: {}",
                        error_chain(&e)
                    ),
                },
                Failure::Token(e) => e,
            },
        )
    }
}

/// The error for a final HTTP answer, `google` (its code is the HTTP
/// status), after `attempts` attempts.
pub(crate) fn http_error(
    service: Service,
    project: &str,
    what: &str,
    google: &GoogleError,
    attempts: u32,
) -> InfraError {
    let title = service.title;
    match google.code {
        401 => InfraError::PermissionDenied {
            message: format!(
                "{what} failed: {title} refused the credentials: refresh them (gcloud auth application-default login) or set GOOGLE_APPLICATION_CREDENTIALS to a valid key; {title} said {google}"
            ),
        },
        403 if google.service_disabled() => {
            let api = google.metadata("service").unwrap_or(service.name);
            InfraError::PermissionDenied {
                message: format!(
                    "{what} failed: the {api} API is not enabled in project {project}: run `kinetic up` (it enables it), or gcloud services enable {api} --project {project}; {title} said {google}"
                ),
            }
        }
        403 => {
            let permission = google
                .metadata("permission")
                .map(|p| format!("your account lacks the permission {p}"))
                .unwrap_or_else(|| "your account lacks a permission".to_owned());
            InfraError::PermissionDenied {
                message: format!(
                    "{what} failed: {permission} (roles/owner, or roles/editor with roles/resourcemanager.projectIamAdmin, grant what `kinetic up` needs); {title} said {google}"
                ),
            }
        }
        400 | 404 | 409 | 412 => InfraError::InvalidInput {
            message: format!("{what} failed: {title} refused it: {google}"),
        },
        429 | 500..=599 => InfraError::Unavailable {
            message: format!("{what} failed after {attempts} attempt(s): {title} said {google}"),
        },
        _ => InfraError::Other {
            message: format!("{what} failed: {title} said {google}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn google(body: &str) -> GoogleError {
        GoogleError::parse(body.as_bytes())
    }

    #[test]
    fn retries_what_retrying_can_fix() {
        let none = GoogleError::default();
        for s in [429, 500, 502, 503] {
            assert_eq!(
                decision(Some(s), &none, None, false),
                Decision::Retry,
                "{s}"
            );
        }
        assert_eq!(decision(None, &none, None, false), Decision::Retry);
        for s in [400, 401, 403, 404, 409, 412] {
            assert_eq!(decision(Some(s), &none, None, false), Decision::Stop, "{s}");
        }
        let disabled = google(
            r#"{"error":{"code":403,"status":"PERMISSION_DENIED","message":"x","details":[{"reason":"SERVICE_DISABLED"}]}}"#,
        );
        assert_eq!(decision(Some(403), &disabled, None, true), Decision::Retry);
        assert_eq!(decision(Some(403), &disabled, None, false), Decision::Stop);
        let b = default_retry();
        assert_eq!(
            b.next_delay(1, Duration::ZERO),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            b.next_delay(5, Duration::ZERO),
            Some(Duration::from_secs(8))
        );
        assert_eq!(b.next_delay(6, Duration::ZERO), None);
    }

    #[test]
    fn a_server_asking_to_wait_is_waited_for() {
        let none = GoogleError::default();
        let after = Some(Duration::from_secs(3));
        for s in [429, 503] {
            assert_eq!(
                decision(Some(s), &none, after, false),
                Decision::RetryAfter(Duration::from_secs(3)),
                "{s}"
            );
        }
        assert_eq!(decision(Some(404), &none, after, false), Decision::Stop);
    }

    #[test]
    fn errors_name_the_permission_or_the_api() {
        let e = http_error(
            IAM,
            "p",
            "creating service account kn-c-nodes",
            &google(
                r#"{"error":{"code":403,"status":"PERMISSION_DENIED","message":"Permission 'iam.serviceAccounts.create' denied","details":[{"reason":"IAM_PERMISSION_DENIED","metadata":{"permission":"iam.serviceAccounts.create"}}]}}"#,
            ),
            1,
        );
        assert!(matches!(e, InfraError::PermissionDenied { .. }));
        assert!(
            e.to_string()
                .contains("lacks the permission iam.serviceAccounts.create"),
            "{e}"
        );
        let e = http_error(
            CONTAINER,
            "p",
            "reading cluster c",
            &google(
                r#"{"error":{"code":403,"status":"PERMISSION_DENIED","message":"Kubernetes Engine API has not been used","details":[{"reason":"SERVICE_DISABLED","metadata":{"service":"container.googleapis.com"}}]}}"#,
            ),
            1,
        );
        assert!(
            e.to_string()
                .contains("gcloud services enable container.googleapis.com --project p"),
            "{e}"
        );
        let e = http_error(STORAGE, "p", "x", &GoogleError::from_answer(503, b""), 6);
        assert!(
            e.is_retryable() && e.to_string().contains("after 6 attempt(s)"),
            "{e}"
        );
    }
}
