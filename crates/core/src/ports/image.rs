//! The `ImageBuilder` port: the container image a job runs in, built only
//! on a cache miss.

use std::fmt;

use async_trait::async_trait;

/// How the job's image is chosen (Kinetic's `container_image`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ImageMode {
    /// Build an image with the filtered requirements baked in (the default).
    #[default]
    Bundled,
    /// A published base image; requirements are installed when the job starts.
    Prebuilt {
        /// Repository of the `base-{category}` images.
        repo: String,
    },
    /// This image, as is; requirements are ignored.
    Custom {
        /// The image URI.
        uri: String,
    },
}

/// What an image must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImageRequest {
    /// Bundled, prebuilt or custom.
    pub mode: ImageMode,
    /// Base image (`python:3.11-slim` for the client's Python minor version).
    pub base_image: String,
    /// Accelerator category: `cpu`, `gpu` or `tpu`.
    pub category: String,
    /// The filtered requirements text, if any.
    pub requirements: Option<String>,
    /// The runner program baked into the image.
    pub runner_source: String,
    /// The Dockerfile template.
    pub dockerfile_template: String,
}

impl ImageRequest {
    /// A request.
    pub fn new(
        mode: ImageMode,
        base_image: String,
        category: String,
        requirements: Option<String>,
        runner_source: String,
        dockerfile_template: String,
    ) -> Self {
        Self {
            mode,
            base_image,
            category,
            requirements,
            runner_source,
            dockerfile_template,
        }
    }
}

/// The image a request resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResolvedImage {
    /// The image URI the job runs.
    pub uri: String,
    /// True when no build was needed.
    pub cached: bool,
}

impl ResolvedImage {
    /// A resolved image.
    pub fn new(uri: String, cached: bool) -> Self {
        Self { uri, cached }
    }
}

/// Errors of an [`ImageBuilder`], organised by what the caller does next.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The request was malformed.
    #[error("{message}")]
    InvalidInput {
        /// What was wrong and what is accepted.
        message: String,
    },
    /// A permission or API is missing; the message says which.
    #[error("permission denied: {message}")]
    PermissionDenied {
        /// What was refused.
        message: String,
    },
    /// The build ran and failed.
    #[error("image build {build_id} failed with status {status}; log: {log_url}\n{log_tail}")]
    BuildFailed {
        /// The build's id.
        build_id: String,
        /// Its final status.
        status: String,
        /// Where its full log is.
        log_url: String,
        /// The last lines of its log.
        log_tail: String,
    },
    /// The build did not end in time.
    #[error("image build {build_id} did not finish within {seconds} s")]
    Timeout {
        /// The build's id.
        build_id: String,
        /// The timeout.
        seconds: u64,
    },
    /// The service could not be reached or is overloaded; retrying may help.
    #[error("image builder unavailable: {message}")]
    Unavailable {
        /// What happened.
        message: String,
    },
    /// Anything else.
    #[error("image builder error: {message}")]
    Other {
        /// What happened.
        message: String,
    },
}

impl BuildError {
    /// True when the same call may succeed if tried again later.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }
}

/// Resolves an [`ImageRequest`] to an image URI.
///
/// Implementations MUST return the same URI for equal requests, MUST NOT
/// build when the image already exists (`cached: true`), and SHOULD start
/// one build, not two, when equal requests arrive at the same time. A
/// [`ImageMode::Custom`] request MUST resolve to its URI without a build.
#[async_trait]
pub trait ImageBuilder: fmt::Debug + Send + Sync + 'static {
    /// Resolve (building on a cache miss).
    async fn resolve(&self, request: &ImageRequest) -> Result<ResolvedImage, BuildError>;
}
