//! # kinetic-build-cloudbuild
//!
//! The `ImageBuilder` port of `kinetic-core` over Cloud Build and Artifact
//! Registry: [`CloudBuildImageBuilder`] resolves an
//! [`ImageRequest`](kinetic_core::ports::ImageRequest) to the image a job
//! runs in, building only when the cluster's registry lacks it.
//!
//! - [`dockerfile`]: the Dockerfile and build context (pure).
//! - [`request`]: the `CreateBuild` body (pure, golden-tested).
//! - [`retry`]: which answers are retried (the rule every Google adapter
//!   shares, from `kinetic-gcp-common`); how long, and the loop, are
//!   `kinetic_core::retry`'s (one policy for the whole engine).
//! - [`GoogleError`]: a failed answer, the source of the
//!   [`BuildError`](kinetic_core::ports::BuildError) made from it (shared
//!   with the other Google adapters, from `kinetic-gcp-common`).
//! - [`token`]: [`TokenSource`], with the production [`GcpTokenSource`]
//!   (object_store's GCP credentials) and [`StaticToken`] for tests; it
//!   lives in `kinetic-gcp-common`, shared with the other Google adapters.
//!
//! HTTP goes through the `reqwest` that `object_store` already brings (one
//! TLS stack: rustls with aws-lc-rs); the context tarball and the build log
//! go through the [`ObjectStore`](kinetic_core::ports::ObjectStore) port.
//!
//! ```no_run
//! # async fn demo(store: std::sync::Arc<dyn kinetic_core::ports::ObjectStore>) -> Result<(), kinetic_core::ports::BuildError> {
//! use std::sync::Arc;
//! use kinetic_build_cloudbuild::{CloudBuildConfig, CloudBuildImageBuilder, GcpTokenSource};
//! use kinetic_core::ports::{ImageBuilder, ImageMode, ImageRequest};
//!
//! let config = CloudBuildConfig::new("my-project", "us-central1-a", "kinetic-cluster");
//! let tokens = Arc::new(GcpTokenSource::application_default(&config.builds_bucket, None));
//! // `store` is the builds bucket, gs://my-project-kn-kinetic-cluster-builds.
//! let builder = CloudBuildImageBuilder::new(config, tokens, store)?;
//! let image = builder
//!     .resolve(&ImageRequest::new(
//!         ImageMode::Bundled,
//!         "python:3.11-slim".into(),
//!         "cpu".into(),
//!         Some("numpy\n".into()),
//!         kinetic_core::protocol::RUNNER_SOURCE.into(),
//!         kinetic_core::image::DOCKERFILE_TEMPLATE.into(),
//!     ))
//!     .await?;
//! println!("{} (cached: {})", image.uri, image.cached);
//! # Ok(()) }
//! ```

mod api;
mod builder;
pub mod dockerfile;
pub mod request;
pub mod retry;
pub use kinetic_gcp_common::token;

pub use api::{ARTIFACTREGISTRY_ENDPOINT, Build, BuildResults, BuiltImage, CLOUDBUILD_ENDPOINT};
pub use builder::{
    BundledImage, CloudBuildConfig, CloudBuildImageBuilder, FinishedBuild, KINETIC_VERSION,
    PublishRequest,
};
pub use kinetic_gcp_common::GoogleError;
pub use token::{GcpTokenSource, StaticToken, TokenError, TokenSource};
