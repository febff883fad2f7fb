//! `kinetic run`: submit a job, stream its logs, print its value.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_core::budget::{BudgetRequest, parse_budget};
use kinetic_core::env::EnvEntry;
use kinetic_core::ports::{Deadlines, ImageMode};
use kinetic_core::settings::{Settings, SettingsArgs};
use kinetic_engine::{
    Arg, Data, Engine, EngineError, Entrypoint, JobSpec, ProgressEvent, ResultOptions,
    SubmitOptions,
};
use serde_json::Value;

use super::seconds;
use crate::engine::{self, Invocation};
use crate::error::{CliError, engine_error, engine_error_quiet};
use crate::interrupt::{self, PickUp, Stopped};
use crate::render::progress::Progress;
use crate::render::{self, Output};

/// Arguments of `kinetic run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// `module.path:function` or `path/to/file.py:function`. For a command,
    /// leave it out and give the command after `--`.
    entry: Option<String>,
    /// The command to run instead of a function (after `--`).
    #[arg(last = true)]
    command: Vec<String>,
    /// A positional argument as JSON (`7`, `'"text"'`, `'[1,2]'`), or
    /// `data:PATH` for a local file or directory, a `gs://` URI or an
    /// `hf://` Hugging Face dataset shipped as Data (`data+trust:hf://…`
    /// lets the dataset run its own loading code; `data+fuse:PATH` mounts
    /// a local path or `gs://` URI read-only through GCS FUSE instead of
    /// downloading it).
    #[arg(long = "arg", value_name = "JSON")]
    args: Vec<String>,
    #[command(flatten)]
    job: JobFlags,
    /// Application retry budget: run the job again after it fails (an
    /// exception, a non-zero exit) up to N times (default 0). (`kinetic
    /// map --retries` resubmits a batch's failed inputs instead.)
    #[arg(long, value_name = "N")]
    retries: Option<String>,
    /// Print the job id and return once it is submitted.
    #[arg(long)]
    detach: bool,
    /// Print the plan (where it runs, the image, the uploads, the objects
    /// it writes) and change nothing: nothing is uploaded, built or submitted.
    #[arg(long, conflicts_with = "detach")]
    dry_run: bool,
    /// Stop waiting after this many seconds (the job keeps running).
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,
    /// Keep the backend resources of a job that succeeds (a failed job keeps them anyway, for its logs).
    #[arg(long)]
    no_cleanup: bool,
    /// Do not stream the job's output.
    #[arg(long)]
    no_logs: bool,
    /// Run the function under debugpy (Kinetic's `debug=True`): it waits
    /// for a debugger before the call (attach with `kinetic jobs debug ID`);
    /// the job is kept when it succeeds. debugpy must be in the image or
    /// the requirements.
    #[arg(long)]
    debug: bool,
    /// Also show the runner's own lines (`[kinetic] …`) while streaming,
    /// and which backend the job goes to and why.
    #[arg(short, long)]
    verbose: bool,
}

/// Lines the runner writes about itself (every line of them carries it).
const RUNNER_LINE_PREFIX: &str = "[kinetic] ";

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
        Data::with_home(path, self.cwd, self.home)
            .and_then(|data| data.trust_remote_code(trust))
            .and_then(|data| data.fuse(fuse))
            .map_err(|e| e.to_string())
    }
}

/// A failure budget flag (`--retries`, `--restarts`), if given.
fn budget_flag(name: &'static str, text: Option<&str>) -> Result<Option<u32>, CliError> {
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
    let value = super::parse_json(
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
            let value = super::parse_json(
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

fn build_spec(args: &RunArgs, inv: &Invocation) -> Result<JobSpec, CliError> {
    let cwd = inv.cwd()?;
    let home = inv.home();
    let base = PathBase {
        cwd,
        home: home.as_deref(),
    };
    let entrypoint = match (&args.entry, args.command.is_empty()) {
        (Some(entry), true) => {
            Entrypoint::parse(entry).map_err(|e| CliError::usage(e.to_string()))?
        }
        (None, false) => {
            Entrypoint::command(args.command.clone()).map_err(|e| CliError::usage(e.to_string()))?
        }
        (Some(_), false) => {
            return Err(CliError::usage(
                "give either ENTRY (module:function or file.py:function) or a command after `--`, not both",
            ));
        }
        (None, true) => {
            return Err(CliError::usage(
                "nothing to run: give ENTRY (module:function or file.py:function) or a command after `--`",
            ));
        }
    };
    let mut spec = args.job.apply(JobSpec::new(entrypoint), base, &args.args)?;
    spec.budgets.retries = budget_flag("retries", args.retries.as_deref())?;
    Ok(spec.debug(args.debug))
}

pub(crate) fn run(args: &RunArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    let mut spec = build_spec(args, inv)?;
    let timeout = args.timeout.map(|t| seconds("timeout", t)).transpose()?;
    // A wrong function name or a syntax error is found here, before
    // anything is hashed, uploaded or submitted.
    super::entry_check::check(&spec.entrypoint, inv)?;
    let engine = args.job.engine(&mut spec, inv, args.verbose)?;
    let progress = Progress::new();
    let rt = engine::runtime()?;
    if args.dry_run {
        let p = progress.clone();
        let options = SubmitOptions::with_progress(Arc::new(move |e: &ProgressEvent| p.event(e)));
        let preview = rt.block_on(interrupt::or_interrupt(async {
            engine.preview(&spec, options).await.map_err(engine_error)
        }));
        progress.finish();
        return render::preview::plan(&preview?, engine.settings(), None, out);
    }
    interrupt::stage(|| Stopped::nothing_started("no job was submitted"));
    rt.block_on(async {
        let p = progress.clone();
        let submit_options = SubmitOptions::with_progress(Arc::new(move |event: &ProgressEvent| {
            interrupt::on_submit_step(event, "no job was submitted");
            if let ProgressEvent::Submitting { job_id, backend } = event {
                // From here the backend may hold the job.
                let (job_id, backend) = (job_id.clone(), backend.clone());
                interrupt::stage(move || Stopped::new(
                    format!("job {job_id} may have reached the {backend} backend"),
                    "its submission did not finish",
                    PickUp::With(format!("kinetic jobs status {job_id}")),
                ).also(format!("if it says NOT_FOUND, run `{}` again", interrupt::this_command())));
            }
            p.event(event);
        }));
        let submitted = interrupt::or_interrupt(async {
            engine.submit_with(spec, submit_options).await.map_err(engine_error)
        })
        .await;
        let handle = match submitted {
            Ok(handle) => handle,
            Err(e) => {
                progress.finish();
                return Err(e);
            }
        };
        let job_id = handle.id().to_string();
        let backend = handle.record().backend.clone();
        {
            let (job_id, backend) = (job_id.clone(), backend.clone());
            interrupt::stage(move || Stopped::job(&job_id, &backend));
        }
        if args.detach {
            progress.finish();
            return out.either(
                &serde_json::json!({"job_id": job_id, "backend": backend}),
                &format!("{job_id}\n"),
            );
        }
        // The id goes to stderr whatever it is (a terminal, a file, a
        // pipe): the job outlives this process, and this is its name.
        progress.note(&format!(
            "submitted {job_id} ({} backend)",
            handle.record().backend
        ));
        if args.debug {
            progress.note(&format!(
                "{job_id} waits for a debugger: attach with `kinetic jobs debug {job_id}`"
            ));
        }
        progress.waiting(&job_id);
        // Without --no-cleanup the default holds: a debug job is kept.
        let mut options = ResultOptions::default();
        if args.no_cleanup {
            options = options.cleanup(false);
        }
        if let Some(t) = timeout {
            options = options.timeout(t);
        }
        let p = progress.clone();
        let id = job_id.clone();
        options = options.on_status_change(Arc::new(move |state| p.status(&id, state)));
        let streamed = RecentLines::default();
        if !args.no_logs {
            let p = progress.clone();
            let verbose = args.verbose;
            let recent = streamed.clone();
            options = options.stream_logs(Arc::new(move |line: &str| {
                if verbose || !line.starts_with(RUNNER_LINE_PREFIX) {
                    p.log_line(line);
                    recent.push(line);
                }
            }));
        }
        let result = interrupt::or_interrupt(async { Ok(handle.result(options).await) }).await;
        progress.finish();
        match result? {
            Ok(value) if out.is_json() => out.json(&serde_json::json!({"job_id": job_id, "value": value})),
            Ok(value) => render::value(&value, out),
            Err(e) => {
                let err = match e {
                    EngineError::Timeout { job_id, after } => CliError::failed(format!(
                        "timed out after {} waiting for job {job_id}; it keeps running: `kinetic jobs result {job_id}` collects it later",
                        humantime_secs(after)
                    )),
                    e => {
                        let remote = e.remote().cloned();
                        // The user's traceback is shown once: the streamed
                        // output carried it already, or it is printed now
                        // (into the JSON object with --json).
                        let shown = remote
                            .as_ref()
                            .and_then(|r| r.traceback.as_deref())
                            .is_some_and(|tb| out.is_json() || streamed.contains_all(tb));
                        let err = if shown { engine_error_quiet(e) } else { engine_error(e) };
                        if out.is_json() {
                            out.json(&serde_json::json!({
                                "job_id": job_id,
                                "error": {
                                    "message": err.to_string(),
                                    "exit_code": err.exit_code(),
                                    "remote": remote,
                                },
                            }))?;
                        }
                        err
                    }
                };
                Err(err)
            }
        }
    })
}

/// The last lines of the job's output the user saw, to tell whether a
/// traceback was among them.
#[derive(Clone, Default)]
struct RecentLines(Arc<std::sync::Mutex<std::collections::VecDeque<String>>>);

impl RecentLines {
    /// How many lines are kept (a traceback is printed last).
    const KEEP: usize = 400;

    fn push(&self, line: &str) {
        let mut lines = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if lines.len() == Self::KEEP {
            lines.pop_front();
        }
        lines.push_back(line.to_owned());
    }

    /// True when every line of `text` was among the recent lines.
    fn contains_all(&self, text: &str) -> bool {
        let lines = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let seen: std::collections::HashSet<&str> = lines.iter().map(|l| l.trim_end()).collect();
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .all(|l| seen.contains(l.trim_end()))
    }
}

fn humantime_secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}
