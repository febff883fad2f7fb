//! The cloud a cluster needs, as values: what `kinetic up` provisions, what
//! `kinetic pool add` adds, and the ordered plan that takes the observed
//! cloud to the desired one — without doing any of it.
//!
//! The state is the cloud itself, read back through its APIs: an adapter
//! (`kinetic-infra-gcp`) fills an [`Observed`], [`plan_up`] diffs it
//! against the [`Desired`] infrastructure and returns a [`Plan`] of
//! [`Action`]s, the adapter executes them in order. A run that stops
//! midway leaves the cloud partly built; the next run observes that and
//! plans only what is still missing, so nothing is ever created twice and
//! `up` is idempotent by construction.
//!
//! - [`InfraTarget`]: project, zone, cluster and namespace, with every
//!   name derived from them (Kinetic's names: `kn-{cluster}`,
//!   `{project}-kn-{cluster}-jobs`, `kn-{cluster}-nodes@…`).
//! - [`Desired`]: the APIs, buckets (30-day delete rule, label), Artifact
//!   Registry repository, service accounts and their roles, the cluster
//!   (Workload Identity, GCS FUSE CSI driver, default pool), the `kinetic`
//!   Kubernetes service account bound to the node service account, the
//!   LeaderWorkerSet controller and, with GPU pools, the NVIDIA driver
//!   installer.
//! - [`PoolSpec`]: a node pool from the accelerator registry. Its nodes'
//!   labels, taints and extended resources are the very selector,
//!   tolerations and requests a job's pod is built with
//!   ([`AcceleratorSpec::node_selector`](kinetic_core::accelerators::AcceleratorSpec::node_selector),
//!   [`tolerations`](kinetic_core::accelerators::AcceleratorSpec::tolerations),
//!   [`resources`](kinetic_core::accelerators::AcceleratorSpec::resources)), so
//!   jobs and pools match by construction.
//! - [`plan_up`], [`plan_pool_add`], [`plan_pool_remove`], [`plan_down`]:
//!   observed → actions; [`status`] and [`doctor`]: observed → what is
//!   there, what is missing and the command that adds it.
//!
//! ```
//! use kinetic_core::accelerators::AcceleratorSpec;
//! use kinetic_infra_gcp::model::{self, Action, Desired, InfraTarget, Observed, PoolRequest, PoolSpec};
//!
//! let target = InfraTarget::new("my-proj", "us-central1-a", "kinetic-cluster", "default")?;
//! let desired = Desired::new(&target);
//! // Nothing exists yet: everything is planned, APIs first, the cluster
//! // before what lives in it.
//! let plan = model::plan_up(&desired, &Observed::default(), None)?;
//! assert!(matches!(plan.actions[0], Action::EnableApis { .. }));
//! assert!(plan.actions.iter().any(|a| matches!(a, Action::CreateCluster { .. })));
//!
//! // A pool for L4 GPUs on Spot VMs: its nodes carry what the job's pod selects.
//! let l4 = AcceleratorSpec::parse("l4:spot")?;
//! let pool = PoolSpec::new(&target, &PoolRequest::new(l4.clone()), "1a2b")?;
//! assert_eq!(pool.name, "gpu-l4-1a2b");
//! assert_eq!(pool.machine_type(), "g2-standard-4");
//! for (k, v) in l4.node_selector() {
//!     assert_eq!(pool.node_labels().get(&k), Some(&v));
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod desired;
mod doctor;
mod observed;
mod plan;
mod pool;
mod status;

use std::fmt;

use serde::Serialize;

use kinetic_core::config::DerivedNames;
use kinetic_core::settings::Settings;

pub use desired::{
    BucketSpec, ClusterSpec, DefaultPoolSpec, Desired, Grant, HOSTS_ROLE, JOBS_ROLE, KubeSpec,
    LWS_VERSION, ManifestBundle, RepositorySpec, Resource, RoleRule, RoleSpec, ServiceAccountSpec,
};
pub use doctor::{DoctorFacts, doctor};
pub use observed::{
    KubeconfigState, Observed, ObservedBucket, ObservedCluster, ObservedKube, ObservedPool,
    ResourceStatus,
};
pub use plan::{Action, Binding, Plan, plan_down, plan_pool_add, plan_pool_remove, plan_up};
pub use pool::{
    GPU_POOL_HEADROOM, MAX_RUN_DURATION, PoolRequest, PoolSpec, Taint, accelerator_label,
    accelerator_of_pool,
};
pub use status::{Check, CheckState, PoolStatus, StatusReport, status};

/// The APIs `kinetic up` enables (never disabled again). Compute Engine
/// and Kubernetes Engine carry the cluster, Cloud Storage the buckets,
/// Artifact Registry and Cloud Build the images, IAM and Resource Manager
/// the service accounts and their roles.
pub const REQUIRED_APIS: &[&str] = &[
    "compute.googleapis.com",
    "container.googleapis.com",
    "storage.googleapis.com",
    "artifactregistry.googleapis.com",
    "cloudbuild.googleapis.com",
    "iam.googleapis.com",
    "cloudresourcemanager.googleapis.com",
];

/// Objects in the cluster's buckets are deleted after this many days.
pub const BUCKET_TTL_DAYS: u32 = 30;

/// The label Kinetic puts on the buckets it creates (key, value).
pub const BUCKET_LABEL: (&str, &str) = ("goog-packaged-solution", "kinetic");

/// The label Kinetic puts on the cluster and its VMs (key, value).
pub const CLUSTER_LABEL: (&str, &str) = ("kinetic", "true");

/// The Kubernetes service account every job's pod runs as.
pub const KUBE_SERVICE_ACCOUNT: &str = "kinetic";

/// The annotation binding a Kubernetes service account to a Google one
/// (Workload Identity).
pub const WORKLOAD_IDENTITY_ANNOTATION: &str = "iam.gke.io/gcp-service-account";

/// The role that lets a Kubernetes service account act as a Google one.
pub const WORKLOAD_IDENTITY_ROLE: &str = "roles/iam.workloadIdentityUser";

/// The node label GKE gives every node of a pool (value: the pool's name).
pub const LABEL_NODE_POOL: &str = "cloud.google.com/gke-nodepool";

/// The node label Kinetic gives the nodes of its pools: the accelerator in
/// the pool-name spelling (`gpu-l4`, `tpu-v5litepod-4`), read back by
/// `kinetic status`.
pub const LABEL_POOL_ACCELERATOR: &str = "kinetic.dev/accelerator";

/// The name of the cluster's default node pool, where CPU jobs run.
pub const DEFAULT_POOL: &str = "default-pool";

/// The URL of a cluster's API server from GKE's `endpoint`: an address
/// (`34.1.2.3`) is served over HTTPS; an endpoint that is a URL already
/// (a test server's `http://127.0.0.1:PORT`) is kept.
pub fn cluster_url(endpoint: &str) -> String {
    if endpoint.contains("://") {
        endpoint.to_owned()
    } else {
        format!("https://{endpoint}")
    }
}

/// Why a plan could not be made, or a request is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InfraError {
    /// A name or value the cloud would refuse.
    #[error("{what} '{value}' is not accepted: {expected}")]
    Invalid {
        /// What it is (`cluster name`, `--min-nodes`).
        what: &'static str,
        /// The value given.
        value: String,
        /// What would be accepted.
        expected: String,
    },
    /// No project to provision in.
    #[error(
        "no GCP project configured: pass --project, set KINETIC_PROJECT or GOOGLE_CLOUD_PROJECT, or use a profile (kinetic profile create)"
    )]
    NoProject,
    /// The command needs the cluster, which does not exist.
    #[error("cluster '{cluster}' does not exist in {zone}: create it with `kinetic up`")]
    NoCluster {
        /// The cluster.
        cluster: String,
        /// Its zone.
        zone: String,
    },
    /// The cluster is being deleted or is broken.
    #[error("{message}")]
    ClusterUnusable {
        /// What is wrong and what to do.
        message: String,
    },
    /// A pool for a cluster `kinetic up` did not make, whose own pools
    /// say no service account to run new nodes as.
    #[error(
        "cluster '{cluster}' was not made by `kinetic up` (service account {account} does not exist) and its node pools name no service account to run a new pool's nodes as: run `kinetic up`, which adopts the cluster and makes the account"
    )]
    NotAdopted {
        /// The cluster.
        cluster: String,
        /// The account `kinetic up` would have made.
        account: String,
    },
    /// No pool of that name.
    #[error("no node pool '{name}' in cluster '{cluster}'; its pools: {existing}")]
    PoolNotFound {
        /// The name asked for.
        name: String,
        /// The cluster.
        cluster: String,
        /// The pools it has (`none` when it has none).
        existing: String,
    },
}

impl InfraError {
    /// True when the user's input is at fault (a bad name or value, a
    /// missing pool), rather than the state of the cloud.
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            Self::Invalid { .. } | Self::NoProject | Self::PoolNotFound { .. }
        )
    }
}

/// Where the infrastructure goes: project, zone, cluster, the namespace
/// jobs run in, and every name derived from them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct InfraTarget {
    /// GCP project id.
    pub project: String,
    /// GCP zone of the (zonal) cluster.
    pub zone: String,
    /// GKE cluster name.
    pub cluster: String,
    /// Kubernetes namespace jobs run in.
    pub namespace: String,
    /// The names derived from project, zone and cluster.
    pub names: DerivedNames,
}

fn invalid(what: &'static str, value: &str, expected: impl Into<String>) -> InfraError {
    InfraError::Invalid {
        what,
        value: value.to_owned(),
        expected: expected.into(),
    }
}

/// A DNS-1123 label of at most `max` characters that starts with a letter:
/// lowercase letters, digits and hyphens, not ending with a hyphen.
fn is_label(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && !s.ends_with('-')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// The longest node pool name GKE accepts.
pub const MAX_POOL_NAME: usize = 40;

/// Check a node pool name as GKE accepts it, before anything is asked of
/// the cloud (`pool remove ../../x` is refused here, not after a round of
/// API calls).
///
/// # Errors
/// [`InfraError::Invalid`] naming the value and what is accepted.
///
/// ```
/// use kinetic_infra_gcp::model::check_pool_name;
/// assert!(check_pool_name("kn-l4-0a1b").is_ok());
/// assert!(check_pool_name("../../x").is_err());
/// ```
pub fn check_pool_name(name: &str) -> Result<(), InfraError> {
    if is_label(name, MAX_POOL_NAME) {
        return Ok(());
    }
    Err(invalid(
        "node pool name",
        name,
        format!(
            "1 to {MAX_POOL_NAME} lowercase letters, digits and hyphens, starting with a letter (`kinetic pool list` shows the pools)"
        ),
    ))
}

/// The longest cluster name whose service account ids
/// (`kn-{cluster}-builds`, at most 30 characters) IAM accepts.
pub const MAX_CLUSTER_NAME: usize = 20;

impl InfraTarget {
    /// The target `project`/`zone`/`cluster`/`namespace`, checked against
    /// what Google Cloud accepts for the names derived from them.
    ///
    /// # Errors
    /// [`InfraError::Invalid`] naming the value and what is accepted.
    pub fn new(
        project: &str,
        zone: &str,
        cluster: &str,
        namespace: &str,
    ) -> Result<Self, InfraError> {
        if !(6..=30).contains(&project.len()) || !is_label(project, 30) || project.contains("--") {
            return Err(invalid(
                "project id",
                project,
                "6 to 30 lowercase letters, digits and hyphens, starting with a letter",
            ));
        }
        let mut parts = zone.rsplitn(2, '-');
        let zone_ok = matches!(
            (parts.next(), parts.next()),
            (Some(letter), Some(region))
                if letter.len() == 1 && letter.chars().all(|c| c.is_ascii_lowercase()) && region.contains('-')
        );
        if !zone_ok {
            return Err(invalid(
                "zone",
                zone,
                "a GCP zone such as us-central1-a (the cluster is zonal)",
            ));
        }
        if !is_label(cluster, MAX_CLUSTER_NAME) {
            return Err(invalid(
                "cluster name",
                cluster,
                format!(
                    "1 to {MAX_CLUSTER_NAME} lowercase letters, digits and hyphens, starting with a letter (its service account kn-{{cluster}}-builds must fit IAM's 30 characters)"
                ),
            ));
        }
        let namespace_ok = !namespace.is_empty()
            && namespace.len() <= 63
            && !namespace.starts_with('-')
            && !namespace.ends_with('-')
            && namespace
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !namespace_ok {
            return Err(invalid(
                "namespace",
                namespace,
                "a Kubernetes namespace name (lowercase letters, digits and hyphens)",
            ));
        }
        Ok(Self {
            project: project.to_owned(),
            zone: zone.to_owned(),
            cluster: cluster.to_owned(),
            namespace: namespace.to_owned(),
            names: DerivedNames::new(project, zone, cluster),
        })
    }

    /// The target the settings name.
    ///
    /// # Errors
    /// [`InfraError::NoProject`] without a project; [`InfraError::Invalid`]
    /// for a name Google Cloud would refuse.
    pub fn from_settings(settings: &Settings) -> Result<Self, InfraError> {
        let project = settings.project.as_ref().ok_or(InfraError::NoProject)?;
        Self::new(
            &project.value,
            &settings.zone.value,
            &settings.cluster.value,
            &settings.namespace.value,
        )
    }

    /// The Workload Identity pool of the project: `{project}.svc.id.goog`.
    pub fn workload_pool(&self) -> String {
        format!("{}.svc.id.goog", self.project)
    }

    /// The IAM member of the `kinetic` Kubernetes service account:
    /// `serviceAccount:{project}.svc.id.goog[{namespace}/kinetic]`.
    pub fn kube_service_account_member(&self) -> String {
        format!(
            "serviceAccount:{}[{}/{KUBE_SERVICE_ACCOUNT}]",
            self.workload_pool(),
            self.namespace
        )
    }

    /// The cluster's resource path: `projects/{p}/locations/{zone}/clusters/{c}`.
    pub fn cluster_path(&self) -> String {
        format!(
            "projects/{}/locations/{}/clusters/{}",
            self.project, self.zone, self.cluster
        )
    }

    /// The repository's resource path:
    /// `projects/{p}/locations/{ar_location}/repositories/kn-{c}`.
    pub fn repository_path(&self) -> String {
        format!(
            "projects/{}/locations/{}/repositories/{}",
            self.project, self.names.ar_location, self.names.ar_repository
        )
    }
}

impl fmt::Display for InfraTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cluster {} in {} (project {})",
            self.cluster, self.zone, self.project
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_where_google_would_refuse_them() {
        assert!(InfraTarget::new("my-proj", "us-central1-a", "kinetic-cluster", "default").is_ok());
        for (p, z, c, what) in [
            ("abc", "us-central1-a", "c", "project id"),
            ("My-Proj", "us-central1-a", "c", "project id"),
            ("my-proj", "us-central1", "c", "zone"),
            ("my-proj", "central", "c", "zone"),
            ("my-proj", "us-central1-a", "Kinetic", "cluster name"),
            (
                "my-proj",
                "us-central1-a",
                "a-very-long-cluster-name",
                "cluster name",
            ),
            ("my-proj", "us-central1-a", "ends-", "cluster name"),
            ("my-proj", "us-central1-a", "", "cluster name"),
        ] {
            let e = InfraTarget::new(p, z, c, "default").unwrap_err();
            assert!(
                matches!(&e, InfraError::Invalid { what: w, .. } if *w == what),
                "{p} {z} {c}: {e}"
            );
            assert!(e.is_invalid_input());
        }
        let t = InfraTarget::new("my-proj", "europe-west4-b", "c1", "team-a").unwrap();
        assert_eq!(t.workload_pool(), "my-proj.svc.id.goog");
        assert_eq!(
            t.kube_service_account_member(),
            "serviceAccount:my-proj.svc.id.goog[team-a/kinetic]"
        );
        assert_eq!(
            t.repository_path(),
            "projects/my-proj/locations/europe/repositories/kn-c1"
        );
        assert_eq!(
            t.cluster_path(),
            "projects/my-proj/locations/europe-west4-b/clusters/c1"
        );
    }
}
