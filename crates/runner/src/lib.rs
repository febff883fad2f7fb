//! The program that runs inside every Kinetic job, as the engine ships it.
//!
//! The runner is authored as a Python package, `runner/kinetic_runner/`,
//! one module per concern (storage, redaction, logs, attempts, topology,
//! debug, context, plan, data, values, results, phases, …), and shipped as
//! one file: this crate's `build.rs` builds [`RUNNER_SOURCE`] from the
//! package and the job-side `kinetic` module ([`JOB_MODULE_SOURCE`]) by the
//! rules of [`assemble`]. Every backend writes that text to a file named
//! [`RUNNER_FILE_NAME`] and runs `python3 -u kinetic_runner.py --spec URI`;
//! the engine hashes the same text into image tags, so what is hashed is
//! what is shipped.
//!
//! Why one generated file rather than a zipapp or a bootstrap that installs
//! the modules through `importlib`: the file is plain text (the image tag
//! hashes it, Cloud Build receives it, a reader can open it in a pod), it
//! starts as fast as the single file did (no zip import, no module
//! objects to make), its tracebacks name one file the runner knows as its
//! own, and a job's `sys.path` sees no runner package it could import by
//! mistake.

pub mod assemble;

/// The runner program: `runner/kinetic_runner/` built into one Python file,
/// carrying the job-side `kinetic` module ([`JOB_MODULE_SOURCE`]) on its
/// `JOB_MODULE_SOURCE` line, which the runner places first on every job's
/// `sys.path`. Python 3.9+, standard library only; run as
/// `python3 -u kinetic_runner.py --spec URI`.
pub const RUNNER_SOURCE: &str = include_str!(concat!(env!("OUT_DIR"), "/kinetic_runner.py"));

/// The job-side `kinetic` module (`runner/kinetic_job.py`): what
/// `import kinetic` gives inside a job, whatever the image. Standard
/// library only; [`RUNNER_SOURCE`] carries it.
pub const JOB_MODULE_SOURCE: &str = include_str!("../../../runner/kinetic_job.py");

/// File name the runner is shipped under (in images and local state dirs).
pub const RUNNER_FILE_NAME: &str = assemble::RUNNER_FILE_NAME;
