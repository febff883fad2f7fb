//! `kinetic up`, `down`, `status` and `doctor`: the cluster's
//! infrastructure, planned by `kinetic_core::infra` from what the cloud
//! holds (read back by `kinetic-infra-gcp`), printed, confirmed, carried
//! out. No state file: running a command again after it stopped finishes
//! the job.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_core::infra::{self, Observed, Plan, PoolRequest, PoolSpec};
use kinetic_core::settings::{Settings, SettingsArgs};
use kinetic_infra_gcp::GcpInfra;
use serde_json::json;

use super::image::TargetArgs;
use crate::engine::{self, Invocation};
use crate::error::{CliError, core_infra_error, infra_error};
use crate::render::{self, Output, emit};

/// `--project`, `--zone`, `--cluster`, `--namespace`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct InfraTarget {
    #[command(flatten)]
    target: TargetArgs,
    /// Namespace jobs run in: the `kinetic` service account is made there
    /// (also `KINETIC_NAMESPACE`).
    #[arg(long)]
    namespace: Option<String>,
}

impl InfraTarget {
    pub(crate) fn settings_args(&self, inv: &Invocation) -> SettingsArgs {
        let args = self.target.settings_args(inv);
        match &self.namespace {
            Some(ns) => args.namespace(ns),
            None => args,
        }
    }
}

/// What a pool is asked to be (`up --accelerator`, `pool add`).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct PoolArgs {
    /// Nodes kept even when idle (default 0: the pool scales to zero).
    /// For a multi-host TPU slice, a multiple of its hosts.
    #[arg(long, value_name = "N", default_value_t = 0)]
    min_nodes: u32,
    /// Most nodes (default: min + 10 for GPUs, min + one slice for TPUs).
    #[arg(long, value_name = "M")]
    max_nodes: Option<u32>,
    /// Spot VMs (cheaper, may be preempted); only jobs that ask for Spot
    /// run there (same as a `:spot` suffix).
    #[arg(long)]
    spot: bool,
    /// A Compute Engine reservation the nodes consume (also
    /// `KINETIC_RESERVATION`); not with --spot.
    #[arg(long, value_name = "NAME")]
    reservation: Option<String>,
}

impl PoolArgs {
    /// `args` with `--reservation`, when given.
    pub(crate) fn settings_args(&self, args: SettingsArgs) -> SettingsArgs {
        match &self.reservation {
            Some(r) => args.reservation(r),
            None => args,
        }
    }

    fn changed(&self) -> bool {
        self.min_nodes != 0 || self.max_nodes.is_some() || self.spot || self.reservation.is_some()
    }

    /// The pool for `accelerator` (`None` for `cpu`), named with a fresh
    /// suffix.
    pub(crate) fn pool(
        &self,
        accelerator: &str,
        settings: &Settings,
        infra: &GcpInfra,
    ) -> Result<Option<PoolSpec>, CliError> {
        let accel = AcceleratorSpec::parse_with_spot(accelerator, self.spot)
            .map_err(|e| CliError::usage(format!("--accelerator {accelerator}: {e}")))?;
        if matches!(accel, AcceleratorSpec::Cpu) {
            return Ok(None);
        }
        let mut request = PoolRequest::new(accel).min_nodes(self.min_nodes);
        if let Some(max) = self.max_nodes {
            request = request.max_nodes(max);
        }
        if let Some(r) = &settings.reservation {
            request = request.reservation(&r.value);
        }
        let suffix = format!(
            "{:04x}",
            RandomState::new().hash_one(std::time::SystemTime::now()) & 0xffff
        );
        PoolSpec::new(&infra.desired().target, &request, &suffix)
            .map(Some)
            .map_err(core_infra_error)
    }
}

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

/// The plan of a command that changes the cloud: print it, and unless
/// `dry_run`, ask (`yes` answers) and carry it out. `again` is the
/// command that finishes the job after a failure.
pub(crate) fn apply(
    out: &Output,
    infra: &GcpInfra,
    plan: &Plan,
    dry_run: bool,
    yes: bool,
    again: &str,
) -> Result<(), CliError> {
    let target = &infra.desired().target;
    let report = |applied: bool| json!({"target": target, "plan": plan, "dry_run": dry_run, "applied": applied});
    if !out.is_json() {
        emit(&render::infra::plan(target, plan))?;
    }
    if dry_run || plan.is_empty() {
        return if out.is_json() {
            out.json(&report(false))
        } else {
            Ok(())
        };
    }
    if !render::infra::confirm("Carry out this plan?", yes)? {
        return Err(CliError::failed("nothing was changed"));
    }
    let progress = render::infra::InfraProgress::new();
    let result = engine::runtime()?.block_on(infra.execute(plan, &progress));
    progress.finish();
    result.map_err(|e| {
        let e = infra_error(e);
        let text = format!("{e}; what was done stays done: run `{again}` again to finish");
        match e {
            CliError::Usage(_) => CliError::usage(text),
            CliError::Failed(_) => CliError::failed(text),
        }
    })?;
    if out.is_json() {
        out.json(&report(true))
    } else {
        emit("Done.\n")
    }
}

/// The infrastructure and what the cloud holds of it, all of it readable.
pub(crate) fn observe(infra: &GcpInfra) -> Result<Observed, CliError> {
    engine::runtime()?
        .block_on(infra.observe())
        .complete()
        .map_err(infra_error)
}

pub(crate) fn up(args: &UpArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    if args.accelerator.is_none() && args.pool.changed() {
        return Err(CliError::usage(
            "--min-nodes, --max-nodes, --spot and --reservation shape the pool of --accelerator: give --accelerator too (or use `kinetic pool add`)",
        ));
    }
    let settings = inv.settings(&args.pool.settings_args(args.target.settings_args(inv)))?;
    let infra = engine::infra(&settings)?;
    let first_pool = match &args.accelerator {
        Some(a) => args.pool.pool(a, &settings, &infra)?,
        None => None,
    };
    let observed = observe(&infra)?;
    let plan = infra::plan_up(infra.desired(), &observed, first_pool.as_ref())
        .map_err(core_infra_error)?;
    apply(out, &infra, &plan, args.dry_run, args.yes, "kinetic up")?;
    if !out.is_json() && !args.dry_run {
        render::info(&format!(
            "Jobs run on it with `--backend gke` (kubeconfig context {}); `kinetic status` shows it, `kinetic pool add --accelerator A` adds accelerators.",
            infra.desired().kube.context
        ));
    }
    Ok(())
}

pub(crate) fn down(args: &DownArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    let settings = inv.settings(&args.target.settings_args(inv))?;
    let infra = engine::infra(&settings)?;
    let observed = observe(&infra)?;
    let plan = infra::plan_down(infra.desired(), &observed, args.delete_buckets);
    apply(out, &infra, &plan, args.dry_run, args.yes, "kinetic down")
}

pub(crate) fn status(args: &StatusArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    let settings = inv.settings(&args.target.settings_args(inv))?;
    let infra = engine::infra(&settings)?;
    let observation = engine::runtime()?.block_on(infra.observe());
    let report = infra::status(infra.desired(), &observation.observed);
    let unreadable: Vec<(String, String)> = observation
        .unreadable
        .iter()
        .map(|(w, e)| (w.clone(), e.to_string()))
        .collect();
    out.either(
        &json!({"status": report, "complete": report.complete() && unreadable.is_empty(),
                "unreadable": unreadable.iter().map(|(w, e)| json!({"what": w, "error": e})).collect::<Vec<_>>()}),
        &render::infra::status(&report, &unreadable),
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
    let (observation, facts) = runtime.block_on(async {
        let observation = infra.observe().await;
        let facts = infra.doctor_facts(&observation, accelerator).await;
        (observation, facts)
    });
    let checks = infra::doctor(infra.desired(), &observation.observed, &facts);
    let failed = checks.iter().filter(|c| !c.ok).count();
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
