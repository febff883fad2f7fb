//! Every setting the program reads, resolved once, with where each value
//! came from.
//!
//! [`Settings::resolve`] takes everything it reads as values — explicit
//! arguments ([`SettingsArgs`]), an environment lookup, the loaded profiles
//! and the working directory ([`SettingsInput`]) — and touches no process
//! state, so the embedding program reads its environment once, at its edge,
//! and the engine and the command line take their settings from here. Each
//! value is a [`Setting`] with its [`Source`]: an argument beats a
//! `KINETIC_*` variable (an empty one counts as unset), which beats the
//! active profile (project, zone, cluster and namespace only), which beats
//! the default.
//!
//! A value that cannot be used is an error naming the variable and what is
//! accepted ([`SettingsError::Invalid`]), never silently replaced; the one
//! exception is Kinetic's own rule for `KINETIC_CONTEXT_SIZE_WARN_MB`
//! (an invalid size is reported in [`Settings::warnings`] and the default
//! used). [`Settings::entries`] lists every setting for display
//! (`kinetic config show`), secrets redacted.
//!
//! Every setting is a row of one table, [`KEYS`] (a [`SettingKey`] with
//! its name, variables, default, doc and whether it is a secret): the
//! variables resolution reads, the constants of [`vars`], the rows
//! `kinetic config` shows and the settings table of
//! `docs/configuration.md` ([`markdown_table`]) all come from it.
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::path::Path;
//! use kinetic_core::config::ProfileStore;
//! use kinetic_core::settings::{Settings, SettingsArgs, SettingsInput, Source};
//!
//! let env = BTreeMap::from([
//!     ("HOME".to_owned(), "/home/me".to_owned()),
//!     ("KINETIC_PROJECT".to_owned(), "my-proj".to_owned()),
//!     ("KINETIC_STORE_URL".to_owned(), "gs://".to_owned()),
//! ]);
//! let profiles = ProfileStore::new();
//! let input = SettingsInput::new(&env, &profiles, Path::new("/home/me/proj"));
//! let settings = Settings::resolve(&SettingsArgs::new().zone("europe-west4-b"), &input)?;
//!
//! assert_eq!(settings.zone.value, "europe-west4-b");
//! assert_eq!(settings.zone.source, Source::Argument);
//! // A bare gs:// names the configured cluster's jobs bucket.
//! let store = settings.store_url.as_ref().unwrap();
//! assert_eq!(store.value, "gs://my-proj-kn-kinetic-cluster-jobs");
//! assert_eq!(store.source, Source::Env("KINETIC_STORE_URL"));
//! assert_eq!(settings.local_root.as_ref().unwrap().value, Path::new("/home/me/.kinetic/local"));
//! assert!(settings.entries().iter().any(|e| e.key == "pending_deadline"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod engine;
mod keys;
pub mod vars;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::accelerators::{AcceleratorSpec, Category};
use crate::config::{
    DEFAULT_BASE_IMAGE_REPO, DEFAULT_CLUSTER, DEFAULT_NAMESPACE, DEFAULT_ZONE, DerivedNames,
    Profile, ProfileError, ProfileStore,
};
pub use crate::config::{EnvLookup, ProfileRef, Setting, Source};
use crate::env::SecretValue;
use crate::packaging::DEFAULT_SIZE_WARN_BYTES;
use crate::protocol::ExtractLimits;
pub use engine::EngineSettings;
pub use keys::{KEYS, KeyInfo, SettingKey, UnknownSettingKey, markdown_table};

/// The backend jobs go to when neither the job nor `KINETIC_BACKEND` names one.
pub const DEFAULT_BACKEND: &str = "local";

/// The context cache, under the local root: packed projects kept between
/// submissions so that an unchanged project is not packed again.
pub const CONTEXT_CACHE_DIR: &str = "cache/contexts";

/// The backends whose jobs run in the cluster: their pods read the job's
/// objects from the jobs store, so it must be one they can reach.
pub const REMOTE_BACKENDS: [&str; 2] = ["gke", "pathways"];

/// The cluster backend that runs a job on `num_hosts` hosts when none is
/// named: `pathways` (one LeaderWorkerSet across a multi-host slice's
/// hosts) for several, `gke` (one Job) for one.
///
/// ```
/// use kinetic_core::settings::cluster_backend;
/// assert_eq!(cluster_backend(1), "gke");
/// assert_eq!(cluster_backend(4), "pathways");
/// ```
pub fn cluster_backend(num_hosts: u32) -> &'static str {
    if num_hosts > 1 { "pathways" } else { "gke" }
}

/// True for a backend whose jobs run in the cluster ([`REMOTE_BACKENDS`]).
pub fn is_remote(backend: &str) -> bool {
    REMOTE_BACKENDS.contains(&backend)
}

/// The backend a job goes to, where that came from, and why, in words
/// (`run -v` and `kinetic config` show it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendChoice {
    /// The backend's name.
    pub name: String,
    /// Where the choice came from: the argument or variable that named the
    /// backend, or `Default` when the accelerator and the configured
    /// cluster chose it.
    pub source: Source,
    /// Why, in words.
    pub why: String,
}

/// Values given explicitly (API arguments, command-line flags); each beats
/// the environment and the profile. Build with [`SettingsArgs::new`] and
/// the setters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SettingsArgs {
    /// Profile to use instead of `KINETIC_PROFILE` / the stored current one.
    pub profile: Option<String>,
    /// GCP project. `Some("")` skips the profile and falls back to
    /// `KINETIC_PROJECT` then `GOOGLE_CLOUD_PROJECT`, as in Kinetic.
    pub project: Option<String>,
    /// GCP zone (used even if empty).
    pub zone: Option<String>,
    /// GKE cluster (used even if empty).
    pub cluster: Option<String>,
    /// Kubernetes namespace (used even if empty).
    pub namespace: Option<String>,
    /// The kubeconfig context to use (default: the configured cluster's).
    pub kube_context: Option<String>,
    /// The backend (`--backend`).
    pub backend: Option<String>,
    /// Repository of the prebuilt base images.
    pub base_image_repo: Option<String>,
    /// The reservation new node pools consume.
    pub reservation: Option<String>,
}

impl SettingsArgs {
    /// No explicit values.
    pub fn new() -> Self {
        Self::default()
    }

    /// Use the profile `name`.
    #[must_use]
    pub fn profile(mut self, name: impl Into<String>) -> Self {
        self.profile = Some(name.into());
        self
    }

    /// Use project `project`.
    #[must_use]
    pub fn project(mut self, project: impl Into<String>) -> Self {
        self.project = Some(project.into());
        self
    }

    /// Use zone `zone`.
    #[must_use]
    pub fn zone(mut self, zone: impl Into<String>) -> Self {
        self.zone = Some(zone.into());
        self
    }

    /// Use cluster `cluster`.
    #[must_use]
    pub fn cluster(mut self, cluster: impl Into<String>) -> Self {
        self.cluster = Some(cluster.into());
        self
    }

    /// Use namespace `namespace`.
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Use the kubeconfig context `context`.
    #[must_use]
    pub fn kube_context(mut self, context: impl Into<String>) -> Self {
        self.kube_context = Some(context.into());
        self
    }

    /// Send jobs to the backend `name`.
    #[must_use]
    pub fn backend(mut self, name: impl Into<String>) -> Self {
        self.backend = Some(name.into());
        self
    }

    /// Use the prebuilt image repository `repo`.
    #[must_use]
    pub fn base_image_repo(mut self, repo: impl Into<String>) -> Self {
        self.base_image_repo = Some(repo.into());
        self
    }

    /// New node pools consume the reservation `name`.
    #[must_use]
    pub fn reservation(mut self, name: impl Into<String>) -> Self {
        self.reservation = Some(name.into());
        self
    }
}

/// What resolution reads besides the arguments, passed in by the caller:
/// the environment (through a lookup; `HOME` included), the loaded profiles
/// and the working directory.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct SettingsInput<'a> {
    /// The environment variables.
    pub env: &'a dyn EnvLookup,
    /// The profiles file, loaded ([`ProfileStore::load`] at
    /// [`profiles_file`]).
    pub profiles: &'a ProfileStore,
    /// The working directory relative paths are taken from.
    pub cwd: &'a Path,
}

impl std::fmt::Debug for SettingsInput<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SettingsInput")
            .field("profiles", &self.profiles.len())
            .field("cwd", &self.cwd)
            .finish_non_exhaustive()
    }
}

impl<'a> SettingsInput<'a> {
    /// The input of one resolution.
    pub fn new(env: &'a dyn EnvLookup, profiles: &'a ProfileStore, cwd: &'a Path) -> Self {
        Self { env, profiles, cwd }
    }
}

/// Why settings could not be resolved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// The profiles file cannot be located, or the profile asked for does
    /// not exist.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// No project from argument, environment or profile where one is
    /// required ([`Settings::require_project`]).
    #[error(
        "No GCP project configured. Run 'kinetic init' or 'kinetic profile create NAME \
         --project PROJECT' to save an active profile, or override it by passing project= \
         (CLI: --project) or by setting the KINETIC_PROJECT (or GOOGLE_CLOUD_PROJECT) \
         environment variable."
    )]
    MissingProject,
    /// A variable holds a value that cannot be used.
    #[error("{var}={value:?} is not accepted: expected {expected}")]
    Invalid {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What would be accepted.
        expected: &'static str,
    },
    /// `KINETIC_STORE_URL=gs://` without a project to name the bucket after.
    #[error(
        "{var}=gs:// names the configured cluster's jobs bucket, but no project is configured: set KINETIC_PROJECT or a profile, or give gs://bucket",
        var = vars::STORE_URL
    )]
    StoreNeedsProject,
    /// A store the backend's pods cannot reach.
    #[error(
        "{var}={url} cannot be used with the {backend} backend: its jobs run in the cluster, whose pods cannot read a {scheme} store; unset {var} to use the cluster's jobs bucket{bucket}, or set it to gs://BUCKET",
        var = vars::STORE_URL,
        bucket = jobs_bucket.as_ref().map(|b| format!(" (gs://{b})")).unwrap_or_default()
    )]
    StoreUnreachable {
        /// The backend.
        backend: String,
        /// The store URL.
        url: String,
        /// Its scheme (`file://`, `memory://`).
        scheme: &'static str,
        /// The configured cluster's jobs bucket, when a project is known.
        jobs_bucket: Option<String>,
    },
    /// A remote backend without a store URL and without a project to
    /// name the jobs bucket after.
    #[error(
        "the {backend} backend keeps each job in the cluster's jobs bucket, named after the project, and no project is configured; {}",
        remote_store_advice()
    )]
    RemoteStoreNeedsProject {
        /// The backend.
        backend: String,
    },
    /// The kubeconfig context names another GKE cluster than the
    /// configured one.
    #[error(
        "the kubeconfig context '{context}' ({origin}) is another GKE cluster than the configured one, whose context is '{expected}': set KINETIC_KUBE_CONTEXT to the configured cluster's context, or configure that cluster (--project, --zone, --cluster or a profile)"
    )]
    ContextMismatch {
        /// The context (`gke_{project}_{zone}_{cluster}`).
        context: String,
        /// Where it was set.
        origin: Source,
        /// The configured cluster's context.
        expected: String,
    },
    /// The local backend's directory has no default without `HOME`.
    #[error(
        "cannot find the home directory for ~/.kinetic/local: set HOME or {var}",
        var = vars::LOCAL_ROOT
    )]
    NoLocalRoot,
}

/// What to set for a remote backend's jobs store when no project names it.
fn remote_store_advice() -> crate::advice::Advice {
    use crate::advice::{Advice, Knob};
    Advice::new().text("set ").name(Knob::Project).text(format!(
        ", {} or a profile (`kinetic profile create`), or set {}=gs://BUCKET",
        vars::PROJECT,
        vars::STORE_URL
    ))
}

impl SettingsError {
    /// The error's message without its advice, and the advice on what to
    /// set, when it has some (each front end names the settings its own
    /// way: [`SettingsError::message_for`]).
    pub fn advised(&self) -> Option<(String, crate::advice::Advice)> {
        match self {
            Self::RemoteStoreNeedsProject { backend } => Some((
                format!(
                    "the {backend} backend keeps each job in the cluster's jobs bucket, named after the project, and no project is configured"
                ),
                remote_store_advice(),
            )),
            _ => None,
        }
    }

    /// The error as `front` shows it (the `Display` is the command line's).
    pub fn message_for(&self, front: crate::advice::FrontEnd) -> String {
        match self.advised() {
            Some((message, advice)) => crate::advice::with_advice(&message, Some(&advice), front),
            None => self.to_string(),
        }
    }

    /// True when the user's input is at fault (a bad value, an unknown
    /// profile) rather than the machine (no `HOME`, an unreadable file).
    pub fn is_invalid_input(&self) -> bool {
        match self {
            Self::Profile(e) => e.is_invalid_input(),
            Self::MissingProject
            | Self::Invalid { .. }
            | Self::StoreNeedsProject
            | Self::StoreUnreachable { .. }
            | Self::RemoteStoreNeedsProject { .. }
            | Self::ContextMismatch { .. } => true,
            Self::NoLocalRoot => false,
        }
    }
}

/// Every resolved setting. Fields that may be unset are `Option`s; `None`
/// says what applies instead (documented per field).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Settings {
    /// The profiles file (`KINETIC_PROFILES_FILE`, else `~/.kinetic/profiles.json`).
    pub profiles_file: Setting<PathBuf>,
    /// The profile that applied, if any.
    pub profile: Option<ProfileRef>,
    /// GCP project; `None` when no source gave one.
    pub project: Option<Setting<String>>,
    /// GCP zone.
    pub zone: Setting<String>,
    /// GKE cluster.
    pub cluster: Setting<String>,
    /// Kubernetes namespace.
    pub namespace: Setting<String>,
    /// The kubeconfig context; `None` = the kubeconfig's current context.
    pub kube_context: Option<Setting<String>>,
    /// Where the kubeconfig is: `KUBECONFIG` (possibly several files,
    /// `:`-separated), else `~/.kube/config` (which may not exist); `None`
    /// without either.
    pub kubeconfig: Option<Setting<String>>,
    /// The backend for jobs that name none.
    pub backend: Setting<String>,
    /// The jobs store URL; a bare `gs://` is already expanded to the
    /// cluster's jobs bucket. `None` only when there is no local root to
    /// default to.
    pub store_url: Option<Setting<String>>,
    /// GCS endpoint used without authentication (tests, emulators).
    pub gcs_endpoint: Option<Setting<String>>,
    /// The credentials file Application Default Credentials start from;
    /// `None` = gcloud's file, then the metadata server.
    pub application_credentials: Option<Setting<PathBuf>>,
    /// One image every job runs in; `None` = resolved per job.
    pub image: Option<Setting<String>>,
    /// Repository of the prebuilt base images.
    pub base_image_repo: Setting<String>,
    /// The builds bucket's store URL (default `gs://{project}-kn-{cluster}-builds`;
    /// `None` without a project).
    pub builds_store_url: Option<Setting<String>>,
    /// Cloud Build endpoint; `None` = Google's.
    pub cloudbuild_endpoint: Option<Setting<String>>,
    /// Artifact Registry endpoint; `None` = Google's.
    pub artifactregistry_endpoint: Option<Setting<String>>,
    /// A bearer token for the Google APIs; `None` = Application Default Credentials.
    pub access_token: Option<Setting<SecretValue>>,
    /// Kubernetes Engine API endpoint; `None` = Google's.
    pub container_endpoint: Option<Setting<String>>,
    /// IAM API endpoint; `None` = Google's.
    pub iam_endpoint: Option<Setting<String>>,
    /// Cloud Resource Manager API endpoint; `None` = Google's.
    pub resourcemanager_endpoint: Option<Setting<String>>,
    /// Service Usage API endpoint; `None` = Google's.
    pub serviceusage_endpoint: Option<Setting<String>>,
    /// Where the LeaderWorkerSet manifests are fetched; `None` = the
    /// release `kinetic up` installs.
    pub lws_manifests_url: Option<Setting<String>>,
    /// Where the NVIDIA driver installer manifest is fetched; `None` = the
    /// one GKE's documentation applies.
    pub nvidia_driver_manifest_url: Option<Setting<String>>,
    /// How long one cloud operation (creating a cluster, a pool) may take;
    /// `None` = the adapter's default.
    pub operation_timeout: Option<Setting<Duration>>,
    /// The Compute Engine reservation new node pools consume; `None` = none.
    pub reservation: Option<Setting<String>>,
    /// Where jobs write outputs; `None` = `outputs/{job_id}` in the jobs store.
    pub output_dir: Option<Setting<String>>,
    /// The package root; `None` = detected from the entrypoint.
    pub package_root: Option<Setting<String>>,
    /// Leave `.venv`, `node_modules` and the like out of the packed project.
    pub default_excludes: Setting<bool>,
    /// Packed projects larger than this many bytes get a warning (0 = never).
    pub context_size_warn_bytes: Setting<u64>,
    /// What a packed project may expand to in the job (checked before
    /// uploading, and by the runner before extracting).
    pub context_max_bytes: Setting<u64>,
    /// How many entries a packed project may hold.
    pub context_max_files: Setting<u64>,
    /// How far a packed project may expand (extracted size over archive size).
    pub context_max_ratio: Setting<u64>,
    /// How long a Kubernetes job may stay pending for a blocking reason;
    /// `None` = the backend's default.
    pub pending_deadline: Option<Setting<Duration>>,
    /// The local backend's directory; `None` without `HOME` and `KINETIC_LOCAL_ROOT`.
    pub local_root: Option<Setting<PathBuf>>,
    /// Jobs the local backend runs at once; `None` = one per core.
    pub local_max_concurrent: Option<Setting<usize>>,
    /// GPUs the local backend hands out (devices `0..N`); `None` = as
    /// many as `nvidia-smi -L` lists.
    pub local_gpus: Option<Setting<u32>>,
    /// The working directory.
    pub cwd: PathBuf,
    /// The home directory (`HOME`), if set.
    pub home: Option<PathBuf>,
    /// What the user should know about values that were not used.
    pub warnings: Vec<String>,
}

/// One setting as [`Settings::entries`] lists it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SettingEntry {
    /// The setting's name (`zone`, `store_url`, …).
    pub key: &'static str,
    /// Its value as JSON (secrets redacted), or `None` when unset.
    pub value: Option<Value>,
    /// Where the value came from.
    pub source: Option<Source>,
    /// What applies when it is unset.
    pub unset: &'static str,
}

impl SettingEntry {
    /// The value as text (`None` when unset).
    pub fn text(&self) -> Option<String> {
        self.value.as_ref().map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    }
}

/// The setting `key` from the first of its variables that is set and not
/// empty ([`KeyInfo::vars`]).
fn from_env(env: &dyn EnvLookup, key: SettingKey) -> Option<Setting<String>> {
    key.info().vars.iter().find_map(|var| {
        env.non_empty(var)
            .map(|v| Setting::new(v, Source::Env(var)))
    })
}

/// The kubeconfig context: the argument, else `KINETIC_KUBE_CONTEXT`, else
/// the configured cluster's (`gke_{project}_{zone}_{cluster}`, as gcloud
/// names it) when a project is known; `None` leaves the kubeconfig's
/// current one. A GKE context that names another cluster than the
/// configured one is refused.
fn kube_context(
    args: &SettingsArgs,
    env: &dyn EnvLookup,
    names: Option<&DerivedNames>,
) -> Result<Option<Setting<String>>, SettingsError> {
    let given = args
        .kube_context
        .clone()
        .map(|c| Setting::new(c, Source::Argument))
        .or_else(|| from_env(env, SettingKey::KubeContext));
    let Some(names) = names else {
        return Ok(given);
    };
    let Some(given) = given else {
        return Ok(Some(Setting::new(
            names.kube_context.clone(),
            Source::Default,
        )));
    };
    if let Some(rest) = given.value.strip_prefix("gke_")
        && rest.splitn(3, '_').count() == 3
        && given.value != names.kube_context
    {
        return Err(SettingsError::ContextMismatch {
            context: given.value.clone(),
            origin: given.source.clone(),
            expected: names.kube_context.clone(),
        });
    }
    Ok(Some(given))
}

/// The home directory: `HOME`, when set and not empty.
pub fn home(env: &dyn EnvLookup) -> Option<PathBuf> {
    env.non_empty(vars::HOME).map(PathBuf::from)
}

/// Where the profiles file is: `KINETIC_PROFILES_FILE` if set and not
/// empty, else `$HOME/.kinetic/profiles.json`.
///
/// # Errors
/// [`ProfileError::NoHome`] when neither is set.
pub fn profiles_file(env: &dyn EnvLookup) -> Result<Setting<PathBuf>, ProfileError> {
    if let Some(p) = from_env(env, SettingKey::ProfilesFile) {
        return Ok(Setting::new(PathBuf::from(p.value), p.source));
    }
    let home = home(env).ok_or(ProfileError::NoHome)?;
    Ok(Setting::new(
        home.join(".kinetic").join("profiles.json"),
        Source::Default,
    ))
}

/// Whether packing leaves out `.venv`, `node_modules` and the like: yes,
/// unless `KINETIC_NO_DEFAULT_EXCLUDES` is exactly `1`.
pub fn default_excludes(env: &dyn EnvLookup) -> Setting<bool> {
    match env.var(vars::NO_DEFAULT_EXCLUDES) {
        Some(v) if v == "1" => Setting::new(false, Source::Env(vars::NO_DEFAULT_EXCLUDES)),
        _ => Setting::new(true, Source::Default),
    }
}

/// The packed-project size that earns a warning, from
/// `KINETIC_CONTEXT_SIZE_WARN_MB` (MiB, as Kinetic reads it; `0` or less
/// disables the warning), and a warning when the value is not a number (as
/// in Kinetic, the default then applies).
pub fn context_size_warn(env: &dyn EnvLookup) -> (Setting<u64>, Option<String>) {
    let var = vars::CONTEXT_SIZE_WARN_MB;
    let default = Setting::new(DEFAULT_SIZE_WARN_BYTES, Source::Default);
    match env.non_empty(var) {
        None => (default, None),
        Some(raw) => match raw.trim().parse::<f64>() {
            Ok(mb) if mb.is_finite() && mb > 0.0 => (
                Setting::new((mb * 1024.0 * 1024.0) as u64, Source::Env(var)),
                None,
            ),
            Ok(_) => (Setting::new(0, Source::Env(var)), None),
            Err(_) => (
                default,
                Some(format!(
                    "ignoring invalid {var}={raw:?} (expected a number of megabytes)"
                )),
            ),
        },
    }
}

/// The longest duration a setting or flag in seconds takes (365 days):
/// a timeout or deadline past it is a mistake, and a bound keeps every
/// clock computation from overflowing.
pub const MAX_SECONDS: u64 = 365 * 24 * 3600;

/// What a seconds value accepts, in words (for error messages).
pub const SECONDS_EXPECTED: &str = "a positive number of seconds, at most 31536000 (365 days)";

/// `value` seconds as a duration, when it is positive and at most
/// [`MAX_SECONDS`]; `None` otherwise (zero, negative, NaN, too long).
pub fn positive_seconds(value: f64) -> Option<Duration> {
    (value > 0.0 && value <= MAX_SECONDS as f64)
        .then(|| Duration::try_from_secs_f64(value).ok())
        .flatten()
        .filter(|d| !d.is_zero())
}

fn parse_positive_seconds(
    env: &dyn EnvLookup,
    key: SettingKey,
) -> Result<Option<Setting<Duration>>, SettingsError> {
    let var = key.env_var();
    let Some(raw) = env.non_empty(var) else {
        return Ok(None);
    };
    raw.trim()
        .parse::<f64>()
        .ok()
        .and_then(positive_seconds)
        .map(|d| Some(Setting::new(d, Source::Env(var))))
        .ok_or(SettingsError::Invalid {
            var,
            value: raw,
            expected: SECONDS_EXPECTED,
        })
}

/// The most jobs the local backend runs at once (each holds a slot file
/// and a process; the bound keeps a typo from opening millions of files).
pub const MAX_LOCAL_CONCURRENT: usize = 1024;

/// A positive number from `var` (`scale` times the number given: MiB to
/// bytes), else `default`.
fn parse_limit(
    env: &dyn EnvLookup,
    key: SettingKey,
    scale: f64,
    default: u64,
    expected: &'static str,
) -> Result<Setting<u64>, SettingsError> {
    let var = key.env_var();
    let Some(raw) = env.non_empty(var) else {
        return Ok(Setting::new(default, Source::Default));
    };
    raw.trim()
        .parse::<f64>()
        .ok()
        .map(|v| v * scale)
        .filter(|v| v.is_finite() && *v >= 1.0 && *v <= u64::MAX as f64)
        .map(|v| Setting::new(v as u64, Source::Env(var)))
        .ok_or(SettingsError::Invalid {
            var,
            value: raw,
            expected,
        })
}

/// The most GPUs [`vars::LOCAL_GPUS`] may declare.
pub const MAX_LOCAL_GPUS: u32 = 1024;

fn parse_positive_count(
    env: &dyn EnvLookup,
    key: SettingKey,
    max: usize,
    expected: &'static str,
) -> Result<Option<Setting<usize>>, SettingsError> {
    parse_count(env, key, 1, max, expected)
}

fn parse_count(
    env: &dyn EnvLookup,
    key: SettingKey,
    min: usize,
    max: usize,
    expected: &'static str,
) -> Result<Option<Setting<usize>>, SettingsError> {
    let var = key.env_var();
    let Some(raw) = env.non_empty(var) else {
        return Ok(None);
    };
    raw.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .map(|n| Some(Setting::new(n, Source::Env(var))))
        .ok_or(SettingsError::Invalid {
            var,
            value: raw,
            expected,
        })
}

impl Settings {
    /// Resolve every setting.
    ///
    /// # Errors
    /// [`SettingsError::Profile`] for an unknown profile
    /// ([`crate::config::ProfileError::NotFound`])
    /// or when the profiles file cannot be located or read,
    /// [`SettingsError::Invalid`] for a value that cannot be used,
    /// [`SettingsError::StoreNeedsProject`] for a bare `gs://` store
    /// without a project.
    pub fn resolve(args: &SettingsArgs, input: &SettingsInput<'_>) -> Result<Self, SettingsError> {
        let env = input.env;
        let profiles_file = profiles_file(env)?;
        let active = input.profiles.active(args.profile.as_deref(), env)?;
        let from_profile = |key: SettingKey, pick: fn(&Profile) -> &String| {
            active.as_ref().filter(|_| key.info().profile).map(|a| {
                Setting::new(
                    pick(a.profile).clone(),
                    Source::Profile(a.profile.name.clone()),
                )
            })
        };
        // Argument, else variable, else profile, else default.
        let target = |key: SettingKey,
                      arg: &Option<String>,
                      pick: fn(&Profile) -> &String,
                      default: &str| {
            arg.clone()
                .map(|v| Setting::new(v, Source::Argument))
                .or_else(|| from_env(env, key))
                .or_else(|| from_profile(key, pick))
                .unwrap_or_else(|| Setting::new(default.to_owned(), Source::Default))
        };
        // The project: a non-empty argument wins; an empty one skips the
        // profile, as does an empty profile value; `GOOGLE_CLOUD_PROJECT`
        // (its second variable) comes last.
        let project_var = |index: usize| {
            let var = SettingKey::Project.info().vars[index];
            env.non_empty(var)
                .map(|v| Setting::new(v, Source::Env(var)))
        };
        let project = match args.project.as_deref() {
            Some(p) if !p.is_empty() => Some(Setting::new(p.to_owned(), Source::Argument)),
            Some(_) => project_var(0),
            None => project_var(0).or_else(|| {
                from_profile(SettingKey::Project, |p| &p.project).filter(|s| !s.value.is_empty())
            }),
        }
        .or_else(|| project_var(1));
        let zone = target(SettingKey::Zone, &args.zone, |p| &p.zone, DEFAULT_ZONE);
        let cluster = target(
            SettingKey::Cluster,
            &args.cluster,
            |p| &p.cluster,
            DEFAULT_CLUSTER,
        );
        let namespace = target(
            SettingKey::Namespace,
            &args.namespace,
            |p| &p.namespace,
            DEFAULT_NAMESPACE,
        );
        let names = project
            .as_ref()
            .map(|p| DerivedNames::new(&p.value, &zone.value, &cluster.value));
        let profile = active.map(|a| ProfileRef {
            name: a.profile.name.clone(),
            selected_by: a.selected_by,
        });
        let home = home(env);
        let output_dir = from_env(env, SettingKey::OutputDir);
        let base_image_repo = args
            .base_image_repo
            .clone()
            .map(|repo| Setting::new(repo, Source::Argument))
            .or_else(|| from_env(env, SettingKey::BaseImageRepo))
            .unwrap_or_else(|| Setting::new(DEFAULT_BASE_IMAGE_REPO.to_owned(), Source::Default));

        let local_root = match from_env(env, SettingKey::LocalRoot) {
            // The jobs run elsewhere (their own directories): a relative
            // root would mean something else to each of them.
            Some(s) if !Path::new(&s.value).is_absolute() => {
                return Err(SettingsError::Invalid {
                    var: vars::LOCAL_ROOT,
                    value: s.value,
                    expected: "an absolute directory path",
                });
            }
            other => other,
        }
        .map(|s| Setting::new(PathBuf::from(s.value), s.source))
        .or_else(|| {
            home.as_ref()
                .map(|h| Setting::new(h.join(".kinetic").join("local"), Source::Default))
        });
        let store_url = match from_env(env, SettingKey::StoreUrl) {
            Some(s) if s.value == "gs://" => {
                let names = names.as_ref().ok_or(SettingsError::StoreNeedsProject)?;
                Some(Setting::new(
                    format!("gs://{}", names.jobs_bucket),
                    s.source,
                ))
            }
            Some(s) => Some(s),
            None => local_root.as_ref().map(|root| {
                Setting::new(
                    format!("file://{}", root.value.join("store").display()),
                    Source::Default,
                )
            }),
        };
        let kubeconfig = from_env(env, SettingKey::Kubeconfig).or_else(|| {
            home.as_ref().map(|h| {
                Setting::new(
                    h.join(".kube").join("config").display().to_string(),
                    Source::Default,
                )
            })
        });
        let builds_store_url = from_env(env, SettingKey::BuildsStoreUrl).or_else(|| {
            names
                .as_ref()
                .map(|n| Setting::new(format!("gs://{}", n.builds_bucket), Source::Default))
        });
        let (context_size_warn_bytes, size_warning) = context_size_warn(env);
        let kube_context = kube_context(args, env, names.as_ref())?;

        Ok(Self {
            profiles_file,
            profile,
            project,
            zone,
            cluster,
            namespace,
            kube_context,
            kubeconfig,
            backend: args
                .backend
                .clone()
                .map(|b| Setting::new(b, Source::Argument))
                .or_else(|| from_env(env, SettingKey::Backend))
                .unwrap_or_else(|| Setting::new(DEFAULT_BACKEND.to_owned(), Source::Default)),
            store_url,
            gcs_endpoint: from_env(env, SettingKey::GcsEndpoint),
            application_credentials: from_env(env, SettingKey::ApplicationCredentials)
                .map(|s| Setting::new(PathBuf::from(s.value), s.source)),
            image: from_env(env, SettingKey::Image),
            base_image_repo,
            builds_store_url,
            cloudbuild_endpoint: from_env(env, SettingKey::CloudbuildEndpoint),
            artifactregistry_endpoint: from_env(env, SettingKey::ArtifactregistryEndpoint),
            access_token: from_env(env, SettingKey::AccessToken)
                .map(|s| Setting::new(SecretValue::new(s.value), s.source)),
            container_endpoint: from_env(env, SettingKey::ContainerEndpoint),
            iam_endpoint: from_env(env, SettingKey::IamEndpoint),
            resourcemanager_endpoint: from_env(env, SettingKey::ResourcemanagerEndpoint),
            serviceusage_endpoint: from_env(env, SettingKey::ServiceusageEndpoint),
            lws_manifests_url: from_env(env, SettingKey::LwsManifestsUrl),
            nvidia_driver_manifest_url: from_env(env, SettingKey::NvidiaDriverManifestUrl),
            operation_timeout: parse_positive_seconds(env, SettingKey::OperationTimeout)?,
            reservation: args
                .reservation
                .clone()
                .map(|r| Setting::new(r, Source::Argument))
                .or_else(|| from_env(env, SettingKey::Reservation)),
            output_dir,
            package_root: from_env(env, SettingKey::PackageRoot),
            default_excludes: default_excludes(env),
            context_size_warn_bytes,
            context_max_bytes: parse_limit(
                env,
                SettingKey::ContextMaxBytes,
                1024.0 * 1024.0,
                ExtractLimits::DEFAULT_MAX_BYTES,
                "a positive number of megabytes",
            )?,
            context_max_files: parse_limit(
                env,
                SettingKey::ContextMaxFiles,
                1.0,
                ExtractLimits::DEFAULT_MAX_ENTRIES,
                "a positive number of files",
            )?,
            context_max_ratio: parse_limit(
                env,
                SettingKey::ContextMaxRatio,
                1.0,
                ExtractLimits::DEFAULT_MAX_RATIO,
                "a positive ratio, e.g. 200 for 200:1",
            )?,
            pending_deadline: parse_positive_seconds(env, SettingKey::PendingDeadline)?,
            local_root,
            local_max_concurrent: parse_positive_count(
                env,
                SettingKey::LocalMaxConcurrent,
                MAX_LOCAL_CONCURRENT,
                "a positive integer, at most 1024",
            )?,
            local_gpus: parse_count(
                env,
                SettingKey::LocalGpus,
                0,
                MAX_LOCAL_GPUS as usize,
                "a number of GPUs, 0 to 1024",
            )?
            .map(|n| Setting::new(n.value as u32, n.source)),
            cwd: input.cwd.to_path_buf(),
            home,
            warnings: size_warning.into_iter().collect(),
        })
    }

    /// The backend a job on `accelerator` goes to, unless it names one:
    ///
    /// 1. a configured backend (`--backend`, `KINETIC_BACKEND`) wins;
    /// 2. else a multi-host TPU slice goes to `pathways` (a LeaderWorkerSet
    ///    across the slice's hosts);
    /// 3. else an accelerator the local host cannot serve (a GPU or a
    ///    single-host TPU) goes to the configured cluster: `gke`;
    /// 4. else the default, `local`.
    ///
    /// Always `Some`; the `Option` leaves room for an accelerator no
    /// backend serves.
    pub fn choose_backend(&self, accelerator: &AcceleratorSpec) -> Option<BackendChoice> {
        if self.backend.source != Source::Default {
            return Some(BackendChoice {
                name: self.backend.value.clone(),
                source: self.backend.source.clone(),
                why: format!("set by {}", self.backend.source),
            });
        }
        if accelerator.is_multi_host() {
            return Some(BackendChoice {
                name: cluster_backend(accelerator.num_hosts()).to_owned(),
                source: Source::Default,
                why: format!(
                    "{accelerator} spans {} hosts: one LeaderWorkerSet runs the job on every host of the slice",
                    accelerator.num_hosts()
                ),
            });
        }
        let cluster = self
            .project
            .as_ref()
            .filter(|_| accelerator.category() != Category::Cpu);
        Some(match cluster {
            Some(project) => BackendChoice {
                name: cluster_backend(1).to_owned(),
                source: Source::Default,
                why: format!(
                    "the local host cannot serve {accelerator}, and cluster '{}' of project '{}' (zone '{}') is configured",
                    self.cluster.value, project.value, self.zone.value
                ),
            },
            None => BackendChoice {
                name: DEFAULT_BACKEND.to_owned(),
                source: Source::Default,
                why: if accelerator.category() == Category::Cpu {
                    "the default for CPU jobs".to_owned()
                } else {
                    format!(
                        "the default: no cluster is configured to send {accelerator} to (set a project and cluster, or --backend gke)"
                    )
                },
            },
        })
    }

    /// The jobs store for jobs on `backend`: `KINETIC_STORE_URL` when set
    /// (a remote backend refuses a `file://` or `memory://` one, which its
    /// pods cannot read); else, for a remote backend, the configured
    /// cluster's jobs bucket; else the local store.
    ///
    /// # Errors
    /// [`SettingsError::StoreUnreachable`],
    /// [`SettingsError::RemoteStoreNeedsProject`],
    /// [`SettingsError::NoLocalRoot`].
    pub fn store_for(&self, backend: &str) -> Result<Setting<String>, SettingsError> {
        let explicit = self
            .store_url
            .as_ref()
            .filter(|s| s.source != Source::Default);
        if !is_remote(backend) {
            return self.store_url().cloned();
        }
        match explicit {
            Some(s) => {
                let scheme = ["file://", "memory://"]
                    .into_iter()
                    .find(|p| s.value.starts_with(p));
                match scheme {
                    Some(scheme) => Err(SettingsError::StoreUnreachable {
                        backend: backend.to_owned(),
                        url: s.value.clone(),
                        scheme,
                        jobs_bucket: self.names().map(|n| n.jobs_bucket),
                    }),
                    None => Ok(s.clone()),
                }
            }
            None => self
                .names()
                .map(|n| Setting::new(format!("gs://{}", n.jobs_bucket), Source::Default))
                .ok_or_else(|| SettingsError::RemoteStoreNeedsProject {
                    backend: backend.to_owned(),
                }),
        }
    }

    /// The names derived from project, zone and cluster, when the project is known.
    pub fn names(&self) -> Option<DerivedNames> {
        self.project
            .as_ref()
            .map(|p| DerivedNames::new(&p.value, &self.zone.value, &self.cluster.value))
    }

    /// The local backend's directory.
    ///
    /// # Errors
    /// [`SettingsError::NoLocalRoot`] without `HOME` and `KINETIC_LOCAL_ROOT`.
    pub fn local_root(&self) -> Result<&Setting<PathBuf>, SettingsError> {
        self.local_root.as_ref().ok_or(SettingsError::NoLocalRoot)
    }

    /// The jobs store URL.
    ///
    /// # Errors
    /// [`SettingsError::NoLocalRoot`] when it would default to the local
    /// root and there is none.
    pub fn store_url(&self) -> Result<&Setting<String>, SettingsError> {
        self.store_url.as_ref().ok_or(SettingsError::NoLocalRoot)
    }

    /// The bucket name job records carry: the `gs://` store's bucket, else
    /// the cluster's jobs bucket when a project is known, else the store URL.
    pub fn record_bucket_name(&self) -> String {
        let url = self.store_url.as_ref().map(|s| s.value.as_str());
        if let Some(rest) = url.and_then(|u| u.strip_prefix("gs://")) {
            return rest.split('/').next().unwrap_or(rest).to_owned();
        }
        match (self.names(), url) {
            (Some(names), _) => names.jobs_bucket,
            (None, Some(url)) => url.to_owned(),
            (None, None) => String::new(),
        }
    }

    /// What the engine needs of these settings. Packed projects are cached
    /// under the local root, in [`CONTEXT_CACHE_DIR`].
    pub fn engine(&self) -> EngineSettings {
        EngineSettings {
            project: self
                .project
                .as_ref()
                .map(|p| p.value.clone())
                .unwrap_or_default(),
            zone: self.zone.value.clone(),
            cluster: self.cluster.value.clone(),
            namespace: self.namespace.value.clone(),
            bucket_name: self.record_bucket_name(),
            cwd: Some(self.cwd.clone()),
            home: self.home.clone(),
            package_root: self.package_root.as_ref().map(|p| p.value.clone()),
            default_excludes: self.default_excludes.value,
            context_size_warn_bytes: self.context_size_warn_bytes.value,
            extract_limits: ExtractLimits::new(
                self.context_max_bytes.value,
                self.context_max_files.value,
                self.context_max_ratio.value,
            ),
            output_dir: self.output_dir.as_ref().map(|o| o.value.clone()),
            context_cache: self
                .local_root
                .as_ref()
                .map(|root| root.value.join(CONTEXT_CACHE_DIR)),
            ..EngineSettings::default()
        }
    }

    /// Every setting the table lists ([`KeyInfo::listed`]), in its order,
    /// secrets redacted: what `kinetic config` shows.
    pub fn entries(&self) -> Vec<SettingEntry> {
        KEYS.iter()
            .filter(|info| info.listed)
            .map(|info| self.entry(info.key))
            .collect()
    }

    /// The setting `key` as [`Settings::entries`] lists it: its value as
    /// JSON (`"<redacted>"` for a secret) and source, or what applies
    /// instead when it has none.
    pub fn entry(&self, key: SettingKey) -> SettingEntry {
        let info = key.info();
        let found = self.value_of(key);
        SettingEntry {
            key: info.name,
            value: found.as_ref().map(|(value, _)| {
                if info.secret {
                    json!("<redacted>")
                } else {
                    value.clone()
                }
            }),
            source: found.map(|(_, source)| source),
            unset: info.unset.unwrap_or(""),
        }
    }

    /// The value of `key` as JSON, unredacted, and its source.
    fn value_of(&self, key: SettingKey) -> Option<(Value, Source)> {
        fn text(s: Option<&Setting<String>>) -> Option<(Value, Source)> {
            s.map(|s| (Value::String(s.value.clone()), s.source.clone()))
        }
        fn path(s: Option<&Setting<PathBuf>>) -> Option<(Value, Source)> {
            s.map(|s| {
                (
                    Value::String(s.value.display().to_string()),
                    s.source.clone(),
                )
            })
        }
        fn of<T>(s: Option<&Setting<T>>, value: impl Fn(&T) -> Value) -> Option<(Value, Source)> {
            s.map(|s| (value(&s.value), s.source.clone()))
        }
        let seconds = |d: &Duration| json!(d.as_secs_f64());
        match key {
            SettingKey::Profile => self.profile.as_ref().map(|p| {
                let source = match p.selected_by {
                    crate::config::ProfileSelection::Argument => Source::Argument,
                    crate::config::ProfileSelection::Env => {
                        Source::Env(SettingKey::Profile.env_var())
                    }
                    _ => Source::Default,
                };
                (Value::String(p.name.clone()), source)
            }),
            SettingKey::ProfilesFile => path(Some(&self.profiles_file)),
            SettingKey::Home => self.home.as_ref().map(|h| {
                (
                    Value::String(h.display().to_string()),
                    Source::Env(SettingKey::Home.env_var()),
                )
            }),
            SettingKey::Project => text(self.project.as_ref()),
            SettingKey::Zone => text(Some(&self.zone)),
            SettingKey::Cluster => text(Some(&self.cluster)),
            SettingKey::Namespace => text(Some(&self.namespace)),
            SettingKey::OutputDir => text(self.output_dir.as_ref()),
            SettingKey::BaseImageRepo => text(Some(&self.base_image_repo)),
            SettingKey::Backend => text(Some(&self.backend)),
            // Where GPU and TPU jobs go when no backend is configured.
            SettingKey::AcceleratorBackend => {
                if self.backend.source == Source::Default {
                    self.project
                        .as_ref()
                        .map(|_| (json!(cluster_backend(1)), Source::Default))
                } else {
                    text(Some(&self.backend))
                }
            }
            // The stores jobs use: the configured backend's, and the cluster's.
            SettingKey::StoreUrl => text(self.store_for(&self.backend.value).ok().as_ref()),
            SettingKey::ClusterStoreUrl => text(self.store_for(cluster_backend(1)).ok().as_ref()),
            SettingKey::GcsEndpoint => text(self.gcs_endpoint.as_ref()),
            SettingKey::ApplicationCredentials => path(self.application_credentials.as_ref()),
            SettingKey::Kubeconfig => text(self.kubeconfig.as_ref()),
            SettingKey::KubeContext => text(self.kube_context.as_ref()),
            SettingKey::Image => text(self.image.as_ref()),
            SettingKey::BuildsStoreUrl => text(self.builds_store_url.as_ref()),
            SettingKey::CloudbuildEndpoint => text(self.cloudbuild_endpoint.as_ref()),
            SettingKey::ArtifactregistryEndpoint => text(self.artifactregistry_endpoint.as_ref()),
            SettingKey::AccessToken => of(self.access_token.as_ref(), |t| json!(t.expose())),
            SettingKey::ContainerEndpoint => text(self.container_endpoint.as_ref()),
            SettingKey::IamEndpoint => text(self.iam_endpoint.as_ref()),
            SettingKey::ResourcemanagerEndpoint => text(self.resourcemanager_endpoint.as_ref()),
            SettingKey::ServiceusageEndpoint => text(self.serviceusage_endpoint.as_ref()),
            SettingKey::LwsManifestsUrl => text(self.lws_manifests_url.as_ref()),
            SettingKey::NvidiaDriverManifestUrl => text(self.nvidia_driver_manifest_url.as_ref()),
            SettingKey::OperationTimeout => of(self.operation_timeout.as_ref(), seconds),
            SettingKey::Reservation => text(self.reservation.as_ref()),
            SettingKey::PackageRoot => text(self.package_root.as_ref()),
            SettingKey::DefaultExcludes => of(Some(&self.default_excludes), |v| json!(v)),
            SettingKey::ContextSizeWarnBytes => {
                of(Some(&self.context_size_warn_bytes), |v| json!(v))
            }
            SettingKey::ContextMaxBytes => of(Some(&self.context_max_bytes), |v| json!(v)),
            SettingKey::ContextMaxFiles => of(Some(&self.context_max_files), |v| json!(v)),
            SettingKey::ContextMaxRatio => of(Some(&self.context_max_ratio), |v| json!(v)),
            SettingKey::PendingDeadline => of(self.pending_deadline.as_ref(), seconds),
            SettingKey::LocalRoot => path(self.local_root.as_ref()),
            SettingKey::LocalMaxConcurrent => of(self.local_max_concurrent.as_ref(), |n| json!(n)),
            SettingKey::LocalGpus => of(self.local_gpus.as_ref(), |n| json!(n)),
        }
    }

    /// The project, where one is required.
    ///
    /// # Errors
    /// [`SettingsError::MissingProject`] when no source gave one.
    pub fn require_project(&self) -> Result<&Setting<String>, SettingsError> {
        self.project.as_ref().ok_or(SettingsError::MissingProject)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn resolve(pairs: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        let env = env(pairs);
        let profiles = ProfileStore::new();
        Settings::resolve(
            &SettingsArgs::new(),
            &SettingsInput::new(&env, &profiles, Path::new("/work")),
        )
    }

    fn accel(text: &str) -> AcceleratorSpec {
        AcceleratorSpec::parse(text).unwrap()
    }

    #[test]
    fn the_backend_follows_the_setting_then_the_accelerator_and_the_cluster() {
        let home = [("HOME", "/home/u")];
        let s = resolve(&home).unwrap();
        let choice = s.choose_backend(&accel("l4")).unwrap();
        assert_eq!(
            (choice.name.as_str(), choice.source),
            ("local", Source::Default)
        );
        assert!(
            choice.why.contains("no cluster is configured"),
            "{}",
            choice.why
        );
        let s = resolve(&[("HOME", "/home/u"), ("KINETIC_PROJECT", "p")]).unwrap();
        let choice = s.choose_backend(&accel("l4")).unwrap();
        assert_eq!(choice.name, "gke");
        assert!(choice.why.contains("cannot serve gpu:l4"), "{}", choice.why);
        assert_eq!(s.choose_backend(&accel("cpu")).unwrap().name, "local");
        let slice = s.choose_backend(&accel("v5litepod-16")).unwrap();
        assert_eq!(slice.name, "pathways", "multi-host");
        assert!(slice.why.contains("spans 4 hosts"), "{}", slice.why);
        // A configured backend wins over the accelerator.
        let s = resolve(&[
            ("HOME", "/home/u"),
            ("KINETIC_PROJECT", "p"),
            ("KINETIC_BACKEND", "local"),
        ])
        .unwrap();
        let choice = s.choose_backend(&accel("l4")).unwrap();
        assert_eq!(
            (choice.name.as_str(), choice.source),
            ("local", Source::Env("KINETIC_BACKEND"))
        );
    }

    #[test]
    fn a_remote_backend_gets_the_jobs_bucket_and_refuses_local_stores() {
        let s = resolve(&[("HOME", "/home/u"), ("KINETIC_PROJECT", "p")]).unwrap();
        assert_eq!(
            s.store_for("local").unwrap().value,
            "file:///home/u/.kinetic/local/store"
        );
        assert_eq!(
            s.store_for("gke").unwrap().value,
            "gs://p-kn-kinetic-cluster-jobs"
        );
        let s = resolve(&[("HOME", "/home/u")]).unwrap();
        let e = s.store_for("gke").unwrap_err();
        assert!(
            matches!(e, SettingsError::RemoteStoreNeedsProject { .. }),
            "{e:?}"
        );
        // Each front end is told what to set by its own names.
        let cli = e.to_string();
        assert!(
            cli.ends_with(
                "no project is configured; set --project, KINETIC_PROJECT or a profile (`kinetic profile create`), or set KINETIC_STORE_URL=gs://BUCKET"
            ),
            "{cli}"
        );
        assert_eq!(cli, e.message_for(crate::advice::FrontEnd::CommandLine));
        let python = e.message_for(crate::advice::FrontEnd::Python);
        assert!(
            python.contains("; set project=, KINETIC_PROJECT or a profile")
                && !python.contains("--"),
            "{python}"
        );
        for url in ["file:///tmp/s", "memory://"] {
            let s = resolve(&[
                ("HOME", "/home/u"),
                ("KINETIC_STORE_URL", url),
                ("KINETIC_PROJECT", "p"),
            ])
            .unwrap();
            let e = s.store_for("gke").unwrap_err();
            assert!(e.is_invalid_input());
            let text = e.to_string();
            assert!(
                text.contains(&format!(
                    "KINETIC_STORE_URL={url} cannot be used with the gke backend"
                )) && text.contains("(gs://p-kn-kinetic-cluster-jobs)"),
                "{text}"
            );
            assert_eq!(s.store_for("local").unwrap().value, url);
        }
        let s = resolve(&[("HOME", "/home/u"), ("KINETIC_STORE_URL", "gs://b/x")]).unwrap();
        assert_eq!(s.store_for("gke").unwrap().value, "gs://b/x");
    }

    #[test]
    fn the_kube_context_is_the_configured_clusters() {
        let s = resolve(&[("HOME", "/home/u")]).unwrap();
        assert_eq!(s.kube_context, None, "no project: the current context");
        let s = resolve(&[
            ("HOME", "/home/u"),
            ("KINETIC_PROJECT", "p"),
            ("KINETIC_ZONE", "europe-west4-a"),
        ])
        .unwrap();
        assert_eq!(
            s.kube_context,
            Some(Setting::new(
                "gke_p_europe-west4-a_kinetic-cluster".to_owned(),
                Source::Default
            ))
        );
        let s = resolve(&[
            ("HOME", "/home/u"),
            ("KINETIC_PROJECT", "p"),
            ("KINETIC_KUBE_CONTEXT", "minikube"),
        ])
        .unwrap();
        assert_eq!(s.kube_context.unwrap().value, "minikube");
        let e = resolve(&[
            ("HOME", "/home/u"),
            ("KINETIC_PROJECT", "p"),
            ("KINETIC_KUBE_CONTEXT", "gke_q_us-east1-b_other"),
        ])
        .unwrap_err();
        assert!(matches!(e, SettingsError::ContextMismatch { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("'gke_p_us-central1-a_kinetic-cluster'"),
            "{e}"
        );
    }

    #[test]
    fn defaults_follow_home() {
        let s = resolve(&[("HOME", "/h")]).unwrap();
        assert_eq!(
            s.local_root().unwrap().value,
            Path::new("/h/.kinetic/local")
        );
        assert_eq!(
            s.store_url().unwrap().value,
            "file:///h/.kinetic/local/store"
        );
        assert_eq!(s.store_url().unwrap().source, Source::Default);
        assert_eq!(s.kubeconfig.unwrap().value, "/h/.kube/config");
        assert_eq!(
            s.profiles_file.value,
            Path::new("/h/.kinetic/profiles.json")
        );
        assert_eq!(s.backend.value, "local");
        assert!(s.default_excludes.value);
        assert_eq!(s.context_size_warn_bytes.value, DEFAULT_SIZE_WARN_BYTES);
        assert_eq!(s.pending_deadline, None);
        assert_eq!(s.cwd, Path::new("/work"));
        assert_eq!(s.builds_store_url, None);
    }

    #[test]
    fn context_limits_are_settings_the_runner_receives() {
        let s = resolve(&[("HOME", "/h")]).unwrap();
        assert_eq!(s.engine().extract_limits, ExtractLimits::default());
        assert_eq!(s.context_max_files.source, Source::Default);
        let s = resolve(&[
            ("HOME", "/h"),
            ("KINETIC_CONTEXT_MAX_MB", "1.5"),
            ("KINETIC_CONTEXT_MAX_FILES", "10"),
            ("KINETIC_CONTEXT_MAX_RATIO", "1000"),
        ])
        .unwrap();
        assert_eq!(
            s.engine().extract_limits,
            ExtractLimits::new(1_572_864, 10, 1000)
        );
        assert_eq!(
            s.context_max_ratio.source,
            Source::Env("KINETIC_CONTEXT_MAX_RATIO")
        );
        for (var, value) in [
            ("KINETIC_CONTEXT_MAX_MB", "0"),
            ("KINETIC_CONTEXT_MAX_MB", "lots"),
            ("KINETIC_CONTEXT_MAX_FILES", "-3"),
            ("KINETIC_CONTEXT_MAX_RATIO", "inf"),
        ] {
            let err = resolve(&[("HOME", "/h"), (var, value)]).unwrap_err();
            assert!(err.to_string().contains(var), "{err}");
            assert!(err.is_invalid_input());
        }
    }

    #[test]
    fn no_home_leaves_local_paths_unset() {
        let s = resolve(&[("KINETIC_PROFILES_FILE", "/p.json")]).unwrap();
        assert!(matches!(s.local_root(), Err(SettingsError::NoLocalRoot)));
        assert!(matches!(s.store_url(), Err(SettingsError::NoLocalRoot)));
        assert!(!SettingsError::NoLocalRoot.is_invalid_input());
        assert!(matches!(
            resolve(&[]),
            Err(SettingsError::Profile(ProfileError::NoHome))
        ));
    }

    #[test]
    fn invalid_values_name_the_variable_and_what_is_accepted() {
        for (var, value, expected) in [
            ("KINETIC_PENDING_DEADLINE", "soon", SECONDS_EXPECTED),
            ("KINETIC_PENDING_DEADLINE", "-1", SECONDS_EXPECTED),
            ("KINETIC_PENDING_DEADLINE", "1e30", SECONDS_EXPECTED),
            ("KINETIC_PENDING_DEADLINE", "31536001", SECONDS_EXPECTED),
            (
                "KINETIC_LOCAL_MAX_CONCURRENT",
                "0",
                "a positive integer, at most 1024",
            ),
            (
                "KINETIC_LOCAL_MAX_CONCURRENT",
                "two",
                "a positive integer, at most 1024",
            ),
            (
                "KINETIC_LOCAL_MAX_CONCURRENT",
                "1000000000000",
                "a positive integer, at most 1024",
            ),
            ("KINETIC_LOCAL_GPUS", "-1", "a number of GPUs, 0 to 1024"),
            ("KINETIC_LOCAL_GPUS", "two", "a number of GPUs, 0 to 1024"),
            ("KINETIC_LOCAL_GPUS", "1025", "a number of GPUs, 0 to 1024"),
        ] {
            let err = resolve(&[("HOME", "/h"), (var, value)]).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("{var}={value:?} is not accepted: expected {expected}")
            );
            assert!(err.is_invalid_input());
        }
        let s = resolve(&[("HOME", "/h"), ("KINETIC_PENDING_DEADLINE", "2.5")]).unwrap();
        assert_eq!(
            s.pending_deadline.unwrap(),
            Setting::new(
                Duration::from_millis(2500),
                Source::Env("KINETIC_PENDING_DEADLINE")
            )
        );
    }

    #[test]
    fn bare_gs_store_names_the_jobs_bucket_or_needs_a_project() {
        let err = resolve(&[("HOME", "/h"), ("KINETIC_STORE_URL", "gs://")]).unwrap_err();
        assert!(matches!(err, SettingsError::StoreNeedsProject));
        assert!(err.to_string().starts_with("KINETIC_STORE_URL=gs:// names"));
        let s = resolve(&[
            ("HOME", "/h"),
            ("KINETIC_STORE_URL", "gs://"),
            ("KINETIC_PROJECT", "p"),
            ("KINETIC_CLUSTER", "c"),
        ])
        .unwrap();
        assert_eq!(s.store_url().unwrap().value, "gs://p-kn-c-jobs");
        assert_eq!(s.record_bucket_name(), "p-kn-c-jobs");
        assert_eq!(s.builds_store_url.unwrap().value, "gs://p-kn-c-builds");
    }

    #[test]
    fn record_bucket_names() {
        let s = resolve(&[("HOME", "/h"), ("KINETIC_STORE_URL", "gs://b/pre/fix")]).unwrap();
        assert_eq!(s.record_bucket_name(), "b");
        let s = resolve(&[("HOME", "/h"), ("KINETIC_PROJECT", "p")]).unwrap();
        assert_eq!(s.record_bucket_name(), "p-kn-kinetic-cluster-jobs");
        let s = resolve(&[("HOME", "/h")]).unwrap();
        assert_eq!(s.record_bucket_name(), "file:///h/.kinetic/local/store");
    }

    #[test]
    fn packaging_settings() {
        let s = resolve(&[
            ("HOME", "/h"),
            ("KINETIC_NO_DEFAULT_EXCLUDES", "1"),
            ("KINETIC_PACKAGE_ROOT", "/src"),
            ("KINETIC_CONTEXT_SIZE_WARN_MB", "0.5"),
        ])
        .unwrap();
        assert!(!s.default_excludes.value);
        assert_eq!(s.package_root.as_ref().unwrap().value, "/src");
        assert_eq!(s.context_size_warn_bytes.value, 512 * 1024);
        let e = s.engine();
        assert!(!e.default_excludes);
        assert_eq!(e.package_root.as_deref(), Some("/src"));
        assert_eq!(e.home.as_deref(), Some(Path::new("/h")));

        for (raw, bytes, warned) in [
            ("0", 0, false),
            ("-3", 0, false),
            ("lots", DEFAULT_SIZE_WARN_BYTES, true),
            ("", DEFAULT_SIZE_WARN_BYTES, false),
        ] {
            let (setting, warning) =
                context_size_warn(&env(&[("KINETIC_CONTEXT_SIZE_WARN_MB", raw)]));
            assert_eq!((setting.value, warning.is_some()), (bytes, warned), "{raw}");
        }
        // Only exactly "1" keeps the default excludes out.
        assert!(default_excludes(&env(&[("KINETIC_NO_DEFAULT_EXCLUDES", "true")])).value);
    }

    #[test]
    fn secrets_are_redacted_in_entries() {
        let s = resolve(&[("HOME", "/h"), ("KINETIC_ACCESS_TOKEN", "s3cret")]).unwrap();
        let shown = format!("{:?} {:?}", s, s.entries());
        assert!(!shown.contains("s3cret"), "{shown}");
        let token = s
            .entries()
            .into_iter()
            .find(|e| e.key == "access_token")
            .unwrap();
        assert_eq!(token.text().as_deref(), Some("<redacted>"));
        assert_eq!(token.source, Some(Source::Env("KINETIC_ACCESS_TOKEN")));
    }

    #[test]
    fn infrastructure_settings() {
        let s = resolve(&[
            ("HOME", "/h"),
            ("KINETIC_CONTAINER_ENDPOINT", "http://127.0.0.1:9"),
            ("KINETIC_LWS_MANIFESTS_URL", "http://127.0.0.1:9/lws.yaml"),
            ("KINETIC_OPERATION_TIMEOUT", "90"),
            ("KINETIC_RESERVATION", "env-res"),
        ])
        .unwrap();
        assert_eq!(s.container_endpoint.unwrap().value, "http://127.0.0.1:9");
        assert_eq!(s.iam_endpoint, None);
        assert_eq!(
            s.lws_manifests_url.unwrap().value,
            "http://127.0.0.1:9/lws.yaml"
        );
        assert_eq!(s.operation_timeout.unwrap().value, Duration::from_secs(90));
        assert_eq!(
            s.reservation.unwrap(),
            Setting::new("env-res".into(), Source::Env("KINETIC_RESERVATION"))
        );
        let env = env(&[("HOME", "/h"), ("KINETIC_RESERVATION", "env-res")]);
        let profiles = ProfileStore::new();
        let input = SettingsInput::new(&env, &profiles, Path::new("/"));
        let s = Settings::resolve(&SettingsArgs::new().reservation("arg-res"), &input).unwrap();
        assert_eq!(s.reservation.unwrap().source, Source::Argument);
        let err = resolve(&[("HOME", "/h"), ("KINETIC_OPERATION_TIMEOUT", "never")]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("KINETIC_OPERATION_TIMEOUT=\"never\""),
            "{err}"
        );
    }

    #[test]
    fn arguments_beat_the_environment() {
        let env = env(&[("HOME", "/h"), ("KINETIC_BASE_IMAGE_REPO", "env-repo")]);
        let profiles = ProfileStore::new();
        let input = SettingsInput::new(&env, &profiles, Path::new("/"));
        let s = Settings::resolve(
            &SettingsArgs::new()
                .base_image_repo("arg-repo")
                .kube_context("ctx"),
            &input,
        )
        .unwrap();
        assert_eq!(
            s.base_image_repo,
            Setting::new("arg-repo".into(), Source::Argument)
        );
        assert_eq!(s.kube_context.unwrap().value, "ctx");
        let s = Settings::resolve(&SettingsArgs::new(), &input).unwrap();
        assert_eq!(
            s.base_image_repo.source,
            Source::Env("KINETIC_BASE_IMAGE_REPO")
        );
        assert_eq!(crate::config::DEFAULT_BASE_IMAGE_REPO, "kinetic");
    }
}
