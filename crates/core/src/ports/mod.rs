//! The ports: the traits through which the engine reaches the outside
//! world. Each carries its contract in its doc comments (MUST/SHOULD per
//! method, which error for which case), has one `#[non_exhaustive]` error
//! enum with `is_retryable()`, and one conformance suite in
//! `kinetic-testkit` that every adapter and every fake passes.

mod backend;
mod image;
mod store;

pub use backend::{
    Backend, BackendCapabilities, BackendError, BackendRegistry, Deadlines, GroupQuery,
    GroupStatus, LogOptions, LogStream, PreparedJob, RegistryError, tail_lines, terminal_line,
};
pub use image::{BuildError, ImageBuilder, ImageMode, ImageRequest, ResolvedImage};
pub use store::{GetOptions, ObjectMeta, ObjectPath, ObjectStore, PutMode, PutOptions, StoreError};
