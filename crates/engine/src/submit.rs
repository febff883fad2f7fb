//! The submission pipeline: gather the facts (IO), plan
//! ([`kinetic_core::plan`], pure), execute the plan (IO), once each.
//!
//! 1. [`gather`]: check the spec, choose the backend, capture the
//!    environment, find the project and its dependency file ([`resolve`]),
//!    then hash the data and pack the project while the image is resolved —
//!    nothing is uploaded for a job that cannot run;
//! 2. [`plan::submission`]: one pure call turns the facts into everything
//!    to do: the shared uploads, `spec.json`, `handle.json` and the
//!    [`kinetic_core::ports::PreparedJob`];
//! 3. execute: make the uploads, write the job's objects, hand the
//!    prepared job to the backend.
//!
//! A batch gathers once, plans and executes its shared uploads once
//! ([`plan::shared`]), and plans and executes each child
//! ([`plan::job`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use tracing::Instrument;

use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_core::env::{CapturedEnv, capture};
use kinetic_core::ids::JobId;
use kinetic_core::layout;
use kinetic_core::plan::{
    self, ContextFacts, DataFacts, GroupPlace, ImageChoice, ImagePlan, ObjectUpload, SharedPlan,
    UploadSource, UploadTarget,
};
use kinetic_core::ports::{
    Backend, BackendCapabilities, ImageMode, ObjectStore, ObjectStoreExt as _, PutOptions,
};
use kinetic_core::record::JobRecord;
use kinetic_core::redact::Redactor;
use kinetic_core::requirements;

use super::blocking::blocking;
use super::data::ensure_cached;
use super::project::{self, Project};
use super::{EngineError, EngineInner, JobHandle};
use kinetic_core::spec::JobSpec;

/// A step of the submission, reported to a [`ProgressCallback`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProgressEvent {
    /// Hashing a local data path.
    HashingData {
        /// The path.
        path: PathBuf,
    },
    /// A data path is in the cache.
    DataReady {
        /// The path.
        path: PathBuf,
        /// True when it was already there (one HEAD, nothing uploaded).
        cache_hit: bool,
        /// Bytes uploaded.
        bytes: u64,
    },
    /// Packaging the project.
    Packaging {
        /// The package root.
        root: PathBuf,
    },
    /// The project was packaged and uploaded.
    ContextUploaded {
        /// Files in the archive.
        entries: usize,
        /// Archive size in bytes.
        bytes: u64,
    },
    /// Resolving the image (a build may run).
    ResolvingImage,
    /// The image is known.
    ImageReady {
        /// The image.
        uri: String,
        /// True when no build was needed.
        cached: bool,
    },
    /// Handing the job to the backend.
    Submitting {
        /// The job.
        job_id: String,
        /// The backend.
        backend: String,
    },
    /// Something the user should know (packaging, environment capture…).
    Warning(String),
}

/// Receives [`ProgressEvent`]s during a submit.
pub type ProgressCallback = Arc<dyn Fn(&ProgressEvent) + Send + Sync>;

/// Options of [`super::Engine::submit_with`].
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct SubmitOptions {
    /// Called at each step.
    pub progress: Option<ProgressCallback>,
}

impl std::fmt::Debug for SubmitOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubmitOptions")
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

impl SubmitOptions {
    /// Report progress to `callback`.
    pub fn with_progress(callback: ProgressCallback) -> Self {
        Self {
            progress: Some(callback),
        }
    }

    pub(crate) fn emit(&self, event: ProgressEvent) {
        if let Some(cb) = &self.progress {
            cb(&event);
        }
    }
}

/// What a job needs that does not depend on its own arguments, resolved
/// without uploading anything: once per submit, or once per batch.
pub(crate) struct Resolved {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) accelerator: AcceleratorSpec,
    pub(crate) accelerator_text: String,
    pub(crate) env: CapturedEnv,
    pub(crate) project: Project,
    pub(crate) image: ImagePlan,
}

/// What is uploaded once and shared by the jobs of one submit or batch.
#[derive(Debug, Clone)]
pub(crate) struct Shared {
    /// What was uploaded, and how arguments refer to the data.
    pub(crate) plan: SharedPlan,
    /// The image (`""` when the backend needs none).
    pub(crate) image_uri: String,
}

/// A batch child's own part of the call and its place in the batch.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChildCall {
    /// Positional arguments after the spec's own.
    pub(crate) args: Vec<Value>,
    /// Keyword arguments after (and over) the spec's own.
    pub(crate) kwargs: Vec<(String, Value)>,
    /// Recorded in the child's `handle.json`.
    pub(crate) group: Option<GroupPlace>,
}

pub(crate) async fn submit(
    inner: &Arc<EngineInner>,
    spec: JobSpec,
    options: SubmitOptions,
) -> Result<JobHandle, EngineError> {
    let job_id = JobId::new_random();
    let span = tracing::info_span!(
        "submit",
        job_id = %job_id,
        backend = tracing::field::Empty
    );
    async {
        // Gather: every fact the plan needs, nothing uploaded yet.
        let Gathered {
            resolved,
            shared,
            image_uri,
        } = gather(inner, &spec, &options)
            .instrument(tracing::info_span!("gather"))
            .await?;
        tracing::Span::current().record("backend", resolved.backend.name());
        let result = async {
            // Plan: one pure call.
            let planned = {
                let _plan = tracing::info_span!("plan").entered();
                let SharedFacts {
                    data,
                    context,
                    packed,
                } = shared;
                let mut facts = plan::SubmissionFacts::new(
                    context,
                    resolved.project.facts.clone(),
                    job_facts(inner, &resolved, &image_uri, &job_id, &ChildCall::default()),
                );
                facts.data = data;
                facts
                    .install_requirements
                    .clone_from(&resolved.image.install_requirements);
                let store = &inner.store;
                let uri_of = |p: &kinetic_core::ports::ObjectPath| store.uri(p);
                (
                    plan::submission(&spec, &inner.settings, facts, &uri_of)?,
                    packed,
                )
            };
            // Execute: what the plan says, in its order.
            let (planned, packed) = planned;
            async {
                execute_shared(inner, &planned.shared, &options).await?;
                drop(packed);
                execute_job(inner, &resolved.backend, &planned.job, &options).await
            }
            .instrument(tracing::info_span!("execute"))
            .await
        }
        .await;
        finish_submit(inner, &resolved, &job_id, result).await
    }
    .instrument(span)
    .await
}

/// Submit one child of a batch whose shared parts are uploaded: plan the
/// child's job, then execute it.
pub(crate) async fn submit_child(
    inner: &Arc<EngineInner>,
    spec: &JobSpec,
    resolved: &Resolved,
    shared: &Shared,
    job_id: &JobId,
    call: &ChildCall,
) -> Result<JobHandle, EngineError> {
    let span = tracing::info_span!("submit", job_id = %job_id, backend = resolved.backend.name());
    let result = async {
        let job = plan_child(inner, spec, resolved, shared, job_id, call)?;
        execute_job(inner, &resolved.backend, &job, &SubmitOptions::default()).await
    }
    .instrument(span)
    .await;
    finish_submit(inner, resolved, job_id, result).await
}

/// Plan one child of a batch (pure: nothing written).
pub(crate) fn plan_child(
    inner: &Arc<EngineInner>,
    spec: &JobSpec,
    resolved: &Resolved,
    shared: &Shared,
    job_id: &JobId,
    call: &ChildCall,
) -> Result<plan::JobPlan, EngineError> {
    let store = &inner.store;
    let uri_of = |p: &kinetic_core::ports::ObjectPath| store.uri(p);
    let facts = job_facts(inner, resolved, &shared.image_uri, job_id, call);
    Ok(plan::job(
        spec,
        &inner.settings,
        &resolved.project.facts,
        &shared.plan,
        &facts,
        &uri_of,
    )?)
}

async fn finish_submit(
    inner: &Arc<EngineInner>,
    resolved: &Resolved,
    job_id: &JobId,
    result: Result<JobRecord, EngineError>,
) -> Result<JobHandle, EngineError> {
    match result {
        Ok(record) => Ok(
            JobHandle::new(inner.clone(), resolved.backend.clone(), record)
                .with_redactor(Redactor::from_captured(&resolved.env)),
        ),
        Err(err) => {
            // Nothing of a job that was not submitted stays behind as if it
            // were: its prefix goes (cached data, complete or marked, stays).
            if let Err(e) = inner.store.delete_prefix(&layout::job_prefix(job_id)).await {
                tracing::warn!(job_id = %job_id, "could not remove the artifacts of a failed submit: {e}");
            }
            Err(err)
        }
    }
}

/// The spec's working directory, absolute: a relative one (or none) is
/// taken from the settings' working directory (which the engine's builder
/// fills with the process's when the embedder gave none).
pub(crate) fn working_dir(
    settings: &super::EngineSettings,
    spec: &JobSpec,
) -> Result<std::path::PathBuf, EngineError> {
    let base = settings
        .cwd
        .clone()
        .ok_or_else(|| EngineError::internal("the engine's settings name no working directory"))?;
    Ok(match &spec.working_dir {
        Some(dir) => kinetic_core::spec::absolute(dir, &base),
        None => base,
    })
}

/// Check everything that can be checked before uploading, and resolve the
/// backend, environment, project and image plan.
pub(crate) async fn resolve(
    inner: &Arc<EngineInner>,
    spec: &JobSpec,
    options: &SubmitOptions,
) -> Result<Resolved, EngineError> {
    // Everything that can be checked without IO is checked first: nothing is
    // uploaded for a job that cannot run.
    spec.validate()?;
    let settings = &inner.settings;
    let (accelerator_text, accelerator) = plan::accelerator(spec, settings)?;
    let backend = inner
        .backends
        .choose(spec.backend.as_deref(), &accelerator)?;
    // What the backend declares first (hosts), then what only it knows.
    backend.capabilities().check(backend.name(), &accelerator)?;
    backend.check(&accelerator).await?;
    if spec.debug {
        if matches!(
            spec.entrypoint,
            kinetic_core::spec::Entrypoint::Command { .. }
        ) {
            return Err(EngineError::invalid_input(
                "debug runs a Python function under debugpy; a command cannot be debugged (give module:function or file.py:function)",
            ));
        }
        if !backend.capabilities().port_forward {
            return Err(BackendCapabilities::undeclared(backend.name(), "port_forward").into());
        }
        if accelerator.spot() {
            options.emit(ProgressEvent::Warning(
                "debug on Spot VMs: a preemption ends the debugging session".to_owned(),
            ));
        }
    }
    let env = capture(&spec.env, &inner.env)?;
    for warning in env.warnings() {
        options.emit(ProgressEvent::Warning(warning.to_string()));
    }
    let cwd = working_dir(settings, spec)?;
    let entrypoint = spec.entrypoint.clone();
    let (home, package_root) = (settings.home.clone(), settings.package_root.clone());
    let project = blocking(move || {
        project::resolve(&entrypoint, &cwd, home.as_deref(), package_root.as_deref())
    })
    .await??;
    let image = if backend.capabilities().needs_image {
        let entry_dir = project.entry_dir();
        let home = settings.home.clone();
        let mode = plan::requirements_mode(&spec.image);
        let deps =
            blocking(move || requirements::resolve(&entry_dir, home.as_deref(), mode)).await?;
        let image = plan::image(&spec.image, &settings.python_version, &accelerator, deps)?;
        for warning in &image.warnings {
            options.emit(ProgressEvent::Warning(warning.clone()));
        }
        if matches!(image.image, ImageChoice::Resolve(_)) && inner.images.is_none() {
            return Err(EngineError::internal(
                "this backend needs a container image but the engine has no image builder",
            ));
        }
        image
    } else {
        if let Some(asked) = image_asked_for(&spec.image) {
            options.emit(ProgressEvent::Warning(format!(
                "the {} backend runs jobs without a container image, so {asked} is not used: \
                 the job runs with this machine's Python and the packages installed here",
                backend.name()
            )));
        }
        ImagePlan::none()
    };
    Ok(Resolved {
        backend,
        accelerator,
        accelerator_text,
        env,
        project,
        image,
    })
}

/// The image a spec asks for beyond the default, as a warning names it,
/// for a backend that runs jobs without one.
fn image_asked_for(mode: &ImageMode) -> Option<String> {
    match mode {
        ImageMode::Bundled => None,
        ImageMode::Prebuilt { .. } => {
            Some("the prebuilt image (container image \"prebuilt\")".to_owned())
        }
        ImageMode::Custom { uri } => Some(format!("the container image {uri}")),
        _ => Some("the container image asked for".to_owned()),
    }
}

/// The facts of the shared uploads: the local data's hashes and the packed
/// project.
pub(crate) struct SharedFacts {
    /// Each distinct local data path of the spec, hashed.
    pub(crate) data: BTreeMap<PathBuf, DataFacts>,
    /// The packed project.
    pub(crate) context: ContextFacts,
    /// Holds the packed project: it must outlive the plan's execution.
    pub(crate) packed: tempfile::TempDir,
}

/// Everything a submission's plan needs, gathered by IO.
pub(crate) struct Gathered {
    /// The backend, environment, project and image plan.
    pub(crate) resolved: Resolved,
    /// The data's hashes and the packed project.
    pub(crate) shared: SharedFacts,
    /// The image the job runs in (`""` when the backend needs none).
    pub(crate) image_uri: String,
}

/// Gather every fact a submission's plan needs: check and resolve the spec
/// ([`resolve`]), then hash the data and pack the project while the image
/// is resolved. Nothing is uploaded.
pub(crate) async fn gather(
    inner: &Arc<EngineInner>,
    spec: &JobSpec,
    options: &SubmitOptions,
) -> Result<Gathered, EngineError> {
    let resolved = resolve(inner, spec, options).await?;
    gather_uploads(inner, spec, resolved, options).await
}

/// [`gather`] after [`resolve`]: the facts of `spec`'s uploads (a batch
/// gives its spec with every input's data) and the image.
pub(crate) async fn gather_uploads(
    inner: &Arc<EngineInner>,
    spec: &JobSpec,
    resolved: Resolved,
    options: &SubmitOptions,
) -> Result<Gathered, EngineError> {
    let (shared, image_uri) = futures_util::future::try_join(
        gather_shared(inner, spec, &resolved, options),
        resolve_image(inner, &resolved.image, options),
    )
    .await?;
    Ok(Gathered {
        resolved,
        shared,
        image_uri,
    })
}

/// Hash the data and pack the project: the facts of the shared uploads,
/// what both a submission and a dry run need.
async fn gather_shared(
    inner: &Arc<EngineInner>,
    spec: &JobSpec,
    resolved: &Resolved,
    options: &SubmitOptions,
) -> Result<SharedFacts, EngineError> {
    let data = hash_data(spec, options).await?;
    let packed = tempfile::tempdir().map_err(|e| {
        EngineError::project_caused_by(
            format!("cannot create a temporary directory for the context: {e}"),
            e,
        )
    })?;
    let context = pack_context(inner, &resolved.project, spec, &packed, options).await?;
    Ok(SharedFacts {
        data,
        context,
        packed,
    })
}

/// The facts of one job: its id, backend, accelerator, image, captured
/// variables, a batch child's own call, and the engine's clock.
fn job_facts<'a>(
    inner: &EngineInner,
    resolved: &'a Resolved,
    image_uri: &str,
    job_id: &JobId,
    call: &ChildCall,
) -> plan::JobFacts<'a> {
    let mut facts = plan::JobFacts::new(
        job_id.clone(),
        resolved.backend.name(),
        &resolved.accelerator_text,
        &resolved.accelerator,
        (inner.clock)(),
    )
    .with_env(resolved.env.clone());
    image_uri.clone_into(&mut facts.image_uri);
    facts.extra_args.clone_from(&call.args);
    facts.extra_kwargs.clone_from(&call.kwargs);
    facts.group.clone_from(&call.group);
    facts
}

/// Execute the shared part of a plan: the uploads every child of a batch
/// shares, made once. `packed` holds the packed project until then.
pub(crate) async fn execute_shared_once(
    inner: &Arc<EngineInner>,
    plan: SharedPlan,
    packed: tempfile::TempDir,
    image_uri: String,
    options: &SubmitOptions,
) -> Result<Shared, EngineError> {
    execute_shared(inner, &plan, options).await?;
    drop(packed);
    Ok(Shared { plan, image_uri })
}

/// Execute one job's plan: write `spec.json` and `handle.json`, then hand
/// [`plan::JobPlan::prepared`] to the backend.
async fn execute_job(
    inner: &Arc<EngineInner>,
    backend: &Arc<dyn Backend>,
    job: &plan::JobPlan,
    options: &SubmitOptions,
) -> Result<JobRecord, EngineError> {
    let store = &inner.store;
    put_object(store, &job.spec).await?;
    put_object(store, &job.record_upload).await?;
    options.emit(ProgressEvent::Submitting {
        job_id: job.record.job_id.to_string(),
        backend: backend.name().to_owned(),
    });
    let record = &job.prepared.record;
    if let Err(err) = backend.submit(&job.prepared).await {
        // An ambiguous create: the backend may hold the job although the
        // call failed. If it does, the job is submitted.
        match backend.status(record).await {
            Ok(state) if state.status != kinetic_core::status::JobStatus::NotFound => {
                tracing::warn!(job_id = %record.job_id, "submit reported an error but the job exists; keeping it: {err}");
            }
            _ => return Err(err.into()),
        }
    }
    Ok(record.clone())
}

/// Hash every distinct local data path of the spec.
async fn hash_data(
    spec: &JobSpec,
    options: &SubmitOptions,
) -> Result<BTreeMap<PathBuf, DataFacts>, EngineError> {
    let mut facts = BTreeMap::new();
    for path in plan::local_data(spec) {
        options.emit(ProgressEvent::HashingData { path: path.clone() });
        let hashed = path.clone();
        let found = blocking(move || project::hash_data(&hashed)).await??;
        facts.insert(path, found);
    }
    Ok(facts)
}

/// Pack the project (without the spec's local data paths) into `dir`.
async fn pack_context(
    inner: &Arc<EngineInner>,
    project: &Project,
    spec: &JobSpec,
    dir: &tempfile::TempDir,
    options: &SubmitOptions,
) -> Result<ContextFacts, EngineError> {
    options.emit(ProgressEvent::Packaging {
        root: project.root.clone(),
    });
    let excludes = plan::context_excludes(spec);
    let zip_path = dir.path().join(layout::CONTEXT_FILE);
    let packing = project::PackSettings {
        default_excludes: inner.settings.default_excludes,
        size_warn_bytes: inner.settings.context_size_warn_bytes,
        limits: inner.settings.extract_limits,
    };
    let cache = inner.settings.context_cache.clone();
    let (packed, zip_path) = {
        let project = project.clone();
        blocking(move || match cache {
            Some(cache) => project::pack_cached(&project, &cache, &excludes, packing),
            None => project::pack(&project, &zip_path, &excludes, packing).map(|p| (p, zip_path)),
        })
        .await??
    };
    for warning in &packed.warnings {
        options.emit(ProgressEvent::Warning(warning.clone()));
    }
    Ok(ContextFacts::new(
        packed.sha256,
        packed.bytes,
        packed.entries,
        UploadSource::File(zip_path),
    ))
}

/// Make the shared uploads: the data into the cache, then the context and
/// the requirements.
async fn execute_shared(
    inner: &Arc<EngineInner>,
    plan: &SharedPlan,
    options: &SubmitOptions,
) -> Result<(), EngineError> {
    let store = &inner.store;
    for data in &plan.data {
        let cached = ensure_cached(store, data).await?;
        if let Some(why) = &cached.repaired {
            options.emit(ProgressEvent::Warning(format!(
                "the data cache entry of '{}' ({}) did not match its marker ({why}); repaired: {} file(s) uploaded again",
                data.local.display(),
                cached.uri,
                cached.objects
            )));
        }
        options.emit(ProgressEvent::DataReady {
            path: data.local.clone(),
            cache_hit: cached.hit,
            bytes: cached.bytes,
        });
    }
    put_if_absent(inner, &plan.context).await?;
    options.emit(ProgressEvent::ContextUploaded {
        entries: plan.context_entries,
        bytes: plan.context_bytes,
    });
    if let Some(requirements) = &plan.requirements {
        put_object(store, requirements).await?;
    }
    Ok(())
}

/// Write one planned object; a content-addressed one only when the store
/// lacks it, and by one submission of this engine at a time.
async fn put_if_absent(inner: &EngineInner, upload: &ObjectUpload) -> Result<(), EngineError> {
    let store = &inner.store;
    if !upload.if_absent {
        return put_object(store, upload).await;
    }
    let lock = {
        let mut locks = inner.uploading.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(upload.key.clone()).or_default().clone()
    };
    let result = {
        let _held = lock.lock().await;
        match store.exists(&upload.key).await {
            Ok(true) => Ok(()),
            Ok(false) => put_object(store, upload).await,
            Err(e) => Err(e.into()),
        }
    };
    let mut locks = inner.uploading.lock().unwrap_or_else(|p| p.into_inner());
    // The map's entry and this clone: nobody else waits on it.
    if Arc::strong_count(&lock) == 2 {
        locks.remove(&upload.key);
    }
    result
}

/// Write one planned object.
pub(crate) async fn put_object(
    store: &Arc<dyn ObjectStore>,
    upload: &ObjectUpload,
) -> Result<(), EngineError> {
    let mut options = if upload.if_absent {
        PutOptions::create_if_absent()
    } else {
        PutOptions::default()
    };
    if let Some(content_type) = upload.content_type {
        options = options.with_content_type(content_type);
    }
    let put = match &upload.source {
        UploadSource::File(path) => store.put_file(&upload.key, path, options).await.map(drop),
        UploadSource::Bytes(bytes) => store.put(&upload.key, bytes.clone(), options).await,
    };
    match put {
        // Content-addressed: whoever wrote it first wrote the same bytes.
        Err(e) if upload.if_absent && e.is_already_exists() => Ok(()),
        other => Ok(other.map(drop)?),
    }
}

/// The image the job runs in (`""` when the backend needs none).
async fn resolve_image(
    inner: &Arc<EngineInner>,
    image: &ImagePlan,
    options: &SubmitOptions,
) -> Result<String, EngineError> {
    let request = match &image.image {
        ImageChoice::Resolve(request) => request,
        ImageChoice::Fixed(uri) => return Ok(uri.clone()),
        _ => return Ok(String::new()),
    };
    let builder = inner.images.clone().ok_or_else(|| {
        EngineError::internal(
            "this backend needs a container image but the engine has no image builder",
        )
    })?;
    options.emit(ProgressEvent::ResolvingImage);
    let resolved = builder.resolve(request).await?;
    options.emit(ProgressEvent::ImageReady {
        uri: resolved.uri.clone(),
        cached: resolved.cached,
    });
    Ok(resolved.uri)
}

/// A submission worked out and not carried out (`kinetic run --dry-run`,
/// `kinetic map --dry-run`): where the job would run, its image, what
/// would be uploaded and written. Working it out reads the project and the
/// data (hashing, packing into a temporary file), asks the backend whether
/// it can run the job and the store which uploads it already holds; it
/// uploads, builds, writes and submits nothing.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct SubmitPreview {
    /// The backend the job would go to.
    pub backend: String,
    /// The accelerator, as the job would ask for it.
    pub accelerator: String,
    /// The image the job would run in.
    pub image: ImagePreview,
    /// What would be uploaded first: the data into the cache, the packed
    /// project, the requirements.
    pub uploads: Vec<UploadPreview>,
    /// What each job would write of its own (`spec.json`, `handle.json`),
    /// under `job_id`, an id made up for the preview.
    pub job_objects: Vec<String>,
    /// The id the job objects are named with (a real submission draws its own).
    pub job_id: String,
}

/// The image of a [`SubmitPreview`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ImagePreview {
    /// The backend runs the job without a container image.
    None,
    /// This image, as given.
    Fixed {
        /// The image.
        uri: String,
    },
    /// The image builder would be asked for it (and build it when its
    /// registry lacks it).
    Resolve {
        /// `bundled` or `prebuilt`.
        mode: String,
        /// The base image.
        base_image: String,
        /// `cpu`, `gpu` or `tpu`.
        category: String,
        /// Requirement lines baked in (bundled) or installed at start (prebuilt).
        requirements: usize,
    },
}

/// One upload of a [`SubmitPreview`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct UploadPreview {
    /// What it is: `data PATH`, `project`, `requirements`.
    pub what: String,
    /// Where it would go.
    pub uri: String,
    /// Its size, when known.
    pub bytes: Option<u64>,
    /// True when the store holds it already (a content-addressed object is
    /// then not uploaded again); `None` when not asked.
    pub present: Option<bool>,
}

/// Work out what submitting `spec` would do, and do none of it: as one
/// job, or (`batch`) as the children of a batch, whose shared uploads go
/// under the batch's folder.
pub(crate) async fn preview(
    inner: &Arc<EngineInner>,
    spec: &JobSpec,
    options: &SubmitOptions,
    batch: bool,
) -> Result<SubmitPreview, EngineError> {
    let resolved = resolve(inner, spec, options).await?;
    let job_id = JobId::new_random();
    let group_id = kinetic_core::ids::GroupId::new_random();
    let target = if batch {
        UploadTarget::Group(&group_id)
    } else {
        UploadTarget::Job(&job_id)
    };
    let SharedFacts {
        data,
        context,
        packed,
    } = gather_shared(inner, spec, &resolved, options).await?;
    let store = &inner.store;
    let uri_of = |p: &kinetic_core::ports::ObjectPath| store.uri(p);
    let shared = plan::shared(
        spec,
        &target,
        &data,
        context,
        resolved.image.install_requirements.as_deref(),
        &uri_of,
    )?;
    let mut uploads = Vec::new();
    for d in &shared.data {
        uploads.push(UploadPreview {
            what: format!("data {}", d.local.display()),
            uri: store.uri(&d.entry),
            bytes: Some(d.listing.iter().map(|f| f.size).sum()),
            present: Some(store.exists(&d.marker).await?),
        });
    }
    uploads.push(UploadPreview {
        what: "project".to_owned(),
        uri: store.uri(&shared.context.key),
        bytes: Some(shared.context_bytes),
        present: Some(store.exists(&shared.context.key).await?),
    });
    if let Some(r) = &shared.requirements {
        uploads.push(UploadPreview {
            what: "requirements".to_owned(),
            uri: store.uri(&r.key),
            bytes: match &r.source {
                UploadSource::Bytes(b) => Some(b.len() as u64),
                UploadSource::File(_) => None,
            },
            present: None,
        });
    }
    let image = match &resolved.image.image {
        ImageChoice::None => ImagePreview::None,
        ImageChoice::Fixed(uri) => ImagePreview::Fixed { uri: uri.clone() },
        ImageChoice::Resolve(request) => ImagePreview::Resolve {
            mode: match request.mode {
                kinetic_core::ports::ImageMode::Prebuilt { .. } => "prebuilt",
                _ => "bundled",
            }
            .to_owned(),
            base_image: request.base_image.clone(),
            category: request.category.clone(),
            requirements: request.requirements.as_deref().map_or(0, |r| {
                r.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .count()
            }),
        },
    };
    let job_objects = vec![
        store.uri(&layout::spec(&job_id)),
        store.uri(&layout::record(&job_id)),
    ];
    drop(packed);
    Ok(SubmitPreview {
        backend: resolved.backend.name().to_owned(),
        accelerator: resolved.accelerator_text,
        image,
        uploads,
        job_objects,
        job_id: job_id.to_string(),
    })
}
