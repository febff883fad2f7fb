//! The profiles file: Kinetic's exact format, its read errors, name rules
//! and the store operations.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kinetic_core::config::{
    EnvLookup, Profile, ProfileError, ProfileSelection, ProfileStore, profiles_path,
    validate_profile_name,
};

/// Written by Kinetic (`json.dump(payload, f, indent=2, sort_keys=True)` and
/// a newline), including a newer Kinetic's `state_backend` key and a
/// non-ASCII value escaped the way Python escapes it.
const KINETIC_FILE: &str = r#"{
  "current": "dev-tpu",
  "profiles": {
    "a1": {
      "cluster": "c",
      "namespace": "ns",
      "project": "Caf\u00e9-\u00fc",
      "zone": "me-west1-a"
    },
    "dev-tpu": {
      "cluster": "tpu-cluster",
      "namespace": "default",
      "project": "my-proj",
      "zone": "us-east5-a"
    },
    "team_shared": {
      "cluster": "kinetic-cluster",
      "namespace": "ml-team",
      "project": "shared-proj",
      "state_backend": "gs://bucket/prefix",
      "zone": "europe-west4-b"
    }
  }
}
"#;

fn parse(text: &str) -> Result<ProfileStore, ProfileError> {
    ProfileStore::from_json(text, Path::new("/x/profiles.json"))
}

fn store_with(names: &[&str]) -> ProfileStore {
    let mut s = ProfileStore::new();
    for n in names {
        s.upsert(Profile::new(*n, format!("proj-{n}")))
            .expect("valid name");
    }
    s
}

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn kinetic_file_reads_back_and_rewrites_byte_identically() -> Result<(), ProfileError> {
    let store = parse(KINETIC_FILE)?;
    assert_eq!(store.current_name(), Some("dev-tpu"));
    let names: Vec<_> = store.profiles().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["a1", "dev-tpu", "team_shared"]);
    let a1 = store.require("a1")?;
    assert_eq!(a1.project, "Café-ü");
    let shared = store.require("team_shared")?;
    assert_eq!(
        (
            shared.project.as_str(),
            shared.zone.as_str(),
            shared.cluster.as_str(),
            shared.namespace.as_str()
        ),
        (
            "shared-proj",
            "europe-west4-b",
            "kinetic-cluster",
            "ml-team"
        )
    );
    assert!(shared.extra().contains_key("state_backend"));
    assert_eq!(store.to_json(), KINETIC_FILE);
    Ok(())
}

#[test]
fn empty_store_format() {
    assert_eq!(
        ProfileStore::new().to_json(),
        "{\n  \"current\": null,\n  \"profiles\": {}\n}\n"
    );
}

#[test]
fn save_then_load_round_trips_atomically() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir
        .path()
        .join("nested")
        .join("deeper")
        .join("profiles.json");
    let mut store = ProfileStore::new();
    store.upsert(
        Profile::new("dev", "p")
            .zone("asia-southeast1-a")
            .cluster("c")
            .namespace("n"),
    )?;
    store.save(&path)?;
    assert_eq!(ProfileStore::load(&path)?, store);
    assert_eq!(std::fs::read_to_string(&path)?, store.to_json());

    // Overwrite in place; no temporary file is left behind.
    store.upsert(Profile::new("prod", "q"))?;
    store.save(&path)?;
    assert_eq!(ProfileStore::load(&path)?, store);
    let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap_or(dir.path()))?
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .filter(|n| n != "profiles.json")
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path)?.permissions().mode() & 0o777,
            0o600
        );
    }
    Ok(())
}

#[test]
fn missing_file_is_an_empty_store() -> Result<(), ProfileError> {
    let dir = tempfile::tempdir().map_err(|source| ProfileError::Read {
        path: PathBuf::new(),
        source,
    })?;
    let store = ProfileStore::load(&dir.path().join("nope.json"))?;
    assert!(store.is_empty());
    assert_eq!(store.current_name(), None);
    Ok(())
}

#[test]
fn save_failure_is_a_write_error() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "x")?;
    let err = ProfileStore::new()
        .save(&blocker.join("profiles.json"))
        .expect_err("parent is a file");
    assert!(matches!(err, ProfileError::Write { .. }), "{err}");
    assert!(err.to_string().starts_with("Failed to write"), "{err}");
    Ok(())
}

#[test]
fn unreadable_and_invalid_files() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    // A directory where the file should be.
    let err = ProfileStore::load(dir.path()).expect_err("a directory is not a file");
    assert!(matches!(err, ProfileError::NotAFile(_)), "{err}");
    assert!(err.to_string().contains("is a directory"), "{err}");
    assert!(
        !err.is_invalid_input(),
        "a broken profiles file is a failure"
    );

    for text in ["", "{", "{\"current\": }", "not json"] {
        let err = parse(text).expect_err(text);
        assert!(
            matches!(err, ProfileError::InvalidJson { .. }),
            "{text}: {err}"
        );
        assert!(
            err.to_string()
                .starts_with("Failed to read /x/profiles.json: "),
            "{err}"
        );
    }
    Ok(())
}

#[test]
fn malformed_files() {
    let cases = [
        (
            "[]",
            "Malformed profiles file /x/profiles.json: expected object",
        ),
        (
            "\"s\"",
            "Malformed profiles file /x/profiles.json: expected object",
        ),
        (
            r#"{"current": 1}"#,
            "Malformed profiles file /x/profiles.json: 'current' must be a string",
        ),
        (
            r#"{"profiles": []}"#,
            "Malformed profiles file /x/profiles.json: 'profiles' must be an object",
        ),
        (
            r#"{"profiles": null}"#,
            "Malformed profiles file /x/profiles.json: 'profiles' must be an object",
        ),
        (
            r#"{"profiles": {"x": []}}"#,
            "Malformed profile 'x': expected object",
        ),
        (
            r#"{"profiles": {"x": {"zone": "z", "cluster": "c"}}}"#,
            "Malformed profile 'x': missing field 'project'",
        ),
        (
            r#"{"profiles": {"x": {"project": "p", "cluster": "c"}}}"#,
            "Malformed profile 'x': missing field 'zone'",
        ),
        (
            r#"{"profiles": {"x": {"project": "p", "zone": "z"}}}"#,
            "Malformed profile 'x': missing field 'cluster'",
        ),
        (
            r#"{"profiles": {"x": {"project": 3, "zone": "z", "cluster": "c"}}}"#,
            "Malformed profile 'x': field 'project' must be a string",
        ),
    ];
    for (text, expected) in cases {
        match parse(text) {
            Ok(s) => panic!("{text} should be malformed, got {s:?}"),
            Err(e) => assert_eq!(e.to_string(), expected, "{text}"),
        }
    }
}

#[test]
fn lenient_reads() -> Result<(), ProfileError> {
    // No keys at all; `current` null; namespace missing; stale current.
    assert!(parse("{}")?.is_empty());
    let s = parse(r#"{"current": null, "profiles": {}}"#)?;
    assert_eq!(s.current_name(), None);
    let s = parse(
        r#"{"current": "gone", "profiles": {"x": {"project": "p", "zone": "z", "cluster": "c"}}}"#,
    )?;
    assert_eq!(
        s.current_name(),
        None,
        "a stale pointer reads as no current"
    );
    assert_eq!(s.require("x")?.namespace, "default");
    Ok(())
}

#[test]
fn profile_names() {
    let long_ok = "a".repeat(64);
    for name in [
        "dev",
        "dev-tpu",
        "team_shared",
        "a1",
        "A",
        "9x",
        long_ok.as_str(),
    ] {
        assert!(validate_profile_name(name).is_ok(), "{name}");
    }
    let long_bad = "a".repeat(65);
    for name in [
        "",
        "-bad",
        "_bad",
        "has space",
        "has/slash",
        long_bad.as_str(),
        "é",
        "dev\n",
    ] {
        let err = validate_profile_name(name).expect_err(name);
        assert!(matches!(&err, ProfileError::InvalidName { name: n } if n == name));
        assert!(
            err.to_string()
                .contains("must start with an alphanumeric character and contain only letters, digits, '-', or '_' (max 64 chars)"),
            "{err}"
        );
        let mut store = ProfileStore::new();
        assert!(store.upsert(Profile::new(name, "p")).is_err(), "{name}");
        assert!(store.is_empty());
    }
}

#[test]
fn first_profile_becomes_current_later_ones_do_not() -> Result<(), ProfileError> {
    let mut s = ProfileStore::new();
    assert!(s.upsert(Profile::new("a", "p"))?);
    assert!(!s.upsert(Profile::new("b", "p"))?);
    assert_eq!(s.current_name(), Some("a"));
    // Overwriting the current one keeps it current.
    assert!(s.upsert(Profile::new("a", "p2"))?);
    assert_eq!(s.require("a")?.project, "p2");

    // With nothing current, a *new* profile becomes current, an overwritten one does not.
    assert_eq!(s.clear_current(), Some("a".to_owned()));
    assert_eq!(s.clear_current(), None);
    assert!(!s.upsert(Profile::new("b", "p3"))?);
    assert_eq!(s.current_name(), None);
    assert!(s.upsert(Profile::new("c", "p"))?);
    assert_eq!(s.current_name(), Some("c"));
    Ok(())
}

#[test]
fn create_refuses_to_overwrite_without_force() -> Result<(), ProfileError> {
    let mut s = store_with(&["dev"]);
    let err = s
        .create(Profile::new("dev", "other"), false)
        .expect_err("exists");
    assert!(matches!(err, ProfileError::AlreadyExists { .. }));
    assert!(
        err.to_string()
            .contains("Profile 'dev' already exists. Use --force")
    );
    assert_eq!(s.require("dev")?.project, "proj-dev");
    assert!(s.create(Profile::new("dev", "other"), true)?);
    assert_eq!(s.require("dev")?.project, "other");
    Ok(())
}

#[test]
fn set_current_and_remove() -> Result<(), ProfileError> {
    let mut s = store_with(&["a", "b"]);
    s.set_current("b")?;
    assert_eq!(s.current().map(|p| p.name.as_str()), Some("b"));
    let err = s.set_current("zzz").expect_err("unknown");
    assert_eq!(
        err.to_string(),
        "Profile 'zzz' does not exist. Run 'kinetic profile ls' to see available profiles."
    );
    assert_eq!(s.current_name(), Some("b"), "a failed use changes nothing");

    // Removing a non-current profile keeps the pointer.
    assert_eq!(s.remove("a")?.name, "a");
    assert_eq!(s.current_name(), Some("b"));
    // Removing the current one clears it and never picks another.
    let mut s2 = store_with(&["a", "b"]);
    s2.set_current("a")?;
    s2.remove("a")?;
    assert_eq!(s2.current_name(), None);
    assert_eq!(s2.len(), 1);
    assert!(matches!(s2.remove("a"), Err(ProfileError::NotFound { .. })));
    Ok(())
}

#[test]
fn active_profile_precedence() -> Result<(), ProfileError> {
    let mut s = store_with(&["stored", "from-env", "explicit"]);
    s.set_current("stored")?;
    let pick = |explicit: Option<&str>, e: &BTreeMap<String, String>| {
        s.active(explicit, e)
            .map(|a| a.map(|a| (a.profile.name.clone(), a.selected_by)))
    };
    let no_env = env(&[]);
    let with_env = env(&[("KINETIC_PROFILE", "from-env")]);
    let empty_env = env(&[("KINETIC_PROFILE", "")]);

    assert_eq!(
        pick(None, &no_env)?,
        Some(("stored".into(), ProfileSelection::Stored))
    );
    assert_eq!(
        pick(None, &empty_env)?,
        Some(("stored".into(), ProfileSelection::Stored))
    );
    assert_eq!(
        pick(None, &with_env)?,
        Some(("from-env".into(), ProfileSelection::Env))
    );
    assert_eq!(
        pick(Some("explicit"), &with_env)?,
        Some(("explicit".into(), ProfileSelection::Argument))
    );
    assert_eq!(
        pick(Some(""), &with_env)?,
        Some(("from-env".into(), ProfileSelection::Env))
    );

    let err = pick(Some("nope"), &no_env).expect_err("unknown explicit");
    assert!(matches!(&err, ProfileError::NotFound { name } if name == "nope"));
    let bad_env = env(&[("KINETIC_PROFILE", "ghost")]);
    let err = pick(None, &bad_env).expect_err("unknown env");
    assert!(err.to_string().contains("Profile 'ghost' does not exist."));
    assert!(err.is_invalid_input());

    let mut none_current = store_with(&["a"]);
    none_current.clear_current();
    assert!(none_current.active(None, &no_env)?.is_none());
    Ok(())
}

#[test]
fn profiles_path_override_and_home() -> Result<(), ProfileError> {
    let p = profiles_path(&env(&[
        ("KINETIC_PROFILES_FILE", "/tmp/p.json"),
        ("HOME", "/home/u"),
    ]))?;
    assert_eq!(p, PathBuf::from("/tmp/p.json"));
    let p = profiles_path(&env(&[("KINETIC_PROFILES_FILE", ""), ("HOME", "/home/u")]))?;
    assert_eq!(p, PathBuf::from("/home/u/.kinetic/profiles.json"));
    let err = profiles_path(&env(&[])).expect_err("no home");
    assert!(matches!(err, ProfileError::NoHome));
    // Closures work as an environment too.
    let from_fn = |name: &str| (name == "HOME").then(|| "/h".to_owned());
    assert_eq!(
        profiles_path(&from_fn)?,
        PathBuf::from("/h/.kinetic/profiles.json")
    );
    assert_eq!(from_fn.non_empty("HOME").as_deref(), Some("/h"));
    Ok(())
}

#[test]
fn a_profile_marked_as_naming_a_deleted_cluster_keeps_the_mark_in_the_file() {
    let mut store = parse(KINETIC_FILE).unwrap();
    let mut p = store.get("dev-tpu").unwrap().clone();
    assert!(p.names_cluster("my-proj", "us-east5-a", "tpu-cluster"));
    assert!(!p.names_cluster("my-proj", "us-east5-b", "tpu-cluster"));
    assert_eq!(p.cluster_deleted(), None);
    p.set_cluster_deleted(Some("2026-01-02T03:04:05Z"));
    store.upsert(p).unwrap();
    let text = store.to_json();
    assert!(
        text.contains(r#""cluster_deleted_at": "2026-01-02T03:04:05Z""#),
        "{text}"
    );
    let mut again = parse(&text).unwrap().get("dev-tpu").unwrap().clone();
    assert_eq!(again.cluster_deleted(), Some("2026-01-02T03:04:05Z"));
    // Made again: the mark goes, and the file is Kinetic's again.
    again.set_cluster_deleted(None);
    let mut store = parse(&text).unwrap();
    store.upsert(again).unwrap();
    assert_eq!(store.to_json(), KINETIC_FILE);
}
