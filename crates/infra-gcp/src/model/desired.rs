//! The infrastructure a cluster needs, as values: what `kinetic up`
//! provisions, each piece named as Kinetic names it.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::{
    BUCKET_LABEL, BUCKET_TTL_DAYS, CLUSTER_LABEL, DEFAULT_POOL, InfraTarget, KUBE_SERVICE_ACCOUNT,
    REQUIRED_APIS, WORKLOAD_IDENTITY_ROLE,
};

/// A Cloud Storage bucket of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BucketSpec {
    /// Bucket name.
    pub name: String,
    /// Location (the region for jobs, the Artifact Registry location for builds).
    pub location: String,
    /// Objects are deleted this many days after their creation.
    pub ttl_days: u32,
    /// Bucket labels.
    pub labels: BTreeMap<String, String>,
    /// Uniform bucket-level access (IAM only, no object ACLs).
    pub uniform_access: bool,
}

/// The Artifact Registry repository of the cluster's images.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RepositorySpec {
    /// Repository id (`kn-{cluster}`).
    pub name: String,
    /// Location (`us`, `europe`, `asia` or a region).
    pub location: String,
    /// `DOCKER`.
    pub format: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
}

/// A Google service account the cluster uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ServiceAccountSpec {
    /// The account id (`kn-{cluster}-nodes`).
    pub account_id: String,
    /// The e-mail (`kn-{cluster}-nodes@{project}.iam.gserviceaccount.com`).
    pub email: String,
    /// What it is for, shown in the console.
    pub display_name: String,
}

impl ServiceAccountSpec {
    /// The IAM member naming it: `serviceAccount:{email}`.
    pub fn member(&self) -> String {
        format!("serviceAccount:{}", self.email)
    }
}

/// A resource that carries an IAM policy.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "kind", content = "name", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Resource {
    /// The project.
    Project,
    /// A bucket, by name.
    Bucket(String),
    /// The cluster's Artifact Registry repository.
    Repository,
    /// A service account, by e-mail.
    ServiceAccount(String),
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Project => f.write_str("the project"),
            Self::Bucket(b) => write!(f, "bucket gs://{b}"),
            Self::Repository => f.write_str("the image repository"),
            Self::ServiceAccount(e) => write!(f, "service account {e}"),
        }
    }
}

/// One IAM binding the infrastructure needs: `member` holds `role` on `resource`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[non_exhaustive]
pub struct Grant {
    /// Where.
    pub resource: Resource,
    /// The role (`roles/storage.objectAdmin`).
    pub role: String,
    /// The member (`serviceAccount:…`).
    pub member: String,
}

impl Grant {
    fn new(resource: Resource, role: &str, member: &str) -> Self {
        Self {
            resource,
            role: role.to_owned(),
            member: member.to_owned(),
        }
    }
}

/// The cluster's default node pool, where CPU jobs and the system run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct DefaultPoolSpec {
    /// Pool name (`default-pool`).
    pub name: String,
    /// Machine type (`e2-standard-4`).
    pub machine_type: String,
    /// Boot disk size in GB.
    pub disk_size_gb: u32,
    /// Nodes.
    pub node_count: u32,
}

/// The GKE cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ClusterSpec {
    /// Cluster name.
    pub name: String,
    /// Zone (the cluster is zonal).
    pub zone: String,
    /// Workload Identity pool (`{project}.svc.id.goog`).
    pub workload_pool: String,
    /// The GCS FUSE CSI driver add-on (for `Data(…, fuse=True)`).
    pub gcs_fuse_csi: bool,
    /// Release channel (`STABLE`).
    pub release_channel: String,
    /// Cluster autoscaler profile (`OPTIMIZE_UTILIZATION`: idle nodes go fast).
    pub autoscaling_profile: String,
    /// The default node pool.
    pub default_pool: DefaultPoolSpec,
    /// The service account of every node.
    pub node_service_account: String,
    /// Resource labels of the cluster and its VMs.
    pub labels: BTreeMap<String, String>,
}

/// A set of Kubernetes manifests `up` installs from a published URL, and
/// the object whose presence says it is installed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ManifestBundle {
    /// What it is (`LeaderWorkerSet v0.5.1`).
    pub name: String,
    /// Where the multi-document YAML is published.
    pub url: String,
    /// `apiVersion` of the object that marks it installed.
    pub marker_api_version: String,
    /// `kind` of that object.
    pub marker_kind: String,
    /// Its namespace (`None`: cluster-scoped).
    pub marker_namespace: Option<String>,
    /// Its name.
    pub marker_name: String,
    /// The Deployment (`namespace/name`) that runs the bundle's controller
    /// (and webhooks): installed means its `Available` condition is
    /// `True`, not only that the marker exists.
    pub controller: Option<String>,
}

/// LeaderWorkerSet's release that `up` installs (Kinetic's).
pub const LWS_VERSION: &str = "v0.5.1";

impl ManifestBundle {
    /// The LeaderWorkerSet CRD and controller (multi-host TPU jobs), from
    /// `url` (default: the `v0.5.1` release's `manifests.yaml`).
    pub fn leader_worker_set(url: Option<&str>) -> Self {
        Self {
            name: format!("LeaderWorkerSet {LWS_VERSION} (CRD and controller)"),
            url: url.map_or_else(
                || {
                    format!(
                        "https://github.com/kubernetes-sigs/lws/releases/download/{LWS_VERSION}/manifests.yaml"
                    )
                },
                str::to_owned,
            ),
            marker_api_version: "apiextensions.k8s.io/v1".into(),
            marker_kind: "CustomResourceDefinition".into(),
            marker_namespace: None,
            marker_name: "leaderworkersets.leaderworkerset.x-k8s.io".into(),
            controller: Some("lws-system/lws-controller-manager".into()),
        }
    }

    /// The NVIDIA driver installer DaemonSet for Container-Optimized OS
    /// nodes with preloaded drivers, from `url` (default: the one GKE's
    /// documentation applies).
    pub fn nvidia_driver_installer(url: Option<&str>) -> Self {
        Self {
            name: "the NVIDIA driver installer DaemonSet".into(),
            url: url.unwrap_or("https://raw.githubusercontent.com/GoogleCloudPlatform/container-engine-accelerators/master/nvidia-driver-installer/cos/daemonset-preloaded.yaml").to_owned(),
            marker_api_version: "apps/v1".into(),
            marker_kind: "DaemonSet".into(),
            marker_namespace: Some("kube-system".into()),
            marker_name: "nvidia-driver-installer".into(),
            controller: None,
        }
    }
}

/// The namespaced Role `up` makes for the people who run jobs: what the
/// built-in `edit` ClusterRole lacks. `edit` covers gke jobs (Jobs, pods,
/// their logs, Secrets, events); it has no `leaderworkersets`, since
/// LeaderWorkerSet's release manifests aggregate no role into it, so a
/// pathways job needs this one too. Bind both to a user in the jobs'
/// namespace (the README's "Permissions").
pub const JOBS_ROLE: &str = "kinetic-jobs";

/// A rule of a Kubernetes Role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RoleRule {
    /// `apiGroups`.
    pub api_groups: Vec<String>,
    /// `resources` (subresources as `leaderworkersets/status`).
    pub resources: Vec<String>,
    /// `verbs`.
    pub verbs: Vec<String>,
}

/// The namespaced Role of [`JOBS_ROLE`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RoleSpec {
    /// Its name (`kinetic-jobs`).
    pub name: String,
    /// What it allows.
    pub rules: Vec<RoleRule>,
    /// The service account of the namespace it is bound to (a RoleBinding
    /// of the Role's name), if `up` binds it; a user's Roles are bound by
    /// whoever grants them.
    pub bound_to: Option<String>,
}

/// The namespaced Role `up` makes for the jobs' own pods, bound to their
/// service account: a slice's hosts end their LeaderWorkerSet themselves
/// once its function ended (`get` and `patch`), so its nodes are released
/// with no client polling, and admit the next queued slice of its pool
/// (`list` LeaderWorkerSets; `get`, `create`, `update` the pool's queue
/// ConfigMap); see `kinetic_backend_pathways::release` and `::admission`.
pub const HOSTS_ROLE: &str = "kinetic-slice-hosts";

impl RoleSpec {
    /// The jobs Role: every verb the pathways backend uses on
    /// LeaderWorkerSets (submit, watch, cancel, clean up) and their status.
    pub fn jobs() -> Self {
        let strings = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        Self {
            name: JOBS_ROLE.into(),
            rules: vec![
                RoleRule {
                    api_groups: strings(&["leaderworkerset.x-k8s.io"]),
                    resources: strings(&["leaderworkersets"]),
                    verbs: strings(&[
                        "get", "list", "watch", "create", "update", "patch", "delete",
                    ]),
                },
                RoleRule {
                    api_groups: strings(&["leaderworkerset.x-k8s.io"]),
                    resources: strings(&["leaderworkersets/status"]),
                    verbs: strings(&["get"]),
                },
            ],
            bound_to: None,
        }
    }

    /// The hosts Role ([`HOSTS_ROLE`]): `get`, `list` and `patch` on
    /// LeaderWorkerSets and `get`, `create`, `update` on ConfigMaps, bound
    /// to the jobs' service account `service_account`.
    pub fn slice_hosts(service_account: &str) -> Self {
        Self {
            name: HOSTS_ROLE.into(),
            rules: vec![
                RoleRule {
                    api_groups: vec!["leaderworkerset.x-k8s.io".into()],
                    resources: vec!["leaderworkersets".into()],
                    verbs: vec!["get".into(), "list".into(), "patch".into()],
                },
                RoleRule {
                    api_groups: vec![String::new()],
                    resources: vec!["configmaps".into()],
                    verbs: vec!["get".into(), "create".into(), "update".into()],
                },
            ],
            bound_to: Some(service_account.to_owned()),
        }
    }

    /// The RoleBinding of the Role to [`RoleSpec::bound_to`] in
    /// `namespace`, as the API takes it (`None` when it is bound to no
    /// one).
    pub fn binding_json(&self, namespace: &str) -> Option<serde_json::Value> {
        let account = self.bound_to.as_ref()?;
        Some(serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": self.name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "kinetic"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": self.name},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        }))
    }

    /// The Role as the API takes it, in `namespace`.
    pub fn to_json(&self, namespace: &str) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": self.name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "kinetic"}},
            "rules": self.rules.iter().map(|r| serde_json::json!({
                "apiGroups": r.api_groups, "resources": r.resources, "verbs": r.verbs,
            })).collect::<Vec<_>>(),
        })
    }
}

/// What `up` puts inside the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct KubeSpec {
    /// The namespace jobs run in.
    pub namespace: String,
    /// The Kubernetes service account of every job's pod (`kinetic`).
    pub service_account: String,
    /// The Google service account it acts as (Workload Identity): the node one.
    pub google_service_account: String,
    /// The Role job submitters need besides `edit` (pathways jobs).
    pub jobs_role: RoleSpec,
    /// The Role of the jobs' own pods, bound to their service account.
    pub hosts_role: RoleSpec,
    /// The LeaderWorkerSet controller.
    pub lws: ManifestBundle,
    /// The NVIDIA driver installer (installed once a GPU pool exists).
    pub nvidia_driver: ManifestBundle,
    /// The kubeconfig context `up` writes (`gke_{project}_{zone}_{cluster}`).
    pub context: String,
}

/// Everything `kinetic up` provisions for one cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Desired {
    /// Where.
    pub target: InfraTarget,
    /// APIs to enable.
    pub apis: Vec<String>,
    /// The jobs and builds buckets.
    pub buckets: Vec<BucketSpec>,
    /// The image repository.
    pub repository: RepositorySpec,
    /// The node and build service accounts.
    pub service_accounts: Vec<ServiceAccountSpec>,
    /// Every IAM binding, Workload Identity's included.
    pub grants: Vec<Grant>,
    /// The cluster.
    pub cluster: ClusterSpec,
    /// What goes inside it.
    pub kube: KubeSpec,
}

impl Desired {
    /// The infrastructure of `target`, with the published manifests'
    /// default URLs.
    pub fn new(target: &InfraTarget) -> Self {
        let names = &target.names;
        let label = |(k, v): (&str, &str)| BTreeMap::from([(k.to_owned(), v.to_owned())]);
        let bucket = |name: &str, location: &str| BucketSpec {
            name: name.to_owned(),
            location: location.to_owned(),
            ttl_days: BUCKET_TTL_DAYS,
            labels: label(BUCKET_LABEL),
            uniform_access: true,
        };
        let buckets = vec![
            bucket(&names.jobs_bucket, &names.region),
            bucket(&names.builds_bucket, &names.ar_location),
        ];
        let account = |suffix: &str, email: &str, what: &str| ServiceAccountSpec {
            account_id: format!("kn-{}-{suffix}", target.cluster),
            email: email.to_owned(),
            display_name: format!("Kinetic {what} of cluster {}", target.cluster),
        };
        let nodes = account("nodes", &names.node_service_account, "nodes");
        let builds = account("builds", &names.build_service_account, "image builds");

        let mut grants = Vec::new();
        for role in [
            "roles/logging.logWriter",
            "roles/monitoring.metricWriter",
            "roles/container.defaultNodeServiceAccount",
        ] {
            grants.push(Grant::new(Resource::Project, role, &nodes.member()));
        }
        grants.push(Grant::new(
            Resource::Project,
            "roles/logging.logWriter",
            &builds.member(),
        ));
        for b in &buckets {
            for sa in [&nodes, &builds] {
                for role in [
                    "roles/storage.objectAdmin",
                    "roles/storage.legacyBucketReader",
                ] {
                    grants.push(Grant::new(
                        Resource::Bucket(b.name.clone()),
                        role,
                        &sa.member(),
                    ));
                }
            }
        }
        grants.push(Grant::new(
            Resource::Repository,
            "roles/artifactregistry.reader",
            &nodes.member(),
        ));
        grants.push(Grant::new(
            Resource::Repository,
            "roles/artifactregistry.writer",
            &builds.member(),
        ));
        grants.push(Grant::new(
            Resource::ServiceAccount(nodes.email.clone()),
            WORKLOAD_IDENTITY_ROLE,
            &target.kube_service_account_member(),
        ));

        let cluster = ClusterSpec {
            name: target.cluster.clone(),
            zone: target.zone.clone(),
            workload_pool: target.workload_pool(),
            gcs_fuse_csi: true,
            release_channel: "STABLE".into(),
            autoscaling_profile: "OPTIMIZE_UTILIZATION".into(),
            default_pool: DefaultPoolSpec {
                name: DEFAULT_POOL.into(),
                machine_type: "e2-standard-4".into(),
                disk_size_gb: 50,
                node_count: 1,
            },
            node_service_account: nodes.email.clone(),
            labels: label(CLUSTER_LABEL),
        };
        Self {
            target: target.clone(),
            apis: REQUIRED_APIS.iter().map(|s| (*s).to_owned()).collect(),
            repository: RepositorySpec {
                name: names.ar_repository.clone(),
                location: names.ar_location.clone(),
                format: "DOCKER".into(),
                labels: label(BUCKET_LABEL),
            },
            buckets,
            kube: KubeSpec {
                namespace: target.namespace.clone(),
                service_account: KUBE_SERVICE_ACCOUNT.into(),
                google_service_account: nodes.email.clone(),
                jobs_role: RoleSpec::jobs(),
                hosts_role: RoleSpec::slice_hosts(KUBE_SERVICE_ACCOUNT),
                lws: ManifestBundle::leader_worker_set(None),
                nvidia_driver: ManifestBundle::nvidia_driver_installer(None),
                context: names.kube_context.clone(),
            },
            service_accounts: vec![nodes, builds],
            grants,
            cluster,
        }
    }

    /// The infrastructure the settings name (project, zone, cluster,
    /// namespace, manifest URLs).
    ///
    /// # Errors
    /// As [`InfraTarget::from_settings`].
    pub fn from_settings(
        settings: &kinetic_core::settings::Settings,
    ) -> Result<Self, super::InfraError> {
        let target = InfraTarget::from_settings(settings)?;
        Ok(Self::new(&target).with_manifest_urls(
            settings
                .lws_manifests_url
                .as_ref()
                .map(|s| s.value.as_str()),
            settings
                .nvidia_driver_manifest_url
                .as_ref()
                .map(|s| s.value.as_str()),
        ))
    }

    /// The same infrastructure with the manifests taken from these URLs
    /// (`None` keeps the default).
    #[must_use]
    pub fn with_manifest_urls(mut self, lws: Option<&str>, nvidia_driver: Option<&str>) -> Self {
        if lws.is_some() {
            self.kube.lws = ManifestBundle::leader_worker_set(lws);
        }
        if nvidia_driver.is_some() {
            self.kube.nvidia_driver = ManifestBundle::nvidia_driver_installer(nvidia_driver);
        }
        self
    }

    /// The node service account (pods act as it through Workload Identity).
    pub fn node_service_account(&self) -> &ServiceAccountSpec {
        &self.service_accounts[0]
    }

    /// The members of the cluster's own service accounts.
    pub fn own_members(&self) -> Vec<String> {
        self.service_accounts.iter().map(|s| s.member()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinetics_names_and_the_30_day_rule() {
        let t = InfraTarget::new("my-proj", "europe-west4-b", "c1", "default").unwrap();
        let d = Desired::new(&t);
        assert_eq!(d.buckets[0].name, "my-proj-kn-c1-jobs");
        assert_eq!(d.buckets[0].location, "europe-west4");
        assert_eq!(d.buckets[1].name, "my-proj-kn-c1-builds");
        assert_eq!(d.buckets[1].location, "europe");
        assert!(
            d.buckets
                .iter()
                .all(|b| b.ttl_days == 30 && b.uniform_access)
        );
        assert_eq!(d.buckets[0].labels["goog-packaged-solution"], "kinetic");
        assert_eq!(d.repository.name, "kn-c1");
        assert_eq!(d.repository.location, "europe");
        assert_eq!(
            d.node_service_account().email,
            "kn-c1-nodes@my-proj.iam.gserviceaccount.com"
        );
        assert_eq!(d.service_accounts[1].account_id, "kn-c1-builds");
        assert_eq!(d.cluster.workload_pool, "my-proj.svc.id.goog");
        assert!(d.cluster.gcs_fuse_csi);
        assert_eq!(d.kube.context, "gke_my-proj_europe-west4-b_c1");
        assert!(d.grants.contains(&Grant::new(
            Resource::ServiceAccount("kn-c1-nodes@my-proj.iam.gserviceaccount.com".into()),
            "roles/iam.workloadIdentityUser",
            "serviceAccount:my-proj.svc.id.goog[default/kinetic]",
        )));
        // Both accounts read and write both buckets.
        let on_jobs = d
            .grants
            .iter()
            .filter(|g| g.resource == Resource::Bucket("my-proj-kn-c1-jobs".into()))
            .count();
        assert_eq!(on_jobs, 4);
        assert!(d.kube.lws.url.ends_with("/v0.5.1/manifests.yaml"));
        let d = d.with_manifest_urls(Some("http://127.0.0.1:1/lws.yaml"), None);
        assert_eq!(d.kube.lws.url, "http://127.0.0.1:1/lws.yaml");
        assert!(
            d.kube
                .nvidia_driver
                .url
                .contains("daemonset-preloaded.yaml")
        );
    }
}
