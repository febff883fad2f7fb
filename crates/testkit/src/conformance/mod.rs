//! Conformance suites: one per port. Each checks every sentence of the
//! port's contract; every adapter and every fake runs it.

pub mod backend;
pub mod image_builder;
pub mod object_store;
