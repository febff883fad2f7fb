//! The wiring: the process's environment and working directory, read once
//! at the edge ([`Invocation`]); settings resolved from them
//! ([`Invocation::settings`], `kinetic_core::settings`); and the engine and
//! the cloud clients built from those settings. Commands never read the
//! environment themselves.
//!
//! - The engine (store, backends, image builder) and the Cloud Build
//!   builder: built by `kinetic_wiring`, which the Python module shares, so
//!   a setting means the same in both.
//! - The infrastructure ([`infra`], for `up`, `down`, `status`, `pool`,
//!   `doctor`): the same tokens; the APIs' endpoints from the
//!   `*_endpoint` settings (Cloud Storage's from `gcs_endpoint`); the
//!   cluster's kubeconfig context written to the first `KUBECONFIG` file,
//!   else `~/.kube/config`; operations waited on up to
//!   `operation_timeout`.

use std::path::{Path, PathBuf};

use kinetic_build_cloudbuild::CloudBuildImageBuilder;
use kinetic_core::config::ProfileStore;
use kinetic_core::env::EnvSnapshot;
use kinetic_core::settings::{self, Settings, SettingsArgs, SettingsInput};
use kinetic_engine::Engine;
use kinetic_infra_gcp::{Endpoints, GcpInfra, GcpInfraConfig};

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

    /// The settings as [`Invocation::settings`] resolves them, without
    /// printing their warnings again (a second look, after a failure).
    pub(crate) fn settings_quiet(&self, args: &SettingsArgs) -> Result<Settings, CliError> {
        let (_, profiles) = self.profiles()?;
        let cwd = self.cwd()?;
        Settings::resolve(args, &SettingsInput::new(&self.env, &profiles, cwd))
            .map_err(settings_error)
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

/// A wiring error as the command line reports it.
fn wiring_error(e: kinetic_wiring::WiringError) -> CliError {
    if e.is_usage() {
        CliError::usage(e.to_string())
    } else {
        CliError::failed(e.to_string())
    }
}

/// The engine for this invocation: built from `settings` by
/// [`kinetic_wiring::engine`], capturing job environments from the
/// invocation's.
pub(crate) fn build(settings: &Settings, invocation: &Invocation) -> Result<Engine, CliError> {
    kinetic_wiring::engine(settings, invocation.env().clone()).map_err(wiring_error)
}

/// The engine for jobs that go to `backend`, with the store that
/// backend's jobs use ([`kinetic_wiring::EngineOptions::backend`]).
pub(crate) fn build_for(
    settings: &Settings,
    invocation: &Invocation,
    backend: &str,
) -> Result<Engine, CliError> {
    let options = kinetic_wiring::EngineOptions::default().backend(backend);
    kinetic_wiring::engine_with(settings, invocation.env().clone(), &options).map_err(wiring_error)
}

/// The Cloud Build builder for the configured project's cluster
/// ([`kinetic_wiring::cloud_builder`]). `needs_store`: whether build
/// contexts will be uploaded (otherwise no bucket is opened).
pub(crate) fn cloud_builder(
    settings: &Settings,
    needs_store: bool,
) -> Result<CloudBuildImageBuilder, CliError> {
    kinetic_wiring::cloud_builder(settings, needs_store).map_err(wiring_error)
}

/// The configured cluster's infrastructure on Google Cloud.
pub(crate) fn infra(settings: &Settings) -> Result<GcpInfra, CliError> {
    let desired = kinetic_infra_gcp::model::Desired::from_settings(settings)
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
    // A call tried again says so at once, rather than the command seeming
    // to hang while its retries run.
    let mut config = GcpInfraConfig::default().endpoints(endpoints).on_retry(
        kinetic_infra_gcp::RetryNotice::new(|line| {
            render::notice(true, line);
        }),
    );
    if let Some(k) = &settings.kubeconfig {
        config = config.kubeconfig(kinetic_infra_gcp::kubeconfig::path(&k.value));
    }
    if let Some(t) = &settings.operation_timeout {
        config = config.operation_timeout(t.value);
    }
    let tokens = kinetic_wiring::tokens(settings, &desired.target.names.jobs_bucket);
    GcpInfra::new(desired, config, tokens).map_err(crate::error::infra_error)
}

/// A runtime for one command.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(format!("cannot start the async runtime: {e}")))
}
