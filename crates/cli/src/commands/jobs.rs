//! `kinetic jobs list|status|logs|tail|result|cancel|cleanup|debug`: follow
//! jobs submitted earlier, from any process.

use std::sync::Arc;

use futures_util::StreamExt;
use kinetic_engine::{CleanupOptions, Engine, JobHandle, ResultOptions};
use serde_json::json;

use super::seconds;
use crate::engine::{self, Invocation};
use crate::error::{CliError, engine_error};
use crate::interrupt::{self, PickUp, Stopped};
use crate::render::progress::Progress;
use crate::render::{self, Output, emit, table};

/// Arguments of `kinetic jobs`.
#[derive(Debug, clap::Args)]
pub(crate) struct JobsArgs {
    #[command(subcommand)]
    command: JobsCommand,
}

#[derive(Debug, clap::Subcommand)]
enum JobsCommand {
    /// Every configured backend's jobs together (local and the cluster's,
    /// each read from its own store), newest first, with their status and
    /// backend. A backend that cannot be asked is named in a warning; the
    /// records its store keeps (a deleted cluster's bucket) are listed
    /// with status UNKNOWN.
    List,
    /// A job's status (and why, when known).
    Status {
        /// The job id (`job-` + 8 hex).
        job_id: String,
    },
    /// A job's output (with `--json` and `--follow`: one JSON object per
    /// line, `{"job_id": …, "line": …}`).
    Logs {
        /// The job id.
        job_id: String,
        /// Keep printing new output until the job ends.
        #[arg(short, long)]
        follow: bool,
        /// Only the last N lines.
        #[arg(short = 'n', long, value_name = "N", conflicts_with = "follow")]
        tail: Option<usize>,
    },
    /// The last lines of a job's output.
    Tail {
        /// The job id.
        job_id: String,
        /// How many lines.
        #[arg(short = 'n', long, default_value_t = 100)]
        lines: usize,
    },
    /// Wait for a job and print its value; a job that succeeded has its
    /// backend resources removed (a failed one keeps them, for its logs).
    /// Asked again, the value is read from the store.
    Result {
        /// The job id.
        job_id: String,
        /// Stop waiting after this many seconds (the job keeps running).
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<f64>,
        /// Keep the backend resources of a job that succeeded.
        #[arg(long)]
        no_cleanup: bool,
    },
    /// Stop a job; its artifacts stay. A job that already finished is left
    /// as it is (and said so).
    Cancel {
        /// The job id.
        job_id: String,
    },
    /// Attach a debugger to a job run with `--debug`: waits until its
    /// debugger listens, forwards a local port to it, and prints the VS Code
    /// launch configuration (`launch.json`) with path mappings; forwards
    /// until the job ends or Ctrl-C.
    Debug {
        /// The job id.
        job_id: String,
        /// Local port debuggers connect to (0: any free port).
        #[arg(long, default_value_t = kinetic_core::debug::DEFAULT_PORT)]
        port: u16,
        /// Local project directory the job's workspace maps to (default:
        /// VS Code's `${workspaceFolder}`).
        #[arg(long, value_name = "DIR")]
        working_dir: Option<std::path::PathBuf>,
        /// Stop waiting for the debugger after this many seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = 600.0)]
        timeout: f64,
    },
    /// Remove a job's backend resources and its artifacts.
    Cleanup {
        /// The job id.
        job_id: String,
        /// Keep the backend's resources.
        #[arg(long)]
        keep_backend: bool,
        /// Keep the job's objects in the store.
        #[arg(long)]
        keep_store: bool,
    },
}

/// The engines whose stores may hold a job: the configured backend's, then
/// (when it differs and can be set up) the configured cluster's, where GPU
/// and TPU jobs went unless a store was set.
struct Engines {
    first: Engine,
    cluster: Option<Engine>,
    /// Each registered backend, with the engine whose store holds its
    /// jobs' records (`Err`: why none does).
    listed: Vec<(String, Result<Which, String>)>,
}

/// Which of [`Engines`]' engines.
#[derive(Clone, Copy)]
enum Which {
    First,
    Cluster,
}

impl Engines {
    fn new(
        settings: &kinetic_core::settings::Settings,
        inv: &Invocation,
    ) -> Result<Self, CliError> {
        let first = engine::build(settings, inv)?;
        let own = settings.store_for(&settings.backend.value).ok();
        let cluster_store = settings
            .store_for("gke")
            .ok()
            .filter(|s| Some(&s.value) != own.as_ref().map(|o| &o.value));
        let cluster = cluster_store
            .as_ref()
            .map(|_| engine::build_for(settings, inv, "gke").map_err(|e| e.to_string()));
        let listed = first
            .backends()
            .names()
            .into_iter()
            .map(|name| {
                let which = match settings.store_for(&name) {
                    Ok(s) if Some(&s.value) == own.as_ref().map(|o| &o.value) => Ok(Which::First),
                    Ok(s) if Some(&s.value) == cluster_store.as_ref().map(|c| &c.value) => {
                        match &cluster {
                            Some(Ok(_)) => Ok(Which::Cluster),
                            Some(Err(e)) => Err(e.clone()),
                            None => Err("its store cannot be opened".to_owned()),
                        }
                    }
                    Ok(s) => Err(format!("its store {} cannot be opened", s.value)),
                    Err(e) => Err(e.to_string()),
                };
                (name, which)
            })
            .collect();
        Ok(Self {
            first,
            cluster: cluster.and_then(Result::ok),
            listed,
        })
    }

    fn get(&self, which: Which) -> &Engine {
        match (which, &self.cluster) {
            (Which::Cluster, Some(cluster)) => cluster,
            _ => &self.first,
        }
    }
}

async fn attach(engines: &Engines, job_id: &str) -> Result<JobHandle, CliError> {
    if job_id.parse::<kinetic_core::ids::JobId>().is_err() {
        return Err(CliError::usage(format!(
            "{job_id:?} is not a job id: expected 'job-' followed by 8 lower-case hex digits"
        )));
    }
    match engines.first.attach(job_id).await {
        Err(e) if e.is_not_found() => match &engines.cluster {
            Some(cluster) => cluster.attach(job_id).await.map_err(|_| engine_error(e)),
            None => Err(engine_error(e)),
        },
        other => other.map_err(engine_error),
    }
}

/// The job's attempts: as its backend sees them now, else as the store
/// kept them (after the backend's objects are gone).
async fn attempts_of(
    handle: &kinetic_engine::JobHandle,
    state: &kinetic_core::status::JobState,
) -> Result<Vec<kinetic_core::budget::Attempt>, CliError> {
    let kept = handle.attempts().await.map_err(engine_error)?;
    Ok(if state.attempts.len() >= kept.len() {
        state.attempts.clone()
    } else {
        kept
    })
}

pub(crate) fn run(args: &JobsArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    let settings = inv.settings(&inv.args())?;
    let engines = Engines::new(&settings, inv)?;
    let rt = engine::runtime()?;
    rt.block_on(async {
        match &args.command {
            JobsCommand::List => list(&engines, &settings, inv, out).await,
            JobsCommand::Status { job_id } => {
                let handle = attach(&engines, job_id).await?;
                let state = handle.status().await.map_err(engine_error)?;
                let mut text = match &state.reason {
                    Some(r) => format!("{job_id}: {} ({r})\n", state.status.as_str()),
                    None => format!("{job_id}: {}\n", state.status.as_str()),
                };
                let attempts = attempts_of(&handle, &state).await?;
                if attempts.len() > 1 {
                    for a in &attempts {
                        text.push_str(&format!("  {a}\n"));
                    }
                }
                Ok(out.either(
                    &json!({"job_id": job_id, "status": state.status, "reason": state.reason, "attempts": attempts}),
                    &text,
                )?)
            }
            JobsCommand::Logs {
                job_id,
                follow,
                tail,
            } => {
                let handle = attach(&engines, job_id).await?;
                if *follow {
                    let id = job_id.clone();
                    interrupt::stage(move || {
                        Stopped::new(
                            format!("job {id} keeps running"),
                            "the rest of its output was not shown",
                            PickUp::With(format!("kinetic jobs logs {id} --follow")),
                        )
                    });
                    return interrupt::or_interrupt(async {
                        let mut stream = handle.follow_logs().await.map_err(engine_error)?;
                        while let Some(line) = stream.next().await {
                            let line = line.map_err(|e| engine_error(e.into()))?;
                            if out.is_json() {
                                // JSON Lines: one compact object per line, as it comes.
                                emit(&format!("{}\n", json!({"job_id": job_id, "line": line})))?;
                            } else {
                                emit(&format!("{}\n", render::job_output(&line)))?;
                            }
                        }
                        Ok(())
                    })
                    .await;
                }
                let text = match tail {
                    Some(n) => handle.tail(*n).await,
                    None => handle.logs().await,
                }
                .map_err(engine_error)?;
                logs_out(job_id, &text, out)
            }
            JobsCommand::Tail { job_id, lines } => {
                let handle = attach(&engines, job_id).await?;
                let text = handle.tail(*lines).await.map_err(engine_error)?;
                logs_out(job_id, &text, out)
            }
            JobsCommand::Result {
                job_id,
                timeout,
                no_cleanup,
            } => {
                let handle = attach(&engines, job_id).await?;
                // Without --no-cleanup the default holds: a debug job is kept.
                let mut options = ResultOptions::default();
                if *no_cleanup {
                    options = options.cleanup(false);
                }
                if let Some(t) = timeout {
                    options = options.timeout(seconds("timeout", *t)?);
                }
                let backend = handle.record().backend.clone();
                let id = job_id.clone();
                interrupt::stage(move || Stopped::job(&id, &backend));
                // What it waits for, and how long, on a terminal.
                let progress = Progress::new();
                progress.waiting_for(job_id, None);
                let (p, id) = (progress.clone(), job_id.clone());
                options = options.on_status_change(Arc::new(move |state| {
                    p.waiting_for(&id, Some(state));
                }));
                // The value is shown first: a deletion the cluster is slow
                // to finish (a slice's hosts stopping) does not hold it.
                let cleanup = handle.cleans_up(&options);
                let value = interrupt::or_interrupt(async {
                    handle
                        .result(options.cleanup(false))
                        .await
                        .map_err(engine_error)
                })
                .await;
                progress.finish();
                render::value(&value?, out)?;
                if cleanup {
                    let backend_only = CleanupOptions {
                        backend: true,
                        store: false,
                        ..CleanupOptions::default()
                    };
                    if let Err(e) = handle.cleanup(backend_only).await {
                        render::warn(&format!(
                            "cleanup of job {job_id}'s backend resources failed: {e}"
                        ));
                    }
                }
                Ok(())
            }
            JobsCommand::Cancel { job_id } => {
                let handle = attach(&engines, job_id).await?;
                Ok(match handle.cancel_if_running().await.map_err(engine_error)? {
                    None => render::done("job_id", job_id, "cancelled", out),
                    Some(state) => out.either(
                        &json!({"job_id": job_id, "cancelled": false, "status": state.status, "reason": state.reason}),
                        &format!("{job_id} had already finished ({state}): nothing to cancel\n"),
                    ),
                }?)
            }
            JobsCommand::Debug {
                job_id,
                port,
                working_dir,
                timeout,
            } => {
                let handle = attach(&engines, job_id).await?;
                let local_root = match working_dir {
                    Some(dir) => Some(inv.cwd()?.join(dir).display().to_string()),
                    None => None,
                };
                debug(handle, *port, local_root, seconds("timeout", *timeout)?, out).await
            }
            JobsCommand::Cleanup {
                job_id,
                keep_backend,
                keep_store,
            } => {
                let handle = attach(&engines, job_id).await?;
                handle
                    .cleanup(CleanupOptions {
                        backend: !keep_backend,
                        store: !keep_store,
                        ..CleanupOptions::default()
                    })
                    .await
                    .map_err(engine_error)?;
                Ok(render::done("job_id", job_id, "cleaned up", out)?)
            }
        }
    })
}

/// `kinetic jobs debug`: forward a local port to the job's debugger until
/// the job ends (or Ctrl-C), after printing the launch configuration.
async fn debug(
    handle: JobHandle,
    port: u16,
    local_root: Option<String>,
    timeout: std::time::Duration,
    out: &Output,
) -> Result<(), CliError> {
    use kinetic_wiring::debug::{DebugForward, DebugForwardError};
    let job_id = handle.id().to_string();
    let id = job_id.clone();
    interrupt::stage(move || {
        Stopped::new(
            format!("job {id} keeps waiting for a debugger"),
            "no port was forwarded to it",
            PickUp::With(format!("kinetic jobs debug {id}")),
        )
        .also(format!("stop it with `kinetic jobs cancel {id}`"))
    });
    eprintln!("waiting for the debugger of {job_id} to listen…");
    let forward = interrupt::or_interrupt(async {
        DebugForward::bind(handle, port, timeout)
            .await
            .map_err(|e| match e {
                DebugForwardError::Engine(e) => engine_error(e),
                e => CliError::failed(e.to_string()),
            })
    })
    .await?;
    let local_port = forward.local_addr().port();
    let launch = forward.launch_configuration(local_root.as_deref());
    out.either(
        &json!({"job_id": job_id, "local_port": local_port, "launch": launch}),
        &format!(
            "{}\n",
            serde_json::to_string_pretty(&launch).unwrap_or_default()
        ),
    )?;
    eprintln!(
        "forwarding localhost:{local_port} to the debugger of {job_id}; attach with the launch configuration above (VS Code: .vscode/launch.json); Ctrl-C stops forwarding"
    );
    // Ctrl-C is how forwarding is meant to end: not an interruption.
    let status = match interrupt::or_interrupt(async {
        forward.serve().await.map_err(engine_error)
    })
    .await
    {
        Err(CliError::Interrupted(_)) => {
            eprintln!("stopped forwarding; job {job_id} keeps running");
            return Ok(());
        }
        ended => ended?,
    };
    eprintln!("job {job_id} ended ({status}); forwarding stopped");
    Ok(())
}

fn logs_out(job_id: &str, text: &str, out: &Output) -> Result<(), CliError> {
    Ok(out.either(
        &json!({"job_id": job_id, "logs": text}),
        &render::job_output(text),
    )?)
}

/// A job as `jobs list` shows it: its record, and its status as its
/// backend says (`Err`: why it cannot be said).
struct Listed {
    record: kinetic_core::record::JobRecord,
    status: Result<kinetic_core::status::JobState, String>,
}

/// `kinetic jobs list`: every registered backend's jobs, each read from
/// the store its jobs use, newest first. A backend that cannot list its
/// jobs (a cluster deleted or still being created, a CRD not installed)
/// is named in a warning, and the others are listed; the records its
/// store keeps are listed too, their status unknown.
async fn list(
    engines: &Engines,
    settings: &kinetic_core::settings::Settings,
    inv: &Invocation,
    out: &Output,
) -> Result<(), CliError> {
    let mut jobs: Vec<Listed> = Vec::new();
    let mut cluster_note: Option<Option<String>> = None;
    let mut said = std::collections::BTreeSet::new();
    for (backend, which) in &engines.listed {
        let which = match which {
            Ok(which) => *which,
            Err(why) => {
                render::warn(&format!(
                    "the {backend} backend's jobs are not listed: {why}"
                ));
                continue;
            }
        };
        let engine = engines.get(which);
        let error = match engine.list_jobs_of(std::slice::from_ref(backend)).await {
            Ok(listing) => match listing.unlisted.into_iter().next() {
                None => {
                    // A live job whose handle.json cannot be read is said,
                    // not dropped.
                    for skipped in &listing.unreadable {
                        render::warn(&skipped.to_string());
                    }
                    for record in listing.records {
                        let status = match engine.handle_from_json(&record.to_json()) {
                            Ok(handle) => handle.status().await.map_err(|e| e.to_string()),
                            Err(e) => Err(e.to_string()),
                        };
                        jobs.push(Listed { record, status });
                    }
                    continue;
                }
                Some((_, e)) => e,
            },
            Err(e) => e,
        };
        // The backend cannot be asked: say why (what the cluster is, when
        // it is a cluster's), and list what its store keeps.
        let why = if kinetic_core::settings::is_remote(backend) {
            if cluster_note.is_none() {
                cluster_note = Some(crate::cloud::cluster_state_note(settings, inv).await);
            }
            cluster_note.clone().flatten()
        } else {
            None
        }
        .unwrap_or_else(|| error.to_string());
        let kept = engine.stored_jobs(backend).await;
        let first_time = said.insert(why.clone());
        match kept {
            Ok(kept) if !kept.is_empty() => {
                render::warn(&format!(
                    "the {backend} backend's jobs cannot be asked for their status: {}its {} job(s) below are read from the store, status UNKNOWN",
                    if first_time {
                        format!("{why}; ")
                    } else {
                        String::new()
                    },
                    kept.len()
                ));
                for record in kept {
                    jobs.push(Listed {
                        record,
                        status: Err(why.clone()),
                    });
                }
            }
            // The cluster's state is said once, for all its backends.
            Ok(_) if !first_time => {}
            Ok(_) => render::warn(&format!(
                "the {backend} backend's jobs are not listed: {why}"
            )),
            Err(e) => render::warn(&format!(
                "the {backend} backend's jobs are not listed: {why}; its store cannot be read either: {e}"
            )),
        }
    }
    jobs.sort_by(|a, b| {
        b.record
            .created_at
            .cmp(&a.record.created_at)
            .then_with(|| a.record.job_id.cmp(&b.record.job_id))
    });
    if out.is_json() {
        let values: Vec<serde_json::Value> = jobs
            .iter()
            .map(|job| {
                let mut value =
                    serde_json::from_str(&job.record.to_json()).unwrap_or(serde_json::Value::Null);
                if let Some(map) = value.as_object_mut() {
                    map.insert("backend".into(), json!(job.record.backend));
                    match &job.status {
                        Ok(state) => {
                            map.insert("status".into(), json!(state.status));
                            map.insert("reason".into(), json!(state.reason));
                        }
                        Err(e) => {
                            map.insert("status".into(), json!("UNKNOWN"));
                            map.insert("status_error".into(), json!(e));
                        }
                    }
                }
                value
            })
            .collect();
        return Ok(out.json(&values)?);
    }
    if jobs.is_empty() {
        return Ok(emit("no jobs\n")?);
    }
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|job| {
            let r = &job.record;
            vec![
                r.job_id.to_string(),
                match &job.status {
                    Ok(state) => state.status.as_str().to_owned(),
                    Err(_) => "UNKNOWN".to_owned(),
                },
                r.func_name.clone(),
                r.accelerator.clone(),
                r.backend.clone(),
                r.created_at.to_string(),
            ]
        })
        .collect();
    Ok(emit(&table(
        &[
            "JOB ID",
            "STATUS",
            "FUNCTION",
            "ACCELERATOR",
            "BACKEND",
            "CREATED",
        ],
        &rows,
    ))?)
}
