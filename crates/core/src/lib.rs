//! # kinetic-core
//!
//! The domain of Kinetic for Rust — what a job is, where it goes, how its
//! objects are named and what its state means — and the ports the engine
//! reaches the world through. Values in, values out: this crate has no
//! async runtime, network client, Kubernetes client or object store in its
//! dependencies (the test command's purity check says so), and a module
//! here cannot name the engine, which lives in `kinetic-engine` on the
//! floor above; the adapters (GKE, GCS, Cloud Build, the local backend) sit
//! above that and plug in as `Arc<dyn Port>`.
//!
//! # Where things are
//!
//! - **What a job is**:
//!   [`accelerators`] (parsing `l4`, `v5litepod-16`, `cpu:spot`),
//!   [`spec`] (the job spec: entrypoint, arguments, data, volumes),
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
//!   [`layout`] names every object in the bucket.
//! - **How it runs**: [`plan`] turns a job spec, the settings and the facts
//!   gathered by IO into what to upload and submit, without doing any of
//!   it; the engine executes it through the [`ports`]
//!   ([`ports::ObjectStore`], [`ports::Backend`], [`ports::ImageBuilder`]);
//!   the runner protocol ([`protocol`]) is the JSON the engine and the
//!   in-pod runner exchange, and the runner itself ships in this crate.
//! - **When things fail**: each port has one error enum grouped by what
//!   the caller does next, keeping the adapter's typed cause as its
//!   `source`; [`retry`] is the one retry policy (the loop that waits is
//!   the engine's).
//!
//! # What reads files
//!
//! The only IO here is reading what the user points at, on the caller's
//! thread: the project and its data ([`hashing`], [`packaging`],
//! [`requirements`], and [`spec`]'s check that local data exists), the
//! profiles file ([`config`]'s `ProfileStore::load`/`save`), and
//! [`files`]'s check of a path before an atomic write replaces it.
//! Everything else takes values; the test command's purity check keeps
//! file IO to these modules.

pub mod accelerators;
pub mod advice;
pub mod batch;
pub mod budget;
pub mod cache;
pub mod config;
pub mod debug;

pub mod env;
pub mod files;
pub mod hashing;
pub mod ids;
pub mod image;

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
pub mod spec;
pub mod status;
