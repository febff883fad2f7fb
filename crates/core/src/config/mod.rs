//! Configuration: which project, zone, cluster and namespace a job targets,
//! where each value came from, the profiles file shared with Kinetic, and
//! the names derived from the target. [`crate::settings`] builds on it to
//! resolve every other setting.
//!
//! Resolution is pure: [`resolve`] takes the explicit arguments, an
//! [`EnvLookup`] and a loaded [`ProfileStore`]. The only IO is
//! [`ProfileStore::load`] / [`ProfileStore::save`] and [`ProcessEnv`].
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::path::Path;
//! use kinetic_core::config::{resolve, ConfigArgs, ProfileStore, Source};
//!
//! let store = ProfileStore::from_json(
//!     r#"{"current": "dev", "profiles": {"dev": {"project": "p", "zone": "europe-west4-b", "cluster": "c"}}}"#,
//!     Path::new("profiles.json"),
//! )?;
//! let env = BTreeMap::from([("KINETIC_CLUSTER".to_owned(), "env-cluster".to_owned())]);
//! let cfg = resolve(&ConfigArgs::new().namespace("ns"), &env, &store)?;
//!
//! assert_eq!(cfg.project.source, Source::Profile("dev".into()));
//! assert_eq!(cfg.cluster.source, Source::Env("KINETIC_CLUSTER"));
//! assert_eq!(cfg.namespace.source, Source::Argument);
//! assert_eq!(cfg.names().jobs_bucket, "p-kn-env-cluster-jobs");
//! assert_eq!(cfg.names().ar_location, "europe");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod names;
mod profiles;
mod resolve;

use std::collections::{BTreeMap, HashMap};

pub use names::{
    DerivedNames, ar_repository, builds_bucket, jobs_bucket, kube_context, registry_prefix,
    registry_prefix_at, zone_to_ar_location, zone_to_region,
};
pub use profiles::{
    ActiveProfile, CLUSTER_DELETED_KEY, Profile, ProfileError, ProfileSelection, ProfileStore,
    profiles_path, validate_profile_name,
};
pub use resolve::{
    ConfigArgs, ConfigError, PartialConfig, ProfileRef, ResolvedConfig, Setting, Source, resolve,
    resolve_partial,
};

/// Default GCP zone.
pub const DEFAULT_ZONE: &str = "us-central1-a";
/// Region of the default zone, and the region of any zone without a `-`.
pub const DEFAULT_REGION: &str = "us-central1";
/// Default GKE cluster name.
pub const DEFAULT_CLUSTER: &str = "kinetic-cluster";
/// Default Kubernetes namespace.
pub const DEFAULT_NAMESPACE: &str = "default";
/// Default repository of the prebuilt base images.
pub const DEFAULT_BASE_IMAGE_REPO: &str = "kinetic";

/// Names of the environment variables settings are read from.
pub use crate::settings::vars;

/// Read access to environment variables, so resolution can be tested
/// without touching the process environment.
///
/// Implemented for [`ProcessEnv`], maps of names to values, and closures
/// `Fn(&str) -> Option<String>`.
pub trait EnvLookup {
    /// The variable's value, if set.
    fn var(&self, name: &str) -> Option<String>;

    /// The variable's value if set and not empty (Kinetic treats an empty
    /// variable as unset).
    fn non_empty(&self, name: &str) -> Option<String> {
        self.var(name).filter(|v| !v.is_empty())
    }
}

/// The real process environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl EnvLookup for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

impl<F: Fn(&str) -> Option<String>> EnvLookup for F {
    fn var(&self, name: &str) -> Option<String> {
        self(name)
    }
}

impl EnvLookup for crate::env::EnvSnapshot {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).map(|v| v.expose().to_owned())
    }
}

impl EnvLookup for BTreeMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}

impl<S: std::hash::BuildHasher> EnvLookup for HashMap<String, String, S> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}
