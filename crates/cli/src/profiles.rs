//! The profiles file as several commands change and show it (`kinetic
//! profile`, and `kinetic up`, which makes the cluster it built the active
//! profile), in one room so that commands never import each other.

use kinetic_core::config::{self as core_config, EnvLookup, Profile, ProfileError, ProfileStore};
use kinetic_core::settings::vars;
use serde_json::json;

use crate::engine::Invocation;
use crate::render;

/// A profile as the commands' `--json` shows it.
/// A profile whose cluster was deleted has `cluster_deleted_at`.
pub(crate) fn profile_json(p: &Profile, active: bool) -> serde_json::Value {
    let mut v = json!({
        "name": p.name,
        "project": p.project,
        "zone": p.zone,
        "cluster": p.cluster,
        "namespace": p.namespace,
        "active": active,
    });
    if let Some(when) = p.cluster_deleted() {
        v["cluster_deleted_at"] = json!(when);
    }
    v
}

/// The profile's cluster as a person reads it: its name, and whether it
/// was deleted.
pub(crate) fn cluster_text(p: &Profile) -> String {
    match p.cluster_deleted() {
        Some(when) => format!(
            "{} (deleted by `kinetic down` at {when}; `kinetic up` makes it again)",
            p.cluster
        ),
        None => p.cluster.clone(),
    }
}

/// Warns when `KINETIC_PROFILE` names a profile other than `name`, which
/// it then overrides.
pub(crate) fn warn_if_overridden(env: &dyn EnvLookup, name: &str) {
    if let Some(env_name) = env.non_empty(vars::PROFILE)
        && env_name != name
    {
        render::warn(&format!(
            "KINETIC_PROFILE='{env_name}' is set and takes precedence over the active profile; \
             unset it to use '{name}'."
        ));
    }
}

/// Save `profile` and make it the active one, as `kinetic up` does for
/// the cluster it built. A profile of that name is updated in place, so
/// keys another tool stored in it are kept.
pub(crate) fn save_active(inv: &Invocation, profile: Profile) -> Result<Profile, ProfileError> {
    let path = core_config::profiles_path(inv.env())?;
    let mut store = ProfileStore::load(&path)?;
    let saved = match store.get(&profile.name) {
        Some(existing) => {
            let mut updated = existing.clone();
            updated.project = profile.project;
            updated.zone = profile.zone;
            updated.cluster = profile.cluster;
            updated.namespace = profile.namespace;
            updated.set_cluster_deleted(None);
            updated
        }
        None => profile,
    };
    store.upsert(saved.clone())?;
    store.set_current(&saved.name)?;
    store.save(&path)?;
    warn_if_overridden(inv.env(), &saved.name);
    Ok(saved)
}

/// Mark every profile that names the cluster `cluster` in `zone` of
/// `project` as naming a deleted cluster (`deleted`: when, as `kinetic
/// down` does), or clear the mark (`None`, as `kinetic up` does). The
/// names of the profiles changed; the file is written only when one is.
pub(crate) fn mark_cluster_deleted(
    inv: &Invocation,
    project: &str,
    zone: &str,
    cluster: &str,
    deleted: Option<&str>,
) -> Result<Vec<String>, ProfileError> {
    let path = core_config::profiles_path(inv.env())?;
    let mut store = ProfileStore::load(&path)?;
    let marked: Vec<Profile> = store
        .profiles()
        .filter(|p| p.names_cluster(project, zone, cluster))
        .filter(|p| p.cluster_deleted().is_some() != deleted.is_some())
        .cloned()
        .map(|mut p| {
            p.set_cluster_deleted(deleted);
            p
        })
        .collect();
    let names: Vec<String> = marked.iter().map(|p| p.name.clone()).collect();
    for p in marked {
        store.upsert(p)?;
    }
    if !names.is_empty() {
        store.save(&path)?;
    }
    Ok(names)
}

/// When the cluster `cluster` in `zone` of `project` was deleted, as a
/// profile naming it was marked by `kinetic down`.
pub(crate) fn cluster_deleted_at(
    inv: &Invocation,
    project: &str,
    zone: &str,
    cluster: &str,
) -> Option<String> {
    let (_, store) = inv.profiles().ok()?;
    store
        .profiles()
        .filter(|p| p.names_cluster(project, zone, cluster))
        .find_map(|p| p.cluster_deleted().map(str::to_owned))
}
