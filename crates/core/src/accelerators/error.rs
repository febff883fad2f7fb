//! Why an accelerator spelling was refused.
//!
//! Messages keep Kinetic's wording (scripts and users grep for it) and add
//! what Kinetic leaves out: the input that was refused and the valid names.

use super::registry::{GPU_TYPES, TPU_TYPES};

/// An accelerator spelling that does not name a supported accelerator.
///
/// Every variant keeps the text the user gave (`input`) and what would have
/// been accepted in its place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AcceleratorError {
    /// Neither a GPU, a TPU nor `cpu`.
    #[error(
        "Unknown accelerator: '{input}'. GPUs: {} (use 'gpu:name' or 'gpu:namexN'). \
         TPUs: {} (use 'tpu:name' or 'tpu:name-N'). Or 'cpu'.",
        gpu_names(),
        tpu_names()
    )]
    Unknown {
        /// The spelling as given.
        input: String,
    },

    /// Prefixed with `gpu:` but names no GPU model.
    #[error(
        "Unknown GPU accelerator: '{input}'. GPUs: {} \
         (use 'gpu:name' or 'gpu:namexN', e.g. 'gpu:a100x4').",
        gpu_names()
    )]
    UnknownGpu {
        /// The spelling as given.
        input: String,
    },

    /// A TPU name that the registry does not know (from the typed constructors).
    #[error(
        "Unknown TPU accelerator: '{input}'. TPUs: {} (use 'tpu:name' or 'tpu:name-N').",
        tpu_names()
    )]
    UnknownTpu {
        /// The spelling as given.
        input: String,
    },

    /// `gpu:N` where no GPU model supports N per node.
    #[error(
        "Invalid accelerator '{input}': No GPU supports count {count}. Supported counts: [{}]",
        join(supported)
    )]
    NoGpuForCount {
        /// The spelling as given.
        input: String,
        /// The requested count as written (leading zeros dropped).
        count: String,
        /// Every count some GPU model supports.
        supported: Vec<u32>,
    },

    /// `tpu:N` where no TPU generation has an N-chip slice.
    #[error(
        "Invalid accelerator '{input}': No TPU supports {chips} chips. Supported chip counts: [{}]",
        join(supported)
    )]
    NoTpuForChips {
        /// The spelling as given.
        input: String,
        /// The requested chip count as written (leading zeros dropped).
        chips: String,
        /// Every chip count some TPU generation supports.
        supported: Vec<u32>,
    },

    /// A known GPU model with a count it does not come in.
    #[error(
        "Invalid accelerator '{input}': GPU count {count} not supported for '{name}'. Supported: {}.",
        join(supported)
    )]
    GpuCountNotSupported {
        /// The spelling as given.
        input: String,
        /// The GPU model.
        name: &'static str,
        /// The requested count as written (leading zeros dropped).
        count: String,
        /// Counts this model supports.
        supported: Vec<u32>,
    },

    /// A known TPU generation with a chip count it has no slice for.
    #[error(
        "Invalid accelerator '{input}': Chip count {chips} not supported for '{name}'. Supported: {}.",
        join(supported)
    )]
    ChipCountNotSupported {
        /// The spelling as given.
        input: String,
        /// The TPU generation.
        name: &'static str,
        /// The requested chip count as written (leading zeros dropped).
        chips: String,
        /// Chip counts this generation supports.
        supported: Vec<u32>,
    },

    /// A known TPU generation with a topology it has no slice for.
    #[error(
        "Invalid accelerator '{input}': Topology '{topology}' not supported for '{name}'. Supported: {}.",
        supported.join(", ")
    )]
    TopologyNotSupported {
        /// The spelling as given.
        input: String,
        /// The TPU generation.
        name: &'static str,
        /// The requested topology.
        topology: String,
        /// Topologies this generation supports, in chip order.
        supported: Vec<&'static str>,
    },
}

impl AcceleratorError {
    /// The spelling that was refused, as given.
    pub fn input(&self) -> &str {
        match self {
            Self::Unknown { input }
            | Self::UnknownGpu { input }
            | Self::UnknownTpu { input }
            | Self::NoGpuForCount { input, .. }
            | Self::NoTpuForChips { input, .. }
            | Self::GpuCountNotSupported { input, .. }
            | Self::ChipCountNotSupported { input, .. }
            | Self::TopologyNotSupported { input, .. } => input,
        }
    }
}

fn gpu_names() -> String {
    GPU_TYPES
        .iter()
        .map(|g| g.name)
        .collect::<Vec<_>>()
        .join(", ")
}

fn tpu_names() -> String {
    TPU_TYPES
        .iter()
        .map(|t| match t.alias {
            Some(alias) => format!("{} ({alias})", t.name),
            None => t.name.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn join(values: &[u32]) -> String {
    values
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
