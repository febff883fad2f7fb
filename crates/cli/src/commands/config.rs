//! `kinetic config [show]`: the resolved project, zone, cluster and
//! namespace, where each came from, and the names derived from them.

use kinetic_core::config::{
    self as core_config, ConfigError, PartialConfig, ProcessEnv, ProfileSelection, ProfileStore,
    Setting,
};
use serde_json::Value;

use super::accelerators::table;
use crate::output::{CliError, Output, emit};

/// Arguments of `kinetic config`.
#[derive(Debug, clap::Args)]
pub(crate) struct ConfigArgs {
    #[command(subcommand)]
    command: Option<ConfigCommand>,
}

#[derive(Debug, clap::Subcommand)]
enum ConfigCommand {
    /// Show each setting with its source, and the derived names (the default).
    Show,
}

pub(crate) fn run(args: &ConfigArgs, profile: Option<&str>, out: &Output) -> Result<(), CliError> {
    match args.command {
        None | Some(ConfigCommand::Show) => show(profile, out),
    }
}

/// Map a configuration error to the CLI's exit codes: the user's input
/// (unknown profile) is a usage error, a broken profiles file a failure.
pub(crate) fn config_error(e: ConfigError) -> CliError {
    if e.is_invalid_input() {
        CliError::usage(e.to_string())
    } else {
        CliError::failed(e.to_string())
    }
}

fn show(profile: Option<&str>, out: &Output) -> Result<(), CliError> {
    let path =
        core_config::profiles_path(&ProcessEnv).map_err(|e| CliError::failed(e.to_string()))?;
    let store = ProfileStore::load(&path).map_err(|e| CliError::failed(e.to_string()))?;
    let args = match profile {
        Some(name) => core_config::ConfigArgs::new().profile(name),
        None => core_config::ConfigArgs::new(),
    };
    let cfg = core_config::resolve_partial(&args, &ProcessEnv, &store).map_err(config_error)?;
    let names = cfg.names();

    if out.is_json() {
        let mut v = serde_json::to_value(&cfg)
            .map_err(|e| CliError::failed(format!("could not encode the output as JSON: {e}")))?;
        if let Value::Object(m) = &mut v {
            m.insert(
                "profiles_file".into(),
                Value::String(path.display().to_string()),
            );
            m.insert(
                "derived".into(),
                serde_json::to_value(&names).unwrap_or(Value::Null),
            );
        }
        return out.json(&v);
    }

    emit(&render(&cfg, &path.display().to_string()))
}

fn render(cfg: &PartialConfig, profiles_file: &str) -> String {
    let mut s = String::new();
    match &cfg.profile {
        Some(p) => {
            let why = match p.selected_by {
                ProfileSelection::Argument => "--profile",
                ProfileSelection::Env => "KINETIC_PROFILE",
                _ => "stored",
            };
            s.push_str(&format!("Active profile: {} ({why})\n", p.name));
        }
        None => s.push_str("No active profile.\n"),
    }
    s.push_str(&format!("Profiles file: {profiles_file}\n\n"));

    let row = |name: &str, setting: Option<&Setting<String>>| match setting {
        Some(st) => vec![name.to_owned(), st.value.clone(), st.source.to_string()],
        None => vec![name.to_owned(), "(not set)".to_owned(), String::new()],
    };
    let rows = vec![
        row("project", cfg.project.as_ref()),
        row("zone", Some(&cfg.zone)),
        row("cluster", Some(&cfg.cluster)),
        row("namespace", Some(&cfg.namespace)),
        row("output_dir", cfg.output_dir.as_ref()),
        row("base_image_repo", Some(&cfg.base_image_repo)),
    ];
    s.push_str(&table(&["SETTING", "VALUE", "SOURCE"], &rows));
    s.push('\n');

    match cfg.names() {
        Some(n) => {
            let rows: Vec<Vec<String>> = [
                ("region", n.region),
                ("ar_location", n.ar_location),
                ("jobs_bucket", n.jobs_bucket),
                ("builds_bucket", n.builds_bucket),
                ("ar_repository", n.ar_repository),
                ("registry_prefix", n.registry_prefix),
                ("kube_context", n.kube_context),
                ("node_service_account", n.node_service_account),
                ("build_service_account", n.build_service_account),
                ("state_bucket", n.state_bucket_url),
            ]
            .into_iter()
            .map(|(k, v)| vec![k.to_owned(), v])
            .collect();
            s.push_str(&table(&["DERIVED", "NAME"], &rows));
        }
        None => s.push_str(
            "Derived names (buckets, registry) need a project: run 'kinetic profile create \
             NAME --project PROJECT' or set KINETIC_PROJECT.\n",
        ),
    }
    s.push_str(
        "\nPrecedence: --flag > KINETIC_* env var > active profile > default.\n\
         Manage profiles with 'kinetic profile create|list|show|use|delete'.\n",
    );
    s
}
