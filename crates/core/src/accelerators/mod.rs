//! Accelerators: the registry of GPUs and TPUs, the parser for every
//! spelling Kinetic accepts, and what a resolved accelerator means for pod
//! scheduling.
//!
//! ```
//! use kinetic_core::accelerators::{AcceleratorSpec, Category};
//!
//! let spec: AcceleratorSpec = "  GPU:A100X4  ".parse()?;
//! assert_eq!(spec.category(), Category::Gpu);
//! assert_eq!(spec.count(), Some(4));
//! assert_eq!(spec.machine_type(), Some("a2-highgpu-4g"));
//! assert_eq!(spec.to_string(), "gpu:a100x4");
//!
//! let tpu = AcceleratorSpec::parse("tpu-v6e-8:spot")?;
//! assert!(tpu.is_multi_host() && tpu.spot());
//! assert_eq!(tpu.resources()["google.com/tpu"], "4"); // per host
//!
//! let err = AcceleratorSpec::parse("tpu:v3-8").unwrap_err();
//! assert!(err.to_string().contains("Chip count 8 not supported for 'v3'. Supported: 4, 16, 32"));
//! # Ok::<(), kinetic_core::accelerators::AcceleratorError>(())
//! ```
//!
//! Design notes:
//! - A parsed spec holds references into the static registry, so it can
//!   only ever describe a shape GKE offers; the typed constructors
//!   ([`AcceleratorSpec::gpu`], [`AcceleratorSpec::tpu`]) check the same way.
//! - [`Display`](std::fmt::Display) writes a canonical spelling
//!   (`cpu`, `gpu:l4`, `gpu:a100x4`, `tpu:v5litepod-4`, `…:spot`) that
//!   parses back to the same spec; serde uses that string, so a spec stored
//!   in a record reads back in Kinetic too. [`AcceleratorSpec::details`] is
//!   the expanded view (selectors, tolerations, resources).
//! - CPU jobs ignore `spot`, as Kinetic does: `cpu:spot` is plain `cpu`.
//! - Unlike Kinetic's GKE backend, the spot toleration keeps
//!   `value: "true"`.
//! - TPU v3 nodes carry GKE's own label values, `tpu-v3-device` (one
//!   host) and `tpu-v3-slice` (several), where Kinetic selects
//!   `tpu-v3-podslice`, which no GKE node carries.

mod error;
mod parse;
mod registry;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use error::AcceleratorError;
pub use registry::{
    DEFAULT_GPU, DEFAULT_TPU, GPU_PREFERENCE, GPU_TYPES, GpuShape, GpuType, TPU_PREFERENCE,
    TPU_TYPES, TpuSlice, TpuType, all_gpu_counts, all_tpu_chips, gpu_type, gpus_by_preference,
    tpu_type, tpus_by_preference,
};

/// Node label GKE puts on GPU nodes (value: the GPU's GKE label).
pub const LABEL_GPU_ACCELERATOR: &str = "cloud.google.com/gke-accelerator";
/// Node label GKE puts on TPU nodes (value: the TPU's GKE accelerator).
pub const LABEL_TPU_ACCELERATOR: &str = "cloud.google.com/gke-tpu-accelerator";
/// Node label carrying a TPU node's slice topology.
pub const LABEL_TPU_TOPOLOGY: &str = "cloud.google.com/gke-tpu-topology";
/// Node label (and taint key) of Spot VMs.
pub const LABEL_SPOT: &str = "cloud.google.com/gke-spot";
/// Extended resource name of NVIDIA GPUs.
pub const RESOURCE_GPU: &str = "nvidia.com/gpu";
/// Extended resource name of TPU chips.
pub const RESOURCE_TPU: &str = "google.com/tpu";

/// The three kinds of hardware a job can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    /// No accelerator.
    Cpu,
    /// NVIDIA GPUs, always on one node.
    Gpu,
    /// A TPU slice, on one or more hosts.
    Tpu,
}

impl Category {
    /// `cpu`, `gpu` or `tpu`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::Gpu => "gpu",
            Self::Tpu => "tpu",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A category name that is not `cpu`, `gpu` or `tpu`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Unknown accelerator category '{0}'. Supported: cpu, gpu, tpu.")]
pub struct UnknownCategory(pub String);

impl FromStr for Category {
    type Err = UnknownCategory;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(Self::Cpu),
            "gpu" => Ok(Self::Gpu),
            "tpu" => Ok(Self::Tpu),
            _ => Err(UnknownCategory(s.to_owned())),
        }
    }
}

/// A resolved accelerator request: what to schedule a job on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AcceleratorSpec {
    /// No accelerator (Kinetic's `None`), on Spot VMs if `spot`.
    Cpu {
        /// Whether the job asks for Spot VMs.
        spot: bool,
    },
    /// GPUs on one node.
    Gpu(GpuSpec),
    /// A TPU slice.
    Tpu(TpuSpec),
}

/// A resolved GPU request: model, count, machine type, spot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GpuSpec {
    kind: &'static GpuType,
    shape: &'static GpuShape,
    spot: bool,
}

/// A resolved TPU request: generation, slice, spot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TpuSpec {
    kind: &'static TpuType,
    slice: &'static TpuSlice,
    spot: bool,
}

impl GpuSpec {
    /// `count` GPUs of the model named `name` (or its GKE label), not spot.
    ///
    /// # Errors
    /// [`AcceleratorError::UnknownGpu`] for an unknown model,
    /// [`AcceleratorError::GpuCountNotSupported`] for a count it lacks.
    pub fn new(name: &str, count: u32) -> Result<Self, AcceleratorError> {
        let lowered = name.trim().to_lowercase();
        let kind = gpu_type(&lowered).ok_or_else(|| AcceleratorError::UnknownGpu {
            input: name.to_owned(),
        })?;
        Self::build(kind, count, name)
    }

    pub(crate) fn build(
        kind: &'static GpuType,
        count: u32,
        input: &str,
    ) -> Result<Self, AcceleratorError> {
        let shape = kind
            .shape(count)
            .ok_or_else(|| Self::count_error(kind, count.to_string(), input))?;
        Ok(Self {
            kind,
            shape,
            spot: false,
        })
    }

    pub(crate) fn count_error(kind: &GpuType, count: String, input: &str) -> AcceleratorError {
        AcceleratorError::GpuCountNotSupported {
            input: input.to_owned(),
            name: kind.name,
            count,
            supported: kind.supported_counts(),
        }
    }

    /// Model name (`a100`).
    pub fn name(&self) -> &'static str {
        self.kind.name
    }

    /// Value of the `cloud.google.com/gke-accelerator` label (`nvidia-tesla-a100`).
    pub fn gke_label(&self) -> &'static str {
        self.kind.gke_label
    }

    /// GPUs on the node.
    pub fn count(&self) -> u32 {
        self.shape.count
    }

    /// Machine type of the node (`a2-highgpu-4g`).
    pub fn machine_type(&self) -> &'static str {
        self.shape.machine_type
    }

    /// Whether the job asks for Spot VMs.
    pub fn spot(&self) -> bool {
        self.spot
    }

    /// The registry entry of the model.
    pub fn gpu_type(&self) -> &'static GpuType {
        self.kind
    }
}

impl TpuSpec {
    /// The slice of `chips` chips of the generation named `name` (or its alias), not spot.
    ///
    /// # Errors
    /// [`AcceleratorError::UnknownTpu`] for an unknown generation,
    /// [`AcceleratorError::ChipCountNotSupported`] for a chip count it lacks.
    pub fn new(name: &str, chips: u32) -> Result<Self, AcceleratorError> {
        let kind = Self::lookup(name)?;
        Self::build(kind, chips, name)
    }

    /// The default slice of the generation named `name` (`v5p` → 8 chips).
    ///
    /// # Errors
    /// [`AcceleratorError::UnknownTpu`] for an unknown generation.
    pub fn default_for(name: &str) -> Result<Self, AcceleratorError> {
        let kind = Self::lookup(name)?;
        Self::build(kind, kind.default_chips, name)
    }

    fn lookup(name: &str) -> Result<&'static TpuType, AcceleratorError> {
        let lowered = name.trim().to_lowercase();
        tpu_type(&lowered).ok_or_else(|| AcceleratorError::UnknownTpu {
            input: name.to_owned(),
        })
    }

    pub(crate) fn build(
        kind: &'static TpuType,
        chips: u32,
        input: &str,
    ) -> Result<Self, AcceleratorError> {
        let slice = kind
            .slice(chips)
            .ok_or_else(|| Self::chips_error(kind, chips.to_string(), input))?;
        Ok(Self {
            kind,
            slice,
            spot: false,
        })
    }

    pub(crate) fn chips_error(kind: &TpuType, chips: String, input: &str) -> AcceleratorError {
        AcceleratorError::ChipCountNotSupported {
            input: input.to_owned(),
            name: kind.name,
            chips,
            supported: kind.supported_chips(),
        }
    }

    /// Generation name (`v5litepod`, never the alias).
    pub fn name(&self) -> &'static str {
        self.kind.name
    }

    /// Value of the `cloud.google.com/gke-tpu-accelerator` label GKE puts
    /// on the slice's nodes.
    pub fn gke_accelerator(&self) -> &'static str {
        match self.kind.single_host_accelerator {
            Some(single) if !self.slice.is_multi_host() => single,
            _ => self.kind.gke_accelerator,
        }
    }

    /// Chips in the whole slice.
    pub fn chips(&self) -> u32 {
        self.slice.chips
    }

    /// Slice topology (`2x2`, `2x2x4`).
    pub fn topology(&self) -> &'static str {
        self.slice.topology
    }

    /// Machine type of each host.
    pub fn machine_type(&self) -> &'static str {
        self.slice.machine_type
    }

    /// Hosts (GKE nodes) in the slice.
    pub fn num_hosts(&self) -> u32 {
        self.slice.num_hosts
    }

    /// Chips per host: what each pod requests.
    pub fn chips_per_host(&self) -> u32 {
        self.slice.chips_per_host()
    }

    /// Whether the job asks for Spot VMs.
    pub fn spot(&self) -> bool {
        self.spot
    }

    /// The registry entry of the generation.
    pub fn tpu_type(&self) -> &'static TpuType {
        self.kind
    }

    /// The registry entry of the slice.
    pub fn slice(&self) -> &'static TpuSlice {
        self.slice
    }
}

/// A Kubernetes toleration, in the shape of a pod spec's `tolerations[]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub struct Toleration {
    /// Taint key.
    pub key: String,
    /// `Exists` or `Equal`.
    pub operator: String,
    /// Taint value for `Equal`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Taint effect (`NoSchedule`).
    pub effect: String,
}

impl Toleration {
    fn exists(key: &str) -> Self {
        Self {
            key: key.to_owned(),
            operator: "Exists".to_owned(),
            value: None,
            effect: "NoSchedule".to_owned(),
        }
    }

    fn spot() -> Self {
        Self {
            key: LABEL_SPOT.to_owned(),
            operator: "Equal".to_owned(),
            value: Some("true".to_owned()),
            effect: "NoSchedule".to_owned(),
        }
    }
}

impl AcceleratorSpec {
    /// A CPU job on on-demand VMs.
    pub const CPU: Self = Self::Cpu { spot: false };

    /// Parse any spelling Kinetic accepts: `cpu`, `cpu:8`,
    /// `gpu`, `tpu`, `l4`, `gpu-l4`, `gpu:nvidia-l4`, `a100x4`, `gpu:4`,
    /// `v5litepod-4`, `tpu-v5litepod-2x4`, `v5e-8`, bare digits, with an
    /// optional `:spot` suffix, any case, surrounding whitespace ignored.
    ///
    /// # Errors
    /// An [`AcceleratorError`] naming the input and what the family accepts.
    pub fn parse(input: &str) -> Result<Self, AcceleratorError> {
        parse::parse(input)
    }

    /// Parse `input` and ask for Spot VMs if `spot` is set (Kinetic's
    /// `parse_accelerator(s, spot=True)`); a `:spot` suffix also asks for them.
    ///
    /// # Errors
    /// As [`AcceleratorSpec::parse`].
    pub fn parse_with_spot(input: &str, spot: bool) -> Result<Self, AcceleratorError> {
        let spec = parse::parse(input)?;
        let spot = spot || spec.spot();
        Ok(spec.with_spot(spot))
    }

    /// `count` GPUs of model `name`; see [`GpuSpec::new`].
    ///
    /// # Errors
    /// As [`GpuSpec::new`].
    pub fn gpu(name: &str, count: u32) -> Result<Self, AcceleratorError> {
        GpuSpec::new(name, count).map(Self::Gpu)
    }

    /// A `chips`-chip slice of generation `name`; see [`TpuSpec::new`].
    ///
    /// # Errors
    /// As [`TpuSpec::new`].
    pub fn tpu(name: &str, chips: u32) -> Result<Self, AcceleratorError> {
        TpuSpec::new(name, chips).map(Self::Tpu)
    }

    /// The same accelerator with Spot VMs asked for or not.
    #[must_use]
    pub fn with_spot(self, spot: bool) -> Self {
        match self {
            Self::Cpu { .. } => Self::Cpu { spot },
            Self::Gpu(g) => Self::Gpu(GpuSpec { spot, ..g }),
            Self::Tpu(t) => Self::Tpu(TpuSpec { spot, ..t }),
        }
    }

    /// CPU, GPU or TPU.
    pub fn category(&self) -> Category {
        match self {
            Self::Cpu { .. } => Category::Cpu,
            Self::Gpu(_) => Category::Gpu,
            Self::Tpu(_) => Category::Tpu,
        }
    }

    /// Model or generation name (`l4`, `v5litepod`); `cpu` for CPU.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Cpu { .. } => "cpu",
            Self::Gpu(g) => g.name(),
            Self::Tpu(t) => t.name(),
        }
    }

    /// GPUs per node, for a GPU request.
    pub fn count(&self) -> Option<u32> {
        match self {
            Self::Gpu(g) => Some(g.count()),
            _ => None,
        }
    }

    /// Chips in the slice, for a TPU request.
    pub fn chips(&self) -> Option<u32> {
        match self {
            Self::Tpu(t) => Some(t.chips()),
            _ => None,
        }
    }

    /// Slice topology, for a TPU request.
    pub fn topology(&self) -> Option<&'static str> {
        match self {
            Self::Tpu(t) => Some(t.topology()),
            _ => None,
        }
    }

    /// Machine type of the node pool, for a GPU or TPU request.
    pub fn machine_type(&self) -> Option<&'static str> {
        match self {
            Self::Cpu { .. } => None,
            Self::Gpu(g) => Some(g.machine_type()),
            Self::Tpu(t) => Some(t.machine_type()),
        }
    }

    /// The GKE accelerator label value (`nvidia-l4`, `tpu-v6e-slice`).
    pub fn gke_accelerator(&self) -> Option<&'static str> {
        match self {
            Self::Cpu { .. } => None,
            Self::Gpu(g) => Some(g.gke_label()),
            Self::Tpu(t) => Some(t.gke_accelerator()),
        }
    }

    /// Accelerators each host has: the node's GPUs, a TPU slice's chips
    /// per host, 0 for CPU.
    pub fn per_host(&self) -> u32 {
        match self {
            Self::Gpu(g) => g.count(),
            Self::Tpu(t) => t.chips_per_host(),
            _ => 0,
        }
    }

    /// Hosts (GKE nodes) the job spans: 1 except for multi-host TPU slices.
    pub fn num_hosts(&self) -> u32 {
        match self {
            Self::Tpu(t) => t.num_hosts(),
            _ => 1,
        }
    }

    /// True for a TPU slice on more than one host (runs on Pathways/LWS).
    pub fn is_multi_host(&self) -> bool {
        self.num_hosts() > 1
    }

    /// Whether the job asks for Spot VMs.
    pub fn spot(&self) -> bool {
        match self {
            Self::Cpu { spot } => *spot,
            Self::Gpu(g) => g.spot(),
            Self::Tpu(t) => t.spot(),
        }
    }

    /// `JAX_PLATFORMS` value for the job: `cpu`, `cuda` or `tpu`.
    ///
    /// NVIDIA GPUs are `cuda`, not `gpu` (what Kinetic sets): current JAX
    /// expands `gpu` to every GPU platform, CUDA and ROCm, and a job on an
    /// NVIDIA host then dies with "Unable to initialize backend 'rocm'".
    pub fn jax_platform(&self) -> &'static str {
        match self.category() {
            Category::Gpu => "cuda",
            other => other.as_str(),
        }
    }

    /// Pod `nodeSelector`, spot label included.
    pub fn node_selector(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        match self {
            Self::Cpu { .. } => {}
            Self::Gpu(g) => {
                m.insert(LABEL_GPU_ACCELERATOR.to_owned(), g.gke_label().to_owned());
            }
            Self::Tpu(t) => {
                m.insert(
                    LABEL_TPU_ACCELERATOR.to_owned(),
                    t.gke_accelerator().to_owned(),
                );
                m.insert(LABEL_TPU_TOPOLOGY.to_owned(), t.topology().to_owned());
            }
        }
        if self.spot() {
            m.insert(LABEL_SPOT.to_owned(), "true".to_owned());
        }
        m
    }

    /// Pod tolerations; the spot one keeps `value: "true"`.
    pub fn tolerations(&self) -> Vec<Toleration> {
        let mut v = match self {
            Self::Cpu { .. } => Vec::new(),
            Self::Gpu(_) => vec![Toleration::exists(RESOURCE_GPU)],
            Self::Tpu(_) => vec![Toleration::exists(RESOURCE_TPU)],
        };
        if self.spot() {
            v.push(Toleration::spot());
        }
        v
    }

    /// Container resource limits (= requests) per pod, i.e. per host:
    /// `nvidia.com/gpu: "4"`, `google.com/tpu: "4"` for a v3-16; empty for CPU.
    pub fn resources(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        match self {
            Self::Cpu { .. } => {}
            Self::Gpu(g) => {
                m.insert(RESOURCE_GPU.to_owned(), g.count().to_string());
            }
            Self::Tpu(t) => {
                m.insert(RESOURCE_TPU.to_owned(), t.chips_per_host().to_string());
            }
        }
        m
    }

    /// Node pool name Kinetic would give this accelerator, with the caller's
    /// random suffix (`gpu-l4-1a2b`); `None` for CPU.
    pub fn pool_name(&self, suffix: &str) -> Option<String> {
        match self {
            Self::Cpu { spot: false } => None,
            Self::Cpu { spot: true } => Some(format!("cpu-spot-{suffix}")),
            Self::Gpu(g) => Some(format!("gpu-{}-{suffix}", g.name())),
            Self::Tpu(t) => Some(format!("tpu-{}-{suffix}", t.name())),
        }
    }

    /// The expanded, serialisable view of this spec.
    pub fn details(&self) -> AcceleratorDetails {
        AcceleratorDetails {
            spec: self.to_string(),
            category: self.category(),
            name: self.name(),
            count: self.count(),
            chips: self.chips(),
            topology: self.topology(),
            machine_type: self.machine_type(),
            gke_accelerator: self.gke_accelerator(),
            node_selector: self.node_selector(),
            tolerations: self.tolerations(),
            resources: self.resources(),
            num_hosts: self.num_hosts(),
            spot: self.spot(),
            multi_host: self.is_multi_host(),
            jax_platform: self.jax_platform(),
        }
    }
}

/// Everything a resolved accelerator implies, ready to print or serialise.
///
/// Every key is present for every category (`null` where it does not apply),
/// so consumers can rely on one shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct AcceleratorDetails {
    /// Canonical spelling.
    pub spec: String,
    /// `cpu`, `gpu` or `tpu`.
    pub category: Category,
    /// Model or generation name.
    pub name: &'static str,
    /// GPUs per node (GPU only).
    pub count: Option<u32>,
    /// Chips in the slice (TPU only).
    pub chips: Option<u32>,
    /// Slice topology (TPU only).
    pub topology: Option<&'static str>,
    /// Node machine type.
    pub machine_type: Option<&'static str>,
    /// GKE accelerator label value.
    pub gke_accelerator: Option<&'static str>,
    /// Pod node selector.
    pub node_selector: BTreeMap<String, String>,
    /// Pod tolerations.
    pub tolerations: Vec<Toleration>,
    /// Per-pod resource limits and requests.
    pub resources: BTreeMap<String, String>,
    /// Hosts in the job.
    pub num_hosts: u32,
    /// Spot VMs asked for.
    pub spot: bool,
    /// More than one host.
    pub multi_host: bool,
    /// `JAX_PLATFORMS` value.
    pub jax_platform: &'static str,
}

impl fmt::Display for AcceleratorSpec {
    /// The canonical spelling: `cpu`, `gpu:l4`, `gpu:a100x4`,
    /// `tpu:v5litepod-4`, with `:spot` appended when asked for.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cpu { .. } => f.write_str("cpu")?,
            Self::Gpu(g) if g.count() == 1 => write!(f, "gpu:{}", g.name())?,
            Self::Gpu(g) => write!(f, "gpu:{}x{}", g.name(), g.count())?,
            Self::Tpu(t) => write!(f, "tpu:{}-{}", t.name(), t.chips())?,
        }
        if self.spot() {
            f.write_str(":spot")?;
        }
        Ok(())
    }
}

impl FromStr for AcceleratorSpec {
    type Err = AcceleratorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for AcceleratorSpec {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for AcceleratorSpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}
