//! Secret values kept out of what a job reports.
//!
//! A job's secrets are the values of the variables
//! [`CapturedEnv::secret_names`] lists: each one declared a secret
//! (`--secret NAME`) and each captured one whose name looks like a
//! credential. The runner replaces every occurrence of those exact values
//! with [`REDACTED`] in the job's output, its own lines and a failure's
//! message and traceback (it finds the values in its environment and the
//! names in `spec.json`'s `secret_names`); the engine does the same, as a
//! second line, wherever it shows what a job reported: log lines, the tail
//! of a job that left no result, and remote errors.
//!
//! A value shorter than [`MIN_REDACTED_CHARS`] is not redacted (see there
//! why); [`capture`](crate::env::capture) tells the submitter so, naming the
//! variable ([`EnvWarning::TooShortToRedact`](crate::env::EnvWarning::TooShortToRedact)).
//!
//! ```
//! use kinetic_core::redact::{Redactor, REDACTED};
//! let r = Redactor::new(["s3cret-value", "k"]);
//! assert_eq!(r.redact("token=s3cret-value"), format!("token={REDACTED}"));
//! assert_eq!(r.redact("nothing here, kinetic"), "nothing here, kinetic");
//! ```

use std::borrow::Cow;
use std::fmt;

use crate::env::{CapturedEnv, EnvSnapshot};
use crate::protocol::RemoteError;

pub use crate::env::{MIN_REDACTED_CHARS, REDACTED, redactable};

/// Replaces exact secret values in text. `Debug` shows how many values it
/// holds, never a value.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    /// Longest first, so a value that contains another is replaced whole.
    values: Vec<String>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("values", &self.values.len())
            .finish()
    }
}

impl Redactor {
    /// A redactor of `values`; those shorter than [`MIN_REDACTED_CHARS`]
    /// (the empty one included) are left alone.
    pub fn new<S: Into<String>>(values: impl IntoIterator<Item = S>) -> Self {
        let mut values: Vec<String> = values
            .into_iter()
            .map(Into::into)
            .filter(|v| redactable(v))
            .collect();
        values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values.dedup();
        Self { values }
    }

    /// The values of a job's secrets, as captured for it.
    pub fn from_captured(env: &CapturedEnv) -> Self {
        Self::new(
            env.secret_names()
                .filter_map(|n| env.get(n.as_str()))
                .map(|v| v.expose().to_owned()),
        )
    }

    /// The values `snapshot` holds for `names` (a job's `secret_names`,
    /// read back from its `spec.json` by a process that did not submit it).
    pub fn from_names<'a>(
        names: impl IntoIterator<Item = &'a str>,
        snapshot: &EnvSnapshot,
    ) -> Self {
        Self::new(
            names
                .into_iter()
                .filter_map(|n| snapshot.get(n))
                .map(|v| v.expose().to_owned()),
        )
    }

    /// True when there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// `text` with every secret value replaced by [`REDACTED`].
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for value in &self.values {
            if out.contains(value.as_str()) {
                out = Cow::Owned(out.replace(value.as_str(), REDACTED));
            }
        }
        out
    }

    /// A remote error with its message and traceback redacted.
    pub fn redact_error(&self, mut error: RemoteError) -> RemoteError {
        if self.is_empty() {
            return error;
        }
        error.message = self.redact(&error.message).into_owned();
        if let Some(tb) = error.traceback.take() {
            error.traceback = Some(self.redact(&tb).into_owned());
        }
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{EnvEntry, capture};

    #[test]
    fn longer_values_go_first_and_debug_hides_them() {
        let r = Redactor::new(["abcdefgh", "abcdefgh-ijkl", "", "abcdefgh"]);
        assert_eq!(
            r.redact("abcdefgh-ijkl abcdefgh"),
            format!("{REDACTED} {REDACTED}")
        );
        assert!(matches!(r.redact("xyz"), Cow::Borrowed(_)));
        assert_eq!(format!("{r:?}"), "Redactor { values: 2 }");
        assert!(Redactor::new([""]).is_empty());
    }

    #[test]
    fn values_below_the_floor_are_left_alone() {
        let r = Redactor::new(["k", "1234567", "\u{e9}\u{e9}\u{e9}\u{e9}"]);
        assert!(r.is_empty(), "{r:?}");
        assert_eq!(r.redact("[kinetic] 1234567"), "[kinetic] 1234567");
        // Characters count, not bytes: eight two-byte characters are enough.
        let eight = "\u{e9}".repeat(MIN_REDACTED_CHARS);
        assert_eq!(Redactor::new([eight.as_str()]).redact(&eight), REDACTED);
    }

    #[test]
    fn secrets_are_the_declared_ones_and_credential_like_names() {
        let snapshot = EnvSnapshot::from_pairs([
            ("PLAIN", "plain-value"),
            ("HF_TOKEN", "hf-value"),
            ("MINE", "mine-value"),
        ]);
        let entries = [
            EnvEntry::parse_cli("PLAIN").unwrap(),
            EnvEntry::parse_cli("HF_TOKEN").unwrap(),
            EnvEntry::parse_secret("MINE").unwrap(),
        ];
        let env = capture(&entries, &snapshot).unwrap();
        let names: Vec<&str> = env.secret_names().map(|n| n.as_str()).collect();
        assert_eq!(names, ["HF_TOKEN", "MINE"]);
        let r = Redactor::from_captured(&env);
        assert_eq!(
            r.redact("plain-value hf-value mine-value"),
            format!("plain-value {REDACTED} {REDACTED}")
        );
        let r = Redactor::from_names(["MINE", "ABSENT"], &snapshot);
        assert_eq!(r.redact("mine-value"), REDACTED);
        assert!(EnvEntry::parse_secret("MINE=value").is_err());
    }

    #[test]
    fn remote_errors_lose_their_secrets() {
        let r = Redactor::new(["tok-1a2b3c"]);
        let e = r.redact_error(RemoteError {
            type_name: "RuntimeError".into(),
            message: "bad tok-1a2b3c".into(),
            traceback: Some("raise RuntimeError('bad tok-1a2b3c')".into()),
            phase: Some("execute".into()),
        });
        assert_eq!(e.message, format!("bad {REDACTED}"));
        assert!(!e.traceback.unwrap().contains("tok-1a2b3c"));
    }

    #[test]
    fn the_runner_uses_the_same_floor() {
        assert!(
            crate::protocol::RUNNER_SOURCE
                .contains(&format!("MIN_REDACTED_CHARS = {MIN_REDACTED_CHARS}\n")),
            "the runner's floor differs from {MIN_REDACTED_CHARS}"
        );
    }

    #[test]
    fn the_runner_uses_the_same_marker() {
        assert!(
            crate::protocol::RUNNER_SOURCE.contains(&format!("REDACTED = \"{REDACTED}\"")),
            "the runner's marker differs from {REDACTED}"
        );
    }
}
