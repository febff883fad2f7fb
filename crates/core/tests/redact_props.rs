//! Properties of the redaction floor (`kinetic_core::redact`): a secret
//! value shorter than `MIN_REDACTED_CHARS` never changes what a job
//! reports, a longer one never survives in it, and capturing a secret whose
//! value is too short to be redacted warns once, by name, never by value.

use kinetic_core::env::{EnvEntry, EnvSnapshot, EnvWarning, capture};
use kinetic_core::redact::{MIN_REDACTED_CHARS, REDACTED, Redactor};
use proptest::prelude::*;

/// Text a job might print: letters, digits, spaces, punctuation, newlines.
fn output() -> impl Strategy<Value = String> {
    "[a-z0-9 \\[\\]<>:=\n]{0,200}"
}

proptest! {
    #[test]
    fn values_below_the_floor_never_change_the_output(
        value in "[a-z0-9]{1,7}",
        text in output(),
    ) {
        let r = Redactor::new([value.as_str()]);
        prop_assert!(r.is_empty());
        // The value occurs in the text, as `k` does in `[kinetic]`.
        let text = format!("{text}[kinetic] {value} {text}");
        prop_assert_eq!(r.redact(&text), text.as_str());
    }

    #[test]
    fn values_at_or_above_the_floor_never_survive(
        value in "[a-z0-9]{8,24}",
        before in output(),
        after in output(),
    ) {
        prop_assume!(value.chars().count() >= MIN_REDACTED_CHARS);
        let r = Redactor::new([value.as_str()]);
        let text = format!("{before}{value}{after}");
        let out = r.redact(&text);
        prop_assert!(!out.contains(value.as_str()), "{out}");
        prop_assert!(out.contains(REDACTED));
    }

    #[test]
    fn a_short_secret_is_named_once_and_its_value_never(
        value in "[a-z]{1,24}",
        declared in any::<bool>(),
    ) {
        // A declared secret under a plain name, or a credential-like name.
        let name = if declared { "MINE" } else { "WANDB_API_KEY" };
        let snapshot = EnvSnapshot::from_pairs([(name, value.as_str())]);
        let entry = if declared {
            EnvEntry::parse_secret(name).unwrap()
        } else {
            EnvEntry::parse_cli(name).unwrap()
        };
        let captured = capture(&[entry], &snapshot).unwrap();
        let short: Vec<&EnvWarning> = captured
            .warnings()
            .iter()
            .filter(|w| matches!(w, EnvWarning::TooShortToRedact { .. }))
            .collect();
        let too_short = value.chars().count() < MIN_REDACTED_CHARS;
        prop_assert_eq!(short.len(), usize::from(too_short));
        if let Some(warning) = short.first() {
            prop_assert_eq!(
                *warning,
                &EnvWarning::TooShortToRedact { names: vec![name.to_owned()] }
            );
            let text = warning.to_string();
            prop_assert!(text.contains(name), "{text}");
            prop_assert!(!text.contains(&format!("={value}")), "{text}");
        }
        // The job still gets the value.
        prop_assert_eq!(captured.get(name).map(|v| v.expose().to_owned()), Some(value.clone()));
    }
}

#[test]
fn a_one_character_key_is_left_in_the_logs_and_named_in_a_warning() {
    let snapshot = EnvSnapshot::from_pairs([("WANDB_API_KEY", "k")]);
    let captured = capture(&[EnvEntry::parse_cli("WANDB_API_KEY").unwrap()], &snapshot).unwrap();
    let r = Redactor::from_captured(&captured);
    assert_eq!(r.redact("[kinetic] ok"), "[kinetic] ok");
    let warnings: Vec<String> = captured
        .warnings()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        warnings.iter().any(|w| w.contains("WANDB_API_KEY")
            && w.contains("not redacted")
            && w.contains(&format!("shorter than {MIN_REDACTED_CHARS} characters"))),
        "{warnings:?}"
    );
}
