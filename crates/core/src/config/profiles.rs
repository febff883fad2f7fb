//! The profile store: named bundles of project/zone/cluster/namespace kept
//! in `~/.kinetic/profiles.json`, in exactly Kinetic's file format, so both
//! tools share one file.
//!
//! [`ProfileStore`] is a plain value with Kinetic's operations (`upsert`,
//! `set_current`, `clear_current`, `remove`, active-profile selection);
//! reading and writing the file are the only IO, in [`ProfileStore::load`]
//! and [`ProfileStore::save`] (atomic: a temporary file in the same
//! directory, then a rename).
//!
//! Keys this version does not know (a newer Kinetic's `state_backend`, say)
//! are kept and written back, so a round trip through this crate never
//! loses what another tool stored.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;
use serde_json::{Map, Value};

use super::{DEFAULT_CLUSTER, DEFAULT_NAMESPACE, DEFAULT_ZONE, EnvLookup, vars};

/// Profile names: an ASCII letter or digit, then up to 63 letters, digits, `-` or `_`.
static NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-zA-Z0-9][a-zA-Z0-9_\-]{0,63}$")
        .unwrap_or_else(|e| panic!("invalid built-in profile name pattern: {e}"))
});

/// Why a profile operation or the profiles file failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// The file exists but could not be read.
    #[error("Failed to read {}: {source}", path.display())]
    Read {
        /// The profiles file.
        path: PathBuf,
        /// The IO error.
        source: io::Error,
    },
    /// The file is not valid JSON.
    #[error("Failed to read {}: {source}", path.display())]
    InvalidJson {
        /// The profiles file.
        path: PathBuf,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// The JSON does not have the shape `{"current": …, "profiles": {…}}`.
    #[error("Malformed profiles file {}: {detail}", path.display())]
    MalformedFile {
        /// The profiles file.
        path: PathBuf,
        /// What is wrong (`expected object`, `'current' must be a string`…).
        detail: String,
    },
    /// One profile entry is not an object or lacks a required field.
    #[error("Malformed profile '{name}': {detail}")]
    MalformedProfile {
        /// The profile's name.
        name: String,
        /// What is wrong (`missing field 'project'`…).
        detail: String,
    },
    /// Writing the file failed.
    #[error("Failed to write {}: {source}", path.display())]
    Write {
        /// The profiles file.
        path: PathBuf,
        /// The IO error.
        source: io::Error,
    },
    /// The name does not match `^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$`.
    #[error(
        "Invalid profile name '{name}': must start with an alphanumeric character and \
         contain only letters, digits, '-', or '_' (max 64 chars)."
    )]
    InvalidName {
        /// The name as given.
        name: String,
    },
    /// No profile of that name is stored.
    #[error("Profile '{name}' does not exist. Run 'kinetic profile ls' to see available profiles.")]
    NotFound {
        /// The name asked for.
        name: String,
    },
    /// A profile of that name is stored and overwriting was not asked for.
    #[error(
        "Profile '{name}' already exists. Use --force to overwrite or 'kinetic profile rm' \
         to delete it first."
    )]
    AlreadyExists {
        /// The name asked for.
        name: String,
    },
    /// The profiles file's path holds something other than a regular file
    /// (a directory, a device, a FIFO…): it is neither read nor replaced.
    #[error("profiles file: {0} (set KINETIC_PROFILES_FILE to the path of a regular file)")]
    NotAFile(#[source] crate::files::NotReplaceable),
    /// Neither `KINETIC_PROFILES_FILE` nor `HOME` is set.
    #[error("Cannot locate the profiles file: set HOME, or KINETIC_PROFILES_FILE to its path.")]
    NoHome,
}

impl ProfileError {
    /// True when the caller's input is at fault (a bad or unknown name, a
    /// name already taken) rather than the file or the disk.
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            Self::InvalidName { .. } | Self::NotFound { .. } | Self::AlreadyExists { .. }
        )
    }
}

/// Check that `name` is a valid profile name (1–64 chars, see [`ProfileError::InvalidName`]).
///
/// # Errors
/// [`ProfileError::InvalidName`].
pub fn validate_profile_name(name: &str) -> Result<(), ProfileError> {
    if NAME.is_match(name) {
        Ok(())
    } else {
        Err(ProfileError::InvalidName {
            name: name.to_owned(),
        })
    }
}

/// The key of a profile whose cluster was deleted: when (RFC 3339).
pub const CLUSTER_DELETED_KEY: &str = "cluster_deleted_at";

/// An infrastructure target saved under a name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Profile {
    /// The profile's name (the key in the file).
    pub name: String,
    /// GCP project id.
    pub project: String,
    /// GCP zone.
    pub zone: String,
    /// GKE cluster name.
    pub cluster: String,
    /// Kubernetes namespace.
    pub namespace: String,
    /// Keys this version does not know, kept for the round trip.
    #[serde(skip)]
    extra: Map<String, Value>,
}

impl Profile {
    /// A profile for `project` with Kinetic's defaults: zone `us-central1-a`,
    /// cluster `kinetic-cluster`, namespace `default`.
    pub fn new(name: impl Into<String>, project: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            project: project.into(),
            zone: DEFAULT_ZONE.to_owned(),
            cluster: DEFAULT_CLUSTER.to_owned(),
            namespace: DEFAULT_NAMESPACE.to_owned(),
            extra: Map::new(),
        }
    }

    /// The same profile in another zone.
    #[must_use]
    pub fn zone(mut self, zone: impl Into<String>) -> Self {
        self.zone = zone.into();
        self
    }

    /// The same profile for another cluster.
    #[must_use]
    pub fn cluster(mut self, cluster: impl Into<String>) -> Self {
        self.cluster = cluster.into();
        self
    }

    /// The same profile in another namespace.
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// Keys of the stored entry this version does not interpret.
    pub fn extra(&self) -> &Map<String, Value> {
        &self.extra
    }

    /// When its cluster was deleted (`kinetic down`), if it was and has
    /// not been made again since: the profile names a cluster that does
    /// not exist. Stored as the key [`CLUSTER_DELETED_KEY`], which other
    /// readers of the file ignore.
    pub fn cluster_deleted(&self) -> Option<&str> {
        self.extra.get(CLUSTER_DELETED_KEY).and_then(Value::as_str)
    }

    /// Mark its cluster deleted at `when` (`Some`), or made again (`None`).
    pub fn set_cluster_deleted(&mut self, when: Option<&str>) {
        match when {
            Some(when) => {
                self.extra
                    .insert(CLUSTER_DELETED_KEY.to_owned(), Value::from(when));
            }
            None => {
                self.extra.remove(CLUSTER_DELETED_KEY);
            }
        }
    }

    /// Whether it names the cluster `cluster` in `zone` of `project`.
    pub fn names_cluster(&self, project: &str, zone: &str, cluster: &str) -> bool {
        self.project == project && self.zone == zone && self.cluster == cluster
    }

    fn from_json(name: &str, value: &Value) -> Result<Self, ProfileError> {
        let malformed = |detail: String| ProfileError::MalformedProfile {
            name: name.to_owned(),
            detail,
        };
        let Value::Object(fields) = value else {
            return Err(malformed("expected object".to_owned()));
        };
        let text = |key: &str| match fields.get(key) {
            None => Err(malformed(format!("missing field '{key}'"))),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(malformed(format!("field '{key}' must be a string"))),
        };
        let project = text("project")?;
        let zone = text("zone")?;
        let cluster = text("cluster")?;
        let namespace = match fields.get("namespace") {
            None | Some(Value::Null) => DEFAULT_NAMESPACE.to_owned(),
            Some(_) => text("namespace")?,
        };
        let extra = fields
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "project" | "zone" | "cluster" | "namespace"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(Self {
            name: name.to_owned(),
            project,
            zone,
            cluster,
            namespace,
            extra,
        })
    }

    fn to_json(&self) -> Value {
        let mut m = self.extra.clone();
        m.insert("cluster".into(), Value::String(self.cluster.clone()));
        m.insert("namespace".into(), Value::String(self.namespace.clone()));
        m.insert("project".into(), Value::String(self.project.clone()));
        m.insert("zone".into(), Value::String(self.zone.clone()));
        Value::Object(m)
    }
}

/// How the active profile was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProfileSelection {
    /// Named by the caller (CLI `--profile`).
    Argument,
    /// Named by `KINETIC_PROFILE`.
    Env,
    /// The file's `current` pointer.
    Stored,
}

/// The profile that applies to an invocation, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveProfile<'a> {
    /// The profile.
    pub profile: &'a Profile,
    /// How it was chosen.
    pub selected_by: ProfileSelection,
}

/// All saved profiles and the `current` pointer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProfileStore {
    current: Option<String>,
    profiles: BTreeMap<String, Profile>,
    /// Top-level keys this version does not know, kept for the round trip.
    extra: Map<String, Value>,
}

impl ProfileStore {
    /// An empty store (what a missing file reads as).
    pub fn new() -> Self {
        Self::default()
    }

    /// Read the store at `path`; a missing file is an empty store.
    ///
    /// # Errors
    /// [`ProfileError::Read`], [`ProfileError::InvalidJson`],
    /// [`ProfileError::MalformedFile`], [`ProfileError::MalformedProfile`],
    /// [`ProfileError::NotAFile`].
    pub fn load(path: &Path) -> Result<Self, ProfileError> {
        // A FIFO would block the read forever; a device is no profiles file.
        crate::files::replace_target(path).map_err(ProfileError::NotAFile)?;
        match std::fs::read_to_string(path) {
            Ok(text) => Self::from_json(&text, path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Self::new()),
            Err(source) => Err(ProfileError::Read {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// Write the store to `path` atomically, creating its directory: the
    /// text goes to `.profiles-XXXXXXXX.json.tmp` beside it (mode 0600 on
    /// Unix), which is then renamed over `path` (over the file a symlink at
    /// `path` leads to).
    ///
    /// # Errors
    /// [`ProfileError::Write`]; [`ProfileError::NotAFile`] when `path`
    /// holds a directory, a device or anything but a regular file.
    pub fn save(&self, path: &Path) -> Result<(), ProfileError> {
        let write_err = |source| ProfileError::Write {
            path: path.to_owned(),
            source,
        };
        // Never rename over a directory or a device; a symlinked file is
        // written through, its symlink kept.
        let target = crate::files::replace_target(path).map_err(ProfileError::NotAFile)?;
        let path = target.as_path();
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&dir).map_err(write_err)?;
        let (tmp, mut file) = create_temp(&dir).map_err(write_err)?;
        let written = file
            .write_all(self.to_json().as_bytes())
            .and_then(|()| file.sync_all())
            .and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(write_err(e));
        }
        Ok(())
    }

    /// Parse the file's text; `path` only names the file in errors.
    ///
    /// A `current` naming a missing profile reads as no current profile.
    ///
    /// # Errors
    /// As [`ProfileStore::load`], except [`ProfileError::Read`].
    pub fn from_json(text: &str, path: &Path) -> Result<Self, ProfileError> {
        let malformed = |detail: &str| ProfileError::MalformedFile {
            path: path.to_owned(),
            detail: detail.to_owned(),
        };
        let data: Value =
            serde_json::from_str(text).map_err(|source| ProfileError::InvalidJson {
                path: path.to_owned(),
                source,
            })?;
        let Value::Object(mut top) = data else {
            return Err(malformed("expected object"));
        };
        let current = match top.remove("current") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(_) => return Err(malformed("'current' must be a string")),
        };
        let raw = match top.remove("profiles") {
            None => Map::new(),
            Some(Value::Object(m)) => m,
            Some(_) => return Err(malformed("'profiles' must be an object")),
        };
        let mut profiles = BTreeMap::new();
        for (name, fields) in &raw {
            profiles.insert(name.clone(), Profile::from_json(name, fields)?);
        }
        let current = current.filter(|c| profiles.contains_key(c));
        Ok(Self {
            current,
            profiles,
            extra: top,
        })
    }

    /// The file's text, byte-identical to what Kinetic writes: Python's
    /// `json.dump(…, indent=2, sort_keys=True)` and a trailing newline.
    pub fn to_json(&self) -> String {
        let mut top = self.extra.clone();
        top.insert(
            "current".into(),
            self.current.clone().map_or(Value::Null, Value::String),
        );
        let profiles = self
            .profiles
            .iter()
            .map(|(name, p)| (name.clone(), p.to_json()))
            .collect();
        top.insert("profiles".into(), Value::Object(profiles));
        let mut text = crate::pyjson::to_string(&Value::Object(top));
        text.push('\n');
        text
    }

    /// Name of the stored current profile.
    pub fn current_name(&self) -> Option<&str> {
        self.current.as_deref()
    }

    /// The stored current profile.
    pub fn current(&self) -> Option<&Profile> {
        self.current.as_ref().and_then(|c| self.profiles.get(c))
    }

    /// The profile called `name`.
    pub fn get(&self, name: &str) -> Option<&Profile> {
        self.profiles.get(name)
    }

    /// The profile called `name`, or [`ProfileError::NotFound`].
    ///
    /// # Errors
    /// [`ProfileError::NotFound`].
    pub fn require(&self, name: &str) -> Result<&Profile, ProfileError> {
        self.profiles
            .get(name)
            .ok_or_else(|| ProfileError::NotFound {
                name: name.to_owned(),
            })
    }

    /// All profiles, sorted by name.
    pub fn profiles(&self) -> impl Iterator<Item = &Profile> {
        self.profiles.values()
    }

    /// Number of profiles.
    pub fn len(&self) -> usize {
        self.profiles.len()
    }

    /// True when no profile is saved.
    pub fn is_empty(&self) -> bool {
        self.profiles.is_empty()
    }

    /// Create or overwrite a profile. A new profile becomes current when no
    /// profile is current. Returns whether it is now the current one.
    ///
    /// # Errors
    /// [`ProfileError::InvalidName`].
    pub fn upsert(&mut self, profile: Profile) -> Result<bool, ProfileError> {
        validate_profile_name(&profile.name)?;
        let name = profile.name.clone();
        let is_new = !self.profiles.contains_key(&name);
        self.profiles.insert(name.clone(), profile);
        if self.current.is_none() && is_new {
            self.current = Some(name.clone());
        }
        Ok(self.current.as_deref() == Some(name.as_str()))
    }

    /// `kinetic profile create`: like [`ProfileStore::upsert`], but an
    /// existing profile is only replaced when `overwrite` is set.
    ///
    /// # Errors
    /// [`ProfileError::InvalidName`], [`ProfileError::AlreadyExists`].
    pub fn create(&mut self, profile: Profile, overwrite: bool) -> Result<bool, ProfileError> {
        validate_profile_name(&profile.name)?;
        if !overwrite && self.profiles.contains_key(&profile.name) {
            return Err(ProfileError::AlreadyExists { name: profile.name });
        }
        self.upsert(profile)
    }

    /// Make `name` the current profile.
    ///
    /// # Errors
    /// [`ProfileError::NotFound`].
    pub fn set_current(&mut self, name: &str) -> Result<(), ProfileError> {
        self.require(name)?;
        self.current = Some(name.to_owned());
        Ok(())
    }

    /// Clear the current pointer; returns the previous current name.
    pub fn clear_current(&mut self) -> Option<String> {
        self.current.take()
    }

    /// Delete a profile; if it was current, no profile is current afterwards
    /// (another one is never picked).
    ///
    /// # Errors
    /// [`ProfileError::NotFound`].
    pub fn remove(&mut self, name: &str) -> Result<Profile, ProfileError> {
        let removed = self
            .profiles
            .remove(name)
            .ok_or_else(|| ProfileError::NotFound {
                name: name.to_owned(),
            })?;
        if self.current.as_deref() == Some(name) {
            self.current = None;
        }
        Ok(removed)
    }

    /// The profile that applies: `explicit` (CLI `--profile`) >
    /// `KINETIC_PROFILE` > the stored current one. Empty names count as unset.
    ///
    /// # Errors
    /// [`ProfileError::NotFound`] when a name is given (by argument or
    /// environment) that is not stored.
    pub fn active(
        &self,
        explicit: Option<&str>,
        env: &dyn EnvLookup,
    ) -> Result<Option<ActiveProfile<'_>>, ProfileError> {
        let named = match explicit.filter(|n| !n.is_empty()) {
            Some(n) => Some((n.to_owned(), ProfileSelection::Argument)),
            None => env
                .non_empty(vars::PROFILE)
                .map(|n| (n, ProfileSelection::Env)),
        };
        if let Some((name, selected_by)) = named {
            let profile = self.require(&name)?;
            return Ok(Some(ActiveProfile {
                profile,
                selected_by,
            }));
        }
        Ok(self.current().map(|profile| ActiveProfile {
            profile,
            selected_by: ProfileSelection::Stored,
        }))
    }
}

/// Where the profiles file is: `KINETIC_PROFILES_FILE` if set and not
/// empty, else `$HOME/.kinetic/profiles.json` ([`crate::settings::profiles_file`]).
///
/// # Errors
/// [`ProfileError::NoHome`] when neither is set.
pub fn profiles_path(env: &dyn EnvLookup) -> Result<PathBuf, ProfileError> {
    crate::settings::profiles_file(env).map(|s| s.value)
}

/// Create `.profiles-XXXXXXXX.json.tmp` in `dir`, never reusing a name.
fn create_temp(dir: &Path) -> io::Result<(PathBuf, std::fs::File)> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut last = None;
    for _ in 0..16 {
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let path = dir.join(format!(".profiles-{}.json.tmp", &suffix[..8]));
        match options.open(&path) {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("could not create a temporary file")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_files_are_unique_and_private() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let (a, _) = create_temp(dir.path())?;
        let (b, _) = create_temp(dir.path())?;
        assert_ne!(a, b);
        let name = a.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        assert!(
            name.starts_with(".profiles-") && name.ends_with(".json.tmp"),
            "{name}"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&a)?.permissions().mode() & 0o777, 0o600);
        }
        Ok(())
    }

    #[test]
    fn profile_json_keeps_unknown_keys() -> Result<(), ProfileError> {
        let v = serde_json::json!({"project": "p", "zone": "z", "cluster": "c", "state_backend": "gcs"});
        let p = Profile::from_json("dev", &v)?;
        assert_eq!(p.namespace, "default");
        assert_eq!(p.extra().get("state_backend"), Some(&Value::from("gcs")));
        let back = p.to_json();
        assert_eq!(back["state_backend"], "gcs");
        assert_eq!(back["namespace"], "default");
        Ok(())
    }
}
