//! The flags several commands share, in one room so that commands never
//! import each other: the job flags of `kinetic run` and `kinetic map`
//! ([`JobFlags`], with [`PathBase`] for the paths they name), the image
//! target of `kinetic image` and `kinetic build-image` ([`TargetArgs`]),
//! the requirements mode of `kinetic deps` and `kinetic image`
//! ([`ModeArg`]), and the cluster and pool flags of `kinetic up`, `down`,
//! `status`, `doctor` and `pool` ([`InfraTarget`], [`PoolArgs`]).

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::path::Path;
use std::time::Duration;

use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_core::budget::{BudgetRequest, parse_budget};
use kinetic_core::env::EnvEntry;
use kinetic_core::image::python_base_image;
use kinetic_core::json::{self, JsonError};
use kinetic_core::ports::{Deadlines, ImageMode};
use kinetic_core::requirements::RequirementsMode;
use kinetic_core::settings::{self, Settings, SettingsArgs};
use kinetic_engine::{Arg, Data, Engine, EngineSettings, JobSpec};
use kinetic_infra_gcp::GcpInfra;
use kinetic_infra_gcp::model::{PoolRequest, PoolSpec};
use serde_json::Value;

use crate::engine::{self, Invocation};
use crate::error::{CliError, core_infra_error};
use crate::render;

/// The parser of a `--threads N` flag: `0` (all cores) up to
/// [`MAX_THREADS`](kinetic_core::hashing::MAX_THREADS); clap names the flag
/// and the range when a value is outside it.
pub(crate) fn threads_arg() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(0..=kinetic_core::hashing::MAX_THREADS as i64)
}

/// A `--{flag} SECONDS` value: a positive number of seconds, at most
/// [`MAX_SECONDS`](kinetic_core::settings::MAX_SECONDS).
pub(crate) fn seconds(flag: &str, value: f64) -> Result<Duration, CliError> {
    settings::positive_seconds(value).ok_or_else(|| {
        CliError::usage(format!(
            "--{flag} {value} is not accepted: expected {}",
            settings::SECONDS_EXPECTED
        ))
    })
}

/// A JSON value given by the user (`what` names it: `--arg "7"`, `--inputs
/// FILE line 3`), read losslessly as the runner protocol carries values
/// (`kinetic_core::json`); `hint` says what is accepted when it is not JSON.
pub(crate) fn parse_json(what: &str, text: &str, hint: &str) -> Result<Value, CliError> {
    json::parse(text.as_bytes()).map_err(|e| match e {
        JsonError::Invalid { .. } => CliError::usage(format!("{what} is not JSON ({e}); {hint}")),
        _ => CliError::usage(format!("{what}: {e}")),
    })
}

/// Where `--arg data:PATH` and `--volume` paths are taken from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PathBase<'a> {
    /// The working directory.
    pub(crate) cwd: &'a Path,
    /// The home directory, for `~`.
    pub(crate) home: Option<&'a Path>,
}

impl PathBase<'_> {
    /// `PATH`, or `data:PATH` / `data+OPTION:PATH` (options: `trust`, an
    /// `hf://` dataset's `hf_trust_remote_code`; `fuse`, mounted
    /// read-only through GCS FUSE instead of downloaded).
    pub(crate) fn data(&self, text: &str) -> Result<Data, String> {
        let (options, path) = match text.strip_prefix("data") {
            Some(rest) if rest.starts_with(':') || rest.starts_with('+') => {
                let (options, path) = rest.split_once(':').ok_or_else(|| {
                    "expected data:PATH, data+fuse:PATH or data+trust:hf://…".to_owned()
                })?;
                (options, path)
            }
            _ => ("", text),
        };
        let mut trust = false;
        let mut fuse = false;
        for option in options.split('+').filter(|o| !o.is_empty()) {
            match option {
                "trust" => trust = true,
                "fuse" => fuse = true,
                other => {
                    return Err(format!(
                        "unknown data option {other:?} (accepted: fuse, to mount the data read-only through GCS FUSE; trust, for hf:// datasets)"
                    ));
                }
            }
        }
        let data = Data::with_home(path, self.cwd, self.home)
            .and_then(|data| data.trust_remote_code(trust))
            .and_then(|data| data.fuse(fuse))
            .map_err(|e| e.to_string())?;
        if let Some(hint) = data.warning() {
            crate::render::warn(&hint);
        }
        Ok(data)
    }
}

/// A failure budget flag (`--retries`, `--restarts`), if given.
pub(crate) fn budget_flag(name: &'static str, text: Option<&str>) -> Result<Option<u32>, CliError> {
    text.map(|t| parse_budget(name, t))
        .transpose()
        .map_err(|e| CliError::usage(format!("--{name}: {e}")))
}

/// Parse one `--arg`.
fn parse_arg(text: &str, base: PathBase<'_>) -> Result<Arg, CliError> {
    if text.starts_with("data:") || text.starts_with("data+") {
        let data = base
            .data(text)
            .map_err(|e| CliError::usage(format!("--arg {text}: {e}")))?;
        return Ok(Arg::Data(data));
    }
    let value = parse_json(
        &format!("--arg {text:?}"),
        text,
        "pass numbers as 7, strings as '\"text\"', lists as '[1,2]', or data:PATH",
    )?;
    Ok(Arg::Json(value))
}

/// The job flags `kinetic run` and `kinetic map` share: where the job
/// goes (accelerator, spot, backend, project, zone, cluster, namespace),
/// what it gets (environment, volumes, keyword arguments), its image,
/// outputs and deadline.
#[derive(Debug, clap::Args)]
pub(crate) struct JobFlags {
    /// Accelerator (`cpu`, `l4`, `a100x4`, `v5litepod-4`, …; `:spot` asks for Spot VMs).
    #[arg(long)]
    accelerator: Option<String>,
    /// Run on Spot (preemptible) VMs, as a `:spot` suffix does (Kinetic's `spot=True`).
    #[arg(long)]
    spot: bool,
    /// Backend (`local`, `gke`, `pathways`); default: `KINETIC_BACKEND`,
    /// else `pathways` for a multi-host TPU slice, the configured cluster
    /// (`gke`) for another GPU or TPU, else `local`.
    #[arg(long)]
    backend: Option<String>,
    /// GCP project (beats `KINETIC_PROJECT` and the profile).
    #[arg(long)]
    project: Option<String>,
    /// GCP zone (beats `KINETIC_ZONE` and the profile).
    #[arg(long)]
    zone: Option<String>,
    /// GKE cluster (beats `KINETIC_CLUSTER` and the profile).
    #[arg(long)]
    cluster: Option<String>,
    /// Kubernetes namespace (beats `KINETIC_NAMESPACE` and the profile).
    #[arg(long)]
    namespace: Option<String>,
    /// Send an environment variable: `NAME` (must be set here), `NAME=VALUE`, or `PREFIX*`.
    #[arg(long = "env", value_name = "NAME[=VALUE]")]
    env: Vec<String>,
    /// Send a secret variable that must be set here: `NAME`.
    #[arg(long = "secret", value_name = "NAME")]
    secrets: Vec<String>,
    /// Mount data at an absolute path in the job (every job of a batch):
    /// `MOUNT=PATH` (a local path, `gs://` or `hf://` URI; `MOUNT=data+trust:hf://…`
    /// lets the dataset run its own loading code; `MOUNT=data+fuse:PATH`
    /// mounts it read-only through GCS FUSE).
    #[arg(long = "volume", value_name = "MOUNT=PATH")]
    volumes: Vec<String>,
    /// Keyword arguments as one JSON object (every job of a batch gets them).
    #[arg(long, value_name = "JSON")]
    kwargs: Option<String>,
    /// Where the job writes outputs (`KINETIC_OUTPUT_DIR`).
    #[arg(long)]
    output_dir: Option<String>,
    /// The job's image, as Kinetic's `container_image`: `bundled` (built with
    /// the requirements baked in, the default), `prebuilt` (a published base
    /// image; requirements installed at start), or an image URI used as is.
    #[arg(long, value_name = "bundled|prebuilt|URI")]
    container_image: Option<String>,
    /// Repository of the prebuilt base images (default `KINETIC_BASE_IMAGE_REPO`, else `kinetic`).
    #[arg(long, value_name = "REPO")]
    base_image_repo: Option<String>,
    /// Fail the job if it runs longer than this many seconds.
    #[arg(long, value_name = "SECONDS")]
    run_deadline: Option<f64>,
    /// Infrastructure restart budget: run the job again after its node is
    /// preempted or its pod evicted, up to N times (default 3 for Spot
    /// jobs, else 0; nothing preempts the local backend).
    #[arg(long, value_name = "N")]
    restarts: Option<String>,
}

impl JobFlags {
    /// `spec` run from `cwd` with the positional `--arg`s and these flags;
    /// bad flags are usage errors naming them.
    pub(crate) fn apply(
        &self,
        spec: JobSpec,
        base: PathBase<'_>,
        args: &[String],
    ) -> Result<JobSpec, CliError> {
        let mut spec = spec.working_dir(base.cwd.to_path_buf());
        for a in args {
            spec = spec.arg(parse_arg(a, base)?);
        }
        if let Some(a) = self.accelerator_text() {
            spec = spec.accelerator(&a);
        }
        for e in &self.env {
            spec = spec.env(
                EnvEntry::parse_cli(e).map_err(|err| CliError::usage(format!("--env: {err}")))?,
            );
        }
        for s in &self.secrets {
            spec = spec.env(
                EnvEntry::parse_secret(s)
                    .map_err(|err| CliError::usage(format!("--secret: {err}")))?,
            );
        }
        for v in &self.volumes {
            let (mount, path) = v.split_once('=').ok_or_else(|| {
                CliError::usage(format!(
                    "--volume {v:?} is not accepted: expected MOUNT=PATH, e.g. /data=./data"
                ))
            })?;
            let data = base
                .data(path)
                .map_err(|e| CliError::usage(format!("--volume {v}: {e}")))?;
            spec = spec.volume(mount, data);
        }
        if let Some(kwargs) = &self.kwargs {
            let value = parse_json(
                "--kwargs",
                kwargs,
                "expected an object like '{\"lr\": 0.1}'",
            )?;
            let Value::Object(map) = value else {
                return Err(CliError::usage(
                    "--kwargs must be a JSON object like '{\"lr\": 0.1}'",
                ));
            };
            for (k, v) in map {
                spec = spec.kwarg(&k, v);
            }
        }
        if let Some(dir) = &self.output_dir {
            spec = spec.output_dir(dir);
        }
        spec = spec.budgets(self.budgets()?);
        if let Some(s) = self.run_deadline {
            spec = spec.deadlines(Deadlines {
                run: Some(seconds("run-deadline", s)?),
                pending: None,
            });
        }
        Ok(spec)
    }

    /// The failure budget `--restarts` asks for (`run --retries` adds
    /// the application one).
    fn budgets(&self) -> Result<BudgetRequest, CliError> {
        Ok(BudgetRequest {
            retries: None,
            restarts: budget_flag("restarts", self.restarts.as_deref())?,
        })
    }

    /// The accelerator as asked: `--accelerator`, with `:spot` for `--spot`.
    fn accelerator_text(&self) -> Option<String> {
        match (&self.accelerator, self.spot) {
            (Some(a), true) if !a.trim().to_ascii_lowercase().ends_with(":spot") => {
                Some(format!("{}:spot", a.trim()))
            }
            (Some(a), _) => Some(a.clone()),
            (None, true) => Some("cpu:spot".to_owned()),
            (None, false) => None,
        }
    }

    /// The settings arguments these flags give, on top of the invocation's.
    fn settings_args(&self, inv: &Invocation) -> SettingsArgs {
        let mut a = inv.args();
        let target = [
            (
                &self.project,
                SettingsArgs::project as fn(SettingsArgs, String) -> SettingsArgs,
            ),
            (&self.zone, SettingsArgs::zone),
            (&self.cluster, SettingsArgs::cluster),
            (&self.namespace, SettingsArgs::namespace),
            (&self.backend, SettingsArgs::backend),
            (&self.base_image_repo, SettingsArgs::base_image_repo),
        ];
        for (value, set) in target {
            if let Some(v) = value {
                a = set(a, v.clone());
            }
        }
        a
    }

    /// Settings and engine for `spec`: the flags' settings, the image
    /// mode, and the backend chosen for the job's accelerator (shown with
    /// why when `verbose`), whose store the engine uses.
    pub(crate) fn engine(
        &self,
        spec: &mut JobSpec,
        inv: &Invocation,
        verbose: bool,
    ) -> Result<Engine, CliError> {
        let image = ImageArg::parse(self.container_image.as_deref())?;
        let settings = inv.settings(&self.settings_args(inv))?;
        spec.image = image.mode(&settings);
        let text = self.accelerator_text().unwrap_or_else(|| "cpu".to_owned());
        let accelerator = AcceleratorSpec::parse(&text)
            .map_err(|e| CliError::usage(format!("--accelerator: {e}")))?;
        let backend = match settings.choose_backend(&accelerator) {
            Some(choice) => {
                if verbose {
                    render::info(&format!("backend: {} ({})", choice.name, choice.why));
                }
                spec.backend = Some(choice.name.clone());
                choice.name
            }
            None => settings.backend.value.clone(),
        };
        engine::build_for(&settings, inv, &backend)
    }
}

/// The image asked for with `--container-image`, before the prebuilt
/// repository is known.
enum ImageArg {
    Bundled,
    Prebuilt,
    Custom(String),
}

impl ImageArg {
    fn parse(arg: Option<&str>) -> Result<Self, CliError> {
        Ok(match arg {
            None | Some("bundled") => Self::Bundled,
            Some("prebuilt") => Self::Prebuilt,
            Some(uri) if uri.trim().is_empty() || uri.chars().any(char::is_whitespace) => {
                return Err(CliError::usage(format!(
                    "--container-image {uri:?} is not accepted: expected bundled, prebuilt, or an image URI"
                )));
            }
            Some(uri) => Self::Custom(uri.to_owned()),
        })
    }

    /// The image mode, with the prebuilt repository the settings name.
    fn mode(self, settings: &Settings) -> ImageMode {
        match self {
            Self::Bundled => ImageMode::Bundled,
            Self::Prebuilt => ImageMode::Prebuilt {
                repo: settings.base_image_repo.value.clone(),
            },
            Self::Custom(uri) => ImageMode::Custom { uri },
        }
    }
}

/// `--project`, `--zone`, `--cluster`: the target (argument > `KINETIC_*` > profile).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct TargetArgs {
    /// Cloud project (also `KINETIC_PROJECT`).
    #[arg(long)]
    project: Option<String>,
    /// Zone of the cluster (also `KINETIC_ZONE`).
    #[arg(long)]
    zone: Option<String>,
    /// Cluster name (also `KINETIC_CLUSTER`).
    #[arg(long)]
    cluster: Option<String>,
}

impl TargetArgs {
    /// These flags (and `--profile`) as settings arguments.
    pub(crate) fn settings_args(&self, inv: &Invocation) -> SettingsArgs {
        let mut args = inv.args();
        if let Some(p) = &self.project {
            args = args.project(p);
        }
        if let Some(z) = &self.zone {
            args = args.zone(z);
        }
        if let Some(c) = &self.cluster {
            args = args.cluster(c);
        }
        args
    }
}

/// The Python version `X.Y` of `--python` or the engine's default.
pub(crate) fn python_version(python: Option<&str>) -> Result<String, CliError> {
    let version = python
        .map(str::to_owned)
        .unwrap_or_else(|| EngineSettings::default().python_version);
    let parsed = version
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)));
    match parsed {
        Some((major, minor)) => Ok(format!("{major}.{minor}")),
        None => Err(CliError::usage(format!(
            "--python {version:?} is not accepted: expected MAJOR.MINOR such as 3.11"
        ))),
    }
}

/// `python:X.Y-slim` for `--python X.Y` or the engine's default.
pub(crate) fn base_image(python: Option<&str>) -> Result<String, CliError> {
    Ok(python_base_image(&python_version(python)?))
}

/// How dependencies reach the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ModeArg {
    /// Baked into an image built for them.
    Bundled,
    /// Installed at pod start into a prebuilt base image.
    Prebuilt,
}

impl From<ModeArg> for RequirementsMode {
    fn from(mode: ModeArg) -> Self {
        match mode {
            ModeArg::Bundled => RequirementsMode::Bundled,
            ModeArg::Prebuilt => RequirementsMode::Prebuilt,
        }
    }
}

/// `--project`, `--zone`, `--cluster`, `--namespace`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct InfraTarget {
    #[command(flatten)]
    target: TargetArgs,
    /// Namespace jobs run in: the `kinetic` service account is made there
    /// (also `KINETIC_NAMESPACE`).
    #[arg(long)]
    namespace: Option<String>,
}

impl InfraTarget {
    pub(crate) fn settings_args(&self, inv: &Invocation) -> SettingsArgs {
        let args = self.target.settings_args(inv);
        match &self.namespace {
            Some(ns) => args.namespace(ns),
            None => args,
        }
    }
}

/// What a pool is asked to be (`up --accelerator`, `pool add`).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct PoolArgs {
    /// Nodes kept even when idle (default 0: the pool scales to zero).
    /// For a multi-host TPU slice, a multiple of its hosts.
    #[arg(long, value_name = "N", default_value_t = 0)]
    min_nodes: u32,
    /// Most nodes (default: min + 10 for GPUs, min + one slice for TPUs).
    #[arg(long, value_name = "M")]
    max_nodes: Option<u32>,
    /// Spot VMs (cheaper, may be preempted); only jobs that ask for Spot
    /// run there (same as a `:spot` suffix).
    #[arg(long)]
    spot: bool,
    /// A Compute Engine reservation the nodes consume (also
    /// `KINETIC_RESERVATION`); not with --spot.
    #[arg(long, value_name = "NAME")]
    reservation: Option<String>,
}

impl PoolArgs {
    /// `args` with `--reservation`, when given.
    pub(crate) fn settings_args(&self, args: SettingsArgs) -> SettingsArgs {
        match &self.reservation {
            Some(r) => args.reservation(r),
            None => args,
        }
    }

    pub(crate) fn changed(&self) -> bool {
        self.min_nodes != 0 || self.max_nodes.is_some() || self.spot || self.reservation.is_some()
    }

    /// The pool for `accelerator` (`None` for `cpu`), named with a fresh
    /// suffix.
    pub(crate) fn pool(
        &self,
        accelerator: &str,
        settings: &Settings,
        infra: &GcpInfra,
    ) -> Result<Option<PoolSpec>, CliError> {
        let accel = AcceleratorSpec::parse_with_spot(accelerator, self.spot)
            .map_err(|e| CliError::usage(format!("--accelerator {accelerator}: {e}")))?;
        // On-demand CPU runs on the default pool; `cpu --spot` gets a pool.
        if matches!(accel, AcceleratorSpec::Cpu { spot: false }) {
            return Ok(None);
        }
        let mut request = PoolRequest::new(accel).min_nodes(self.min_nodes);
        if let Some(max) = self.max_nodes {
            request = request.max_nodes(max);
        }
        if let Some(r) = &settings.reservation {
            request = request.reservation(&r.value);
        }
        let suffix = format!(
            "{:04x}",
            RandomState::new().hash_one(std::time::SystemTime::now()) & 0xffff
        );
        PoolSpec::new(&infra.desired().target, &request, &suffix)
            .map(Some)
            .map_err(core_infra_error)
    }
}
