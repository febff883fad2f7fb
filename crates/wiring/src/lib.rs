//! The wiring every program embedding Kinetic needs: the engine and its
//! adapters built from resolved [`Settings`] (`kinetic_core::settings`).
//! The `kinetic` command line and the Python module both build their
//! engines here, so a setting means the same thing in both.
//!
//! - Store: the `store_url` setting (`KINETIC_STORE_URL`: `file:///dir`,
//!   `memory://`, `gs://bucket[/prefix]`, or a bare `gs://` for the
//!   configured cluster's jobs bucket; default `file://{local root}/store`).
//!   `gs://` uses Application Default Credentials, or the `gcs_endpoint`
//!   setting without auth (tests, emulators; the runner reads the same
//!   variable).
//! - Backends: `local` (always, in the `local_root` setting); the default for
//!   single-host jobs is the `backend` setting.
//! - `gke`, registered when a kubeconfig is there (`KUBECONFIG`, else
//!   `~/.kube/config`); it connects on first use, in the configured
//!   namespace, with the `pending_deadline` setting.
//! - Image: the `image` setting (`KINETIC_IMAGE`) names one prebuilt image
//!   every job runs in (it must hold the runner at `/app/kinetic_runner.py`);
//!   a bundled job whose project has requirements is refused with it, since
//!   they cannot be baked in (`--container-image prebuilt` installs them at
//!   start). Otherwise, when a project is configured, images are resolved
//!   (and built on a miss) by Cloud Build in the cluster's Artifact Registry
//!   repository. The builder is set up on the first job that needs an
//!   image, so local runs never touch Google credentials.
//! - Cloud Build and Artifact Registry ([`cloud_builder`]): tokens from the
//!   `access_token` setting, else Application Default Credentials; endpoints
//!   from the `cloudbuild_endpoint` and `artifactregistry_endpoint` settings
//!   (test servers); the builds bucket from `builds_store_url`.
//!
//! ```no_run
//! # fn demo(settings: &kinetic_core::settings::Settings) -> Result<(), kinetic_wiring::WiringError> {
//! use kinetic_core::env::EnvSnapshot;
//! // Inside a tokio runtime (batches run their submissions on it).
//! let engine = kinetic_wiring::engine(settings, EnvSnapshot::from_process())?;
//! # Ok(()) }
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use kinetic_backend_gke::{GkeBackend, GkeOptions};
use kinetic_backend_local::{LocalBackend, LocalOptions};
use kinetic_build_cloudbuild::{CloudBuildConfig, CloudBuildImageBuilder};
use kinetic_core::engine::Engine;
use kinetic_core::env::EnvSnapshot;
use kinetic_core::ports::{
    BuildError, FixedImage, ImageBuilder, ImageCapabilities, LazyImageBuilder, ObjectStore,
};
use kinetic_core::settings::{self, Settings, vars};
use kinetic_gcp_common::{GcpTokenSource, StaticToken, TokenSource};
use kinetic_store_gcs::{GcsOptions, GcsStore};

/// Why an engine or builder could not be made: a setting the user must fix
/// ([`WiringError::Usage`]), or a failure setting up an adapter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WiringError {
    /// A setting that cannot be used; the message names it and what is accepted.
    #[error("{0}")]
    Usage(String),
    /// An adapter that could not be set up.
    #[error("{0}")]
    Failed(String),
}

impl WiringError {
    /// Whether the user's settings are at fault.
    pub fn is_usage(&self) -> bool {
        matches!(self, Self::Usage(_))
    }
}

/// GCS options from the settings: the endpoint, the credentials file.
pub fn gcs_options(settings: &Settings) -> GcsOptions {
    let mut options = GcsOptions::default();
    if let Some(endpoint) = &settings.gcs_endpoint {
        options = options.with_endpoint(&endpoint.value);
    }
    if let Some(file) = &settings.application_credentials {
        options = options.with_application_credentials(&file.value);
    }
    options
}

/// The `gke` backend when a kubeconfig is there.
fn gke_backend(settings: &Settings) -> Option<GkeBackend> {
    let kubeconfig = settings.kubeconfig.as_ref()?;
    let from_env = kubeconfig.source == settings::Source::Env(vars::KUBECONFIG);
    let path = PathBuf::from(&kubeconfig.value);
    if !from_env && !path.is_file() {
        return None;
    }
    let mut options = GkeOptions::new(&settings.namespace.value);
    if let Some(deadline) = &settings.pending_deadline {
        options = options.pending_deadline(deadline.value);
    }
    // KUBECONFIG may list several files; kube merges them itself.
    let single = !(from_env && kubeconfig.value.contains(':'));
    Some(GkeBackend::from_kubeconfig(
        single.then_some(path),
        settings.kube_context.as_ref().map(|c| c.value.clone()),
        options,
    ))
}

/// The engine for `settings`, capturing job environments from `env`.
/// Batches run their submission loops with `tokio::spawn`: call it, and use
/// the engine, inside a tokio runtime (see [`runtime`]).
pub fn engine(settings: &Settings, env: EnvSnapshot) -> Result<Engine, WiringError> {
    engine_with(settings, env, &EngineOptions::default())
}

/// What an embedding program may choose beyond the settings.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct EngineOptions {
    /// The interpreter the local backend runs jobs with (default `python3`
    /// on `PATH`); the Python module passes its own, so local jobs see the
    /// packages the caller sees.
    pub local_python: Option<PathBuf>,
}

impl EngineOptions {
    /// Run local jobs with `python`.
    #[must_use]
    pub fn local_python(mut self, python: impl Into<PathBuf>) -> Self {
        self.local_python = Some(python.into());
        self
    }
}

/// [`engine`] with the embedding program's [`EngineOptions`].
pub fn engine_with(
    settings: &Settings,
    env: EnvSnapshot,
    options: &EngineOptions,
) -> Result<Engine, WiringError> {
    let root = settings
        .local_root()
        .map_err(|e| WiringError::Usage(e.to_string()))?;
    let store_url = settings
        .store_url()
        .map_err(|e| WiringError::Usage(e.to_string()))?;
    let gcs = GcsStore::open(&store_url.value, &gcs_options(settings))
        .map_err(|e| WiringError::Usage(format!("{}: {e}", vars::STORE_URL)))?;
    let store: Arc<dyn ObjectStore> = Arc::new(gcs);

    let mut local = LocalOptions::new(root.value.clone());
    if let Some(n) = &settings.local_max_concurrent {
        local = local.max_concurrent(n.value);
    }
    if let Some(python) = &options.local_python {
        local = local.python(python);
    }
    let backend =
        LocalBackend::new(local, store.clone()).map_err(|e| WiringError::Failed(e.to_string()))?;
    let mut builder = Engine::builder()
        .settings(settings.engine())
        .store(store)
        .env_snapshot(env)
        .backend(Arc::new(backend));
    if let Some(gke) = gke_backend(settings) {
        builder = builder.backend(Arc::new(gke));
    }
    if let Some(image) = &settings.image {
        let fixed = FixedImage::new(&image.value)
            .map_err(|e| WiringError::Usage(format!("{}: {e}", vars::IMAGE)))?
            .with_origin(vars::IMAGE);
        builder = builder.image_builder(Arc::new(fixed));
    } else if settings.project.is_some() {
        builder = builder.image_builder(Arc::new(lazy_cloud_build(settings.clone())));
    }
    builder
        .default_backend(&settings.backend.value)
        .spawner(|driver| {
            tokio::spawn(driver);
        })
        .build()
        .map_err(|e| WiringError::Failed(e.to_string()))
}

/// The Cloud Build builder for the configured project's cluster.
/// `needs_store`: whether build contexts will be uploaded (otherwise no
/// bucket is opened).
pub fn cloud_builder(
    settings: &Settings,
    needs_store: bool,
) -> Result<CloudBuildImageBuilder, WiringError> {
    let project = settings.project.as_ref().ok_or_else(|| {
        WiringError::Usage(
            "building images needs a project: set --project, KINETIC_PROJECT or a profile".into(),
        )
    })?;
    let mut config = CloudBuildConfig::new(
        &project.value,
        &settings.zone.value,
        &settings.cluster.value,
    );
    if let Some(e) = &settings.cloudbuild_endpoint {
        config.cloudbuild_endpoint.clone_from(&e.value);
    }
    if let Some(e) = &settings.artifactregistry_endpoint {
        config.artifactregistry_endpoint.clone_from(&e.value);
    }
    let tokens = tokens(settings, &config.builds_bucket);
    let store_url = if needs_store {
        settings
            .builds_store_url
            .as_ref()
            .map(|url| url.value.clone())
            .ok_or_else(|| {
                WiringError::Usage(format!("no builds bucket: set {}", vars::BUILDS_STORE_URL))
            })?
    } else {
        // Resolving an image tag uploads nothing: no bucket to open.
        "memory://".to_owned()
    };
    let store: Arc<dyn ObjectStore> = Arc::new(
        GcsStore::open(&store_url, &gcs_options(settings)).map_err(|e| {
            WiringError::Usage(format!(
                "builds bucket {store_url}: {e} (set {} to the bucket's store URL)",
                vars::BUILDS_STORE_URL
            ))
        })?,
    );
    CloudBuildImageBuilder::new(config, tokens, store)
        .map_err(|e| WiringError::Failed(e.to_string()))
}

/// Tokens for the Google APIs: the `access_token` setting, else
/// Application Default Credentials (`bucket` only satisfies the GCS
/// client that provides them; nothing is sent to it).
pub fn tokens(settings: &Settings, bucket: &str) -> Arc<dyn TokenSource> {
    match &settings.access_token {
        Some(token) => Arc::new(StaticToken::new(token.value.expose())),
        None => Arc::new(GcpTokenSource::application_default(
            bucket,
            settings
                .application_credentials
                .as_ref()
                .map(|f| f.value.clone()),
        )),
    }
}

/// The Cloud Build image builder, set up when the first image is needed.
fn lazy_cloud_build(settings: Settings) -> LazyImageBuilder {
    LazyImageBuilder::new(ImageCapabilities::building(), move || {
        let made = cloud_builder(&settings, true)
            .map(|builder| Arc::new(builder) as Arc<dyn ImageBuilder>)
            .map_err(|e| {
                let message = format!("cannot set up Cloud Build: {e}");
                if e.is_usage() {
                    BuildError::invalid_input(message)
                } else {
                    BuildError::other(message)
                }
            });
        async move { made }
    })
}

/// A multi-threaded runtime with IO and timers, as the adapters need.
pub fn runtime() -> Result<tokio::runtime::Runtime, WiringError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| WiringError::Failed(format!("cannot start the async runtime: {e}")))
}
