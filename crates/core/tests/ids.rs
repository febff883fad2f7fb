//! Job and group ids, Kubernetes names, synthetic function names.

use kinetic_core::ids::{
    GroupId, IdError, JobId, SANITIZE_FALLBACK, display_name, gke_job_name, is_dns1123_label,
    is_label_value, k8s_name_for_backend, lws_name, sanitize_dns1123_label, sanitize_label_value,
    synthetic_func_name,
};
use proptest::prelude::*;

#[test]
fn random_ids_have_the_shape() {
    for _ in 0..50 {
        let j = JobId::new_random();
        assert_eq!(j.as_str().len(), 12);
        assert!(j.as_str().starts_with("job-"));
        assert!(
            j.hex()
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
        assert_eq!(j.as_str().parse::<JobId>().as_ref(), Ok(&j));
        let g = GroupId::new_random();
        assert!(g.as_str().starts_with("grp-"));
        assert_eq!(g.as_str().len(), 12);
        assert_eq!(g.as_str().parse::<GroupId>().as_ref(), Ok(&g));
    }
    assert_ne!(JobId::new_random(), JobId::new_random());
}

#[test]
fn ids_from_a_uuid_take_its_first_eight_hex_digits() {
    let u = uuid::Uuid::parse_str("1a2b3c4d-0000-4000-8000-000000000000").expect("uuid");
    assert_eq!(JobId::from_uuid(u).as_str(), "job-1a2b3c4d");
    assert_eq!(GroupId::from_uuid(u).as_str(), "grp-1a2b3c4d");
}

#[test]
fn parsing_refuses_other_shapes_naming_input_and_shape() {
    for bad in [
        "",
        "job-",
        "job-1a2b3c4",
        "job-1a2b3c4d5",
        "job-1A2B3C4D",
        "job-1a2b3c4g",
        "JOB-1a2b3c4d",
        "grp-1a2b3c4d",
        " job-1a2b3c4d",
        "job_1a2b3c4d",
    ] {
        let err = bad.parse::<JobId>().expect_err("must fail");
        assert_eq!(err, IdError::InvalidJobId { input: bad.into() });
        let msg = err.to_string();
        assert!(msg.contains(&format!("'{bad}'")), "{msg}");
        assert!(msg.contains("8 lowercase hex"), "{msg}");
    }
    let err = "job-1a2b3c4d".parse::<GroupId>().expect_err("must fail");
    assert!(err.to_string().contains("'grp-'"));
}

#[test]
fn serde_as_strings() {
    let j: JobId = "job-0123abcd".parse().expect("valid");
    assert_eq!(
        serde_json::to_string(&j).expect("json"),
        r#""job-0123abcd""#
    );
    let back: JobId = serde_json::from_str(r#""job-0123abcd""#).expect("valid");
    assert_eq!(back, j);
    let err = serde_json::from_str::<JobId>(r#""job-nope""#).expect_err("must fail");
    assert!(err.to_string().contains("job-nope"));
    let g: GroupId = serde_json::from_str(r#""grp-deadbeef""#).expect("valid");
    assert_eq!(g.hex(), "deadbeef");
}

#[test]
fn kubernetes_names() {
    let j: JobId = "job-1a2b3c4d".parse().expect("valid");
    assert_eq!(gke_job_name(&j), "kinetic-job-1a2b3c4d");
    assert_eq!(lws_name(&j), "keras-pathways-job-1a2b3c4d");
    assert_eq!(k8s_name_for_backend("gke", &j), "kinetic-job-1a2b3c4d");
    assert_eq!(
        k8s_name_for_backend("pathways", &j),
        "keras-pathways-job-1a2b3c4d"
    );
    assert_eq!(k8s_name_for_backend("local", &j), "kinetic-job-1a2b3c4d");
    assert!(is_dns1123_label(&gke_job_name(&j)));
    assert!(is_dns1123_label(&format!("{}-0", lws_name(&j))));
    assert_eq!(display_name("train", &j), "kinetic-train-job-1a2b3c4d");
}

#[test]
fn synthetic_function_names() {
    let cases = [
        (
            "functools.partial(<function train at 0x7f3a>, lr=0.1)",
            "functools.partial-function-train-at-0x7f",
        ),
        (
            "<__main__.Trainer object at 0x10>",
            "__main__.Trainer-object-at-0x10",
        ),
        ("---abc---", "abc"),
        ("a b", "a-b"),
        ("ünïcode", "n-code"),
        ("x.y_z-w", "x.y_z-w"),
    ];
    for (repr, expected) in cases {
        assert_eq!(synthetic_func_name(repr, "T"), expected, "{repr}");
    }
    // Cut to 40 after stripping; may end in '-' as in Kinetic.
    let long = format!("{} {}", "a".repeat(39), "b".repeat(10));
    let name = synthetic_func_name(&long, "T");
    assert_eq!(name.len(), 40);
    assert!(name.ends_with('-'));
    assert_eq!(synthetic_func_name(&"x".repeat(100), "T"), "x".repeat(40));
    // Nothing usable: the type name.
    assert_eq!(synthetic_func_name("<<>>", "partial"), "partial");
    assert_eq!(synthetic_func_name("", "Callable"), "Callable");
}

#[test]
fn dns_label_sanitising_examples() {
    let cases = [
        ("kinetic-job-1a2b3c4d", "kinetic-job-1a2b3c4d"),
        ("Kinetic_My.Func", "kinetic-my-func"),
        ("--a--", "a"),
        ("a  b", "a-b"),
        ("ÄBC", "bc"),
        ("", SANITIZE_FALLBACK),
        ("---", SANITIZE_FALLBACK),
        ("日本", SANITIZE_FALLBACK),
    ];
    for (input, expected) in cases {
        assert_eq!(sanitize_dns1123_label(input), expected, "{input:?}");
    }
    let long = format!("{}-{}", "a".repeat(62), "b".repeat(5));
    let s = sanitize_dns1123_label(&long);
    assert_eq!(s, "a".repeat(62), "cut to 63 then trailing '-' removed");
}

#[test]
fn label_value_sanitising_examples() {
    let cases = [
        ("My.Func_v2", "My.Func_v2"),
        ("_x_", "x"),
        ("a b/c", "a-b-c"),
        ("", SANITIZE_FALLBACK),
        ("...", SANITIZE_FALLBACK),
    ];
    for (input, expected) in cases {
        assert_eq!(sanitize_label_value(input), expected, "{input:?}");
    }
    assert_eq!(sanitize_label_value(&"x".repeat(80)).len(), 63);
}

#[test]
fn validators() {
    assert!(is_dns1123_label("a"));
    assert!(is_dns1123_label("a-1"));
    assert!(!is_dns1123_label(""));
    assert!(!is_dns1123_label("-a"));
    assert!(!is_dns1123_label("a-"));
    assert!(!is_dns1123_label("A"));
    assert!(!is_dns1123_label("a.b"));
    assert!(!is_dns1123_label(&"a".repeat(64)));
    assert!(is_dns1123_label(&"a".repeat(63)));
    assert!(is_label_value("A.b_c-9"));
    assert!(!is_label_value("_a"));
    assert!(!is_label_value("a/b"));
    assert!(!is_label_value(""));
}

proptest! {
    #[test]
    fn dns_labels_are_valid_idempotent_and_non_empty(s in any::<String>()) {
        let once = sanitize_dns1123_label(&s);
        prop_assert!(is_dns1123_label(&once), "{once:?}");
        prop_assert_eq!(sanitize_dns1123_label(&once), once.clone());
    }

    #[test]
    fn dns_labels_from_name_like_text(s in "[A-Za-z0-9_.-]{0,100}") {
        let once = sanitize_dns1123_label(&s);
        prop_assert!(is_dns1123_label(&once), "{once:?}");
        prop_assert_eq!(sanitize_dns1123_label(&once), once);
    }

    #[test]
    fn valid_labels_are_unchanged(s in "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?") {
        prop_assert_eq!(sanitize_dns1123_label(&s), s);
    }

    #[test]
    fn label_values_are_valid_idempotent_and_non_empty(s in any::<String>()) {
        let once = sanitize_label_value(&s);
        prop_assert!(is_label_value(&once), "{once:?}");
        prop_assert_eq!(sanitize_label_value(&once), once);
    }

    #[test]
    fn synthetic_names_are_short_and_safe(repr in any::<String>()) {
        let name = synthetic_func_name(&repr, "T");
        prop_assert!(!name.is_empty());
        prop_assert!(name.chars().count() <= 40);
        prop_assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')));
        prop_assert!(!name.starts_with('-'));
    }

    #[test]
    fn job_ids_round_trip(hex in "[0-9a-f]{8}") {
        let text = format!("job-{hex}");
        let id: JobId = text.parse().map_err(|e: IdError| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(id.to_string(), text);
    }
}
