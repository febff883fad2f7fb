//! What exists, as an adapter read it back from the cloud's APIs. Absent
//! things are absent (`None`, not in a set): the planner plans them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use super::Resource;
use super::desired::RoleRule;
use kinetic_core::accelerators::AcceleratorSpec;

/// The life-cycle state of a cluster or node pool, as GKE reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum ResourceStatus {
    /// Being created.
    Provisioning,
    /// Ready.
    Running,
    /// Running, with errors on some nodes (pools).
    RunningWithError,
    /// Being changed (an update or repair in progress).
    Reconciling,
    /// Being deleted.
    Stopping,
    /// Failed; the message says why.
    Error,
    /// Running but impaired (clusters).
    Degraded,
    /// A state this code does not know.
    Other(String),
}

impl ResourceStatus {
    /// GKE's status string (`RUNNING`, `PROVISIONING`, …).
    pub fn parse(s: &str) -> Self {
        match s {
            "PROVISIONING" => Self::Provisioning,
            "RUNNING" => Self::Running,
            "RUNNING_WITH_ERROR" => Self::RunningWithError,
            "RECONCILING" => Self::Reconciling,
            "STOPPING" => Self::Stopping,
            "ERROR" => Self::Error,
            "DEGRADED" => Self::Degraded,
            other => Self::Other(other.to_owned()),
        }
    }

    /// True once it serves (running, possibly with errors or degraded).
    pub fn is_usable(&self) -> bool {
        matches!(
            self,
            Self::Running | Self::RunningWithError | Self::Degraded | Self::Reconciling
        )
    }

    /// True while an operation is changing it (creating, updating).
    pub fn is_settling(&self) -> bool {
        matches!(self, Self::Provisioning | Self::Reconciling)
    }
}

impl fmt::Display for ResourceStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Self::Provisioning => "PROVISIONING",
            Self::Running => "RUNNING",
            Self::RunningWithError => "RUNNING_WITH_ERROR",
            Self::Reconciling => "RECONCILING",
            Self::Stopping => "STOPPING",
            Self::Error => "ERROR",
            Self::Degraded => "DEGRADED",
            Self::Other(s) => s,
        };
        f.write_str(s)
    }
}

/// A bucket that exists.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ObservedBucket {
    /// Its location.
    pub location: String,
    /// The age (days) of its `Delete` lifecycle rule, if it has one.
    pub ttl_days: Option<u32>,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
}

impl ObservedBucket {
    /// A bucket in `location` with this delete rule and these labels.
    pub fn new(location: &str, ttl_days: Option<u32>, labels: BTreeMap<String, String>) -> Self {
        Self {
            location: location.to_owned(),
            ttl_days,
            labels,
        }
    }
}

/// A node pool that exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ObservedPool {
    /// Pool name.
    pub name: String,
    /// GKE's status.
    pub status: ResourceStatus,
    /// GKE's message about the status (errors).
    pub status_message: String,
    /// The nodes' machine type.
    pub machine_type: String,
    /// The accelerator its nodes carry (`None`: a CPU pool).
    pub accelerator: Option<AcceleratorSpec>,
    /// Spot VMs.
    pub spot: bool,
    /// The reservation it consumes.
    pub reservation: Option<String>,
    /// Autoscaling bounds (`None` when autoscaling is off).
    pub autoscaling: Option<(u32, u32)>,
    /// Nodes (ready, total) as Kubernetes sees them, when it was asked.
    pub nodes: Option<(u32, u32)>,
    /// The Google service account its nodes run as, as GKE gives it
    /// (`default`: the project's Compute Engine default account).
    pub service_account: Option<String>,
}

impl ObservedPool {
    /// A running pool of `machine_type` nodes carrying `accelerator`.
    pub fn new(name: &str, machine_type: &str, accelerator: Option<AcceleratorSpec>) -> Self {
        Self {
            name: name.to_owned(),
            status: ResourceStatus::Running,
            status_message: String::new(),
            machine_type: machine_type.to_owned(),
            spot: accelerator.as_ref().is_some_and(AcceleratorSpec::spot),
            accelerator,
            reservation: None,
            autoscaling: None,
            nodes: None,
            service_account: None,
        }
    }
}

/// The cluster, when it exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ObservedCluster {
    /// GKE's status.
    pub status: ResourceStatus,
    /// GKE's message about the status.
    pub status_message: String,
    /// The control plane's address (an IP, or a URL).
    pub endpoint: String,
    /// Workload Identity pool, when enabled.
    pub workload_pool: Option<String>,
    /// Whether the GCS FUSE CSI driver add-on is on.
    pub gcs_fuse_csi: bool,
    /// Its node pools.
    pub pools: Vec<ObservedPool>,
}

impl ObservedCluster {
    /// A running cluster at `endpoint` with these settings and pools.
    pub fn new(
        endpoint: &str,
        workload_pool: Option<&str>,
        gcs_fuse_csi: bool,
        pools: Vec<ObservedPool>,
    ) -> Self {
        Self {
            status: ResourceStatus::Running,
            status_message: String::new(),
            endpoint: endpoint.to_owned(),
            workload_pool: workload_pool.map(str::to_owned),
            gcs_fuse_csi,
            pools,
        }
    }

    /// The control plane's URL; `None` while GKE gives no endpoint yet
    /// (a cluster still provisioning).
    pub fn url(&self) -> Option<String> {
        (!self.endpoint.is_empty()).then(|| super::cluster_url(&self.endpoint))
    }

    /// The pool named `name`.
    pub fn pool(&self, name: &str) -> Option<&ObservedPool> {
        self.pools.iter().find(|p| p.name == name)
    }
}

/// What is inside the cluster, when it could be reached.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ObservedKube {
    /// Whether the jobs' namespace exists.
    pub namespace: bool,
    /// The `kinetic` service account's Workload Identity annotation:
    /// `None` when the account is missing, `Some("")` when unannotated.
    pub service_account: Option<String>,
    /// The rules of the jobs Role (`kinetic-jobs`), `None` when missing.
    pub jobs_role: Option<Vec<RoleRule>>,
    /// The rules of the hosts Role (`kinetic-slice-hosts`), `None` when
    /// missing.
    pub hosts_role: Option<Vec<RoleRule>>,
    /// Whether the RoleBinding of the hosts Role binds it to the jobs'
    /// service account.
    pub hosts_role_bound: bool,
    /// Whether the LeaderWorkerSet CRD is installed.
    pub lws: bool,
    /// Why LeaderWorkerSet, its CRD installed, does not serve: its
    /// controller's Deployment missing or not `Available`, or its webhook
    /// not answering (as the API server said). `None` when it serves.
    pub lws_not_ready: Option<String>,
    /// Whether the NVIDIA driver installer is installed.
    pub nvidia_driver: bool,
}

/// The local kubeconfig, as far as the cluster's context goes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct KubeconfigState {
    /// The file the context is (or would be) written to.
    pub path: String,
    /// The server of the cluster's context (`gke_{project}_{zone}_{cluster}`),
    /// when the context exists.
    pub context_server: Option<String>,
    /// The current context.
    pub current_context: Option<String>,
}

impl KubeconfigState {
    /// The kubeconfig at `path`, whose cluster context points at
    /// `context_server` (if it exists), with `current_context` current.
    pub fn new(path: &str, context_server: Option<&str>, current_context: Option<&str>) -> Self {
        Self {
            path: path.to_owned(),
            context_server: context_server.map(str::to_owned),
            current_context: current_context.map(str::to_owned),
        }
    }
}

/// The cloud as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Observed {
    /// Enabled APIs (`container.googleapis.com`).
    pub apis: BTreeSet<String>,
    /// Buckets that exist, by name.
    pub buckets: BTreeMap<String, ObservedBucket>,
    /// Whether the image repository exists.
    pub repository: bool,
    /// Service accounts that exist, by e-mail.
    pub service_accounts: BTreeSet<String>,
    /// The bindings (role → members) of every resource whose IAM policy
    /// was read.
    pub policies: BTreeMap<Resource, BTreeMap<String, BTreeSet<String>>>,
    /// The cluster.
    pub cluster: Option<ObservedCluster>,
    /// Inside the cluster (`None`: not reached).
    pub kube: Option<ObservedKube>,
    /// The local kubeconfig (`None`: not read).
    pub kubeconfig: Option<KubeconfigState>,
}

impl Observed {
    /// Whether `member` holds `role` on `resource`.
    pub fn has_binding(&self, resource: &Resource, role: &str, member: &str) -> bool {
        self.policies
            .get(resource)
            .and_then(|p| p.get(role))
            .is_some_and(|m| m.contains(member))
    }

    /// Record that `member` holds `role` on `resource`.
    pub fn add_binding(&mut self, resource: Resource, role: &str, member: &str) {
        self.policies
            .entry(resource)
            .or_default()
            .entry(role.to_owned())
            .or_default()
            .insert(member.to_owned());
    }
}
