//! Names derived from project, zone and cluster: the buckets, Artifact
//! Registry repository, service accounts and kubeconfig context that
//! Kinetic's `kinetic up` creates and every job uses. Both tools must agree
//! on them, so they are Kinetic's, character for character, and each has
//! exactly one definition here.

use serde::Serialize;

use super::DEFAULT_REGION;

/// The region of a zone: the zone without its last `-` segment
/// (`us-central1-a` → `us-central1`); an empty zone or one without `-`
/// gives `us-central1`.
pub fn zone_to_region(zone: &str) -> String {
    match zone.rsplit_once('-') {
        Some((region, _)) if !zone.is_empty() => region.to_owned(),
        _ => DEFAULT_REGION.to_owned(),
    }
}

/// The Artifact Registry location for a zone: the multi-region `us`,
/// `europe` or `asia` when the region is in one, else the region itself
/// (`me-west1-a` → `me-west1`).
pub fn zone_to_ar_location(zone: &str) -> String {
    let region = zone_to_region(zone);
    match region.split('-').next() {
        Some(first @ ("us" | "europe" | "asia")) => first.to_owned(),
        _ => region,
    }
}

/// Jobs bucket: `{project}-kn-{cluster}-jobs` (in the zone's region).
pub fn jobs_bucket(project: &str, cluster: &str) -> String {
    format!("{project}-kn-{cluster}-jobs")
}

/// Builds bucket: `{project}-kn-{cluster}-builds` (in the AR location).
pub fn builds_bucket(project: &str, cluster: &str) -> String {
    format!("{project}-kn-{cluster}-builds")
}

/// Artifact Registry repository: `kn-{cluster}`.
pub fn ar_repository(cluster: &str) -> String {
    format!("kn-{cluster}")
}

/// Image registry prefix of the cluster in `zone`:
/// `{ar_location}-docker.pkg.dev/{project}/kn-{cluster}`.
pub fn registry_prefix(project: &str, zone: &str, cluster: &str) -> String {
    registry_prefix_at(&zone_to_ar_location(zone), project, cluster)
}

/// Image registry prefix in a known Artifact Registry location:
/// `{ar_location}-docker.pkg.dev/{project}/kn-{cluster}`.
pub fn registry_prefix_at(ar_location: &str, project: &str, cluster: &str) -> String {
    format!(
        "{ar_location}-docker.pkg.dev/{project}/{}",
        ar_repository(cluster)
    )
}

/// The kubeconfig cluster/context name GKE credentials create:
/// `gke_{project}_{zone}_{cluster}`.
pub fn kube_context(project: &str, zone: &str, cluster: &str) -> String {
    format!("gke_{project}_{zone}_{cluster}")
}

/// Every name derived from one target, for display and for the adapters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub struct DerivedNames {
    /// Region of the zone (`us-central1`).
    pub region: String,
    /// Artifact Registry location (`us`, `me-west1`).
    pub ar_location: String,
    /// `{project}-kn-{cluster}-jobs`.
    pub jobs_bucket: String,
    /// `{project}-kn-{cluster}-builds`.
    pub builds_bucket: String,
    /// `kn-{cluster}`.
    pub ar_repository: String,
    /// `{ar_location}-docker.pkg.dev/{project}/kn-{cluster}`.
    pub registry_prefix: String,
    /// `gke_{project}_{zone}_{cluster}`.
    pub kube_context: String,
    /// `kn-{cluster}-nodes@{project}.iam.gserviceaccount.com`.
    pub node_service_account: String,
    /// `kn-{cluster}-builds@{project}.iam.gserviceaccount.com`.
    pub build_service_account: String,
    /// Kubernetes service account every pod runs as: `kinetic`.
    pub k8s_service_account: String,
    /// VPC network: `kn-{cluster}`.
    pub network: String,
    /// Cloud Router: `kn-{cluster}-router`.
    pub router: String,
    /// Cloud NAT: `kn-{cluster}-nat`.
    pub nat: String,
    /// Infrastructure state bucket: `gs://{project}-kinetic-state`.
    pub state_bucket_url: String,
    /// Pulumi stack of the cluster: `{project}-{cluster}`.
    pub stack: String,
}

impl DerivedNames {
    /// The names for `project`, `zone` and `cluster`.
    pub fn new(project: &str, zone: &str, cluster: &str) -> Self {
        Self {
            region: zone_to_region(zone),
            ar_location: zone_to_ar_location(zone),
            jobs_bucket: jobs_bucket(project, cluster),
            builds_bucket: builds_bucket(project, cluster),
            ar_repository: ar_repository(cluster),
            registry_prefix: registry_prefix(project, zone, cluster),
            kube_context: kube_context(project, zone, cluster),
            node_service_account: format!("kn-{cluster}-nodes@{project}.iam.gserviceaccount.com"),
            build_service_account: format!("kn-{cluster}-builds@{project}.iam.gserviceaccount.com"),
            k8s_service_account: "kinetic".to_owned(),
            network: format!("kn-{cluster}"),
            router: format!("kn-{cluster}-router"),
            nat: format!("kn-{cluster}-nat"),
            state_bucket_url: format!("gs://{project}-kinetic-state"),
            stack: format!("{project}-{cluster}"),
        }
    }
}
