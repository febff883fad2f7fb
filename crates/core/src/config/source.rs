//! Provenance: a resolved value and where it came from ([`Setting`],
//! [`Source`]), and the profile that applied ([`ProfileRef`]).
//! [`crate::settings`] resolves every setting into these.

use std::fmt;

use serde::Serialize;
use serde::ser::SerializeMap;

use super::profiles::ProfileSelection;

/// Where a resolved value came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Source {
    /// Passed explicitly (API argument, CLI flag).
    Argument,
    /// The named environment variable.
    Env(&'static str),
    /// The named profile.
    Profile(String),
    /// The built-in default.
    Default,
}

impl fmt::Display for Source {
    /// `argument`, `env KINETIC_ZONE`, `profile 'dev'`, `default`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Argument => f.write_str("argument"),
            Self::Env(var) => write!(f, "env {var}"),
            Self::Profile(name) => write!(f, "profile '{name}'"),
            Self::Default => f.write_str("default"),
        }
    }
}

impl Serialize for Source {
    /// `{"kind": "env", "var": "KINETIC_ZONE"}`, `{"kind": "profile",
    /// "name": "dev"}`, `{"kind": "argument"}`, `{"kind": "default"}`.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut m = serializer.serialize_map(None)?;
        match self {
            Self::Argument => m.serialize_entry("kind", "argument")?,
            Self::Env(var) => {
                m.serialize_entry("kind", "env")?;
                m.serialize_entry("var", var)?;
            }
            Self::Profile(name) => {
                m.serialize_entry("kind", "profile")?;
                m.serialize_entry("name", name)?;
            }
            Self::Default => m.serialize_entry("kind", "default")?,
        }
        m.end()
    }
}

/// A resolved value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub struct Setting<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub source: Source,
}

impl<T> Setting<T> {
    /// A value with its source.
    pub fn new(value: T, source: Source) -> Self {
        Self { value, source }
    }
}

impl Setting<String> {
    /// The value as `&str`.
    pub fn as_str(&self) -> &str {
        &self.value
    }
}

/// The profile that applied, by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub struct ProfileRef {
    /// Its name.
    pub name: String,
    /// How it was chosen.
    pub selected_by: ProfileSelection,
}
