//! `kinetic batch list`, and `kinetic batch
//! status|results|wait|resume|cancel|cleanup GROUP_ID`: follow, resume and
//! clean up a batch submitted earlier, from any process.
//!
//! No command waits on an input no job is known for: the inputs a stopped
//! `kinetic map` never submitted are named at once, with the command that
//! resumes the batch.

use std::time::Duration;

use kinetic_engine::{AttachOptions, BatchHandle, BatchSummary, CleanupOptions, Engine};
use serde_json::json;

use super::seconds;
use crate::engine::{self, Invocation};
use crate::error::{CliError, batch_error};
use crate::follow::{self, follow, follow_and_print};
use crate::render::progress::BatchProgress;
use crate::render::{self, BatchTally, Output, emit, table};

/// Arguments of `kinetic batch`.
#[derive(Debug, clap::Args)]
pub(crate) struct BatchArgs {
    #[command(subcommand)]
    command: BatchCommand,
}

#[derive(Debug, clap::Subcommand)]
enum BatchCommand {
    /// Every batch in the store, newest first.
    List,
    /// The batch's counts (one backend call), and each job with `--jobs`.
    Status {
        /// The group id (`grp-` + 8 hex).
        group_id: String,
        /// List every submitted job with its status.
        #[arg(long)]
        jobs: bool,
    },
    /// Wait for the batch and print each input's value, in input order.
    Results {
        /// The group id.
        group_id: String,
        /// Stop waiting after this many seconds (the batch goes on).
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<f64>,
        /// Keep each job's artifacts and backend resources.
        #[arg(long)]
        no_cleanup: bool,
    },
    /// Wait until every input settled, showing progress; exits 1 when an
    /// input failed or was never submitted (`batch resume` submits it).
    Wait {
        /// The group id.
        group_id: String,
        /// Stop waiting after this many seconds (the batch goes on).
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<f64>,
    },
    /// Submit what a stopped `kinetic map` did not (nothing twice), with the
    /// options it recorded, then wait and print every value like `map`.
    /// Environment values come from this shell: set the variables again.
    Resume {
        /// The group id.
        group_id: String,
        /// Return once every input is submitted.
        #[arg(long)]
        detach: bool,
        /// Stop waiting after this many seconds (the batch goes on).
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<f64>,
        /// Keep each job's artifacts and backend resources.
        #[arg(long)]
        no_cleanup: bool,
    },
    /// Cancel every job of the batch; nothing more is submitted or retried.
    Cancel {
        /// The group id.
        group_id: String,
    },
    /// Remove the jobs' backend resources and artifacts, and the batch's folder.
    Cleanup {
        /// The group id.
        group_id: String,
        /// Keep the backend's resources.
        #[arg(long)]
        keep_backend: bool,
        /// Keep the objects in the store.
        #[arg(long)]
        keep_store: bool,
    },
}

fn check_group_id(group_id: &str) -> Result<(), CliError> {
    if group_id.parse::<kinetic_core::ids::GroupId>().is_err() {
        return Err(CliError::usage(format!(
            "{group_id:?} is not a group id: expected 'grp-' followed by 8 lower-case hex digits"
        )));
    }
    Ok(())
}

/// Attach without waiting for inputs the manifest does not name: they are
/// settled at once as never submitted, and said so.
async fn attach(engine: &Engine, group_id: &str) -> Result<BatchHandle, CliError> {
    check_group_id(group_id)?;
    let options =
        AttachOptions::default().manifest_polling(Duration::from_secs(1), Some(Duration::ZERO));
    let batch = engine
        .attach_batch(group_id, options)
        .await
        .map_err(batch_error)?;
    let missing = batch.never_submitted();
    if !missing.is_empty() {
        render::info(&render::never_submitted(&batch, &missing));
    }
    Ok(batch)
}

/// `batch wait`'s exit: 0 only when every input ended with a value; an
/// input never submitted, or one that failed, fails the wait with the
/// command that goes on from there.
fn wait_outcome(batch: &BatchHandle, tally: &BatchTally) -> Result<(), CliError> {
    let group = batch.group_id();
    let missing = batch.never_submitted();
    if !missing.is_empty() {
        return Err(CliError::failed(render::never_submitted(batch, &missing)));
    }
    if tally.all_succeeded() {
        return Ok(());
    }
    Err(CliError::failed(format!(
        "batch {group}: {} of {} inputs ended without a value; `kinetic batch results {group}` shows why",
        tally.counts.failures(),
        tally.counts.total()
    )))
}

fn list(batches: &[BatchSummary], out: &Output) -> Result<(), CliError> {
    if out.is_json() {
        return Ok(out.json(&json!({ "batches": batches }))?);
    }
    let rows: Vec<Vec<String>> = batches
        .iter()
        .map(|b| {
            let state = if b.collected == b.total {
                format!("collected ({} failed)", b.collected_failed)
            } else if b.submission_complete {
                "submitted".to_owned()
            } else if b.resumable {
                format!(
                    "{} never submitted or running: resume",
                    b.total - b.submitted
                )
            } else {
                format!("{} not named", b.total - b.submitted)
            };
            vec![
                b.group_id.to_string(),
                b.name.clone().unwrap_or_default(),
                b.created_at.to_string(),
                b.entrypoint.clone().unwrap_or_default(),
                b.total.to_string(),
                b.submitted.to_string(),
                b.collected.to_string(),
                state,
            ]
        })
        .collect();
    Ok(emit(&table(
        &[
            "GROUP ID",
            "NAME",
            "CREATED",
            "ENTRYPOINT",
            "INPUTS",
            "SUBMITTED",
            "COLLECTED",
            "STATE",
        ],
        &rows,
    ))?)
}

pub(crate) fn run(args: &BatchArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    let settings = inv.settings(&inv.args())?;
    let engine = engine::build(&settings, inv)?;
    let rt = engine::runtime()?;
    rt.block_on(async {
        match &args.command {
            BatchCommand::List => {
                let batches = engine.list_batches().await.map_err(batch_error)?;
                list(&batches, out)
            }
            BatchCommand::Resume {
                group_id,
                detach,
                timeout,
                no_cleanup,
            } => {
                check_group_id(group_id)?;
                let timeout = timeout.map(|t| seconds("timeout", t)).transpose()?;
                let batch = engine.resume_batch(group_id).await.map_err(batch_error)?;
                follow::on_ctrl_c(&batch, "kinetic batch results");
                render::info(&format!(
                    "batch {}: resuming {} inputs",
                    batch.group_id(),
                    batch.total()
                ));
                if *detach {
                    follow::wait_submitted(&batch, timeout).await?;
                    return Ok(out.either(
                        &json!({"group_id": batch.group_id(), "total": batch.total()}),
                        &format!("{}\n", batch.group_id()),
                    )?);
                }
                follow_and_print(&batch, timeout, *no_cleanup, out).await
            }
            BatchCommand::Status { group_id, jobs } => {
                let batch = attach(&engine, group_id).await?;
                let statuses = batch.statuses().await.map_err(batch_error)?;
                let tally = BatchTally::of(&batch).with_cancelled(statuses.iter().map(|(_, s)| s));
                if out.is_json() {
                    // Typed rows, not a `Value` each: a batch of 100,000
                    // inputs made 100,000 maps of four entries.
                    #[derive(serde::Serialize)]
                    struct Row<'a> {
                        index: usize,
                        job_id: Option<kinetic_core::ids::JobId>,
                        status: kinetic_core::status::JobStatus,
                        reason: &'a Option<kinetic_core::status::StatusReason>,
                    }
                    let jobs: Vec<Row<'_>> = statuses
                        .iter()
                        .map(|(i, s)| Row {
                            index: *i,
                            job_id: batch.job_id(*i),
                            status: s.status,
                            reason: &s.reason,
                        })
                        .collect();
                    #[derive(serde::Serialize)]
                    struct Status<'a> {
                        group_id: &'a kinetic_core::ids::GroupId,
                        name: Option<&'a str>,
                        total: usize,
                        submission_complete: bool,
                        counts: &'a kinetic_core::batch::BatchCounts,
                        done: usize,
                        never_submitted: usize,
                        jobs: Vec<Row<'a>>,
                    }
                    return Ok(out.json(&Status {
                        group_id: batch.group_id(),
                        name: batch.name(),
                        total: batch.total(),
                        submission_complete: batch.is_submission_complete(),
                        counts: &tally.counts,
                        done: tally.done(),
                        never_submitted: tally.never_submitted,
                        jobs,
                    })?);
                }
                let mut text = format!("{}: {}\n", batch.group_id(), tally.text());
                if *jobs {
                    let rows: Vec<Vec<String>> = statuses
                        .iter()
                        .map(|(i, s)| {
                            vec![
                                i.to_string(),
                                batch.job_id(*i).map(|j| j.to_string()).unwrap_or_default(),
                                s.status.to_string(),
                                s.reason
                                    .as_ref()
                                    .map(ToString::to_string)
                                    .unwrap_or_default(),
                            ]
                        })
                        .collect();
                    text.push_str(&table(&["INDEX", "JOB ID", "STATUS", "REASON"], &rows));
                }
                Ok(emit(&text)?)
            }
            BatchCommand::Results {
                group_id,
                timeout,
                no_cleanup,
            } => {
                let timeout = timeout.map(|t| seconds("timeout", t)).transpose()?;
                let batch = attach(&engine, group_id).await?;
                follow::on_ctrl_c(&batch, "kinetic batch results");
                follow_and_print(&batch, timeout, *no_cleanup, out).await
            }
            BatchCommand::Wait { group_id, timeout } => {
                let timeout = timeout.map(|t| seconds("timeout", t)).transpose()?;
                let batch = attach(&engine, group_id).await?;
                follow::on_ctrl_c(&batch, "kinetic batch wait");
                let progress = BatchProgress::new(&batch);
                let followed = follow(&batch, &progress, timeout).await;
                progress.finish();
                followed?;
                let tally = BatchTally::of(&batch);
                out.either(
                    &json!({
                        "group_id": batch.group_id(),
                        "counts": tally.counts,
                        "done": tally.done(),
                        "never_submitted": tally.never_submitted,
                    }),
                    &format!("{}: {}\n", batch.group_id(), tally.text()),
                )?;
                wait_outcome(&batch, &tally)
            }
            BatchCommand::Cancel { group_id } => {
                let batch = attach(&engine, group_id).await?;
                batch.cancel().await.map_err(batch_error)?;
                Ok(render::done("group_id", group_id, "cancelled", out)?)
            }
            BatchCommand::Cleanup {
                group_id,
                keep_backend,
                keep_store,
            } => {
                let batch = attach(&engine, group_id).await?;
                batch
                    .cleanup(CleanupOptions {
                        backend: !keep_backend,
                        store: !keep_store,
                        ..CleanupOptions::default()
                    })
                    .await
                    .map_err(batch_error)?;
                Ok(render::done("group_id", group_id, "cleaned up", out)?)
            }
        }
    })
}
