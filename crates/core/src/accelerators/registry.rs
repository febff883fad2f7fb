//! The accelerator registry as data: every GPU model and TPU generation
//! Kinetic can schedule, with the counts, topologies and machine types GKE
//! offers for each.
//!
//! The tables are kept in Kinetic's declaration order (that order appears in
//! error messages); the *preference* orders used for count-only requests
//! (`gpu:4`, `tpu:8`) are separate lists, [`GPU_PREFERENCE`] and
//! [`TPU_PREFERENCE`].

use serde::Serialize;
use serde::ser::SerializeStruct;

/// One GPU model: its GKE node label and the counts a node can carry.
#[derive(Debug, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub struct GpuType {
    /// Short name users write (`l4`, `a100-80gb`).
    pub name: &'static str,
    /// Value of the `cloud.google.com/gke-accelerator` node label
    /// (`nvidia-l4`); also accepted as an alias of [`GpuType::name`].
    pub gke_label: &'static str,
    /// Supported GPUs per node, ascending, each with its machine type.
    pub counts: &'static [GpuShape],
}

/// A supported GPU count and the machine type that carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub struct GpuShape {
    /// GPUs attached to the node.
    pub count: u32,
    /// GCE machine type of the node pool (`g2-standard-4`).
    pub machine_type: &'static str,
}

/// One TPU generation: its GKE accelerator name and the slices it offers.
#[derive(Debug, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub struct TpuType {
    /// Short name users write (`v5litepod`, `v6e`).
    pub name: &'static str,
    /// Another accepted name (`v5e` for `v5litepod`), if any.
    pub alias: Option<&'static str>,
    /// Value of the `cloud.google.com/gke-tpu-accelerator` node label.
    pub gke_accelerator: &'static str,
    /// The label's value on single-host slices, when GKE names them
    /// apart (`tpu-v3-device` for v3; multi-host v3 is `tpu-v3-slice`).
    pub single_host_accelerator: Option<&'static str>,
    /// Chips used when only the name is given (`tpu:v5p` → 8).
    pub default_chips: u32,
    /// Supported slices, ascending by chips.
    pub slices: &'static [TpuSlice],
}

/// A supported TPU slice: chip count, topology, machine type and hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct TpuSlice {
    /// Total chips in the slice.
    pub chips: u32,
    /// Topology string (`2x2`, `2x2x4`), the `gke-tpu-topology` label.
    pub topology: &'static str,
    /// GCE machine type of each host (`ct5lp-hightpu-4t`).
    pub machine_type: &'static str,
    /// Hosts (GKE nodes) in the slice; more than one means multi-host.
    pub num_hosts: u32,
}

impl Serialize for TpuSlice {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("TpuSlice", 6)?;
        s.serialize_field("chips", &self.chips)?;
        s.serialize_field("topology", self.topology)?;
        s.serialize_field("machine_type", self.machine_type)?;
        s.serialize_field("num_hosts", &self.num_hosts)?;
        s.serialize_field("chips_per_host", &self.chips_per_host())?;
        s.serialize_field("multi_host", &self.is_multi_host())?;
        s.end()
    }
}

impl TpuSlice {
    /// Chips on each host: what a pod requests as `google.com/tpu`.
    pub fn chips_per_host(&self) -> u32 {
        self.chips / self.num_hosts.max(1)
    }

    /// True when the slice spans more than one host.
    pub fn is_multi_host(&self) -> bool {
        self.num_hosts > 1
    }
}

impl GpuType {
    /// The machine type for `count` GPUs, if this model supports that count.
    pub fn machine_type(&self, count: u32) -> Option<&'static str> {
        self.shape(count).map(|s| s.machine_type)
    }

    /// The registry entry for `count` GPUs, if supported.
    pub fn shape(&self, count: u32) -> Option<&'static GpuShape> {
        self.counts.iter().find(|s| s.count == count)
    }

    /// Supported counts, ascending.
    pub fn supported_counts(&self) -> Vec<u32> {
        self.counts.iter().map(|s| s.count).collect()
    }
}

impl TpuType {
    /// The slice with `chips` chips, if supported.
    pub fn slice(&self, chips: u32) -> Option<&'static TpuSlice> {
        self.slices.iter().find(|s| s.chips == chips)
    }

    /// The slice whose topology string is exactly `topology`, if any.
    pub fn slice_with_topology(&self, topology: &str) -> Option<&'static TpuSlice> {
        self.slices.iter().find(|s| s.topology == topology)
    }

    /// The slice used when only the name is given.
    pub fn default_slice(&self) -> &'static TpuSlice {
        // Registry integrity (tested) guarantees the default chip count exists.
        self.slice(self.default_chips).unwrap_or(&self.slices[0])
    }

    /// Supported chip counts, ascending.
    pub fn supported_chips(&self) -> Vec<u32> {
        self.slices.iter().map(|s| s.chips).collect()
    }

    /// Supported topologies, in chip order.
    pub fn supported_topologies(&self) -> Vec<&'static str> {
        self.slices.iter().map(|s| s.topology).collect()
    }
}

const fn gpu(count: u32, machine_type: &'static str) -> GpuShape {
    GpuShape {
        count,
        machine_type,
    }
}

const fn tpu(
    chips: u32,
    topology: &'static str,
    machine_type: &'static str,
    num_hosts: u32,
) -> TpuSlice {
    TpuSlice {
        chips,
        topology,
        machine_type,
        num_hosts,
    }
}

/// Every GPU model, in Kinetic's declaration order (used in error messages).
pub static GPU_TYPES: &[GpuType] = &[
    GpuType {
        name: "l4",
        gke_label: "nvidia-l4",
        counts: &[
            gpu(1, "g2-standard-4"),
            gpu(2, "g2-standard-24"),
            gpu(4, "g2-standard-48"),
            gpu(8, "g2-standard-96"),
        ],
    },
    GpuType {
        name: "t4",
        gke_label: "nvidia-tesla-t4",
        counts: &[
            gpu(1, "n1-standard-4"),
            gpu(2, "n1-standard-8"),
            gpu(4, "n1-standard-16"),
        ],
    },
    GpuType {
        name: "v100",
        gke_label: "nvidia-tesla-v100",
        counts: &[
            gpu(1, "n1-standard-8"),
            gpu(2, "n1-standard-16"),
            gpu(4, "n1-standard-32"),
            gpu(8, "n1-standard-64"),
        ],
    },
    GpuType {
        name: "a100",
        gke_label: "nvidia-tesla-a100",
        counts: &[
            gpu(1, "a2-highgpu-1g"),
            gpu(2, "a2-highgpu-2g"),
            gpu(4, "a2-highgpu-4g"),
            gpu(8, "a2-highgpu-8g"),
            gpu(16, "a2-megagpu-16g"),
        ],
    },
    GpuType {
        name: "a100-80gb",
        gke_label: "nvidia-a100-80gb",
        counts: &[
            gpu(1, "a2-ultragpu-1g"),
            gpu(2, "a2-ultragpu-2g"),
            gpu(4, "a2-ultragpu-4g"),
            gpu(8, "a2-ultragpu-8g"),
            gpu(16, "a2-ultragpu-16g"),
        ],
    },
    GpuType {
        name: "h100",
        gke_label: "nvidia-h100-80gb",
        counts: &[
            gpu(1, "a3-highgpu-1g"),
            gpu(2, "a3-highgpu-2g"),
            gpu(4, "a3-highgpu-4g"),
            gpu(8, "a3-highgpu-8g"),
        ],
    },
    GpuType {
        name: "p4",
        gke_label: "nvidia-tesla-p4",
        counts: &[
            gpu(1, "n1-standard-4"),
            gpu(2, "n1-standard-8"),
            gpu(4, "n1-standard-16"),
        ],
    },
    GpuType {
        name: "p100",
        gke_label: "nvidia-tesla-p100",
        counts: &[
            gpu(1, "n1-standard-4"),
            gpu(2, "n1-standard-8"),
            gpu(4, "n1-standard-16"),
        ],
    },
];

const V3P: &str = "ct3p-hightpu-4t";
const V4P: &str = "ct4p-hightpu-4t";
const V5LP: &str = "ct5lp-hightpu-4t";
const V5P: &str = "ct5p-hightpu-4t";
const V6E: &str = "ct6e-standard-4t";

/// Every TPU generation, in Kinetic's declaration order (used in error messages).
pub static TPU_TYPES: &[TpuType] = &[
    TpuType {
        name: "v3",
        alias: None,
        gke_accelerator: "tpu-v3-slice",
        single_host_accelerator: Some("tpu-v3-device"),
        default_chips: 4,
        slices: &[
            tpu(4, "2x2", "ct3-hightpu-4t", 1),
            tpu(16, "4x4", V3P, 4),
            tpu(32, "4x8", V3P, 8),
            tpu(64, "8x8", V3P, 16),
            tpu(128, "8x16", V3P, 32),
            tpu(256, "16x16", V3P, 64),
            tpu(512, "16x32", V3P, 128),
            tpu(1024, "32x32", V3P, 256),
            tpu(2048, "32x64", V3P, 512),
        ],
    },
    TpuType {
        name: "v4",
        alias: None,
        gke_accelerator: "tpu-v4-podslice",
        single_host_accelerator: None,
        default_chips: 4,
        slices: &[
            tpu(4, "2x2x1", V4P, 1),
            tpu(8, "2x2x2", V4P, 2),
            tpu(16, "2x2x4", V4P, 4),
            tpu(32, "2x4x4", V4P, 8),
            tpu(64, "4x4x4", V4P, 16),
            tpu(128, "4x4x8", V4P, 32),
            tpu(256, "4x8x8", V4P, 64),
            tpu(512, "8x8x8", V4P, 128),
            tpu(1024, "8x8x16", V4P, 256),
            tpu(2048, "8x16x16", V4P, 512),
            tpu(4096, "16x16x16", V4P, 1024),
        ],
    },
    TpuType {
        name: "v5litepod",
        alias: Some("v5e"),
        gke_accelerator: "tpu-v5-lite-podslice",
        single_host_accelerator: None,
        default_chips: 4,
        slices: &[
            tpu(1, "1x1", "ct5lp-hightpu-1t", 1),
            tpu(4, "2x2", V5LP, 1),
            tpu(8, "2x4", "ct5lp-hightpu-8t", 1),
            tpu(16, "4x4", V5LP, 4),
            tpu(32, "4x8", V5LP, 8),
            tpu(64, "8x8", V5LP, 16),
            tpu(128, "8x16", V5LP, 32),
            tpu(256, "16x16", V5LP, 64),
        ],
    },
    TpuType {
        name: "v5p",
        alias: None,
        gke_accelerator: "tpu-v5p-slice",
        single_host_accelerator: None,
        default_chips: 8,
        slices: &[
            tpu(8, "2x2x2", V5P, 2),
            tpu(16, "2x2x4", V5P, 4),
            tpu(32, "2x4x4", V5P, 8),
        ],
    },
    TpuType {
        name: "v6e",
        alias: None,
        gke_accelerator: "tpu-v6e-slice",
        single_host_accelerator: None,
        default_chips: 8,
        slices: &[tpu(8, "2x4", V6E, 2), tpu(16, "4x4", V6E, 4)],
    },
];

/// GPU names in the order tried for a count-only request (`gpu:4` → `h100`).
pub const GPU_PREFERENCE: &[&str] = &[
    "h100",
    "a100-80gb",
    "a100",
    "l4",
    "v100",
    "t4",
    "p100",
    "p4",
];

/// TPU names in the order tried for a chip-count request (`tpu:8` → `v6e`).
pub const TPU_PREFERENCE: &[&str] = &["v6e", "v5p", "v5litepod", "v4", "v3"];

/// GPU used for a bare `gpu` (one of them).
pub const DEFAULT_GPU: &str = "l4";

/// TPU used for a bare `tpu` (with its default chip count).
pub const DEFAULT_TPU: &str = "v5litepod";

/// The GPU model named `name` or whose GKE label is `name` (`nvidia-l4`).
///
/// Names are matched exactly; callers lowercase first.
pub fn gpu_type(name: &str) -> Option<&'static GpuType> {
    GPU_TYPES
        .iter()
        .find(|g| g.name == name)
        .or_else(|| GPU_TYPES.iter().find(|g| g.gke_label == name))
}

/// The TPU generation named `name` or aliased by it (`v5e`).
///
/// Names are matched exactly; callers lowercase first.
pub fn tpu_type(name: &str) -> Option<&'static TpuType> {
    TPU_TYPES
        .iter()
        .find(|t| t.name == name)
        .or_else(|| TPU_TYPES.iter().find(|t| t.alias == Some(name)))
}

/// GPU models in preference order (best first).
pub fn gpus_by_preference() -> impl Iterator<Item = &'static GpuType> {
    GPU_PREFERENCE.iter().filter_map(|n| gpu_type(n))
}

/// TPU generations in preference order (best first).
pub fn tpus_by_preference() -> impl Iterator<Item = &'static TpuType> {
    TPU_PREFERENCE.iter().filter_map(|n| tpu_type(n))
}

/// Every GPU count any model supports, ascending and without repeats.
pub fn all_gpu_counts() -> Vec<u32> {
    let mut v: Vec<u32> = GPU_TYPES
        .iter()
        .flat_map(|g| g.counts.iter().map(|s| s.count))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Every TPU chip count any generation supports, ascending and without repeats.
pub fn all_tpu_chips() -> Vec<u32> {
    let mut v: Vec<u32> = TPU_TYPES
        .iter()
        .flat_map(|t| t.slices.iter().map(|s| s.chips))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}
