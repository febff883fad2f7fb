//! Starting a batch: check the inputs, prepare what the children share
//! (gather, plan and execute the shared uploads once), write the manifest
//! and start the submission loop; attach to a batch submitted elsewhere;
//! follow jobs submitted already as one batch.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::submit::{self, SubmitOptions};
use crate::{EngineError, EngineInner, JobHandle, JobSpec};
use kinetic_core::batch::{
    BatchConfig, BatchMachine, CallArgs, Event, InputMode, Isolation, MAX_DETERMINISTIC_INDEX,
    dispatch_input, encode_inputs,
};
use kinetic_core::ids::GroupId;
use kinetic_core::layout;
use kinetic_core::plan::{self, UploadTarget};
use kinetic_core::ports::{ObjectStoreExt, WorkerPool};
use kinetic_core::protocol::DataRef;
use kinetic_core::spec::{Arg, Data, data_source_text};

use super::driver::{self, DriverSettings};
use super::error::invalid;
use super::handle::BatchHandle;
use super::prep::BatchPrep;
use super::shared::{BatchShared, DriverState, ManifestBase, ManifestPoll, read_manifest};
use super::{AttachOptions, BatchDriver, BatchError};

/// Each input's arguments under `mode`, once every input was checked:
/// there is at least one and not too many, each fits the mode, and none
/// holds FUSE-mounted data.
pub(super) fn calls_of(inputs: &[Arg], mode: InputMode) -> Result<Vec<CallArgs<Arg>>, BatchError> {
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
pub(super) fn validate(config: &BatchConfig) -> Result<(), BatchError> {
    config.validate().map_err(|e| BatchError::InvalidInput {
        message: e.to_string(),
    })
}

/// The pool a batch's children may run on: workers, at most one per input
/// in flight.
pub(super) fn pool_of(config: &BatchConfig) -> Option<WorkerPool> {
    match config.isolation {
        Isolation::Workers => Some(WorkerPool::new(config.max_concurrent)),
        _ => None,
    }
}

/// The inputs a batch may have in flight beyond `max_concurrent`: one
/// queued per worker where the backend runs the batch on a pool of
/// `max_concurrent` workers, so no worker waits for a poll and a
/// submission between two inputs.
pub(super) fn prefetch_of(config: &BatchConfig, prep: &BatchPrep) -> usize {
    match (prep.pool, config.max_concurrent) {
        (Some(_), Some(limit)) if prep.resolved.backend.capabilities().worker_pools => limit,
        _ => 0,
    }
}

fn machine_for(total: usize, config: &BatchConfig, prep: &BatchPrep) -> BatchMachine {
    let mut machine = BatchMachine::new(total, config.clone());
    machine.set_prefetch(prefetch_of(config, prep));
    machine
}

pub(super) fn settings_of(config: &BatchConfig) -> DriverSettings {
    DriverSettings {
        parallelism: config.submit_parallelism.max(1),
        manifest_interval: config.manifest_interval,
        poll_interval: config.poll_interval,
    }
}

/// Resolve the spec and upload what the children share (once): the
/// project, the spec's data and every input's data (data given to several
/// inputs is hashed and uploaded once). Each input's call ([`calls_of`])
/// is turned to JSON, its data replaced by references to the uploads, and
/// dropped as it is (a batch of 100,000 inputs does not hold both forms).
pub(super) async fn prepare(
    inner: &Arc<EngineInner>,
    group_id: &GroupId,
    spec: JobSpec,
    calls: Vec<CallArgs<Arg>>,
    config: &BatchConfig,
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
        .into_iter()
        .map(|call| CallArgs {
            args: call.args.iter().map(|a| a.to_json(&ref_for)).collect(),
            kwargs: call
                .kwargs
                .into_iter()
                .map(|(k, a)| {
                    let value = a.to_json(&ref_for);
                    (k, value)
                })
                .collect(),
        })
        .collect();
    Ok(BatchPrep {
        spec,
        resolved,
        uploaded,
        calls,
        pool: pool_of(config),
        config: config.clone(),
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
    let total = inputs.len();
    // `inputs.jsonl`, one input encoded at a time; the inputs themselves
    // are not needed past here (the calls hold them).
    let encoded: String = inputs
        .iter()
        .map(|input| encode_inputs(std::slice::from_ref(&super::recipe::encode_input(input))))
        .collect();
    drop(inputs);
    let group_id = GroupId::new_random();
    let prefix = layout::group_prefix(&group_id);
    let started = async {
        let working_dir = submit::working_dir(&inner.settings, &spec)?;
        let mut recipe = super::recipe::encode(&spec, &config, &working_dir);
        let prep = prepare(inner, &group_id, spec, calls, &config, options).await?;
        // One Indexed Job where the backend has them (see `indexed`).
        let indexed = super::indexed::eligible(&config, &prep)
            .then(|| super::indexed::children_of(inner, &group_id, &prep))
            .transpose()?;
        if indexed.is_some()
            && let Value::Object(map) = &mut recipe
        {
            // A resume follows the batch from the backend, never one by one.
            map.insert(super::recipe::INDEXED_KEY.into(), Value::Bool(true));
        }
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
            match indexed {
                Some(_) => BatchMachine::indexed(total, config.clone(), group_id.clone()),
                None => machine_for(total, &config, &prep),
            },
            config.poll_interval,
            base,
            DriverState::None,
        ));
        shared.lock().indexed = indexed;
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
    let indexed = manifest
        .resume
        .as_ref()
        .filter(|r| super::recipe::is_indexed(r));
    if let Some(recipe) = indexed {
        // Submitted in one call: its children are followed from its batch
        // spec and its retries are the backend's, never submitted here.
        let backend = manifest
            .backend
            .clone()
            .ok_or_else(|| BatchError::InvalidManifest {
                uri: inner
                    .store
                    .uri(&layout::group_manifest(&handle.shared.group_id)),
                group_id: handle.shared.group_id.clone(),
                message: "it was submitted in one call but names no backend".into(),
            })?;
        let children =
            super::indexed::IndexedChildren::read(inner, &handle.shared.group_id, &backend).await?;
        let retries = recipe
            .get("retries")
            .and_then(Value::as_u64)
            .and_then(|r| u32::try_from(r).ok())
            .unwrap_or(0);
        {
            let mut core = handle.shared.lock();
            core.indexed = children;
            core.machine
                .follow_indexed(handle.shared.group_id.clone(), retries);
        }
        let mut named = manifest.children.clone();
        if manifest.submission_complete {
            // Every input went in the one call: one not named yet is its
            // first attempt's child.
            let known: std::collections::BTreeSet<usize> =
                named.iter().map(|c| c.group_index).collect();
            named.extend(
                (0..manifest.total_expected)
                    .filter(|i| !known.contains(i))
                    .map(|i| {
                        kinetic_core::batch::ManifestChild::new(
                            i,
                            kinetic_core::batch::child_job_id(&handle.shared.group_id, i, 1),
                            1,
                        )
                    }),
            );
        }
        handle.shared.adopt_children(&named).await;
    } else {
        handle.shared.adopt_children(&manifest.children).await;
        handle.reconcile().await?;
    }
    if indexed.is_none() && handle.shared.lock().machine.counts().unknown > 0 {
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
            core.jobs.set(index, job);
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
