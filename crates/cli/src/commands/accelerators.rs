//! `kinetic accelerators`: the GPU and TPU registry in preference order, and
//! `kinetic accelerators resolve SPEC` to see what one spelling schedules on.

use kinetic_core::accelerators::{
    AcceleratorSpec, Category, gpus_by_preference, tpus_by_preference,
};
use kinetic_core::settings::{DEFAULT_BACKEND, cluster_backend};
use serde_json::json;

use crate::error::CliError;
use crate::render::{self, Output, emit, key_values, table};

/// Arguments of `kinetic accelerators`.
#[derive(Debug, clap::Args)]
pub(crate) struct AcceleratorsArgs {
    #[command(subcommand)]
    command: Option<AcceleratorsCommand>,
}

#[derive(Debug, clap::Subcommand)]
enum AcceleratorsCommand {
    /// List supported GPUs and TPUs, best first (the default).
    List,
    /// Resolve one accelerator spelling (`l4`, `gpu:a100x4`, `tpu-v5e-8`,
    /// `v6e-8:spot`, `cpu`) to what the job schedules on.
    Resolve {
        /// The accelerator spelling.
        spec: String,
        /// Ask for Spot VMs (same as a `:spot` suffix).
        #[arg(long)]
        spot: bool,
    },
}

pub(crate) fn run(args: &AcceleratorsArgs, out: &Output) -> Result<(), CliError> {
    match &args.command {
        None | Some(AcceleratorsCommand::List) => list(out),
        Some(AcceleratorsCommand::Resolve { spec, spot }) => resolve(spec, *spot, out),
    }
}

fn list(out: &Output) -> Result<(), CliError> {
    if out.is_json() {
        let gpus: Vec<_> = gpus_by_preference().collect();
        let tpus: Vec<_> = tpus_by_preference().collect();
        return Ok(out.json(&json!({
            "gpus": gpus,
            "tpus": tpus,
            "backends": {
                "cpu": DEFAULT_BACKEND,
                "gpu": cluster_backend(1),
                "tpu_single_host": cluster_backend(1),
                "tpu_multi_host": cluster_backend(2),
            },
        }))?);
    }
    let join = |items: Vec<String>| items.join(", ");
    let gpu_rows: Vec<Vec<String>> = gpus_by_preference()
        .map(|g| {
            vec![
                g.name.to_owned(),
                join(g.counts.iter().map(|s| s.count.to_string()).collect()),
                join(g.counts.iter().map(|s| s.machine_type.to_owned()).collect()),
                cluster_backend(1).to_owned(),
            ]
        })
        .collect();
    let tpu_rows: Vec<Vec<String>> = tpus_by_preference()
        .map(|t| {
            let name = match t.alias {
                Some(alias) => format!("{} ({alias})", t.name),
                None => t.name.to_owned(),
            };
            vec![
                name,
                join(t.slices.iter().map(|s| s.chips.to_string()).collect()),
                join(t.slices.iter().map(|s| s.topology.to_owned()).collect()),
                join(t.slices.iter().map(|s| s.num_hosts.to_string()).collect()),
                join(
                    t.slices
                        .iter()
                        .map(|s| cluster_backend(s.num_hosts).to_owned())
                        .collect(),
                ),
            ]
        })
        .collect();
    let mut text = String::from("GPUs\n");
    text.push_str(&table(
        &["NAME", "COUNTS", "MACHINE TYPES", "BACKEND"],
        &gpu_rows,
    ));
    text.push_str("\nTPUs\n");
    text.push_str(&table(
        &["NAME", "CHIPS", "TOPOLOGIES", "HOSTS", "BACKENDS"],
        &tpu_rows,
    ));
    let prose = "\nSpell one as 'gpu:NAME', 'gpu:NAMExN', 'tpu:NAME', 'tpu:NAME-CHIPS' or \
         'tpu:NAME-TOPOLOGY', add ':spot' for Spot VMs, or use 'cpu'.\n\
         See what a spelling means with 'kinetic accelerators resolve SPEC'.\n\n\
         Where they run: CPU jobs on the local backend unless one is named; GPUs and \
         single-host TPU slices on gke (one Job) once a cluster is configured; \
         multi-host TPU slices on pathways (one LeaderWorkerSet across the slice's \
         hosts). --backend NAME sends any accelerator to NAME.\n";
    for line in prose.lines() {
        text.push_str(&render::wrap("", "", line));
    }
    Ok(emit(&text)?)
}

fn resolve(spec: &str, spot: bool, out: &Output) -> Result<(), CliError> {
    let parsed =
        AcceleratorSpec::parse_with_spot(spec, spot).map_err(|e| CliError::usage(e.to_string()))?;
    let d = parsed.details();
    let backend = if parsed.category() == Category::Cpu {
        DEFAULT_BACKEND
    } else {
        cluster_backend(parsed.num_hosts())
    };
    if out.is_json() {
        let mut v = serde_json::to_value(&d)
            .map_err(|e| CliError::failed(format!("cannot encode {spec}: {e}")))?;
        if let Some(o) = v.as_object_mut() {
            o.insert("backend".into(), json!(backend));
        }
        return Ok(out.json(&v)?);
    }
    let pairs = |m: &std::collections::BTreeMap<String, String>| {
        if m.is_empty() {
            "(none)".to_owned()
        } else {
            m.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let tolerations = if d.tolerations.is_empty() {
        "(none)".to_owned()
    } else {
        d.tolerations
            .iter()
            .map(|t| match &t.value {
                Some(v) => format!("{}={v}:{} ({})", t.key, t.effect, t.operator),
                None => format!("{}:{} ({})", t.key, t.effect, t.operator),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut rows: Vec<(&str, String)> = vec![
        ("spec", d.spec.clone()),
        ("category", d.category.to_string()),
        ("name", d.name.to_owned()),
    ];
    if let Some(count) = d.count {
        rows.push(("count", count.to_string()));
    }
    if let Some(chips) = d.chips {
        rows.push(("chips", chips.to_string()));
    }
    if let Some(topology) = d.topology {
        rows.push(("topology", topology.to_owned()));
    }
    if let Some(machine_type) = d.machine_type {
        rows.push(("machine_type", machine_type.to_owned()));
    }
    if let Some(gke) = d.gke_accelerator {
        rows.push(("gke_accelerator", gke.to_owned()));
    }
    rows.extend([
        ("node_selector", pairs(&d.node_selector)),
        ("tolerations", tolerations),
        ("resources", pairs(&d.resources)),
        ("num_hosts", d.num_hosts.to_string()),
        ("multi_host", d.multi_host.to_string()),
        ("spot", d.spot.to_string()),
        ("jax_platform", d.jax_platform.to_owned()),
        ("backend", backend.to_owned()),
    ]);
    Ok(emit(&key_values(&rows))?)
}
