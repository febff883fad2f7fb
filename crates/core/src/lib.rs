//! # kinetic-core
//!
//! The pure heart of Kinetic for Rust: the domain rules that decide *what* a
//! remote job is (accelerators, configuration, requirements, content hashes,
//! the packaged context, captured environment, image tags, job records and
//! status), independent of *where* it runs. Adapters (GKE, GCS, Cloud Build,
//! the local backend) live in their own crates.
//!
//! Every module here is a domain concept; functions take values and return
//! values. The only IO is reading the user's files for hashing and packaging.

pub mod accelerators;
pub mod batch;
pub mod config;
pub mod engine;
pub mod env;
pub mod hashing;
pub mod ids;
pub mod image;
pub mod layout;
pub mod packaging;
pub mod plan;
pub mod ports;
pub mod protocol;
mod pyjson;
mod pytext;
pub mod record;
pub mod requirements;
pub mod settings;
pub mod status;
