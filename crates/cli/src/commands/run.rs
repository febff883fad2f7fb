//! `kinetic run`: submit a job, stream its logs, print its value.

use std::sync::Arc;
use std::time::Duration;

use kinetic_engine::{
    EngineError, Entrypoint, JobSpec, ProgressEvent, ResultOptions, SubmitOptions,
};

use super::seconds;
use crate::engine::{self, Invocation};
use crate::error::{CliError, engine_error, engine_error_quiet};
use crate::flags::{JobFlags, PathBase};
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
    spec.budgets.retries = crate::flags::budget_flag("retries", args.retries.as_deref())?;
    Ok(spec.debug(args.debug))
}

pub(crate) fn run(args: &RunArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    let mut spec = build_spec(args, inv)?;
    let timeout = args.timeout.map(|t| seconds("timeout", t)).transpose()?;
    // A wrong function name or a syntax error is found here, before
    // anything is hashed, uploaded or submitted.
    crate::entry_check::check(&spec.entrypoint, inv)?;
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
        return Ok(render::preview::plan(
            &preview?,
            engine.settings(),
            None,
            out,
        )?);
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
            return Ok(out.either(
                &serde_json::json!({"job_id": job_id, "backend": backend}),
                &format!("{job_id}\n"),
            )?);
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
            Ok(value) if out.is_json() => Ok(out.json(&serde_json::json!({"job_id": job_id, "value": value}))?),
            Ok(value) => Ok(render::value(&value, out)?),
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
