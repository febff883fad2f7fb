//! Target resolution with provenance: for each of
//! project, zone, cluster and namespace, an explicit argument beats a
//! `KINETIC_*` variable (empty = unset), which beats the active profile,
//! which beats the built-in default. Every value remembers its [`Source`].

use std::fmt;

use serde::Serialize;
use serde::ser::SerializeMap;

use super::names::DerivedNames;
use super::profiles::{ProfileError, ProfileSelection, ProfileStore};
use super::{
    DEFAULT_BASE_IMAGE_REPO, DEFAULT_CLUSTER, DEFAULT_NAMESPACE, DEFAULT_ZONE, EnvLookup, vars,
};

/// Where a resolved value came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Source {
    /// Passed explicitly (API argument, CLI flag).
    Argument,
    /// The named environment variable.
    Env(&'static str),
    /// The named profile.
    Profile(String),
    /// The built-in default.
    Default,
}

impl fmt::Display for Source {
    /// `argument`, `env KINETIC_ZONE`, `profile 'dev'`, `default`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Argument => f.write_str("argument"),
            Self::Env(var) => write!(f, "env {var}"),
            Self::Profile(name) => write!(f, "profile '{name}'"),
            Self::Default => f.write_str("default"),
        }
    }
}

impl Serialize for Source {
    /// `{"kind": "env", "var": "KINETIC_ZONE"}`, `{"kind": "profile",
    /// "name": "dev"}`, `{"kind": "argument"}`, `{"kind": "default"}`.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut m = serializer.serialize_map(None)?;
        match self {
            Self::Argument => m.serialize_entry("kind", "argument")?,
            Self::Env(var) => {
                m.serialize_entry("kind", "env")?;
                m.serialize_entry("var", var)?;
            }
            Self::Profile(name) => {
                m.serialize_entry("kind", "profile")?;
                m.serialize_entry("name", name)?;
            }
            Self::Default => m.serialize_entry("kind", "default")?,
        }
        m.end()
    }
}

/// A resolved value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub struct Setting<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub source: Source,
}

impl<T> Setting<T> {
    /// A value with its source.
    pub fn new(value: T, source: Source) -> Self {
        Self { value, source }
    }
}

impl Setting<String> {
    /// The value as `&str`.
    pub fn as_str(&self) -> &str {
        &self.value
    }
}

/// Values passed explicitly (API arguments, CLI flags); each beats the
/// environment and the profile. Build with [`ConfigArgs::new`] and the
/// setters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigArgs {
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
}

impl ConfigArgs {
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
}

/// Why configuration could not be resolved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The profiles file could not be used, or a named profile does not exist.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// No project from argument, environment or profile.
    #[error(
        "No GCP project configured. Run 'kinetic init' or 'kinetic profile create NAME \
         --project PROJECT' to save an active profile, or override it by passing project= \
         (CLI: --project) or by setting the KINETIC_PROJECT (or GOOGLE_CLOUD_PROJECT) \
         environment variable."
    )]
    MissingProject,
}

impl ConfigError {
    /// True when the caller's input is at fault (an unknown or invalid
    /// profile name, no project given) rather than the profiles file.
    pub fn is_invalid_input(&self) -> bool {
        match self {
            Self::Profile(e) => e.is_invalid_input(),
            Self::MissingProject => true,
        }
    }
}

/// The profile that applied, by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub struct ProfileRef {
    /// Its name.
    pub name: String,
    /// How it was chosen.
    pub selected_by: ProfileSelection,
}

/// Configuration resolved as far as possible: the project may be missing.
/// What `kinetic config show` prints; [`PartialConfig::require_project`]
/// turns it into a [`ResolvedConfig`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PartialConfig {
    /// The profile that applied, if any.
    pub profile: Option<ProfileRef>,
    /// GCP project, if any source gave one.
    pub project: Option<Setting<String>>,
    /// GCP zone.
    pub zone: Setting<String>,
    /// GKE cluster.
    pub cluster: Setting<String>,
    /// Kubernetes namespace.
    pub namespace: Setting<String>,
    /// `KINETIC_OUTPUT_DIR`, if set.
    pub output_dir: Option<Setting<String>>,
    /// Repository of the prebuilt base images (`KINETIC_BASE_IMAGE_REPO`, default `kinetic`).
    pub base_image_repo: Setting<String>,
}

/// Fully resolved configuration: everything a job submission needs to
/// know about where it goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ResolvedConfig {
    /// The profile that applied, if any.
    pub profile: Option<ProfileRef>,
    /// GCP project.
    pub project: Setting<String>,
    /// GCP zone.
    pub zone: Setting<String>,
    /// GKE cluster.
    pub cluster: Setting<String>,
    /// Kubernetes namespace.
    pub namespace: Setting<String>,
    /// `KINETIC_OUTPUT_DIR`, if set.
    pub output_dir: Option<Setting<String>>,
    /// Repository of the prebuilt base images.
    pub base_image_repo: Setting<String>,
}

impl PartialConfig {
    /// The configuration with its project, or [`ConfigError::MissingProject`].
    ///
    /// # Errors
    /// [`ConfigError::MissingProject`].
    pub fn require_project(self) -> Result<ResolvedConfig, ConfigError> {
        let project = self.project.ok_or(ConfigError::MissingProject)?;
        Ok(ResolvedConfig {
            profile: self.profile,
            project,
            zone: self.zone,
            cluster: self.cluster,
            namespace: self.namespace,
            output_dir: self.output_dir,
            base_image_repo: self.base_image_repo,
        })
    }

    /// Derived names, when the project is known.
    pub fn names(&self) -> Option<DerivedNames> {
        self.project
            .as_ref()
            .map(|p| DerivedNames::new(&p.value, &self.zone.value, &self.cluster.value))
    }
}

impl ResolvedConfig {
    /// Buckets, repository, service accounts… for this target.
    pub fn names(&self) -> DerivedNames {
        DerivedNames::new(&self.project.value, &self.zone.value, &self.cluster.value)
    }
}

/// Resolve configuration, requiring a project.
///
/// # Errors
/// [`ConfigError::Profile`] when a named profile does not exist (the
/// store itself was loaded by the caller), [`ConfigError::MissingProject`].
pub fn resolve(
    args: &ConfigArgs,
    env: &dyn EnvLookup,
    store: &ProfileStore,
) -> Result<ResolvedConfig, ConfigError> {
    resolve_partial(args, env, store)?.require_project()
}

/// Resolve configuration without requiring a project.
///
/// # Errors
/// [`ConfigError::Profile`] when a named profile does not exist.
pub fn resolve_partial(
    args: &ConfigArgs,
    env: &dyn EnvLookup,
    store: &ProfileStore,
) -> Result<PartialConfig, ConfigError> {
    let active = store.active(args.profile.as_deref(), env)?;
    let profile = active.map(|a| a.profile);
    let from_profile = |field: fn(&super::Profile) -> &String| {
        profile.map(|p| Setting::new(field(p).clone(), Source::Profile(p.name.clone())))
    };
    let from_env = |var: &'static str| {
        env.non_empty(var)
            .map(|v| Setting::new(v, Source::Env(var)))
    };
    let field = |arg: &Option<String>,
                 var: &'static str,
                 pick: fn(&super::Profile) -> &String,
                 default: &str| {
        arg.clone()
            .map(|v| Setting::new(v, Source::Argument))
            .or_else(|| from_env(var))
            .or_else(|| from_profile(pick))
            .unwrap_or_else(|| Setting::new(default.to_owned(), Source::Default))
    };

    // Project: a non-empty argument wins; an empty one skips the profile.
    // An empty profile value also falls through to the fallbacks.
    let project = match args.project.as_deref() {
        Some(p) if !p.is_empty() => Some(Setting::new(p.to_owned(), Source::Argument)),
        Some(_) => from_env(vars::PROJECT),
        None => from_env(vars::PROJECT)
            .or_else(|| from_profile(|p| &p.project).filter(|s| !s.value.is_empty())),
    }
    .or_else(|| from_env(vars::GOOGLE_CLOUD_PROJECT));

    Ok(PartialConfig {
        profile: active.map(|a| ProfileRef {
            name: a.profile.name.clone(),
            selected_by: a.selected_by,
        }),
        project,
        zone: field(&args.zone, vars::ZONE, |p| &p.zone, DEFAULT_ZONE),
        cluster: field(
            &args.cluster,
            vars::CLUSTER,
            |p| &p.cluster,
            DEFAULT_CLUSTER,
        ),
        namespace: field(
            &args.namespace,
            vars::NAMESPACE,
            |p| &p.namespace,
            DEFAULT_NAMESPACE,
        ),
        output_dir: from_env(vars::OUTPUT_DIR),
        base_image_repo: from_env(vars::BASE_IMAGE_REPO)
            .unwrap_or_else(|| Setting::new(DEFAULT_BASE_IMAGE_REPO.to_owned(), Source::Default)),
    })
}
