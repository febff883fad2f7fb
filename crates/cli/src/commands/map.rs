//! `kinetic map`: run a function once per input line of a JSONL file, as
//! one batch, with a live progress bar, and print the values in input order.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use kinetic_core::batch::{BatchCounts, InputMode};
use kinetic_core::engine::{
    BatchError, BatchHandle, BatchItem, BatchResultsOptions, ChildError, Entrypoint, JobSpec,
    MapOptions,
};
use serde_json::{Value, json};

use super::run::JobFlags;
use crate::engine;
use crate::output::{CliError, Output, emit};

/// Arguments of `kinetic map`.
#[derive(Debug, clap::Args)]
pub(crate) struct MapArgs {
    /// `module.path:function` or `path/to/file.py:function`.
    entry: String,
    /// JSON Lines file of inputs, one JSON value per line (`-` = stdin).
    #[arg(long, value_name = "FILE.jsonl")]
    inputs: PathBuf,
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
    /// Stop waiting after this many seconds (the batch goes on).
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,
    /// Keep each job's artifacts and backend resources.
    #[arg(long)]
    no_cleanup: bool,
    /// Seconds between status polls (one backend call each).
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    poll_interval: f64,
}

pub(crate) fn seconds(flag: &str, value: f64) -> Result<Duration, CliError> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            CliError::usage(format!(
                "--{flag} {value} is not accepted: expected a positive number of seconds"
            ))
        })
}

/// Read JSON Lines: one value per non-blank line; errors name the line.
fn read_inputs(path: &PathBuf) -> Result<Vec<Value>, CliError> {
    let mut text = String::new();
    if path.as_os_str() == "-" {
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| CliError::failed(format!("cannot read the inputs from stdin: {e}")))?;
    } else {
        text = std::fs::read_to_string(path).map_err(|e| {
            CliError::usage(format!(
                "--inputs {}: cannot read it ({e}); expected a JSON Lines file",
                path.display()
            ))
        })?;
    }
    let mut inputs = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value = serde_json::from_str(line).map_err(|e| {
            CliError::usage(format!(
                "--inputs {} line {}: not JSON ({e}); expected one JSON value per line",
                path.display(),
                n + 1
            ))
        })?;
        inputs.push(value);
    }
    if inputs.is_empty() {
        return Err(CliError::usage(format!(
            "--inputs {}: no inputs (expected one JSON value per line)",
            path.display()
        )));
    }
    Ok(inputs)
}

fn build_spec(args: &MapArgs) -> Result<JobSpec, CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::failed(format!("cannot read the current directory: {e}")))?;
    let entrypoint = Entrypoint::parse(&args.entry).map_err(|e| CliError::usage(e.to_string()))?;
    args.job.apply(JobSpec::new(entrypoint), &cwd, &args.args)
}

fn map_options(args: &MapArgs) -> Result<MapOptions, CliError> {
    let mode: InputMode = args
        .input_mode
        .parse()
        .map_err(|e| CliError::usage(format!("--input-mode: {e}")))?;
    let limit = (args.max_concurrent > 0).then_some(args.max_concurrent);
    let mut options = MapOptions::default()
        .max_concurrent(limit)
        .retries(args.retries)
        .fail_fast(args.fail_fast, args.cancel_running_on_fail)
        .input_mode(mode)
        .poll_interval(seconds("poll-interval", args.poll_interval)?);
    if let Some(name) = &args.name {
        options = options.name(name);
    }
    for t in &args.tags {
        let (k, v) = t.split_once('=').ok_or_else(|| {
            CliError::usage(format!(
                "--tag {t:?} is not accepted: expected KEY=VALUE, e.g. team=vision"
            ))
        })?;
        options = options.tag(k, v);
    }
    Ok(options)
}

/// Map a batch error to the CLI's exit codes.
pub(crate) fn batch_error(err: BatchError) -> CliError {
    if err.is_usage() {
        CliError::usage(err.to_string())
    } else {
        CliError::failed(err.to_string())
    }
}

/// A live bar of the batch's counts on a terminal; nothing otherwise.
pub(crate) struct BatchProgress {
    bar: Option<ProgressBar>,
}

impl BatchProgress {
    pub(crate) fn new(batch: &BatchHandle) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(batch.total() as u64);
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {pos}/{len} {msg} [{elapsed_precise}]",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_prefix(batch.group_id().to_string());
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Self { bar }
    }

    pub(crate) fn show(&self, counts: &BatchCounts) {
        if let Some(bar) = &self.bar {
            bar.set_position(counts.finished() as u64);
            bar.set_message(summary(counts));
        }
    }

    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// `3 running · 61 pending · 2 failed`: what is not yet succeeded.
pub(crate) fn summary(c: &BatchCounts) -> String {
    let parts = [
        ("running", c.running),
        ("pending", c.pending),
        ("submitting", c.submitting),
        ("queued", c.queued),
        ("unknown", c.unknown),
        ("failed", c.failed + c.not_found),
        ("not submitted", c.submit_failed + c.skipped),
    ];
    parts
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| format!("{n} {name}"))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// Poll the counts into the bar until every input settled.
pub(crate) async fn follow(
    batch: &BatchHandle,
    progress: &BatchProgress,
    timeout: Option<Duration>,
) -> Result<(), CliError> {
    let deadline = timeout.map(|t| std::time::Instant::now() + t);
    loop {
        let counts = batch.status_counts().await.map_err(batch_error)?;
        progress.show(&counts);
        if counts.finished() == counts.total() {
            return Ok(());
        }
        let wait = batch.wait(Some(Duration::from_secs(1)));
        match wait.await {
            Ok(()) => {}
            Err(BatchError::Timeout { .. }) => {}
            Err(e) => return Err(batch_error(e)),
        }
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            return Err(CliError::failed(format!(
                "timed out waiting for batch {}; it goes on: `kinetic batch results {}` collects it later",
                batch.group_id(),
                batch.group_id()
            )));
        }
    }
}

/// Print the items: with `--json` one object; otherwise one JSON value per
/// input line (`null` where it failed) and the failures on stderr. Fails
/// (exit 1) when any input failed.
pub(crate) fn print_items(
    batch: &BatchHandle,
    items: &[BatchItem],
    out: &Output,
) -> Result<(), CliError> {
    let failed: Vec<&ChildError> = items
        .iter()
        .filter_map(|i| i.outcome.as_ref().err())
        .collect();
    if out.is_json() {
        let results: Vec<Value> = items
            .iter()
            .map(|i| match &i.outcome {
                Ok(v) => json!({"index": i.index, "job_id": i.job_id, "value": v}),
                Err(e) => json!({"index": i.index, "job_id": i.job_id, "error": e.to_string()}),
            })
            .collect();
        out.json(&json!({
            "group_id": batch.group_id(),
            "total": batch.total(),
            "failed": failed.len(),
            "results": results,
        }))?;
    } else {
        let mut text = String::new();
        for item in items {
            let value = item.value().cloned().unwrap_or(Value::Null);
            text.push_str(&serde_json::to_string(&value).unwrap_or_default());
            text.push('\n');
        }
        emit(&text)?;
        for e in failed.iter().take(20) {
            eprintln!("{e}");
            if let Some(tb) = e
                .engine_error()
                .and_then(|err| err.remote())
                .and_then(|r| r.traceback.as_ref())
            {
                eprintln!("{}", tb.trim_end());
            }
        }
        if failed.len() > 20 {
            eprintln!("… and {} more", failed.len() - 20);
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CliError::failed(format!(
            "batch {}: {} of {} inputs failed",
            batch.group_id(),
            failed.len(),
            batch.total()
        )))
    }
}

pub(crate) fn run(args: &MapArgs, profile: Option<&str>, out: &Output) -> Result<(), CliError> {
    let spec = build_spec(args)?;
    let options = map_options(args)?;
    let inputs = read_inputs(&args.inputs)?;
    let timeout = args.timeout.map(|t| seconds("timeout", t)).transpose()?;
    let engine = engine::build(profile)?;
    let rt = engine::runtime()?;
    rt.block_on(async {
        let total = inputs.len();
        let batch = engine
            .map(spec, inputs, options)
            .await
            .map_err(batch_error)?;
        eprintln!("batch {}: {total} inputs", batch.group_id());
        let progress = BatchProgress::new(&batch);
        if args.detach {
            let submitted = batch.wait_submitted(timeout).await;
            progress.finish();
            submitted.map_err(batch_error)?;
            return if out.is_json() {
                out.json(&json!({"group_id": batch.group_id(), "total": total}))
            } else {
                emit(&format!("{}\n", batch.group_id()))
            };
        }
        let followed = follow(&batch, &progress, timeout).await;
        progress.finish();
        followed?;
        let items = batch
            .results(
                BatchResultsOptions::default()
                    .return_exceptions(true)
                    .cleanup(!args.no_cleanup),
            )
            .await
            .map_err(batch_error)?;
        print_items(&batch, &items, out)
    })
}
