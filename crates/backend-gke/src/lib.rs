//! # kinetic-backend-gke
//!
//! The GKE [`Backend`](kinetic_core::ports::Backend) of Kinetic for Rust:
//! each single-host job (CPU, GPU, single-host TPU slice) is one batch/v1
//! Job running the runner from the job's image, over a real `kube::Client`:
//! the Job kind ([`JobKind`]) of the shared Kubernetes layer
//! ([`kinetic_kube`]), which does everything kinds have in common.
//!
//! - [`manifest`]: prepared job → Job and Secret, pure (golden JSON tests).
//!   Kinetic's manifest plus a job id and group id label,
//!   `activeDeadlineSeconds` from the run deadline, and the pending deadline
//!   and spec URI as annotations, so every process sees the same job.
//! - Captured environment values travel in a Secret owned by the Job
//!   (`ownerReferences`: it goes when the Job goes) and reach the container
//!   through `envFrom`; they are in no manifest, bucket object or log.
//! - [`status`]: Job + pods → `JobState`, pure, with typed reasons
//!   (unschedulable with the scheduler's message, image pull error, OOM
//!   killed, preempted, evicted, deadline exceeded). A job pending for a
//!   blocking reason past its pending deadline (default 15 minutes) is
//!   `FAILED` with `PendingDeadlineExceeded`, and the backend writes that
//!   verdict on the Job and ends it (`activeDeadlineSeconds: 1`), so it stays
//!   failed and the cluster collects it after `ttlSecondsAfterFinished`.
//! - [`indexed`]: a batch submitted in one call → one Indexed Job (and
//!   one Secret), and its children's states from the Job and its pods;
//!   given the jobs' store ([`GkeOptions::store`]), each index a block of
//!   inputs one pod runs, whose states are its markers in the store.
//! - [`GkeBackend`]: idempotent submit (a 409 for the same spec is
//!   success), status, [`GkeBackend::group_status`] (one labelled LIST per
//!   poll), logs across the pod's restarts (snapshot, tail, follow),
//!   cancel (final state, then the Job controller ends the Job: it fails,
//!   terminal, and is collected after its TTL),
//!   cleanup (foreground deletion: pods and Secret go first), list.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use kinetic_backend_gke::{GkeBackend, GkeOptions};
//!
//! # let store: Arc<dyn kinetic_core::ports::ObjectStore> = unimplemented!();
//! let client = kube::Client::try_default().await?;
//! // The store the jobs write to: batches then run in blocks of inputs.
//! let backend = Arc::new(GkeBackend::new(client, GkeOptions::new("default").store(store)));
//! # let _ = backend;
//! # Ok(()) }
//! ```

mod backend;
pub mod indexed;
pub mod manifest;
pub mod status;

pub use backend::{GkeBackend, GkeOptions, JobKind};
pub use kinetic_kube::{USER_AGENT, api_status};
pub use manifest::{FuseMount, ManifestOptions};
