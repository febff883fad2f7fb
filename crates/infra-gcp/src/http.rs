//! One REST client for every Google API the adapter calls: the bearer
//! token from the shared [`TokenSource`], retries of what retrying can fix,
//! and Google's error bodies turned into [`InfraError`]s that name the
//! missing permission or API and the way to get it.
//!
//! Retrying is a decision ([`retry_after`]) apart from the loop in
//! [`Rest::send`], so it can move to a shared retry policy without
//! touching the calls.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
        GoogleError::parse(&self.raw)
    }
}

/// Attempts, and the wait before each retry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    pub(crate) attempts: u32,
    pub(crate) initial: Duration,
    pub(crate) max: Duration,
}

impl Default for Backoff {
    /// 6 attempts, 0.5 s doubling up to 8 s.
    fn default() -> Self {
        Self {
            attempts: 6,
            initial: Duration::from_millis(500),
            max: Duration::from_secs(8),
        }
    }
}

impl Backoff {
    /// The wait after failed attempt `n` (1-based), or `None` when none is left.
    pub(crate) fn wait(&self, n: u32) -> Option<Duration> {
        (n < self.attempts).then(|| {
            self.initial
                .saturating_mul(1 << (n - 1).min(16))
                .min(self.max)
        })
    }
}

/// Whether an answer is worth another try: throttling, server errors,
/// transport failures (`None`), and an API we just enabled that Google has
/// not propagated yet.
pub(crate) fn retry_after(status: Option<u16>, error: &GoogleError, propagating: bool) -> bool {
    match status {
        None | Some(429 | 500..=599) => true,
        Some(403) => propagating && error.service_disabled(),
        _ => false,
    }
}

/// The REST client.
#[derive(Debug, Clone)]
pub(crate) struct Rest {
    http: reqwest::Client,
    tokens: Arc<dyn TokenSource>,
    project: String,
    backoff: Backoff,
    enabled_at: Arc<Mutex<Option<Instant>>>,
}

impl Rest {
    pub(crate) fn new(
        tokens: Arc<dyn TokenSource>,
        project: &str,
        backoff: Backoff,
    ) -> Result<Self, InfraError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .map_err(|e| InfraError::other(format!("cannot create the HTTP client: {e}")))?;
        Ok(Self {
            http,
            tokens,
            project: project.to_owned(),
            backoff,
            enabled_at: Arc::default(),
        })
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

    /// Send a request, retrying what [`retry_after`] says to. Returns the
    /// answer for 2xx and for the statuses in `accept` (the caller decides
    /// what a 404 or 409 means); every other status becomes an error
    /// naming `what` was being done.
    pub(crate) async fn send(
        &self,
        service: Service,
        what: &str,
        method: reqwest::Method,
        url: &str,
        body: Option<&Value>,
        accept: &[u16],
    ) -> Result<Answer, InfraError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let token = self.token().await?;
            let mut request = self
                .http
                .request(method.clone(), url)
                .bearer_auth(token)
                .header("x-goog-user-project", &self.project);
            if let Some(b) = body {
                request = request.json(b);
            }
            let (status, raw) = match request.send().await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    (Some(status), response.bytes().await.unwrap_or_default())
                }
                Err(e) => {
                    tracing::debug!(attempt, "{what}: {e}");
                    (None, bytes::Bytes::from(e.to_string()))
                }
            };
            if let Some(s) = status
                && ((200..300).contains(&s) || accept.contains(&s))
            {
                let body = serde_json::from_slice(&raw).unwrap_or(Value::Null);
                return Ok(Answer {
                    status: s,
                    body,
                    raw,
                });
            }
            let google = GoogleError::parse(&raw);
            if retry_after(status, &google, self.propagating())
                && let Some(wait) = self.backoff.wait(attempt)
            {
                tracing::debug!(attempt, ?wait, "retrying {what}");
                tokio::time::sleep(wait).await;
                continue;
            }
            return Err(match status {
                None => InfraError::Unavailable {
                    message: format!(
                        "{what} failed after {attempt} attempt(s): cannot reach {url}: {}",
                        String::from_utf8_lossy(&raw)
                    ),
                },
                Some(s) => http_error(service, &self.project, what, s, &google, attempt),
            });
        }
    }
}

/// The error for a final HTTP answer.
pub(crate) fn http_error(
    service: Service,
    project: &str,
    what: &str,
    status: u16,
    google: &GoogleError,
    attempts: u32,
) -> InfraError {
    let title = service.title;
    let said = google.said(status);
    match status {
        401 => InfraError::PermissionDenied {
            message: format!(
                "{what} failed: {title} refused the credentials: refresh them (gcloud auth application-default login) or set GOOGLE_APPLICATION_CREDENTIALS to a valid key; {title} said {said}"
            ),
        },
        403 if google.service_disabled() => {
            let api = google.metadata("service").unwrap_or(service.name);
            InfraError::PermissionDenied {
                message: format!(
                    "{what} failed: the {api} API is not enabled in project {project}: run `kinetic up` (it enables it), or gcloud services enable {api} --project {project}; {title} said {said}"
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
                    "{what} failed: {permission} (roles/owner, or roles/editor with roles/resourcemanager.projectIamAdmin, grant what `kinetic up` needs); {title} said {said}"
                ),
            }
        }
        400 | 404 | 409 | 412 => InfraError::InvalidInput {
            message: format!("{what} failed: {title} refused it: {said}"),
        },
        429 | 500..=599 => InfraError::Unavailable {
            message: format!("{what} failed after {attempts} attempt(s): {title} said {said}"),
        },
        _ => InfraError::Other {
            message: format!("{what} failed: {title} said {said}"),
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
            assert!(retry_after(Some(s), &none, false), "{s}");
        }
        assert!(retry_after(None, &none, false));
        for s in [400, 401, 403, 404, 409, 412] {
            assert!(!retry_after(Some(s), &none, false), "{s}");
        }
        let disabled = google(
            r#"{"error":{"code":403,"status":"PERMISSION_DENIED","message":"x","details":[{"reason":"SERVICE_DISABLED"}]}}"#,
        );
        assert!(retry_after(Some(403), &disabled, true));
        assert!(!retry_after(Some(403), &disabled, false));
        let b = Backoff::default();
        assert_eq!(b.wait(1), Some(Duration::from_millis(500)));
        assert_eq!(b.wait(5), Some(Duration::from_secs(8)));
        assert_eq!(b.wait(6), None);
    }

    #[test]
    fn errors_name_the_permission_or_the_api() {
        let e = http_error(
            IAM,
            "p",
            "creating service account kn-c-nodes",
            403,
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
            403,
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
        let e = http_error(STORAGE, "p", "x", 503, &GoogleError::default(), 6);
        assert!(
            e.is_retryable() && e.to_string().contains("after 6 attempt(s)"),
            "{e}"
        );
    }
}
