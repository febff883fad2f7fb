//! Environment capture: Kinetic's pinned cases, required and
//! literal variables, and secrecy of values.

use std::collections::BTreeSet;

use kinetic_core::env::{
    CapturedEnv, EnvEntry, EnvError, EnvName, EnvSnapshot, EnvSource, EnvWarning, SecretValue,
    WILDCARD_BLOCKLIST, capture, capture_kinetic,
};

/// A value no output may ever contain.
const SENTINEL: &str = "s3ntinel-VALUE-0xDEADBEEF";

fn names(c: &CapturedEnv) -> BTreeSet<String> {
    c.names().map(ToString::to_string).collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn snapshot(names: &[&str]) -> EnvSnapshot {
    names.iter().map(|n| (*n, SENTINEL)).collect()
}

fn credential_warnings(c: &CapturedEnv) -> Vec<Vec<String>> {
    c.warnings()
        .iter()
        .filter_map(|w| match w {
            EnvWarning::CredentialLikeNames { names } => Some(names.clone()),
            _ => None,
        })
        .collect()
}

// ------------------------------------------------ Kinetic's pinned cases

#[test]
fn pinned_exact_name() {
    let c = capture_kinetic(&["MY_VAR"], &snapshot(&["MY_VAR", "OTHER"])).expect("ok");
    assert_eq!(names(&c), set(&["MY_VAR"]));
    assert_eq!(c.get("MY_VAR").map(SecretValue::expose), Some(SENTINEL));
}

#[test]
fn pinned_prefix_pattern() {
    let c =
        capture_kinetic(&["PREFIX_*"], &snapshot(&["PREFIX_A", "PREFIX_B", "OTHER"])).expect("ok");
    assert_eq!(names(&c), set(&["PREFIX_A", "PREFIX_B"]));
    assert_eq!(
        c.source("PREFIX_A"),
        Some(&EnvSource::Pattern {
            prefix: "PREFIX_".into()
        })
    );
}

#[test]
fn pinned_missing_exact_name_is_skipped_silently() {
    let c = capture_kinetic(&["NONEXISTENT"], &snapshot(&["OTHER"])).expect("ok");
    assert!(c.is_empty());
    assert!(c.warnings().is_empty());
}

#[test]
fn pinned_exact_and_wildcard_union() {
    let c = capture_kinetic(
        &["EXACT_VAR", "WILD_*"],
        &snapshot(&["EXACT_VAR", "WILD_A", "WILD_B", "NOPE"]),
    )
    .expect("ok");
    assert_eq!(names(&c), set(&["EXACT_VAR", "WILD_A", "WILD_B"]));
}

#[test]
fn pinned_star_skips_the_blocklist() {
    let env = snapshot(&[
        "PATH",
        "HOME",
        "PYTHONPATH",
        "LD_LIBRARY_PATH",
        "VIRTUAL_ENV",
        "KERAS_BACKEND",
        "MY_FLAG",
    ]);
    let c = capture_kinetic(&["*"], &env).expect("ok");
    assert_eq!(names(&c), set(&["MY_FLAG"]));
    assert_eq!(
        c.warnings(),
        [EnvWarning::BlocklistSkipped {
            names: vec![
                "HOME".into(),
                "KERAS_BACKEND".into(),
                "LD_LIBRARY_PATH".into(),
                "PATH".into(),
                "PYTHONPATH".into(),
                "VIRTUAL_ENV".into(),
            ]
        }]
    );
}

#[test]
fn pinned_wildcard_skips_blocked_keras_backend() {
    let c = capture_kinetic(&["KERAS*"], &snapshot(&["KERAS_BACKEND", "KERAS_HOME"])).expect("ok");
    assert_eq!(names(&c), set(&["KERAS_HOME"]));
}

#[test]
fn pinned_exact_blocked_name_is_captured() {
    let c = capture_kinetic(&["KERAS_BACKEND"], &snapshot(&["KERAS_BACKEND"])).expect("ok");
    assert_eq!(names(&c), set(&["KERAS_BACKEND"]));
}

#[test]
fn pinned_wildcard_plus_exact_blocked_name_gives_both() {
    let c = capture_kinetic(
        &["KERAS*", "KERAS_BACKEND"],
        &snapshot(&["KERAS_BACKEND", "KERAS_HOME"]),
    )
    .expect("ok");
    assert_eq!(names(&c), set(&["KERAS_BACKEND", "KERAS_HOME"]));
    assert!(
        !c.warnings()
            .iter()
            .any(|w| matches!(w, EnvWarning::BlocklistSkipped { .. }))
    );
}

#[test]
fn pinned_credential_warning() {
    let c = capture_kinetic(
        &["AWS_*", "HF_TOKEN", "MY_FLAG"],
        &snapshot(&["AWS_SECRET_ACCESS_KEY", "HF_TOKEN", "MY_FLAG"]),
    )
    .expect("ok");
    assert_eq!(
        credential_warnings(&c),
        vec![vec![
            "AWS_SECRET_ACCESS_KEY".to_string(),
            "HF_TOKEN".to_string()
        ]]
    );
}

// ------------------------------------------------ rules around the pins

#[test]
fn blocklist_is_kinetics() {
    assert_eq!(WILDCARD_BLOCKLIST.len(), 18);
    for name in [
        "PATH",
        "SSH_AUTH_SOCK",
        "KUBERNETES_SERVICE_HOST",
        "LD_PRELOAD",
        "TMP",
    ] {
        assert!(WILDCARD_BLOCKLIST.contains(&name));
    }
}

#[test]
fn credential_fragments_any_case() {
    for (name, credential) in [
        ("api_key", true),
        ("MyPassword", true),
        ("GOOGLE_APPLICATION_CREDENTIALS", true),
        ("client_secret", true),
        ("GH_TOKEN", true),
        ("MONKEY", true), // KEY as a substring, as in Kinetic
        ("MY_FLAG", false),
    ] {
        let n: EnvName = name.parse().expect("valid");
        assert_eq!(n.looks_like_credential(), credential, "{name}");
    }
}

#[test]
fn star_elsewhere_is_not_a_pattern_and_not_a_name() {
    let err = EnvEntry::parse_capture("A*B").expect_err("must fail");
    assert!(matches!(err, EnvError::InvalidName { .. }), "{err:?}");
    let err = EnvEntry::parse_capture("1X*").expect_err("must fail");
    assert!(matches!(err, EnvError::InvalidPattern { .. }), "{err:?}");
    assert_eq!(
        EnvEntry::parse_capture("*"),
        Ok(EnvEntry::Prefix(String::new()))
    );
}

#[test]
fn wildcard_skips_names_that_are_not_variable_names() {
    let mut env = snapshot(&["GOOD"]);
    env.insert("BAD.NAME", "x");
    let c = capture_kinetic(&["*"], &env).expect("ok");
    assert_eq!(names(&c), set(&["GOOD"]));
    assert!(c.warnings().contains(&EnvWarning::InvalidNamesSkipped {
        names: vec!["BAD.NAME".into()]
    }));
}

#[test]
fn wildcards_skip_the_names_a_shell_sets_for_each_program() {
    let env = snapshot(&["_", "SHLVL", "PWD", "OLDPWD", "MY_FLAG", "PWD_HINT"]);
    let c = capture_kinetic(&["*"], &env).expect("ok");
    assert_eq!(names(&c), set(&["MY_FLAG", "PWD_HINT"]));
    // Silently: these are the shell's, not the user's.
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());
    let c = capture_kinetic(&["PWD*", "SHLVL"], &env).expect("ok");
    assert_eq!(names(&c), set(&["PWD_HINT", "SHLVL"]));
    let c = capture(&[EnvEntry::parse_cli("_").expect("name")], &env).expect("ok");
    assert_eq!(names(&c), set(&["_"]), "an exact entry still captures it");
}

#[test]
fn name_validation() {
    for good in ["A", "_", "_x1", "HF_TOKEN", "a1_B2"] {
        assert!(good.parse::<EnvName>().is_ok(), "{good}");
    }
    for bad in ["", "1A", "A-B", "A B", "A.B", "É", "A=B"] {
        let err = bad.parse::<EnvName>().expect_err("must fail");
        let msg = err.to_string();
        assert!(msg.contains(&format!("'{bad}'")), "{msg}");
        assert!(msg.contains("[A-Za-z_][A-Za-z0-9_]*"), "{msg}");
    }
}

// ------------------------------------------------ required and literal

#[test]
fn required_missing_names_every_missing_variable_in_one_error() {
    let entries = [
        EnvEntry::parse_cli("PRESENT").expect("ok"),
        EnvEntry::parse_cli("MISSING_ONE").expect("ok"),
        EnvEntry::parse_secret("MISSING_TWO").expect("ok"),
        EnvEntry::parse_cli("MISSING_ONE").expect("ok"),
        EnvEntry::parse_cli("WANDB_*").expect("ok"),
    ];
    let err = capture(&entries, &snapshot(&["PRESENT"])).expect_err("must fail");
    assert_eq!(
        err,
        EnvError::MissingRequired {
            names: vec!["MISSING_ONE".into(), "MISSING_TWO".into()]
        }
    );
    let msg = err.to_string();
    assert!(msg.contains("MISSING_ONE, MISSING_TWO"), "{msg}");
    assert!(!msg.contains(SENTINEL));
}

#[test]
fn required_present_is_captured() {
    let entries = [EnvEntry::parse_cli("NEEDED").expect("ok")];
    let c = capture(&entries, &snapshot(&["NEEDED"])).expect("ok");
    assert_eq!(c.get("NEEDED").map(SecretValue::expose), Some(SENTINEL));
    assert_eq!(c.source("NEEDED"), Some(&EnvSource::Required));
}

#[test]
fn declared_secrets_are_not_reported_as_credential_like() {
    let entries = [
        EnvEntry::parse_secret("HF_TOKEN").expect("ok"),
        EnvEntry::parse_cli("API_KEY").expect("ok"),
    ];
    let c = capture(&entries, &snapshot(&["HF_TOKEN", "API_KEY"])).expect("ok");
    assert_eq!(credential_warnings(&c), vec![vec!["API_KEY".to_string()]]);
}

#[test]
fn literals_give_values_and_win() {
    let entries = [
        EnvEntry::parse_capture("MODE").expect("ok"),
        EnvEntry::parse_cli("MODE=from-cli").expect("ok"),
        EnvEntry::parse_cli("EMPTY=").expect("ok"),
        EnvEntry::parse_cli("URL=a=b=c").expect("ok"),
        EnvEntry::parse_cli("TWICE=1").expect("ok"),
        EnvEntry::parse_cli("TWICE=2").expect("ok"),
    ];
    let c = capture(&entries, &snapshot(&["MODE"])).expect("ok");
    assert_eq!(c.get("MODE").map(SecretValue::expose), Some("from-cli"));
    assert_eq!(c.get("EMPTY").map(SecretValue::expose), Some(""));
    assert_eq!(c.get("URL").map(SecretValue::expose), Some("a=b=c"));
    assert_eq!(c.get("TWICE").map(SecretValue::expose), Some("2"));
    assert_eq!(c.source("MODE"), Some(&EnvSource::Literal));
}

#[test]
fn literal_overrides_wildcard_capture() {
    let entries = [
        EnvEntry::parse_cli("APP_*").expect("ok"),
        EnvEntry::parse_cli("APP_MODE=literal").expect("ok"),
    ];
    let c = capture(&entries, &snapshot(&["APP_MODE", "APP_X"])).expect("ok");
    assert_eq!(c.get("APP_MODE").map(SecretValue::expose), Some("literal"));
    assert_eq!(c.get("APP_X").map(SecretValue::expose), Some(SENTINEL));
}

#[test]
fn engine_can_set_output_dir() {
    let mut c =
        capture_kinetic(&["KINETIC_OUTPUT_DIR"], &snapshot(&["KINETIC_OUTPUT_DIR"])).expect("ok");
    c.set(
        "KINETIC_OUTPUT_DIR".parse().expect("valid"),
        SecretValue::new("gs://b/outputs/job-1"),
    );
    assert_eq!(
        c.get("KINETIC_OUTPUT_DIR").map(SecretValue::expose),
        Some("gs://b/outputs/job-1")
    );
    assert_eq!(c.source("KINETIC_OUTPUT_DIR"), Some(&EnvSource::Engine));
}

#[test]
fn names_serialise_values_do_not_exist_in_json() {
    let c = capture_kinetic(&["A", "B"], &snapshot(&["A", "B"])).expect("ok");
    let names: Vec<&EnvName> = c.names().collect();
    let json = serde_json::to_string(&names).expect("json");
    assert_eq!(json, r#"["A","B"]"#);
    let warnings = serde_json::to_string(c.warnings()).expect("json");
    assert!(!warnings.contains(SENTINEL));
}

#[test]
fn from_process_reads_the_environment() {
    // Only reads; PATH is set in every test environment we run in.
    let env = EnvSnapshot::from_process();
    assert_eq!(env.contains("PATH"), std::env::var("PATH").is_ok());
}

// ------------------------------------------------ secrecy

#[test]
fn secret_value_never_shows_in_debug_or_display() {
    let v = SecretValue::new(SENTINEL);
    assert!(!format!("{v:?}").contains(SENTINEL));
    assert!(!format!("{v}").contains(SENTINEL));
    assert!(!format!("{v:#?}").contains(SENTINEL));
    assert_eq!(v.expose(), SENTINEL);
}

#[test]
fn nothing_derived_from_a_capture_shows_values() {
    let mut env = snapshot(&["HF_TOKEN", "AWS_SECRET", "PATH", "APP_X"]);
    env.insert("BAD.NAME", SENTINEL);
    let entries = [
        EnvEntry::parse_cli("*").expect("ok"),
        EnvEntry::parse_cli(&format!("LIT={SENTINEL}")).expect("ok"),
    ];
    let c = capture(&entries, &env).expect("ok");
    assert!(!format!("{c:?}").contains(SENTINEL));
    assert!(!format!("{c:#?}").contains(SENTINEL));
    assert!(!format!("{env:?}").contains(SENTINEL));
    assert!(!format!("{entries:?}").contains(SENTINEL));
    for w in c.warnings() {
        assert!(!w.to_string().contains(SENTINEL));
        assert!(!format!("{w:?}").contains(SENTINEL));
    }
    // The values are there, reachable only through expose().
    assert_eq!(c.get("LIT").map(SecretValue::expose), Some(SENTINEL));
    assert!(c.iter().all(|(_, v)| v.expose() == SENTINEL));
}

#[test]
fn errors_never_show_values() {
    // An invalid name in NAME=VALUE: the error names the name, not the value.
    let err = EnvEntry::parse_cli(&format!("BAD-NAME={SENTINEL}")).expect_err("must fail");
    let msg = err.to_string();
    assert!(msg.contains("'BAD-NAME'"), "{msg}");
    assert!(!msg.contains(SENTINEL), "{msg}");
    assert!(!format!("{err:?}").contains(SENTINEL));
    let err = EnvEntry::parse_secret(&format!("1X={SENTINEL}")).expect_err("must fail");
    assert!(!err.to_string().contains(SENTINEL));
}

/// `Probe::<T>::is_serialize()` is true only when `T: Serialize` (an
/// inherent method wins over the blanket trait method).
struct Probe<T>(std::marker::PhantomData<T>);

trait NotSerialize {
    fn is_serialize(&self) -> bool {
        false
    }
}

impl<T> NotSerialize for Probe<T> {}

impl<T: serde::Serialize> Probe<T> {
    fn is_serialize(&self) -> bool {
        true
    }
}

#[test]
fn values_cannot_be_serialised() {
    use std::marker::PhantomData;
    assert!(!Probe::<SecretValue>(PhantomData).is_serialize());
    assert!(!Probe::<CapturedEnv>(PhantomData).is_serialize());
    assert!(!Probe::<EnvSnapshot>(PhantomData).is_serialize());
    assert!(!Probe::<EnvEntry>(PhantomData).is_serialize());
    // The probe itself works: names are serialisable.
    assert!(Probe::<EnvName>(PhantomData).is_serialize());
}
