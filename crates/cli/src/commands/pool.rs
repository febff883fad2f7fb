//! `kinetic pool add|list|remove`: the cluster's accelerator node pools,
//! built from the accelerator registry so that jobs' selectors match them.

use kinetic_infra_gcp::model;
use serde_json::json;

use crate::cloud::{apply, observe};
use crate::engine::{self, Invocation};
use crate::error::{CliError, core_infra_error};
use crate::flags::{InfraTarget, PoolArgs};
use crate::render::{self, Output};

/// Arguments of `kinetic pool`.
#[derive(Debug, clap::Args)]
pub(crate) struct PoolCommandArgs {
    #[command(subcommand)]
    command: PoolCommand,
}

#[derive(Debug, clap::Subcommand)]
enum PoolCommand {
    /// Add a node pool for an accelerator (nothing when one serves it already).
    Add(AddArgs),
    /// The cluster's node pools: accelerator, nodes now and how they scale.
    List(ListArgs),
    /// Remove a node pool by name.
    Remove(RemoveArgs),
}

#[derive(Debug, clap::Args)]
struct AddArgs {
    /// The accelerator (l4, a100x4, h100x8, v5litepod-4, v6e-8, `…:spot`).
    #[arg(long, value_name = "A")]
    accelerator: String,
    #[command(flatten)]
    pool: PoolArgs,
    #[command(flatten)]
    target: InfraTarget,
    /// Print the plan and change nothing.
    #[arg(long, alias = "preview")]
    dry_run: bool,
    /// Do not ask before changing anything.
    #[arg(long, short = 'y')]
    yes: bool,
}

#[derive(Debug, clap::Args)]
struct ListArgs {
    #[command(flatten)]
    target: InfraTarget,
}

#[derive(Debug, clap::Args)]
struct RemoveArgs {
    /// The pool's name (`kinetic pool list` shows them).
    name: String,
    #[command(flatten)]
    target: InfraTarget,
    /// Print the plan and change nothing.
    #[arg(long, alias = "preview")]
    dry_run: bool,
    /// Do not ask before deleting.
    #[arg(long, short = 'y')]
    yes: bool,
}

pub(crate) fn run(args: &PoolCommandArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    match &args.command {
        PoolCommand::Add(a) => add(a, inv, out),
        PoolCommand::List(a) => list(a, inv, out),
        PoolCommand::Remove(a) => remove(a, inv, out),
    }
}

fn add(args: &AddArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    let settings = inv.settings(&args.pool.settings_args(args.target.settings_args(inv)))?;
    let infra = engine::infra(&settings)?;
    let pool = args.pool.pool(&args.accelerator, &settings, &infra)?.ok_or_else(|| {
        CliError::usage(
            "--accelerator cpu: on-demand CPU jobs run on the cluster's default pool; give a GPU or TPU (l4, a100x4, v5litepod-4, …), or --spot for a pool of Spot CPU VMs",
        )
    })?;
    let observed = observe(&infra)?;
    let plan = model::plan_pool_add(infra.desired(), &observed, &pool).map_err(core_infra_error)?;
    apply(
        out,
        &infra,
        &plan,
        args.dry_run,
        args.yes,
        "kinetic pool add",
    )?
    .print(out)?;
    if !out.is_json() && !args.dry_run {
        render::info(&format!(
            "Jobs with --accelerator {} run on it; its nodes start when a job asks for them.",
            pool.accelerator
        ));
    }
    Ok(())
}

fn list(args: &ListArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    let settings = inv.settings(&args.target.settings_args(inv))?;
    let infra = engine::infra(&settings)?;
    let observed = observe(&infra)?;
    let report = model::status(infra.desired(), &observed);
    Ok(out.either(
        &json!({"cluster": report.cluster, "pools": report.pools}),
        &match report.cluster {
            None => format!(
                "{}: not created (kinetic up creates it).\n",
                infra.desired().target
            ),
            Some(_) => render::infra::pools(&report.pools),
        },
    )?)
}

fn remove(args: &RemoveArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    // Before any credentials or network: a name GKE cannot have.
    model::check_pool_name(&args.name).map_err(core_infra_error)?;
    let settings = inv.settings(&args.target.settings_args(inv))?;
    let infra = engine::infra(&settings)?;
    let observed = observe(&infra)?;
    let plan = model::plan_pool_remove(infra.desired(), &observed, &args.name)
        .map_err(core_infra_error)?;
    apply(
        out,
        &infra,
        &plan,
        args.dry_run,
        args.yes,
        &format!("kinetic pool remove {}", args.name),
    )?
    .print(out)
}
