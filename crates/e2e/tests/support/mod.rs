//! Helpers shared by the end-to-end tests.
#![allow(dead_code, unreachable_pub)]

pub mod cluster_harness;
