//! The wiring every program embedding Kinetic needs: the engine and its
//! adapters built from resolved [`Settings`] (`kinetic_core::settings`).
//! The `kinetic` command line and the Python module both build their
//! engines here, so a setting means the same thing in both.
//!
//! - Store: the one the jobs' backend uses (`Settings::store_for`): the
//!   `store_url` setting (`KINETIC_STORE_URL`: `file:///dir`, `memory://`,
//!   `gs://bucket[/prefix]`, or a bare `gs://` for the configured cluster's
//!   jobs bucket); else `file://{local root}/store` for local jobs and the
//!   cluster's jobs bucket for gke jobs, which refuse a local store.
//!   `gs://` uses Application Default Credentials, or the `gcs_endpoint`
//!   setting without auth (tests, emulators; the runner reads the same
//!   variable).
//! - Backends: `local` (always, in the `local_root` setting); the default for
//!   single-host jobs is the `backend` setting.
//! - `gke` and `pathways`, registered when a kubeconfig is there
//!   (`KUBECONFIG`, else `~/.kube/config`); they connect on first use, to
//!   the `kube_context`
//!   setting's context (the configured cluster's
//!   `gke_{project}_{zone}_{cluster}`, else the current one), in the
//!   configured namespace, with the `pending_deadline` setting. Jobs sent
//!   to them without a kubeconfig are refused with what to run. A
//!   multi-host TPU slice goes to `pathways` unless a backend is named.
//! - Image without `KINETIC_IMAGE` and without a project: prebuilt and
//!   custom images (no build); a bundled one names the missing project.
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

pub mod debug;

use std::path::PathBuf;
use std::sync::Arc;

use kinetic_backend_gke::JobKind;
use kinetic_backend_local::{LocalBackend, LocalOptions};
use kinetic_backend_pathways::LwsKind;
use kinetic_build_cloudbuild::{CloudBuildConfig, CloudBuildImageBuilder, PrebuiltImages};
use kinetic_core::advice::{self, Advice, FrontEnd};
use kinetic_core::env::EnvSnapshot;
use kinetic_core::ports::{
    BackendError, BuildError, FixedImage, ImageBuilder, ImageCapabilities, ObjectStore,
};
use kinetic_core::settings::{self, Settings, vars};
use kinetic_engine::Engine;
use kinetic_engine::layers::LazyImageBuilder;
use kinetic_gcp_common::{GcpTokenSource, StaticToken, TokenSource};
use kinetic_kube::{KubeBackend, KubeOptions, Workload};
use kinetic_store_gcs::{GcsOptions, GcsStore};

/// Why an engine or builder could not be made: a setting the user must fix
/// ([`WiringError::Usage`]), or a failure setting up an adapter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WiringError {
    /// A setting that cannot be used; the message names it and what is accepted.
    #[error("{0}")]
    Usage(String),
    /// A setting that cannot be used, with advice on what to set that each
    /// front end renders its own way ([`WiringError::message_for`]); the
    /// `Display` is the command line's.
    #[error(
        "{}",
        advice::with_advice(message, Some(advice), FrontEnd::CommandLine)
    )]
    Advised {
        /// What cannot be used.
        message: String,
        /// What to set instead.
        advice: Advice,
    },
    /// An adapter that could not be set up.
    #[error("{0}")]
    Failed(String),
}

impl WiringError {
    /// Whether the user's settings are at fault.
    pub fn is_usage(&self) -> bool {
        matches!(self, Self::Usage(_) | Self::Advised { .. })
    }

    /// The error as `front` shows it: its advice names the settings as
    /// that front end does.
    pub fn message_for(&self, front: FrontEnd) -> String {
        match self {
            Self::Advised { message, advice } => advice::with_advice(message, Some(advice), front),
            other => other.to_string(),
        }
    }

    /// A settings error as a usage error, keeping its advice as data.
    fn from_settings(e: &settings::SettingsError) -> Self {
        match e.advised() {
            Some((message, advice)) => Self::Advised { message, advice },
            None => Self::Usage(e.to_string()),
        }
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

/// A Kubernetes backend of workload kind `W` (`gke`'s Jobs, `pathways`'
/// LeaderWorkerSets) when a kubeconfig is there.
fn kube_backend<W: Workload + Default>(
    settings: &Settings,
    store: Option<Arc<dyn ObjectStore>>,
) -> Option<KubeBackend<W>> {
    let kubeconfig = settings.kubeconfig.as_ref()?;
    let from_env = kubeconfig.source == settings::Source::Env(vars::KUBECONFIG);
    let path = PathBuf::from(&kubeconfig.value);
    if !from_env && !path.is_file() {
        return None;
    }
    let mut options = KubeOptions::new(&settings.namespace.value);
    if let Some(deadline) = &settings.pending_deadline {
        options = options.pending_deadline(deadline.value);
    }
    // The jobs' store: where the backend reads a batch's block markers.
    if let Some(store) = store {
        options = options.store(store);
    }
    // KUBECONFIG may list several files; kube merges them itself.
    let single = !(from_env && kubeconfig.value.contains(':'));
    Some(KubeBackend::from_kubeconfig(
        single.then_some(path),
        settings.kube_context.as_ref().map(|c| c.value.clone()),
        options,
    ))
}

/// Why the cluster backend `backend` (`gke`, `pathways`) cannot be set up,
/// if it cannot: no kubeconfig.
fn kube_missing(settings: &Settings, backend: &str) -> Option<String> {
    if kube_backend::<JobKind>(settings, None).is_some() {
        return None;
    }
    let get_credentials = match &settings.project {
        Some(p) => format!(
            "gcloud container clusters get-credentials {} --zone {} --project {}",
            settings.cluster.value, settings.zone.value, p.value
        ),
        None => "gcloud container clusters get-credentials CLUSTER --zone ZONE --project PROJECT"
            .to_owned(),
    };
    let looked = settings.kubeconfig.as_ref().map_or_else(
        || "no HOME to find ~/.kube/config in".to_owned(),
        |k| format!("none at {}", k.value),
    );
    Some(format!(
        "the {backend} backend needs a kubeconfig for the cluster, and there is {looked} ({} is not set): run `{get_credentials}` (or `kinetic up` to create the cluster), or set {} to your kubeconfig",
        vars::KUBECONFIG,
        vars::KUBECONFIG
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
    /// The backend the jobs go to, whose store the engine uses
    /// ([`Settings::store_for`]; default: the `backend` setting).
    pub backend: Option<String>,
}

impl EngineOptions {
    /// Jobs go to `backend`: the engine uses the store its jobs use.
    #[must_use]
    pub fn backend(mut self, backend: impl Into<String>) -> Self {
        self.backend = Some(backend.into());
        self
    }

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
    let backend = options
        .backend
        .as_deref()
        .unwrap_or(&settings.backend.value);
    if settings::is_remote(backend)
        && let Some(why) = kube_missing(settings, backend)
    {
        return Err(WiringError::Usage(why));
    }
    let root = settings
        .local_root()
        .map_err(|e| WiringError::Usage(e.to_string()))?;
    let store_url = settings
        .store_for(backend)
        .map_err(|e| WiringError::from_settings(&e))?;
    // A store URL derived from the local root is that setting's fault.
    let store_setting =
        if store_url.source == settings::Source::Default && !settings::is_remote(backend) {
            format!("{}={}", vars::LOCAL_ROOT, root.value.display())
        } else {
            vars::STORE_URL.to_owned()
        };
    let gcs = GcsStore::open(&store_url.value, &gcs_options(settings))
        .map_err(|e| WiringError::Usage(format!("{store_setting}: {e}")))?;
    let store: Arc<dyn ObjectStore> = Arc::new(gcs);

    let mut local = LocalOptions::new(root.value.clone());
    // The runner reads the store where this process does.
    if let Some(endpoint) = &settings.gcs_endpoint {
        local = local.runner_env(vars::GCS_ENDPOINT, &endpoint.value);
    }
    if let Some(n) = &settings.local_max_concurrent {
        local = local.max_concurrent(n.value);
    }
    if let Some(n) = &settings.local_gpus {
        local = local.gpus(n.value);
    }
    if let Some(python) = &options.local_python {
        local = local.python(python);
    }
    let backend = LocalBackend::new(local, store.clone()).map_err(|e| match e {
        // The store, not the machine, is what cannot work: a usage error
        // naming the setting that chose it.
        BackendError::Unsupported { .. } => {
            WiringError::Usage(format!("{}={}: {e}", vars::STORE_URL, store_url.value))
        }
        // The root cannot be made or written: name the setting when the
        // user chose it.
        e if root.source == settings::Source::Env(vars::LOCAL_ROOT) => {
            WiringError::Failed(format!("{}: {e}", vars::LOCAL_ROOT))
        }
        e => WiringError::Failed(e.to_string()),
    })?;
    let mut builder = Engine::builder()
        .settings(settings.engine())
        .store(store.clone())
        .env_snapshot(env)
        .backend(Arc::new(backend));
    if let Some(gke) = kube_backend::<JobKind>(settings, Some(store.clone())) {
        builder = builder.backend(Arc::new(gke));
    }
    if let Some(pathways) = kube_backend::<LwsKind>(settings, Some(store.clone())) {
        builder = builder.backend(Arc::new(pathways));
    }
    if let Some(image) = &settings.image {
        let fixed = FixedImage::new(&image.value)
            .map_err(|e| WiringError::Usage(format!("{}: {e}", vars::IMAGE)))?
            .with_origin(vars::IMAGE);
        builder = builder.image_builder(Arc::new(fixed));
    } else if settings.project.is_some() {
        builder = builder.image_builder(Arc::new(lazy_cloud_build(settings.clone())));
    } else {
        // Prebuilt and custom images need no project; a bundled one says
        // which setting it lacks.
        builder = builder.image_builder(Arc::new(PrebuiltImages::default()));
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
