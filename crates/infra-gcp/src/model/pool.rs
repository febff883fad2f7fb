//! Node pools from the accelerator registry: machine type, accelerators,
//! TPU placement, autoscaling bounds, Spot, reservation — and the labels,
//! taints and extended resources the nodes carry, taken from the same
//! [`AcceleratorSpec`] a job's pod is built from.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::{InfraError, InfraTarget, LABEL_NODE_POOL, LABEL_POOL_ACCELERATOR, invalid};
use kinetic_core::accelerators::{
    AcceleratorSpec, GPU_TYPES, LABEL_SPOT, RESOURCE_GPU, RESOURCE_TPU, TPU_TYPES, gpu_type,
};

/// A GPU pool holds at most this many VMs above its minimum unless asked otherwise.
pub const GPU_POOL_HEADROOM: u32 = 10;

/// Nodes of pools `up` and `pool add` create live at most this long,
/// except Spot TPU nodes (Kinetic's guard against forgotten nodes).
pub const MAX_RUN_DURATION: Duration = Duration::from_secs(24 * 3600);

/// What a user asks `kinetic pool add` for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolRequest {
    /// The accelerator (its Spot flag included).
    pub accelerator: AcceleratorSpec,
    /// Nodes kept even when idle (default 0: scale to zero).
    pub min_nodes: u32,
    /// Most nodes (default: min + 10 VMs for GPUs, min + one slice for TPUs).
    pub max_nodes: Option<u32>,
    /// A Compute Engine reservation to consume.
    pub reservation: Option<String>,
}

impl PoolRequest {
    /// A pool for `accelerator`, scaling from zero.
    pub fn new(accelerator: AcceleratorSpec) -> Self {
        Self {
            accelerator,
            min_nodes: 0,
            max_nodes: None,
            reservation: None,
        }
    }

    /// Keep `n` nodes even when idle.
    #[must_use]
    pub fn min_nodes(mut self, n: u32) -> Self {
        self.min_nodes = n;
        self
    }

    /// Allow at most `n` nodes.
    #[must_use]
    pub fn max_nodes(mut self, n: u32) -> Self {
        self.max_nodes = Some(n);
        self
    }

    /// Consume the reservation `name`.
    #[must_use]
    pub fn reservation(mut self, name: impl Into<String>) -> Self {
        self.reservation = Some(name.into());
        self
    }
}

/// A Kubernetes node taint.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[non_exhaustive]
pub struct Taint {
    /// Key.
    pub key: String,
    /// Value.
    pub value: String,
    /// Kubernetes effect (`NoSchedule`).
    pub effect: String,
}

impl Taint {
    /// A `NoSchedule` taint.
    pub fn no_schedule(key: &str, value: &str) -> Self {
        Self {
            key: key.to_owned(),
            value: value.to_owned(),
            effect: "NoSchedule".to_owned(),
        }
    }
}

/// A node pool for one accelerator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PoolSpec {
    /// Pool name: `gpu-{name}-{hex4}` or `tpu-{name}-{hex4}`.
    pub name: String,
    /// The accelerator every node carries (Spot included).
    pub accelerator: AcceleratorSpec,
    /// Nodes kept when idle.
    pub min_nodes: u32,
    /// Most nodes.
    pub max_nodes: u32,
    /// Reservation consumed, if any.
    pub reservation: Option<String>,
    /// The nodes' service account.
    pub service_account: String,
    /// How long a node may live (`None`: no limit).
    pub max_run_duration: Option<Duration>,
}

/// `gpu:l4` → `gpu-l4`, `tpu:v5litepod-4` → `tpu-v5litepod-4`: the
/// accelerator without Spot, in a spelling a label value can hold (it
/// parses back to the same accelerator).
pub fn accelerator_label(accelerator: &AcceleratorSpec) -> String {
    accelerator
        .clone()
        .with_spot(false)
        .to_string()
        .replacen(':', "-", 1)
}

impl PoolSpec {
    /// The pool `request` asks for, named with `suffix` (four lowercase
    /// hex digits, chosen by the caller).
    ///
    /// # Errors
    /// [`InfraError::Invalid`] for an on-demand CPU accelerator, Spot with a
    /// reservation, bounds that are not whole slices, or a bad suffix.
    pub fn new(
        target: &InfraTarget,
        request: &PoolRequest,
        suffix: &str,
    ) -> Result<Self, InfraError> {
        let accel = &request.accelerator;
        if !(suffix.len() == 4
            && suffix
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)))
        {
            return Err(invalid(
                "pool name suffix",
                suffix,
                "four lowercase hex digits",
            ));
        }
        let Some(name) = accel.pool_name(suffix) else {
            return Err(invalid(
                "--accelerator",
                "cpu",
                "a GPU or TPU (l4, a100x4, v5litepod-4, …), or cpu with --spot: on-demand CPU jobs run on the cluster's default pool",
            ));
        };
        if let Some(r) = &request.reservation {
            if accel.spot() {
                return Err(invalid(
                    "--reservation",
                    r,
                    "no reservation with --spot: Spot VMs cannot consume a reservation",
                ));
            }
            let ok = !r.is_empty()
                && r.len() <= 63
                && r.starts_with(|c: char| c.is_ascii_lowercase())
                && r.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if !ok {
                return Err(invalid(
                    "--reservation",
                    r,
                    "a Compute Engine reservation name (lowercase letters, digits and hyphens)",
                ));
            }
        }
        let hosts = accel.num_hosts();
        let min = request.min_nodes;
        if !min.is_multiple_of(hosts) {
            return Err(invalid(
                "--min-nodes",
                &min.to_string(),
                format!("a multiple of {hosts}: a {accel} slice spans {hosts} VMs"),
            ));
        }
        let headroom = if hosts > 1 { hosts } else { GPU_POOL_HEADROOM };
        let max = match request.max_nodes {
            None => min + headroom,
            Some(max) if max < min.max(1) => {
                return Err(invalid(
                    "--max-nodes",
                    &max.to_string(),
                    format!("at least --min-nodes ({min}) and at least 1"),
                ));
            }
            Some(max) if !max.is_multiple_of(hosts) => {
                return Err(invalid(
                    "--max-nodes",
                    &max.to_string(),
                    format!("a multiple of {hosts}: a {accel} slice spans {hosts} VMs"),
                ));
            }
            Some(max) => max,
        };
        let spot_tpu = accel.spot() && accel.topology().is_some();
        Ok(Self {
            name,
            accelerator: accel.clone(),
            min_nodes: min,
            max_nodes: max,
            reservation: request.reservation.clone(),
            service_account: target.names.node_service_account.clone(),
            max_run_duration: (!spot_tpu).then_some(MAX_RUN_DURATION),
        })
    }

    /// The machine type of every node.
    pub fn machine_type(&self) -> &'static str {
        self.accelerator.machine_type().unwrap_or("e2-standard-4")
    }

    /// For a GPU pool, the GPU type (its GKE label, `nvidia-l4`) and count per node.
    pub fn gpu(&self) -> Option<(&'static str, u32)> {
        match &self.accelerator {
            AcceleratorSpec::Gpu(g) => Some((g.gke_label(), g.count())),
            _ => None,
        }
    }

    /// For a multi-host TPU pool, the slice topology of its compact
    /// placement (single-host pools take theirs from the machine type).
    pub fn tpu_topology(&self) -> Option<&'static str> {
        self.accelerator
            .topology()
            .filter(|_| self.accelerator.is_multi_host())
    }

    /// Whether the nodes are Spot VMs.
    pub fn spot(&self) -> bool {
        self.accelerator.spot()
    }

    /// VMs that make one unit of the pool (one TPU slice; 1 otherwise).
    pub fn hosts_per_slice(&self) -> u32 {
        self.accelerator.num_hosts()
    }

    /// The taints the pool's configuration sets: Spot nodes repel pods that
    /// did not ask for Spot (GKE labels Spot nodes but does not taint them).
    pub fn taints(&self) -> Vec<Taint> {
        if self.spot() {
            vec![Taint::no_schedule(LABEL_SPOT, "true")]
        } else {
            Vec::new()
        }
    }

    /// Every taint the nodes carry: the configured ones and the one GKE
    /// puts on accelerator nodes (`nvidia.com/gpu=present`,
    /// `google.com/tpu=present`). A job's pod tolerates exactly these
    /// ([`AcceleratorSpec::tolerations`]).
    pub fn node_taints(&self) -> Vec<Taint> {
        let mut taints = match &self.accelerator {
            AcceleratorSpec::Gpu(_) => vec![Taint::no_schedule(RESOURCE_GPU, "present")],
            AcceleratorSpec::Tpu(_) => vec![Taint::no_schedule(RESOURCE_TPU, "present")],
            _ => Vec::new(),
        };
        taints.extend(self.taints());
        taints
    }

    /// The Kubernetes labels the pool's configuration sets: the
    /// accelerator, so `kinetic status` can read it back.
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(
            LABEL_POOL_ACCELERATOR.to_owned(),
            accelerator_label(&self.accelerator),
        )])
    }

    /// Every label a job may select on that the nodes carry: the
    /// configured ones, the pool name, and what GKE derives from the
    /// accelerator, the TPU topology and Spot — which is the job's node
    /// selector ([`AcceleratorSpec::node_selector`]).
    pub fn node_labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.accelerator.node_selector();
        labels.extend(self.labels());
        labels.insert(LABEL_NODE_POOL.to_owned(), self.name.clone());
        labels
    }

    /// Extended resources each node offers (`nvidia.com/gpu`,
    /// `google.com/tpu`): what one job's pod requests
    /// ([`AcceleratorSpec::resources`]).
    pub fn allocatable(&self) -> BTreeMap<String, u32> {
        self.accelerator
            .resources()
            .into_iter()
            .filter_map(|(k, v)| v.parse().ok().map(|n| (k, n)))
            .collect()
    }
}

/// The accelerator of an existing pool, from what its configuration says:
/// Kinetic's label when present, else its GPUs, else its TPU machine type
/// and topology; `None` for an on-demand CPU pool (`cpu:spot` for Kinetic's
/// Spot CPU pool). `spot` is the pool's Spot flag.
pub fn accelerator_of_pool(
    labels: &BTreeMap<String, String>,
    machine_type: &str,
    gpu: Option<(&str, u32)>,
    tpu_topology: Option<&str>,
    spot: bool,
) -> Option<AcceleratorSpec> {
    if let Some(spec) = labels
        .get(LABEL_POOL_ACCELERATOR)
        .and_then(|l| AcceleratorSpec::parse(l).ok())
        // A CPU pool of Kinetic's is a Spot one (`pool add --accelerator
        // cpu --spot`); an on-demand CPU pool is the default pool's kind.
        .filter(|s| !matches!(s, AcceleratorSpec::Cpu { .. }) || spot)
    {
        return Some(spec.with_spot(spot));
    }
    if let Some((kind, count)) = gpu {
        let kind = gpu_type(&kind.to_ascii_lowercase())?;
        debug_assert!(GPU_TYPES.iter().any(|g| g.name == kind.name));
        return AcceleratorSpec::gpu(kind.name, count)
            .ok()
            .map(|s| s.with_spot(spot));
    }
    TPU_TYPES.iter().find_map(|t| {
        let slice = t.slices.iter().find(|s| {
            s.machine_type == machine_type
                && match tpu_topology {
                    Some(topology) => s.topology == topology,
                    None => !s.is_multi_host(),
                }
        })?;
        AcceleratorSpec::tpu(t.name, slice.chips)
            .ok()
            .map(|s| s.with_spot(spot))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> InfraTarget {
        InfraTarget::new("my-proj", "us-central1-a", "c1", "default").unwrap()
    }

    fn pool(spec: &str, f: impl Fn(PoolRequest) -> PoolRequest) -> Result<PoolSpec, InfraError> {
        let request = f(PoolRequest::new(AcceleratorSpec::parse(spec).unwrap()));
        PoolSpec::new(&target(), &request, "0a1b")
    }

    #[test]
    fn gpu_pools_scale_from_zero_with_headroom() {
        let p = pool("l4", |r| r).unwrap();
        assert_eq!(p.name, "gpu-l4-0a1b");
        assert_eq!((p.min_nodes, p.max_nodes), (0, 10));
        assert_eq!(p.gpu(), Some(("nvidia-l4", 1)));
        assert_eq!(p.tpu_topology(), None);
        assert!(p.taints().is_empty());
        assert_eq!(
            p.node_taints(),
            vec![Taint::no_schedule("nvidia.com/gpu", "present")]
        );
        assert_eq!(
            p.allocatable(),
            BTreeMap::from([("nvidia.com/gpu".into(), 1)])
        );
        assert_eq!(p.labels()[LABEL_POOL_ACCELERATOR], "gpu-l4");
        assert_eq!(
            p.node_labels()["cloud.google.com/gke-accelerator"],
            "nvidia-l4"
        );
        assert_eq!(p.node_labels()[LABEL_NODE_POOL], "gpu-l4-0a1b");
        assert_eq!(p.max_run_duration, Some(MAX_RUN_DURATION));
        assert_eq!(
            p.service_account,
            "kn-c1-nodes@my-proj.iam.gserviceaccount.com"
        );

        let p = pool("a100x4:spot", |r| r.min_nodes(1).max_nodes(3)).unwrap();
        assert_eq!((p.min_nodes, p.max_nodes), (1, 3));
        assert_eq!(p.machine_type(), "a2-highgpu-4g");
        assert_eq!(
            p.taints(),
            vec![Taint::no_schedule("cloud.google.com/gke-spot", "true")]
        );
        assert_eq!(p.node_labels()["cloud.google.com/gke-spot"], "true");
    }

    #[test]
    fn tpu_pools_grow_by_whole_slices() {
        let p = pool("v5litepod-16", |r| r).unwrap();
        assert_eq!(p.name, "tpu-v5litepod-0a1b");
        assert_eq!((p.min_nodes, p.max_nodes), (0, 4));
        assert_eq!(p.hosts_per_slice(), 4);
        assert_eq!(p.tpu_topology(), Some("4x4"));
        assert_eq!(
            p.allocatable(),
            BTreeMap::from([("google.com/tpu".into(), 4)])
        );
        assert!(pool("v5litepod-16", |r| r.min_nodes(4).max_nodes(8)).is_ok());
        let e = pool("v5litepod-16", |r| r.min_nodes(2)).unwrap_err();
        assert!(e.to_string().contains("a multiple of 4"), "{e}");
        let e = pool("v5litepod-16", |r| r.max_nodes(6)).unwrap_err();
        assert!(e.to_string().contains("--max-nodes '6'"), "{e}");
        // Single-host slices take their topology from the machine type.
        let p = pool("v5litepod-4", |r| r).unwrap();
        assert_eq!(p.tpu_topology(), None);
        assert_eq!(p.node_labels()["cloud.google.com/gke-tpu-topology"], "2x2");
        // Spot TPU nodes have no run-duration limit.
        assert_eq!(pool("v6e-8:spot", |r| r).unwrap().max_run_duration, None);
    }

    #[test]
    fn what_pool_add_refuses() {
        for (spec, f, needle) in [
            (
                "cpu",
                Box::new(|r| r) as Box<dyn Fn(PoolRequest) -> PoolRequest>,
                "default pool",
            ),
            (
                "l4:spot",
                Box::new(|r: PoolRequest| r.reservation("res-1")),
                "Spot VMs cannot",
            ),
            (
                "l4",
                Box::new(|r: PoolRequest| r.reservation("Bad Name")),
                "reservation name",
            ),
            (
                "l4",
                Box::new(|r: PoolRequest| r.min_nodes(3).max_nodes(2)),
                "at least --min-nodes",
            ),
            (
                "l4",
                Box::new(|r: PoolRequest| r.max_nodes(0)),
                "at least 1",
            ),
        ] {
            let e = pool(spec, f).unwrap_err();
            assert!(e.to_string().contains(needle), "{spec}: {e}");
            assert!(e.is_invalid_input());
        }
        let r = PoolRequest::new(AcceleratorSpec::parse("l4").unwrap());
        assert!(PoolSpec::new(&target(), &r, "XYZ1").is_err());
    }

    /// Issue 24 point 6: the default pool is on-demand, so `cpu:spot`
    /// jobs need a pool of their own.
    #[test]
    fn a_spot_cpu_pool_is_made_and_read_back() {
        let p = pool("cpu:spot", |r| r).unwrap();
        assert!(p.name.starts_with("cpu-spot-"), "{}", p.name);
        assert_eq!(p.machine_type(), "e2-standard-4");
        assert!(p.spot());
        assert_eq!(p.gpu(), None);
        assert_eq!((p.min_nodes, p.max_nodes), (0, 10));
        assert_eq!(p.node_labels()["cloud.google.com/gke-spot"], "true");
        assert_eq!(
            p.node_taints(),
            vec![Taint::no_schedule("cloud.google.com/gke-spot", "true")]
        );
        let back = accelerator_of_pool(&p.labels(), p.machine_type(), None, None, true);
        assert_eq!(back.map(|a| a.to_string()).as_deref(), Some("cpu:spot"));
        // An on-demand CPU pool (the default one's kind) has no accelerator.
        assert_eq!(
            accelerator_of_pool(&p.labels(), "e2-standard-4", None, None, false),
            None
        );
    }

    #[test]
    fn an_existing_pool_reads_back_as_its_accelerator() {
        let p = pool("a100x4", |r| r).unwrap();
        let back = accelerator_of_pool(&p.labels(), p.machine_type(), p.gpu(), None, false);
        assert_eq!(back, Some(p.accelerator.clone()));
        // Without Kinetic's label (a pool made by other means).
        let none = BTreeMap::new();
        assert_eq!(
            accelerator_of_pool(
                &none,
                "a2-highgpu-4g",
                Some(("nvidia-tesla-a100", 4)),
                None,
                true
            ),
            Some(AcceleratorSpec::parse("a100x4:spot").unwrap())
        );
        assert_eq!(
            accelerator_of_pool(&none, "ct5lp-hightpu-4t", None, Some("4x4"), false),
            Some(AcceleratorSpec::parse("v5litepod-16").unwrap())
        );
        assert_eq!(
            accelerator_of_pool(&none, "ct5lp-hightpu-4t", None, None, false),
            Some(AcceleratorSpec::parse("v5litepod-4").unwrap())
        );
        assert_eq!(
            accelerator_of_pool(&none, "e2-standard-4", None, None, false),
            None
        );
    }
}
