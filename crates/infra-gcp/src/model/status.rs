//! What exists and what is missing, piece by piece, with the command that
//! adds what is missing: what `kinetic status` prints, and the base of
//! `kinetic doctor`'s checks.

use serde::Serialize;

use super::{Desired, InfraTarget, Observed, ObservedCluster, ObservedPool, Resource};

/// One piece of the infrastructure, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Check {
    /// What it is (`bucket gs://p-kn-c-jobs`, `API container.googleapis.com`).
    pub what: String,
    /// Whether nothing it found blocks a job: passed, or a warning.
    pub ok: bool,
    /// How it ended: passed, a warning, failed, or not run.
    pub state: CheckState,
    /// What was found.
    pub detail: String,
    /// The command that fixes it, when it is not ok (or a warning).
    pub fix: Option<String>,
}

/// How a [`Check`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CheckState {
    /// As it should be.
    Pass,
    /// Not as `kinetic up` makes it, but nothing a job needs is blocked
    /// (a bucket without its delete rule).
    Warn,
    /// Blocks a job; the fix says what to do.
    Fail,
    /// Not run: a check it depends on failed, and its fix comes first.
    NotRun,
}

impl Check {
    pub(super) fn pass(what: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            ok: true,
            state: CheckState::Pass,
            detail: detail.into(),
            fix: None,
        }
    }

    pub(super) fn warn(
        what: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self {
            what: what.into(),
            ok: true,
            state: CheckState::Warn,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    /// Not run, because `blocker` (a check's `what`) failed.
    pub(super) fn not_run(what: impl Into<String>, blocker: &str) -> Self {
        Self {
            what: what.into(),
            ok: false,
            state: CheckState::NotRun,
            detail: format!("not run: needs {blocker}"),
            fix: None,
        }
    }

    pub(super) fn fail(
        what: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self {
            what: what.into(),
            ok: false,
            state: CheckState::Fail,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// One node pool, as `kinetic status` and `kinetic pool list` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PoolStatus {
    /// Pool name.
    pub name: String,
    /// GKE's status.
    pub status: String,
    /// The accelerator (`gpu:l4`), `null` for a CPU pool.
    pub accelerator: Option<String>,
    /// Machine type.
    pub machine_type: String,
    /// Spot VMs.
    pub spot: bool,
    /// Reservation consumed.
    pub reservation: Option<String>,
    /// Autoscaling bounds.
    pub min_nodes: Option<u32>,
    /// Autoscaling bounds.
    pub max_nodes: Option<u32>,
    /// Nodes ready, as Kubernetes sees them (`null` when not reached).
    pub nodes_ready: Option<u32>,
    /// Nodes in all.
    pub nodes_total: Option<u32>,
}

impl PoolStatus {
    fn of(p: &ObservedPool) -> Self {
        Self {
            name: p.name.clone(),
            status: p.status.to_string(),
            accelerator: p
                .accelerator
                .as_ref()
                .map(|a| a.clone().with_spot(false).to_string()),
            machine_type: p.machine_type.clone(),
            spot: p.spot,
            reservation: p.reservation.clone(),
            min_nodes: p.autoscaling.map(|(min, _)| min),
            max_nodes: p.autoscaling.map(|(_, max)| max),
            nodes_ready: p.nodes.map(|(ready, _)| ready),
            nodes_total: p.nodes.map(|(_, total)| total),
        }
    }
}

/// The infrastructure of one cluster, as it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StatusReport {
    /// Project, zone, cluster, namespace and derived names.
    pub target: InfraTarget,
    /// The cluster's status (`null`: it does not exist).
    pub cluster: Option<String>,
    /// The cluster's API server (`null`: no cluster, or GKE gives no
    /// endpoint yet while it provisions).
    pub endpoint: Option<String>,
    /// The image registry prefix.
    pub registry: String,
    /// Every node pool.
    pub pools: Vec<PoolStatus>,
    /// Every other piece, checked.
    pub checks: Vec<Check>,
    /// The commands that add what is missing, once each, in order.
    pub fixes: Vec<String>,
}

impl StatusReport {
    /// True when nothing is missing.
    pub fn complete(&self) -> bool {
        self.fixes.is_empty()
    }
}

/// The check of every piece `kinetic up` provisions, in plan order.
pub(super) fn infra_checks(desired: &Desired, observed: &Observed) -> Vec<Check> {
    const UP: &str = "kinetic up";
    let target = &desired.target;
    let mut checks = Vec::new();
    for api in &desired.apis {
        checks.push(if observed.apis.contains(api) {
            Check::pass(format!("API {api}"), "enabled")
        } else {
            Check::fail(
                format!("API {api}"),
                "not enabled",
                format!(
                    "{UP} (or: gcloud services enable {api} --project {})",
                    target.project
                ),
            )
        });
    }
    for account in &desired.service_accounts {
        let what = format!("service account {}", account.email);
        checks.push(if observed.service_accounts.contains(&account.email) {
            Check::pass(what, "exists")
        } else {
            Check::fail(what, "missing", UP)
        });
    }
    for bucket in &desired.buckets {
        let what = format!("bucket gs://{}", bucket.name);
        checks.push(match observed.buckets.get(&bucket.name) {
            None => Check::fail(what, "missing", UP),
            // Jobs run with or without the rule: old objects just stay.
            Some(b) if b.ttl_days != Some(bucket.ttl_days) => Check::warn(
                what,
                format!(
                    "in {}, without the {}-day delete rule",
                    b.location, bucket.ttl_days
                ),
                UP,
            ),
            Some(b) => Check::pass(
                what,
                format!(
                    "in {}, objects deleted after {} days",
                    b.location, bucket.ttl_days
                ),
            ),
        });
    }
    let what = format!(
        "Artifact Registry repository {} ({})",
        desired.repository.name, target.names.registry_prefix
    );
    checks.push(if observed.repository {
        Check::pass(what, "exists")
    } else {
        Check::fail(what, "missing", UP)
    });
    for (label, identity) in [
        ("roles of the service accounts", false),
        ("Workload Identity binding", true),
    ] {
        let missing: Vec<String> = desired
            .grants
            .iter()
            .filter(|g| matches!(g.resource, Resource::ServiceAccount(_)) == identity)
            .filter(|g| !observed.has_binding(&g.resource, &g.role, &g.member))
            .map(|g| format!("{} for {} on {}", g.role, g.member, g.resource))
            .collect();
        checks.push(if missing.is_empty() {
            Check::pass(label, "granted")
        } else {
            Check::fail(label, format!("missing: {}", missing.join("; ")), UP)
        });
    }
    let what = format!("GKE cluster {} in {}", target.cluster, target.zone);
    checks.push(match &observed.cluster {
        None => Check::fail(what, "missing", UP),
        Some(c) if !c.status.is_usable() => Check::fail(
            what,
            format!("{} {}", c.status, c.status_message)
                .trim_end()
                .to_owned(),
            if c.status.is_settling() {
                "wait for it, or run `kinetic up` (it waits)"
            } else {
                "kinetic down, then kinetic up"
            },
        ),
        Some(c) if c.workload_pool.as_deref() != Some(&desired.cluster.workload_pool) => {
            Check::fail(what, "Workload Identity is off", UP)
        }
        Some(c) if !c.gcs_fuse_csi => Check::fail(what, "the GCS FUSE CSI driver is off", UP),
        Some(c) => Check::pass(
            what,
            match c.url() {
                Some(url) => format!("{} at {url}", c.status),
                None => c.status.to_string(),
            },
        ),
    });
    let spec = &desired.kube;
    if let Some(kube) = &observed.kube {
        let what = format!(
            "Kubernetes service account {}/{}",
            spec.namespace, spec.service_account
        );
        checks.push(match &kube.service_account {
            _ if !kube.namespace => {
                Check::fail(what, format!("namespace {} missing", spec.namespace), UP)
            }
            None => Check::fail(what, "missing", UP),
            Some(gsa) if gsa != &spec.google_service_account => Check::fail(
                what,
                format!(
                    "acts as '{gsa}' instead of {} (annotation iam.gke.io/gcp-service-account)",
                    spec.google_service_account
                ),
                UP,
            ),
            Some(gsa) => Check::pass(what, format!("acts as {gsa}")),
        });
        let what = format!("Role {}/{}", spec.namespace, spec.jobs_role.name);
        checks.push(match &kube.jobs_role {
            None => Check::fail(what, "missing (pathways jobs need it besides `edit`)", UP),
            Some(rules) if rules != &spec.jobs_role.rules => {
                Check::fail(what, "its rules differ from Kinetic's", UP)
            }
            Some(_) => Check::pass(what, "grants LeaderWorkerSets (bind it with `edit`)"),
        });
        let hosts = &spec.hosts_role;
        let what = format!("Role {}/{}", spec.namespace, hosts.name);
        checks.push(match (&kube.hosts_role, kube.hosts_role_bound) {
            (None, _) => Check::fail(
                what,
                "missing (a slice's hosts cannot free its nodes; the client must poll)",
                UP,
            ),
            (Some(rules), _) if rules != &hosts.rules => {
                Check::fail(what, "its rules differ from Kinetic's", UP)
            }
            (Some(_), false) => Check::fail(
                what,
                format!(
                    "not bound to service account {}",
                    hosts.bound_to.as_deref().unwrap_or_default()
                ),
                UP,
            ),
            (Some(_), true) => Check::pass(
                what,
                "bound to the jobs' service account (slices free their nodes)",
            ),
        });
        checks.push(match (&kube.lws, &kube.lws_not_ready) {
            (false, _) => Check::fail(
                "LeaderWorkerSet",
                "its CRD is missing (multi-host TPU jobs need it)",
                UP,
            ),
            (true, Some(why)) => Check::fail(
                "LeaderWorkerSet",
                format!("installed but not serving: {why}"),
                UP,
            ),
            (true, None) => Check::pass(
                "LeaderWorkerSet",
                "CRD installed, controller available, webhook answers",
            ),
        });
        let gpu_pools = observed.cluster.iter().flat_map(|c| &c.pools).any(|p| {
            matches!(
                p.accelerator,
                Some(kinetic_core::accelerators::AcceleratorSpec::Gpu(_))
            )
        });
        if gpu_pools {
            checks.push(if kube.nvidia_driver {
                Check::pass("NVIDIA driver installer", "installed")
            } else {
                Check::fail(
                    "NVIDIA driver installer",
                    "missing (GPU nodes have no driver)",
                    UP,
                )
            });
        }
    }
    if let Some(k) = &observed.kubeconfig {
        let what = format!("kubeconfig context {}", spec.context);
        let server = observed.cluster.as_ref().and_then(ObservedCluster::url);
        checks.push(match (&k.context_server, &server) {
            (None, _) => Check::fail(what, format!("missing in {}", k.path), UP),
            (Some(s), Some(want)) if s != want => {
                Check::fail(what, format!("points at {s}, the cluster is at {want}"), UP)
            }
            _ if k.current_context.as_deref() != Some(&spec.context) => Check::fail(
                what,
                format!(
                    "not the current context (current: {})",
                    k.current_context.as_deref().unwrap_or("none")
                ),
                format!("kubectl config use-context {}", spec.context),
            ),
            (Some(s), _) => Check::pass(what, format!("current, at {s}")),
        });
    }
    checks
}

/// The status of the infrastructure: the cluster, each pool, every other
/// piece checked, and the commands that add what is missing (a cluster
/// without accelerator pools gets `kinetic pool add`).
pub fn status(desired: &Desired, observed: &Observed) -> StatusReport {
    let checks = infra_checks(desired, observed);
    let mut fixes: Vec<String> = Vec::new();
    for c in &checks {
        if let Some(fix) = &c.fix
            && !fixes.contains(fix)
        {
            fixes.push(fix.clone());
        }
    }
    let pools: Vec<PoolStatus> = observed
        .cluster
        .iter()
        .flat_map(|c| &c.pools)
        .map(PoolStatus::of)
        .collect();
    if observed.cluster.is_some() && pools.iter().all(|p| p.accelerator.is_none()) {
        fixes
            .push("kinetic pool add --accelerator ACCELERATOR (l4, a100x4, v5litepod-4, …)".into());
    }
    StatusReport {
        target: desired.target.clone(),
        cluster: observed.cluster.as_ref().map(|c| c.status.to_string()),
        endpoint: observed.cluster.as_ref().and_then(ObservedCluster::url),
        registry: desired.target.names.registry_prefix.clone(),
        pools,
        checks,
        fixes,
    }
}
