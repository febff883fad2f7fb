//! Building the engine the CLI runs jobs with, from the resolved
//! configuration and the environment.
//!
//! - Store: `KINETIC_STORE_URL` (`file:///dir`, `memory://`,
//!   `gs://bucket[/prefix]`, or a bare `gs://` for the configured cluster's
//!   jobs bucket `{project}-kn-{cluster}-jobs`), else the local default
//!   `file://{local root}/store`. `gs://` uses Application Default
//!   Credentials, or `KINETIC_GCS_ENDPOINT` without auth (tests, emulators;
//!   the runner reads the same variable).
//! - Local root: `KINETIC_LOCAL_ROOT`, else `~/.kinetic/local`.
//! - Backends: `local` (always); the default for single-host jobs is
//!   `KINETIC_BACKEND`, else `local`.
//! - `gke`, registered when a kubeconfig is there (`KUBECONFIG`, else
//!   `~/.kube/config`); it connects on first use, in the configured
//!   namespace. Its default pending deadline is
//!   `KINETIC_PENDING_DEADLINE` seconds (else 15 minutes).
//! - Image: `KINETIC_IMAGE` names one prebuilt image every job runs in
//!   (it must hold the runner at `/app/kinetic_runner.py`); a bundled job
//!   whose project has requirements is refused with it, since they cannot
//!   be baked in (`--container-image prebuilt` installs them at start).
//!   Otherwise, when a project is configured, images are resolved (and
//!   built on a miss) by Cloud Build in the cluster's Artifact Registry
//!   repository. The builder is set up on the first job that needs an
//!   image, so local runs never touch Google credentials.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kinetic_backend_gke::{GkeBackend, GkeOptions};
use kinetic_backend_local::{LocalBackend, LocalOptions};
use kinetic_core::config::{self as core_config, ProcessEnv, ProfileStore};
use kinetic_core::engine::{Engine, EngineSettings};
use kinetic_core::ports::{
    BuildError, FixedImage, ImageBuilder, ImageCapabilities, LazyImageBuilder, ObjectStore,
};
use kinetic_store_gcs::{GcsOptions, GcsStore};

use crate::commands::config::config_error;
use crate::output::CliError;

/// Environment variables the CLI's engine reads.
pub(crate) mod vars {
    /// Where the local backend keeps its state.
    pub(crate) const LOCAL_ROOT: &str = "KINETIC_LOCAL_ROOT";
    /// The jobs store URL.
    pub(crate) const STORE_URL: &str = "KINETIC_STORE_URL";
    /// The backend for jobs that name none.
    pub(crate) const BACKEND: &str = "KINETIC_BACKEND";
    /// Jobs the local backend runs at once.
    pub(crate) const LOCAL_MAX_CONCURRENT: &str = "KINETIC_LOCAL_MAX_CONCURRENT";
    /// The kubeconfig of the cluster the `gke` backend uses.
    pub(crate) const KUBECONFIG: &str = "KUBECONFIG";
    /// One image for every job (instead of a build).
    pub(crate) const IMAGE: &str = "KINETIC_IMAGE";
    /// The `gke` backend's default pending deadline, in seconds.
    pub(crate) const PENDING_DEADLINE: &str = "KINETIC_PENDING_DEADLINE";
}

/// The `gke` backend when a kubeconfig is there: `KUBECONFIG`, else `~/.kube/config`.
fn gke_backend(namespace: &str) -> Result<Option<GkeBackend>, CliError> {
    let path = match non_empty(vars::KUBECONFIG) {
        Some(p) => Some(PathBuf::from(p)),
        None => non_empty("HOME")
            .map(|h| PathBuf::from(h).join(".kube").join("config"))
            .filter(|p| p.is_file()),
    };
    let Some(path) = path else {
        return Ok(None);
    };
    let mut options = GkeOptions::new(namespace);
    if let Some(s) = non_empty(vars::PENDING_DEADLINE) {
        let secs: f64 = s.parse().ok().filter(|v: &f64| *v > 0.0).ok_or_else(|| {
            CliError::usage(format!(
                "{}={s:?} is not accepted: expected a positive number of seconds",
                vars::PENDING_DEADLINE
            ))
        })?;
        options = options.pending_deadline(Duration::from_secs_f64(secs));
    }
    // KUBECONFIG may list several files; kube merges them itself.
    let single = non_empty(vars::KUBECONFIG).is_none_or(|v| !v.contains(':'));
    Ok(Some(GkeBackend::from_kubeconfig(
        single.then_some(path),
        None,
        options,
    )))
}

fn non_empty(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

fn local_root() -> Result<PathBuf, CliError> {
    if let Some(root) = non_empty(vars::LOCAL_ROOT) {
        return Ok(PathBuf::from(root));
    }
    let home = non_empty("HOME").ok_or_else(|| {
        CliError::failed(format!(
            "cannot find the home directory for ~/.kinetic/local: set HOME or {}",
            vars::LOCAL_ROOT
        ))
    })?;
    Ok(PathBuf::from(home).join(".kinetic").join("local"))
}

/// The engine for this invocation.
pub(crate) fn build(profile: Option<&str>) -> Result<Engine, CliError> {
    let path =
        core_config::profiles_path(&ProcessEnv).map_err(|e| CliError::failed(e.to_string()))?;
    let profiles = ProfileStore::load(&path).map_err(|e| CliError::failed(e.to_string()))?;
    let args = match profile {
        Some(name) => core_config::ConfigArgs::new().profile(name),
        None => core_config::ConfigArgs::new(),
    };
    let cfg = core_config::resolve_partial(&args, &ProcessEnv, &profiles).map_err(config_error)?;

    let root = local_root()?;
    let mut store_url = non_empty(vars::STORE_URL)
        .unwrap_or_else(|| format!("file://{}", root.join("store").display()));
    if store_url == "gs://" {
        let names = cfg.names().ok_or_else(|| {
            CliError::usage(format!(
                "{}=gs:// names the configured cluster's jobs bucket, but no project is configured: set KINETIC_PROJECT or a profile, or give gs://bucket",
                vars::STORE_URL
            ))
        })?;
        store_url = format!("gs://{}", names.jobs_bucket);
    }
    let gcs = GcsStore::open(&store_url, &GcsOptions::from_env())
        .map_err(|e| CliError::usage(format!("{}: {e}", vars::STORE_URL)))?;
    let store_bucket = store_url
        .strip_prefix("gs://")
        .map(|rest| rest.split('/').next().unwrap_or(rest).to_owned());
    let store: Arc<dyn ObjectStore> = Arc::new(gcs);

    let mut settings = match cfg.names() {
        Some(names) => {
            let mut s = EngineSettings::for_cluster(
                &cfg.project
                    .as_ref()
                    .map(|p| p.value.clone())
                    .unwrap_or_default(),
                &cfg.zone.value,
                &cfg.cluster.value,
                &cfg.namespace.value,
            );
            s.bucket_name = names.jobs_bucket;
            s
        }
        None => EngineSettings::default(),
    };
    if let Some(bucket) = store_bucket {
        settings.bucket_name = bucket;
    } else if settings.bucket_name.is_empty() {
        settings.bucket_name = store_url.clone();
    }
    settings.namespace = cfg.namespace.value.clone();

    let mut local = LocalOptions::new(root);
    if let Some(n) = non_empty(vars::LOCAL_MAX_CONCURRENT) {
        let n: usize = n.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
            CliError::usage(format!(
                "{}={n:?} is not accepted: expected a positive integer",
                vars::LOCAL_MAX_CONCURRENT
            ))
        })?;
        local = local.max_concurrent(n);
    }
    let backend =
        LocalBackend::new(local, store.clone()).map_err(|e| CliError::failed(e.to_string()))?;
    let default_backend = non_empty(vars::BACKEND).unwrap_or_else(|| "local".to_owned());
    let gke = gke_backend(&settings.namespace)?;
    let mut builder = Engine::builder()
        .settings(settings)
        .store(store)
        .backend(Arc::new(backend));
    if let Some(gke) = gke {
        builder = builder.backend(Arc::new(gke));
    }
    if let Some(image) = non_empty(vars::IMAGE) {
        let fixed = FixedImage::new(&image)
            .map_err(|e| CliError::usage(format!("{}: {e}", vars::IMAGE)))?
            .with_origin(vars::IMAGE);
        builder = builder.image_builder(Arc::new(fixed));
    } else if let Some(project) = &cfg.project {
        builder = builder.image_builder(Arc::new(lazy_cloud_build(
            project.value.clone(),
            cfg.zone.value.clone(),
            cfg.cluster.value.clone(),
        )));
    }
    builder
        .default_backend(&default_backend)
        .spawner(|driver| {
            tokio::spawn(driver);
        })
        .build()
        .map_err(|e| CliError::failed(e.to_string()))
}

/// The Cloud Build image builder, set up when the first image is needed.
fn lazy_cloud_build(project: String, zone: String, cluster: String) -> LazyImageBuilder {
    LazyImageBuilder::new(ImageCapabilities::building(), move || {
        let made = crate::commands::image::cloud_builder(&project, &zone, &cluster, true)
            .map(|builder| Arc::new(builder) as Arc<dyn ImageBuilder>)
            .map_err(|e| BuildError::InvalidInput {
                message: format!("cannot set up Cloud Build: {e}"),
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
