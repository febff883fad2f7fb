//! Environment variables a job takes from the submitting machine.
//!
//! Kinetic's capture rules, applied to an
//! [`EnvSnapshot`] (a map passed in, so tests never touch the process
//! environment; [`EnvSnapshot::from_process`] is the convenience):
//!
//! - an entry ending in `*` is a prefix pattern (`"*"` matches every name);
//! - an exact name is captured when set and silently skipped when not;
//! - a wildcard match skips the names of [`WILDCARD_BLOCKLIST`] unless the
//!   same name is also listed exactly ([`EnvWarning::BlocklistSkipped`]);
//! - a wildcard match also skips, silently, the names of [`SHELL_INTERNAL`]
//!   (`_`, `SHLVL`, `PWD`, `OLDPWD`), which every shell sets anew for each
//!   program it starts: captured, they would describe the client's shell,
//!   and a shell between the job's start and its interpreter (a pyenv shim,
//!   a wrapper script) replaces or drops them, so they never arrive as
//!   sent;
//! - captured names that look like credentials (`TOKEN`, `SECRET`, `KEY`,
//!   `PASSWORD`, `CREDENTIAL`, any case) are reported in one
//!   [`EnvWarning::CredentialLikeNames`].
//!
//! Beyond Kinetic, in SkyPilot's manner:
//!
//! - a **required** entry (CLI `--env NAME` or `--secret NAME`, no value)
//!   must be set locally; every missing one is named in one
//!   [`EnvError::MissingRequired`], raised by [`capture`] before anything is
//!   uploaded;
//! - a **literal** entry `NAME=VALUE` gives the value directly (it wins over
//!   a captured value of the same name; among literals the last wins).
//!
//! Values live in [`SecretValue`], whose `Debug` and `Display` print
//! `<redacted>`, which has no `Serialize`, and which yields its text only
//! through [`SecretValue::expose`]. [`CapturedEnv`] exposes names freely
//! (for `spec.json`) and values only as `SecretValue`s. No error or warning
//! ever carries a value.
//!
//! Names must match `[A-Za-z_][A-Za-z0-9_]*` ([`EnvName`]); environment
//! entries with other names are never captured by a wildcard
//! ([`EnvWarning::InvalidNamesSkipped`]).
//!
//! ```
//! use kinetic_core::env::{capture, EnvEntry, EnvSnapshot};
//!
//! let snapshot = EnvSnapshot::from_pairs([("HF_TOKEN", "hf_123"), ("WANDB_MODE", "offline")]);
//! let entries = [EnvEntry::parse_capture("WANDB_*")?, EnvEntry::parse_cli("HF_TOKEN")?];
//! let captured = capture(&entries, &snapshot)?;
//! assert_eq!(captured.names().map(|n| n.as_str()).collect::<Vec<_>>(), ["HF_TOKEN", "WANDB_MODE"]);
//! assert_eq!(format!("{captured:?}").contains("hf_123"), false);
//! # Ok::<(), kinetic_core::env::EnvError>(())
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Names a wildcard pattern never captures unless they are also listed
/// exactly (Kinetic's blocklist).
pub const WILDCARD_BLOCKLIST: [&str; 18] = [
    "PATH",
    "HOME",
    "PYTHONPATH",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "SHELL",
    "TMPDIR",
    "TEMP",
    "TMP",
    "HOSTNAME",
    "USER",
    "LOGNAME",
    "SSH_AUTH_SOCK",
    "KUBERNETES_SERVICE_HOST",
    "KERAS_BACKEND",
];

/// Names a shell sets itself for every program it starts; a wildcard
/// pattern never captures them (an exact entry still does).
pub const SHELL_INTERNAL: [&str; 4] = ["_", "SHLVL", "PWD", "OLDPWD"];

/// Upper-case fragments that make a name look like a credential.
pub const CREDENTIAL_FRAGMENTS: [&str; 5] = ["TOKEN", "SECRET", "KEY", "PASSWORD", "CREDENTIAL"];

/// What [`SecretValue`]'s `Debug` and `Display` print instead of the value.
pub const REDACTED: &str = "<redacted>";

/// The fewest characters a secret's value must have to be redacted from
/// what a job reports.
///
/// A shorter value cannot be a credential worth hiding, and replacing it
/// mangles the output: a one-character `WANDB_API_KEY=k` would turn every
/// `k` of every log line into [`REDACTED`]. Eight is the shortest a
/// memorised secret may be under NIST SP 800-63B (5.1.1.1), and every API
/// key or token this capture is meant for is far longer (20 characters
/// and up). CI systems keep the same kind of floor: the Azure Pipelines
/// agent's secret masker drops values shorter than its `MinSecretLength`.
/// A shorter value still reaches the job; the submitter is told once,
/// by name ([`EnvWarning::TooShortToRedact`]). The runner keeps the same
/// floor (`MIN_REDACTED_CHARS` in `runner/kinetic_runner/redaction.py`).
pub const MIN_REDACTED_CHARS: usize = 8;

/// Whether a secret's value is long enough to be redacted
/// ([`MIN_REDACTED_CHARS`], counted in characters).
pub fn redactable(value: &str) -> bool {
    value.chars().count() >= MIN_REDACTED_CHARS
}

/// A value that must not leak: `Debug` and `Display` print `<redacted>`,
/// there is no `Serialize`, and the text is only reachable through
/// [`SecretValue::expose`].
#[derive(Clone, PartialEq, Eq, Default)]
pub struct SecretValue(String);

impl SecretValue {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself. Every call site is a place where the value leaves
    /// this type: keep it out of logs, errors and stored files.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl From<String> for SecretValue {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for SecretValue {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

/// Why an environment entry or capture was refused. Never carries a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvError {
    /// A name is not `[A-Za-z_][A-Za-z0-9_]*`.
    #[error(
        "invalid environment variable name '{name}': a name is a letter or '_' followed by letters, digits or '_' ([A-Za-z_][A-Za-z0-9_]*)"
    )]
    InvalidName {
        /// The name as given.
        name: String,
    },
    /// A pattern's prefix is not a valid start of a name.
    #[error(
        "invalid environment variable pattern '{pattern}': a pattern is '*' or a name prefix followed by '*' (e.g. WANDB_*)"
    )]
    InvalidPattern {
        /// The pattern as given.
        pattern: String,
    },
    /// A `--secret NAME=VALUE`: a value on the command line shows in the
    /// process list and the shell's history.
    #[error(
        "--secret {name}=…: a secret's value on the command line shows in the process list and the shell history; set {name} in the environment and pass --secret {name}"
    )]
    SecretWithValue {
        /// The name given.
        name: String,
    },
    /// Required variables are not set on this machine.
    #[error(
        "required environment variable{} not set: {}; set {} locally or pass NAME=VALUE",
        if names.len() == 1 { " is" } else { "s are" },
        names.join(", "),
        if names.len() == 1 { "it" } else { "them" }
    )]
    MissingRequired {
        /// Every missing name, in the order they were declared.
        names: Vec<String>,
    },
}

/// A valid environment variable name: `[A-Za-z_][A-Za-z0-9_]*`.
///
/// Serialises as its string.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct EnvName(String);

impl EnvName {
    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True when the name contains a credential-like fragment
    /// ([`CREDENTIAL_FRAGMENTS`], any case).
    pub fn looks_like_credential(&self) -> bool {
        let upper = self.0.to_ascii_uppercase();
        CREDENTIAL_FRAGMENTS.iter().any(|frag| upper.contains(frag))
    }
}

fn is_valid_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn is_valid_prefix(s: &str) -> bool {
    s.is_empty() || is_valid_name(s)
}

impl FromStr for EnvName {
    type Err = EnvError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if is_valid_name(s) {
            Ok(Self(s.to_owned()))
        } else {
            Err(EnvError::InvalidName { name: s.to_owned() })
        }
    }
}

impl TryFrom<String> for EnvName {
    type Error = EnvError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        if is_valid_name(&s) {
            Ok(Self(s))
        } else {
            Err(EnvError::InvalidName { name: s })
        }
    }
}

impl std::borrow::Borrow<str> for EnvName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<EnvName> for String {
    fn from(name: EnvName) -> String {
        name.0
    }
}

impl fmt::Display for EnvName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One declaration of what to send to the job.
#[derive(Debug, Clone, PartialEq, Eq)]
// Exhaustive on purpose: the engine matches every variant, so a new
// one is a compile error there rather than a case it silently skips.
pub enum EnvEntry {
    /// Capture this name if it is set locally; skip it silently if not
    /// (Kinetic's `capture_env_vars` exact entry).
    Exact(EnvName),
    /// Capture every set name starting with this prefix, except the
    /// blocklist (`PREFIX*`; the empty prefix is `*`).
    Prefix(String),
    /// This name must be set locally (CLI `--env NAME`, or `--secret NAME`
    /// when `secret`: then it is not reported as credential-like, since the
    /// user said so already).
    Required {
        /// The name.
        name: EnvName,
        /// Declared as a secret.
        secret: bool,
    },
    /// Send this value (CLI `--env NAME=VALUE`).
    Literal(EnvName, SecretValue),
}

impl EnvEntry {
    /// Parses a Kinetic `capture_env_vars` entry: `NAME` (optional exact)
    /// or `PREFIX*` / `*` (pattern).
    pub fn parse_capture(entry: &str) -> Result<Self, EnvError> {
        match entry.strip_suffix('*') {
            Some(prefix) if is_valid_prefix(prefix) => Ok(Self::Prefix(prefix.to_owned())),
            Some(_) => Err(EnvError::InvalidPattern {
                pattern: entry.to_owned(),
            }),
            None => entry.parse().map(Self::Exact),
        }
    }

    /// Parses a CLI `--env` argument: `NAME=VALUE` (literal; the value may be
    /// empty or contain `=`), `PREFIX*` (pattern) or `NAME` (required).
    pub fn parse_cli(arg: &str) -> Result<Self, EnvError> {
        if let Some((name, value)) = arg.split_once('=') {
            // Only the name part goes into an error, never the value.
            return Ok(Self::Literal(name.parse()?, SecretValue::new(value)));
        }
        Self::parse_required(arg)
    }

    /// Parses a name to send that must be set (`NAME`, required: unset, the
    /// capture fails before anything is uploaded) or a pattern (`PREFIX*` /
    /// `*`): the CLI's `--env NAME` and the Python module's
    /// `capture_env_vars` entries, checked alike.
    pub fn parse_required(entry: &str) -> Result<Self, EnvError> {
        if entry.ends_with('*') {
            return Self::parse_capture(entry);
        }
        Ok(Self::Required {
            name: entry.parse()?,
            secret: false,
        })
    }

    /// Parses a CLI `--secret` argument: `NAME`, a required secret (the
    /// value comes from the environment; `NAME=VALUE` is refused, since the
    /// value would show in the process list).
    pub fn parse_secret(arg: &str) -> Result<Self, EnvError> {
        if let Some((name, _)) = arg.split_once('=') {
            return Err(EnvError::SecretWithValue {
                name: name.to_owned(),
            });
        }
        Ok(Self::Required {
            name: arg.parse()?,
            secret: true,
        })
    }
}

/// The environment of the submitting machine, as a map of names to values.
///
/// Entries are kept as given (even names that are not valid [`EnvName`]s,
/// which wildcard capture then skips). `Debug` shows names only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvSnapshot {
    vars: BTreeMap<String, SecretValue>,
}

impl EnvSnapshot {
    /// An empty snapshot.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current process environment. Entries whose name or value is not
    /// UTF-8 are left out.
    pub fn from_process() -> Self {
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect()
    }

    /// A snapshot of the given pairs.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        pairs.into_iter().collect()
    }

    /// Sets a variable.
    pub fn insert(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.vars
            .insert(name.into(), SecretValue::new(value.into()));
    }

    /// The value of a variable, if set.
    pub fn get(&self, name: &str) -> Option<&SecretValue> {
        self.vars.get(name)
    }

    /// True when the variable is set.
    pub fn contains(&self, name: &str) -> bool {
        self.vars.contains_key(name)
    }

    /// Every name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.vars.keys().map(String::as_str)
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for EnvSnapshot {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Self {
            vars: iter
                .into_iter()
                .map(|(k, v)| (k.into(), SecretValue::new(v.into())))
                .collect(),
        }
    }
}

/// Something worth telling the user about a capture. Carries names only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EnvWarning {
    /// Informational: wildcard matches skipped because they are in
    /// [`WILDCARD_BLOCKLIST`] (list them exactly to send them).
    BlocklistSkipped {
        /// The skipped names, sorted.
        names: Vec<String>,
    },
    /// Informational: wildcard matches skipped because the name is not a
    /// valid variable name.
    InvalidNamesSkipped {
        /// The skipped names, sorted.
        names: Vec<String>,
    },
    /// Captured names that look like credentials (informational, as in
    /// Kinetic; values go into the job's environment only, never into what
    /// is stored: a Kubernetes Secret on a cluster, the child's environment
    /// on the local backend).
    CredentialLikeNames {
        /// The names, sorted.
        names: Vec<String>,
    },
    /// Secrets (declared, or credential-like names) whose values are
    /// shorter than [`MIN_REDACTED_CHARS`]: they reach the job, but are
    /// not redacted from its logs and errors (too short to be a
    /// credential, and redacting them would mangle the output).
    TooShortToRedact {
        /// The names, sorted; never a value.
        names: Vec<String>,
    },
}

impl fmt::Display for EnvWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BlocklistSkipped { names } => write!(
                f,
                "not captured by a wildcard (list them by name to send them): {}",
                names.join(", ")
            ),
            Self::InvalidNamesSkipped { names } => write!(
                f,
                "not captured by a wildcard (not valid variable names): {}",
                names.join(", ")
            ),
            Self::CredentialLikeNames { names } => write!(
                f,
                "captured variables that look like credentials (informational; their values go into the job's environment only, never into what is stored): {}",
                names.join(", ")
            ),
            Self::TooShortToRedact { names } => write!(
                f,
                "not redacted from the job's logs and errors: the values of {} are shorter than {MIN_REDACTED_CHARS} characters, too short to be a credential (the job still gets them)",
                names.join(", ")
            ),
        }
    }
}

/// How a captured variable was selected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EnvSource {
    /// An exact, optional name.
    Exact,
    /// A prefix pattern (`prefix` without the `*`).
    Pattern {
        /// The prefix.
        prefix: String,
    },
    /// A required name.
    Required,
    /// A literal `NAME=VALUE`.
    Literal,
    /// Set by the engine (e.g. `KINETIC_OUTPUT_DIR`).
    Engine,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct CapturedVar {
    value: SecretValue,
    source: EnvSource,
}

/// The variables a job will receive: names in the open, values as
/// [`SecretValue`]s. Sorted by name. `Debug` shows names only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapturedEnv {
    vars: BTreeMap<EnvName, CapturedVar>,
    warnings: Vec<EnvWarning>,
    declared_secret: Vec<EnvName>,
}

impl CapturedEnv {
    /// The captured names, sorted (safe to store, e.g. in `spec.json`).
    pub fn names(&self) -> impl Iterator<Item = &EnvName> + '_ {
        self.vars.keys()
    }

    /// The value of a captured variable.
    pub fn get(&self, name: &str) -> Option<&SecretValue> {
        self.vars.get(name).map(|v| &v.value)
    }

    /// How a captured variable was selected.
    pub fn source(&self, name: &str) -> Option<&EnvSource> {
        self.vars.get(name).map(|v| &v.source)
    }

    /// Every variable with its value, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&EnvName, &SecretValue)> + '_ {
        self.vars.iter().map(|(n, v)| (n, &v.value))
    }

    /// Number of variables.
    pub fn len(&self) -> usize {
        self.vars.len()
    }

    /// True when nothing was captured.
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// The names whose values are redacted wherever a job's output, logs
    /// and errors are shown: each variable declared a secret (`--secret`),
    /// and each captured one whose name looks like a credential
    /// ([`EnvName::looks_like_credential`]).
    pub fn secret_names(&self) -> impl Iterator<Item = &EnvName> + '_ {
        self.vars
            .keys()
            .filter(|n| n.looks_like_credential() || self.declared_secret.contains(n))
    }

    /// Warnings from the capture.
    pub fn warnings(&self) -> &[EnvWarning] {
        &self.warnings
    }

    /// Sets a variable from the engine (e.g. `KINETIC_OUTPUT_DIR`, which
    /// Kinetic always sets, overriding a captured value).
    pub fn set(&mut self, name: EnvName, value: SecretValue) {
        self.vars.insert(
            name,
            CapturedVar {
                value,
                source: EnvSource::Engine,
            },
        );
    }
}

/// Applies `entries` to `snapshot` (see the module documentation).
///
/// Fails with [`EnvError::MissingRequired`] naming every required variable
/// that is not set, before anything else happens.
pub fn capture(entries: &[EnvEntry], snapshot: &EnvSnapshot) -> Result<CapturedEnv, EnvError> {
    let missing: Vec<String> = entries
        .iter()
        .filter_map(|e| match e {
            EnvEntry::Required { name, .. } if !snapshot.contains(name.as_str()) => {
                Some(name.to_string())
            }
            _ => None,
        })
        .fold(Vec::new(), |mut acc, n| {
            if !acc.contains(&n) {
                acc.push(n);
            }
            acc
        });
    if !missing.is_empty() {
        return Err(EnvError::MissingRequired { names: missing });
    }

    let listed: Vec<&str> = entries
        .iter()
        .filter_map(|e| match e {
            EnvEntry::Exact(n) | EnvEntry::Required { name: n, .. } | EnvEntry::Literal(n, _) => {
                Some(n.as_str())
            }
            EnvEntry::Prefix(_) => None,
        })
        .collect();
    let declared_secret: Vec<&str> = entries
        .iter()
        .filter_map(|e| match e {
            EnvEntry::Required { name, secret: true } => Some(name.as_str()),
            _ => None,
        })
        .collect();

    let mut vars: BTreeMap<EnvName, CapturedVar> = BTreeMap::new();
    let mut blocked: Vec<String> = Vec::new();
    let mut invalid: Vec<String> = Vec::new();
    // Captured values first; literals are applied afterwards so they win.
    for entry in entries {
        match entry {
            EnvEntry::Exact(name) | EnvEntry::Required { name, .. } => {
                if let Some(value) = snapshot.get(name.as_str()) {
                    let source = if matches!(entry, EnvEntry::Exact(_)) {
                        EnvSource::Exact
                    } else {
                        EnvSource::Required
                    };
                    vars.insert(
                        name.clone(),
                        CapturedVar {
                            value: value.clone(),
                            source,
                        },
                    );
                }
            }
            EnvEntry::Prefix(prefix) => {
                for (raw, value) in snapshot
                    .vars
                    .iter()
                    .filter(|(n, _)| n.starts_with(prefix.as_str()))
                {
                    if listed.contains(&raw.as_str()) || SHELL_INTERNAL.contains(&raw.as_str()) {
                        continue; // captured by its exact entry, or the shell's own
                    }
                    if WILDCARD_BLOCKLIST.contains(&raw.as_str()) {
                        blocked.push(raw.clone());
                        continue;
                    }
                    let Ok(name) = raw.parse::<EnvName>() else {
                        invalid.push(raw.clone());
                        continue;
                    };
                    vars.entry(name).or_insert_with(|| CapturedVar {
                        value: value.clone(),
                        source: EnvSource::Pattern {
                            prefix: prefix.clone(),
                        },
                    });
                }
            }
            EnvEntry::Literal(..) => {}
        }
    }
    for entry in entries {
        if let EnvEntry::Literal(name, value) = entry {
            vars.insert(
                name.clone(),
                CapturedVar {
                    value: value.clone(),
                    source: EnvSource::Literal,
                },
            );
        }
    }

    let mut warnings = Vec::new();
    blocked.sort();
    blocked.dedup();
    if !blocked.is_empty() {
        warnings.push(EnvWarning::BlocklistSkipped { names: blocked });
    }
    invalid.sort();
    invalid.dedup();
    if !invalid.is_empty() {
        warnings.push(EnvWarning::InvalidNamesSkipped { names: invalid });
    }
    let credential_like: Vec<String> = vars
        .keys()
        .filter(|n| n.looks_like_credential() && !declared_secret.contains(&n.as_str()))
        .map(ToString::to_string)
        .collect();
    if !credential_like.is_empty() {
        warnings.push(EnvWarning::CredentialLikeNames {
            names: credential_like,
        });
    }
    let declared_secret: Vec<EnvName> = entries
        .iter()
        .filter_map(|e| match e {
            EnvEntry::Required { name, secret: true } => Some(name.clone()),
            _ => None,
        })
        .collect();
    let too_short: Vec<String> = vars
        .iter()
        .filter(|(n, v)| {
            (n.looks_like_credential() || declared_secret.contains(n))
                && !v.value.expose().is_empty()
                && !redactable(v.value.expose())
        })
        .map(|(n, _)| n.to_string())
        .collect();
    if !too_short.is_empty() {
        warnings.push(EnvWarning::TooShortToRedact { names: too_short });
    }
    Ok(CapturedEnv {
        vars,
        warnings,
        declared_secret,
    })
}

/// Parses Kinetic `capture_env_vars` entries and captures them from
/// `snapshot` in one step.
pub fn capture_kinetic(entries: &[&str], snapshot: &EnvSnapshot) -> Result<CapturedEnv, EnvError> {
    let parsed = entries
        .iter()
        .map(|e| EnvEntry::parse_capture(e))
        .collect::<Result<Vec<_>, _>>()?;
    capture(&parsed, snapshot)
}
