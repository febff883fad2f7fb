//! The profiles file as several commands change and show it (`kinetic
//! profile`, and `kinetic up`, which makes the cluster it built the active
//! profile), in one room so that commands never import each other.

use kinetic_core::config::{self as core_config, EnvLookup, Profile, ProfileError, ProfileStore};
use kinetic_core::settings::vars;
use serde_json::json;

use crate::engine::Invocation;
use crate::render;

/// A profile as the commands' `--json` shows it.
pub(crate) fn profile_json(p: &Profile, active: bool) -> serde_json::Value {
    json!({
        "name": p.name,
        "project": p.project,
        "zone": p.zone,
        "cluster": p.cluster,
        "namespace": p.namespace,
        "active": active,
    })
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
