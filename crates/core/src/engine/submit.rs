//! The submission pipeline (DESIGN §5).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};
use tracing::Instrument;

use crate::accelerators::AcceleratorSpec;
use crate::env::{EnvSnapshot, capture};
use crate::ids::{JobId, display_name, k8s_name_for_backend};
use crate::image::DOCKERFILE_TEMPLATE;
use crate::ports::{ImageMode, ImageRequest, ObjectPath, PreparedJob, PutOptions};
use crate::protocol::{
    Artifact, ClusterInfo, DataRef, PROTOCOL_VERSION, RUNNER_SOURCE, RunnerSpec, RunnerVolume,
};
use crate::record::{JobRecord, UtcTimestamp, record_key};
use crate::requirements::{self, RequirementsMode};
use sha2::Digest as _;

use super::blocking::blocking;
use super::data::ensure_cached;
use super::project::{self, Project};
use super::spec::{Data, DataSource, JobSpec};
use super::{Engine, EngineError, EngineInner, JobHandle};

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

/// Options of [`Engine::submit_with`].
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

    fn emit(&self, event: ProgressEvent) {
        if let Some(cb) = &self.progress {
            cb(&event);
        }
    }
}

pub(crate) async fn submit(
    inner: &Arc<EngineInner>,
    spec: JobSpec,
    options: SubmitOptions,
) -> Result<JobHandle, EngineError> {
    // Everything that can be checked without IO is checked first: nothing is
    // uploaded for a job that cannot run.
    spec.validate()?;
    let accelerator_text = spec
        .accelerator
        .clone()
        .unwrap_or_else(|| inner.settings.default_accelerator.clone());
    let accelerator = AcceleratorSpec::parse(&accelerator_text)?;
    let backend = inner
        .backends
        .choose(spec.backend.as_deref(), &accelerator)?;
    backend.check(&accelerator).await?;
    let snapshot = inner.env.clone().unwrap_or_else(EnvSnapshot::from_process);
    let env = capture(&spec.env, &snapshot)?;
    for warning in env.warnings() {
        options.emit(ProgressEvent::Warning(warning.to_string()));
    }
    let process_cwd = std::env::current_dir().map_err(|e| EngineError::Project {
        message: format!("cannot read the current directory: {e}"),
    })?;
    // A relative working directory is taken from the process's own.
    let cwd = match &spec.working_dir {
        Some(dir) => super::spec::absolute(dir, &process_cwd),
        None => process_cwd,
    };
    let home = snapshot.get("HOME").map(|v| PathBuf::from(v.expose()));
    let package_root_env = snapshot
        .get("KINETIC_PACKAGE_ROOT")
        .map(|v| v.expose().to_owned())
        .filter(|v| !v.is_empty());
    let default_excludes = snapshot
        .get("KINETIC_NO_DEFAULT_EXCLUDES")
        .is_none_or(|v| v.expose() != "1");
    let entrypoint = spec.entrypoint.clone();
    let project = {
        let cwd = cwd.clone();
        blocking(move || {
            project::resolve(
                &entrypoint,
                &cwd,
                home.as_deref(),
                package_root_env.as_deref(),
            )
        })
        .await??
    };

    let job_id = JobId::new_random();
    let span = tracing::info_span!("submit", job_id = %job_id, backend = backend.name());
    let prefix = ObjectPath::parse(job_id.as_str())?;
    let result = async {
        prepare_and_submit(
            inner,
            &spec,
            &options,
            &project,
            &job_id,
            &prefix,
            &accelerator,
            &accelerator_text,
            backend.clone(),
            env,
            &snapshot,
            default_excludes,
            &cwd,
        )
        .await
    }
    .instrument(span)
    .await;
    match result {
        Ok(record) => Ok(JobHandle::new(inner.clone(), backend, record)),
        Err(err) => {
            // Nothing of a job that was not submitted stays behind as if it
            // were: its prefix goes (cached data, complete or marked, stays).
            if let Err(e) = inner.store.delete_prefix(&prefix).await {
                tracing::warn!(job_id = %job_id, "could not remove the artifacts of a failed submit: {e}");
            }
            Err(err)
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn prepare_and_submit(
    inner: &Arc<EngineInner>,
    spec: &JobSpec,
    options: &SubmitOptions,
    project: &Project,
    job_id: &JobId,
    prefix: &ObjectPath,
    accelerator: &AcceleratorSpec,
    accelerator_text: &str,
    backend: Arc<dyn crate::ports::Backend>,
    env: crate::env::CapturedEnv,
    snapshot: &EnvSnapshot,
    default_excludes: bool,
    cwd: &Path,
) -> Result<JobRecord, EngineError> {
    let store = &inner.store;

    // Data and context uploads run alongside the image resolution.
    let uploads = async {
        let refs = upload_data(inner, spec, options).await?;
        let context =
            upload_context(inner, project, spec, prefix, options, default_excludes, cwd).await?;
        Ok::<_, EngineError>((refs, context))
    };
    let image = resolve_image(
        inner,
        spec,
        accelerator,
        backend.capabilities().needs_image,
        options,
        project,
        prefix,
        snapshot,
    );
    let ((refs, context), (image_uri, requirements)) =
        futures_util::future::try_join(uploads, image).await?;

    let output_dir = spec
        .output_dir
        .clone()
        .or_else(|| {
            snapshot
                .get("KINETIC_OUTPUT_DIR")
                .map(|v| v.expose().to_owned())
                .filter(|v| !v.is_empty())
        })
        .unwrap_or_else(|| {
            let uri = store.uri(
                &ObjectPath::parse(format!("outputs/{job_id}")).unwrap_or_else(|_| prefix.clone()),
            );
            uri.strip_prefix("file://")
                .map(str::to_owned)
                .unwrap_or(uri)
        });

    let ref_for = |d: &Data| -> Value {
        match refs.get(&data_key(d)) {
            Some(r) => r.to_value(),
            None => Value::Null,
        }
    };
    let runner_spec = RunnerSpec {
        protocol: PROTOCOL_VERSION,
        job_id: job_id.to_string(),
        entrypoint: project.runner_entrypoint.clone(),
        args: spec.args.iter().map(|a| a.to_json(&ref_for)).collect(),
        kwargs: spec
            .kwargs
            .iter()
            .map(|(k, a)| (k.clone(), a.to_json(&ref_for)))
            .collect::<Map<String, Value>>(),
        volumes: spec
            .volumes
            .iter()
            .filter_map(|(mount, d)| {
                refs.get(&data_key(d)).map(|r| {
                    let mut data = r.clone();
                    data.mount_path = Some(mount.clone());
                    RunnerVolume {
                        mount_path: mount.clone(),
                        data,
                    }
                })
            })
            .collect(),
        env_names: env.names().map(|n| n.as_str().to_owned()).collect(),
        output_dir,
        context,
        requirements,
        plan: project.plan.clone(),
        result_uri: store.uri(&prefix.child("result.json")?),
        cluster: ClusterInfo {
            accelerator: accelerator_text.to_owned(),
            num_nodes: accelerator.num_hosts(),
            num_gpus_per_node: accelerator.count().unwrap_or(0),
            node_ips: Vec::new(),
        },
    };
    let spec_path = prefix.child("spec.json")?;
    let spec_json =
        serde_json::to_string_pretty(&runner_spec).map_err(|e| EngineError::Internal {
            message: format!("cannot encode spec.json: {e}"),
        })?;
    Engine::put_json(store, &spec_path, spec_json).await?;

    let settings = &inner.settings;
    let func_name = spec.entrypoint.func_name();
    let record = JobRecord {
        accelerator: accelerator_text.to_owned(),
        backend: backend.name().to_owned(),
        bucket_name: if settings.bucket_name.is_empty() {
            store
                .uri(prefix)
                .trim_end_matches(prefix.as_str())
                .trim_end_matches('/')
                .to_owned()
        } else {
            settings.bucket_name.clone()
        },
        cluster_name: settings.cluster.clone(),
        created_at: UtcTimestamp::now(),
        debug: false,
        display_name: display_name(&func_name, job_id),
        entrypoint: Some(spec.entrypoint.to_string()),
        func_name,
        group_id: None,
        group_index: None,
        group_kind: None,
        image_uri,
        job_id: job_id.clone(),
        k8s_name: k8s_name_for_backend(backend.name(), job_id),
        namespace: settings.namespace.clone(),
        project: settings.project.clone(),
        store_url: None,
        zone: settings.zone.clone(),
    };
    let record_path = ObjectPath::parse(record_key(job_id))?;
    Engine::put_json(store, &record_path, record.to_json()).await?;

    options.emit(ProgressEvent::Submitting {
        job_id: job_id.to_string(),
        backend: backend.name().to_owned(),
    });
    let prepared = PreparedJob::new(
        record.clone(),
        accelerator.clone(),
        store.uri(&spec_path),
        env,
        spec.deadlines,
    );
    if let Err(err) = backend.submit(&prepared).await {
        // An ambiguous create: the backend may hold the job although the
        // call failed. If it does, the job is submitted.
        match backend.status(&record).await {
            Ok(state) if state.status != crate::status::JobStatus::NotFound => {
                tracing::warn!(job_id = %job_id, "submit reported an error but the job exists; keeping it: {err}");
            }
            _ => return Err(err.into()),
        }
    }
    Ok(record)
}

/// Identity of a data entry: the same path (or URI) is uploaded once.
fn data_key(data: &Data) -> String {
    match data.source() {
        DataSource::Local(p) => format!("local:{}", p.display()),
        DataSource::Remote(uri) => format!("remote:{uri}"),
    }
}

/// Hash and upload every distinct local data entry of the spec; return the
/// reference of each entry (local and remote), keyed by [`data_key`].
async fn upload_data(
    inner: &Arc<EngineInner>,
    spec: &JobSpec,
    options: &SubmitOptions,
) -> Result<BTreeMap<String, DataRef>, EngineError> {
    let mut all: Vec<&Data> = spec.volumes.iter().map(|(_, d)| d).collect();
    for a in &spec.args {
        a.collect_data(&mut all);
    }
    for (_, a) in &spec.kwargs {
        a.collect_data(&mut all);
    }
    let mut refs = BTreeMap::new();
    for data in all {
        let key = data_key(data);
        if refs.contains_key(&key) {
            continue;
        }
        let data_ref = match data.source() {
            DataSource::Remote(uri) => DataRef::new(uri.trim_end_matches('/'), uri.ends_with('/')),
            DataSource::Local(path) => {
                options.emit(ProgressEvent::HashingData { path: path.clone() });
                let hashed_path = path.clone();
                let (hash, is_dir) = blocking(move || project::hash_data(&hashed_path)).await??;
                let cached = ensure_cached(&inner.store, path, &hash).await?;
                options.emit(ProgressEvent::DataReady {
                    path: path.clone(),
                    cache_hit: cached.hit,
                    bytes: cached.bytes,
                });
                DataRef::new(cached.uri, is_dir)
            }
        };
        refs.insert(key, data_ref);
    }
    Ok(refs)
}

/// Package the project (without local data paths inside it) and upload
/// `{job_id}/context.zip`; return it as an artifact with its SHA-256.
async fn upload_context(
    inner: &Arc<EngineInner>,
    project: &Project,
    spec: &JobSpec,
    prefix: &ObjectPath,
    options: &SubmitOptions,
    default_excludes: bool,
    _cwd: &Path,
) -> Result<Artifact, EngineError> {
    options.emit(ProgressEvent::Packaging {
        root: project.root.clone(),
    });
    let mut excludes: Vec<PathBuf> = spec
        .volumes
        .iter()
        .filter_map(|(_, d)| d.local_path().map(Path::to_path_buf))
        .collect();
    let mut in_args = Vec::new();
    for a in spec.args.iter().chain(spec.kwargs.iter().map(|(_, a)| a)) {
        a.collect_data(&mut in_args);
    }
    excludes.extend(
        in_args
            .iter()
            .filter_map(|d| d.local_path().map(Path::to_path_buf)),
    );
    let tmp = tempfile::tempdir().map_err(|e| EngineError::Project {
        message: format!("cannot create a temporary directory for the context: {e}"),
    })?;
    let zip_path = tmp.path().join("context.zip");
    let packed = {
        let project = project.clone();
        let zip_path = zip_path.clone();
        blocking(move || project::pack(&project, &zip_path, &excludes, default_excludes)).await??
    };
    for warning in &packed.warnings {
        options.emit(ProgressEvent::Warning(warning.clone()));
    }
    let object = prefix.child("context.zip")?;
    inner
        .store
        .put_file(&object, &zip_path, PutOptions::default())
        .await?;
    options.emit(ProgressEvent::ContextUploaded {
        entries: packed.entries,
        bytes: packed.bytes,
    });
    Ok(Artifact {
        uri: inner.store.uri(&object),
        sha256: packed.sha256,
    })
}

/// The image the job runs in (`""` when the backend needs none) and, in
/// prebuilt mode, the uploaded `{job_id}/requirements.txt` the runner
/// installs at start.
///
/// The user's dependency file is found from the project's entry directory
/// and filtered for the mode (`kinetic_core::requirements`): bundled images
/// bake it in, prebuilt images install it at start, custom images ignore
/// it (with a warning).
#[allow(clippy::too_many_arguments)]
async fn resolve_image(
    inner: &Arc<EngineInner>,
    spec: &JobSpec,
    accelerator: &AcceleratorSpec,
    needs_image: bool,
    options: &SubmitOptions,
    project: &Project,
    prefix: &ObjectPath,
    snapshot: &EnvSnapshot,
) -> Result<(String, Option<Artifact>), EngineError> {
    if !needs_image {
        return Ok((String::new(), None));
    }
    let mode = match &spec.image {
        ImageMode::Prebuilt { .. } => RequirementsMode::Prebuilt,
        _ => RequirementsMode::Bundled,
    };
    let entry_dir =
        Path::new(&project.packaging_plan.package_root).join(&project.packaging_plan.entry_rel);
    let home = snapshot.get("HOME").map(|v| PathBuf::from(v.expose()));
    let deps = blocking(move || requirements::resolve(&entry_dir, home.as_deref(), mode)).await?;
    if let ImageMode::Custom { uri } = &spec.image {
        // Not installed, so not checked: only say that they are ignored.
        if let Some(file) = deps.ok().and_then(|d| d.requirements.and(d.file)) {
            options.emit(ProgressEvent::Warning(format!(
                "the requirements in {} are ignored: the custom image {uri} must already hold them",
                file.path.display()
            )));
        }
        return Ok((uri.clone(), None));
    }
    let deps = deps.map_err(|e| EngineError::Project {
        message: e.to_string(),
    })?;
    for warning in &deps.warnings {
        options.emit(ProgressEvent::Warning(warning.to_string()));
    }
    let builder = inner.images.clone().ok_or_else(|| EngineError::Internal {
        message: "this backend needs a container image but the engine has no image builder".into(),
    })?;
    // Prebuilt images install the requirements at start: the runner
    // downloads and verifies them like the context.
    let mut installed = None;
    if let (ImageMode::Prebuilt { .. }, Some(text)) = (&spec.image, &deps.requirements) {
        let object = prefix.child("requirements.txt")?;
        inner
            .store
            .put(
                &object,
                bytes::Bytes::from(text.clone()),
                PutOptions::default().with_content_type("text/plain"),
            )
            .await?;
        installed = Some(Artifact {
            uri: inner.store.uri(&object),
            sha256: hex::encode(sha2::Sha256::digest(text.as_bytes())),
        });
    }
    options.emit(ProgressEvent::ResolvingImage);
    let request = ImageRequest::new(
        spec.image.clone(),
        format!("python:{}-slim", inner.settings.python_version),
        accelerator.category().as_str().to_owned(),
        match mode {
            RequirementsMode::Bundled => deps.requirements,
            RequirementsMode::Prebuilt => None,
        },
        RUNNER_SOURCE.to_owned(),
        DOCKERFILE_TEMPLATE.to_owned(),
    );
    let image = builder.resolve(&request).await?;
    options.emit(ProgressEvent::ImageReady {
        uri: image.uri.clone(),
        cached: image.cached,
    });
    Ok((image.uri, installed))
}
