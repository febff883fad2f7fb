//! OAuth access tokens for the Google Cloud REST APIs (Cloud Build,
//! Artifact Registry, Container, IAM, Service Usage, Resource Manager).
//!
//! [`TokenSource`] is the seam: production uses [`GcpTokenSource`] (the
//! credential chain of `object_store`'s GCS client: a service-account key in
//! `GOOGLE_APPLICATION_CREDENTIALS`, application-default credentials, or the
//! metadata server; scope `cloud-platform`), tests a [`StaticToken`].

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use object_store::gcp::{GcpCredentialProvider, GoogleCloudStorageBuilder};
use tokio::sync::OnceCell;

/// Why no token could be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot get a Google access token: {message}")]
#[non_exhaustive]
pub struct TokenError {
    /// What failed, and what to do about it.
    pub message: String,
}

impl TokenError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// Gives a bearer token for Google APIs. Implementations cache and refresh
/// as they need; [`TokenSource::token`] is called before every request.
#[async_trait]
pub trait TokenSource: fmt::Debug + Send + Sync + 'static {
    /// A currently valid access token.
    async fn token(&self) -> Result<String, TokenError>;
}

/// The same token every time (tests; a token from `gcloud auth
/// print-access-token`). Its `Debug` output hides the token.
#[derive(Clone)]
pub struct StaticToken(String);

impl StaticToken {
    /// A source that always gives `token`.
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }
}

impl fmt::Debug for StaticToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StaticToken(<redacted>)")
    }
}

#[async_trait]
impl TokenSource for StaticToken {
    async fn token(&self) -> Result<String, TokenError> {
        Ok(self.0.clone())
    }
}

/// Tokens from `object_store`'s GCP credential provider (Application
/// Default Credentials), created on first use, so that building an engine
/// never touches credentials it does not need.
#[derive(Debug)]
pub struct GcpTokenSource {
    bucket: String,
    credentials_file: Option<PathBuf>,
    provider: OnceCell<GcpCredentialProvider>,
}

impl GcpTokenSource {
    /// A source using Application Default Credentials: `credentials_file`
    /// (what `GOOGLE_APPLICATION_CREDENTIALS` names, resolved by the
    /// caller), else gcloud's application-default file, else the metadata
    /// server. `bucket` only satisfies the GCS builder (any bucket name
    /// works; no request goes to it).
    pub fn application_default(bucket: &str, credentials_file: Option<PathBuf>) -> Self {
        Self {
            bucket: bucket.to_owned(),
            credentials_file,
            provider: OnceCell::new(),
        }
    }

    /// A source over an existing provider (e.g. that of the store's own
    /// `GoogleCloudStorage`, so that both share one token cache).
    pub fn from_provider(provider: GcpCredentialProvider) -> Self {
        Self {
            bucket: String::new(),
            credentials_file: None,
            provider: OnceCell::new_with(Some(provider)),
        }
    }

    async fn provider(&self) -> Result<&GcpCredentialProvider, TokenError> {
        self.provider
            .get_or_try_init(|| async {
                let mut builder = GoogleCloudStorageBuilder::new().with_bucket_name(&self.bucket);
                if let Some(file) = &self.credentials_file {
                    builder = builder.with_application_credentials(file.to_string_lossy());
                }
                let gcs = builder
                    .build()
                    .map_err(|e| {
                        TokenError::new(format!(
                            "{} (set GOOGLE_APPLICATION_CREDENTIALS to a service-account key, or run `gcloud auth application-default login`)",
                            credential_failure(&e)
                        ))
                    })?;
                Ok(Arc::clone(gcs.credentials()))
            })
            .await
    }
}

#[async_trait]
impl TokenSource for GcpTokenSource {
    async fn token(&self) -> Result<String, TokenError> {
        let credential = self.provider().await?.get_credential().await.map_err(|e| {
            TokenError::new(format!(
                "no Google credentials: {} (check GOOGLE_APPLICATION_CREDENTIALS or run `gcloud auth application-default login`)",
                credential_failure(&e)
            ))
        })?;
        Ok(credential.bearer.clone())
    }
}

/// What went wrong getting a credential, without `object_store`'s
/// "Generic GCS error" wrapper: the token serves every Google API (IAM,
/// Container, Cloud Build), not only GCS.
fn credential_failure(e: &object_store::Error) -> String {
    match e {
        object_store::Error::Generic { source, .. } => source.to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_failures_do_not_name_gcs() {
        let e = object_store::Error::Generic {
            store: "GCS",
            source: "no application default credentials file".into(),
        };
        assert_eq!(
            credential_failure(&e),
            "no application default credentials file"
        );
    }

    #[tokio::test]
    async fn static_tokens_hide_in_debug() {
        let t = StaticToken::new("s3cret");
        assert_eq!(t.token().await.unwrap(), "s3cret");
        assert!(!format!("{t:?}").contains("s3cret"));
    }
}
