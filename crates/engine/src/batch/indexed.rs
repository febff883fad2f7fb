//! A batch submitted in one call ([`kinetic_core::ports::Backend::submit_batch`],
//! one Indexed Job on gke): when a batch takes that path, the batch spec
//! and the calls it writes once, and the children it follows without
//! having written their records.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::submit::{ChildCall, plan_child};
use crate::{EngineError, EngineInner, JobHandle};
use kinetic_core::batch::{
    BatchConfig, DEFAULT_CHUNK_SIZE, GROUP_KIND_MAP, IndexedBatchSpec, Isolation, block_size,
    call_line, child_job_id, encode_call_chunks,
};
use kinetic_core::ids::{GroupId, JobId};
use kinetic_core::layout;
use kinetic_core::plan::GroupPlace;
use kinetic_core::ports::{Backend, ObjectStoreExt, PreparedBatch};
use kinetic_core::redact::Redactor;

use super::BatchError;
use super::prep::BatchPrep;

/// Whether a batch goes to its backend in one call: the backend declares
/// `indexed_batches`, the batch runs on workers, and the job has nothing
/// that is per input on that path — a debug session (one debugger per
/// job), more than one host (a slice per input), a run deadline (an
/// Indexed Job's `activeDeadlineSeconds` is the whole Job's), failure
/// budgets of its own (the Job retries an index `retries` times, the
/// batch's), or FUSE mounts (kept to the per-input path, whose mounts each
/// job has).
pub(super) fn eligible(config: &BatchConfig, prep: &BatchPrep) -> bool {
    prep.resolved.backend.capabilities().indexed_batches
        && config.isolation == Isolation::Workers
        && !prep.spec.debug
        && prep.resolved.accelerator.num_hosts() <= 1
        && prep.spec.deadlines.run.is_none()
        && prep.spec.budgets == Default::default()
        && prep.spec.volumes.iter().all(|(_, d)| !d.is_fuse())
}

/// What a process needs to follow the children of an indexed batch: their
/// backend and the record every child's is made from.
#[derive(Debug, Clone)]
pub(super) struct IndexedChildren {
    engine: Arc<EngineInner>,
    backend: Arc<dyn Backend>,
    spec: Arc<IndexedBatchSpec>,
    redactor: Redactor,
}

impl IndexedChildren {
    /// The handle of input `index`'s child `job_id`: its record is the
    /// one its pod writes (`handle.json`), made here from the batch spec.
    pub(super) fn handle(&self, index: usize, job_id: &JobId) -> Result<JobHandle, EngineError> {
        let record = self
            .spec
            .child_record(job_id.as_str(), index)
            .map_err(|e| EngineError::internal(format!("the batch spec's record template: {e}")))?;
        Ok(
            JobHandle::new(self.engine.clone(), self.backend.clone(), record)
                .with_redactor(self.redactor.clone()),
        )
    }

    /// The children of the indexed batch `group_id` on `backend`, from its
    /// stored batch spec (`_groups/{group_id}/batch.json`): what a process
    /// that attaches to the batch follows them by. `None` when the batch
    /// has no batch spec yet: its process was stopped before submitting it
    /// (a resume submits it).
    pub(super) async fn read(
        engine: &Arc<EngineInner>,
        group_id: &GroupId,
        backend: &str,
    ) -> Result<Option<Self>, BatchError> {
        let path = layout::group_batch_spec(group_id);
        let uri = engine.store.uri(&path);
        let invalid = |message: String| BatchError::InvalidManifest {
            group_id: group_id.clone(),
            uri: uri.clone(),
            message,
        };
        let Some(bytes) = engine.store.get_if_exists(&path).await.map_err(|e| {
            invalid(format!(
                "the batch was submitted in one call but its batch spec cannot be read: {e}"
            ))
        })?
        else {
            return Ok(None);
        };
        let value: Value = serde_json::from_slice(&bytes)
            .map_err(|e| invalid(format!("its batch spec is not JSON: {e}")))?;
        let spec = IndexedBatchSpec::from_json(&value)
            .map_err(|e| invalid(format!("its batch spec cannot be used: {e}")))?;
        if &spec.group_id != group_id {
            return Err(invalid(format!(
                "its batch spec is batch {}'s",
                spec.group_id
            )));
        }
        let backend = engine.backends.get(backend).map_err(EngineError::from)?;
        Ok(Some(Self {
            engine: engine.clone(),
            backend,
            spec: Arc::new(spec),
            redactor: Redactor::default(),
        }))
    }

    /// The backend the batch runs on.
    pub(super) fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }
}

/// The batch spec of `group_id` for the inputs of `prep`, and the plan of
/// the template child (input 0's first attempt) it was made from.
fn batch_spec(
    inner: &Arc<EngineInner>,
    group_id: &GroupId,
    prep: &BatchPrep,
) -> Result<(IndexedBatchSpec, kinetic_core::plan::JobPlan), EngineError> {
    let store = &inner.store;
    let template_id = child_job_id(group_id, 0, 1);
    // The spec's own arguments only: each input's are in its call line.
    let call = ChildCall {
        args: Vec::new(),
        kwargs: Vec::new(),
        group: Some(GroupPlace::new(group_id.clone(), GROUP_KIND_MAP, 0).on_pool(prep.pool)),
    };
    let job = plan_child(
        inner,
        &prep.spec,
        &prep.resolved,
        &prep.uploaded,
        &template_id,
        &call,
    )?;
    let job_folder = store.uri(&layout::job_prefix(&template_id));
    let spec = IndexedBatchSpec::new(
        group_id.clone(),
        prep.calls.len(),
        DEFAULT_CHUNK_SIZE,
        store.uri(&layout::group_calls(group_id)),
        |id| job_folder.replace(template_id.as_str(), id),
        &job.runner_spec,
        &job.record,
    );
    Ok((spec, job))
}

/// The children's template without writing anything: for a process that
/// follows (or resumes) an indexed batch it did not submit.
pub(super) fn children_of(
    inner: &Arc<EngineInner>,
    group_id: &GroupId,
    prep: &BatchPrep,
) -> Result<IndexedChildren, EngineError> {
    let (spec, _) = batch_spec(inner, group_id, prep)?;
    Ok(IndexedChildren {
        engine: inner.clone(),
        backend: prep.resolved.backend.clone(),
        spec: Arc::new(spec),
        redactor: Redactor::from_captured(&prep.resolved.env),
    })
}

/// Write the batch spec and the calls (in chunks of
/// [`DEFAULT_CHUNK_SIZE`]) once, then start the whole batch with one
/// `submit_batch`: at most `max_concurrent` inputs run at once, each
/// retried `retries` times by the backend. Submitting again is harmless
/// (the backend starts a batch once per spec URI).
pub(super) async fn submit(
    inner: &Arc<EngineInner>,
    group_id: &GroupId,
    prep: &BatchPrep,
    config: &BatchConfig,
) -> Result<(), EngineError> {
    let store = &inner.store;
    let (spec, job) = batch_spec(inner, group_id, prep)?;
    let inputs = prep.calls.len();
    let parallelism = config.max_concurrent.unwrap_or(inputs).min(inputs).max(1);
    // A block of inputs per index where the backend takes it: each pod
    // then starts once for its share of the inputs.
    let block_size = if prep.resolved.backend.capabilities().batch_blocks {
        block_size(inputs, parallelism)
    } else {
        1
    };
    let spec = if block_size > 1 {
        spec.with_blocks(
            block_size,
            config.retries,
            config.fail_fast,
            store.uri(&layout::group_blocks(group_id)),
            store.uri(&layout::group_stop(group_id)),
        )
    } else {
        spec
    };
    let base_args = &job.runner_spec.args;
    let base_kwargs = &job.runner_spec.kwargs;
    let lines = prep.calls.iter().map(|call| {
        let mut args = base_args.clone();
        args.extend(call.args.iter().cloned());
        let mut kwargs: Map<String, Value> = base_kwargs.clone();
        for (k, v) in &call.kwargs {
            kwargs.insert(k.clone(), v.clone());
        }
        call_line(args, kwargs)
    });
    for (n, chunk) in encode_call_chunks(lines, spec.chunk_size)
        .into_iter()
        .enumerate()
    {
        store
            .put_text(
                &layout::group_calls_chunk(group_id, n),
                chunk,
                "application/x-ndjson",
            )
            .await?;
    }
    let spec_path = layout::group_batch_spec(group_id);
    store
        .put_json(&spec_path, spec.to_json().to_string())
        .await?;
    let mut prepared = job.prepared;
    prepared.spec_uri = store.uri(&spec_path);
    let batch = PreparedBatch::new(
        group_id.clone(),
        prepared,
        store.uri(&layout::group_calls(group_id)),
        inputs,
        parallelism,
        config.retries,
    )?
    .with_block_size(block_size);
    tracing::info!(group_id = %group_id, inputs, block_size, "submitting the batch in one call");
    prep.resolved.backend.submit_batch(&batch).await?;
    Ok(())
}
