//! The engine: drives a job through the ports, from a [`JobSpec`] to the
//! value the user's function returned.
//!
//! `submit` resolves the accelerator and backend, captures the environment
//! (failing on missing required variables before anything is uploaded),
//! hashes and uploads data to the content-addressed cache, packages and
//! uploads the project, resolves the image (in parallel with the uploads)
//! when the backend needs one, writes `spec.json` and `handle.json`, and
//! hands the job to the backend. A [`JobHandle`] then follows it.
//!
//! ```no_run
//! # async fn demo(engine: kinetic_core::engine::Engine) -> Result<(), kinetic_core::engine::EngineError> {
//! use kinetic_core::engine::{Entrypoint, JobSpec, ResultOptions};
//! use serde_json::json;
//!
//! let spec = JobSpec::new(Entrypoint::parse("work:square")?).arg(json!(7));
//! let value = engine.run(spec, ResultOptions::default()).await?;
//! assert_eq!(value, json!(49));
//! # Ok(()) }
//! ```

mod batch;
mod blocking;
mod data;
mod error;
mod handle;
mod project;
mod spec;
mod submit;

use std::sync::Arc;

use bytes::Bytes;

use crate::env::EnvSnapshot;
use crate::ids::JobId;
use crate::ports::{BackendRegistry, ImageBuilder, ObjectPath, ObjectStore};
use crate::record::{JobRecord, record_key};

pub use batch::{
    AttachOptions, BatchDriver, BatchError, BatchFailure, BatchHandle, BatchItem,
    BatchResultsOptions, ChildError, FailedChild, MapOptions, Spawner,
};
pub use data::{cache_prefix, marker_path};
pub use error::EngineError;
pub use handle::{CleanupOptions, JobHandle, LogCallback, ResultOptions, StatusCallback};
pub use spec::{Arg, Data, DataSource, Entrypoint, JobSpec, SpecError};
pub use submit::{ProgressCallback, ProgressEvent, SubmitOptions};

/// Where jobs go and how they are named: the resolved configuration the
/// engine needs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EngineSettings {
    /// Cloud project (empty for purely local use).
    pub project: String,
    /// Zone.
    pub zone: String,
    /// Cluster name.
    pub cluster: String,
    /// Kubernetes namespace.
    pub namespace: String,
    /// Jobs bucket name recorded in each job record.
    pub bucket_name: String,
    /// Accelerator for jobs that name none.
    pub default_accelerator: String,
    /// Python version of the client (`3.11`), for the base image.
    pub python_version: String,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self {
            project: String::new(),
            zone: "us-central1-a".into(),
            cluster: "kinetic-cluster".into(),
            namespace: "default".into(),
            bucket_name: String::new(),
            default_accelerator: "cpu".into(),
            python_version: "3.11".into(),
        }
    }
}

impl EngineSettings {
    /// Settings for `project`/`zone`/`cluster`/`namespace`, with the jobs
    /// bucket named as Kinetic names it (`{project}-kn-{cluster}-jobs`).
    pub fn for_cluster(project: &str, zone: &str, cluster: &str, namespace: &str) -> Self {
        Self {
            project: project.into(),
            zone: zone.into(),
            cluster: cluster.into(),
            namespace: namespace.into(),
            bucket_name: format!("{project}-kn-{cluster}-jobs"),
            ..Self::default()
        }
    }
}

pub(crate) struct EngineInner {
    pub(crate) settings: EngineSettings,
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) backends: BackendRegistry,
    pub(crate) images: Option<Arc<dyn ImageBuilder>>,
    /// A fixed environment for tests; `None` reads the process's at each submit.
    pub(crate) env: Option<EnvSnapshot>,
    /// Runs batch submission loops in the background ([`Engine::map`]).
    pub(crate) spawner: Option<Spawner>,
}

impl std::fmt::Debug for EngineInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("settings", &self.settings)
            .field("store", &self.store)
            .field("backends", &self.backends.names())
            .field("spawner", &self.spawner.is_some())
            .finish_non_exhaustive()
    }
}

/// Runs jobs. Cheap to clone; clones share everything.
#[derive(Debug, Clone)]
pub struct Engine {
    inner: Arc<EngineInner>,
}

/// Builds an [`Engine`] from its store, backends and settings.
pub struct EngineBuilder {
    settings: EngineSettings,
    store: Option<Arc<dyn ObjectStore>>,
    backends: BackendRegistry,
    images: Option<Arc<dyn ImageBuilder>>,
    env: Option<EnvSnapshot>,
    spawner: Option<Spawner>,
}

impl std::fmt::Debug for EngineBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineBuilder")
            .field("settings", &self.settings)
            .field("store", &self.store)
            .field("backends", &self.backends.names())
            .field("spawner", &self.spawner.is_some())
            .finish_non_exhaustive()
    }
}

impl EngineBuilder {
    /// The settings (default: local, `cpu`).
    pub fn settings(mut self, settings: EngineSettings) -> Self {
        self.settings = settings;
        self
    }

    /// The jobs store (required).
    pub fn store(mut self, store: Arc<dyn ObjectStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Register a backend under its name.
    pub fn backend(mut self, backend: Arc<dyn crate::ports::Backend>) -> Self {
        self.backends.register(backend);
        self
    }

    /// The backend for single-host jobs that name none (default `local`).
    pub fn default_backend(mut self, name: &str) -> Self {
        let mut registry = BackendRegistry::new(name);
        for n in self.backends.names() {
            if let Ok(b) = self.backends.get(&n) {
                registry.register(b);
            }
        }
        self.backends = registry;
        self
    }

    /// The image builder, for backends that need images.
    pub fn image_builder(mut self, builder: Arc<dyn ImageBuilder>) -> Self {
        self.images = Some(builder);
        self
    }

    /// Capture environment variables from this snapshot instead of the
    /// process environment (tests; embedding programs with their own env).
    pub fn env_snapshot(mut self, env: EnvSnapshot) -> Self {
        self.env = Some(env);
        self
    }

    /// How to run a batch's submission loop in the background, for
    /// [`Engine::map`] and [`BatchHandle::resume`]: the embedding program's
    /// executor, typically `|driver| { tokio::spawn(driver); }`. The core
    /// has no runtime of its own; without a spawner use
    /// [`Engine::map_with_driver`] and drive the returned future yourself.
    pub fn spawner(mut self, spawner: impl Fn(BatchDriver) + Send + Sync + 'static) -> Self {
        self.spawner = Some(Arc::new(spawner));
        self
    }

    /// The engine; fails when no store was given.
    pub fn build(self) -> Result<Engine, EngineError> {
        let store = self.store.ok_or_else(|| EngineError::Internal {
            message: "an engine needs a store: call EngineBuilder::store".into(),
        })?;
        Ok(Engine {
            inner: Arc::new(EngineInner {
                settings: self.settings,
                store,
                backends: self.backends,
                images: self.images,
                env: self.env,
                spawner: self.spawner,
            }),
        })
    }
}

impl Engine {
    /// Start building an engine.
    pub fn builder() -> EngineBuilder {
        EngineBuilder {
            settings: EngineSettings::default(),
            store: None,
            backends: BackendRegistry::new("local"),
            images: None,
            env: None,
            spawner: None,
        }
    }

    /// The settings.
    pub fn settings(&self) -> &EngineSettings {
        &self.inner.settings
    }

    /// The jobs store.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.inner.store
    }

    /// The backend registry.
    pub fn backends(&self) -> &BackendRegistry {
        &self.inner.backends
    }

    /// Submit a job and return its handle once the backend accepted it.
    pub async fn submit(&self, spec: JobSpec) -> Result<JobHandle, EngineError> {
        self.submit_with(spec, SubmitOptions::default()).await
    }

    /// Submit with progress reporting.
    pub async fn submit_with(
        &self,
        spec: JobSpec,
        options: SubmitOptions,
    ) -> Result<JobHandle, EngineError> {
        submit::submit(&self.inner, spec, options).await
    }

    /// Submit, wait and return the value (streaming logs when asked in `options`).
    pub async fn run(
        &self,
        spec: JobSpec,
        options: ResultOptions,
    ) -> Result<serde_json::Value, EngineError> {
        let handle = self.submit(spec).await?;
        handle.result(options).await
    }

    /// The handle of a job submitted earlier, from any process, by its id.
    pub async fn attach(&self, job_id: &str) -> Result<JobHandle, EngineError> {
        let id: JobId = job_id
            .parse()
            .map_err(|e: crate::ids::IdError| SpecError::JobId {
                input: job_id.to_owned(),
                reason: e.to_string(),
            })?;
        let key = ObjectPath::parse(record_key(&id))?;
        let bytes = match self.inner.store.get(&key, Default::default()).await {
            Ok(bytes) => bytes,
            Err(e) if e.is_not_found() => {
                return Err(EngineError::JobNotFound {
                    job_id: job_id.to_owned(),
                    uri: self.inner.store.uri(&key),
                });
            }
            Err(e) => return Err(e.into()),
        };
        self.handle_from_record_bytes(&bytes, &self.inner.store.uri(&key))
    }

    /// A handle from a record's JSON (as `JobHandle::to_json` wrote it).
    pub fn handle_from_json(&self, json: &str) -> Result<JobHandle, EngineError> {
        self.handle_from_record_bytes(json.as_bytes(), "(JSON given)")
    }

    fn handle_from_record_bytes(&self, bytes: &[u8], uri: &str) -> Result<JobHandle, EngineError> {
        let record = JobRecord::from_json_bytes(bytes).map_err(|e| EngineError::InvalidResult {
            job_id: String::new(),
            uri: uri.to_owned(),
            message: e.to_string(),
        })?;
        let backend = self.inner.backends.get(&record.backend)?;
        Ok(JobHandle::new(self.inner.clone(), backend, record))
    }

    /// Every job the registered backends still hold, newest first. Jobs
    /// whose record cannot be read are skipped (and logged).
    pub async fn list_jobs(&self) -> Result<Vec<JobRecord>, EngineError> {
        let mut records = Vec::new();
        for name in self.inner.backends.names() {
            let backend = self.inner.backends.get(&name)?;
            for id in backend.list().await? {
                let Ok(key) = ObjectPath::parse(record_key(&id)) else {
                    continue;
                };
                match self.inner.store.get(&key, Default::default()).await {
                    Ok(bytes) => match JobRecord::from_json_bytes(&bytes) {
                        Ok(record) => records.push(record),
                        Err(e) => {
                            tracing::warn!(job_id = %id, "skipping a job whose record is invalid: {e}")
                        }
                    },
                    Err(e) => {
                        tracing::warn!(job_id = %id, "skipping a job whose record cannot be read: {e}")
                    }
                }
            }
        }
        records.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| a.job_id.cmp(&b.job_id))
        });
        Ok(records)
    }

    /// Write a JSON document to the store (used for records and specs).
    pub(crate) async fn put_json(
        store: &Arc<dyn ObjectStore>,
        path: &ObjectPath,
        json: String,
    ) -> Result<(), EngineError> {
        store
            .put(
                path,
                Bytes::from(json),
                crate::ports::PutOptions::default().with_content_type("application/json"),
            )
            .await?;
        Ok(())
    }
}
