//! The ports: the traits through which the engine reaches the outside
//! world. Each carries its contract in its doc comments (MUST/SHOULD per
//! method, which error for which case), has one `#[non_exhaustive]` error
//! enum with `is_retryable()`, and one conformance suite in
//! `kinetic-testkit` that every adapter and every fake passes.
//!
//! Decorators live beside the port they implement around another (as
//! `object_store`'s `LimitStore` or tower's layers do), and pass the same
//! suite: fault injection for each port ([`FaultyStore`], [`FaultyBackend`],
//! [`FaultyImageBuilder`], over one [`FaultPlan`]), and the image builders
//! [`FixedImage`] and [`LazyImageBuilder`].

mod backend;
mod fault;
mod image;
mod store;

pub use backend::{
    Backend, BackendCapabilities, BackendError, BackendRegistry, Deadlines, FaultyBackend,
    GroupQuery, GroupStatus, LogOptions, LogStream, PreparedJob, RegistryError, tail_lines,
    terminal_line,
};
pub use fault::FaultPlan;
pub use image::{
    BuildError, FaultyImageBuilder, FixedImage, ImageBuilder, ImageCapabilities, ImageMode,
    ImageRequest, LazyImageBuilder, ResolvedImage,
};
pub use store::{
    FaultyStore, GetOptions, ObjectMeta, ObjectPath, ObjectStore, PutMode, PutOptions, StoreError,
};
