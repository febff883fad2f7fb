//! `kinetic map`: run a function once per input line of a JSONL file, as
//! one batch, with a live progress bar, and print the values in input
//! order as they come (each once it and the inputs before it settled).

use std::io::BufRead;
use std::path::PathBuf;

use kinetic_core::batch::InputMode;
use std::sync::Arc;

use kinetic_engine::{Arg, BatchConfig, Entrypoint, JobSpec, ProgressEvent, SubmitOptions};
use serde_json::json;

use super::seconds;
use crate::engine::{self, Invocation};
use crate::error::{CliError, batch_error, engine_error};
use crate::flags::{JobFlags, PathBase};
use crate::follow;
use crate::interrupt::{self, Stopped};
use crate::render::preview::BatchShape;
use crate::render::progress::Progress;
use crate::render::{self, Output};

/// Arguments of `kinetic map`.
#[derive(Debug, clap::Args)]
pub(crate) struct MapArgs {
    /// `module.path:function` or `path/to/file.py:function`.
    entry: String,
    /// JSON Lines file of inputs, one JSON value per line (`-` = stdin).
    #[arg(
        long,
        value_name = "FILE.jsonl",
        required_unless_present = "input_data"
    )]
    inputs: Option<PathBuf>,
    /// Data inputs instead: each PATH (a local file or directory, a
    /// `gs://` URI or an `hf://` dataset) is one input, shipped to its own
    /// job and passed as a local path. Data given twice is uploaded once.
    #[arg(long, value_name = "PATH", num_args = 1.., conflicts_with = "inputs")]
    input_data: Vec<String>,
    /// Inputs in flight at once (0 = no limit).
    #[arg(long, value_name = "N", default_value_t = 64)]
    max_concurrent: usize,
    /// Extra attempts per input whose job fails.
    #[arg(long, value_name = "N", default_value_t = 0)]
    retries: u32,
    /// Stop submitting after the first input that fails for good.
    #[arg(long)]
    fail_fast: bool,
    /// With --fail-fast: also cancel the jobs still running.
    #[arg(long, requires = "fail_fast")]
    cancel_running_on_fail: bool,
    /// How each input becomes arguments: auto (object → keywords, array →
    /// positional, else one argument), single, args or kwargs.
    #[arg(long, value_name = "MODE", default_value = "auto")]
    input_mode: String,
    /// How the inputs share processes: workers (a pool of at most
    /// --max-concurrent worker processes that each import the function once
    /// and call it for input after input; on gke, pods that each run a
    /// block of inputs so) or process (a fresh interpreter per input).
    /// Pathways, and backends without pools, run one job per input either
    /// way.
    #[arg(long, value_name = "MODE", default_value = "workers")]
    isolation: String,
    /// A name for the batch.
    #[arg(long)]
    name: Option<String>,
    /// A tag for the batch: `KEY=VALUE` (repeatable).
    #[arg(long = "tag", value_name = "KEY=VALUE")]
    tags: Vec<String>,
    /// A positional argument every call gets before the input's own, as
    /// JSON, or `data:PATH` for data shipped once for the whole batch.
    #[arg(long = "arg", value_name = "JSON")]
    args: Vec<String>,
    #[command(flatten)]
    job: JobFlags,
    /// Print the group id once every input is submitted, and return.
    #[arg(long)]
    detach: bool,
    /// Print the plan (where the jobs run, the image, the uploads, the
    /// objects each job writes) and change nothing: nothing is uploaded,
    /// built or submitted.
    #[arg(long, conflicts_with = "detach")]
    dry_run: bool,
    /// Stop waiting after this many seconds (the batch goes on).
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,
    /// Keep each job's artifacts and backend resources.
    #[arg(long)]
    no_cleanup: bool,
    /// Show which backend the jobs go to and why.
    #[arg(short, long)]
    verbose: bool,
    /// Seconds between status polls (one backend call each).
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    poll_interval: f64,
}

/// Read JSON Lines: one value per non-blank line; errors name the line.
/// Read line by line (never the whole file as one text): a file of
/// 100,000 inputs costs the inputs, once.
fn read_inputs(path: &PathBuf) -> Result<Vec<Arg>, CliError> {
    let stdin = path.as_os_str() == "-";
    let reader: Box<dyn BufRead> = if stdin {
        Box::new(std::io::stdin().lock())
    } else {
        let file = std::fs::File::open(path).map_err(|e| {
            CliError::usage(format!(
                "--inputs {}: cannot read it ({e}); expected a JSON Lines file",
                path.display()
            ))
        })?;
        Box::new(std::io::BufReader::new(file))
    };
    let mut inputs = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let line = line.map_err(|e| {
            let what = if stdin {
                "cannot read the inputs from stdin".to_owned()
            } else {
                format!("--inputs {}: cannot read line {}", path.display(), n + 1)
            };
            CliError::failed(format!("{what}: {e}"))
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let value = super::parse_json(
            &format!("--inputs {} line {}", path.display(), n + 1),
            &line,
            "expected one JSON value per line",
        )?;
        inputs.push(Arg::Json(value));
    }
    if inputs.is_empty() {
        return Err(CliError::usage(format!(
            "--inputs {}: no inputs (expected one JSON value per line)",
            path.display()
        )));
    }
    Ok(inputs)
}

/// `--input-data`: one data input per path.
fn data_inputs(paths: &[String], inv: &Invocation) -> Result<Vec<Arg>, CliError> {
    let cwd = inv.cwd()?;
    let home = inv.home();
    let base = PathBase {
        cwd,
        home: home.as_deref(),
    };
    paths
        .iter()
        .map(|p| {
            base.data(p)
                .map(Arg::Data)
                .map_err(|e| CliError::usage(format!("--input-data {p}: {e}")))
        })
        .collect()
}

fn build_spec(args: &MapArgs, inv: &Invocation) -> Result<JobSpec, CliError> {
    let cwd = inv.cwd()?;
    let home = inv.home();
    let entrypoint = Entrypoint::parse(&args.entry).map_err(|e| CliError::usage(e.to_string()))?;
    // Before a single input is submitted.
    crate::entry_check::check(&entrypoint, inv)?;
    let base = PathBase {
        cwd,
        home: home.as_deref(),
    };
    args.job.apply(JobSpec::new(entrypoint), base, &args.args)
}

fn batch_config(args: &MapArgs) -> Result<BatchConfig, CliError> {
    let mode: InputMode = args
        .input_mode
        .parse()
        .map_err(|e| CliError::usage(format!("--input-mode: {e}")))?;
    let isolation: kinetic_core::batch::Isolation = args
        .isolation
        .parse()
        .map_err(|e| CliError::usage(format!("--isolation: {e}")))?;
    let limit = (args.max_concurrent > 0).then_some(args.max_concurrent);
    let mut config = BatchConfig::default()
        .max_concurrent(limit)
        .retries(args.retries)
        .fail_fast(args.fail_fast, args.cancel_running_on_fail)
        .input_mode(mode)
        .isolation(isolation)
        .poll_interval(seconds("poll-interval", args.poll_interval)?);
    if let Some(name) = &args.name {
        config = config.name(name);
    }
    for t in &args.tags {
        let (k, v) = t.split_once('=').ok_or_else(|| {
            CliError::usage(format!(
                "--tag {t:?} is not accepted: expected KEY=VALUE, e.g. team=vision"
            ))
        })?;
        config = config.tag(k, v);
    }
    Ok(config)
}

pub(crate) fn run(args: &MapArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    let mut spec = build_spec(args, inv)?;
    let config = batch_config(args)?;
    let inputs = match &args.inputs {
        Some(path) => read_inputs(path)?,
        None => data_inputs(&args.input_data, inv)?,
    };
    let timeout = args.timeout.map(|t| seconds("timeout", t)).transpose()?;
    let engine = args.job.engine(&mut spec, inv, args.verbose)?;
    let rt = engine::runtime()?;
    interrupt::stage(|| Stopped::nothing_started("no input was submitted"));
    if args.dry_run {
        let progress = Progress::new();
        let p = progress.clone();
        let submit = SubmitOptions::with_progress(Arc::new(move |e: &ProgressEvent| p.event(e)));
        // The inputs' data is uploaded with the batch's shared part.
        let mut with_inputs = spec.clone();
        for input in &inputs {
            if matches!(input, Arg::Data(_)) && !with_inputs.args.contains(input) {
                with_inputs = with_inputs.arg(input.clone());
            }
        }
        let preview = rt.block_on(interrupt::or_interrupt(async {
            engine
                .preview_map(&with_inputs, submit)
                .await
                .map_err(engine_error)
        }));
        progress.finish();
        let shape = BatchShape {
            inputs: inputs.len(),
            max_concurrent: (args.max_concurrent > 0).then_some(args.max_concurrent),
        };
        return Ok(render::preview::plan(
            &preview?,
            engine.settings(),
            Some(shape),
            out,
        )?);
    }
    // Preparing (hashing, uploading, the image) shows on a terminal, and
    // a Ctrl-C meanwhile says whether an image build goes on.
    let progress = Progress::new();
    let p = progress.clone();
    let options = SubmitOptions::with_progress(Arc::new(move |e: &ProgressEvent| {
        interrupt::on_submit_step(e, "no input was submitted");
        p.event(e);
    }));
    rt.block_on(async {
        let total = inputs.len();
        let batch = interrupt::or_interrupt(async {
            engine
                .map_with(spec, inputs, config, options)
                .await
                .map_err(batch_error)
        })
        .await;
        progress.finish();
        let batch = batch?;
        follow::on_ctrl_c(&batch, "kinetic batch results");
        render::info(&format!("batch {}: {total} inputs", batch.group_id()));
        if args.detach {
            follow::wait_submitted(&batch, timeout).await?;
            return Ok(out.either(
                &json!({"group_id": batch.group_id(), "total": total}),
                &format!("{}\n", batch.group_id()),
            )?);
        }
        follow::follow_and_print(&batch, timeout, args.no_cleanup, out).await
    })
}
