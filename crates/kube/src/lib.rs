//! # kinetic-kube
//!
//! The Kubernetes layer Kinetic's cluster backends share, so that a
//! batch/v1 Job (`gke`) and a LeaderWorkerSet (`pathways`) are two small
//! [`Workload`] kinds over one implementation of the
//! [`Backend`](kinetic_core::ports::Backend) port:
//!
//! - [`client`]: the client from a kubeconfig (context choice, the
//!   [`USER_AGENT`]), made on first use.
//! - [`error`]: kube errors → the port's kinds by status code, keeping
//!   the API `Status` ([`api_status`]).
//! - [`pod`]: labels, annotations, the pod template (image, runner
//!   command, environment with captured values through `envFrom` a Secret,
//!   GCS FUSE volumes, tolerations, node selector, resources), the Secret.
//! - [`status`]: pod states → typed reasons (unschedulable, image pull
//!   error, OOM killed, preempted, evicted, deadline exceeded), the final
//!   state and pending deadline a workload carries.
//! - [`KubeBackend`]: idempotent submit, status, group status (one
//!   labelled LIST per poll), logs across restarts (snapshot, tail,
//!   follow), cancel and final states written on the object, cleanup
//!   (foreground deletion), list.

pub mod backend;
pub mod client;
pub mod error;
mod forward;
pub mod pod;
pub mod status;

pub use backend::{KubeBackend, KubeOptions, Workload};
pub use client::{LazyClient, USER_AGENT};
pub use error::api_status;
pub use pod::{FuseMount, ManifestOptions};
