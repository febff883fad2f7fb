//! One module per subcommand: each parses its arguments, calls the engine
//! (built by [`crate::engine`]) and prints through [`crate::render`].

pub(crate) mod accelerators;
pub(crate) mod batch;
pub(crate) mod build_image;
pub(crate) mod completions;
pub(crate) mod config;
pub(crate) mod deps;

pub(crate) mod hash;
pub(crate) mod image;
pub(crate) mod infra;
pub(crate) mod jobs;
pub(crate) mod man;
pub(crate) mod map;
pub(crate) mod pack;
pub(crate) mod pool;
pub(crate) mod profile;
pub(crate) mod run;

pub(crate) use crate::flags::{parse_json, seconds, threads_arg};
