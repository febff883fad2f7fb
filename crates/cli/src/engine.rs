//! The wiring: the process's environment and working directory, read once
//! at the edge ([`Invocation`]); settings resolved from them
//! ([`Invocation::settings`], `kinetic_core::settings`); and the engine and
//! the cloud clients built from those settings. Commands never read the
//! environment themselves.
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
//! - The infrastructure ([`infra`], for `up`, `down`, `status`, `pool`,
//!   `doctor`): the same tokens; the APIs' endpoints from the
//!   `*_endpoint` settings (Cloud Storage's from `gcs_endpoint`); the
//!   cluster's kubeconfig context written to the first `KUBECONFIG` file,
//!   else `~/.kube/config`; operations waited on up to
//!   `operation_timeout`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kinetic_backend_gke::{GkeBackend, GkeOptions};
use kinetic_backend_local::{LocalBackend, LocalOptions};
use kinetic_build_cloudbuild::{CloudBuildConfig, CloudBuildImageBuilder};
use kinetic_core::config::ProfileStore;
use kinetic_core::engine::Engine;
use kinetic_core::env::EnvSnapshot;
use kinetic_core::ports::{
    BuildError, FixedImage, ImageBuilder, ImageCapabilities, LazyImageBuilder, ObjectStore,
};
use kinetic_core::settings::{self, Settings, SettingsArgs, SettingsInput, vars};
use kinetic_gcp_common::{GcpTokenSource, StaticToken, TokenSource};
use kinetic_infra_gcp::{Endpoints, GcpInfra, GcpInfraConfig};
use kinetic_store_gcs::{GcsOptions, GcsStore};

use crate::error::{CliError, profile_error, settings_error};
use crate::render;

/// What the process gives the command: its environment and working
/// directory, read once in `main`.
#[derive(Debug)]
pub(crate) struct Invocation {
    env: EnvSnapshot,
    cwd: Result<PathBuf, String>,
    profile: Option<String>,
}

impl Invocation {
    /// The process's environment and working directory; `profile` is the
    /// global `--profile` flag.
    pub(crate) fn from_process(profile: Option<String>) -> Self {
        Self {
            env: EnvSnapshot::from_process(),
            cwd: std::env::current_dir().map_err(|e| e.to_string()),
            profile,
        }
    }

    /// The environment (settings read it; jobs capture from it).
    pub(crate) fn env(&self) -> &EnvSnapshot {
        &self.env
    }

    /// The working directory.
    pub(crate) fn cwd(&self) -> Result<&Path, CliError> {
        self.cwd
            .as_deref()
            .map_err(|e| CliError::failed(format!("cannot read the current directory: {e}")))
    }

    /// The home directory, as settings take it.
    pub(crate) fn home(&self) -> Option<PathBuf> {
        settings::home(&self.env)
    }

    /// `--profile` and the given target flags as settings arguments.
    pub(crate) fn args(&self) -> SettingsArgs {
        match &self.profile {
            Some(name) => SettingsArgs::new().profile(name),
            None => SettingsArgs::new(),
        }
    }

    /// The profiles file's path and what it holds.
    pub(crate) fn profiles(&self) -> Result<(PathBuf, ProfileStore), CliError> {
        let path = settings::profiles_file(&self.env)
            .map_err(|e| CliError::failed(e.to_string()))?
            .value;
        let store = ProfileStore::load(&path).map_err(profile_error)?;
        Ok((path, store))
    }

    /// Every setting, resolved once, with `args` (start from
    /// [`Invocation::args`]); warnings about unused values are printed.
    pub(crate) fn settings(&self, args: &SettingsArgs) -> Result<Settings, CliError> {
        let (_, profiles) = self.profiles()?;
        let cwd = self.cwd()?;
        let settings = Settings::resolve(args, &SettingsInput::new(&self.env, &profiles, cwd))
            .map_err(settings_error)?;
        for warning in &settings.warnings {
            render::warn(warning);
        }
        Ok(settings)
    }
}

/// GCS options from the settings: the endpoint, the credentials file.
fn gcs_options(settings: &Settings) -> GcsOptions {
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

/// The engine for this invocation: built from `settings`, capturing job
/// environments from the invocation's.
pub(crate) fn build(settings: &Settings, invocation: &Invocation) -> Result<Engine, CliError> {
    let root = settings.local_root().map_err(settings_error)?;
    let store_url = settings.store_url().map_err(settings_error)?;
    let gcs = GcsStore::open(&store_url.value, &gcs_options(settings))
        .map_err(|e| CliError::usage(format!("{}: {e}", vars::STORE_URL)))?;
    let store: Arc<dyn ObjectStore> = Arc::new(gcs);

    let mut local = LocalOptions::new(root.value.clone());
    if let Some(n) = &settings.local_max_concurrent {
        local = local.max_concurrent(n.value);
    }
    let backend =
        LocalBackend::new(local, store.clone()).map_err(|e| CliError::failed(e.to_string()))?;
    let mut builder = Engine::builder()
        .settings(settings.engine())
        .store(store)
        .env_snapshot(invocation.env().clone())
        .backend(Arc::new(backend));
    if let Some(gke) = gke_backend(settings) {
        builder = builder.backend(Arc::new(gke));
    }
    if let Some(image) = &settings.image {
        let fixed = FixedImage::new(&image.value)
            .map_err(|e| CliError::usage(format!("{}: {e}", vars::IMAGE)))?
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
        .map_err(|e| CliError::failed(e.to_string()))
}

/// The Cloud Build builder for the configured project's cluster.
/// `needs_store`: whether build contexts will be uploaded (otherwise no
/// bucket is opened).
pub(crate) fn cloud_builder(
    settings: &Settings,
    needs_store: bool,
) -> Result<CloudBuildImageBuilder, CliError> {
    let project = settings.project.as_ref().ok_or_else(|| {
        CliError::usage(
            "building images needs a project: set --project, KINETIC_PROJECT or a profile",
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
                CliError::usage(format!("no builds bucket: set {}", vars::BUILDS_STORE_URL))
            })?
    } else {
        // `image resolve` uploads nothing: no bucket to open.
        "memory://".to_owned()
    };
    let store: Arc<dyn ObjectStore> = Arc::new(
        GcsStore::open(&store_url, &gcs_options(settings)).map_err(|e| {
            CliError::usage(format!(
                "builds bucket {store_url}: {e} (set {} to the bucket's store URL)",
                vars::BUILDS_STORE_URL
            ))
        })?,
    );
    CloudBuildImageBuilder::new(config, tokens, store).map_err(|e| CliError::failed(e.to_string()))
}

/// Tokens for the Google APIs: the `access_token` setting, else
/// Application Default Credentials (`bucket` only satisfies the GCS
/// client that provides them; nothing is sent to it).
fn tokens(settings: &Settings, bucket: &str) -> Arc<dyn TokenSource> {
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

/// The configured cluster's infrastructure on Google Cloud.
pub(crate) fn infra(settings: &Settings) -> Result<GcpInfra, CliError> {
    let desired = kinetic_core::infra::Desired::from_settings(settings)
        .map_err(crate::error::core_infra_error)?;
    let mut endpoints = Endpoints::default();
    for (endpoint, setting) in [
        (&mut endpoints.container, &settings.container_endpoint),
        (&mut endpoints.iam, &settings.iam_endpoint),
        (
            &mut endpoints.resourcemanager,
            &settings.resourcemanager_endpoint,
        ),
        (&mut endpoints.serviceusage, &settings.serviceusage_endpoint),
        (
            &mut endpoints.artifactregistry,
            &settings.artifactregistry_endpoint,
        ),
        (&mut endpoints.storage, &settings.gcs_endpoint),
    ] {
        if let Some(s) = setting {
            endpoint.clone_from(&s.value);
        }
    }
    let mut config = GcpInfraConfig::default().endpoints(endpoints);
    if let Some(k) = &settings.kubeconfig {
        config = config.kubeconfig(kinetic_infra_gcp::kubeconfig::path(&k.value));
    }
    if let Some(t) = &settings.operation_timeout {
        config = config.operation_timeout(t.value);
    }
    let tokens = tokens(settings, &desired.target.names.jobs_bucket);
    GcpInfra::new(desired, config, tokens).map_err(crate::error::infra_error)
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

/// A runtime for one command.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(format!("cannot start the async runtime: {e}")))
}
