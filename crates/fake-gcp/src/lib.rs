//! # kinetic-fake-gcp
//!
//! A fake Google Cloud on loopback, for tests and for trying the `kinetic`
//! CLI without a cloud. Each fake is a server of the real protocol, on
//! `127.0.0.1`, that the real clients talk to — `object_store` and the
//! in-pod runner for GCS, `kube::Client` (or `kubectl`) for Kubernetes,
//! the Cloud Build image builder for Cloud Build — and answers as the real
//! service does, errors and events included:
//!
//! - [`gcs`]: the GCS XML API ([`FakeGcs`]), with scripted faults per request.
//! - [`k8s`]: a Kubernetes API server with a control plane (Job controller,
//!   garbage collector), a scheduler over fake nodes, and a kubelet that runs
//!   each pod's command as a local process and serves its log
//!   ([`FakeCluster`]).
//! - [`cloudbuild`]: Cloud Build and Artifact Registry ([`FakeCloudBuild`]),
//!   reading build sources from a fake GCS server's buckets.
//! - [`images`]: what the registry's images hold. With a wheelhouse
//!   ([`FakeGcpConfig::wheelhouse`], `--wheelhouse`), each built image is
//!   a fresh venv and a pod runs its image's `python3`, never the tests'
//!   interpreter; an image the registry does not hold is `ErrImagePull`.
//! - [`apis`]: the control-plane APIs `kinetic up` drives
//!   ([`FakeGoogleApis`]): Service Usage, Kubernetes Engine (clusters and
//!   node pools whose nodes join the fake cluster, long-running
//!   operations), IAM, Resource Manager and Artifact Registry
//!   repositories, with Google's errors (API disabled, permission denied)
//!   and failures on demand; GCS also speaks the JSON API's bucket calls.
//! - [`FakeGcp`]: all of them wired together as one project (provisioned,
//!   or new for `kinetic up` to build), and the environment that points
//!   the `kinetic` CLI at them; the `kinetic-fake-gcp` binary serves it
//!   until stopped.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use kinetic_fake_gcp::{FakeGcp, FakeGcpConfig};
//!
//! let cloud = FakeGcp::start(FakeGcpConfig::default()).await?;
//! let kubeconfig = std::env::temp_dir().join("fake-kubeconfig");
//! cloud.write_kubeconfig(&kubeconfig)?;
//! for (name, value) in cloud.cli_env(&kubeconfig) {
//!     println!("export {name}={value}");
//! }
//! # Ok(()) }
//! ```

pub mod apis;
mod cloud;
pub mod cloudbuild;
pub mod gcs;
mod google;
pub mod images;
pub mod k8s;

pub use apis::FakeGoogleApis;
pub use cloud::{AUTH_PLUGIN, FakeGcp, FakeGcpConfig, LWS_MANIFESTS, NVIDIA_DRIVER_MANIFEST};
pub use cloudbuild::FakeCloudBuild;
pub use gcs::{FakeGcs, GcsFault, GcsOp, GcsRequest};
pub use k8s::{FakeCluster, FakeClusterConfig};
