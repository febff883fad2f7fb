//! `kinetic up`, `down`, `status` and `doctor`: the cluster's
//! infrastructure, planned by `kinetic_infra_gcp::model` from what the cloud
//! holds (read back by `kinetic-infra-gcp`), printed, confirmed, carried
//! out. No state file: running a command again after it stopped finishes
//! the job.

use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_core::config as core_config;
use kinetic_infra_gcp::GcpInfra;
use kinetic_infra_gcp::model::{self};
use serde_json::{Value, json};

use crate::cloud::{apply, observe};
use crate::engine::{self, Invocation};
use crate::error::{CliError, core_infra_error, infra_error, profile_error};
use crate::flags::{InfraTarget, PoolArgs};
use crate::profiles;
use crate::render::{self, Output, emit};

/// Arguments of `kinetic up`.
#[derive(Debug, clap::Args)]
pub(crate) struct UpArgs {
    #[command(flatten)]
    target: InfraTarget,
    /// Also add a node pool for this accelerator (l4, a100x4, v5litepod-4,
    /// …) when the cluster has none yet; `cpu` adds none.
    #[arg(long, value_name = "A")]
    accelerator: Option<String>,
    #[command(flatten)]
    pool: PoolArgs,
    /// Print the plan and change nothing.
    #[arg(long, alias = "preview")]
    dry_run: bool,
    /// Do not ask before changing anything.
    #[arg(long, short = 'y')]
    yes: bool,
    /// Save the cluster's project, zone, cluster and namespace as this
    /// profile and make it the active one (default: the cluster's name).
    #[arg(long, value_name = "NAME")]
    profile_name: Option<String>,
    /// Save no profile.
    #[arg(long, conflicts_with = "profile_name")]
    no_profile: bool,
}

/// Arguments of `kinetic down`.
#[derive(Debug, clap::Args)]
pub(crate) struct DownArgs {
    #[command(flatten)]
    target: InfraTarget,
    /// Also delete the jobs and builds buckets with everything in them
    /// (kept by default).
    #[arg(long)]
    delete_buckets: bool,
    /// Print the plan and change nothing.
    #[arg(long, alias = "preview")]
    dry_run: bool,
    /// Do not ask before deleting anything.
    #[arg(long, short = 'y')]
    yes: bool,
}

/// Arguments of `kinetic status`.
#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    target: InfraTarget,
}

/// Arguments of `kinetic doctor`.
#[derive(Debug, clap::Args)]
pub(crate) struct DoctorArgs {
    #[command(flatten)]
    target: InfraTarget,
    /// Check that a node pool serves this accelerator (with `:spot` for Spot).
    #[arg(long, value_name = "A")]
    accelerator: Option<String>,
}

pub(crate) fn up(args: &UpArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    if args.accelerator.is_none() && args.pool.changed() {
        return Err(CliError::usage(
            "--min-nodes, --max-nodes, --spot and --reservation shape the pool of --accelerator: give --accelerator too (or use `kinetic pool add`)",
        ));
    }
    if let Some(name) = &args.profile_name {
        core_config::validate_profile_name(name).map_err(profile_error)?;
    }
    let settings = inv.settings(&args.pool.settings_args(args.target.settings_args(inv)))?;
    let infra = engine::infra(&settings)?;
    let first_pool = match &args.accelerator {
        Some(a) => args.pool.pool(a, &settings, &infra)?,
        None => None,
    };
    let observed = observe(&infra)?;
    let plan = model::plan_up(infra.desired(), &observed, first_pool.as_ref())
        .map_err(core_infra_error)?;
    let mut applied = apply(out, &infra, &plan, args.dry_run, args.yes, "kinetic up")?;
    if applied.declined() {
        return applied.print(out);
    }
    if !args.dry_run {
        // The cluster is there again: no profile names a deleted one.
        let t = &infra.desired().target;
        profiles::mark_cluster_deleted(inv, &t.project, &t.zone, &t.cluster, None)
            .map_err(profile_error)?;
    }
    let saved = if args.dry_run || args.no_profile {
        None
    } else {
        Some(save_profile(args, inv, &infra)?)
    };
    applied.report["profile"] = saved
        .as_ref()
        .map_or(Value::Null, |p| profiles::profile_json(p, true));
    if let (Some(p), false) = (&saved, out.is_json()) {
        emit(&format!(
            "Profile '{}' saved and made active (project {}, zone {}, cluster {}, namespace {}).\n",
            p.name, p.project, p.zone, p.cluster, p.namespace
        ))?;
    }
    applied.print(out)?;
    if !out.is_json() && !args.dry_run {
        render::info(&format!(
            "Jobs run on it with `--backend gke` (kubeconfig context {}); `kinetic status` shows it, `kinetic pool add --accelerator A` adds accelerators.",
            infra.desired().kube.context
        ));
    }
    Ok(())
}

/// The profile of the cluster `up` built (`--profile-name`, default the
/// cluster's name), saved and made the active one.
fn save_profile(
    args: &UpArgs,
    inv: &Invocation,
    infra: &GcpInfra,
) -> Result<core_config::Profile, CliError> {
    let t = &infra.desired().target;
    let name = args.profile_name.as_deref().unwrap_or(&t.cluster);
    let profile = core_config::Profile::new(name, &t.project)
        .zone(&t.zone)
        .cluster(&t.cluster)
        .namespace(&t.namespace);
    profiles::save_active(inv, profile).map_err(|e| {
        CliError::failed(format!(
            "the cluster is ready, but its profile could not be saved: {e}; save it with `kinetic profile create {name} --project {} --zone {} --cluster {} --namespace {} --force`",
            t.project, t.zone, t.cluster, t.namespace
        ))
    })
}

pub(crate) fn down(args: &DownArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    let settings = inv.settings(&args.target.settings_args(inv))?;
    let infra = engine::infra(&settings)?;
    let observed = observe(&infra)?;
    let mut plan = model::plan_down(infra.desired(), &observed, args.delete_buckets);
    let deletes_cluster = plan
        .actions
        .iter()
        .any(|a| matches!(a, model::Action::DeleteCluster { .. }));
    let serving = observed
        .cluster
        .as_ref()
        .is_some_and(|c| c.status.is_usable());
    if deletes_cluster && serving {
        // The jobs still running go with the cluster: the plan says which.
        let running = engine::runtime()?.block_on(crate::cloud::running_jobs(&settings, inv));
        plan.notes.push(match running {
            Ok(ids) if ids.is_empty() => "no job is running on the cluster".to_owned(),
            Ok(ids) => format!(
                "{} job(s) still running on the cluster stop with it: {}{} (`kinetic jobs list` shows them; their records stay in gs://{})",
                ids.len(),
                ids.iter().take(10).cloned().collect::<Vec<_>>().join(", "),
                if ids.len() > 10 { ", …" } else { "" },
                infra.desired().target.names.jobs_bucket
            ),
            Err(why) => format!("the jobs running on the cluster could not be listed: {why}"),
        });
    }
    let applied = apply(out, &infra, &plan, args.dry_run, args.yes, "kinetic down")?;
    if deletes_cluster && applied.applied() {
        let t = &infra.desired().target;
        let when = kinetic_core::record::UtcTimestamp::now().to_string();
        let marked =
            profiles::mark_cluster_deleted(inv, &t.project, &t.zone, &t.cluster, Some(&when))
                .map_err(profile_error)?;
        if !marked.is_empty() && !out.is_json() {
            render::info(&format!(
                "Profile(s) {} name the deleted cluster: marked so (`kinetic profile list` shows it); `kinetic up` makes the cluster again and clears the mark.",
                marked
                    .iter()
                    .map(|n| format!("'{n}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    applied.print(out)
}

pub(crate) fn status(args: &StatusArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    let settings = inv.settings(&args.target.settings_args(inv))?;
    let infra = engine::infra(&settings)?;
    let runtime = engine::runtime()?;
    runtime
        .block_on(infra.check_credentials())
        .map_err(infra_error)?;
    let observation = runtime.block_on(infra.observe());
    let report = model::status(infra.desired(), &observation.observed);
    let unreadable: Vec<(String, String)> = observation
        .unreadable
        .iter()
        .map(|(w, e)| (w.clone(), e.to_string()))
        .collect();
    // A cluster `kinetic down` deleted is said to be deleted, not missing.
    let t = &infra.desired().target;
    let deleted = report
        .cluster
        .is_none()
        .then(|| profiles::cluster_deleted_at(inv, &t.project, &t.zone, &t.cluster))
        .flatten();
    out.either(
        &json!({"status": report, "complete": report.complete() && unreadable.is_empty(),
                "cluster_deleted_at": deleted,
                "unreadable": unreadable.iter().map(|(w, e)| json!({"what": w, "error": e})).collect::<Vec<_>>()}),
        &render::infra::status(&report, &unreadable, deleted.as_deref()),
    )?;
    match unreadable.first() {
        Some((what, e)) => Err(CliError::failed(format!("{what} could not be read: {e}"))),
        None => Ok(()),
    }
}

pub(crate) fn doctor(args: &DoctorArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    let accelerator = args
        .accelerator
        .as_deref()
        .map(AcceleratorSpec::parse)
        .transpose()
        .map_err(|e| CliError::usage(format!("--accelerator: {e}")))?;
    let settings = inv.settings(&args.target.settings_args(inv))?;
    let infra = engine::infra(&settings)?;
    let runtime = engine::runtime()?;
    // The credentials gate the rest: without a token nothing is asked.
    let (observation, facts) = runtime.block_on(infra.doctor_observe(accelerator));
    let checks = model::doctor(infra.desired(), &observation.observed, &facts);
    // A warning blocks nothing; a check not run failed by its blocker.
    let failed = checks
        .iter()
        .filter(|c| c.state == model::CheckState::Fail)
        .count();
    out.either(
        &json!({"target": infra.desired().target, "ok": failed == 0, "checks": checks}),
        &render::infra::doctor(&checks),
    )?;
    if failed == 0 {
        Ok(())
    } else {
        Err(CliError::failed(format!(
            "{failed} check(s) failed: see the fixes above"
        )))
    }
}
