//! Batches on the engine: [`Engine::map`], [`BatchHandle`],
//! [`Engine::attach_batch`] (Kinetic's `run_async_map`, `BatchHandle`,
//! `attach_batch`).
//!
//! # How a batch runs
//!
//! `map` checks the spec and every input, resolves the backend, hashes and
//! uploads the data and packs the project **once** (the children share the
//! context at `_groups/{group_id}/context-{sha}.zip` and the data-cache
//! entries), stores the inputs (`_groups/{group_id}/inputs.jsonl`) and the
//! manifest with no children, and returns a [`BatchHandle`]. A submission
//! loop (the [`BatchDriver`]) then submits the inputs with at most
//! `max_concurrent` in flight, writes each child's `handle.json` with its
//! group fields, rewrites the manifest as children are submitted (at most
//! every `manifest_interval`, and once at the end), retries failed inputs and
//! applies fail-fast. The decisions are [`kinetic_core::batch::BatchMachine`]'s.
//!
//! The core has no async runtime, so the loop is a future someone must
//! poll: [`Engine::map`] hands it to the spawner set with
//! [`crate::EngineBuilder::spawner`] (the CLI passes `tokio::spawn`);
//! [`Engine::map_with_driver`] returns it to the caller instead.
//!
//! # One backend call per poll
//!
//! Every status poll of a batch — from the loop, `statuses`, `wait`,
//! `as_completed` — is one [`kinetic_core::ports::Backend::group_status`] call,
//! whatever the number of children; concurrent polls share one call. A job
//! the backend no longer holds (`NOT_FOUND`) whose `result.json` is in the
//! store is taken as ended the way that result says (a Kubernetes TTL
//! removes finished Jobs), instead of being retried.
//!
//! # Surviving a crash
//!
//! Each input's job id is derived from the group, the input index and the
//! attempt ([`kinetic_core::batch::child_job_id`]). [`Engine::attach_batch`]
//! reads the manifest, then asks the backend for the group's jobs (one
//! call) and adopts the ones the manifest does not name yet, so it finds
//! every submitted child. [`BatchHandle::resume`] then probes the inputs
//! still unknown (is their first attempt's `handle.json` there? its
//! result?), adopts what ran, resubmits under the same job id what never
//! reached the backend (a backend starts an id at most once) and submits
//! the rest: no input is submitted twice.

mod collect;
mod driver;
mod error;
mod handle;
mod indexed;
mod jobs;
mod prep;
mod recipe;
mod resume;
mod shared;
mod start;

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::StreamExt;
use serde::Serialize;
use serde_json::Value;

pub use kinetic_core::batch::BatchConfig;
use kinetic_core::batch::MAX_DETERMINISTIC_INDEX;
use kinetic_core::ids::{GroupId, JobId};
use kinetic_core::record::UtcTimestamp;

pub use error::{BatchError, BatchFailure, ChildError, FailedChild};
pub use handle::BatchHandle;

use super::{Engine, JobHandle, JobSpec, SubmitOptions};
use kinetic_core::spec::Arg;

/// Runs a batch's submission loop in the background: given to
/// [`crate::EngineBuilder::spawner`].
pub type Spawner = Arc<dyn Fn(BatchDriver) + Send + Sync>;

/// A batch's submission loop: a future that submits the inputs, rewrites
/// the manifest and retries failed inputs, and ends once nothing is left
/// to submit or retry. Poll it to completion (spawn it, or `join` it with
/// your own work); dropping it early stops the submissions, like a crash
/// (the batch can be resumed).
#[must_use = "a batch submits nothing unless its driver is polled"]
pub struct BatchDriver {
    group_id: GroupId,
    future: Pin<Box<dyn Future<Output = ()> + Send>>,
}

impl BatchDriver {
    /// The batch it submits.
    pub fn group_id(&self) -> &GroupId {
        &self.group_id
    }
}

impl fmt::Debug for BatchDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchDriver")
            .field("group_id", &self.group_id)
            .finish_non_exhaustive()
    }
}

impl Future for BatchDriver {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.future.as_mut().poll(cx)
    }
}

/// Options of [`Engine::attach_batch`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AttachOptions {
    /// Time between status polls. Default 1 s.
    pub poll_interval: Duration,
    /// Time between reads of a manifest that does not name every input yet
    /// (its batch is still being submitted). Default 10 s (Kinetic's).
    pub manifest_poll_interval: Duration,
    /// Stop reading the manifest after this long; inputs it never named are
    /// then skipped. `None` = never stop. Default 30 minutes (Kinetic's).
    pub manifest_poll_timeout: Option<Duration>,
}

impl Default for AttachOptions {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(1),
            manifest_poll_interval: Duration::from_secs(10),
            manifest_poll_timeout: Some(Duration::from_secs(1800)),
        }
    }
}

impl AttachOptions {
    /// Time between status polls.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// Time between manifest reads, and when to stop (`None` = never).
    pub fn manifest_polling(mut self, interval: Duration, timeout: Option<Duration>) -> Self {
        self.manifest_poll_interval = interval;
        self.manifest_poll_timeout = timeout;
        self
    }
}

/// Options of [`BatchHandle::results`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BatchResultsOptions {
    /// In input order (default); otherwise in the order jobs end, then the
    /// inputs that were never submitted, in input order.
    pub ordered: bool,
    /// Return failed inputs as `Err` items instead of failing the call with
    /// [`BatchError::Failed`]. Default false.
    pub return_exceptions: bool,
    /// Clean up each job once its value is collected (as
    /// [`crate::JobHandle::result`] does). Default true.
    pub cleanup: bool,
    /// Give up waiting after this long (the batch goes on).
    pub timeout: Option<Duration>,
}

impl Default for BatchResultsOptions {
    fn default() -> Self {
        Self {
            ordered: true,
            return_exceptions: false,
            cleanup: true,
            timeout: None,
        }
    }
}

impl BatchResultsOptions {
    /// In input order, or in completion order.
    pub fn ordered(mut self, ordered: bool) -> Self {
        self.ordered = ordered;
        self
    }

    /// Return failures as items instead of an error.
    pub fn return_exceptions(mut self, yes: bool) -> Self {
        self.return_exceptions = yes;
        self
    }

    /// Clean up each job after collecting it, or not.
    pub fn cleanup(mut self, cleanup: bool) -> Self {
        self.cleanup = cleanup;
        self
    }

    /// Wait at most `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

/// The outcome of one input.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BatchItem {
    /// The input's index.
    pub index: usize,
    /// Its job, when it was submitted.
    pub job_id: Option<JobId>,
    /// Its value, or why there is none.
    pub outcome: Result<Value, ChildError>,
}

impl BatchItem {
    /// The value, when the input succeeded.
    pub fn value(&self) -> Option<&Value> {
        self.outcome.as_ref().ok()
    }
}

impl Engine {
    /// Run `spec` once per input, in the background, and return the batch's
    /// handle as soon as the shared preparation is done (the spec and every
    /// input were checked, the data and project uploaded once).
    ///
    /// Each input is turned into arguments by `config.input_mode` and
    /// appended to the spec's own. An input is JSON or an [`Arg`] that may
    /// hold [`super::Data`] at any depth: each input's data reaches its own
    /// job as a local path, and data given to several inputs is hashed and
    /// uploaded once with the spec's. Data mounted through FUSE cannot be an
    /// input (the jobs of a batch share their mounts): give it as a volume. Needs a spawner
    /// ([`crate::EngineBuilder::spawner`]); without one use
    /// [`Engine::map_with_driver`].
    ///
    /// ```no_run
    /// # async fn demo(engine: kinetic_engine::Engine) -> Result<(), kinetic_engine::BatchError> {
    /// use kinetic_engine::{BatchConfig, BatchResultsOptions, Entrypoint, JobSpec};
    /// use serde_json::json;
    ///
    /// let spec = JobSpec::new(Entrypoint::parse("work:square").unwrap());
    /// let batch = engine.map(spec, (0..100).map(|i| json!(i)), BatchConfig::default()).await?;
    /// println!("batch {}", batch.group_id());
    /// let values = batch.results(BatchResultsOptions::default()).await?;
    /// assert_eq!(values[9].value(), Some(&json!(81)));
    /// # Ok(()) }
    /// ```
    pub async fn map(
        &self,
        spec: JobSpec,
        inputs: impl IntoIterator<Item = impl Into<Arg>>,
        config: BatchConfig,
    ) -> Result<BatchHandle, BatchError> {
        self.map_with(spec, inputs, config, SubmitOptions::default())
            .await
    }

    /// [`Engine::map`], reporting the shared preparation's steps (data,
    /// packaging, image) to `options`.
    pub async fn map_with(
        &self,
        spec: JobSpec,
        inputs: impl IntoIterator<Item = impl Into<Arg>>,
        config: BatchConfig,
        options: SubmitOptions,
    ) -> Result<BatchHandle, BatchError> {
        let spawner = self.spawner_or_error()?;
        let (handle, driver) = self.map_with_driver(spec, inputs, config, options).await?;
        spawner(driver);
        Ok(handle)
    }

    /// [`Engine::map_with`] without a spawner: returns the handle and the
    /// submission loop, which the caller must poll to completion (e.g.
    /// `tokio::spawn(driver)`, or `join` it with work that uses the handle).
    pub async fn map_with_driver(
        &self,
        spec: JobSpec,
        inputs: impl IntoIterator<Item = impl Into<Arg>>,
        config: BatchConfig,
        options: SubmitOptions,
    ) -> Result<(BatchHandle, BatchDriver), BatchError> {
        let inputs: Vec<Arg> = inputs.into_iter().map(Into::into).collect();
        start::start_map(&self.inner, spec, inputs, config, &options).await
    }

    /// The handle of a batch submitted earlier, from any process: reads its
    /// manifest, loads each named child's record, and adopts the children
    /// the backend holds that the manifest does not name yet. While the
    /// manifest misses inputs, polls of the handle re-read it (every
    /// `manifest_poll_interval`, until `manifest_poll_timeout`).
    pub async fn attach_batch(
        &self,
        group_id: &str,
        options: AttachOptions,
    ) -> Result<BatchHandle, BatchError> {
        let group_id: GroupId =
            group_id
                .parse()
                .map_err(|e: kinetic_core::ids::IdError| BatchError::InvalidInput {
                    message: e.to_string(),
                })?;
        start::attach(&self.inner, group_id, options).await
    }

    /// A batch over jobs submitted already, as Kinetic's
    /// `BatchHandle(group_id, name, tags, jobs)` builds one: input `i` is
    /// `jobs[i]` (`None`: an input never submitted), and every input is
    /// submitted (nothing more will come). Jobs that are not children of
    /// `group_id` are followed one by one; the batch writes its manifest
    /// under `group_id` when `results` records outcomes.
    pub fn batch_of(
        &self,
        group_id: &str,
        name: Option<String>,
        tags: BTreeMap<String, String>,
        jobs: Vec<Option<JobHandle>>,
    ) -> Result<BatchHandle, BatchError> {
        let group_id: GroupId =
            group_id
                .parse()
                .map_err(|e: kinetic_core::ids::IdError| BatchError::InvalidInput {
                    message: format!("group_id={group_id:?}: {e}"),
                })?;
        if jobs.len() > MAX_DETERMINISTIC_INDEX {
            return Err(BatchError::InvalidInput {
                message: format!(
                    "jobs: {} jobs, more than the {MAX_DETERMINISTIC_INDEX} inputs a batch takes",
                    jobs.len()
                ),
            });
        }
        Ok(start::of_jobs(
            &self.inner,
            group_id,
            name,
            tags,
            jobs,
            AttachOptions::default().poll_interval,
        ))
    }

    /// Resume a batch whose submitting process stopped (killed, Ctrl-C)
    /// with the spec and options its manifest recorded: attach, find what
    /// was submitted, and submit the rest, nothing twice
    /// ([`BatchHandle::resume`]). Environment values come from this
    /// engine's environment (the manifest keeps names only); local data
    /// must still be where it was. Needs a spawner.
    pub async fn resume_batch(&self, group_id: &str) -> Result<BatchHandle, BatchError> {
        let spawner = self.spawner_or_error()?;
        let (handle, driver) = self.resume_batch_with_driver(group_id).await?;
        spawner(driver);
        Ok(handle)
    }

    /// [`Engine::resume_batch`], returning the submission loop to poll.
    pub async fn resume_batch_with_driver(
        &self,
        group_id: &str,
    ) -> Result<(BatchHandle, BatchDriver), BatchError> {
        let handle = self
            .attach_batch(group_id, AttachOptions::default())
            .await?;
        let driver = handle.resume_recorded_with_driver().await?;
        Ok((handle, driver))
    }

    /// Every batch in the store, newest first, as its manifest describes
    /// it (one LIST, then one GET per batch). Manifests that cannot be read
    /// are skipped with a warning.
    pub async fn list_batches(&self) -> Result<Vec<BatchSummary>, BatchError> {
        let store = &self.inner.store;
        let groups: Vec<GroupId> = store
            .list(Some(&kinetic_core::layout::groups_root()))
            .await?
            .iter()
            .filter_map(|m| kinetic_core::layout::manifest_group(&m.path))
            .collect();
        let read: Vec<Result<BatchSummary, BatchError>> = futures_util::stream::iter(groups)
            .map(|g| async move {
                let m = shared::read_manifest(&self.inner, &g).await?;
                Ok(BatchSummary::of(&m))
            })
            .buffer_unordered(shared::FAN_OUT)
            .collect()
            .await;
        let mut out = Vec::new();
        for r in read {
            match r {
                Ok(s) => out.push(s),
                Err(e) => tracing::warn!("a batch manifest cannot be read: {e}"),
            }
        }
        out.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| a.group_id.cmp(&b.group_id))
        });
        Ok(out)
    }

    fn spawner_or_error(&self) -> Result<Spawner, BatchError> {
        self.inner.spawner.clone().ok_or_else(|| BatchError::InvalidInput {
            message: "this engine has no spawner to run the batch's submissions in the background: build it with EngineBuilder::spawner(|driver| { tokio::spawn(driver); }), or use map_with_driver and poll the driver yourself".into(),
        })
    }
}

/// A batch as its manifest describes it ([`Engine::list_batches`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BatchSummary {
    /// The batch.
    pub group_id: GroupId,
    /// Its name, if given.
    pub name: Option<String>,
    /// When it was created.
    pub created_at: UtcTimestamp,
    /// What it runs.
    pub entrypoint: Option<String>,
    /// Number of inputs.
    pub total: usize,
    /// Inputs the manifest names a job for.
    pub submitted: usize,
    /// Inputs whose outcome was collected and recorded.
    pub collected: usize,
    /// Of those, how many failed.
    pub collected_failed: usize,
    /// The manifest says every input was submitted.
    pub submission_complete: bool,
    /// It records what `kinetic batch resume` needs.
    pub resumable: bool,
}

impl BatchSummary {
    fn of(m: &kinetic_core::batch::GroupManifest) -> Self {
        use kinetic_core::batch::ChildOutcome;
        let named: std::collections::BTreeSet<usize> = m
            .children
            .iter()
            .map(|c| c.group_index)
            .filter(|i| *i < m.total_expected)
            .collect();
        let outcomes: Vec<&ChildOutcome> = m
            .children
            .iter()
            .filter_map(|c| c.outcome.as_ref())
            .collect();
        Self {
            group_id: m.group_id.clone(),
            name: m.group_name.clone(),
            created_at: m.created_at,
            entrypoint: m.entrypoint.clone(),
            total: m.total_expected,
            submitted: named.len(),
            collected: outcomes.len(),
            collected_failed: outcomes
                .iter()
                .filter(|o| matches!(o, ChildOutcome::Failed { .. }))
                .count(),
            submission_complete: m.submission_complete,
            resumable: m.resume.is_some() && m.inputs.is_some(),
        }
    }
}
