//! Target precedence with provenance and derived names, with Kinetic's
//! pinned cases.

use std::collections::BTreeMap;
use std::path::Path;

use kinetic_core::config::{
    ConfigArgs, ConfigError, DerivedNames, Profile, ProfileSelection, ProfileStore, Source,
    resolve, resolve_partial, zone_to_ar_location, zone_to_region,
};

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
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
fn pinned_profile_env_and_argument_mix() -> Result<(), ConfigError> {
    let cfg = resolve(
        &ConfigArgs::new().namespace("kw-ns"),
        &env(&[("KINETIC_CLUSTER", "env-cluster")]),
        &store_with_dev(),
    )?;
    assert_eq!(
        (cfg.project.as_str(), &cfg.project.source),
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
fn pinned_only_kinetic_project_gives_defaults() -> Result<(), ConfigError> {
    let cfg = resolve(
        &ConfigArgs::new(),
        &env(&[("KINETIC_PROJECT", "p")]),
        &ProfileStore::new(),
    )?;
    assert_eq!(
        (cfg.project.as_str(), &cfg.project.source),
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
    let err = resolve(&ConfigArgs::new(), &env(&[]), &ProfileStore::new())
        .expect_err("no project anywhere");
    assert!(matches!(err, ConfigError::MissingProject));
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
fn argument_beats_env_beats_profile_beats_default() -> Result<(), ConfigError> {
    let store = store_with_dev();
    let all_env = env(&[
        ("KINETIC_PROJECT", "env-proj"),
        ("KINETIC_ZONE", "env-zone-a"),
        ("KINETIC_CLUSTER", "env-cluster"),
        ("KINETIC_NAMESPACE", "env-ns"),
    ]);
    let args = ConfigArgs::new()
        .project("arg-proj")
        .zone("arg-zone-a")
        .cluster("arg-cluster")
        .namespace("arg-ns");
    let cfg = resolve(&args, &all_env, &store)?;
    for s in [&cfg.project, &cfg.zone, &cfg.cluster, &cfg.namespace] {
        assert_eq!(s.source, Source::Argument);
        assert!(s.value.starts_with("arg-"));
    }
    let cfg = resolve(&ConfigArgs::new(), &all_env, &store)?;
    assert_eq!(cfg.project.source, Source::Env("KINETIC_PROJECT"));
    assert_eq!(cfg.zone.source, Source::Env("KINETIC_ZONE"));
    assert_eq!(cfg.cluster.source, Source::Env("KINETIC_CLUSTER"));
    assert_eq!(cfg.namespace.source, Source::Env("KINETIC_NAMESPACE"));
    assert_eq!(cfg.namespace.value, "env-ns");

    let cfg = resolve(&ConfigArgs::new(), &env(&[]), &store)?;
    assert_eq!(cfg.namespace.value, "dev-ns");
    assert_eq!(cfg.namespace.source, prof("dev"));
    Ok(())
}

#[test]
fn empty_env_vars_are_unset() -> Result<(), ConfigError> {
    let cfg = resolve(
        &ConfigArgs::new(),
        &env(&[
            ("KINETIC_ZONE", ""),
            ("KINETIC_PROJECT", ""),
            ("KINETIC_OUTPUT_DIR", ""),
        ]),
        &store_with_dev(),
    )?;
    assert_eq!(cfg.zone.source, prof("dev"));
    assert_eq!(cfg.project.source, prof("dev"));
    assert_eq!(cfg.output_dir, None);
    Ok(())
}

#[test]
fn explicit_empty_values() -> Result<(), ConfigError> {
    let store = store_with_dev();
    // An explicit empty zone is used as given (Kinetic: "is not None").
    let cfg = resolve(&ConfigArgs::new().zone(""), &env(&[]), &store)?;
    assert_eq!(
        (cfg.zone.as_str(), &cfg.zone.source),
        ("", &Source::Argument)
    );
    assert_eq!(cfg.names().region, "us-central1");

    // An explicit empty project skips the profile...
    let gcp = env(&[("GOOGLE_CLOUD_PROJECT", "gcp-proj")]);
    let cfg = resolve(&ConfigArgs::new().project(""), &gcp, &store)?;
    assert_eq!(
        (cfg.project.as_str(), &cfg.project.source),
        ("gcp-proj", &Source::Env("GOOGLE_CLOUD_PROJECT"))
    );
    // ...but not KINETIC_PROJECT, which still comes first.
    let both = env(&[
        ("GOOGLE_CLOUD_PROJECT", "gcp-proj"),
        ("KINETIC_PROJECT", "kp"),
    ]);
    let cfg = resolve(&ConfigArgs::new().project(""), &both, &store)?;
    assert_eq!(cfg.project.source, Source::Env("KINETIC_PROJECT"));
    // With no fallback, the explicit empty project is an error even though the profile has one.
    let err = resolve(&ConfigArgs::new().project(""), &env(&[]), &store).expect_err("empty");
    assert!(matches!(err, ConfigError::MissingProject));
    Ok(())
}

#[test]
fn google_cloud_project_is_the_last_fallback() -> Result<(), ConfigError> {
    let gcp = env(&[("GOOGLE_CLOUD_PROJECT", "gcp-proj")]);
    // The profile's project beats it.
    let cfg = resolve(&ConfigArgs::new(), &gcp, &store_with_dev())?;
    assert_eq!(cfg.project.value, "dev-proj");
    // With no profile it is used.
    let cfg = resolve(&ConfigArgs::new(), &gcp, &ProfileStore::new())?;
    assert_eq!(cfg.project.source, Source::Env("GOOGLE_CLOUD_PROJECT"));
    // An empty profile project falls through to it.
    let mut store = ProfileStore::new();
    store.upsert(Profile::new("blank", "")).expect("valid name");
    let cfg = resolve(&ConfigArgs::new(), &gcp, &store)?;
    assert_eq!(cfg.project.value, "gcp-proj");
    assert_eq!(
        cfg.zone.source,
        prof("blank"),
        "other fields still come from the profile"
    );
    Ok(())
}

#[test]
fn which_profile_applies() -> Result<(), ConfigError> {
    let mut store = store_with_dev();
    store
        .upsert(Profile::new("prod", "prod-proj"))
        .expect("valid");
    let e = env(&[("KINETIC_PROFILE", "prod")]);
    let cfg = resolve(&ConfigArgs::new(), &e, &store)?;
    assert_eq!(cfg.project.value, "prod-proj");
    assert_eq!(cfg.project.source, prof("prod"));
    assert_eq!(
        cfg.profile.as_ref().map(|p| p.selected_by),
        Some(ProfileSelection::Env)
    );

    let cfg = resolve(&ConfigArgs::new().profile("dev"), &e, &store)?;
    assert_eq!(cfg.project.value, "dev-proj");
    assert_eq!(
        cfg.profile.as_ref().map(|p| p.selected_by),
        Some(ProfileSelection::Argument)
    );

    for (args, e) in [
        (ConfigArgs::new().profile("ghost"), env(&[])),
        (ConfigArgs::new(), env(&[("KINETIC_PROFILE", "ghost")])),
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
fn env_only_settings() -> Result<(), ConfigError> {
    let cfg = resolve(
        &ConfigArgs::new().project("p"),
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
    let cfg = resolve(&ConfigArgs::new().project("p"), &e, &ProfileStore::new())?;
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
fn partial_config_allows_a_missing_project() -> Result<(), ConfigError> {
    let partial = resolve_partial(&ConfigArgs::new(), &env(&[]), &ProfileStore::new())?;
    assert_eq!(partial.project, None);
    assert_eq!(partial.names(), None);
    assert_eq!(partial.zone.value, "us-central1-a");
    assert!(matches!(
        partial.require_project(),
        Err(ConfigError::MissingProject)
    ));
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
fn resolved_config_serialises_with_sources() -> Result<(), Box<dyn std::error::Error>> {
    let store = ProfileStore::from_json(
        r#"{"current": "dev", "profiles": {"dev": {"project": "p", "zone": "z-a", "cluster": "c"}}}"#,
        Path::new("p.json"),
    )?;
    let cfg = resolve(&ConfigArgs::new(), &env(&[]), &store)?;
    let v = serde_json::to_value(&cfg)?;
    assert_eq!(
        v["project"],
        serde_json::json!({"value": "p", "source": {"kind": "profile", "name": "dev"}})
    );
    assert_eq!(
        v["profile"],
        serde_json::json!({"name": "dev", "selected_by": "stored"})
    );
    assert_eq!(v["namespace"]["value"], "default");
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
