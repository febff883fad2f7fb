//! # kinetic-core
//!
//! The engine of Kinetic for Rust: run a Python function (or a command) as
//! a job on remote TPUs, GPUs and CPUs — or on this machine — and get its
//! value back. This crate holds the domain rules, the ports the engine
//! reaches the world through, and the [`engine`] that drives them; the
//! adapters (GKE, GCS, Cloud Build, the local backend) live in their own
//! crates and plug in as `Arc<dyn Port>`.
//!
//! # Where things are
//!
//! - **What a job is** (pure; values in, values out):
//!   [`accelerators`] (parsing `l4`, `v5litepod-16`, `cpu:spot`),
//!   [`requirements`] (dependency discovery and JAX filtering),
//!   [`hashing`] (the data cache's content hash, bit-compatible with
//!   Kinetic), [`packaging`] (package root, ignore rules, `context.zip`),
//!   [`env`](mod@env) (captured variables and secrets), [`redact`] (secret
//!   values kept out of what jobs report), [`json`] (user values read
//!   losslessly), [`image`] (image tags),
//!   [`ids`], [`record`] (`handle.json`), [`status`], [`batch`] (the
//!   sans-IO batch state machine and manifest).
//! - **Where it goes**: [`settings`] resolves every setting once, with its
//!   source, from values the caller passes in (arguments, an environment
//!   lookup, the profiles of [`config`], the working directory);
//!   [`layout`] names every object in the bucket; [`infra`] is the cloud a
//!   cluster needs (what `kinetic up` provisions) and the plan that builds
//!   it from what exists.
//! - **How it runs**: [`plan`] turns a job spec, the settings and the facts
//!   found by IO into what to upload and submit, without doing any of it;
//!   the [`engine`] gathers the facts, follows the plan through the
//!   [`ports`] ([`ports::ObjectStore`], [`ports::Backend`],
//!   [`ports::ImageBuilder`]) and follows the job to its value; the runner
//!   protocol ([`protocol`]) is the JSON the engine and the in-pod runner
//!   exchange, and the runner itself ships in this crate.
//! - **When things fail**: each port has one error enum grouped by what
//!   the caller does next, keeping the adapter's typed cause as its
//!   `source`; [`engine::EngineError`]'s variants say what to do (fix the
//!   input, fix permissions, try later, read the job's error…); [`retry`]
//!   is the one retry policy and loop, applied as a decorator over the
//!   backend port.
//!
//! The engine is the only part that does IO: through the ports, and by
//! reading the user's files (hashing, packing, the dependency file) on
//! worker threads. It reads no environment variable and no setting of its
//! own: the embedding program resolves [`settings::Settings`] at its edge
//! and hands the engine [`engine::EngineSettings`]. It needs no async
//! runtime of its own (only tokio's timers and channels); batches run on
//! the spawner the program gives it.
//!
//! # Example
//!
//! An engine over the test kit's in-memory store and scripted backend
//! (real programs register `kinetic-store-gcs` and a real backend the same
//! way):
//!
//! ```
//! use std::sync::Arc;
//! use kinetic_core::engine::{Engine, EngineSettings, Entrypoint, JobSpec, ResultOptions};
//! use kinetic_core::layout;
//! use kinetic_core::ports::ObjectStore;
//! use kinetic_testkit::{FakeBackend, MemoryStore, Outcome};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let project = tempfile::tempdir()?;
//! std::fs::write(project.path().join("work.py"), "def square(x):\n    return x * x\n")?;
//!
//! let store = Arc::new(MemoryStore::new());
//! let backend = FakeBackend::new("fake", store.clone());
//! backend.push_outcome(Outcome::Succeed(json!(49)));
//! let engine = Engine::builder()
//!     .settings(EngineSettings::default().with_cwd(project.path()))
//!     .store(store.clone())
//!     .backend(Arc::new(backend))
//!     .default_backend("fake")
//!     .build()?;
//!
//! let spec = JobSpec::new(Entrypoint::parse("work:square")?).arg(json!(7));
//! let handle = engine.submit(spec).await?;
//! // The engine wrote the job's spec and record where the layout says.
//! assert!(store.head(&layout::spec(handle.id())).await.is_ok());
//! assert!(store.head(&layout::record(handle.id())).await.is_ok());
//! let value = handle.result(ResultOptions::default().cleanup(false)).await?;
//! assert_eq!(value, json!(49));
//! # Ok(())
//! # }
//! ```

pub mod accelerators;
pub mod batch;
pub mod budget;
pub mod cache;
pub mod config;
pub mod debug;
pub mod engine;
pub mod env;
pub mod files;
pub mod hashing;
pub mod ids;
pub mod image;
pub mod infra;
pub mod json;
pub mod layout;
pub mod packaging;
pub mod plan;
pub mod ports;
pub mod protocol;
mod pyjson;
mod pytext;
pub mod record;
pub mod redact;
pub mod requirements;
pub mod retry;
pub mod settings;
pub mod status;
