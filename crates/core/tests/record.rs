//! `handle.json` compatibility with Kinetic.

use kinetic_core::ids::{GroupId, JobId};
use kinetic_core::record::{EXTENSION_KEYS, JobRecord, REQUIRED_KEYS, RecordError, UtcTimestamp};
use serde_json::Value;

/// A handle.json as Kinetic writes it for a batch child: every field,
/// `json.dumps(..., sort_keys=True)` (Python's separators).
const KINETIC_HANDLE: &str = r#"{"accelerator": "tpu-v5e-1", "backend": "gke", "bucket_name": "my-proj-kn-kinetic-cluster-jobs", "cluster_name": "kinetic-cluster", "created_at": "2026-03-25T10:00:00Z", "debug": false, "display_name": "kinetic-train-job-1a2b3c4d", "func_name": "train", "group_id": "grp-0badf00d", "group_index": 3, "group_kind": "map", "image_uri": "us-docker.pkg.dev/my-proj/kn-kinetic-cluster/base:tpu-0123456789ab", "job_id": "job-1a2b3c4d", "k8s_name": "kinetic-job-1a2b3c4d", "namespace": "default", "project": "my-proj", "zone": "us-central1-a"}"#;

fn record() -> JobRecord {
    JobRecord {
        accelerator: "cpu".into(),
        backend: "local".into(),
        bucket_name: "p-kn-c-jobs".into(),
        cluster_name: "c".into(),
        created_at: "2026-01-02T03:04:05Z".parse().expect("timestamp"),
        debug: true,
        display_name: "kinetic-main-job-0000abcd".into(),
        entrypoint: Some("train:main".into()),
        func_name: "main".into(),
        group_id: None,
        group_index: None,
        group_kind: None,
        image_uri: String::new(),
        job_id: "job-0000abcd".parse().expect("id"),
        k8s_name: "kinetic-job-0000abcd".into(),
        namespace: "default".into(),
        project: "p".into(),
        store_url: Some("file:///tmp/kinetic".into()),
        zone: "us-central1-a".into(),
    }
}

fn keys(json: &str) -> Vec<String> {
    let v: serde_json::Map<String, Value> = serde_json::from_str(json).expect("object");
    v.keys().cloned().collect()
}

#[test]
fn reads_a_literal_kinetic_handle() {
    let r = JobRecord::from_json(KINETIC_HANDLE).expect("reads");
    assert_eq!(r.job_id, "job-1a2b3c4d".parse::<JobId>().expect("id"));
    assert_eq!(r.backend, "gke");
    assert_eq!(r.project, "my-proj");
    assert_eq!(r.cluster_name, "kinetic-cluster");
    assert_eq!(r.zone, "us-central1-a");
    assert_eq!(r.namespace, "default");
    assert_eq!(r.bucket_name, "my-proj-kn-kinetic-cluster-jobs");
    assert_eq!(r.k8s_name, "kinetic-job-1a2b3c4d");
    assert!(r.image_uri.ends_with("base:tpu-0123456789ab"));
    assert_eq!(r.accelerator, "tpu-v5e-1");
    assert_eq!(r.func_name, "train");
    assert_eq!(r.display_name, "kinetic-train-job-1a2b3c4d");
    assert_eq!(r.created_at.to_string(), "2026-03-25T10:00:00Z");
    assert_eq!(
        r.group_id,
        Some("grp-0badf00d".parse::<GroupId>().expect("id"))
    );
    assert_eq!(r.group_kind.as_deref(), Some("map"));
    assert_eq!(r.group_index, Some(3));
    assert!(!r.debug);
    assert_eq!(r.entrypoint, None);
    assert_eq!(r.store_url, None);
}

#[test]
fn writes_what_kinetic_writes() {
    // Same keys and values as Kinetic's sorted dict, compact separators.
    let r = JobRecord::from_json(KINETIC_HANDLE).expect("reads");
    let ours: Value = serde_json::from_str(&r.to_json()).expect("json");
    let theirs: Value = serde_json::from_str(KINETIC_HANDLE).expect("json");
    assert_eq!(ours, theirs);
    assert_eq!(keys(&r.to_json()), keys(KINETIC_HANDLE));
}

#[test]
fn round_trip() {
    let r = record();
    assert_eq!(JobRecord::from_json(&r.to_json()).expect("reads"), r);
    assert_eq!(JobRecord::from_json(&r.to_json_pretty()).expect("reads"), r);
    let via_serde: JobRecord = serde_json::from_str(&r.to_json()).expect("serde");
    assert_eq!(via_serde, r);
    assert_eq!(
        JobRecord::from_json_bytes(r.to_json().as_bytes()).expect("reads"),
        r
    );
}

#[test]
fn output_is_sorted_and_byte_stable() {
    let r = record();
    let a = r.to_json();
    assert_eq!(a, r.clone().to_json());
    assert_eq!(a, JobRecord::from_json(&a).expect("reads").to_json());
    let k = keys(&a);
    let mut sorted = k.clone();
    sorted.sort();
    assert_eq!(k, sorted);
    // serde's own serialisation is sorted too (fields are declared in order).
    let serde_keys = keys(&serde_json::to_string(&r).expect("json"));
    assert_eq!(serde_keys, sorted);
    assert_eq!(
        a,
        r#"{"accelerator":"cpu","backend":"local","bucket_name":"p-kn-c-jobs","cluster_name":"c","created_at":"2026-01-02T03:04:05Z","debug":true,"display_name":"kinetic-main-job-0000abcd","entrypoint":"train:main","func_name":"main","image_uri":"","job_id":"job-0000abcd","k8s_name":"kinetic-job-0000abcd","namespace":"default","project":"p","store_url":"file:///tmp/kinetic","zone":"us-central1-a"}"#
    );
}

#[test]
fn none_keys_are_dropped_and_debug_is_always_present() {
    let mut r = record();
    r.entrypoint = None;
    r.store_url = None;
    r.debug = false;
    let json = r.to_json();
    for absent in [
        "group_id",
        "group_kind",
        "group_index",
        "entrypoint",
        "store_url",
    ] {
        assert!(!json.contains(absent), "{absent} in {json}");
    }
    assert!(!json.contains("null"));
    assert!(json.contains(r#""debug":false"#));
    assert_eq!(keys(&json).len(), REQUIRED_KEYS.len() + 1);
}

#[test]
fn unknown_keys_are_ignored() {
    let mut v: serde_json::Map<String, Value> = serde_json::from_str(KINETIC_HANDLE).expect("json");
    v.insert("future_field".into(), Value::from(42));
    v.insert("another".into(), serde_json::json!({"nested": [1, 2]}));
    let r = JobRecord::from_json(&Value::Object(v).to_string()).expect("reads");
    assert!(!r.to_json().contains("future_field"));
}

#[test]
fn missing_required_key_is_an_error_naming_it() {
    for key in REQUIRED_KEYS {
        let mut v: serde_json::Map<String, Value> =
            serde_json::from_str(KINETIC_HANDLE).expect("json");
        v.remove(key);
        let err = JobRecord::from_json(&Value::Object(v).to_string()).expect_err("must fail");
        assert_eq!(err, RecordError::MissingKey { key });
        assert!(err.to_string().contains(&format!("'{key}'")));
    }
}

#[test]
fn optional_keys_may_be_absent_or_null() {
    let mut v: serde_json::Map<String, Value> = serde_json::from_str(KINETIC_HANDLE).expect("json");
    for key in ["group_id", "group_kind", "group_index", "debug"] {
        v.remove(key);
    }
    v.insert("group_index".into(), Value::Null);
    let r = JobRecord::from_json(&Value::Object(v).to_string()).expect("reads");
    assert_eq!(r.group_id, None);
    assert_eq!(r.group_index, None);
    assert!(!r.debug, "Kinetic's dataclass default");
}

#[test]
fn wrong_types_name_the_key_and_what_is_accepted() {
    let cases = [
        ("zone", Value::from(1), "a string"),
        ("job_id", Value::from("job-XYZ"), "8 lowercase hex"),
        ("created_at", Value::from("yesterday"), "ISO-8601"),
        ("group_index", Value::from(-1), "non-negative integer"),
        ("group_index", Value::from("3"), "non-negative integer"),
        ("group_id", Value::from("grp-no"), "'grp-'"),
        ("debug", Value::from("false"), "a boolean"),
        ("store_url", Value::from(true), "a string"),
    ];
    for (key, value, expected) in cases {
        let mut v: serde_json::Map<String, Value> =
            serde_json::from_str(KINETIC_HANDLE).expect("json");
        v.insert(key.into(), value);
        let err = JobRecord::from_json(&Value::Object(v).to_string()).expect_err("must fail");
        let msg = err.to_string();
        assert!(msg.contains(&format!("'{key}'")), "{msg}");
        assert!(msg.contains(expected), "{msg}");
    }
}

#[test]
fn not_json_or_not_an_object() {
    assert!(matches!(
        JobRecord::from_json("{"),
        Err(RecordError::InvalidJson { .. })
    ));
    assert_eq!(
        JobRecord::from_json("[]"),
        Err(RecordError::NotAnObject { found: "an array" })
    );
}

#[test]
fn timestamps() {
    let t: UtcTimestamp = "2026-03-25T10:00:00Z".parse().expect("ok");
    assert_eq!(t.to_string(), "2026-03-25T10:00:00Z");
    let frac: UtcTimestamp = "2026-03-25T10:00:00.987654Z".parse().expect("ok");
    assert_eq!(frac.to_string(), "2026-03-25T10:00:00Z");
    let offset: UtcTimestamp = "2026-03-25T10:00:00+00:00".parse().expect("ok");
    assert_eq!(offset, t);
    assert_eq!(
        UtcTimestamp::from_unix_seconds(0).to_string(),
        "1970-01-01T00:00:00Z"
    );
    assert_eq!(t.unix_seconds(), 1_774_432_800);
    let now = UtcTimestamp::now().to_string();
    assert_eq!(now.len(), 20);
    assert!(now.ends_with('Z'));
    for bad in [
        "",
        "2026-03-25",
        "2026-03-25T10:00:00+02:00",
        "2026-13-01T00:00:00Z",
    ] {
        let err = bad.parse::<UtcTimestamp>().expect_err("must fail");
        assert!(err.to_string().contains(&format!("'{bad}'")));
    }
}

#[test]
fn keys_and_constants() {
    let r = record();
    assert_eq!(r.key().as_str(), "job-0000abcd/handle.json");
    assert_eq!(kinetic_core::layout::record(&r.job_id), r.key());
    assert_eq!(EXTENSION_KEYS, ["entrypoint", "store_url"]);
}
