//! # kinetic-testkit
//!
//! Real in-memory implementations of the ports of `kinetic-core`, with
//! state, idempotency and fault injection, and one conformance suite per
//! port that every adapter (and every fake) runs.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use kinetic_testkit::{MemoryStore, conformance};
//! conformance::object_store::run(&MemoryStore::new()).await;
//! # });
//! ```

pub mod conformance;
mod fake_backend;
pub mod fake_cloudbuild;
pub mod fake_gcs;
mod fake_images;
#[cfg(feature = "fake-k8s")]
pub mod fake_k8s;
mod fault;
mod memory_store;
mod python_job;

pub use fake_backend::{FakeBackend, FakeBackendHarness, Outcome, OutcomeFn};
pub use fake_cloudbuild::FakeCloudBuild;
pub use fake_gcs::{FakeGcs, GcsFault, GcsOp, GcsRequest};
pub use fake_images::FakeImageBuilder;
pub use fault::FaultPlan;
pub use memory_store::MemoryStore;
pub use python_job::{CONFORMANCE_MODULE, ConformanceJob, prepare_python_job};
