//! One module per subcommand.

pub(crate) mod accelerators;
pub(crate) mod build_image;
pub(crate) mod config;
pub(crate) mod deps;
pub(crate) mod hash;
pub(crate) mod image;
pub(crate) mod jobs;
pub(crate) mod pack;
pub(crate) mod profile;
pub(crate) mod run;
