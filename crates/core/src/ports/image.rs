//! The `ImageBuilder` port: the container image a job runs in, built only
//! on a cache miss; and the decorators that implement it around another
//! builder or in place of one: [`FixedImage`] (one image, never built),
//! [`LazyImageBuilder`] (the inner builder made on first use) and
//! [`FaultyImageBuilder`] (scripted failures).

mod fixed;

use std::fmt;

use async_trait::async_trait;

use super::BoxError;

pub use fixed::FixedImage;

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
    /// True when the request carries requirements to bake in: a line that
    /// is neither blank nor a comment.
    ///
    /// ```
    /// use kinetic_core::ports::{ImageMode, ImageRequest};
    /// let with = |r: Option<&str>| ImageRequest::new(ImageMode::Bundled, "python:3.11-slim".into(),
    ///     "cpu".into(), r.map(str::to_owned), String::new(), String::new());
    /// assert!(with(Some("numpy==2.0\n")).has_requirements());
    /// assert!(!with(Some("# only a comment\n\n")).has_requirements());
    /// assert!(!with(None).has_requirements());
    /// ```
    pub fn has_requirements(&self) -> bool {
        self.requirement_lines().next().is_some()
    }

    /// The requirement lines: neither blank nor comments.
    fn requirement_lines(&self) -> impl Iterator<Item = &str> {
        self.requirements
            .as_deref()
            .unwrap_or_default()
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
    }

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
///
/// Each error's `Display` is a complete sentence for a person; its
/// [`source`](std::error::Error::source) is the typed cause the builder got
/// (a `reqwest::Error`, a [`StoreError`](super::StoreError), …) for a
/// program to inspect.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The request was malformed, or names something the service lacks (a
    /// project, a repository): fix the input or the configuration.
    #[error("{message}")]
    InvalidInput {
        /// What was wrong and what is accepted.
        message: String,
        /// What the service reported.
        source: Option<BoxError>,
    },
    /// The credentials are missing or expired, or a permission or API is
    /// missing: fix them; the message says which. Retrying will not help.
    #[error("permission denied: {message}")]
    PermissionDenied {
        /// What was refused.
        message: String,
        /// What the service reported.
        source: Option<BoxError>,
    },
    /// The builder cannot honour the request as asked (a fixed image asked
    /// to bake in requirements); the message names the setting at fault and
    /// what would work instead. Retrying will not help.
    #[error("{message}")]
    Unsupported {
        /// What cannot be done, and what to do instead.
        message: String,
    },
    /// The build ran and failed: read its log.
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
    /// The service could not be reached or is overloaded: the same call may
    /// succeed later. When `retried` is true the call already went through
    /// a retry policy that spent its budget: nobody retries it again.
    #[error("image builder unavailable: {message}")]
    Unavailable {
        /// What happened.
        message: String,
        /// The call was already retried as its retry policy allows.
        retried: bool,
        /// What the service reported.
        source: Option<BoxError>,
    },
    /// Anything else: an answer nothing expected.
    #[error("image builder error: {message}")]
    Other {
        /// What happened.
        message: String,
        /// What the service reported.
        source: Option<BoxError>,
    },
}

impl BuildError {
    /// [`BuildError::Unsupported`].
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::Unsupported {
            message: message.into(),
        }
    }

    /// True for [`BuildError::InvalidInput`] and [`BuildError::Unsupported`]:
    /// the request must change before it can succeed.
    pub fn is_invalid_input(&self) -> bool {
        matches!(self, Self::InvalidInput { .. } | Self::Unsupported { .. })
    }

    /// True when a build ran and did not succeed ([`BuildError::BuildFailed`],
    /// [`BuildError::Timeout`]): its log says why.
    pub fn is_build_failure(&self) -> bool {
        matches!(self, Self::BuildFailed { .. } | Self::Timeout { .. })
    }
}

crate::retry::port_error_kinds!(
    BuildError,
    sourced: [],
    bare: [Unsupported, BuildFailed, Timeout]
);

/// What an [`ImageBuilder`] can do, as data: the conformance suite chooses
/// its cases from it, and callers can tell a builder from a fixed image
/// before they ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImageCapabilities {
    /// Builds images: a bundled request gets an image with its requirements
    /// baked in, named by what goes into it, built only on a cache miss.
    /// A builder that does not build resolves every request to an image it
    /// already has, and refuses a bundled request whose requirements it
    /// would have to bake in ([`BuildError::Unsupported`]).
    pub builds: bool,
}

impl ImageCapabilities {
    /// A builder that builds bundled images.
    pub fn building() -> Self {
        Self { builds: true }
    }

    /// A builder that never builds (one fixed image).
    pub fn fixed() -> Self {
        Self { builds: false }
    }
}

/// Resolves an [`ImageRequest`] to an image URI.
///
/// Every implementation MUST return the same URI for equal requests, and
/// MUST resolve a [`ImageMode::Custom`] request to its URI without a build.
///
/// A builder whose [`ImageCapabilities::builds`] is true MUST give requests
/// with different requirements different URIs, MUST NOT build when the
/// image already exists (`cached: true`), and SHOULD start one build, not
/// two, when equal requests arrive at the same time.
///
/// A builder that does not build MUST NOT build, and MUST NOT silently drop
/// requirements: a bundled request that [carries
/// requirements](ImageRequest::has_requirements) MUST fail with
/// [`BuildError::Unsupported`] saying what to do instead (prebuilt mode
/// installs them when the job starts).
#[async_trait]
pub trait ImageBuilder: fmt::Debug + Send + Sync + 'static {
    /// What this builder can do.
    fn capabilities(&self) -> ImageCapabilities;

    /// Resolve (building on a cache miss).
    async fn resolve(&self, request: &ImageRequest) -> Result<ResolvedImage, BuildError>;
}
