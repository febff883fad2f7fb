//! `kinetic profile list|show|create|use|unset|delete`: manage the named
//! targets in the profiles file Kinetic also reads (`ls` and `rm` work too).
//!
//! Nothing prompts: a value `create` needs and cannot find in its flags or
//! `KINETIC_*` variables is a usage error naming the flag.

use std::path::Path;

use kinetic_core::config::{self as core_config, EnvLookup, Profile, ProfileError, ProfileStore};
use kinetic_core::settings::vars;
use serde_json::json;

use crate::engine::Invocation;
use crate::error::{CliError, profile_error};
use crate::profiles::{cluster_text, profile_json, warn_if_overridden};
use crate::render::{self, Output, emit, key_values, table};

/// Arguments of `kinetic profile`.
#[derive(Debug, clap::Args)]
pub(crate) struct ProfileArgs {
    #[command(subcommand)]
    command: ProfileCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ProfileCommand {
    /// List saved profiles; `*` marks the one in effect.
    #[command(visible_alias = "ls")]
    List,
    /// Show a profile's settings (default: the one in effect).
    Show {
        /// Profile name.
        name: Option<String>,
    },
    /// Save a profile; the first one saved becomes active.
    Create(CreateArgs),
    /// Make a profile the active one.
    Use {
        /// Profile name.
        name: String,
    },
    /// Clear the active-profile pointer; saved profiles are kept.
    Unset,
    /// Delete a profile (no other profile becomes active).
    #[command(visible_alias = "rm")]
    Delete {
        /// Profile name.
        name: String,
        /// Accepted for compatibility with Kinetic; nothing prompts.
        #[arg(short, long)]
        yes: bool,
    },
}

#[derive(Debug, clap::Args)]
struct CreateArgs {
    /// Profile name: a letter or digit, then up to 63 letters, digits, '-' or '_'.
    name: String,
    /// GCP project id [env: KINETIC_PROJECT] (required).
    #[arg(long)]
    project: Option<String>,
    /// GCP zone [env: KINETIC_ZONE] [default: us-central1-a].
    #[arg(long)]
    zone: Option<String>,
    /// GKE cluster name [env: KINETIC_CLUSTER] [default: kinetic-cluster].
    #[arg(long)]
    cluster: Option<String>,
    /// Kubernetes namespace [env: KINETIC_NAMESPACE] [default: default].
    #[arg(long)]
    namespace: Option<String>,
    /// Overwrite an existing profile with the same name.
    #[arg(long)]
    force: bool,
}

pub(crate) fn run(args: &ProfileArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    let path = core_config::profiles_path(inv.env()).map_err(profile_error)?;
    let store = ProfileStore::load(&path).map_err(profile_error)?;
    let env = inv.env();
    match &args.command {
        ProfileCommand::List => list(&store, env, out),
        ProfileCommand::Show { name } => show(&store, env, name.as_deref(), out),
        ProfileCommand::Create(c) => create(store, env, &path, c, out),
        ProfileCommand::Use { name } => use_profile(store, env, &path, name, out),
        ProfileCommand::Unset => unset(store, env, &path, out),
        ProfileCommand::Delete { name, yes: _ } => delete(store, &path, name, out),
    }
}

/// The profile in effect for this invocation: `KINETIC_PROFILE` if set,
/// else the stored pointer. A `KINETIC_PROFILE` naming no profile is an
/// error for the caller to report or tolerate.
fn effective<'a>(
    store: &'a ProfileStore,
    env: &dyn EnvLookup,
) -> Result<Option<&'a Profile>, ProfileError> {
    store.active(None, env).map(|a| a.map(|a| a.profile))
}

fn profile_text(p: &Profile) -> String {
    format!(
        "Profile: {}\n{}",
        p.name,
        key_values(&[
            ("project", p.project.clone()),
            ("zone", p.zone.clone()),
            ("cluster", cluster_text(p)),
            ("namespace", p.namespace.clone()),
        ])
    )
}

fn list(store: &ProfileStore, env: &dyn EnvLookup, out: &Output) -> Result<(), CliError> {
    let effective_name = match effective(store, env) {
        Ok(p) => p.map(|p| p.name.clone()),
        Err(e) => {
            render::warn(&format!("{e} (KINETIC_PROFILE is ignored in this listing)"));
            store.current_name().map(str::to_owned)
        }
    };
    let is_active = |p: &Profile| effective_name.as_deref() == Some(p.name.as_str());
    if out.is_json() {
        let profiles: Vec<_> = store
            .profiles()
            .map(|p| profile_json(p, is_active(p)))
            .collect();
        return Ok(out.json(&json!({
            "current": store.current_name(),
            "active": effective_name,
            "profiles": profiles,
        }))?);
    }
    if store.is_empty() {
        return Ok(emit(
            "No profiles saved. Create one with 'kinetic profile create NAME --project PROJECT'.\n",
        )?);
    }
    let rows: Vec<Vec<String>> = store
        .profiles()
        .map(|p| {
            vec![
                if is_active(p) { "*" } else { "" }.to_owned(),
                p.name.clone(),
                p.project.clone(),
                p.zone.clone(),
                match p.cluster_deleted() {
                    Some(_) => format!("{} (deleted)", p.cluster),
                    None => p.cluster.clone(),
                },
                p.namespace.clone(),
            ]
        })
        .collect();
    let mut text = table(
        &["", "NAME", "PROJECT", "ZONE", "CLUSTER", "NAMESPACE"],
        &rows,
    );
    text.push_str(&match (&effective_name, store.current_name()) {
        (Some(e), stored) if stored != Some(e.as_str()) => format!(
            "Active profile: {e} (override by KINETIC_PROFILE; stored: {})\n",
            stored.unwrap_or("none")
        ),
        (Some(e), _) => match store.get(e).and_then(Profile::cluster_deleted) {
            Some(when) => format!(
                "Active profile: {e} (its cluster was deleted by `kinetic down` at {when}; `kinetic up` makes it again)\n"
            ),
            None => format!("Active profile: {e}\n"),
        },
        (None, _) => "No active profile. Run 'kinetic profile use NAME'.\n".to_owned(),
    });
    Ok(emit(&text)?)
}

fn show(
    store: &ProfileStore,
    env: &dyn EnvLookup,
    name: Option<&str>,
    out: &Output,
) -> Result<(), CliError> {
    let active_name = effective(store, env).ok().flatten().map(|p| p.name.clone());
    let profile = match name {
        Some(n) => store.require(n).map_err(profile_error)?,
        None => effective(store, env)
            .map_err(profile_error)?
            .ok_or_else(|| {
                CliError::failed(
                    "No active profile. Pass a NAME or run 'kinetic profile use NAME'.",
                )
            })?,
    };
    let active = active_name.as_deref() == Some(profile.name.as_str());
    if out.is_json() {
        return Ok(out.json(&profile_json(profile, active))?);
    }
    Ok(emit(&profile_text(profile))?)
}

fn create(
    mut store: ProfileStore,
    env: &dyn EnvLookup,
    path: &Path,
    args: &CreateArgs,
    out: &Output,
) -> Result<(), CliError> {
    // A flag's value, else the non-empty `KINETIC_*` variable.
    let flag_or_env =
        |flag: &Option<String>, var: &str| flag.clone().or_else(|| env.non_empty(var));
    core_config::validate_profile_name(&args.name).map_err(profile_error)?;
    let project = flag_or_env(&args.project, vars::PROJECT).ok_or_else(|| {
        CliError::usage(
            "missing --project: pass --project PROJECT or set KINETIC_PROJECT \
             (kinetic profile create does not prompt)",
        )
    })?;
    if project.is_empty() {
        return Err(CliError::usage(
            "invalid --project '': the GCP project id must not be empty",
        ));
    }
    let mut profile = Profile::new(args.name.clone(), project);
    if let Some(zone) = flag_or_env(&args.zone, vars::ZONE) {
        profile = profile.zone(zone);
    }
    if let Some(cluster) = flag_or_env(&args.cluster, vars::CLUSTER) {
        profile = profile.cluster(cluster);
    }
    if let Some(namespace) = flag_or_env(&args.namespace, vars::NAMESPACE) {
        profile = profile.namespace(namespace);
    }
    let became_current = store
        .create(profile.clone(), args.force)
        .map_err(profile_error)?;
    store.save(path).map_err(profile_error)?;

    if out.is_json() {
        return Ok(out.json(&json!({
            "saved": profile_json(&profile, became_current),
            "active": became_current,
        }))?);
    }
    let name = &args.name;
    let next = if became_current {
        format!("Profile '{name}' is now active.")
    } else {
        format!("Run 'kinetic profile use {name}' to activate it.")
    };
    Ok(emit(&format!(
        "Saved profile '{name}'.\n{next}\n{}",
        profile_text(&profile)
    ))?)
}

fn use_profile(
    mut store: ProfileStore,
    env: &dyn EnvLookup,
    path: &Path,
    name: &str,
    out: &Output,
) -> Result<(), CliError> {
    store.set_current(name).map_err(profile_error)?;
    store.save(path).map_err(profile_error)?;
    warn_if_overridden(env, name);
    let profile = store.require(name).map_err(profile_error)?;
    if out.is_json() {
        return Ok(out.json(&json!({ "active": profile_json(profile, true) }))?);
    }
    Ok(emit(&format!(
        "Active profile: {name}\n{}",
        profile_text(profile)
    ))?)
}

/// Warn when `KINETIC_PROFILE` names another profile than `name`, the
/// one just made active: it still takes precedence.
fn unset(
    mut store: ProfileStore,
    env: &dyn EnvLookup,
    path: &Path,
    out: &Output,
) -> Result<(), CliError> {
    let previous = store.clear_current();
    if previous.is_some() {
        store.save(path).map_err(profile_error)?;
    }
    if let Some(env_name) = env.non_empty(vars::PROFILE) {
        render::warn(&format!(
            "KINETIC_PROFILE='{env_name}' is set; unset it in your shell to fully clear the \
             active profile."
        ));
    }
    if out.is_json() {
        return Ok(out.json(&json!({ "previous": previous }))?);
    }
    Ok(emit(&match previous {
        Some(p) => format!("Cleared active profile (was '{p}').\n"),
        None => "No active profile to unset.\n".to_owned(),
    })?)
}

fn delete(mut store: ProfileStore, path: &Path, name: &str, out: &Output) -> Result<(), CliError> {
    let was_active = store.current_name() == Some(name);
    let removed = store.remove(name).map_err(profile_error)?;
    store.save(path).map_err(profile_error)?;
    if out.is_json() {
        return Ok(out.json(&json!({
            "removed": profile_json(&removed, false),
            "was_active": was_active,
        }))?);
    }
    let mut text = format!(
        "Removed profile '{name}' ({}/{}/{}).\n",
        removed.project, removed.zone, removed.cluster
    );
    if was_active {
        text.push_str("No profile is active now; run 'kinetic profile use NAME' to pick one.\n");
    }
    Ok(emit(&text)?)
}
