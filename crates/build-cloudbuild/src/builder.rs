//! [`CloudBuildImageBuilder`]: the `ImageBuilder` port over Cloud Build and
//! Artifact Registry.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use kinetic_core::config::DerivedNames;
use kinetic_core::image::{
    ImageTag, ImageTagDescription, ImageTagInputs, bundled_image_uri, prebuilt_image_uri,
    registry_tag_resource,
};
use kinetic_core::ports::{
    BuildError, GetOptions, ImageBuilder, ImageCapabilities, ImageMode, ImageRequest, ObjectStore,
    PutOptions, ResolvedImage, StoreError,
};
use tokio::time::Instant;

use crate::api::{ARTIFACTREGISTRY_ENDPOINT, Api, Build, CLOUDBUILD_ENDPOINT};
use crate::dockerfile::{BuildContext, DockerfileInputs, accelerator_packages, render_dockerfile};
use crate::request::{BuildRequestInputs, build_request_body};
use crate::retry::{Backoff, RetryPolicy, default_policy, default_poll};
use crate::token::TokenSource;

/// The engine version images are tagged with (Kinetic's `kinetic={version}`).
pub const KINETIC_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Bytes read from the end of a failed build's log.
const LOG_TAIL_BYTES: u64 = 64 * 1024;

/// Where and how images are built. [`CloudBuildConfig::new`] derives every
/// name from project, zone and cluster as `kinetic up` creates them.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CloudBuildConfig {
    /// Cloud project of the cluster (builds run and images live there).
    pub project: String,
    /// Cluster name (repository `kn-{cluster}`).
    pub cluster: String,
    /// Artifact Registry location (`us`, `europe`, `me-west1`).
    pub ar_location: String,
    /// Cloud Build location (`global`, as Kinetic uses).
    pub build_location: String,
    /// Bucket of build contexts and logs (`{project}-kn-{cluster}-builds`).
    pub builds_bucket: String,
    /// Object prefix of build logs in that bucket.
    pub logs_prefix: String,
    /// Email of the service account builds run as.
    pub service_account: String,
    /// Engine version that enters image tags.
    pub kinetic_version: String,
    /// Longest wait for one build (also Cloud Build's own limit); Kinetic waits 1200 s.
    pub build_timeout: Duration,
    /// Polling of a running build: the first poll after `poll.initial`,
    /// then waits growing by `poll.multiplier` up to `poll.max`.
    pub poll: Backoff,
    /// Retries of each API call (which answers: [`crate::retry::decide`]).
    pub retry: RetryPolicy,
    /// Time limit of one HTTP request.
    pub request_timeout: Duration,
    /// Cloud Build endpoint (`https://cloudbuild.googleapis.com`).
    pub cloudbuild_endpoint: String,
    /// Artifact Registry endpoint (`https://artifactregistry.googleapis.com`).
    pub artifactregistry_endpoint: String,
    /// Lines of a failed build's log put in the error.
    pub log_tail_lines: usize,
}

impl CloudBuildConfig {
    /// The configuration for a cluster, with Kinetic's names.
    pub fn new(project: &str, zone: &str, cluster: &str) -> Self {
        let names = DerivedNames::new(project, zone, cluster);
        Self {
            project: project.to_owned(),
            cluster: cluster.to_owned(),
            ar_location: names.ar_location,
            build_location: "global".to_owned(),
            builds_bucket: names.builds_bucket,
            logs_prefix: kinetic_core::layout::builds::LOGS_DIR.to_owned(),
            service_account: names.build_service_account,
            kinetic_version: KINETIC_VERSION.to_owned(),
            build_timeout: Duration::from_secs(1200),
            poll: default_poll(),
            retry: default_policy(),
            request_timeout: Duration::from_secs(60),
            cloudbuild_endpoint: CLOUDBUILD_ENDPOINT.to_owned(),
            artifactregistry_endpoint: ARTIFACTREGISTRY_ENDPOINT.to_owned(),
            log_tail_lines: 30,
        }
    }

    /// Send both APIs to one endpoint (a test server such as `kinetic-fake-gcp`'s
    /// `FakeCloudBuild`).
    pub fn with_endpoint(mut self, endpoint: &str) -> Self {
        endpoint.clone_into(&mut self.cloudbuild_endpoint);
        endpoint.clone_into(&mut self.artifactregistry_endpoint);
        self
    }

    /// The longest wait for one build.
    pub fn with_build_timeout(mut self, timeout: Duration) -> Self {
        self.build_timeout = timeout;
        self
    }

    /// How a running build is polled.
    pub fn with_poll(mut self, poll: Backoff) -> Self {
        self.poll = poll;
        self
    }

    /// How API calls are retried.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The engine version that enters image tags.
    pub fn with_kinetic_version(mut self, version: &str) -> Self {
        version.clone_into(&mut self.kinetic_version);
        self
    }

    /// `gs://{builds_bucket}/{logs_prefix}`, where builds write their logs.
    pub fn logs_bucket_uri(&self) -> String {
        format!("gs://{}/{}", self.builds_bucket, self.logs_prefix)
    }
}

/// A bundled image: its URI, tag, Artifact Registry tag resource, and what
/// went into its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BundledImage {
    /// `{ar_location}-docker.pkg.dev/{project}/kn-{cluster}/base:{tag}`.
    pub uri: String,
    /// The tag.
    pub tag: ImageTag,
    /// The resource checked for a cached image.
    pub tag_resource: String,
    /// The hash inputs.
    pub inputs: ImageTagDescription,
}

/// A request of [`CloudBuildImageBuilder::publish`]: one prebuilt base
/// image (`kinetic build-image`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PublishRequest {
    /// The full image name, `{repo}/base-{category}:{tag}`.
    pub image: String,
    /// `cpu`, `gpu` or `tpu` (picks the JAX build).
    pub category: String,
    /// Base image of the generated Dockerfile (`python:3.11-slim`).
    pub base_image: String,
    /// A Dockerfile to use as is instead of the generated one.
    pub dockerfile: Option<String>,
    /// The runner copied into the image.
    pub runner_source: String,
    /// The Dockerfile template for the generated Dockerfile.
    pub dockerfile_template: String,
}

impl PublishRequest {
    /// The prebuilt image `{repo}/base-{category}:{tag}` from the shipped
    /// template and runner.
    pub fn new(repo: &str, category: &str, tag: &str, base_image: &str) -> Self {
        Self {
            image: prebuilt_image_uri(repo.trim_end_matches('/'), category, tag),
            category: category.to_owned(),
            base_image: base_image.to_owned(),
            dockerfile: None,
            runner_source: kinetic_core::protocol::RUNNER_SOURCE.to_owned(),
            dockerfile_template: kinetic_core::image::DOCKERFILE_TEMPLATE.to_owned(),
        }
    }

    /// Use this Dockerfile as is.
    pub fn with_dockerfile(mut self, dockerfile: String) -> Self {
        self.dockerfile = Some(dockerfile);
        self
    }
}

/// A finished build.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FinishedBuild {
    /// The image built.
    pub image: String,
    /// The build id.
    pub build_id: String,
    /// Digest of the pushed image, when Cloud Build reported it.
    pub digest: Option<String>,
    /// The build's console page.
    pub log_url: String,
}

type SharedResolve = Shared<BoxFuture<'static, Result<ResolvedImage, Arc<BuildError>>>>;

/// Builds job images on Cloud Build, cached by content in the cluster's
/// Artifact Registry repository.
///
/// - Bundled: the tag hashes base image, category, engine version,
///   filtered requirements, runner and Dockerfile template
///   ([`ImageTagInputs`]). If Artifact Registry has the tag, no build. Else
///   the context (`Dockerfile`, runner, `requirements.txt`) goes to the
///   builds bucket as `source-{unix seconds}-{8 hex}.tar.gz` through the
///   [`ObjectStore`] port, a build is created and polled with backoff up to
///   [`CloudBuildConfig::build_timeout`]; a failed build is
///   [`BuildError::BuildFailed`] with the console URL and the tail of its
///   log (read from the builds bucket).
/// - Prebuilt: `{repo}/base-{category}:{version}`, no build (the runner
///   installs the requirements at start).
/// - Custom: the URI as given, no build; requirements are ignored (logged).
///
/// Equal requests at the same time share one build (single flight, in this
/// process). Across processes the Artifact Registry check is what remains:
/// two machines that miss at once both build, and the second push of the
/// same content to the same tag is harmless.
#[derive(Clone)]
pub struct CloudBuildImageBuilder {
    inner: Arc<Inner>,
}

struct Inner {
    config: CloudBuildConfig,
    api: Api,
    builds_store: Arc<dyn ObjectStore>,
    in_flight: Mutex<HashMap<String, SharedResolve>>,
    builds_started: AtomicU64,
}

impl fmt::Debug for CloudBuildImageBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CloudBuildImageBuilder")
            .field("config", &self.inner.config)
            .field("builds_store", &self.inner.builds_store)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The error of a build several callers waited for, as the source of the
/// copy each caller gets: it reads as the original, and its own source is
/// the original's (the API answer, the store error…).
#[derive(Debug)]
struct SharedBuildError(Arc<BuildError>);

impl fmt::Display for SharedBuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for SharedBuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(self.0.as_ref())
    }
}

/// A copy of a shared error (the port's error is not `Clone`): the same
/// kind and message, with the original below it.
fn copy_error(e: &Arc<BuildError>) -> BuildError {
    let copy = match e.as_ref() {
        BuildError::InvalidInput { message, .. } => BuildError::invalid_input(message.clone()),
        BuildError::PermissionDenied { message, .. } => {
            BuildError::permission_denied(message.clone())
        }
        BuildError::Unsupported { message } => BuildError::unsupported(message.clone()),
        BuildError::BuildFailed {
            build_id,
            status,
            log_url,
            log_tail,
        } => BuildError::BuildFailed {
            build_id: build_id.clone(),
            status: status.clone(),
            log_url: log_url.clone(),
            log_tail: log_tail.clone(),
        },
        BuildError::Timeout { build_id, seconds } => BuildError::Timeout {
            build_id: build_id.clone(),
            seconds: *seconds,
        },
        BuildError::Unavailable {
            message, retried, ..
        } => BuildError::Unavailable {
            message: message.clone(),
            retried: *retried,
            source: None,
        },
        // Its message, not its display: "image builder error: " once.
        BuildError::Other { message, .. } => BuildError::other(message.clone()),
        other => BuildError::other(other.to_string()),
    };
    copy.with_source(SharedBuildError(Arc::clone(e)))
}

fn blank_to_none(requirements: &Option<String>) -> Option<String> {
    requirements.clone().filter(|r| !r.trim().is_empty())
}

impl CloudBuildImageBuilder {
    /// A builder for `config`, authenticating with `tokens`, uploading
    /// build contexts to `builds_store` (the builds bucket,
    /// [`CloudBuildConfig::builds_bucket`]).
    pub fn new(
        config: CloudBuildConfig,
        tokens: Arc<dyn TokenSource>,
        builds_store: Arc<dyn ObjectStore>,
    ) -> Result<Self, BuildError> {
        let api = Api::new(
            tokens,
            &config.cloudbuild_endpoint,
            &config.artifactregistry_endpoint,
            config.retry,
            config.request_timeout,
        )?;
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                api,
                builds_store,
                in_flight: Mutex::new(HashMap::new()),
                builds_started: AtomicU64::new(0),
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &CloudBuildConfig {
        &self.inner.config
    }

    /// Builds this builder created so far.
    pub fn builds_started(&self) -> u64 {
        self.inner.builds_started.load(Ordering::Relaxed)
    }

    /// The bundled image a request resolves to, without any IO.
    pub fn bundled_image(&self, request: &ImageRequest) -> Result<BundledImage, BuildError> {
        let c = &self.inner.config;
        accelerator_packages(&request.category)?;
        let inputs = ImageTagInputs {
            base_image: request.base_image.clone(),
            category: request.category.clone(),
            kinetic_version: c.kinetic_version.clone(),
            requirements: blank_to_none(&request.requirements),
            runner_source: request.runner_source.clone(),
            dockerfile_template: request.dockerfile_template.clone(),
        };
        let invalid = |e: kinetic_core::image::ImageError| {
            BuildError::invalid_input(e.to_string()).with_source(e)
        };
        let tag = inputs.tag().map_err(invalid)?;
        Ok(BundledImage {
            uri: bundled_image_uri(&c.ar_location, &c.project, &c.cluster, &tag),
            tag_resource: registry_tag_resource(&c.ar_location, &c.project, &c.cluster, &tag),
            inputs: inputs.describe().map_err(invalid)?,
            tag,
        })
    }

    /// Whether Artifact Registry already holds `image` (one `GetTag`).
    pub async fn is_cached(&self, image: &BundledImage) -> Result<bool, BuildError> {
        self.inner
            .api
            .tag_exists(&self.inner.config.project, &image.tag_resource)
            .await
    }

    /// Build and push one prebuilt base image (`kinetic build-image`).
    pub async fn publish(&self, request: &PublishRequest) -> Result<FinishedBuild, BuildError> {
        let dockerfile = match &request.dockerfile {
            Some(d) => d.clone(),
            None => render_dockerfile(&DockerfileInputs {
                template: &request.dockerfile_template,
                base_image: &request.base_image,
                category: &request.category,
                with_requirements: false,
            })?,
        };
        let context = BuildContext {
            dockerfile,
            runner_source: request.runner_source.clone(),
            requirements: None,
        };
        self.inner
            .build(&request.image, &request.category, &context)
            .await
    }

    async fn resolve_bundled(&self, request: &ImageRequest) -> Result<ResolvedImage, BuildError> {
        let image = self.bundled_image(request)?;
        let (shared, joined) = {
            let mut in_flight = lock(&self.inner.in_flight);
            match in_flight.get(&image.uri) {
                Some(shared) => (shared.clone(), true),
                None => {
                    let inner = Arc::clone(&self.inner);
                    let request = request.clone();
                    let key = image.uri.clone();
                    let future = async move {
                        let result = inner.resolve_bundled(&request, &image).await;
                        lock(&inner.in_flight).remove(&image.uri);
                        result.map_err(Arc::new)
                    }
                    .boxed()
                    .shared();
                    in_flight.insert(key, future.clone());
                    (future, false)
                }
            }
        };
        if joined {
            tracing::debug!("waiting for the build of the same image already under way");
        }
        shared.await.map_err(|e| copy_error(&e))
    }
}

impl Inner {
    async fn resolve_bundled(
        &self,
        request: &ImageRequest,
        image: &BundledImage,
    ) -> Result<ResolvedImage, BuildError> {
        match self
            .api
            .tag_exists(&self.config.project, &image.tag_resource)
            .await
        {
            Ok(true) => {
                tracing::info!(image = %image.uri, "image found in Artifact Registry; no build");
                return Ok(ResolvedImage::new(image.uri.clone(), true));
            }
            Ok(false) => {}
            // Without the permission every submit would rebuild for
            // minutes: say so instead.
            Err(e @ BuildError::PermissionDenied { .. }) => return Err(e),
            Err(e) => {
                tracing::warn!(image = %image.uri, "cannot check the image cache, building: {e}");
            }
        }
        let requirements = blank_to_none(&request.requirements);
        let dockerfile = render_dockerfile(&DockerfileInputs {
            template: &request.dockerfile_template,
            base_image: &request.base_image,
            category: &request.category,
            with_requirements: requirements.is_some(),
        })?;
        let context = BuildContext {
            dockerfile,
            runner_source: request.runner_source.clone(),
            requirements,
        };
        self.build(&image.uri, &request.category, &context).await?;
        Ok(ResolvedImage::new(image.uri.clone(), false))
    }

    /// Upload the context, create the build, wait for it.
    async fn build(
        &self,
        image: &str,
        category: &str,
        context: &BuildContext,
    ) -> Result<FinishedBuild, BuildError> {
        let c = &self.config;
        let tarball = context.to_tar_gz()?;
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let random = uuid::Uuid::new_v4().simple().to_string();
        let path = kinetic_core::layout::builds::source(secs, &random[..8])
            .map_err(|e| BuildError::other(e.to_string()).with_source(e))?;
        let object = path.to_string();
        self.builds_store
            .put(
                &path,
                Bytes::from(tarball),
                PutOptions::default().with_content_type("application/gzip"),
            )
            .await
            .map_err(|e| {
                // The store says the bucket is missing (a GCS store), or
                // finds nothing, which writing a new object meets only then.
                if e.is_not_found() || e.to_string().starts_with("the bucket gs://") {
                    return missing_builds_bucket(c).with_source(e);
                }
                store_error(e, &format!("uploading the build context {object}"))
            })?;
        let tags = vec!["kinetic".to_owned(), format!("kinetic-{category}")];
        let logs_bucket = c.logs_bucket_uri();
        let body = build_request_body(&BuildRequestInputs {
            project: &c.project,
            image_uri: image,
            source_bucket: &c.builds_bucket,
            source_object: &object,
            service_account: &c.service_account,
            logs_bucket: &logs_bucket,
            timeout: c.build_timeout,
            tags: &tags,
        });
        let created = self
            .api
            .create_build(&c.project, &c.build_location, &c.service_account, &body)
            .await?;
        self.builds_started.fetch_add(1, Ordering::Relaxed);
        tracing::info!(build_id = %created.id, image, log_url = %created.log_url, "image build started");
        let build = self.wait(&created).await?;
        if !build.succeeded() {
            let log_tail = self.log_tail(&build.id).await;
            let status = if build.status_detail.is_empty() {
                build.status.clone()
            } else {
                format!("{} ({})", build.status, build.status_detail)
            };
            return Err(BuildError::BuildFailed {
                build_id: build.id.clone(),
                status,
                log_url: self.log_url(&build),
                log_tail,
            });
        }
        tracing::info!(build_id = %build.id, image, "image build succeeded");
        let digest = build
            .results
            .images
            .iter()
            .find(|i| i.name == image)
            .map(|i| i.digest.clone())
            .filter(|d| !d.is_empty());
        Ok(FinishedBuild {
            image: image.to_owned(),
            log_url: self.log_url(&build),
            build_id: build.id,
            digest,
        })
    }

    fn log_url(&self, build: &Build) -> String {
        if build.log_url.is_empty() {
            format!(
                "https://console.cloud.google.com/cloud-build/builds/{}?project={}",
                build.id, self.config.project
            )
        } else {
            build.log_url.clone()
        }
    }

    /// Poll until the build ends or the timeout passes.
    async fn wait(&self, created: &Build) -> Result<Build, BuildError> {
        let c = &self.config;
        let deadline = Instant::now() + c.build_timeout;
        let mut wait = c.poll.initial;
        let mut build = created.clone();
        while !build.is_done() {
            let now = Instant::now();
            if now >= deadline {
                return Err(BuildError::Timeout {
                    build_id: created.id.clone(),
                    seconds: c.build_timeout.as_secs(),
                });
            }
            tokio::time::sleep(wait.min(deadline - now)).await;
            wait = c.poll.next(wait);
            let polled = self
                .api
                .get_build(&c.project, &c.build_location, &created.id)
                .await?;
            if polled.status != build.status {
                tracing::info!(build_id = %created.id, status = %polled.status, "image build");
            }
            build = polled;
        }
        Ok(build)
    }

    /// The last lines of a build's log, or a note saying why there are none.
    async fn log_tail(&self, build_id: &str) -> String {
        let Ok(path) = kinetic_core::layout::builds::log(&self.config.logs_prefix, build_id) else {
            return String::new();
        };
        let name = path.to_string();
        let store = &self.builds_store;
        let read = async {
            let size = store.head(&path).await?.size;
            let start = size.saturating_sub(LOG_TAIL_BYTES);
            store.get(&path, GetOptions::range(start..size)).await
        };
        match read.await {
            Ok(bytes) => last_lines(&String::from_utf8_lossy(&bytes), self.config.log_tail_lines),
            Err(e) => format!("(no log at gs://{}/{name}: {e})", self.config.builds_bucket),
        }
    }
}

/// The last `n` lines of `text`, without a partial first line when the
/// text was cut.
pub(crate) fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The builds bucket is missing: the project has no cluster of this name
/// set up (or the names are wrong), and `kinetic up` makes one.
fn missing_builds_bucket(c: &CloudBuildConfig) -> BuildError {
    BuildError::InvalidInput {
        message: format!(
            "the builds bucket gs://{} does not exist: project {} has no kinetic cluster {:?} set up \
             (or the project or cluster name is wrong); `kinetic up` creates its buckets, registry \
             and cluster, and `kinetic doctor` shows what is missing",
            c.builds_bucket, c.project, c.cluster
        ),
        source: None,
    }
}

/// A store error met while building, as a build error of the same kind
/// (retried already when the store said so), with the store error below.
fn store_error(e: StoreError, what: &str) -> BuildError {
    let message = format!("{what}: {e}");
    let kind = match &e {
        StoreError::Unavailable { retried, .. } => BuildError::Unavailable {
            message,
            retried: *retried,
            source: None,
        },
        StoreError::PermissionDenied { .. } => BuildError::permission_denied(format!(
            "{message} (the caller needs storage.objects.create on the builds bucket)"
        )),
        _ => BuildError::other(message),
    };
    kind.with_source(e)
}

/// The images that need neither a build nor a Google Cloud project: a
/// prebuilt base image (`{repo}/base-{category}:{version}`, requirements
/// installed at start) and a custom image URI, used as is. A bundled
/// image is built by Cloud Build in the project's registry, so without a
/// project it is refused ([`BuildError::Unsupported`]) with what to set.
#[derive(Debug, Clone)]
pub struct PrebuiltImages {
    kinetic_version: String,
}

impl Default for PrebuiltImages {
    fn default() -> Self {
        Self {
            kinetic_version: KINETIC_VERSION.to_owned(),
        }
    }
}

/// The image of a request that needs no build: a custom URI as is
/// (requirements ignored, logged), or the prebuilt base image of the
/// request's category for `kinetic_version`.
fn unbuilt(request: &ImageRequest, kinetic_version: &str) -> Result<ResolvedImage, BuildError> {
    match &request.mode {
        ImageMode::Custom { uri } => {
            if blank_to_none(&request.requirements).is_some() {
                tracing::warn!(image = %uri, "requirements are ignored with a custom image: it must already hold them");
            }
            Ok(ResolvedImage::new(uri.clone(), true))
        }
        ImageMode::Prebuilt { repo } => {
            accelerator_packages(&request.category)?;
            Ok(ResolvedImage::new(
                prebuilt_image_uri(
                    repo.trim_end_matches('/'),
                    &request.category,
                    kinetic_version,
                ),
                true,
            ))
        }
        other => Err(BuildError::invalid_input(format!(
            "{other:?} images are built, not resolved as they are"
        ))),
    }
}

#[async_trait]
impl ImageBuilder for PrebuiltImages {
    fn capabilities(&self) -> ImageCapabilities {
        ImageCapabilities::fixed()
    }

    async fn resolve(&self, request: &ImageRequest) -> Result<ResolvedImage, BuildError> {
        match &request.mode {
            ImageMode::Custom { .. } | ImageMode::Prebuilt { .. } => {
                unbuilt(request, &self.kinetic_version)
            }
            _ => Err(BuildError::unsupported(
                "a bundled image is built by Cloud Build in your Google Cloud project, and no project is set: set --project, KINETIC_PROJECT or a profile (`kinetic profile create`), or run with --container-image prebuilt or an image URI",
            )),
        }
    }
}

#[async_trait]
impl ImageBuilder for CloudBuildImageBuilder {
    fn capabilities(&self) -> ImageCapabilities {
        ImageCapabilities::building()
    }

    async fn resolve(&self, request: &ImageRequest) -> Result<ResolvedImage, BuildError> {
        match &request.mode {
            ImageMode::Custom { .. } | ImageMode::Prebuilt { .. } => {
                unbuilt(request, &self.inner.config.kinetic_version)
            }
            ImageMode::Bundled => self.resolve_bundled(request).await,
            other => Err(BuildError::invalid_input(format!(
                "image mode {other:?} is not supported: expected bundled, prebuilt or a custom image"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_error_copied_says_image_builder_error_once() {
        let shared = Arc::new(BuildError::other("the API said no"));
        assert_eq!(
            copy_error(&shared).to_string(),
            "image builder error: the API said no"
        );
    }

    #[test]
    fn a_missing_builds_bucket_names_kinetic_up() {
        let c = CloudBuildConfig::new("proj", "europe-west4-b", "c1");
        let e = missing_builds_bucket(&c);
        assert!(e.is_invalid_input());
        let text = e.to_string();
        assert!(
            text.starts_with("the builds bucket gs://proj-kn-c1-builds does not exist"),
            "{text}"
        );
        assert!(text.contains("`kinetic up`"), "{text}");
    }

    #[test]
    fn last_lines_keeps_the_end() {
        assert_eq!(last_lines("a\nb\nc\n", 2), "b\nc");
        assert_eq!(last_lines("a\nb\n", 5), "a\nb");
        assert_eq!(last_lines("", 3), "");
    }

    #[test]
    fn config_names_follow_kinetic() {
        let c = CloudBuildConfig::new("proj", "europe-west4-b", "c1");
        assert_eq!(c.ar_location, "europe");
        assert_eq!(c.builds_bucket, "proj-kn-c1-builds");
        assert_eq!(
            c.service_account,
            "kn-c1-builds@proj.iam.gserviceaccount.com"
        );
        assert_eq!(c.logs_bucket_uri(), "gs://proj-kn-c1-builds/build-logs");
        assert_eq!(c.build_timeout, Duration::from_secs(1200));
    }
}
