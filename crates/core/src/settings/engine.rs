//! The part of the settings the engine reads ([`EngineSettings`]): where
//! jobs go and how the user's project is found. A value, built by
//! [`Settings::engine`](super::Settings::engine); the engine reads no
//! environment variable itself.

use std::path::PathBuf;

/// What the engine needs to know about where jobs go and how the user's
/// project is found: the part of [`Settings`](super::Settings) the engine
/// reads ([`Settings::engine`](super::Settings::engine) builds it). The engine reads
/// no environment variable itself.
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
    /// Jobs bucket name recorded in each job record (empty: taken from the
    /// store's URI).
    pub bucket_name: String,
    /// Accelerator for jobs that name none.
    pub default_accelerator: String,
    /// Python version of the client (`3.11`), for the base image.
    pub python_version: String,
    /// The directory a job's relative (or missing) working directory is
    /// taken from; `None` = the process's current directory, read once when
    /// the engine is built.
    pub cwd: Option<PathBuf>,
    /// The user's home directory: where package root detection stops, and
    /// where the dependency file search stops.
    pub home: Option<PathBuf>,
    /// The package root, instead of detecting it (`KINETIC_PACKAGE_ROOT`).
    pub package_root: Option<String>,
    /// Leave `.venv`, `node_modules` and the like out of the packed project.
    pub default_excludes: bool,
    /// Packed projects larger than this many bytes get a warning (0 = never).
    pub context_size_warn_bytes: u64,
    /// What a packed project may expand to in the job: checked before
    /// uploading and, by the runner, before extracting.
    pub extract_limits: crate::protocol::ExtractLimits,
    /// Where packed projects are kept between submissions, by the
    /// fingerprint of the package root's file names, sizes and times, so an
    /// unchanged project is not packed again; `None` = pack every time.
    pub context_cache: Option<PathBuf>,
    /// Where jobs write outputs when their spec names no place
    /// (`KINETIC_OUTPUT_DIR`); `None` = `outputs/{job_id}` in the store.
    pub output_dir: Option<String>,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self {
            project: String::new(),
            zone: crate::config::DEFAULT_ZONE.into(),
            cluster: crate::config::DEFAULT_CLUSTER.into(),
            namespace: crate::config::DEFAULT_NAMESPACE.into(),
            bucket_name: String::new(),
            default_accelerator: "cpu".into(),
            python_version: "3.11".into(),
            cwd: None,
            home: None,
            package_root: None,
            default_excludes: true,
            context_size_warn_bytes: crate::packaging::DEFAULT_SIZE_WARN_BYTES,
            extract_limits: crate::protocol::ExtractLimits::default(),
            context_cache: None,
            output_dir: None,
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
            bucket_name: crate::config::jobs_bucket(project, cluster),
            ..Self::default()
        }
    }

    /// The same settings with `home` as the user's home directory.
    #[must_use]
    pub fn with_home(mut self, home: impl Into<PathBuf>) -> Self {
        self.home = Some(home.into());
        self
    }

    /// The same settings with `cwd` as the working directory.
    #[must_use]
    pub fn with_cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }
}
