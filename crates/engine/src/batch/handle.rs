//! [`BatchHandle`]: follow, collect, cancel, clean up and resume a batch.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde_json::Value;

use crate::submit::{self, SubmitOptions};
use crate::{CleanupOptions, EngineError, EngineInner, JobHandle, JobSpec};
use kinetic_core::batch::{
    BatchConfig, BatchCounts, BatchMachine, CallArgs, ChildOutcome, Event, InputMode,
    MAX_DETERMINISTIC_INDEX, ManifestChild, SkipReason, Slot, child_job_id, decode_inputs,
    dispatch_input, encode_inputs,
};
use kinetic_core::ids::{GroupId, JobId};
use kinetic_core::layout;
use kinetic_core::plan::{self, UploadTarget};
use kinetic_core::ports::{CleanupWait, ObjectStoreExt};
use kinetic_core::protocol::DataRef;
use kinetic_core::spec::{Arg, Data, data_source_text};
use kinetic_core::status::JobState;

use super::driver::{self, BatchPrep, DriverSettings};
use super::shared::{BatchShared, DriverState, FAN_OUT, ManifestBase, ManifestPoll, read_manifest};
use super::{
    AttachOptions, BatchDriver, BatchError, BatchFailure, BatchItem, BatchResultsOptions,
    ChildError, FailedChild,
};

/// A batch: one job per input. Cheap to clone; clones share state.
///
/// Every status poll costs one backend call whatever the batch's size, and
/// concurrent pollers share it. Methods that wait poll every
/// `poll_interval` (from [`BatchConfig`] or [`AttachOptions`]).
#[derive(Clone)]
pub struct BatchHandle {
    shared: Arc<BatchShared>,
}

impl std::fmt::Debug for BatchHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchHandle")
            .field("group_id", &self.shared.group_id)
            .field("total", &self.shared.total)
            .finish_non_exhaustive()
    }
}

fn invalid(message: impl Into<String>) -> BatchError {
    BatchError::InvalidInput {
        message: message.into(),
    }
}

/// Each input's arguments under `mode`, once every input was checked:
/// there is at least one and not too many, each fits the mode, and none
/// holds FUSE-mounted data.
fn calls_of(inputs: &[Arg], mode: InputMode) -> Result<Vec<CallArgs<Arg>>, BatchError> {
    if inputs.is_empty() {
        return Err(invalid("inputs must be non-empty"));
    }
    if inputs.len() > MAX_DETERMINISTIC_INDEX {
        return Err(invalid(format!(
            "a batch takes at most {MAX_DETERMINISTIC_INDEX} inputs, got {}",
            inputs.len()
        )));
    }
    inputs
        .iter()
        .enumerate()
        .map(|(i, input)| {
            let call = dispatch_input(mode, i, input).map_err(|e| invalid(e.to_string()))?;
            if let Some(fused) = call_data(&call).into_iter().find(|d| d.is_fuse()) {
                // Every child of a batch gets the same mounts, so data that
                // is mounted rather than fetched cannot differ per input.
                return Err(invalid(format!(
                    "input {i}: {} is FUSE-mounted data, which a map input cannot be (the jobs of a batch share their mounts); mount it for every input as a volume (volumes= in Python, --volume on the command line), or drop fuse to fetch it for this input only",
                    data_source_text(fused.source())
                )));
            }
            Ok(call)
        })
        .collect()
}

/// Every [`Data`] of a call's arguments, positional then keyword.
fn call_data(call: &CallArgs<Arg>) -> Vec<&Data> {
    let mut data = Vec::new();
    for arg in call.args.iter().chain(call.kwargs.iter().map(|(_, a)| a)) {
        arg.collect_data(&mut data);
    }
    data
}

/// A batch's settings, refused with what they accept when it cannot run
/// with them.
fn validate(config: &BatchConfig) -> Result<(), BatchError> {
    config.validate().map_err(|e| BatchError::InvalidInput {
        message: e.to_string(),
    })
}

fn settings_of(config: &BatchConfig) -> DriverSettings {
    DriverSettings {
        parallelism: config.submit_parallelism.max(1),
        manifest_interval: config.manifest_interval,
        poll_interval: config.poll_interval,
    }
}

/// Resolve the spec and upload what the children share (once): the
/// project, the spec's data and every input's data (data given to several
/// inputs is hashed and uploaded once). Each input's call ([`calls_of`])
/// is turned to JSON, its data replaced by references to the uploads.
async fn prepare(
    inner: &Arc<EngineInner>,
    group_id: &GroupId,
    spec: JobSpec,
    calls: &[CallArgs<Arg>],
    submit_options: &SubmitOptions,
) -> Result<BatchPrep, BatchError> {
    let resolved = submit::resolve(inner, &spec, submit_options).await?;
    let mut with_inputs = spec.clone();
    for data in calls.iter().flat_map(call_data) {
        let arg = Arg::Data(data.clone());
        if !with_inputs.args.contains(&arg) {
            with_inputs.args.push(arg);
        }
    }
    let submit::Gathered {
        resolved,
        shared,
        image_uri,
    } = submit::gather_uploads(inner, &with_inputs, resolved, submit_options).await?;
    let submit::SharedFacts {
        data,
        context,
        packed,
    } = shared;
    let store = &inner.store;
    let uri_of = |p: &kinetic_core::ports::ObjectPath| store.uri(p);
    let plan = plan::shared(
        &with_inputs,
        &UploadTarget::Group(group_id),
        &data,
        context,
        resolved.image.install_requirements.as_deref(),
        &uri_of,
    )
    .map_err(EngineError::from)?;
    let uploaded =
        submit::execute_shared_once(inner, plan, packed, image_uri, submit_options).await?;
    let ref_for = |d: &Data| {
        uploaded
            .plan
            .data_ref(d)
            .map_or(Value::Null, DataRef::to_value)
    };
    let calls = calls
        .iter()
        .map(|call| CallArgs {
            args: call.args.iter().map(|a| a.to_json(&ref_for)).collect(),
            kwargs: call
                .kwargs
                .iter()
                .map(|(k, a)| (k.clone(), a.to_json(&ref_for)))
                .collect(),
        })
        .collect();
    Ok(BatchPrep {
        spec,
        resolved,
        uploaded,
        calls,
    })
}

/// `Engine::map_with_driver`.
pub(super) async fn start_map(
    inner: &Arc<EngineInner>,
    spec: JobSpec,
    inputs: Vec<Arg>,
    config: BatchConfig,
    options: &SubmitOptions,
) -> Result<(BatchHandle, BatchDriver), BatchError> {
    validate(&config)?;
    let calls = calls_of(&inputs, config.input_mode)?;
    let group_id = GroupId::new_random();
    let prefix = layout::group_prefix(&group_id);
    let started = async {
        let total = inputs.len();
        let stored: Vec<Value> = inputs.iter().map(super::recipe::encode_input).collect();
        let encoded = encode_inputs(&stored);
        let working_dir = submit::working_dir(&inner.settings, &spec)?;
        let recipe = super::recipe::encode(&spec, &config, &working_dir);
        let prep = prepare(inner, &group_id, spec, &calls, options).await?;
        let inputs_path = layout::group_inputs(&group_id);
        inner
            .store
            .put_text(&inputs_path, encoded, "application/x-ndjson")
            .await?;
        let base = ManifestBase {
            created_at: (inner.clock)(),
            submit_fn_name: prep.spec.entrypoint.func_name(),
            backend: Some(prep.resolved.backend.name().to_owned()),
            namespace: Some(inner.settings.namespace.clone()),
            entrypoint: Some(prep.spec.entrypoint.to_string()),
            input_mode: Some(config.input_mode),
            inputs: Some(layout::INPUTS_FILE.to_owned()),
            resume: Some(recipe),
            submission_complete: false,
        };
        let shared = Arc::new(BatchShared::new(
            inner.clone(),
            group_id.clone(),
            config.name.clone(),
            config.tags.clone(),
            BatchMachine::new(total, config.clone()),
            config.poll_interval,
            base,
            DriverState::None,
        ));
        // The manifest exists, with no children, before any submission.
        let manifest = shared.manifest_snapshot();
        let path = layout::group_manifest(&group_id);
        inner.store.put_json(&path, manifest.to_json()).await?;
        tracing::info!(group_id = %group_id, inputs = total, "batch prepared");
        let driver = driver::start(
            shared.clone(),
            Arc::new(prep),
            settings_of(&config),
            vec![Event::Pump],
        );
        Ok::<_, BatchError>((BatchHandle { shared }, driver))
    }
    .await;
    if started.is_err()
        && let Err(e) = inner.store.delete_prefix(&prefix).await
    {
        tracing::warn!(group_id = %group_id, "could not remove the objects of a batch that failed to start: {e}");
    }
    started
}

/// `Engine::attach_batch`.
pub(super) async fn attach(
    inner: &Arc<EngineInner>,
    group_id: GroupId,
    options: AttachOptions,
) -> Result<BatchHandle, BatchError> {
    if options.poll_interval.is_zero() {
        return Err(invalid("poll_interval must be longer than zero"));
    }
    let manifest = read_manifest(inner, &group_id).await?;
    if manifest.total_expected > MAX_DETERMINISTIC_INDEX {
        return Err(BatchError::InvalidManifest {
            uri: inner.store.uri(&layout::group_manifest(&group_id)),
            group_id,
            message: format!(
                "total_expected is {}, more than the {MAX_DETERMINISTIC_INDEX} inputs a batch takes",
                manifest.total_expected
            ),
        });
    }
    let base = ManifestBase {
        created_at: manifest.created_at,
        submit_fn_name: manifest.submit_fn_name.clone(),
        backend: manifest.backend.clone(),
        namespace: manifest.namespace.clone(),
        entrypoint: manifest.entrypoint.clone(),
        input_mode: manifest.input_mode,
        inputs: manifest.inputs.clone(),
        resume: manifest.resume.clone(),
        submission_complete: manifest.submission_complete,
    };
    for c in &manifest.children {
        if c.group_index >= manifest.total_expected {
            tracing::warn!(group_id = %group_id, "manifest child {} is outside the batch's {} inputs; skipped", c.group_index, manifest.total_expected);
        }
    }
    let shared = Arc::new(BatchShared::new(
        inner.clone(),
        group_id,
        manifest.group_name.clone(),
        manifest.tags.clone(),
        BatchMachine::observer(manifest.total_expected),
        options.poll_interval,
        base,
        DriverState::None,
    ));
    let handle = BatchHandle { shared };
    handle.shared.adopt_children(&manifest.children).await;
    handle.reconcile().await?;
    if handle.shared.lock().machine.counts().unknown > 0 {
        // Children submitted but not named yet (the manifest is written
        // at intervals): their records are at their deterministic ids.
        handle.probe_unknown(0).await?;
    }
    let mut core = handle.shared.lock();
    let waiting = options.manifest_poll_timeout != Some(Duration::ZERO);
    if core.machine.counts().unknown > 0 && (manifest.submission_complete || !waiting) {
        // Nobody will name them: say so now instead of waiting.
        let commands = core.machine.apply(Event::CloseManifest);
        super::shared::dispatch(&mut core, commands, &mut Vec::new());
    } else if core.machine.counts().unknown > 0 {
        let now = Instant::now();
        core.manifest_poll = Some(ManifestPoll {
            interval: options.manifest_poll_interval,
            deadline: options
                .manifest_poll_timeout
                .and_then(|t| now.checked_add(t)),
            next: now + options.manifest_poll_interval,
        });
    }
    drop(core);
    Ok(handle)
}

/// A batch over jobs submitted already ([`crate::Engine::batch_of`]):
/// input `i` is `jobs[i]`; an input without a job is never submitted.
pub(super) fn of_jobs(
    inner: &Arc<EngineInner>,
    group_id: GroupId,
    name: Option<String>,
    tags: BTreeMap<String, String>,
    jobs: Vec<Option<JobHandle>>,
    poll_interval: Duration,
) -> BatchHandle {
    let first = jobs.iter().flatten().next().map(|j| j.record().clone());
    let base = ManifestBase {
        created_at: (inner.clock)(),
        submit_fn_name: first
            .as_ref()
            .map(|r| r.func_name.clone())
            .unwrap_or_default(),
        backend: first.as_ref().map(|r| r.backend.clone()),
        namespace: first.as_ref().map(|r| r.namespace.clone()),
        entrypoint: None,
        input_mode: None,
        inputs: None,
        resume: None,
        submission_complete: true,
    };
    let shared = Arc::new(BatchShared::new(
        inner.clone(),
        group_id,
        name,
        tags,
        BatchMachine::observer(jobs.len()),
        poll_interval,
        base,
        DriverState::None,
    ));
    {
        let mut core = shared.lock();
        let mut chores = Vec::new();
        for (index, job) in jobs.into_iter().enumerate() {
            let Some(job) = job else { continue };
            let job_id = job.id().clone();
            core.jobs[index] = Some(job);
            let commands = core.machine.apply(Event::Adopt {
                index,
                job_id,
                attempts: 1,
            });
            super::shared::dispatch(&mut core, commands, &mut chores);
        }
        let commands = core.machine.apply(Event::CloseManifest);
        super::shared::dispatch(&mut core, commands, &mut chores);
    }
    BatchHandle { shared }
}

impl BatchHandle {
    /// The batch's id (`grp-` + 8 hex).
    pub fn group_id(&self) -> &GroupId {
        &self.shared.group_id
    }

    /// Its name, if it was given one.
    pub fn name(&self) -> Option<&str> {
        self.shared.name.as_deref()
    }

    /// Its tags.
    pub fn tags(&self) -> &BTreeMap<String, String> {
        &self.shared.tags
    }

    /// Number of inputs.
    pub fn total(&self) -> usize {
        self.shared.total
    }

    /// The job of each input, by index (`None` until submitted).
    pub fn jobs(&self) -> Vec<Option<JobHandle>> {
        self.shared.lock().jobs.clone()
    }

    /// The job of input `index`, once submitted.
    pub fn job(&self, index: usize) -> Option<JobHandle> {
        self.shared.lock().jobs.get(index).cloned().flatten()
    }

    /// The job id of input `index`, once submitted (also for a job cleaned
    /// up after its outcome was recorded, which has no handle any more).
    pub fn job_id(&self, index: usize) -> Option<JobId> {
        let core = self.shared.lock();
        core.jobs
            .get(index)
            .cloned()
            .flatten()
            .map(|j| j.id().clone())
            .or_else(|| core.machine.slot(index).and_then(Slot::job_id).cloned())
    }

    /// The counts as last seen, without polling.
    pub fn counts(&self) -> BatchCounts {
        self.shared.lock().machine.counts()
    }

    /// True once every input was submitted (or failed to be, or was skipped).
    pub fn is_submission_complete(&self) -> bool {
        self.shared.lock().machine.is_submission_complete()
    }

    /// Poll (one backend call) and return the state of every submitted
    /// input's job, by index.
    pub async fn statuses(&self) -> Result<Vec<(usize, JobState)>, BatchError> {
        self.shared.refresh(None).await?;
        let core = self.shared.lock();
        Ok(core
            .states
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.clone().map(|s| (i, s)))
            .collect())
    }

    /// Poll (one backend call) and count the inputs by where they are; the
    /// counts always sum to [`BatchHandle::total`].
    pub async fn status_counts(&self) -> Result<BatchCounts, BatchError> {
        self.shared.refresh(None).await?;
        Ok(self.counts())
    }

    /// The error to return when no one will submit the rest.
    fn stalled(&self) -> Option<BatchError> {
        let core = self.shared.lock();
        let stalled = !core.machine.is_submission_complete()
            && core.driver != DriverState::Running
            && core.manifest_poll.is_none();
        stalled.then(|| BatchError::SubmissionStopped {
            group_id: self.shared.group_id.clone(),
            unsubmitted: core.machine.counts().unknown + core.machine.counts().queued,
        })
    }

    /// Sleep a poll interval, or less when the state changes or the
    /// deadline comes; `Err(Timeout)` once the deadline passed.
    async fn pause(
        &self,
        deadline: Option<Instant>,
        after: Option<Duration>,
    ) -> Result<(), BatchError> {
        self.pause_for(self.shared.poll_interval, deadline, after)
            .await
    }

    /// [`BatchHandle::pause`] for `interval` instead of the batch's own.
    async fn pause_for(
        &self,
        interval: Duration,
        deadline: Option<Instant>,
        after: Option<Duration>,
    ) -> Result<(), BatchError> {
        let mut pause = interval;
        if let Some(deadline) = deadline {
            let now = Instant::now();
            if now >= deadline {
                return Err(BatchError::Timeout {
                    group_id: self.shared.group_id.clone(),
                    after: after.unwrap_or_default(),
                });
            }
            pause = pause.min(deadline - now);
        }
        let changed = std::pin::pin!(self.shared.changed.notified());
        let sleep = std::pin::pin!(tokio::time::sleep(pause));
        futures_util::future::select(changed, sleep).await;
        Ok(())
    }

    /// Poll for `wait`-like loops. A failed backend call was already
    /// retried by the engine's RetryBackend (and a cloud store's call by
    /// its client): what comes out ends the loop with its error.
    async fn poll_once(&self) -> Result<(), BatchError> {
        self.poll_once_every(self.shared.poll_interval).await
    }

    /// [`BatchHandle::poll_once`] for a loop polling every `interval`.
    async fn poll_once_every(&self, interval: Duration) -> Result<(), BatchError> {
        self.shared.refresh(Some(interval / 2)).await
    }

    /// Wait until every input is submitted (or failed to be, or skipped).
    pub async fn wait_submitted(&self, timeout: Option<Duration>) -> Result<(), BatchError> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            let (complete, written, driven) = {
                let core = self.shared.lock();
                (
                    core.machine.is_submission_complete(),
                    core.complete_manifest_written,
                    core.driver == DriverState::Running,
                )
            };
            // The loop that submits also writes the manifest naming every
            // child; until it did, a process that exits now would leave an
            // incomplete manifest behind.
            if complete && (written || !driven) {
                return Ok(());
            }
            if let Some(e) = self.stalled() {
                return Err(e);
            }
            // An attached batch learns of new children by polling.
            if self.shared.lock().manifest_poll.is_some() {
                self.poll_once().await?;
            }
            self.pause(deadline, timeout).await?;
        }
    }

    /// Wait until every input ended (or failed to be submitted, or was
    /// skipped). A timeout is [`BatchError::Timeout`]; the batch goes on.
    pub async fn wait(&self, timeout: Option<Duration>) -> Result<(), BatchError> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            if self.shared.lock().machine.is_done() {
                // Every input is settled; the manifest naming them all is
                // written too before this returns, so a process that exits
                // now leaves no incomplete manifest behind.
                let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                self.wait_submitted(left).await?;
                let failed = self.shared.lock().submission_errors.len();
                if failed > 0 {
                    tracing::warn!(group_id = %self.shared.group_id, "{failed} input(s) of the batch could not be submitted");
                }
                return Ok(());
            }
            if let Some(e) = self.stalled() {
                return Err(e);
            }
            self.poll_once().await?;
            if self.shared.lock().machine.is_done() {
                continue;
            }
            self.pause(deadline, timeout).await?;
        }
    }

    /// The jobs as they end, in the order they end, while later inputs may
    /// still be being submitted. Ends once every input is settled; a
    /// timeout yields [`BatchError::Timeout`] and ends the stream.
    pub fn as_completed(
        &self,
        timeout: Option<Duration>,
    ) -> BoxStream<'static, Result<JobHandle, BatchError>> {
        self.as_completed_every(timeout, self.shared.poll_interval)
    }

    /// [`BatchHandle::as_completed`], polling the jobs' states every
    /// `poll_interval` (the batch's own interval is [`BatchConfig`]'s or
    /// [`AttachOptions`]'s) while nothing ended (Kinetic's
    /// `as_completed(poll_interval=…)`); a backend's change events still
    /// wake it at once.
    pub fn as_completed_every(
        &self,
        timeout: Option<Duration>,
        poll_interval: Duration,
    ) -> BoxStream<'static, Result<JobHandle, BatchError>> {
        let handle = self.clone();
        self.completed_indices(timeout, poll_interval)
            .filter_map(move |ended| {
                let job = match ended {
                    Ok(index) => handle.job(index).map(Ok),
                    Err(e) => Some(Err(e)),
                };
                futures_util::future::ready(job)
            })
            .boxed()
    }

    /// The indices of the inputs whose jobs ended, in the order they ended.
    fn completed_indices(
        &self,
        timeout: Option<Duration>,
        poll_interval: Duration,
    ) -> BoxStream<'static, Result<usize, BatchError>> {
        struct State {
            handle: BatchHandle,
            cursor: usize,
            deadline: Option<Instant>,
            timeout: Option<Duration>,
            poll_interval: Duration,
            done: bool,
        }
        let state = State {
            handle: self.clone(),
            cursor: 0,
            poll_interval,
            deadline: timeout.and_then(|t| Instant::now().checked_add(t)),
            timeout,
            done: false,
        };
        futures_util::stream::unfold(state, |mut st| async move {
            if st.done {
                return None;
            }
            loop {
                let (next, finished) = {
                    let core = st.handle.shared.lock();
                    let completed = core.machine.completed();
                    let next = completed.get(st.cursor).copied();
                    let finished = st.cursor >= completed.len() && core.machine.is_done();
                    (next, finished)
                };
                if let Some(index) = next {
                    st.cursor += 1;
                    return Some((Ok(index), st));
                }
                if finished {
                    return None;
                }
                if let Some(e) = st.handle.stalled() {
                    st.done = true;
                    return Some((Err(e), st));
                }
                if let Err(e) = st.handle.poll_once_every(st.poll_interval).await {
                    st.done = true;
                    return Some((Err(e), st));
                }
                let grew = st.handle.shared.lock().machine.completed().len() > st.cursor;
                if !grew
                    && let Err(e) = st
                        .handle
                        .pause_for(st.poll_interval, st.deadline, st.timeout)
                        .await
                {
                    st.done = true;
                    return Some((Err(e), st));
                }
            }
        })
        .boxed()
    }

    /// The outcome of one settled input (as recorded, when an earlier
    /// collection recorded it); collecting cleans nothing up.
    async fn collect_one(&self, index: usize) -> BatchItem {
        let (slot, job, state, submit_error, recorded) = {
            let core = self.shared.lock();
            (
                core.machine.slot(index).cloned(),
                core.jobs.get(index).cloned().flatten(),
                core.states.get(index).cloned().flatten(),
                core.submission_errors.get(&index).cloned(),
                core.outcomes.get(&index).cloned(),
            )
        };
        let job_id = job
            .as_ref()
            .map(|j| j.id().clone())
            .or_else(|| slot.as_ref().and_then(Slot::job_id).cloned());
        if let (Some(recorded), Some(job_id)) = (recorded, &job_id) {
            let outcome = match recorded {
                ChildOutcome::Succeeded { value, .. } => Ok(value),
                ChildOutcome::Failed { error, .. } => Err(ChildError::Recorded {
                    index,
                    job_id: job_id.clone(),
                    message: error,
                }),
            };
            return BatchItem {
                index,
                job_id: Some(job_id.clone()),
                outcome,
            };
        }
        let outcome = match (slot, job) {
            (Some(Slot::Ended { status, job_id, .. }), Some(job)) => {
                let state = state
                    .filter(|s| s.status.is_terminal())
                    .unwrap_or_else(|| JobState::new(status));
                job.collect_ended(&state, false, false, CleanupWait::default())
                    .await
                    .map_err(|e| ChildError::Job {
                        index,
                        job_id,
                        error: Arc::new(e),
                    })
            }
            (Some(Slot::SubmitFailed { attempts }), _) => Err(ChildError::Submission {
                index,
                attempts,
                error: submit_error
                    .unwrap_or_else(|| Arc::new(EngineError::internal("the submission failed"))),
            }),
            (Some(Slot::Skipped { reason }), _) => Err(ChildError::NotSubmitted { index, reason }),
            (other, _) => Err(ChildError::Submission {
                index,
                attempts: 0,
                error: Arc::new(EngineError::internal(format!(
                    "input {index} has not ended ({other:?})"
                ))),
            }),
        };
        BatchItem {
            index,
            job_id,
            outcome,
        }
    }

    /// Wait for the batch and collect every input's value.
    ///
    /// In input order by default; with `ordered(false)`, in the order the
    /// jobs end (collected as they end), then the inputs never submitted.
    /// With `return_exceptions`, failed inputs are `Err` items; otherwise any
    /// failure makes the call fail with [`BatchError::Failed`], which keeps
    /// the failed jobs and every other input's value. With `cleanup` (the
    /// default) each job is cleaned up as [`JobHandle::result`] would.
    pub async fn results(
        &self,
        options: BatchResultsOptions,
    ) -> Result<Vec<BatchItem>, BatchError> {
        {
            let core = self.shared.lock();
            if !core.unavailable.is_empty() {
                tracing::warn!(group_id = %self.shared.group_id, "{} child(ren) named by the manifest cannot be loaded", core.unavailable.len());
            }
        }
        let cleanup = options.cleanup;
        let mut items: Vec<BatchItem> = if options.ordered {
            self.wait(options.timeout).await?;
            futures_util::stream::iter(0..self.total())
                .map(|i| self.collect_one(i))
                .buffered(FAN_OUT)
                .collect()
                .await
        } else {
            let collected: Vec<Result<BatchItem, BatchError>> = self
                .completed_indices(options.timeout, self.shared.poll_interval)
                .map(|ended| {
                    let this = self.clone();
                    async move {
                        match ended {
                            Ok(index) => Ok(this.collect_one(index).await),
                            Err(e) => Err(e),
                        }
                    }
                })
                .buffered(FAN_OUT)
                .collect()
                .await;
            collected.into_iter().collect::<Result<Vec<_>, _>>()?
        };
        if !options.ordered {
            let rest: Vec<usize> = (0..self.total())
                .filter(|i| !items.iter().any(|it| it.index == *i))
                .collect();
            for i in rest {
                items.push(self.collect_one(i).await);
            }
        }
        self.record_outcomes(&items, cleanup).await?;
        let failed: Vec<&BatchItem> = items.iter().filter(|i| i.outcome.is_err()).collect();
        // A job's failure, collected now or recorded by an earlier
        // `results` (the same failure: its handle is a failed job's).
        let failed_jobs: Vec<JobHandle> = failed
            .iter()
            .filter(|i| {
                matches!(
                    i.outcome,
                    Err(ChildError::Job { .. } | ChildError::Recorded { .. })
                )
            })
            .filter_map(|i| self.job(i.index))
            .collect();
        self.shared.lock().cached_failures = Some(failed_jobs);
        if failed.is_empty() || options.return_exceptions {
            return Ok(items);
        }
        let mut partial = vec![None; self.total()];
        let mut failures = Vec::new();
        let mut submission_failures = BTreeMap::new();
        items.sort_by_key(|i| i.index);
        for item in items {
            match item.outcome {
                Ok(v) => partial[item.index] = Some(v),
                Err(e @ (ChildError::Job { .. } | ChildError::Recorded { .. })) => {
                    match self.job(item.index) {
                        Some(job) => failures.push(FailedChild {
                            index: item.index,
                            job,
                            error: e,
                        }),
                        None => {
                            submission_failures.insert(item.index, e);
                        }
                    }
                }
                Err(e) => {
                    submission_failures.insert(item.index, e);
                }
            }
        }
        Err(BatchError::Failed(Box::new(BatchFailure {
            group_id: self.shared.group_id.clone(),
            total: self.total(),
            failures,
            submission_failures,
            partial_results: partial,
        })))
    }

    /// Record how each newly collected job ended in the manifest, and only
    /// then, with `cleanup`, clean the jobs up (as
    /// [`JobHandle::result`] does): a second `results` reads the same
    /// values from the manifest, and a crash in between loses nothing.
    async fn record_outcomes(&self, items: &[BatchItem], cleanup: bool) -> Result<(), BatchError> {
        let mut fresh: Vec<(JobHandle, bool)> = Vec::new();
        {
            let mut core = self.shared.lock();
            for item in items {
                if core.outcomes.contains_key(&item.index) {
                    continue;
                }
                let Some(job) = core.jobs.get(item.index).cloned().flatten() else {
                    continue;
                };
                let outcome = match &item.outcome {
                    Ok(value) => ChildOutcome::Succeeded {
                        value: value.clone(),
                        cleaned: cleanup,
                    },
                    Err(e @ ChildError::Job { .. }) => ChildOutcome::Failed {
                        error: e
                            .engine_error()
                            .map_or_else(|| e.to_string(), ToString::to_string),
                        cleaned: false,
                    },
                    Err(_) => continue,
                };
                fresh.push((job, item.outcome.is_ok()));
                core.outcomes.insert(item.index, outcome);
            }
        }
        if fresh.is_empty() {
            return Ok(());
        }
        let manifest = self.shared.manifest_snapshot();
        let path = layout::group_manifest(&self.shared.group_id);
        // Not cleaned unless recorded: the values must stay somewhere.
        self.shared
            .engine
            .store
            .put_json(&path, manifest.to_json())
            .await?;
        if cleanup {
            futures_util::stream::iter(fresh)
                .for_each_concurrent(FAN_OUT, |(job, collected)| async move {
                    // As for one job: a success's backend objects go, a
                    // failure's stay for its logs, and stored artifacts
                    // go only when asked (`cleanup`).
                    let options = CleanupOptions {
                        backend: collected,
                        store: false,
                        ..CleanupOptions::default()
                    };
                    if let Err(e) = job.cleanup(options).await {
                        tracing::warn!(job_id = %job.id(), "cleanup of a collected batch child failed: {e}");
                    }
                })
                .await;
        }
        Ok(())
    }

    /// The inputs no job is known for and none will be submitted for by
    /// this handle: never submitted (the process that submitted the batch
    /// stopped first), or not named by the manifest yet. A resume submits
    /// them.
    pub fn never_submitted(&self) -> Vec<usize> {
        let core = self.shared.lock();
        core.machine
            .slots()
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                matches!(
                    s,
                    Slot::Unknown
                        | Slot::Skipped {
                            reason: SkipReason::NotInManifest
                        }
                )
            })
            .map(|(i, _)| i)
            .collect()
    }

    /// What the manifest records for a resume (spec and options).
    pub(super) fn recipe(&self) -> Option<Value> {
        self.shared.lock().base.resume.clone()
    }

    /// True when the manifest says every input was submitted.
    pub fn manifest_complete(&self) -> bool {
        let core = self.shared.lock();
        core.base.submission_complete || core.complete_manifest_written
    }

    /// The failed jobs: those of the last `results()` call, or else (after a
    /// poll) the jobs whose status is exactly `FAILED`.
    pub async fn failures(&self) -> Result<Vec<JobHandle>, BatchError> {
        if let Some(cached) = self.shared.lock().cached_failures.clone() {
            return Ok(cached);
        }
        self.shared.refresh(None).await?;
        let core = self.shared.lock();
        Ok(core
            .machine
            .slots()
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                matches!(
                    s,
                    Slot::Ended {
                        status: kinetic_core::status::JobStatus::Failed,
                        ..
                    }
                )
            })
            .filter_map(|(i, _)| core.jobs[i].clone())
            .collect())
    }

    /// The inputs that could not be submitted, with their last error.
    pub fn submission_failures(&self) -> BTreeMap<usize, ChildError> {
        let core = self.shared.lock();
        core.machine
            .slots()
            .iter()
            .enumerate()
            .filter_map(|(index, s)| match s {
                Slot::SubmitFailed { attempts } => {
                    Some((
                        index,
                        ChildError::Submission {
                            index,
                            attempts: *attempts,
                            error: core.submission_errors.get(&index).cloned().unwrap_or_else(
                                || Arc::new(EngineError::internal("the submission failed")),
                            ),
                        },
                    ))
                }
                _ => None,
            })
            .collect()
    }

    /// Children the manifest names whose record could not be loaded.
    pub fn unavailable_children(&self) -> BTreeMap<usize, JobId> {
        self.shared.lock().unavailable.clone()
    }

    /// Cancel the batch: queued inputs are dropped, every submitted job is
    /// cancelled (and any whose submission is in flight, once it lands), and
    /// nothing is retried. Cancelled jobs count as failures in `results()`.
    pub async fn cancel(&self) -> Result<(), BatchError> {
        let chores = self.shared.apply([Event::Cancel]);
        self.shared.run_chores(chores).await;
        Ok(())
    }

    /// Clean up every child (backend resources and/or store objects, as
    /// [`JobHandle::cleanup`]; earlier attempts' objects too) and, with
    /// `store`, the batch's own folder (`_groups/{group_id}/`). Failures
    /// are logged; the first one is returned after everything was tried.
    pub async fn cleanup(&self, options: CleanupOptions) -> Result<(), BatchError> {
        let jobs: Vec<(usize, JobHandle)> = {
            let core = self.shared.lock();
            core.jobs
                .iter()
                .enumerate()
                .filter_map(|(i, j)| j.clone().map(|j| (i, j)))
                .collect()
        };
        let shared = &self.shared;
        let errors: Vec<EngineError> = futures_util::stream::iter(jobs)
            .map(|(index, job)| async move {
                let mut errors = Vec::new();
                if let Err(e) = job.cleanup(options).await {
                    tracing::warn!(job_id = %job.id(), "could not clean up a batch child: {e}");
                    errors.push(e);
                }
                if options.store {
                    for old in shared.attempt_ids(index) {
                        let prefix = layout::job_prefix(&old);
                        if let Err(e) = shared.engine.store.delete_prefix(&prefix).await {
                            errors.push(e.into());
                        }
                    }
                }
                errors
            })
            .buffer_unordered(FAN_OUT)
            .flat_map(futures_util::stream::iter)
            .collect()
            .await;
        if options.store {
            let prefix = layout::group_prefix(&self.shared.group_id);
            self.shared.engine.store.delete_prefix(&prefix).await?;
        }
        match errors.into_iter().next() {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Ask the backend for the group's jobs (one call) and follow those the
    /// manifest did not name.
    async fn reconcile(&self) -> Result<(), BatchError> {
        let (backend, namespace) = {
            let core = self.shared.lock();
            let first = core
                .jobs
                .iter()
                .flatten()
                .next()
                .map(|j| j.record().clone());
            let backend = core
                .base
                .backend
                .clone()
                .or_else(|| first.as_ref().map(|r| r.backend.clone()));
            let namespace = core
                .base
                .namespace
                .clone()
                .or_else(|| first.as_ref().map(|r| r.namespace.clone()))
                .unwrap_or_else(|| self.shared.engine.settings.namespace.clone());
            (backend, namespace)
        };
        match backend {
            Some(b) => self.shared.reconcile(&b, &namespace).await,
            None => Ok(()),
        }
    }

    /// Submit what this batch has not submitted yet: for a batch whose
    /// submitting process stopped (crashed, or dropped its driver), after
    /// [`crate::Engine::attach_batch`]. Needs the engine's spawner;
    /// see [`BatchHandle::resume_with_driver`].
    pub async fn resume(&self, spec: JobSpec, config: BatchConfig) -> Result<(), BatchError> {
        self.resume_with(spec, config, SubmitOptions::default())
            .await
    }

    /// [`BatchHandle::resume`], reporting the shared preparation's steps
    /// (data, packaging, image) to `options`.
    pub async fn resume_with(
        &self,
        spec: JobSpec,
        config: BatchConfig,
        options: SubmitOptions,
    ) -> Result<(), BatchError> {
        let spawner = self.shared.engine.spawner.clone().ok_or_else(|| {
            invalid("this engine has no spawner to run the batch's submissions in the background: build it with EngineBuilder::spawner, or use resume_with_driver")
        })?;
        let driver = self.resume_with_driver(spec, config, options).await?;
        spawner(driver);
        Ok(())
    }

    /// Resume (see [`BatchHandle::resume`]) with the spec and options the
    /// manifest recorded when the batch was submitted, as
    /// [`crate::Engine::resume_batch`] does: for a batch whose submitting
    /// process was killed, from a handle of
    /// [`crate::Engine::attach_batch`]. Needs the engine's spawner.
    pub async fn resume_recorded(&self) -> Result<(), BatchError> {
        let spawner = self.shared.engine.spawner.clone().ok_or_else(|| {
            invalid("this engine has no spawner to run the batch's submissions in the background: build it with EngineBuilder::spawner, or use resume_recorded_with_driver")
        })?;
        let driver = self.resume_recorded_with_driver().await?;
        spawner(driver);
        Ok(())
    }

    /// [`BatchHandle::resume_recorded`], returning the submission loop for
    /// the caller to drive.
    pub async fn resume_recorded_with_driver(&self) -> Result<BatchDriver, BatchError> {
        let group_id = self.group_id().clone();
        let recipe = self.recipe().ok_or_else(|| {
            invalid(format!(
                "batch {group_id} does not record how it was submitted (it was started by Kinetic or an older version): resume it from code with BatchHandle::resume(spec, options)"
            ))
        })?;
        let (spec, config) =
            super::recipe::decode(&recipe).map_err(|message| BatchError::InvalidManifest {
                uri: self
                    .shared
                    .engine
                    .store
                    .uri(&layout::group_manifest(&group_id)),
                group_id: group_id.clone(),
                message: format!("its resume record cannot be used: {message}"),
            })?;
        self.resume_with_driver(spec, config, SubmitOptions::default())
            .await
    }

    /// Resume (see [`BatchHandle::resume`]) and return the submission loop
    /// for the caller to drive.
    ///
    /// `spec` must run the batch's entrypoint (the manifest records it);
    /// the inputs come from `_groups/{group_id}/inputs.jsonl`. The backend
    /// is asked for the group's jobs (one call), then each input still
    /// unknown is probed: if its latest attempt's `handle.json` exists and
    /// its `result.json` too, the job is followed; if only the record
    /// exists, the submission never reached the backend (or its job is
    /// gone without a result) and that attempt is submitted again under the
    /// same job id; otherwise the input is submitted. No input is submitted
    /// twice. Resume a batch from one process at a time. The batch keeps
    /// the name, tags and input mode its manifest records; `config` gives
    /// the limit, retries, fail-fast and intervals from here on, and
    /// `options` receives the shared preparation's steps.
    pub async fn resume_with_driver(
        &self,
        spec: JobSpec,
        config: BatchConfig,
        options: SubmitOptions,
    ) -> Result<BatchDriver, BatchError> {
        validate(&config)?;
        let shared = &self.shared;
        let group_id = shared.group_id.clone();
        let base = {
            let core = shared.lock();
            if core.driver == DriverState::Running {
                return Err(invalid(format!(
                    "batch {group_id} is already being submitted by this handle"
                )));
            }
            if core.machine.is_cancelled() {
                return Err(invalid(format!("batch {group_id} was cancelled")));
            }
            core.base.clone()
        };
        let inputs_name = base.inputs.clone().ok_or_else(|| {
            invalid(format!(
                "batch {group_id} has no stored inputs (it was not submitted by Kinetic for Rust), so it cannot be resumed"
            ))
        })?;
        if let Some(entry) = &base.entrypoint
            && *entry != spec.entrypoint.to_string()
        {
            return Err(invalid(format!(
                "batch {group_id} runs '{entry}', but the spec given runs '{}'",
                spec.entrypoint
            )));
        }
        let inputs_path = layout::group_file(&group_id, &inputs_name).map_err(EngineError::from)?;
        let inputs_uri = shared.engine.store.uri(&inputs_path);
        let bytes = shared
            .engine
            .store
            .get(&inputs_path, Default::default())
            .await
            .map_err(|e| BatchError::InvalidManifest {
                group_id: group_id.clone(),
                uri: inputs_uri.clone(),
                message: e.to_string(),
            })?;
        let inputs = decode_inputs(&bytes).map_err(|e| BatchError::InvalidManifest {
            group_id: group_id.clone(),
            uri: inputs_uri.clone(),
            message: e.to_string(),
        })?;
        if inputs.len() != shared.total {
            return Err(BatchError::InvalidManifest {
                group_id,
                uri: inputs_uri,
                message: format!(
                    "it holds {} inputs but the batch has {}",
                    inputs.len(),
                    shared.total
                ),
            });
        }
        let cwd = submit::working_dir(&shared.engine.settings, &spec)?;
        let inputs: Vec<Arg> = inputs
            .into_iter()
            .enumerate()
            .map(|(i, v)| super::recipe::decode_input(v, &cwd).map_err(|e| (i, e)))
            .collect::<Result<_, _>>()
            .map_err(|(i, message)| BatchError::InvalidManifest {
                group_id: group_id.clone(),
                uri: inputs_uri.clone(),
                message: format!("input {i} cannot be used: {message}"),
            })?;
        let mode = base.input_mode.unwrap_or_default();
        let calls = calls_of(&inputs, mode)?;
        let prep = prepare(&shared.engine, &group_id, spec, &calls, &options).await?;
        // From here on this handle writes the manifest.
        shared.lock().manifest_poll = None;
        let namespace = base
            .namespace
            .clone()
            .unwrap_or_else(|| shared.engine.settings.namespace.clone());
        shared
            .reconcile(prep.resolved.backend.name(), &namespace)
            .await?;
        let requeue = self.probe_unknown(config.retries).await?;
        shared.lock().machine.reconfigure(config.clone());
        let mut events: Vec<Event> = requeue
            .into_iter()
            .map(|(index, attempts)| Event::Requeue { index, attempts })
            .collect();
        events.push(Event::Resume);
        Ok(driver::start(
            shared.clone(),
            Arc::new(prep),
            settings_of(&config),
            events,
        ))
    }

    /// For each unknown input, find its latest attempt with a record:
    /// follow it when its result exists, or return it to be submitted again.
    async fn probe_unknown(&self, retries: u32) -> Result<Vec<(usize, u32)>, BatchError> {
        let shared = &self.shared;
        let unknown = shared.unknown_slots();
        let max_attempts =
            kinetic_core::batch::MAX_DETERMINISTIC_ATTEMPT.max(retries.saturating_add(1));
        // (input, its latest attempt with a record and whether it has a result)
        type Probe = Result<(usize, Option<(u32, bool)>), BatchError>;
        let probed: Vec<Probe> =
            futures_util::stream::iter(unknown.into_iter().map(|index| async move {
                let mut last = None;
                for attempt in 1..=max_attempts {
                    let id = child_job_id(&shared.group_id, index, attempt);
                    if !shared.engine.store.exists(&layout::record(&id)).await? {
                        break;
                    }
                    last = Some(attempt);
                }
                let Some(attempt) = last else {
                    return Ok((index, None));
                };
                let id = child_job_id(&shared.group_id, index, attempt);
                let ran = shared.engine.store.exists(&layout::result(&id)).await?;
                Ok((index, Some((attempt, ran))))
            }))
            .buffer_unordered(FAN_OUT * 2)
            .collect()
            .await;
        let mut adopt = Vec::new();
        let mut requeue = Vec::new();
        for p in probed {
            match p? {
                (index, Some((attempt, true))) => adopt.push(ManifestChild::new(
                    index,
                    child_job_id(&shared.group_id, index, attempt),
                    attempt,
                )),
                (index, Some((attempt, false))) => requeue.push((index, attempt - 1)),
                (_, None) => {}
            }
        }
        shared.adopt_children(&adopt).await;
        Ok(requeue)
    }
}
