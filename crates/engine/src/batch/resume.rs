//! Resuming a batch whose submitting process stopped: probe what it left,
//! submit what it did not, with the spec given or the one its manifest
//! recorded.

use std::sync::Arc;

use futures_util::StreamExt;

use crate::submit::{self, SubmitOptions};
use crate::{EngineError, JobSpec};
use kinetic_core::batch::{BatchConfig, Event, ManifestChild, child_job_id, decode_inputs};
use kinetic_core::layout;
use kinetic_core::ports::ObjectStoreExt;
use kinetic_core::spec::Arg;

use super::driver::{self};
use super::error::invalid;
use super::handle::BatchHandle;
use super::shared::{DriverState, FAN_OUT};
use super::start::{calls_of, prefetch_of, prepare, settings_of, validate};
use super::{BatchDriver, BatchError};

impl BatchHandle {
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
        drop(inputs);
        let prep = prepare(&shared.engine, &group_id, spec, calls, &config, &options).await?;
        // From here on this handle writes the manifest.
        shared.lock().manifest_poll = None;
        let namespace = base
            .namespace
            .clone()
            .unwrap_or_else(|| shared.engine.settings.namespace.clone());
        let indexed = base.resume.as_ref().is_some_and(super::recipe::is_indexed);
        let requeue = if indexed {
            // Submitted in one call: what was never submitted goes in one
            // call again (the backend starts a batch once), never one by one.
            let children = super::indexed::children_of(&shared.engine, &group_id, &prep)?;
            let mut core = shared.lock();
            core.machine.reconfigure(config.clone());
            core.machine
                .follow_indexed(group_id.clone(), config.retries);
            core.indexed = Some(children);
            Vec::new()
        } else {
            shared
                .reconcile(prep.resolved.backend.name(), &namespace, true)
                .await?;
            let requeue = self.probe_unknown(config.retries).await?;
            let mut core = shared.lock();
            core.machine.reconfigure(config.clone());
            core.machine.set_prefetch(prefetch_of(&config, &prep));
            requeue
        };
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
    pub(super) async fn probe_unknown(
        &self,
        retries: u32,
    ) -> Result<Vec<(usize, u32)>, BatchError> {
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
