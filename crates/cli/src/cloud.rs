//! What the infrastructure commands share (`kinetic up`, `down` and
//! `pool`): read the cloud back, and print, confirm and carry out a plan.
//! In one room so that commands never import each other.

use std::sync::Arc;

use kinetic_infra_gcp::GcpInfra;
use kinetic_infra_gcp::model::{Observed, Plan};
use serde_json::{Value, json};

use crate::engine;
use crate::error::{CliError, infra_error};
use crate::interrupt::{self, PickUp, Stopped};
use crate::render::{self, Output, emit};

/// What [`apply`] did, for the command to report.
#[derive(Debug)]
#[must_use = "print it: it is the command's last words"]
pub(crate) struct Applied {
    /// The `--json` report: target, plan, `dry_run`, `applied`.
    pub(crate) report: Value,
    /// True when actions were carried out.
    applied: bool,
    /// True when the person answered no: nothing was done, as asked.
    declined: bool,
}

impl Applied {
    /// The report with `--json`; else "Done." when something was done,
    /// and "Nothing was changed." when the person said no.
    pub(crate) fn print(&self, out: &Output) -> Result<(), CliError> {
        if out.is_json() {
            Ok(out.json(&self.report)?)
        } else if self.applied {
            Ok(emit("Done.\n")?)
        } else if self.declined {
            Ok(emit("Nothing was changed.\n")?)
        } else {
            Ok(())
        }
    }

    /// True when the plan was carried out.
    pub(crate) fn applied(&self) -> bool {
        self.applied
    }

    /// True when the person answered no to the plan: not an error, and
    /// nothing follows from it.
    pub(crate) fn declined(&self) -> bool {
        self.declined
    }
}

/// The plan of a command that changes the cloud: print it, and unless
/// `dry_run`, ask (`yes` answers) and carry it out. `again` is the
/// command that finishes the job after a failure. What was done is for
/// the caller to print ([`Applied::print`]).
pub(crate) fn apply(
    out: &Output,
    infra: &GcpInfra,
    plan: &Plan,
    dry_run: bool,
    yes: bool,
    again: &str,
) -> Result<Applied, CliError> {
    let target = &infra.desired().target;
    let report = |applied: bool| Applied {
        report: json!({"target": target, "plan": plan, "dry_run": dry_run, "applied": applied}),
        applied,
        declined: false,
    };
    if !out.is_json() {
        emit(&render::infra::plan(target, plan))?;
    }
    if dry_run || plan.is_empty() {
        return Ok(report(false));
    }
    let untouched = || {
        Stopped::new(
            "nothing was changed",
            "the plan was not carried out",
            PickUp::Again(interrupt::this_command()),
        )
    };
    interrupt::stage(untouched);
    if !render::infra::confirm("Carry out this plan?", yes)? {
        // No is an answer, not a failure: exit 0.
        return Ok(Applied {
            declined: true,
            ..report(false)
        });
    }
    let progress = Arc::new(render::infra::InfraProgress::new());
    let watched = progress.clone();
    interrupt::stage(move || match watched.current() {
        Some((index, total, what)) => Stopped::new(
            format!(
                "what the cloud started for step {}/{total} ({what}) goes on there",
                index + 1
            ),
            if index + 1 == total {
                format!("step {total} of {total} was not finished")
            } else {
                format!(
                    "steps {} to {total} of {total} were not finished (what was done stays done)",
                    index + 1
                )
            },
            PickUp::Again(interrupt::this_command()),
        ),
        None => untouched(),
    });
    let result = engine::runtime()?.block_on(interrupt::or_interrupt(async {
        infra.execute(plan, &*progress).await.map_err(|e| {
            let e = infra_error(e);
            let text = format!("{e}; what was done stays done: run `{again}` again to finish");
            match e {
                CliError::Usage(_) => CliError::usage(text),
                CliError::Failed(_) => CliError::failed(text),
                CliError::Interrupted(_) => CliError::interrupted(text),
            }
        })
    }));
    progress.finish();
    result?;
    Ok(report(true))
}

/// The infrastructure and what the cloud holds of it, all of it readable.
/// A Ctrl-C meanwhile changes nothing, and says so.
pub(crate) fn observe(infra: &GcpInfra) -> Result<Observed, CliError> {
    interrupt::stage(|| {
        Stopped::new(
            "nothing was changed",
            "the cloud was not read to the end",
            PickUp::Again(interrupt::this_command()),
        )
    });
    engine::runtime()?
        .block_on(async {
            // Credentials first: once, rather than once per call.
            infra.check_credentials().await?;
            infra.observe().await.complete()
        })
        .map_err(infra_error)
}

/// The ids of the jobs still running (or waiting) on the configured
/// cluster, as its backends list them; why they cannot be listed.
pub(crate) async fn running_jobs(
    settings: &kinetic_core::settings::Settings,
    inv: &engine::Invocation,
) -> Result<Vec<String>, String> {
    let engine = engine::build_for(settings, inv, "gke").map_err(|e| e.to_string())?;
    let backends: Vec<String> = ["gke", "pathways"].map(str::to_owned).to_vec();
    let listing = engine
        .list_jobs_of(&backends)
        .await
        .map_err(|e| e.to_string())?;
    if let Some((backend, e)) = listing.unlisted.first() {
        return Err(format!("the {backend} backend: {e}"));
    }
    let mut running = Vec::new();
    for record in &listing.records {
        let handle = engine
            .handle_from_json(&record.to_json())
            .map_err(|e| e.to_string())?;
        let state = handle.status().await.map_err(|e| e.to_string())?;
        if !state.status.is_terminal() {
            running.push(record.job_id.to_string());
        }
    }
    Ok(running)
}

/// What the configured cluster is, for a person whose command could not
/// reach it through the kubeconfig: still being created, being deleted,
/// failed, deleted (by `kinetic down`, as a profile naming it was
/// marked), or never made. `None` when it serves (the command's own
/// error stands), or when no project is configured or GKE cannot be
/// asked (within 10 s).
pub(crate) async fn cluster_state_note(
    settings: &kinetic_core::settings::Settings,
    inv: &engine::Invocation,
) -> Option<String> {
    settings.project.as_ref()?;
    let infra = engine::infra(settings).ok()?;
    let t = infra.desired().target.clone();
    // A second look after a failure: it never holds the command long.
    let cluster = tokio::time::timeout(std::time::Duration::from_secs(10), infra.cluster())
        .await
        .ok()?
        .ok()?;
    let name = format!(
        "cluster {} in {} (project {})",
        t.cluster, t.zone, t.project
    );
    match cluster {
        None => Some(
            match crate::profiles::cluster_deleted_at(inv, &t.project, &t.zone, &t.cluster) {
                Some(when) => format!(
                    "{name} was deleted by `kinetic down` at {when}: `kinetic up` makes it again; its jobs bucket gs://{} keeps the jobs' records",
                    t.names.jobs_bucket
                ),
                None => format!(
                    "{name} does not exist (it was deleted, or never made): `kinetic up` makes it"
                ),
            },
        ),
        Some(c) if c.status.is_usable() => None,
        Some(c) if c.status.is_settling() => Some(format!(
            "{name} is still being created ({}): `kinetic up` finishes it (run it again if it stopped; it waits), then try again",
            c.status
        )),
        Some(c) if c.status == kinetic_infra_gcp::model::ResourceStatus::Stopping => Some(format!(
            "{name} is being deleted ({}): `kinetic up` makes it again once it is gone",
            c.status
        )),
        Some(c) => Some(format!(
            "{name} is {}{}: `kinetic down`, then `kinetic up`",
            c.status,
            if c.status_message.is_empty() {
                String::new()
            } else {
                format!(" ({})", c.status_message)
            }
        )),
    }
}
