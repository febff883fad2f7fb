//! Planning a submission, apart from doing it.
//!
//! The functions here are pure: they turn a [`JobSpec`], the
//! [`EngineSettings`] and the facts the engine found by IO (data hashes,
//! the packed context's digest and size, the filtered requirements, the
//! chosen backend, the clock) into what to upload, which image to ask for,
//! the runner's `spec.json` and the job record. The engine
//! (`kinetic-engine`) gathers the facts, calls these steps and carries out
//! what they return; nothing here touches a file, the store or a backend.
//!
//! A submission is planned in three steps, so that a batch plans its shared
//! part once and each child cheaply:
//!
//! 1. [`image`]: the image request, and the requirements a prebuilt image
//!    installs at start;
//! 2. [`shared`]: the uploads every job of the submission shares — data
//!    into the content-addressed cache, the packed project, the
//!    requirements — and how arguments refer to the data;
//! 3. [`job`]: one job's `spec.json` and `handle.json`, and the
//!    [`PreparedJob`] the backend is handed.
//!
//! [`submission`] is the plan of one job submitted on its own: steps 2 and
//! 3 in one call, from the facts gathered. A batch calls [`shared`] once and
//! [`job`] per child. No one else builds a [`PreparedJob`]: what a backend
//! runs is what the plan says.
//!
//! Every key comes from [`crate::layout`], and every URI in the runner spec
//! is the store's URI of such a key.
//!
//! ```
//! use std::collections::BTreeMap;
//! use kinetic_core::settings::EngineSettings;
//! use kinetic_core::spec::{Entrypoint, JobSpec};
//! use kinetic_core::plan::{self, ContextFacts, JobFacts, ProjectFacts, UploadSource, UploadTarget};
//! use kinetic_core::protocol::{RunnerEntrypoint, RunnerPlan};
//! use kinetic_core::record::UtcTimestamp;
//! use serde_json::json;
//!
//! let uri_of = |p: &kinetic_core::ports::ObjectPath| format!("gs://b/{p}");
//! let spec = JobSpec::new(Entrypoint::parse("work:square")?).arg(json!(7));
//! let settings = EngineSettings::for_cluster("p", "us-central1-a", "c", "default");
//! let job_id = "job-0a1b2c3d".parse()?;
//! let context = ContextFacts::new([7; 32], 1234, 3, UploadSource::File("/tmp/context.zip".into()));
//! let shared = plan::shared(&spec, &UploadTarget::Job(&job_id), &BTreeMap::new(), context, None, &uri_of)?;
//! assert_eq!(shared.context.key.as_str(), format!("contexts/{}.zip", "07".repeat(32)));
//! assert!(shared.context.if_absent);
//!
//! let project = ProjectFacts {
//!     plan: RunnerPlan { package_root: "/src".into(), entry_rel: "".into(), client_cwd_rel: Some("".into()), sys_path_rel: vec!["".into()] },
//!     entrypoint: RunnerEntrypoint::Function { module: Some("work".into()), path: None, function: "square".into() },
//! };
//! let (accelerator_text, accelerator) = plan::accelerator(&spec, &settings)?;
//! let facts = JobFacts::new(job_id, "gke", &accelerator_text, &accelerator, UtcTimestamp::from_unix_seconds(0));
//! let job = plan::job(&spec, &settings, &project, &shared, &facts, &uri_of)?;
//! assert_eq!(job.runner_spec.result_uri, "gs://b/job-0a1b2c3d/result.json");
//! assert_eq!(job.record.bucket_name, "p-kn-c-jobs");
//! assert_eq!(job.spec_uri, "gs://b/job-0a1b2c3d/spec.json");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value};
use sha2::Digest as _;

use crate::accelerators::{AcceleratorError, AcceleratorSpec};
use crate::cache::DataMarker;
use crate::env::CapturedEnv;
use crate::hashing::{ContentHash, HashKind, HashedFile};
use crate::ids::{GroupId, JobId, display_name, k8s_name_for_backend};
use crate::image::{DOCKERFILE_TEMPLATE, python_base_image};
use crate::layout;
use crate::ports::{FuseMount, ImageMode, ImageRequest, ObjectPath, PreparedJob, StoreError};
use crate::protocol::{
    Artifact, ClusterInfo, DataRef, PROTOCOL_VERSION, RUNNER_SOURCE, RunnerEntrypoint, RunnerPlan,
    RunnerSpec, RunnerVolume,
};
use crate::record::{JobRecord, UtcTimestamp};
use crate::requirements::{RequirementsError, RequirementsMode, ResolvedRequirements};
use crate::settings::EngineSettings;
use crate::spec::{Data, DataSource, JobSpec};

/// Why a submission cannot be planned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The dependency file cannot be used for the image.
    #[error(transparent)]
    Requirements(#[from] RequirementsError),
    /// A local data path of the spec has no hash among the facts.
    #[error("no content hash was computed for the data path {}", path.display())]
    MissingData {
        /// The path.
        path: PathBuf,
    },
    /// A key could not be built.
    #[error(transparent)]
    Key(#[from] StoreError),
    /// `spec.json` could not be encoded.
    #[error("cannot encode spec.json: {message}")]
    Encode {
        /// What failed.
        message: String,
    },
}

/// The store's URI of a key ([`crate::ports::ObjectStore::uri`]).
pub type UriOf<'a> = &'a dyn Fn(&ObjectPath) -> String;

/// The accelerator a job runs on: its spelling (the spec's, else the
/// settings' default) and what it means.
///
/// # Errors
/// [`AcceleratorError`] for a spelling that is not known.
pub fn accelerator(
    spec: &JobSpec,
    settings: &EngineSettings,
) -> Result<(String, AcceleratorSpec), AcceleratorError> {
    let text = spec
        .accelerator
        .clone()
        .unwrap_or_else(|| settings.default_accelerator.clone());
    let parsed = AcceleratorSpec::parse(&text)?;
    Ok((text, parsed))
}

/// Every data entry of the spec — volumes, then positional and keyword
/// arguments, depth first — once each, in that order.
pub fn data_entries(spec: &JobSpec) -> Vec<&Data> {
    let mut all: Vec<&Data> = spec.volumes.iter().map(|(_, d)| d).collect();
    for a in &spec.args {
        a.collect_data(&mut all);
    }
    for (_, a) in &spec.kwargs {
        a.collect_data(&mut all);
    }
    let mut seen = std::collections::BTreeSet::new();
    all.retain(|d| seen.insert(d.key()));
    all
}

pub use crate::spec::FUSE_ARG_MOUNT_PREFIX;

/// The FUSE data of the arguments (positional, then keyword, depth
/// first), once each, with the mount path each gets:
/// `/_kinetic/fuse-data/{n}`, `n` from 0 in that order.
pub fn fuse_arg_mounts(spec: &JobSpec) -> Vec<(&Data, String)> {
    let mut in_args = Vec::new();
    for a in spec.args.iter().chain(spec.kwargs.iter().map(|(_, a)| a)) {
        a.collect_data(&mut in_args);
    }
    let mut seen = std::collections::BTreeSet::new();
    in_args
        .into_iter()
        .filter(|d| d.is_fuse() && seen.insert(d.key()))
        .enumerate()
        .map(|(n, d)| (d, format!("{FUSE_ARG_MOUNT_PREFIX}{n}")))
        .collect()
}

/// The local data paths of the spec, once each: what the engine hashes.
pub fn local_data(spec: &JobSpec) -> Vec<PathBuf> {
    data_entries(spec)
        .into_iter()
        .filter_map(|d| d.local_path().map(Path::to_path_buf))
        .collect()
}

/// The paths packing leaves out of the project: every local data path of
/// the spec (data travels through the cache, not the context).
pub fn context_excludes(spec: &JobSpec) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = spec
        .volumes
        .iter()
        .filter_map(|(_, d)| d.local_path().map(Path::to_path_buf))
        .collect();
    let mut in_args = Vec::new();
    for a in spec.args.iter().chain(spec.kwargs.iter().map(|(_, a)| a)) {
        a.collect_data(&mut in_args);
    }
    out.extend(
        in_args
            .iter()
            .filter_map(|d| d.local_path().map(Path::to_path_buf)),
    );
    out
}

/// Which requirements an image mode needs: installed at start for a
/// prebuilt image, baked in otherwise.
pub fn requirements_mode(mode: &ImageMode) -> RequirementsMode {
    match mode {
        ImageMode::Prebuilt { .. } => RequirementsMode::Prebuilt,
        _ => RequirementsMode::Bundled,
    }
}

/// The image a job runs in.
// Exhaustive on purpose: the engine matches every variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageChoice {
    /// The backend needs no image.
    None,
    /// This image, as given (a custom image): nothing to resolve.
    Fixed(String),
    /// Ask the image builder.
    Resolve(ImageRequest),
}

/// Step 1: the image and what a prebuilt image installs at start.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImagePlan {
    /// The image.
    pub image: ImageChoice,
    /// The filtered requirements a prebuilt image installs when the job
    /// starts (uploaded by [`shared`]).
    pub install_requirements: Option<String>,
    /// What the user should know (ignored or dropped requirements).
    pub warnings: Vec<String>,
}

impl ImagePlan {
    /// The plan of a backend that needs no image.
    pub fn none() -> Self {
        Self {
            image: ImageChoice::None,
            install_requirements: None,
            warnings: Vec::new(),
        }
    }
}

/// Step 1: the image a job asks for, given its image mode, the Python
/// version of the base image, the accelerator, and the dependency file
/// found from the project's entry directory (read in
/// [`requirements_mode`]).
///
/// Bundled images bake the filtered requirements in, prebuilt images
/// install them at start, custom images ignore them (with a warning, and
/// an unusable dependency file is then no error).
///
/// # Errors
/// [`PlanError::Requirements`] when the dependency file cannot be used.
pub fn image(
    mode: &ImageMode,
    python_version: &str,
    accelerator: &AcceleratorSpec,
    requirements: Result<ResolvedRequirements, RequirementsError>,
) -> Result<ImagePlan, PlanError> {
    if let ImageMode::Custom { uri } = mode {
        let mut warnings = Vec::new();
        // Not installed, so not checked: only say that they are ignored.
        if let Some(file) = requirements.ok().and_then(|d| d.requirements.and(d.file)) {
            warnings.push(format!(
                "the requirements in {} are ignored: the custom image {uri} must already hold them",
                file.path.display()
            ));
        }
        return Ok(ImagePlan {
            image: ImageChoice::Fixed(uri.clone()),
            install_requirements: None,
            warnings,
        });
    }
    let deps = requirements?;
    let warnings = deps.warnings.iter().map(ToString::to_string).collect();
    let prebuilt = matches!(mode, ImageMode::Prebuilt { .. });
    let (baked, install) = if prebuilt {
        (None, deps.requirements)
    } else {
        (deps.requirements, None)
    };
    let request = ImageRequest::new(
        mode.clone(),
        python_base_image(python_version),
        accelerator.category().as_str().to_owned(),
        baked,
        RUNNER_SOURCE.to_owned(),
        DOCKERFILE_TEMPLATE.to_owned(),
    );
    Ok(ImagePlan {
        image: ImageChoice::Resolve(request),
        install_requirements: install,
        warnings,
    })
}

/// Where the content of an upload comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
// Exhaustive on purpose: the engine matches every variant, so a new
// one is a compile error there rather than a case it silently skips.
pub enum UploadSource {
    /// A local file, streamed.
    File(PathBuf),
    /// Bytes in memory.
    Bytes(Bytes),
}

/// One object to write.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ObjectUpload {
    /// Where.
    pub key: ObjectPath,
    /// What.
    pub source: UploadSource,
    /// The content type to record, if any.
    pub content_type: Option<&'static str>,
    /// Content-addressed: skip the upload when the key exists, and write it
    /// only if absent (a concurrent writer wrote the same bytes).
    pub if_absent: bool,
}

/// A local data path to put in the content-addressed cache: used as it is
/// when its marker lists what the entry holds; otherwise its files go under
/// `entry` (those missing or different), then the marker is written
/// ([`crate::cache::DataMarker`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DataUpload {
    /// The local file or directory.
    pub local: PathBuf,
    /// Its content hash.
    pub hash: ContentHash,
    /// A single file or a directory.
    pub kind: HashKind,
    /// The files it holds, in the hash's order.
    pub listing: Arc<Vec<HashedFile>>,
    /// The entry's folder ([`layout::data_entry`]).
    pub entry: ObjectPath,
    /// The entry's marker ([`layout::data_marker`]).
    pub marker: ObjectPath,
}

impl DataUpload {
    /// The marker this entry gets once its files are uploaded (without the
    /// store's version tags, which the upload adds).
    pub fn marker_document(&self) -> DataMarker {
        DataMarker::from_listing(self.hash, self.kind, &self.listing)
    }
}

/// What IO found about a local data path.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DataFacts {
    /// Its content hash.
    pub hash: ContentHash,
    /// True for a directory.
    pub is_dir: bool,
    /// The files hashed, in the hash's order (what the cache entry holds).
    pub listing: Arc<Vec<HashedFile>>,
}

impl DataFacts {
    /// The facts of one data path, without its listing.
    pub fn new(hash: ContentHash, is_dir: bool) -> Self {
        Self {
            hash,
            is_dir,
            listing: Arc::default(),
        }
    }

    /// With the listing of what was hashed.
    pub fn with_listing(mut self, listing: Vec<HashedFile>) -> Self {
        self.listing = Arc::new(listing);
        self
    }
}

/// What IO found about the packed project.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ContextFacts {
    /// SHA-256 of the archive.
    pub sha256: [u8; 32],
    /// Its size in bytes.
    pub bytes: u64,
    /// Its entries.
    pub entries: usize,
    /// Where it is.
    pub source: UploadSource,
}

impl ContextFacts {
    /// The facts of an archive.
    pub fn new(sha256: [u8; 32], bytes: u64, entries: usize, source: UploadSource) -> Self {
        Self {
            sha256,
            bytes,
            entries,
            source,
        }
    }
}

/// What IO found about the project: how the runner finds the entrypoint
/// in the packed context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectFacts {
    /// The packaging plan, as `spec.json` carries it.
    pub plan: RunnerPlan,
    /// The entrypoint relative to the workspace.
    pub entrypoint: RunnerEntrypoint,
}

/// Whose folder the shared artifacts go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UploadTarget<'a> {
    /// A single job: `contexts/{sha256}.zip` (shared by every job that
    /// ships the same archive), `{job_id}/requirements.txt`.
    Job(&'a JobId),
    /// A batch: `_groups/{group_id}/context-{sha}.zip` and
    /// `…/requirements-{sha}.txt`, shared by the children and named by their
    /// content, so a resume with the same project writes the same objects.
    Group(&'a GroupId),
}

/// Step 2: what a submission uploads once, and how its arguments refer to
/// the data.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedPlan {
    /// The local data paths into the cache, in the spec's order.
    pub data: Vec<DataUpload>,
    /// The packed project.
    pub context: ObjectUpload,
    /// The requirements a prebuilt image installs at start.
    pub requirements: Option<ObjectUpload>,
    /// The context as the runner downloads it.
    pub context_artifact: Artifact,
    /// The requirements as the runner downloads them.
    pub requirements_artifact: Option<Artifact>,
    /// Entries in the archive and its size (for progress reports).
    pub context_entries: usize,
    /// Size of the archive.
    pub context_bytes: u64,
    /// How each data entry appears in `spec.json`.
    refs: BTreeMap<(DataSource, bool), DataRef>,
    /// The mounts of the FUSE data in arguments, in order.
    fuse_arg_mounts: Vec<FuseMount>,
}

impl SharedPlan {
    /// Every key this plan writes.
    pub fn keys(&self) -> Vec<&ObjectPath> {
        let mut keys: Vec<&ObjectPath> = self
            .data
            .iter()
            .flat_map(|d| [&d.entry, &d.marker])
            .collect();
        keys.push(&self.context.key);
        keys.extend(self.requirements.iter().map(|r| &r.key));
        keys
    }

    /// The reference `spec.json` carries for a data entry of the spec.
    pub fn data_ref(&self, data: &Data) -> Option<&DataRef> {
        self.refs.get(&data.key())
    }

    /// The read-only mounts of a job with `spec`'s volumes: FUSE volumes
    /// at their paths first, then the FUSE data of the arguments at
    /// `/_kinetic/fuse-data/{n}`.
    pub fn fuse_mounts(&self, spec: &JobSpec) -> Vec<FuseMount> {
        let volumes = spec.volumes.iter().filter(|(_, d)| d.is_fuse());
        volumes
            .filter_map(|(mount, d)| {
                self.data_ref(d).map(|r| FuseMount {
                    uri: r.uri.clone(),
                    mount_path: mount.clone(),
                    is_dir: r.is_dir,
                })
            })
            .chain(self.fuse_arg_mounts.iter().cloned())
            .collect()
    }
}

/// Step 2: the shared uploads of a submission whose local data was hashed
/// (`data`, by path) and whose project was packed (`context`);
/// `install_requirements` comes from [`image`].
///
/// # Errors
/// [`PlanError::MissingData`] when a local data path has no facts.
pub fn shared(
    spec: &JobSpec,
    target: &UploadTarget<'_>,
    data: &BTreeMap<PathBuf, DataFacts>,
    context: ContextFacts,
    install_requirements: Option<&str>,
    uri_of: UriOf<'_>,
) -> Result<SharedPlan, PlanError> {
    let mut uploads = Vec::new();
    let mut refs = BTreeMap::new();
    for entry in data_entries(spec) {
        let data_ref = match entry.source() {
            DataSource::Remote(uri) => match crate::spec::GcsUri::parse(uri) {
                Ok(gcs) => DataRef::new(gcs.trimmed(), gcs.is_dir),
                Err(_) => DataRef::new(uri.trim_end_matches('/'), uri.ends_with('/')),
            },
            DataSource::HuggingFace {
                uri,
                trust_remote_code,
            } => DataRef::new(uri.clone(), true).with_trust_remote_code(*trust_remote_code),
            DataSource::Local(path) => {
                let facts = data
                    .get(path)
                    .ok_or_else(|| PlanError::MissingData { path: path.clone() })?;
                let upload = DataUpload {
                    local: path.clone(),
                    hash: facts.hash,
                    kind: if facts.is_dir {
                        HashKind::Dir
                    } else {
                        HashKind::File
                    },
                    listing: facts.listing.clone(),
                    entry: layout::data_entry(&facts.hash),
                    marker: layout::data_marker(&facts.hash),
                };
                let data_ref = if entry.is_fuse() {
                    // Mounted, not fetched: the ref names what the mount
                    // shows (a single file by its name in the entry).
                    fuse_upload_ref(&upload, facts, uri_of)
                } else {
                    DataRef::new(uri_of(&upload.entry), facts.is_dir)
                        .with_marker(uri_of(&upload.marker))
                };
                uploads.push(upload);
                data_ref
            }
        };
        let mut data_ref = data_ref;
        data_ref.fuse = entry.is_fuse();
        refs.insert(entry.key(), data_ref);
    }
    let mut arg_mounts = Vec::new();
    for (entry, mount) in fuse_arg_mounts(spec) {
        if let Some(r) = refs.get_mut(&entry.key()) {
            r.mount_path = Some(mount.clone());
            arg_mounts.push(FuseMount {
                uri: r.uri.clone(),
                mount_path: mount,
                is_dir: r.is_dir,
            });
        }
    }
    let context_key = match target {
        UploadTarget::Job(_) => layout::shared_context(&context.sha256),
        UploadTarget::Group(group) => layout::group_context(group, &context.sha256),
    };
    let context_artifact = Artifact {
        uri: uri_of(&context_key),
        sha256: hex::encode(context.sha256),
    };
    let requirements = install_requirements.map(|text| {
        let sha: [u8; 32] = sha2::Sha256::digest(text.as_bytes()).into();
        let key = match target {
            UploadTarget::Job(job) => layout::requirements(job),
            UploadTarget::Group(group) => layout::group_requirements(group, &sha),
        };
        (
            ObjectUpload {
                key,
                source: UploadSource::Bytes(Bytes::from(text.to_owned())),
                content_type: Some("text/plain"),
                if_absent: false,
            },
            hex::encode(sha),
        )
    });
    let requirements_artifact = requirements.as_ref().map(|(upload, sha)| Artifact {
        uri: uri_of(&upload.key),
        sha256: sha.clone(),
    });
    Ok(SharedPlan {
        data: uploads,
        context: ObjectUpload {
            key: context_key,
            source: context.source,
            content_type: None,
            if_absent: matches!(target, UploadTarget::Job(_)),
        },
        requirements: requirements.map(|(upload, _)| upload),
        context_artifact,
        requirements_artifact,
        context_entries: context.entries,
        context_bytes: context.bytes,
        refs,
        fuse_arg_mounts: arg_mounts,
    })
}

/// The reference of an uploaded local path mounted through FUSE: the
/// cache entry for a directory, the file inside it for a single file.
fn fuse_upload_ref(upload: &DataUpload, facts: &DataFacts, uri_of: UriOf<'_>) -> DataRef {
    let entry = uri_of(&upload.entry);
    if facts.is_dir {
        return DataRef::new(entry, true);
    }
    let name = facts
        .listing
        .first()
        .map(|f| f.name.clone())
        .or_else(|| {
            upload
                .local
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    DataRef::new(format!("{}/{name}", entry.trim_end_matches('/')), false)
}

/// A batch child's place in its batch.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupPlace {
    /// The batch.
    pub group_id: GroupId,
    /// Its kind (`map`).
    pub kind: String,
    /// The input's index.
    pub index: u64,
    /// How many runs the input's earlier attempts made (0 for its first):
    /// the job's runs are numbered on from there ([`RunnerSpec::attempt_offset`]).
    pub earlier_runs: u32,
    /// The batch's worker pool, when it runs on workers
    /// ([`PreparedJob::worker_pool`]).
    pub pool: Option<crate::ports::WorkerPool>,
}

impl GroupPlace {
    /// Input `index` of batch `group_id` of kind `kind`, its first attempt.
    pub fn new(group_id: GroupId, kind: &str, index: u64) -> Self {
        Self {
            group_id,
            kind: kind.to_owned(),
            index,
            earlier_runs: 0,
            pool: None,
        }
    }

    /// The same place, on the batch's worker pool (`None`: a process of
    /// its own).
    #[must_use]
    pub fn on_pool(mut self, pool: Option<crate::ports::WorkerPool>) -> Self {
        self.pool = pool;
        self
    }

    /// The same place for an attempt after `runs` earlier runs.
    #[must_use]
    pub fn after_runs(mut self, runs: u32) -> Self {
        self.earlier_runs = runs;
        self
    }
}

/// What IO found about one job: its id, where it runs, what it runs in, the
/// captured variables, a batch child's own arguments, and the time.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JobFacts<'a> {
    /// The job's id.
    pub job_id: JobId,
    /// The chosen backend's name.
    pub backend: &'a str,
    /// The accelerator as spelled.
    pub accelerator_text: &'a str,
    /// The accelerator.
    pub accelerator: &'a AcceleratorSpec,
    /// The captured environment variables: `spec.json` names them (and
    /// which are secrets), never their values; the backend delivers the
    /// values ([`PreparedJob::env`]).
    pub env: CapturedEnv,
    /// The image (`""` when the backend needs none).
    pub image_uri: String,
    /// Positional arguments after the spec's own (a batch input's).
    pub extra_args: Vec<Value>,
    /// Keyword arguments after (and over) the spec's own.
    pub extra_kwargs: Vec<(String, Value)>,
    /// The batch it belongs to.
    pub group: Option<GroupPlace>,
    /// The submission time.
    pub now: UtcTimestamp,
}

impl<'a> JobFacts<'a> {
    /// A job with no image, no captured variables and no batch.
    pub fn new(
        job_id: JobId,
        backend: &'a str,
        accelerator_text: &'a str,
        accelerator: &'a AcceleratorSpec,
        now: UtcTimestamp,
    ) -> Self {
        Self {
            job_id,
            backend,
            accelerator_text,
            accelerator,
            env: CapturedEnv::default(),
            image_uri: String::new(),
            extra_args: Vec::new(),
            extra_kwargs: Vec::new(),
            group: None,
            now,
        }
    }

    /// The same job with these captured variables.
    #[must_use]
    pub fn with_env(mut self, env: CapturedEnv) -> Self {
        self.env = env;
        self
    }
}

/// Step 3: one job's `spec.json` and `handle.json`, and the job the backend
/// is handed once they are written.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JobPlan {
    /// The runner's spec.
    pub runner_spec: RunnerSpec,
    /// `spec.json`, encoded.
    pub spec: ObjectUpload,
    /// Its URI: the runner's only argument.
    pub spec_uri: String,
    /// The durable record.
    pub record: JobRecord,
    /// `handle.json`, encoded.
    pub record_upload: ObjectUpload,
    /// What the backend mounts read-only for the job (FUSE data).
    pub fuse_mounts: Vec<FuseMount>,
    /// What [`crate::ports::Backend::submit`] is handed: the record, the
    /// spec's URI, the captured variables, the deadlines, the mounts and
    /// the failure budgets.
    pub prepared: PreparedJob,
}

impl JobPlan {
    /// Every key this plan writes.
    pub fn keys(&self) -> [&ObjectPath; 2] {
        [&self.spec.key, &self.record_upload.key]
    }
}

/// Where a job on `backend` runs, as `KINETIC_CLUSTER_INFO` tells it: the
/// local backend's jobs run on this host (cluster and cloud `local`, no
/// region or zone); every other backend's on the configured GKE cluster,
/// in its zone and that zone's region. The host fields are left empty.
pub fn cluster_facts(backend: &str, settings: &EngineSettings) -> ClusterInfo {
    let empty = ClusterInfo {
        accelerator: String::new(),
        num_nodes: 0,
        num_gpus_per_node: 0,
        num_accelerators_per_node: 0,
        node_ips: Vec::new(),
        cluster_name: crate::protocol::CLOUD_LOCAL.to_owned(),
        cloud: crate::protocol::CLOUD_LOCAL.to_owned(),
        region: None,
        zone: None,
    };
    if backend == crate::protocol::CLOUD_LOCAL {
        return empty;
    }
    let zone = Some(settings.zone.clone()).filter(|z| !z.is_empty());
    ClusterInfo {
        cluster_name: settings.cluster.clone(),
        cloud: crate::protocol::CLOUD_GCP.to_owned(),
        region: zone.as_deref().and_then(ClusterInfo::region_of),
        zone,
        ..empty
    }
}

/// Step 3: plan one job of a submission whose shared part is `shared`.
///
/// The output directory is the spec's, else the settings', else
/// `outputs/{job_id}` in the store (a local path for a `file://` store).
///
/// # Errors
/// [`PlanError::Encode`] when `spec.json` cannot be encoded.
pub fn job(
    spec: &JobSpec,
    settings: &EngineSettings,
    project: &ProjectFacts,
    shared: &SharedPlan,
    facts: &JobFacts<'_>,
    uri_of: UriOf<'_>,
) -> Result<JobPlan, PlanError> {
    let job_id = &facts.job_id;
    let prefix = layout::job_prefix(job_id);
    let output_dir = spec
        .output_dir
        .clone()
        .or_else(|| settings.output_dir.clone())
        .unwrap_or_else(|| {
            let uri = uri_of(&layout::outputs(job_id));
            uri.strip_prefix("file://")
                .map(str::to_owned)
                .unwrap_or(uri)
        });
    let ref_for = |d: &Data| -> Value { shared.data_ref(d).map_or(Value::Null, DataRef::to_value) };
    let mut args: Vec<Value> = spec.args.iter().map(|a| a.to_json(&ref_for)).collect();
    args.extend(facts.extra_args.iter().cloned());
    let mut kwargs: Map<String, Value> = spec
        .kwargs
        .iter()
        .map(|(k, a)| (k.clone(), a.to_json(&ref_for)))
        .collect();
    for (k, v) in &facts.extra_kwargs {
        kwargs.insert(k.clone(), v.clone());
    }
    let hosts = facts.accelerator.num_hosts();
    let runner_spec = RunnerSpec {
        protocol: PROTOCOL_VERSION,
        job_id: job_id.to_string(),
        entrypoint: project.entrypoint.clone(),
        args,
        kwargs,
        volumes: spec
            .volumes
            .iter()
            .filter_map(|(mount, d)| {
                shared.data_ref(d).map(|r| {
                    let mut data = r.clone();
                    data.mount_path = Some(mount.clone());
                    RunnerVolume {
                        mount_path: mount.clone(),
                        data,
                    }
                })
            })
            .collect(),
        env_names: facts.env.names().map(|n| n.as_str().to_owned()).collect(),
        secret_names: facts
            .env
            .secret_names()
            .map(|n| n.as_str().to_owned())
            .collect(),
        output_dir,
        context: shared.context_artifact.clone(),
        requirements: shared.requirements_artifact.clone(),
        plan: project.plan.clone(),
        result_uri: uri_of(&layout::result(job_id)),
        worker_result_uris: (1..hosts)
            .map(|host| uri_of(&layout::host_result(job_id, host)))
            .collect(),
        log_uris: (0..hosts)
            .map(|host| uri_of(&layout::log_chunks(job_id, host)))
            .collect(),
        // A slice is run once (a failed host fails it): its hosts need no
        // count, and would otherwise each claim a number of their own.
        starts_uri: (hosts == 1).then(|| uri_of(&layout::starts(job_id))),
        attempt_offset: facts.group.as_ref().map_or(0, |g| g.earlier_runs),
        cluster: ClusterInfo {
            accelerator: facts.accelerator_text.to_owned(),
            num_nodes: hosts,
            num_gpus_per_node: facts.accelerator.count().unwrap_or(0),
            num_accelerators_per_node: facts.accelerator.per_host(),
            node_ips: Vec::new(),
            ..cluster_facts(facts.backend, settings)
        },
        extract_limits: settings.extract_limits,
        python_values: spec.python_values.clone(),
        debug: spec.debug.then(|| crate::protocol::RunnerDebug {
            ready_uri: uri_of(&layout::debug_ready(job_id)),
            port: crate::debug::DEFAULT_PORT,
            wait_timeout_seconds: crate::debug::DEFAULT_WAIT_TIMEOUT.as_secs(),
            leader_ready_uri: Some(uri_of(&layout::leader_ready(job_id))),
        }),
    };
    let spec_json = serde_json::to_string_pretty(&runner_spec).map_err(|e| PlanError::Encode {
        message: e.to_string(),
    })?;
    let func_name = spec.entrypoint.func_name();
    let bucket_name = if settings.bucket_name.is_empty() {
        uri_of(&prefix)
            .trim_end_matches(prefix.as_str())
            .trim_end_matches('/')
            .to_owned()
    } else {
        settings.bucket_name.clone()
    };
    let group = facts.group.as_ref();
    let record = JobRecord {
        accelerator: facts.accelerator_text.to_owned(),
        backend: facts.backend.to_owned(),
        bucket_name,
        cluster_name: settings.cluster.clone(),
        created_at: facts.now,
        debug: spec.debug,
        display_name: display_name(&func_name, job_id),
        entrypoint: Some(spec.entrypoint.to_string()),
        func_name,
        group_id: group.map(|g| g.group_id.clone()),
        group_index: group.map(|g| g.index),
        group_kind: group.map(|g| g.kind.clone()),
        image_uri: facts.image_uri.clone(),
        job_id: job_id.clone(),
        k8s_name: k8s_name_for_backend(facts.backend, job_id),
        namespace: settings.namespace.clone(),
        project: settings.project.clone(),
        store_url: None,
        zone: settings.zone.clone(),
    };
    let spec_key = layout::spec(job_id);
    let spec_uri = uri_of(&spec_key);
    let fuse_mounts = shared.fuse_mounts(spec);
    let prepared = PreparedJob::new(
        record.clone(),
        facts.accelerator.clone(),
        spec_uri.clone(),
        facts.env.clone(),
        spec.deadlines,
    )
    .with_fuse_mounts(fuse_mounts.clone())
    .with_budgets(spec.budgets)
    .with_worker_pool(group.and_then(|g| g.pool));
    Ok(JobPlan {
        spec_uri,
        spec: ObjectUpload {
            key: spec_key,
            source: UploadSource::Bytes(Bytes::from(spec_json)),
            content_type: Some("application/json"),
            if_absent: false,
        },
        record_upload: ObjectUpload {
            key: layout::record(job_id),
            source: UploadSource::Bytes(Bytes::from(record.to_json())),
            content_type: Some(crate::record::RECORD_CONTENT_TYPE),
            if_absent: false,
        },
        record,
        runner_spec,
        fuse_mounts,
        prepared,
    })
}

/// The facts gathered for one job submitted on its own.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SubmissionFacts<'a> {
    /// The local data paths hashed, by path.
    pub data: BTreeMap<PathBuf, DataFacts>,
    /// The packed project.
    pub context: ContextFacts,
    /// The filtered requirements a prebuilt image installs at start
    /// ([`ImagePlan::install_requirements`]).
    pub install_requirements: Option<String>,
    /// Where the entrypoint is in the packed project.
    pub project: ProjectFacts,
    /// The job: its id, backend, accelerator, image, variables and time.
    pub job: JobFacts<'a>,
}

impl<'a> SubmissionFacts<'a> {
    /// The facts of a job whose project was packed (`context`) and found
    /// (`project`), with no local data and no requirements to install.
    pub fn new(context: ContextFacts, project: ProjectFacts, job: JobFacts<'a>) -> Self {
        Self {
            data: BTreeMap::new(),
            context,
            install_requirements: None,
            project,
            job,
        }
    }
}

/// Everything one submission does, in order: the shared uploads, then
/// the job's `spec.json` and `handle.json`, then
/// [`JobPlan::prepared`] handed to the backend.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SubmissionPlan {
    /// The uploads shared with every job of the same project (step 2).
    pub shared: SharedPlan,
    /// The job's own objects and what the backend is handed (step 3).
    pub job: JobPlan,
}

/// The plan of one job submitted on its own: [`shared`] under the job's
/// folder, then [`job`], from everything gathered.
///
/// # Errors
/// [`PlanError::MissingData`] when a local data path has no facts,
/// [`PlanError::Encode`] when `spec.json` cannot be encoded.
pub fn submission(
    spec: &JobSpec,
    settings: &EngineSettings,
    facts: SubmissionFacts<'_>,
    uri_of: UriOf<'_>,
) -> Result<SubmissionPlan, PlanError> {
    let shared = shared(
        spec,
        &UploadTarget::Job(&facts.job.job_id),
        &facts.data,
        facts.context,
        facts.install_requirements.as_deref(),
        uri_of,
    )?;
    let job = job(spec, settings, &facts.project, &shared, &facts.job, uri_of)?;
    Ok(SubmissionPlan { shared, job })
}
