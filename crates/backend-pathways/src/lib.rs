//! # kinetic-backend-pathways
//!
//! The Pathways [`Backend`](kinetic_core::ports::Backend) of Kinetic for
//! Rust: each job is one LeaderWorkerSet whose single group spans the
//! accelerator's hosts (4 for `v5litepod-16`), so that every host of a
//! multi-host TPU slice runs the runner and JAX's collectives work across
//! them. It is the LeaderWorkerSet kind ([`LwsKind`]) of the shared
//! Kubernetes layer ([`kinetic_kube`]): submit, status, group status,
//! logs, cancel, cleanup and list, with the same deadlines and typed
//! reasons as the `gke` backend.
//!
//! - [`manifest`]: prepared job → LeaderWorkerSet, pure (golden JSON
//!   tests): labels `app: kinetic-pathways` and `job-id`, `size` = the
//!   slice's hosts, `restartPolicy: RecreateGroupOnPodRestart`, and in
//!   every host `MEGASCALE_COORDINATOR_ADDRESS` (the leader),
//!   `MEGASCALE_NUM_SLICES` and `TPU_WORKER_ID` (its index). The hosts'
//!   IP addresses (`KINETIC_NODE_IPS`) are no part of the manifest: each
//!   host's runner resolves the group's DNS names (`LWS_LEADER_ADDRESS`
//!   and the workers' beside it, published by the LeaderWorkerSet's
//!   headless Service) when it starts, so every host lists the same.
//! - [`status`]: LeaderWorkerSet + pods → `JobState`: one host failing
//!   fails the slice, a preempted host with reason `preempted`, a host
//!   lost between polls ([`hosts`]: a group recreated, a failed pod
//!   deleted and made again silently, a pod under a new UID) with a reason
//!   naming it.
//! - [`release`]: a slice ends itself: each host, once its command ended,
//!   reports it on its LeaderWorkerSet with its pod's service account
//!   token, and the host that ends the slice writes its final state and
//!   scales it to zero, so its nodes are freed with no client polling.
//! - [`admission`]: slices placed whole: a multi-host slice is created
//!   queued (`replicas: 0`) and admitted only while no other slice of its
//!   node pool is in use (the pool's holder kept in a ConfigMap, written at
//!   its `resourceVersion`); a queued slice is `PENDING`, saying what the
//!   pool holds and who uses it.
//! - Debug jobs: the debugger runs on the leader (host 0), reached through
//!   the API server's `pods/portforward` to the leader's running pod (the
//!   `worker-index=0` pod of the job's group); the workers run no
//!   debugger and wait, before their call, until the leader's has a client
//!   (`KINETIC_DEBUG_WAIT_LEADER=1`, released by `{job_id}/.leader_ready`).
//! - The version of `leaderworkerset.x-k8s.io` is the cluster's, by API
//!   discovery; a cluster without the CRD gets an error that says how to
//!   install it (`kinetic up` does).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use kinetic_backend_pathways::{PathwaysBackend, PathwaysOptions};
//!
//! let client = kube::Client::try_default().await?;
//! let backend = PathwaysBackend::new(client, PathwaysOptions::new("default"));
//! # let _ = backend;
//! # Ok(()) }
//! ```

pub mod admission;
mod backend;
pub mod hosts;
pub mod lws;
pub mod manifest;
pub mod release;
pub mod status;

pub use backend::{LwsKind, PathwaysBackend, PathwaysOptions, crd_missing, max_hosts};
pub use kinetic_kube::{FuseMount, ManifestOptions, USER_AGENT, api_status};
