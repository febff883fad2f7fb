//! `kinetic run`: submit a job, stream its logs, print its value.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kinetic_core::engine::{
    Arg, Data, EngineError, Entrypoint, JobSpec, ProgressEvent, ResultOptions, SubmitOptions,
};
use kinetic_core::env::EnvEntry;
use kinetic_core::ports::{Deadlines, ImageMode};
use kinetic_core::settings::Settings;
use serde_json::Value;

use super::seconds;
use crate::engine::{self, Invocation};
use crate::error::{CliError, engine_error};
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
    /// `data:PATH` for a local file or directory (or `gs://` URI) shipped as Data.
    #[arg(long = "arg", value_name = "JSON")]
    args: Vec<String>,
    /// Keyword arguments as one JSON object.
    #[arg(long, value_name = "JSON")]
    kwargs: Option<String>,
    #[command(flatten)]
    job: JobFlags,
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
    /// Print the job id and return once it is submitted.
    #[arg(long)]
    detach: bool,
    /// Stop waiting after this many seconds (the job keeps running).
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,
    /// Fail the job if it runs longer than this many seconds.
    #[arg(long, value_name = "SECONDS")]
    run_deadline: Option<f64>,
    /// Keep the job's artifacts and backend resources after it ends.
    #[arg(long)]
    no_cleanup: bool,
    /// Do not stream the job's output.
    #[arg(long)]
    no_logs: bool,
    /// Also show the runner's own lines (`[kinetic] …`) while streaming.
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
    fn data(&self, path: &str) -> Result<Data, kinetic_core::engine::SpecError> {
        Data::with_home(path, self.cwd, self.home)
    }
}

/// Parse one `--arg`.
fn parse_arg(text: &str, base: PathBase<'_>) -> Result<Arg, CliError> {
    if let Some(path) = text.strip_prefix("data:") {
        let data = base
            .data(path)
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

/// The job flags `kinetic run` and `kinetic map` share.
#[derive(Debug, clap::Args)]
pub(crate) struct JobFlags {
    /// Accelerator (`cpu`, `l4`, `a100x4`, `v5litepod-4`, …).
    #[arg(long)]
    accelerator: Option<String>,
    /// Backend (`local`, or one a plugin registered); default from the accelerator.
    #[arg(long)]
    backend: Option<String>,
    /// Send an environment variable: `NAME` (must be set here), `NAME=VALUE`, or `PREFIX*`.
    #[arg(long = "env", value_name = "NAME[=VALUE]")]
    env: Vec<String>,
    /// Send a secret variable that must be set here: `NAME`.
    #[arg(long = "secret", value_name = "NAME")]
    secrets: Vec<String>,
    /// Mount data at an absolute path in the job (every job of a batch): `MOUNT=PATH`.
    #[arg(long = "volume", value_name = "MOUNT=PATH")]
    volumes: Vec<String>,
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
        if let Some(a) = &self.accelerator {
            spec = spec.accelerator(a);
        }
        if let Some(b) = &self.backend {
            spec = spec.backend(b);
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
        Ok(spec)
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

fn build_spec(args: &RunArgs, inv: &Invocation) -> Result<(JobSpec, ImageArg), CliError> {
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
    if let Some(kwargs) = &args.kwargs {
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
    if let Some(dir) = &args.output_dir {
        spec = spec.output_dir(dir);
    }
    let image = ImageArg::parse(args.container_image.as_deref())?;
    if let Some(s) = args.run_deadline {
        spec = spec.deadlines(Deadlines {
            run: Some(seconds("run-deadline", s)?),
            pending: None,
        });
    }
    Ok((spec, image))
}

pub(crate) fn run(args: &RunArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    let (mut spec, image) = build_spec(args, inv)?;
    let timeout = args.timeout.map(|t| seconds("timeout", t)).transpose()?;
    let mut settings_args = inv.args();
    if let Some(repo) = &args.base_image_repo {
        settings_args = settings_args.base_image_repo(repo);
    }
    let settings = inv.settings(&settings_args)?;
    spec.image = image.mode(&settings);
    let engine = engine::build(&settings, inv)?;
    let progress = Progress::new();
    let rt = engine::runtime()?;
    rt.block_on(async {
        let p = progress.clone();
        let submit_options = SubmitOptions::with_progress(Arc::new(move |event: &ProgressEvent| p.event(event)));
        let handle = engine.submit_with(spec, submit_options).await.map_err(engine_error)?;
        if args.detach {
            progress.finish();
            return out.either(
                &serde_json::json!({"job_id": handle.id().as_str(), "backend": handle.record().backend}),
                &format!("{}\n", handle.id()),
            );
        }
        progress.waiting(handle.id().as_str());
        let mut options = ResultOptions::default().cleanup(!args.no_cleanup);
        if let Some(t) = timeout {
            options = options.timeout(t);
        }
        let p = progress.clone();
        let job_id = handle.id().to_string();
        options = options.on_status_change(Arc::new(move |state| p.status(&job_id, state)));
        if !args.no_logs {
            let p = progress.clone();
            let verbose = args.verbose;
            options = options.stream_logs(Arc::new(move |line: &str| {
                if verbose || !line.starts_with(RUNNER_LINE_PREFIX) {
                    p.log_line(line);
                }
            }));
        }
        let result = handle.result(options).await;
        progress.finish();
        match result {
            Ok(value) => render::value(&value, out),
            Err(EngineError::Timeout { job_id, after }) => Err(CliError::failed(format!(
                "timed out after {} waiting for job {job_id}; it keeps running: `kinetic jobs result {job_id}` collects it later",
                humantime_secs(after)
            ))),
            Err(e) => Err(engine_error(e)),
        }
    })
}

fn humantime_secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}
