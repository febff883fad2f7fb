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
//! - [`workload`]: the [`Workload`] trait a kind implements (build the
//!   object, read a state from it and its pods, probe logs) and
//!   [`WorkloadTraits`], what differs between kinds as one value (names,
//!   the events to read, the log pods, the end patch, whether logs are
//!   kept, which states are written as final).
//! - [`backend`]: [`KubeBackend`], one file per concern: `submit`
//!   (idempotent), `status` (group status with one labelled LIST per
//!   poll), `finalise` (cancel and final states written on the object),
//!   `logs` (across restarts, kept when the pods go) and `follow`,
//!   `cleanup` (foreground deletion), `list`, `port_forward`; its
//!   [`KubeOptions`] in [`backend::options`].

pub mod backend;
pub mod client;
pub mod error;
mod forward;
pub mod pod;
pub mod status;
pub mod workload;

pub use backend::{KubeBackend, KubeOptions};
pub use client::{LazyClient, USER_AGENT};
pub use error::api_status;
pub use pod::{FuseMount, ManifestOptions};
pub use workload::{BlockReads, Keeps, KindCall, Workload, WorkloadTraits};
