//! What every child of a batch shares, prepared once before any is
//! submitted (read by the submission loop and by the one-call path).

use crate::JobSpec;
use crate::submit::{Resolved, Shared};
use kinetic_core::batch::CallArgs;
use kinetic_core::ports::WorkerPool;

/// What every child of a batch shares: the spec, what was resolved and
/// uploaded once for it, and the inputs.
pub(super) struct BatchPrep {
    pub(super) spec: JobSpec,
    pub(super) resolved: Resolved,
    pub(super) uploaded: Shared,
    /// Each input's arguments, its data already replaced by references.
    pub(super) calls: Vec<CallArgs>,
    /// The worker pool the children may run on (`None`: one process each).
    pub(super) pool: Option<WorkerPool>,
    /// The batch's settings (for a submission in one call: its
    /// parallelism and retries).
    pub(super) config: kinetic_core::batch::BatchConfig,
}
