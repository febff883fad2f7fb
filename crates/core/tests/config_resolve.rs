//! Target precedence with provenance and derived names, with Kinetic's
//! pinned cases, through the one resolution API (`Settings::resolve`).

use std::collections::BTreeMap;
use std::path::Path;

use kinetic_core::config::{
    DerivedNames, Profile, ProfileSelection, ProfileStore, Source, zone_to_ar_location,
    zone_to_region,
};
use kinetic_core::settings::{Settings, SettingsArgs, SettingsError, SettingsInput};

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Resolve with `env` and a home directory (which the profiles file's
/// default needs).
fn resolve(
    args: &SettingsArgs,
    env: &BTreeMap<String, String>,
    store: &ProfileStore,
) -> Result<Settings, SettingsError> {
    let mut env = env.clone();
    env.entry("HOME".to_owned())
        .or_insert_with(|| "/h".to_owned());
    Settings::resolve(args, &SettingsInput::new(&env, store, Path::new("/work")))
}

fn store_with_dev() -> ProfileStore {
    let mut s = ProfileStore::new();
    s.upsert(
        Profile::new("dev", "dev-proj")
            .zone("europe-west4-b")
            .cluster("dev-cluster")
            .namespace("dev-ns"),
    )
    .expect("valid");
    s
}

fn prof(name: &str) -> Source {
    Source::Profile(name.to_owned())
}

#[test]
fn pinned_profile_env_and_argument_mix() -> Result<(), SettingsError> {
    let cfg = resolve(
        &SettingsArgs::new().namespace("kw-ns"),
        &env(&[("KINETIC_CLUSTER", "env-cluster")]),
        &store_with_dev(),
    )?;
    assert_eq!(
        (
            cfg.project.as_ref().unwrap().as_str(),
            &cfg.project.as_ref().unwrap().source
        ),
        ("dev-proj", &prof("dev"))
    );
    assert_eq!(
        (cfg.zone.as_str(), &cfg.zone.source),
        ("europe-west4-b", &prof("dev"))
    );
    assert_eq!(
        (cfg.cluster.as_str(), &cfg.cluster.source),
        ("env-cluster", &Source::Env("KINETIC_CLUSTER"))
    );
    assert_eq!(
        (cfg.namespace.as_str(), &cfg.namespace.source),
        ("kw-ns", &Source::Argument)
    );
    let active = cfg.profile.as_ref().expect("dev is current");
    assert_eq!(
        (active.name.as_str(), active.selected_by),
        ("dev", ProfileSelection::Stored)
    );
    Ok(())
}

#[test]
fn pinned_only_kinetic_project_gives_defaults() -> Result<(), SettingsError> {
    let cfg = resolve(
        &SettingsArgs::new(),
        &env(&[("KINETIC_PROJECT", "p")]),
        &ProfileStore::new(),
    )?;
    assert_eq!(
        (
            cfg.project.as_ref().unwrap().as_str(),
            &cfg.project.as_ref().unwrap().source
        ),
        ("p", &Source::Env("KINETIC_PROJECT"))
    );
    assert_eq!(
        (cfg.zone.as_str(), &cfg.zone.source),
        ("us-central1-a", &Source::Default)
    );
    assert_eq!(
        (cfg.cluster.as_str(), &cfg.cluster.source),
        ("kinetic-cluster", &Source::Default)
    );
    assert_eq!(
        (cfg.namespace.as_str(), &cfg.namespace.source),
        ("default", &Source::Default)
    );
    assert_eq!(cfg.profile, None);
    Ok(())
}

#[test]
fn pinned_missing_project_error_text() {
    let settings =
        resolve(&SettingsArgs::new(), &env(&[]), &ProfileStore::new()).expect("resolves");
    assert_eq!(settings.project, None);
    let err = settings.require_project().expect_err("no project anywhere");
    assert!(matches!(err, SettingsError::MissingProject));
    assert!(err.is_invalid_input());
    let msg = err.to_string();
    for needle in [
        "No GCP project configured",
        "kinetic init",
        "kinetic profile create",
        "project=",
        "--project",
        "KINETIC_PROJECT",
        "GOOGLE_CLOUD_PROJECT",
    ] {
        assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
    }
}

#[test]
fn argument_beats_env_beats_profile_beats_default() -> Result<(), SettingsError> {
    let store = store_with_dev();
    let all_env = env(&[
        ("KINETIC_PROJECT", "env-proj"),
        ("KINETIC_ZONE", "env-zone-a"),
        ("KINETIC_CLUSTER", "env-cluster"),
        ("KINETIC_NAMESPACE", "env-ns"),
    ]);
    let args = SettingsArgs::new()
        .project("arg-proj")
        .zone("arg-zone-a")
        .cluster("arg-cluster")
        .namespace("arg-ns");
    let cfg = resolve(&args, &all_env, &store)?;
    for s in [
        cfg.project.as_ref().unwrap(),
        &cfg.zone,
        &cfg.cluster,
        &cfg.namespace,
    ] {
        assert_eq!(s.source, Source::Argument);
        assert!(s.value.starts_with("arg-"));
    }
    let cfg = resolve(&SettingsArgs::new(), &all_env, &store)?;
    assert_eq!(
        cfg.project.as_ref().unwrap().source,
        Source::Env("KINETIC_PROJECT")
    );
    assert_eq!(cfg.zone.source, Source::Env("KINETIC_ZONE"));
    assert_eq!(cfg.cluster.source, Source::Env("KINETIC_CLUSTER"));
    assert_eq!(cfg.namespace.source, Source::Env("KINETIC_NAMESPACE"));
    assert_eq!(cfg.namespace.value, "env-ns");

    let cfg = resolve(&SettingsArgs::new(), &env(&[]), &store)?;
    assert_eq!(cfg.namespace.value, "dev-ns");
    assert_eq!(cfg.namespace.source, prof("dev"));
    Ok(())
}

#[test]
fn empty_env_vars_are_unset() -> Result<(), SettingsError> {
    let cfg = resolve(
        &SettingsArgs::new(),
        &env(&[
            ("KINETIC_ZONE", ""),
            ("KINETIC_PROJECT", ""),
            ("KINETIC_OUTPUT_DIR", ""),
        ]),
        &store_with_dev(),
    )?;
    assert_eq!(cfg.zone.source, prof("dev"));
    assert_eq!(cfg.project.as_ref().unwrap().source, prof("dev"));
    assert_eq!(cfg.output_dir, None);
    Ok(())
}

#[test]
fn explicit_empty_values() -> Result<(), SettingsError> {
    let store = store_with_dev();
    // An explicit empty zone is used as given (Kinetic: "is not None").
    let cfg = resolve(&SettingsArgs::new().zone(""), &env(&[]), &store)?;
    assert_eq!(
        (cfg.zone.as_str(), &cfg.zone.source),
        ("", &Source::Argument)
    );
    assert_eq!(cfg.names().unwrap().region, "us-central1");

    // An explicit empty project skips the profile...
    let gcp = env(&[("GOOGLE_CLOUD_PROJECT", "gcp-proj")]);
    let cfg = resolve(&SettingsArgs::new().project(""), &gcp, &store)?;
    assert_eq!(
        (
            cfg.project.as_ref().unwrap().as_str(),
            &cfg.project.as_ref().unwrap().source
        ),
        ("gcp-proj", &Source::Env("GOOGLE_CLOUD_PROJECT"))
    );
    // ...but not KINETIC_PROJECT, which still comes first.
    let both = env(&[
        ("GOOGLE_CLOUD_PROJECT", "gcp-proj"),
        ("KINETIC_PROJECT", "kp"),
    ]);
    let cfg = resolve(&SettingsArgs::new().project(""), &both, &store)?;
    assert_eq!(
        cfg.project.as_ref().unwrap().source,
        Source::Env("KINETIC_PROJECT")
    );
    // With no fallback, the explicit empty project is an error even though the profile has one.
    let cfg = resolve(&SettingsArgs::new().project(""), &env(&[]), &store)?;
    assert!(matches!(
        cfg.require_project(),
        Err(SettingsError::MissingProject)
    ));
    Ok(())
}

#[test]
fn google_cloud_project_is_the_last_fallback() -> Result<(), SettingsError> {
    let gcp = env(&[("GOOGLE_CLOUD_PROJECT", "gcp-proj")]);
    // The profile's project beats it.
    let cfg = resolve(&SettingsArgs::new(), &gcp, &store_with_dev())?;
    assert_eq!(cfg.project.as_ref().unwrap().value, "dev-proj");
    // With no profile it is used.
    let cfg = resolve(&SettingsArgs::new(), &gcp, &ProfileStore::new())?;
    assert_eq!(
        cfg.project.as_ref().unwrap().source,
        Source::Env("GOOGLE_CLOUD_PROJECT")
    );
    // An empty profile project falls through to it.
    let mut store = ProfileStore::new();
    store.upsert(Profile::new("blank", "")).expect("valid name");
    let cfg = resolve(&SettingsArgs::new(), &gcp, &store)?;
    assert_eq!(cfg.project.as_ref().unwrap().value, "gcp-proj");
    assert_eq!(
        cfg.zone.source,
        prof("blank"),
        "other fields still come from the profile"
    );
    Ok(())
}

#[test]
fn which_profile_applies() -> Result<(), SettingsError> {
    let mut store = store_with_dev();
    store
        .upsert(Profile::new("prod", "prod-proj"))
        .expect("valid");
    let e = env(&[("KINETIC_PROFILE", "prod")]);
    let cfg = resolve(&SettingsArgs::new(), &e, &store)?;
    assert_eq!(cfg.project.as_ref().unwrap().value, "prod-proj");
    assert_eq!(cfg.project.as_ref().unwrap().source, prof("prod"));
    assert_eq!(
        cfg.profile.as_ref().map(|p| p.selected_by),
        Some(ProfileSelection::Env)
    );

    let cfg = resolve(&SettingsArgs::new().profile("dev"), &e, &store)?;
    assert_eq!(cfg.project.as_ref().unwrap().value, "dev-proj");
    assert_eq!(
        cfg.profile.as_ref().map(|p| p.selected_by),
        Some(ProfileSelection::Argument)
    );

    for (args, e) in [
        (SettingsArgs::new().profile("ghost"), env(&[])),
        (SettingsArgs::new(), env(&[("KINETIC_PROFILE", "ghost")])),
    ] {
        let err = resolve(&args, &e, &store).expect_err("unknown profile");
        assert!(err.is_invalid_input());
        assert_eq!(
            err.to_string(),
            "Profile 'ghost' does not exist. Run 'kinetic profile ls' to see available profiles."
        );
    }
    Ok(())
}

#[test]
fn env_only_settings() -> Result<(), SettingsError> {
    let cfg = resolve(
        &SettingsArgs::new().project("p"),
        &env(&[]),
        &ProfileStore::new(),
    )?;
    assert_eq!(cfg.output_dir, None);
    assert_eq!(
        (cfg.base_image_repo.as_str(), &cfg.base_image_repo.source),
        ("kinetic", &Source::Default)
    );
    let e = env(&[
        ("KINETIC_OUTPUT_DIR", "gs://b/out"),
        ("KINETIC_BASE_IMAGE_REPO", "my/repo"),
    ]);
    let cfg = resolve(&SettingsArgs::new().project("p"), &e, &ProfileStore::new())?;
    let out = cfg.output_dir.as_ref().expect("set");
    assert_eq!(
        (out.as_str(), &out.source),
        ("gs://b/out", &Source::Env("KINETIC_OUTPUT_DIR"))
    );
    assert_eq!(
        cfg.base_image_repo.source,
        Source::Env("KINETIC_BASE_IMAGE_REPO")
    );
    assert_eq!(cfg.base_image_repo.value, "my/repo");
    Ok(())
}

#[test]
fn a_missing_project_leaves_the_names_unknown() -> Result<(), SettingsError> {
    let cfg = resolve(&SettingsArgs::new(), &env(&[]), &ProfileStore::new())?;
    assert_eq!(cfg.project, None);
    assert_eq!(cfg.names(), None);
    assert_eq!(cfg.zone.value, "us-central1-a");
    Ok(())
}

#[test]
fn sources_print_and_serialise() -> Result<(), serde_json::Error> {
    assert_eq!(Source::Argument.to_string(), "argument");
    assert_eq!(Source::Env("KINETIC_ZONE").to_string(), "env KINETIC_ZONE");
    assert_eq!(prof("dev").to_string(), "profile 'dev'");
    assert_eq!(Source::Default.to_string(), "default");
    assert_eq!(
        serde_json::to_value(Source::Env("KINETIC_ZONE"))?,
        serde_json::json!({"kind": "env", "var": "KINETIC_ZONE"})
    );
    assert_eq!(
        serde_json::to_value(prof("dev"))?,
        serde_json::json!({"kind": "profile", "name": "dev"})
    );
    assert_eq!(
        serde_json::to_value(Source::Default)?,
        serde_json::json!({"kind": "default"})
    );
    Ok(())
}

#[test]
fn settings_serialise_with_sources() -> Result<(), Box<dyn std::error::Error>> {
    let store = ProfileStore::from_json(
        r#"{"current": "dev", "profiles": {"dev": {"project": "p", "zone": "z-a", "cluster": "c"}}}"#,
        Path::new("p.json"),
    )?;
    let cfg = resolve(&SettingsArgs::new(), &env(&[]), &store)?;
    assert_eq!(
        serde_json::to_value(&cfg.project)?,
        serde_json::json!({"value": "p", "source": {"kind": "profile", "name": "dev"}})
    );
    assert_eq!(
        serde_json::to_value(&cfg.profile)?,
        serde_json::json!({"name": "dev", "selected_by": "stored"})
    );
    assert_eq!(cfg.namespace.value, "default");
    Ok(())
}

// ---- derived names ------------------------------------------------------

#[test]
fn pinned_zone_to_region() {
    let cases = [
        ("us-central1-a", "us-central1"),
        ("us-east4-c", "us-east4"),
        ("europe-west4-b", "europe-west4"),
        ("asia-southeast1-a", "asia-southeast1"),
        ("me-west1-a", "me-west1"),
        ("southamerica-east1-b", "southamerica-east1"),
        ("", "us-central1"),
        ("invalid", "us-central1"),
    ];
    for (zone, region) in cases {
        assert_eq!(zone_to_region(zone), region, "{zone:?}");
    }
}

#[test]
fn pinned_zone_to_ar_location() {
    let cases = [
        ("us-central1-a", "us"),
        ("us-east4-c", "us"),
        ("europe-west4-b", "europe"),
        ("asia-southeast1-a", "asia"),
        ("me-west1-a", "me-west1"),
        ("southamerica-east1-b", "southamerica-east1"),
        ("australia-southeast1-b", "australia-southeast1"),
        ("", "us"),
    ];
    for (zone, loc) in cases {
        assert_eq!(zone_to_ar_location(zone), loc, "{zone:?}");
    }
}

#[test]
fn derived_names_for_a_target() {
    let n = DerivedNames::new("my-proj", "me-west1-a", "kc");
    assert_eq!(n.region, "me-west1");
    assert_eq!(n.ar_location, "me-west1");
    assert_eq!(n.jobs_bucket, "my-proj-kn-kc-jobs");
    assert_eq!(n.builds_bucket, "my-proj-kn-kc-builds");
    assert_eq!(n.ar_repository, "kn-kc");
    assert_eq!(n.registry_prefix, "me-west1-docker.pkg.dev/my-proj/kn-kc");
    assert_eq!(n.kube_context, "gke_my-proj_me-west1-a_kc");
    assert_eq!(
        n.node_service_account,
        "kn-kc-nodes@my-proj.iam.gserviceaccount.com"
    );
    assert_eq!(
        n.build_service_account,
        "kn-kc-builds@my-proj.iam.gserviceaccount.com"
    );
    assert_eq!(n.k8s_service_account, "kinetic");
    assert_eq!(
        (n.network.as_str(), n.router.as_str(), n.nat.as_str()),
        ("kn-kc", "kn-kc-router", "kn-kc-nat")
    );
    assert_eq!(n.state_bucket_url, "gs://my-proj-kinetic-state");
    assert_eq!(n.stack, "my-proj-kc");

    let n = DerivedNames::new("p", "us-central1-a", "kinetic-cluster");
    assert_eq!(n.registry_prefix, "us-docker.pkg.dev/p/kn-kinetic-cluster");
    assert_eq!(n.jobs_bucket, "p-kn-kinetic-cluster-jobs");
}
