//! Configuration: the profiles file shared with Kinetic, the names
//! derived from a target (project, zone, cluster), the built-in defaults,
//! and the provenance every resolved value carries ([`Setting`],
//! [`Source`]). [`crate::settings`] resolves every setting, the target
//! included, from its one table of keys.
//!
//! The only IO is [`ProfileStore::load`] / [`ProfileStore::save`] and
//! [`ProcessEnv`].
//!
//! ```
//! use kinetic_core::config::DerivedNames;
//!
//! let names = DerivedNames::new("p", "europe-west4-b", "c");
//! assert_eq!(names.jobs_bucket, "p-kn-c-jobs");
//! assert_eq!(names.ar_location, "europe");
//! ```

mod names;
mod profiles;
mod source;

use std::collections::{BTreeMap, HashMap};

pub use names::{
    DerivedNames, ar_repository, builds_bucket, jobs_bucket, kube_context, registry_prefix,
    registry_prefix_at, zone_to_ar_location, zone_to_region,
};
pub use profiles::{
    ActiveProfile, CLUSTER_DELETED_KEY, Profile, ProfileError, ProfileSelection, ProfileStore,
    profiles_path, validate_profile_name,
};
pub use source::{ProfileRef, Setting, Source};

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
