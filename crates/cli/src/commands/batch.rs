//! `kinetic batch status|results|wait|cancel|cleanup GROUP_ID`: follow a
//! batch submitted earlier, from any process.

use kinetic_core::engine::{
    AttachOptions, BatchHandle, BatchResultsOptions, CleanupOptions, Engine,
};
use serde_json::json;

use super::map::follow;
use super::seconds;
use crate::engine::{self, Invocation};
use crate::error::{CliError, batch_error};
use crate::render::progress::BatchProgress;
use crate::render::{self, Output, emit, table};

/// Arguments of `kinetic batch`.
#[derive(Debug, clap::Args)]
pub(crate) struct BatchArgs {
    #[command(subcommand)]
    command: BatchCommand,
}

#[derive(Debug, clap::Subcommand)]
enum BatchCommand {
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
    /// Wait until every input settled, showing progress.
    Wait {
        /// The group id.
        group_id: String,
        /// Stop waiting after this many seconds (the batch goes on).
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<f64>,
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

async fn attach(engine: &Engine, group_id: &str) -> Result<BatchHandle, CliError> {
    if group_id.parse::<kinetic_core::ids::GroupId>().is_err() {
        return Err(CliError::usage(format!(
            "{group_id:?} is not a group id: expected 'grp-' followed by 8 lower-case hex digits"
        )));
    }
    engine
        .attach_batch(group_id, AttachOptions::default())
        .await
        .map_err(batch_error)
}

pub(crate) fn run(args: &BatchArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    let settings = inv.settings(&inv.args())?;
    let engine = engine::build(&settings, inv)?;
    let rt = engine::runtime()?;
    rt.block_on(async {
        match &args.command {
            BatchCommand::Status { group_id, jobs } => {
                let batch = attach(&engine, group_id).await?;
                let statuses = batch.statuses().await.map_err(batch_error)?;
                let counts = batch.counts();
                if out.is_json() {
                    let list: Vec<serde_json::Value> = statuses
                        .iter()
                        .map(|(i, s)| {
                            json!({
                                "index": i,
                                "job_id": batch.job(*i).map(|j| j.id().to_string()),
                                "status": s.status,
                                "reason": s.reason,
                            })
                        })
                        .collect();
                    return out.json(&json!({
                        "group_id": batch.group_id(),
                        "name": batch.name(),
                        "total": batch.total(),
                        "submission_complete": batch.is_submission_complete(),
                        "counts": counts,
                        "jobs": list,
                    }));
                }
                let mut text = format!("{}: {counts}\n", batch.group_id());
                if *jobs {
                    let rows: Vec<Vec<String>> = statuses
                        .iter()
                        .map(|(i, s)| {
                            vec![
                                i.to_string(),
                                batch
                                    .job(*i)
                                    .map(|j| j.id().to_string())
                                    .unwrap_or_default(),
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
                emit(&text)
            }
            BatchCommand::Results {
                group_id,
                timeout,
                no_cleanup,
            } => {
                let timeout = timeout.map(|t| seconds("timeout", t)).transpose()?;
                let batch = attach(&engine, group_id).await?;
                let progress = BatchProgress::new(&batch);
                let followed = follow(&batch, &progress, timeout).await;
                progress.finish();
                followed?;
                let items = batch
                    .results(
                        BatchResultsOptions::default()
                            .return_exceptions(true)
                            .cleanup(!no_cleanup),
                    )
                    .await
                    .map_err(batch_error)?;
                render::batch_items(&batch, &items, out)
            }
            BatchCommand::Wait { group_id, timeout } => {
                let timeout = timeout.map(|t| seconds("timeout", t)).transpose()?;
                let batch = attach(&engine, group_id).await?;
                let progress = BatchProgress::new(&batch);
                let followed = follow(&batch, &progress, timeout).await;
                progress.finish();
                followed?;
                let counts = batch.counts();
                out.either(
                    &json!({"group_id": batch.group_id(), "counts": counts}),
                    &format!("{}: {counts}\n", batch.group_id()),
                )
            }
            BatchCommand::Cancel { group_id } => {
                let batch = attach(&engine, group_id).await?;
                batch.cancel().await.map_err(batch_error)?;
                render::done("group_id", group_id, "cancelled", out)
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
                    })
                    .await
                    .map_err(batch_error)?;
                render::done("group_id", group_id, "cleaned up", out)
            }
        }
    })
}
