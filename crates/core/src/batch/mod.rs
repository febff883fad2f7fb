//! Batches, the pure part: one job mapped over many inputs.
//!
//! - [`BatchMachine`]: the sans-IO state machine that decides what a batch
//!   does next — `(state, event) → (state, commands)` — with the
//!   concurrency limit, retries, fail-fast and cancel rules of Kinetic's
//!   `collections.map`.
//! - [`GroupManifest`]: `_groups/{group_id}/manifest.json`, in Kinetic's
//!   format, and the stored inputs (`inputs.jsonl`) that make a batch
//!   resumable.
//! - [`child_job_id`]: the deterministic job id of each input and attempt.
//! - [`InputMode`] and [`dispatch_input`]: how an input becomes arguments.
//!
//! The engine (`kinetic_engine::Engine::map`, `kinetic_engine::BatchHandle`)
//! carries out the machine's commands through the ports.
//!
//! ```
//! use kinetic_core::batch::{BatchConfig, BatchMachine, Command, Event};
//! use kinetic_core::status::JobStatus;
//!
//! let machine = BatchMachine::new(3, BatchConfig::default().max_concurrent(Some(2)));
//! let (machine, commands) = machine.step(Event::Pump);
//! assert_eq!(commands.len(), 2); // inputs 0 and 1 are submitted
//! let job = "job-0a1b2c3d".parse().unwrap();
//! let (machine, _) = machine.step(Event::Submitted { index: 0, job_id: job });
//! let job = "job-0a1b2c3d".parse().unwrap();
//! let (machine, commands) =
//!     machine.step(Event::Observed { index: 0, job_id: job, status: JobStatus::Succeeded });
//! assert_eq!(commands, vec![Command::Submit { index: 2, attempt: 1 }]);
//! assert_eq!(machine.counts().total(), 3);
//! ```

mod blocks;
mod indexed;
mod input;
mod machine;
mod manifest;

pub use blocks::{
    BlockMarker, BlockRules, BlockRun, MAX_BLOCK_SIZE, MarkerKind, block_size, block_states,
    parse_markers,
};
pub use indexed::{
    BATCH_SPEC_KIND, DEFAULT_CHUNK_SIZE, IndexedBatchSpec, JOB_ID_PLACEHOLDER, call_line,
    encode_call_chunks,
};
pub use input::{
    CallArgs, InputError, InputMode, MapInput, dispatch_input, is_keyword_name, json_type,
};
pub use machine::{
    BatchConfig, BatchConfigError, BatchCounts, BatchMachine, Command, DEFAULT_MAX_CONCURRENT,
    Event, Isolation, SkipReason, Slot, result_order,
};
pub use manifest::{
    ChildOutcome, GROUP_KIND_MAP, GroupManifest, MAX_DETERMINISTIC_ATTEMPT,
    MAX_DETERMINISTIC_INDEX, ManifestChild, ManifestError, child_job_id, child_position,
    decode_inputs, encode_inputs, recorded_outcomes,
};
