//! # kinetic-testkit
//!
//! What a test of anything built on `kinetic-core` needs, in memory:
//!
//! - real in-memory implementations of the ports, with state and
//!   idempotency: [`MemoryStore`], [`FakeBackend`] (scripted outcomes) and
//!   [`FakeImageBuilder`]; [`CountingStore`] counts the calls that reach
//!   a store, to bound what an operation costs; failures are scripted with the fault-injecting
//!   decorators that live beside each port in `kinetic_core::ports`
//!   ([`FaultyStore`](kinetic_engine::layers::FaultyStore),
//!   [`FaultyBackend`](kinetic_engine::layers::FaultyBackend),
//!   [`FaultyImageBuilder`](kinetic_engine::layers::FaultyImageBuilder));
//! - [`conformance`]: one suite per port, checking every sentence of its
//!   contract, that every adapter, fake and decorator runs;
//! - fixtures: [`ConformanceJob`]s, a real Python module written to a store
//!   as the engine writes it ([`prepare_python_job`]).
//!
//! Servers of the real protocols on loopback (fake GCS, Kubernetes, Cloud
//! Build) are in `kinetic-fake-gcp`.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use kinetic_testkit::{MemoryStore, conformance};
//! conformance::object_store::run(&MemoryStore::new()).await;
//! # });
//! ```
//!
//! The crate's examples show an engine tested over the fakes with a
//! scripted failure (`cargo run -p kinetic-testkit --example testing`) and
//! a plugin backend run through the conformance suite (`--example
//! plugin_backend`).

pub mod conformance;
mod counting_store;
mod fake_backend;
mod fake_images;
pub mod fixtures;
mod memory_store;
mod python_job;

pub use counting_store::CountingStore;
pub use fake_backend::{FakeBackend, FakeBackendHarness, Outcome, OutcomeFn};
pub use fake_images::FakeImageBuilder;
pub use memory_store::MemoryStore;
pub use python_job::{
    CONFORMANCE_MODULE, ConformanceJob, prepare_python_batch, prepare_python_batch_in_blocks,
    prepare_python_batch_of, prepare_python_job, prepare_python_job_on,
};
