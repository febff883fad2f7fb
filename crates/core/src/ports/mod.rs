//! The ports: the traits through which the engine reaches the outside
//! world. Each carries its contract in its doc comments (MUST/SHOULD per
//! method, which error for which case), and one conformance suite in
//! `kinetic-testkit` that every adapter and every fake passes. Methods a
//! wrapper must not lose are required (no default); conveniences written
//! in terms of them live in an `…Ext` trait ([`ObjectStoreExt`]).
//!
//! Each port has one `#[non_exhaustive]` error enum grouped by what the
//! caller does next (not found, invalid input, permission, unavailable…),
//! with predicates (`is_retryable`, `is_retried`, `is_not_found`, …): its
//! `Display` is a sentence for a person, its `source` the adapter's typed
//! cause ([`BoxError`]).
//!
//! Decorators implement a port around another (as `object_store`'s
//! `LimitStore` or tower's layers do), forward every method, and pass the
//! same suite. The one that needs no timer lives here ([`FixedImage`]);
//! those that wait or hold an async cell (fault injection, retries, the
//! image builder made on first use) live in `kinetic-engine`'s `layers`,
//! since this crate has no async runtime.

mod backend;
mod fault;
mod image;
mod store;

pub use backend::{
    Backend, BackendCapabilities, BackendError, BackendRegistry, BatchEnd, ChangeFeed, CleanupWait,
    Deadlines, FuseMount, GroupQuery, GroupStatus, LogOptions, LogStream, PortIo, PortStream,
    PreparedBatch, PreparedJob, RegistryError, WorkerPool, tail_lines, terminal_line,
};
pub use fault::{Fault, FaultPlan};
pub use image::{
    BuildError, FixedImage, ImageBuilder, ImageCapabilities, ImageMode, ImageRequest, ResolvedImage,
};
pub use store::{
    GetOptions, ObjectMeta, ObjectPath, ObjectStore, ObjectStoreExt, PutMode, PutOptions,
    StoreError,
};

/// The typed cause a port error keeps as its
/// [`source`](std::error::Error::source): whatever error the adapter got
/// (`object_store::Error`, `kube::Error`, `reqwest::Error`,
/// `std::io::Error`, another port's error…).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;
