//! What a user asks to run: [`JobSpec`], its [`Entrypoint`], its arguments
//! ([`Arg`]) and the [`Data`] they may carry.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::env::EnvEntry;
use crate::ports::{Deadlines, ImageMode};

/// The prefix of the mount paths given to FUSE data in arguments
/// (`/_kinetic/fuse-data/{n}`, chosen by the plan); volumes may not use it.
pub const FUSE_ARG_MOUNT_PREFIX: &str = "/_kinetic/fuse-data/";

/// Errors in a job's specification, found before anything is uploaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The entrypoint text is not `module:function` or `path/file.py:function`.
    #[error(
        "invalid entrypoint '{input}': {reason} (expected 'module.path:function' or 'path/to/file.py:function')"
    )]
    Entrypoint {
        /// The text given.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A command entrypoint with no program.
    #[error("a command entrypoint needs at least a program name")]
    EmptyCommand,
    /// A data path that does not exist or cannot be read.
    #[error("data path '{input}' does not exist (resolved to {resolved})")]
    DataNotFound {
        /// The path as given.
        input: String,
        /// The absolute path it resolved to.
        resolved: String,
    },
    /// A data path or URI that is not accepted.
    #[error("invalid data path '{input}': {reason}")]
    DataInvalid {
        /// The text given.
        input: String,
        /// Why, and what is accepted.
        reason: String,
    },
    /// A volume mount path that is not accepted.
    #[error("invalid volume mount path '{mount_path}': {reason}")]
    Volume {
        /// The mount path given.
        mount_path: String,
        /// Why, and what is accepted.
        reason: String,
    },
    /// A failure budget out of range.
    #[error(transparent)]
    Budget(#[from] crate::budget::BudgetError),
    /// A job id that is not one.
    #[error("invalid job id '{input}': {reason}")]
    JobId {
        /// The text given.
        input: String,
        /// Why, and what is accepted.
        reason: String,
    },
    /// A keyword argument name that Python cannot take.
    #[error("invalid keyword argument name '{name}': expected a Python identifier")]
    KwargName {
        /// The name given.
        name: String,
    },
}

/// What the job runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entrypoint {
    /// A function of an importable module (`pkg.module:function`), imported
    /// relative to the working directory as Python would.
    Module {
        /// Dotted module name.
        module: String,
        /// Function name.
        function: String,
    },
    /// A function of a Python file (`path/to/file.py:function`).
    File {
        /// The file, as given (relative to the working directory or absolute).
        path: PathBuf,
        /// Function name.
        function: String,
    },
    /// A command line run in the job's workspace; exit 0 is success.
    Command {
        /// Program and arguments.
        argv: Vec<String>,
    },
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
}

impl Entrypoint {
    /// Parse `module.path:function` or `path/to/file.py:function`.
    ///
    /// ```
    /// use kinetic_core::spec::Entrypoint;
    /// assert!(matches!(Entrypoint::parse("work:square"), Ok(Entrypoint::Module { .. })));
    /// assert!(matches!(Entrypoint::parse("src/work.py:square"), Ok(Entrypoint::File { .. })));
    /// assert!(Entrypoint::parse("work").is_err());
    /// ```
    pub fn parse(input: &str) -> Result<Self, SpecError> {
        let bad = |reason: &str| SpecError::Entrypoint {
            input: input.to_owned(),
            reason: reason.to_owned(),
        };
        let (target, function) = input
            .rsplit_once(':')
            .ok_or_else(|| bad("no ':function' part"))?;
        // Dotted (`Trainer.run`): the runner reaches the nested attribute.
        if !function.split('.').all(is_identifier) {
            return Err(bad(
                "the function name is not a Python identifier, or identifiers joined by '.' (Trainer.run)",
            ));
        }
        if target.is_empty() {
            return Err(bad("nothing before ':'"));
        }
        if target.ends_with(".py")
            || target.contains('/')
            || target.contains(std::path::MAIN_SEPARATOR)
        {
            if !target.ends_with(".py") {
                return Err(bad("a file path must end in '.py'"));
            }
            return Ok(Self::File {
                path: PathBuf::from(target),
                function: function.to_owned(),
            });
        }
        if !target.split('.').all(is_identifier) {
            return Err(bad("the module is not a dotted Python name"));
        }
        Ok(Self::Module {
            module: target.to_owned(),
            function: function.to_owned(),
        })
    }

    /// A command entrypoint.
    pub fn command<S: Into<String>>(argv: impl IntoIterator<Item = S>) -> Result<Self, SpecError> {
        let argv: Vec<String> = argv.into_iter().map(Into::into).collect();
        if argv.first().is_none_or(String::is_empty) {
            return Err(SpecError::EmptyCommand);
        }
        Ok(Self::Command { argv })
    }

    /// The name used for display and in the job record: the function name,
    /// or the program's file name for a command.
    pub fn func_name(&self) -> String {
        match self {
            Self::Module { function, .. } | Self::File { function, .. } => function.clone(),
            Self::Command { argv } => Path::new(&argv[0])
                .file_name()
                .map_or_else(|| argv[0].clone(), |n| n.to_string_lossy().into_owned()),
        }
    }
}

impl fmt::Display for Entrypoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Module { module, function } => write!(f, "{module}:{function}"),
            Self::File { path, function } => write!(f, "{}:{function}", path.display()),
            Self::Command { argv } => write!(f, "{}", argv.join(" ")),
        }
    }
}

/// Data a job reads: a local file or directory (content-hashed and uploaded
/// once to the data cache) or a `gs://` URI passed through as is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Data {
    source: DataSource,
    /// Mounted read-only through GCS FUSE (read on demand) instead of
    /// downloaded before the call ([`Data::fuse`]).
    fuse: bool,
}

/// Where a [`Data`] comes from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DataSource {
    /// A local path: absolute, with symlinks kept (Kinetic's `abspath`).
    Local(PathBuf),
    /// A `gs://` URI; a trailing `/` marks a directory.
    Remote(String),
    /// A Hugging Face dataset, `hf://REPO_ID[?split=…&config_name=…&revision=…]`,
    /// loaded on the host by the runner (with the `datasets` package the
    /// job's image or requirements provide) and given to the function as
    /// the directory it was saved to.
    HuggingFace {
        /// The `hf://` URI.
        uri: String,
        /// Whether the dataset's repository may run its own loading code.
        trust_remote_code: bool,
    },
}

/// A `gs://` URI, split as Kinetic reads it: without a trailing `/` it
/// names a single object, with one a directory (every object under the
/// prefix). A URI of a bucket alone (`gs://bucket`, `gs://bucket/`) is the
/// whole bucket, a directory: it names no object.
///
/// ```
/// use kinetic_core::spec::GcsUri;
/// let file = GcsUri::parse("gs://b/data/weights.h5")?;
/// assert_eq!((file.bucket.as_str(), file.name.as_str(), file.is_dir), ("b", "data/weights.h5", false));
/// assert!(file.slash_hint().is_none());
/// let dir = GcsUri::parse("gs://b/data/imagenet/")?;
/// assert_eq!((dir.name.as_str(), dir.is_dir), ("data/imagenet", true));
/// // No slash and no `.` in the last segment: maybe a directory meant.
/// assert!(GcsUri::parse("gs://b/data/imagenet")?.slash_hint().unwrap().contains("gs://b/data/imagenet/"));
/// # Ok::<(), kinetic_core::spec::SpecError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcsUri {
    /// The bucket.
    pub bucket: String,
    /// The object's name, or the directory's prefix without its trailing
    /// `/` (empty for the whole bucket).
    pub name: String,
    /// Whether the URI names a directory (a trailing `/`, or a bucket alone).
    pub is_dir: bool,
}

impl GcsUri {
    /// Splits `uri`, which must be `gs://BUCKET[/NAME]`.
    ///
    /// # Errors
    /// [`SpecError::DataInvalid`] naming the URI when it does not start
    /// with `gs://` or names no bucket.
    pub fn parse(uri: &str) -> Result<Self, SpecError> {
        let invalid = || SpecError::DataInvalid {
            input: uri.to_owned(),
            reason: "expected gs://bucket/path (a trailing / for a directory)".into(),
        };
        let rest = uri.strip_prefix("gs://").ok_or_else(invalid)?;
        let (bucket, name) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(invalid());
        }
        let is_dir = name.is_empty() || name.ends_with('/');
        Ok(Self {
            bucket: bucket.to_owned(),
            name: name.trim_end_matches('/').to_owned(),
            is_dir,
        })
    }

    /// The URI without a trailing `/`.
    pub fn trimmed(&self) -> String {
        if self.name.is_empty() {
            format!("gs://{}", self.bucket)
        } else {
            format!("gs://{}/{}", self.bucket, self.name)
        }
    }

    /// Kinetic's warning for a URI that names a single object although it
    /// may mean a directory: no trailing `/`, and no `.` in its last
    /// segment (no file extension). `None` otherwise.
    pub fn slash_hint(&self) -> Option<String> {
        if self.is_dir {
            return None;
        }
        let last = self.name.rsplit('/').next().unwrap_or(&self.name);
        if last.contains('.') {
            return None;
        }
        let uri = self.trimmed();
        Some(format!(
            "{uri} has no trailing slash, so it names a single object; its last segment has no '.' (no file extension): if it is a directory, write {uri}/"
        ))
    }
}

/// The query keys an `hf://` URI may carry.
const HF_QUERY_KEYS: [&str; 3] = ["split", "config_name", "revision"];

/// Checks an `hf://` URI: a repository id, and only [`HF_QUERY_KEYS`], each once with a value.
fn check_hf_uri(uri: &str) -> Result<(), SpecError> {
    let invalid = |reason: String| SpecError::DataInvalid {
        input: uri.to_owned(),
        reason,
    };
    let usage = "expected hf://REPO_ID[?split=…&config_name=…&revision=…]";
    let rest = uri.strip_prefix("hf://").unwrap_or(uri);
    if rest.contains('#') {
        return Err(invalid(format!("a fragment is not accepted; {usage}")));
    }
    let (repo, query) = rest.split_once('?').unwrap_or((rest, ""));
    if repo.trim_matches('/').is_empty() {
        return Err(invalid(format!("it names no dataset; {usage}")));
    }
    let mut seen = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if !HF_QUERY_KEYS.contains(&key) {
            return Err(invalid(format!(
                "unknown query key {key:?} (accepted: {})",
                HF_QUERY_KEYS.join(", ")
            )));
        }
        if value.is_empty() || seen.contains(&key) {
            return Err(invalid(format!("{key} must be given once, with a value")));
        }
        seen.push(key);
    }
    Ok(())
}

impl Data {
    /// Data at `path`: a `gs://` URI, or a local path (made absolute
    /// against `cwd`) that must exist. A path starting with `~` needs the
    /// home directory: use [`Data::with_home`].
    pub fn new(path: &str, cwd: &Path) -> Result<Self, SpecError> {
        Self::with_home(path, cwd, None)
    }

    /// Data at `path`: a `gs://` URI, or a local path (`~` expanded against
    /// `home`, made absolute against `cwd`) that must exist.
    pub fn with_home(path: &str, cwd: &Path, home: Option<&Path>) -> Result<Self, SpecError> {
        if path.is_empty() {
            return Err(SpecError::DataInvalid {
                input: String::new(),
                reason: "it is empty".into(),
            });
        }
        if path.starts_with("gs://") {
            GcsUri::parse(path)?;
            return Ok(Self {
                source: DataSource::Remote(path.to_owned()),
                fuse: false,
            });
        }
        if path.starts_with("hf://") {
            check_hf_uri(path)?;
            return Ok(Self {
                source: DataSource::HuggingFace {
                    uri: path.to_owned(),
                    trust_remote_code: false,
                },
                fuse: false,
            });
        }
        if path.contains("://") {
            return Err(SpecError::DataInvalid {
                input: path.to_owned(),
                reason: "only local paths, gs:// and hf:// URIs are accepted".into(),
            });
        }
        let resolved = absolute(&expand_home(path, home)?, cwd);
        if std::fs::symlink_metadata(&resolved).is_err() || !resolved.exists() {
            return Err(SpecError::DataNotFound {
                input: path.to_owned(),
                resolved: resolved.display().to_string(),
            });
        }
        Ok(Self {
            source: DataSource::Local(resolved),
            fuse: false,
        })
    }

    /// This data mounted read-only through GCS FUSE (Kinetic's
    /// `fuse=True`) instead of downloaded before the call: a local path is
    /// uploaded to the data cache and its entry mounted, a `gs://` prefix
    /// or object is mounted where it is. The function receives the mount
    /// (for a single file, the file inside it), read on demand.
    ///
    /// # Errors
    /// [`SpecError::DataInvalid`] for an `hf://` dataset, which is loaded
    /// on the host and cannot be mounted.
    pub fn fuse(mut self, fuse: bool) -> Result<Self, SpecError> {
        if fuse && let DataSource::HuggingFace { uri, .. } = &self.source {
            return Err(SpecError::DataInvalid {
                input: uri.clone(),
                reason: "fuse=True is not supported for Hugging Face datasets (hf:// URIs)".into(),
            });
        }
        self.fuse = fuse;
        Ok(self)
    }

    /// Whether this data is mounted through GCS FUSE ([`Data::fuse`]).
    pub fn is_fuse(&self) -> bool {
        self.fuse
    }

    /// What tells this data apart from other data of a spec: its source
    /// and whether it is mounted.
    pub fn key(&self) -> (DataSource, bool) {
        (self.source.clone(), self.fuse)
    }

    /// This Hugging Face dataset, allowed (or not) to run its
    /// repository's own loading code (Kinetic's `hf_trust_remote_code`).
    ///
    /// # Errors
    /// [`SpecError::DataInvalid`] when allowing it for data that is not an
    /// `hf://` dataset (there is no code to trust).
    pub fn trust_remote_code(mut self, trust: bool) -> Result<Self, SpecError> {
        match &mut self.source {
            DataSource::HuggingFace {
                trust_remote_code, ..
            } => *trust_remote_code = trust,
            _ if !trust => {}
            other => {
                return Err(SpecError::DataInvalid {
                    input: data_source_text(other),
                    reason:
                        "hf_trust_remote_code applies to Hugging Face datasets (hf:// URIs) only"
                            .into(),
                });
            }
        }
        Ok(self)
    }

    /// What the user should be told about this data when it is given:
    /// for a `gs://` URI naming a single object that may be meant as a
    /// directory, [`GcsUri::slash_hint`].
    pub fn warning(&self) -> Option<String> {
        match &self.source {
            DataSource::Remote(uri) => GcsUri::parse(uri).ok()?.slash_hint(),
            DataSource::Local(_) | DataSource::HuggingFace { .. } => None,
        }
    }

    /// Where the data comes from.
    pub fn source(&self) -> &DataSource {
        &self.source
    }

    /// The local path, for local data.
    pub fn local_path(&self) -> Option<&Path> {
        match &self.source {
            DataSource::Local(p) => Some(p),
            DataSource::Remote(_) | DataSource::HuggingFace { .. } => None,
        }
    }
}

/// The path or URI a data source was given as.
pub fn data_source_text(source: &DataSource) -> String {
    match source {
        DataSource::Local(p) => p.to_string_lossy().into_owned(),
        DataSource::Remote(uri) | DataSource::HuggingFace { uri, .. } => uri.clone(),
    }
}

/// `path` with a leading `~` (alone or before `/`) replaced by `home`.
fn expand_home(path: &str, home: Option<&Path>) -> Result<PathBuf, SpecError> {
    if path == "~" || path.starts_with("~/") {
        let home = home.ok_or_else(|| SpecError::DataInvalid {
            input: path.to_owned(),
            reason: "'~' needs the home directory, and none is known (set HOME, or give an absolute path)".into(),
        })?;
        return Ok(home.join(path.trim_start_matches('~').trim_start_matches('/')));
    }
    Ok(PathBuf::from(path))
}

/// `cwd.join(path)` with `.` and `..` removed lexically (like `os.path.abspath`).
pub fn absolute(path: &Path, cwd: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    let mut out = PathBuf::new();
    for comp in joined.components() {
        match comp {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// A job argument: JSON, data, or a list or object that may hold data at any depth.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    /// A plain JSON value.
    Json(Value),
    /// Data, replaced by a local path on the runner.
    Data(Data),
    /// A list of arguments.
    List(Vec<Arg>),
    /// An object of arguments, in order.
    Object(Vec<(String, Arg)>),
}

impl From<Value> for Arg {
    fn from(value: Value) -> Self {
        Self::Json(value)
    }
}

impl From<Data> for Arg {
    fn from(data: Data) -> Self {
        Self::Data(data)
    }
}

impl Arg {
    /// Every [`Data`] in this argument, depth first.
    pub fn collect_data<'a>(&'a self, out: &mut Vec<&'a Data>) {
        match self {
            Self::Json(_) => {}
            Self::Data(d) => out.push(d),
            Self::List(items) => items.iter().for_each(|a| a.collect_data(out)),
            Self::Object(items) => items.iter().for_each(|(_, a)| a.collect_data(out)),
        }
    }

    /// This argument as JSON, each data replaced by what `refs` gives for it.
    pub fn to_json(&self, refs: &dyn Fn(&Data) -> Value) -> Value {
        match self {
            Self::Json(v) => v.clone(),
            Self::Data(d) => refs(d),
            Self::List(items) => Value::Array(items.iter().map(|a| a.to_json(refs)).collect()),
            Self::Object(items) => Value::Object(
                items
                    .iter()
                    .map(|(k, a)| (k.clone(), a.to_json(refs)))
                    .collect(),
            ),
        }
    }
}

/// An argument is a map input like JSON: a list is an array, an object an
/// object, and data is neither (`auto` passes it as the one argument).
impl crate::batch::MapInput for Arg {
    fn items(&self) -> Option<Vec<Self>> {
        match self {
            Self::Json(v) => v
                .as_array()
                .map(|items| items.iter().cloned().map(Self::Json).collect()),
            Self::List(items) => Some(items.clone()),
            Self::Data(_) | Self::Object(_) => None,
        }
    }

    fn members(&self) -> Option<Vec<(String, Self)>> {
        match self {
            Self::Json(v) => v.as_object().map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), Self::Json(v.clone())))
                    .collect()
            }),
            Self::Object(members) => Some(members.clone()),
            Self::Data(_) | Self::List(_) => None,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::Json(v) => crate::batch::json_type(v),
            Self::Data(_) => "data",
            Self::List(_) => "an array",
            Self::Object(_) => "an object",
        }
    }
}

/// Everything needed to submit one job. Built with [`JobSpec::new`] and the
/// chained setters; unset fields take the engine's defaults.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JobSpec {
    /// What to run.
    pub entrypoint: Entrypoint,
    /// Positional arguments.
    pub args: Vec<Arg>,
    /// Keyword arguments, in order.
    pub kwargs: Vec<(String, Arg)>,
    /// Accelerator spelling (`cpu`, `l4`, `v5litepod-4`, …); `None` = the engine's default.
    pub accelerator: Option<String>,
    /// Backend name; `None` = chosen from the accelerator.
    pub backend: Option<String>,
    /// Environment to send: captures, required names, literal values.
    pub env: Vec<EnvEntry>,
    /// Data mounted at absolute paths.
    pub volumes: Vec<(String, Data)>,
    /// Where the job writes outputs (`KINETIC_OUTPUT_DIR`); default per job.
    pub output_dir: Option<String>,
    /// The client's working directory; a relative one is taken from
    /// [`EngineSettings::cwd`](crate::settings::EngineSettings::cwd) (default: the settings' working
    /// directory, else the process's).
    pub working_dir: Option<PathBuf>,
    /// How the image is chosen.
    pub image: ImageMode,
    /// Running and pending deadlines.
    pub deadlines: Deadlines,
    /// The client's Python minor version (`3.11`) when it reads and writes
    /// pickled Python values: the runner then unpickles argument leaves
    /// marked `__kinetic_pickle__` and pickles a result JSON cannot hold.
    /// `None` (the default): JSON only.
    pub python_values: Option<String>,
    /// Failure budgets asked for (application retries, infrastructure
    /// restarts); unset ones take their defaults (see [`crate::budget`]).
    pub budgets: crate::budget::BudgetRequest,
    /// Run under a debugger (Kinetic's `debug=True`): the runner starts
    /// debugpy and waits for a client before the call
    /// ([`crate::debug`]); the job is kept when its value comes back.
    pub debug: bool,
}

impl JobSpec {
    /// A spec for `entrypoint` with no arguments and every default.
    pub fn new(entrypoint: Entrypoint) -> Self {
        Self {
            entrypoint,
            args: Vec::new(),
            kwargs: Vec::new(),
            accelerator: None,
            backend: None,
            env: Vec::new(),
            volumes: Vec::new(),
            output_dir: None,
            working_dir: None,
            image: ImageMode::default(),
            deadlines: Deadlines::default(),
            python_values: None,
            budgets: crate::budget::BudgetRequest::default(),
            debug: false,
        }
    }

    /// Run under a debugger ([`JobSpec::debug`]).
    pub fn debug(mut self, debug: bool) -> Self {
        self.debug = debug;
        self
    }

    /// Add a positional argument.
    pub fn arg(mut self, arg: impl Into<Arg>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Add a keyword argument.
    pub fn kwarg(mut self, name: &str, arg: impl Into<Arg>) -> Self {
        self.kwargs.push((name.to_owned(), arg.into()));
        self
    }

    /// Set the accelerator.
    pub fn accelerator(mut self, accelerator: &str) -> Self {
        self.accelerator = Some(accelerator.to_owned());
        self
    }

    /// Name the backend.
    pub fn backend(mut self, backend: &str) -> Self {
        self.backend = Some(backend.to_owned());
        self
    }

    /// Add an environment entry.
    pub fn env(mut self, entry: EnvEntry) -> Self {
        self.env.push(entry);
        self
    }

    /// Mount `data` at the absolute path `mount_path`.
    pub fn volume(mut self, mount_path: &str, data: Data) -> Self {
        self.volumes.push((mount_path.to_owned(), data));
        self
    }

    /// Set the client's working directory.
    pub fn working_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.working_dir = Some(dir.into());
        self
    }

    /// Set the output directory.
    pub fn output_dir(mut self, dir: &str) -> Self {
        self.output_dir = Some(dir.to_owned());
        self
    }

    /// Let the job exchange pickled Python values with a client running
    /// Python `version` (`3.11`); see [`JobSpec::python_values`].
    pub fn python_values(mut self, version: &str) -> Self {
        self.python_values = Some(version.to_owned());
        self
    }

    /// Set the deadlines.
    pub fn deadlines(mut self, deadlines: Deadlines) -> Self {
        self.deadlines = deadlines;
        self
    }

    /// Set the failure budgets (see [`crate::budget`]).
    pub fn budgets(mut self, budgets: crate::budget::BudgetRequest) -> Self {
        self.budgets = budgets;
        self
    }

    /// Check what can be checked without IO: keyword names and volume paths.
    pub fn validate(&self) -> Result<(), SpecError> {
        self.budgets.validate()?;
        for (name, _) in &self.kwargs {
            if !is_identifier(name) {
                return Err(SpecError::KwargName { name: name.clone() });
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for (mount, _) in &self.volumes {
            let bad = |reason: &str| SpecError::Volume {
                mount_path: mount.clone(),
                reason: reason.to_owned(),
            };
            if !mount.starts_with('/') {
                return Err(bad("it must be an absolute path starting with '/'"));
            }
            if mount.starts_with(FUSE_ARG_MOUNT_PREFIX) {
                return Err(bad(
                    "'/_kinetic/fuse-data/' is reserved for generated mounts",
                ));
            }
            if mount.trim_end_matches('/').is_empty() {
                return Err(bad(
                    "a volume cannot be mounted at '/', the job's root; give it a directory of its own, such as '/data'",
                ));
            }
            if mount.split('/').any(|s| s == "..") {
                return Err(bad("it must not contain '..'"));
            }
            if !seen.insert(mount.trim_end_matches('/')) {
                return Err(bad("two volumes use this path"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn entrypoints_parse() {
        assert_eq!(
            Entrypoint::parse("pkg.mod:run").unwrap(),
            Entrypoint::Module {
                module: "pkg.mod".into(),
                function: "run".into()
            }
        );
        assert_eq!(
            Entrypoint::parse("./a/b.py:main").unwrap(),
            Entrypoint::File {
                path: "./a/b.py".into(),
                function: "main".into()
            }
        );
        for bad in [
            "",
            "work",
            ":f",
            "work:",
            "work:1f",
            "a-b:f",
            "dir/file:f",
            "pkg..mod:f",
        ] {
            let err = Entrypoint::parse(bad).unwrap_err().to_string();
            assert!(
                err.contains("expected 'module.path:function'"),
                "{bad}: {err}"
            );
        }
        assert_eq!(
            Entrypoint::command(["/usr/bin/python3", "-c", "1"])
                .unwrap()
                .func_name(),
            "python3"
        );
        assert_eq!(
            Entrypoint::command(Vec::<String>::new()),
            Err(SpecError::EmptyCommand)
        );
    }

    #[test]
    fn data_paths_resolve_and_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x.txt"), "x").unwrap();
        let d = Data::new("./sub/../x.txt", dir.path()).unwrap();
        assert_eq!(d.local_path().unwrap(), dir.path().join("x.txt"));
        let err = Data::new("missing", dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("missing") && err.contains("does not exist"),
            "{err}"
        );
        assert!(
            Data::new("gs://b/p/", dir.path())
                .unwrap()
                .local_path()
                .is_none()
        );
        assert!(Data::new("s3://b/p", dir.path()).is_err());
        assert!(Data::new("gs://", dir.path()).is_err());
        // `~` is the home directory given, never the process's.
        let home = Data::with_home("~/x.txt", Path::new("/elsewhere"), Some(dir.path())).unwrap();
        assert_eq!(home.local_path().unwrap(), dir.path().join("x.txt"));
        let err = Data::new("~/x.txt", dir.path()).unwrap_err().to_string();
        assert!(err.contains("'~' needs the home directory"), "{err}");
    }

    #[test]
    fn args_collect_and_replace_data_at_any_depth() {
        let dir = tempfile::tempdir().unwrap();
        let d = Data::new(dir.path().to_str().unwrap(), dir.path()).unwrap();
        let arg = Arg::Object(vec![
            ("a".into(), Arg::Json(json!(1))),
            (
                "b".into(),
                Arg::List(vec![Arg::Data(d.clone()), Arg::Json(json!("x"))]),
            ),
        ]);
        let mut found = Vec::new();
        arg.collect_data(&mut found);
        assert_eq!(found, vec![&d]);
        assert_eq!(
            arg.to_json(&|_| json!("REF")),
            json!({"a": 1, "b": ["REF", "x"]})
        );
    }

    #[test]
    fn dotted_function_names_parse_for_modules_and_files() {
        // Issue 25.9: docs/runner-protocol.md allows `Trainer.run`.
        assert_eq!(
            Entrypoint::parse("work.py:C.m").unwrap(),
            Entrypoint::File {
                path: PathBuf::from("work.py"),
                function: "C.m".into()
            }
        );
        assert_eq!(
            Entrypoint::parse("pkg.work:Outer.Inner.m").unwrap(),
            Entrypoint::Module {
                module: "pkg.work".into(),
                function: "Outer.Inner.m".into()
            }
        );
        for bad in ["work.py:C.", "work:.m", "work:C..m", "work:C.1m"] {
            assert!(Entrypoint::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn volumes_and_kwargs_are_validated() {
        let dir = tempfile::tempdir().unwrap();
        let d = Data::new(dir.path().to_str().unwrap(), dir.path()).unwrap();
        let spec =
            |mount: &str| JobSpec::new(Entrypoint::parse("m:f").unwrap()).volume(mount, d.clone());
        assert!(spec("/data").validate().is_ok());
        for bad in ["data", "/_kinetic/fuse-data/0", "/a/../b", "/", "//"] {
            assert!(
                matches!(spec(bad).validate(), Err(SpecError::Volume { .. })),
                "{bad}"
            );
        }
        // Only the prefix with its slash is reserved, as Kinetic has it.
        for fine in ["/_kinetic/fuse-data", "/_kinetic/fuse-database"] {
            assert!(spec(fine).validate().is_ok(), "{fine}");
        }
        let two = spec("/data").volume("/data/", d.clone());
        assert!(two.validate().is_err());
        let kw = JobSpec::new(Entrypoint::parse("m:f").unwrap()).kwarg("not-id", json!(1));
        assert_eq!(
            kw.validate(),
            Err(SpecError::KwargName {
                name: "not-id".into()
            })
        );
    }
}
