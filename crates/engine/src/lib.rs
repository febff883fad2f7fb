//! The engine: drives a job through the ports, from a [`JobSpec`] to the
//! value the user's function returned.
//!
//! `submit` resolves the accelerator and backend, captures the environment
//! (failing on missing required variables before anything is uploaded),
//! hashes the data and packs the project, plans the submission
//! ([`kinetic_core::plan`]), uploads data to the content-addressed cache and the
//! project, resolves the image (in parallel with the uploads) when the
//! backend needs one, writes `spec.json` and `handle.json`
//! ([`kinetic_core::layout`]), and hands the job to the backend. A [`JobHandle`]
//! then follows it. Settings come from [`EngineSettings`] (resolved by
//! [`kinetic_core::settings`]); the engine reads no environment variable.
//!
//! This crate is the floor above `kinetic-core` (the pure domain and the
//! ports, with no async runtime): it holds what needs one — the
//! orchestrator, the job and batch handles, the on-disk caches, the retry
//! mechanism ([`retry`]) and the decorators that wait ([`layers`]).
//! Adapters and front ends sit above it.
//!
//! # Example
//!
//! An engine over the test kit's in-memory store and scripted backend
//! (real programs register `kinetic-store-gcs` and a real backend the same
//! way):
//!
//! ```
//! use std::sync::Arc;
//! use kinetic_engine::{Engine, EngineSettings, Entrypoint, JobSpec, ResultOptions};
//! use kinetic_core::layout;
//! use kinetic_core::ports::ObjectStore;
//! use kinetic_testkit::{FakeBackend, MemoryStore, Outcome};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let project = tempfile::tempdir()?;
//! std::fs::write(project.path().join("work.py"), "def square(x):\n    return x * x\n")?;
//!
//! let store = Arc::new(MemoryStore::new());
//! let backend = FakeBackend::new("fake", store.clone());
//! backend.push_outcome(Outcome::Succeed(json!(49)));
//! let engine = Engine::builder()
//!     .settings(EngineSettings::default().with_cwd(project.path()))
//!     .store(store.clone())
//!     .backend(Arc::new(backend))
//!     .default_backend("fake")
//!     .build()?;
//!
//! let spec = JobSpec::new(Entrypoint::parse("work:square")?).arg(json!(7));
//! let handle = engine.submit(spec).await?;
//! // The engine wrote the job's spec and record where the layout says.
//! assert!(store.head(&layout::spec(handle.id())).await.is_ok());
//! assert!(store.head(&layout::record(handle.id())).await.is_ok());
//! let value = handle.result(ResultOptions::default().cleanup(false)).await?;
//! assert_eq!(value, json!(49));
//! # Ok(())
//! # }
//! ```
//!
//! Or, in one call:
//!
//! ```no_run
//! # async fn demo(engine: kinetic_engine::Engine) -> Result<(), kinetic_engine::EngineError> {
//! use kinetic_engine::{Entrypoint, JobSpec, ResultOptions};
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
pub mod layers;
mod project;
pub mod retry;
mod slice_log;
mod stored_log;
mod submit;

use std::sync::Arc;

use kinetic_core::env::EnvSnapshot;
use kinetic_core::ids::JobId;
use kinetic_core::layout;
use kinetic_core::ports::{BackendRegistry, ImageBuilder, ObjectStore, ObjectStoreExt};

use kinetic_core::record::{JobRecord, UtcTimestamp};
use kinetic_core::retry::RetryPolicy;

pub use batch::{
    AttachOptions, BatchConfig, BatchDriver, BatchError, BatchFailure, BatchHandle, BatchItem,
    BatchResultsOptions, BatchSummary, ChildError, FailedChild, Spawner,
};
pub use error::EngineError;
pub use handle::{CleanupOptions, JobHandle, LogCallback, ResultOptions, StatusCallback};
pub use kinetic_core::ports::CleanupWait;
pub use kinetic_core::settings::EngineSettings;
pub use kinetic_core::spec::{Arg, Data, DataSource, Entrypoint, JobSpec, SpecError};
pub use layers::{
    FaultPlan, FaultyBackend, FaultyImageBuilder, FaultyStore, LazyImageBuilder, RetryBackend,
};
pub use submit::{
    ImagePreview, ProgressCallback, ProgressEvent, SubmitOptions, SubmitPreview, UploadPreview,
};

pub(crate) struct EngineInner {
    pub(crate) settings: EngineSettings,
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) backends: BackendRegistry,
    pub(crate) images: Option<Arc<dyn ImageBuilder>>,
    /// The environment `--env`/`--secret` entries are captured from (and
    /// secret values redacted with): the builder's snapshot, or the
    /// process's, read once when the engine was built.
    pub(crate) env: EnvSnapshot,
    /// Runs batch submission loops in the background ([`Engine::map`]).
    pub(crate) spawner: Option<Spawner>,
    /// The time job records are stamped with.
    pub(crate) clock: Clock,
    /// One lock per content-addressed key being written, so that concurrent
    /// submissions of one project send its archive once.
    pub(crate) uploading: UploadLocks,
}

/// Locks by content-addressed key; an entry lives while a write holds it.
pub(crate) type UploadLocks = std::sync::Mutex<
    std::collections::HashMap<kinetic_core::ports::ObjectPath, Arc<tokio::sync::Mutex<()>>>,
>;

/// Where the engine reads the time its job records carry.
pub type Clock = Arc<dyn Fn() -> UtcTimestamp + Send + Sync>;

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
    clock: Option<Clock>,
    retry: RetryPolicy,
}

impl std::fmt::Debug for EngineBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineBuilder")
            .field("settings", &self.settings)
            .field("store", &self.store)
            .field("backends", &self.backends.names())
            .field("spawner", &self.spawner.is_some())
            .field("retry", &self.retry)
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
    pub fn backend(mut self, backend: Arc<dyn kinetic_core::ports::Backend>) -> Self {
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

    /// Capture the jobs' `--env`/`--secret` variables from this snapshot
    /// (tests; embedding programs that read their environment once at
    /// their edge). Without one, [`EngineBuilder::build`] takes the
    /// process's environment once; the engine never reads it afterwards.
    /// Only captured variables come from it: settings come from
    /// [`EngineBuilder::settings`].
    pub fn env_snapshot(mut self, env: EnvSnapshot) -> Self {
        self.env = Some(env);
        self
    }

    /// Stamp job records with this clock's time instead of the system's.
    pub fn clock(mut self, clock: impl Fn() -> UtcTimestamp + Send + Sync + 'static) -> Self {
        self.clock = Some(Arc::new(clock));
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

    /// How backend calls are retried (default [`RetryPolicy::default`]):
    /// every backend given to the engine is wrapped in a [`RetryBackend`]
    /// with this policy, the one place the engine retries. Calls of the
    /// store are not retried here: a cloud store retries inside its client
    /// and reports what it gave up on as already retried.
    /// [`RetryPolicy::none`] turns retries off.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// The engine; fails when no store was given.
    pub fn build(self) -> Result<Engine, EngineError> {
        let store = self.store.ok_or_else(|| {
            EngineError::internal("an engine needs a store: call EngineBuilder::store")
        })?;
        // The process's state is read here, once, when the embedder gave
        // none: the engine itself never reads its environment or its
        // working directory.
        let env = self.env.unwrap_or_else(EnvSnapshot::from_process);
        let mut settings = self.settings;
        if settings.cwd.is_none() {
            settings.cwd = Some(std::env::current_dir().map_err(|e| {
                EngineError::project_caused_by(format!("cannot read the current directory: {e}"), e)
            })?);
        }
        let mut backends = BackendRegistry::new(self.backends.default_name());
        for name in self.backends.names() {
            let backend = self.backends.get(&name)?;
            backends.register(Arc::new(RetryBackend::new(backend, self.retry)));
        }
        Ok(Engine {
            inner: Arc::new(EngineInner {
                settings,
                store,
                backends,
                images: self.images,
                env,
                spawner: self.spawner,
                clock: self.clock.unwrap_or_else(|| Arc::new(UtcTimestamp::now)),
                uploading: UploadLocks::default(),
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
            clock: None,
            retry: RetryPolicy::default(),
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

    /// The backend registry: the backends the engine was given, each
    /// behind the engine's [`RetryBackend`].
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

    /// What submitting `spec` would do (backend, image, uploads, the job's
    /// objects), worked out without doing any of it: nothing is uploaded,
    /// built, written or submitted.
    pub async fn preview(
        &self,
        spec: &JobSpec,
        options: SubmitOptions,
    ) -> Result<SubmitPreview, EngineError> {
        submit::preview(&self.inner, spec, &options, false).await
    }

    /// [`Engine::preview`] for the children of a batch ([`Engine::map`]):
    /// the shared uploads go under the batch's folder, and each child
    /// writes the job objects shown.
    pub async fn preview_map(
        &self,
        spec: &JobSpec,
        options: SubmitOptions,
    ) -> Result<SubmitPreview, EngineError> {
        submit::preview(&self.inner, spec, &options, true).await
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
        let id: JobId =
            job_id
                .parse()
                .map_err(|e: kinetic_core::ids::IdError| SpecError::JobId {
                    input: job_id.to_owned(),
                    reason: e.to_string(),
                })?;
        load_handle(&self.inner, &id).await
    }

    /// A handle from a record's JSON (as `JobHandle::to_json` wrote it).
    pub fn handle_from_json(&self, json: &str) -> Result<JobHandle, EngineError> {
        let record = parse_record(json.as_bytes(), "", "(JSON given)")?;
        record
            .check_ids(&record.job_id)
            .map_err(|e| EngineError::InvalidResult {
                job_id: record.job_id.to_string(),
                uri: "(JSON given)".to_owned(),
                message: e.to_string(),
            })?;
        let backend = self.inner.backends.get(&record.backend)?;
        Ok(JobHandle::new(self.inner.clone(), backend, record))
    }

    /// Every job of the engine's namespace the registered backends still
    /// hold, newest first. Jobs whose record cannot be read are skipped
    /// (and logged); so is a backend that cannot list its jobs (logged),
    /// unless none can, when the first one's error is returned
    /// ([`Engine::list_jobs_each`] tells which jobs and backends were left
    /// out, and why).
    pub async fn list_jobs(&self) -> Result<Vec<JobRecord>, EngineError> {
        let listing = self.list_jobs_each().await?;
        for (backend, e) in &listing.unlisted {
            tracing::warn!(backend = %backend, "cannot list the {backend} backend's jobs: {e}");
        }
        for skipped in &listing.unreadable {
            tracing::warn!(job_id = %skipped.job_id, "{skipped}");
        }
        Ok(listing.records)
    }

    /// Every job of the engine's namespace (the `namespace` setting) that
    /// the registered backends that can list theirs still hold, newest
    /// first; each job a backend holds whose record (`handle.json`) cannot
    /// be read, with why; and each backend that cannot list (a cluster
    /// without the workload's CRD, a role without permission to list it)
    /// with why. A Kubernetes backend lists its namespace's jobs; the
    /// local backend holds every namespace's, and those of other
    /// namespaces are left out by their records. An error only when there
    /// is a backend and none could list.
    pub async fn list_jobs_each(&self) -> Result<JobListing, EngineError> {
        self.list_jobs_of(&self.inner.backends.names()).await
    }

    /// [`Engine::list_jobs_each`] over the registered backends named in
    /// `backends` only (those whose jobs keep their records in this
    /// engine's store); a name not registered is skipped.
    pub async fn list_jobs_of(&self, backends: &[String]) -> Result<JobListing, EngineError> {
        let mut records = Vec::new();
        let mut unreadable = Vec::new();
        let mut unlisted = Vec::new();
        let mut listed_any = false;
        let registered = self.inner.backends.names();
        for name in backends.iter().filter(|n| registered.contains(n)) {
            let backend = self.inner.backends.get(name)?;
            let ids = match backend.list().await {
                Ok(ids) => ids,
                Err(e) => {
                    unlisted.push((name.clone(), EngineError::from(e)));
                    continue;
                }
            };
            listed_any = true;
            for id in ids {
                match read_record(&self.inner, &id).await {
                    Ok(record) if record.namespace == self.inner.settings.namespace => {
                        records.push(record);
                    }
                    Ok(_) => {}
                    Err(e) => unreadable.push(UnreadableJob {
                        backend: name.clone(),
                        job_id: id,
                        error: e,
                    }),
                }
            }
        }
        if !listed_any && !unlisted.is_empty() {
            return Err(unlisted.swap_remove(0).1);
        }
        records.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| a.job_id.cmp(&b.job_id))
        });
        Ok(JobListing {
            records,
            unreadable,
            unlisted,
        })
    }
}

impl Engine {
    /// The records the store holds of `backend`'s jobs, newest first,
    /// read from the store alone: what is left to list when the backend
    /// itself cannot be asked (a cluster deleted with its jobs bucket
    /// kept). Records that cannot be read are skipped (and logged).
    pub async fn stored_jobs(&self, backend: &str) -> Result<Vec<JobRecord>, EngineError> {
        let mut records = Vec::new();
        for meta in self.inner.store.list(None).await? {
            let key = meta.path.as_str();
            let Some(id) = key.strip_suffix(&format!("/{}", layout::RECORD_FILE)) else {
                continue;
            };
            let Ok(id) = id.parse::<JobId>() else {
                continue;
            };
            match read_record(&self.inner, &id).await {
                Ok(record) if record.backend == backend => records.push(record),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(job_id = %id, "skipping a job whose record cannot be read: {e}")
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
}

/// What [`Engine::list_jobs_each`] found: the jobs of the backends that
/// could list theirs, and the backends that could not.
#[derive(Debug)]
#[non_exhaustive]
pub struct JobListing {
    /// The jobs, newest first.
    pub records: Vec<JobRecord>,
    /// The jobs a backend holds whose record cannot be read (its
    /// `handle.json` missing or damaged), in the order listed: left out of
    /// `records`, never silently.
    pub unreadable: Vec<UnreadableJob>,
    /// Each backend that could not list its jobs (by name), and why.
    pub unlisted: Vec<(String, EngineError)>,
}

/// A job a backend holds whose record cannot be read
/// ([`JobListing::unreadable`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct UnreadableJob {
    /// The backend that holds it.
    pub backend: String,
    /// Its id.
    pub job_id: JobId,
    /// Why its record cannot be read.
    pub error: EngineError,
}

impl std::fmt::Display for UnreadableJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "skipping job {}: the {} backend holds it but its handle could not be loaded ({})",
            self.job_id, self.backend, self.error
        )
    }
}

/// Read a job's `handle.json` and make its handle ([`Engine::attach`],
/// batches loading their children).
pub(crate) async fn load_handle(
    inner: &Arc<EngineInner>,
    job_id: &JobId,
) -> Result<JobHandle, EngineError> {
    let record = read_record(inner, job_id).await?;
    let backend = inner.backends.get(&record.backend)?;
    Ok(JobHandle::new(inner.clone(), backend, record))
}

/// Read a job's `handle.json`: the one reader of stored job records.
async fn read_record(inner: &Arc<EngineInner>, job_id: &JobId) -> Result<JobRecord, EngineError> {
    let key = layout::record(job_id);
    let uri = inner.store.uri(&key);
    let Some(bytes) = inner.store.get_if_exists(&key).await? else {
        return Err(EngineError::job_not_found(job_id.as_str(), &uri));
    };
    let record = parse_record(&bytes, job_id.as_str(), &uri)?;
    // A record names what cleanup deletes: one whose ids are not those of
    // the key it was read from is never acted on.
    record
        .check_ids(job_id)
        .map_err(|e| EngineError::InvalidResult {
            job_id: job_id.to_string(),
            uri,
            message: e.to_string(),
        })?;
    Ok(record)
}

fn parse_record(bytes: &[u8], job_id: &str, uri: &str) -> Result<JobRecord, EngineError> {
    JobRecord::from_json_bytes(bytes).map_err(|e| EngineError::InvalidResult {
        job_id: job_id.to_owned(),
        uri: uri.to_owned(),
        message: e.to_string(),
    })
}
