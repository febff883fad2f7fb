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
//! - [`images`]: what the registry's images hold. Each built image is a
//!   fresh venv (its packages from a wheelhouse,
//!   [`FakeGcpConfig::wheelhouse`], `--wheelhouse`), an image no build
//!   makes is known only when named with its interpreter
//!   ([`FakeGcpConfig::image`], [`k8s::FakeClusterConfig::image`]), and a
//!   pod runs its image's `python3`, never the tests' interpreter; an
//!   image the registry does not hold is `ErrImagePull`.
//! - [`apis`]: the control-plane APIs `kinetic up` drives
//!   ([`FakeGoogleApis`]): Service Usage, Kubernetes Engine (clusters and
//!   node pools whose nodes join the fake cluster, long-running
//!   operations), IAM, Resource Manager and Artifact Registry
//!   repositories, with Google's errors (API disabled, permission denied)
//!   and failures on demand; GCS also speaks the JSON API's bucket calls.
//! - [`FakeGcp`]: all of them wired together as one project (provisioned,
//!   or new for `kinetic up` to build), and the environment that points
//!   the client at them.
//! - [`ClientProfile`]: what the fake knows of the client it serves — the
//!   files every image holds (its runner), its base images' packages, its
//!   variables, how it names a project's resources, its default zone and
//!   namespace. This crate depends on no Kinetic crate; the profile is
//!   configuration. `kinetic-fake-gcp-server` fills it from `kinetic-core`
//!   and holds the `kinetic-fake-gcp` binary, which serves a project until
//!   stopped.
//!
//! The rooms, floor by floor (no module imports its way in a circle;
//! `scripts/check-module-cycles.py` checks): in [`k8s`], `meta`,
//! `selector` and `resources` (object accessors, selectors, the built-in
//! resource table) at the bottom; `store` (objects, versions, watches and
//! the admission hooks it runs, given at start) over them; `deletion`,
//! `events`, `admission`, `pod_failure_policy`, `statefulset`, `lws`,
//! `deployment` (each a controller or a set of admission hooks over the
//! store), `controller` (garbage collector, Job controller), `kubelet`,
//! `scheduler` and `autoscaler` above; `auth` and `api` (the routes) on
//! top, and the parent module wires the store's hooks and runs the control
//! loop. In [`gcs`], `state` (buckets, objects, their JSON API metadata)
//! under `server` (XML API) and `json` (JSON API).
//!
//! ```no_run
//! # async fn demo(client: kinetic_fake_gcp::ClientProfile) -> std::io::Result<()> {
//! use kinetic_fake_gcp::{FakeGcp, FakeGcpConfig};
//!
//! let cloud = FakeGcp::start(FakeGcpConfig::new(client)).await?;
//! let kubeconfig = std::env::temp_dir().join("fake-kubeconfig");
//! cloud.write_kubeconfig(&kubeconfig)?;
//! for (name, value) in cloud.cli_env(&kubeconfig) {
//!     println!("export {name}={value}");
//! }
//! # Ok(()) }
//! ```

pub mod apis;
mod client;
mod cloud;
pub mod cloudbuild;
pub mod gcs;
mod google;
pub mod images;
pub mod k8s;

pub use apis::FakeGoogleApis;
pub use client::{ClientProfile, ClientVars, ProjectNames};
pub use cloud::{
    AUTH_PLUGIN, FAKE_K8S_URL, FakeGcp, FakeGcpConfig, LWS_MANIFESTS, NVIDIA_DRIVER_MANIFEST,
};
pub use cloudbuild::FakeCloudBuild;
pub use gcs::{FakeGcs, GcsFault, GcsOp, GcsRequest};
pub use k8s::{FakeCluster, FakeClusterConfig};
