//! How a [`GcsStore`](crate::GcsStore) reaches Google Cloud Storage:
//! endpoint, credentials, retries, timeouts and upload sizes.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Environment variable naming a GCS endpoint to use instead of Google's,
/// without authentication (tests, emulators). The in-pod runner reads the
/// same variable, so one setting points both at a fake server. (The store
/// itself never reads it: the caller resolves it with the other settings,
/// `kinetic_core::settings`, and passes it to [`GcsOptions::with_endpoint`].)
pub const GCS_ENDPOINT_VAR: &str = kinetic_core::settings::vars::GCS_ENDPOINT;

/// Smallest part GCS accepts in an XML API multipart upload (every part but
/// the last).
pub const MIN_PART_SIZE: usize = 5 * 1024 * 1024;

/// Where the credentials for GCS come from.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum GcsCredentials {
    /// Application Default Credentials, as Google's client libraries find
    /// them: the file [`GcsOptions::application_credentials`] names (what
    /// `GOOGLE_APPLICATION_CREDENTIALS` says), then gcloud's
    /// `~/.config/gcloud/application_default_credentials.json`, then the
    /// metadata server (Workload Identity on GKE). The default.
    #[default]
    ApplicationDefault,
    /// A service-account key file.
    ServiceAccountKeyFile(PathBuf),
    /// A service-account key, as its JSON text. Never printed.
    ServiceAccountKey(String),
    /// No credentials at all: requests carry no token (emulators, fakes).
    Anonymous,
}

impl fmt::Debug for GcsCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ApplicationDefault => f.write_str("ApplicationDefault"),
            Self::ServiceAccountKeyFile(p) => {
                f.debug_tuple("ServiceAccountKeyFile").field(p).finish()
            }
            Self::ServiceAccountKey(_) => f.write_str("ServiceAccountKey(<redacted>)"),
            Self::Anonymous => f.write_str("Anonymous"),
        }
    }
}

/// Retries of failed GCS requests, done once, by `object_store`'s client
/// (exponential backoff with jitter on 5xx, 429, 408, connection errors
/// and timeouts of idempotent requests). Nothing above retries again: a
/// failure left after these retries is reported with
/// [`StoreError::is_retried`](kinetic_core::ports::StoreError::is_retried)
/// true, which no retry policy of the engine retries.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetrySettings {
    /// Retries after the first attempt (0 disables retrying).
    pub max_retries: usize,
    /// No retry starts later than this after the first attempt.
    pub retry_timeout: Duration,
    /// The first backoff.
    pub initial_backoff: Duration,
    /// The longest backoff.
    pub max_backoff: Duration,
}

impl Default for RetrySettings {
    /// 10 retries within 120 s (the deadline of Google's Python client,
    /// which Kinetic used), backoff from 100 ms doubling up to 15 s.
    fn default() -> Self {
        Self {
            max_retries: 10,
            retry_timeout: Duration::from_secs(120),
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(15),
        }
    }
}

impl RetrySettings {
    /// No retries: every failure surfaces at once (tests).
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            retry_timeout: Duration::ZERO,
            ..Self::default()
        }
    }

    /// Retry at most `n` times.
    pub fn max_retries(mut self, n: usize) -> Self {
        self.max_retries = n;
        self
    }

    /// Start no retry later than `timeout` after the first attempt.
    pub fn retry_timeout(mut self, timeout: Duration) -> Self {
        self.retry_timeout = timeout;
        self
    }

    /// Back off from `initial` up to `max`.
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max.max(initial);
        self
    }

    pub(crate) fn to_object_store(&self) -> object_store::RetryConfig {
        object_store::RetryConfig {
            backoff: object_store::BackoffConfig {
                init_backoff: self.initial_backoff,
                max_backoff: self.max_backoff,
                base: 2.0,
            },
            max_retries: self.max_retries,
            retry_timeout: self.retry_timeout,
        }
    }
}

/// Settings of a `gs://` store. `Default` is Google's endpoint with
/// Application Default Credentials; [`GcsOptions::emulator`] points at a
/// fake server with no auth and no retries.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GcsOptions {
    /// Base URL of the XML API (default `https://storage.googleapis.com`).
    /// Plain `http://` is accepted (emulators and fakes).
    pub endpoint: Option<String>,
    /// Where credentials come from. With an endpoint set,
    /// [`GcsCredentials::ApplicationDefault`] means
    /// [`GcsCredentials::Anonymous`]: an emulator never gets a real token.
    pub credentials: GcsCredentials,
    /// The file Application Default Credentials start from (the value of
    /// `GOOGLE_APPLICATION_CREDENTIALS`, resolved by the caller); `None`
    /// starts from gcloud's file.
    pub application_credentials: Option<PathBuf>,
    /// Request retries.
    pub retry: RetrySettings,
    /// Longest time one request may take, body included (default 300 s, so a
    /// part or a large download on a slow link is not cut off).
    pub request_timeout: Duration,
    /// Longest time to connect (default 5 s).
    pub connect_timeout: Duration,
    /// Files larger than this are uploaded in parts of this size (default
    /// 10 MiB; at least [`MIN_PART_SIZE`], as GCS requires).
    pub part_size: usize,
    /// Parts of one upload in flight at once (default 4). Memory held by an
    /// upload is about `part_size * (part_concurrency + 1)`.
    pub part_concurrency: usize,
}

impl Default for GcsOptions {
    fn default() -> Self {
        Self {
            endpoint: None,
            credentials: GcsCredentials::ApplicationDefault,
            application_credentials: None,
            retry: RetrySettings::default(),
            request_timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(5),
            part_size: 10 * 1024 * 1024,
            part_concurrency: 4,
        }
    }
}

impl GcsOptions {
    /// For an emulator or fake at `endpoint`: no credentials, no retries.
    pub fn emulator(endpoint: &str) -> Self {
        Self {
            retry: RetrySettings::none(),
            ..Self::default()
        }
        .with_endpoint(endpoint)
    }

    /// Use this endpoint.
    pub fn with_endpoint(mut self, endpoint: &str) -> Self {
        self.endpoint = Some(endpoint.trim_end_matches('/').to_owned());
        self
    }

    /// Use these credentials.
    pub fn with_credentials(mut self, credentials: GcsCredentials) -> Self {
        self.credentials = credentials;
        self
    }

    /// Start Application Default Credentials from this file (what
    /// `GOOGLE_APPLICATION_CREDENTIALS` names).
    pub fn with_application_credentials(mut self, path: impl Into<PathBuf>) -> Self {
        self.application_credentials = Some(path.into());
        self
    }

    /// Use these retry settings.
    pub fn with_retry(mut self, retry: RetrySettings) -> Self {
        self.retry = retry;
        self
    }

    /// Upload files larger than `bytes` in parts of `bytes` (raised to
    /// [`MIN_PART_SIZE`]), `concurrency` parts at a time (at least 1).
    pub fn with_parts(mut self, bytes: usize, concurrency: usize) -> Self {
        self.part_size = bytes.max(MIN_PART_SIZE);
        self.part_concurrency = concurrency.max(1);
        self
    }

    /// Limit each request to `timeout`.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_account_keys_are_never_printed() {
        let c = GcsCredentials::ServiceAccountKey("{\"private_key\": \"SECRET\"}".into());
        let shown = format!(
            "{c:?} {:?}",
            GcsOptions::default().with_credentials(c.clone())
        );
        assert!(!shown.contains("SECRET"), "{shown}");
    }

    #[test]
    fn part_sizes_respect_the_gcs_minimum() {
        let o = GcsOptions::default().with_parts(1024, 0);
        assert_eq!(o.part_size, MIN_PART_SIZE);
        assert_eq!(o.part_concurrency, 1);
    }

    #[test]
    fn emulators_get_no_retries_and_a_clean_endpoint() {
        let o = GcsOptions::emulator("http://127.0.0.1:9/");
        assert_eq!(o.endpoint.as_deref(), Some("http://127.0.0.1:9"));
        assert_eq!(o.retry.max_retries, 0);
    }
}
