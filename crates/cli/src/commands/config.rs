//! `kinetic config [show]`: every setting, where each came from, and the
//! names derived from project, zone and cluster. The settings and their
//! order are the table of keys' (`kinetic_core::settings::KEYS`, through
//! `Settings::entries`).

use kinetic_core::config::ProfileSelection;
use kinetic_core::settings::{SettingEntry, SettingKey, Settings};
use serde_json::{Map, Value, json};

use crate::engine::Invocation;
use crate::error::CliError;
use crate::render::{Output, table};

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

pub(crate) fn run(args: &ConfigArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    match args.command {
        None | Some(ConfigCommand::Show) => show(inv, out),
    }
}

fn show(inv: &Invocation, out: &Output) -> Result<(), CliError> {
    let settings = inv.settings(&inv.args())?;
    Ok(out.either(&to_json(&settings), &render(&settings))?)
}

/// `{"profile": …, "profiles_file": PATH, "derived": {…}|null}` and, per
/// setting, `{"value": …, "source": {…}}` or `null` when unset.
fn to_json(settings: &Settings) -> Value {
    let mut m = Map::new();
    m.insert(
        "profile".into(),
        serde_json::to_value(&settings.profile).unwrap_or(Value::Null),
    );
    for entry in settings.entries() {
        let value = match (&entry.value, &entry.source) {
            (Some(value), Some(source)) => json!({"value": value, "source": source}),
            _ => Value::Null,
        };
        m.insert(entry.key.to_owned(), value);
    }
    m.insert(
        "profiles_file".into(),
        Value::String(settings.profiles_file.value.display().to_string()),
    );
    m.insert(
        "derived".into(),
        serde_json::to_value(settings.names()).unwrap_or(Value::Null),
    );
    Value::Object(m)
}

fn row(entry: &SettingEntry) -> Vec<String> {
    match (entry.text(), &entry.source) {
        (Some(value), Some(source)) => vec![entry.key.to_owned(), value, source.to_string()],
        _ => vec![
            entry.key.to_owned(),
            "(not set)".to_owned(),
            entry.unset.to_owned(),
        ],
    }
}

fn render(settings: &Settings) -> String {
    let mut s = String::new();
    match &settings.profile {
        Some(p) => {
            let why = match p.selected_by {
                ProfileSelection::Argument => "--profile",
                ProfileSelection::Env => SettingKey::Profile.env_var(),
                _ => "stored",
            };
            s.push_str(&format!("Active profile: {} ({why})\n", p.name));
        }
        None => s.push_str("No active profile.\n"),
    }
    s.push_str(&format!(
        "Profiles file: {}\n\n",
        settings.profiles_file.value.display()
    ));
    let rows: Vec<Vec<String>> = settings.entries().iter().map(row).collect();
    s.push_str(&table(&["SETTING", "VALUE", "SOURCE"], &rows));
    s.push('\n');

    match settings.names() {
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
