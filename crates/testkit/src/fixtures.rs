//! Fixtures for manifest tests: a prepared job with fixed identity, and
//! golden JSON files compared byte for byte.

use std::path::Path;

use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_core::env::{EnvEntry, EnvSnapshot, SecretValue, capture};
use kinetic_core::ids::{JobId, k8s_name_for_backend};
use kinetic_core::ports::{Deadlines, PreparedJob};
use kinetic_core::record::{JobRecord, UtcTimestamp};
use serde_json::Value;

/// The job id of [`fixed_job`].
pub const FIXED_JOB_ID: &str = "job-0a1b2c3d";

/// A prepared job of `backend` on `accelerator`, with a fixed id, project,
/// bucket, image and creation time (so its manifests are stable), these
/// captured variables and deadlines. Panics on an accelerator the registry
/// refuses (a test's own input).
pub fn fixed_job(
    backend: &str,
    accelerator: &str,
    env: &[(&str, &str)],
    deadlines: Deadlines,
) -> PreparedJob {
    let job_id: JobId = FIXED_JOB_ID.parse().expect("a valid job id");
    let record = JobRecord {
        accelerator: accelerator.into(),
        backend: backend.into(),
        bucket_name: "proj-kn-cluster-jobs".into(),
        cluster_name: "cluster".into(),
        created_at: UtcTimestamp::from_unix_seconds(1_774_432_800),
        debug: false,
        display_name: format!("kinetic-train-{job_id}"),
        entrypoint: Some("train:main".into()),
        func_name: "train".into(),
        group_id: None,
        group_index: None,
        group_kind: None,
        image_uri: "us-docker.pkg.dev/proj/kn-cluster/base-cpu:abc123".into(),
        k8s_name: k8s_name_for_backend(backend, &job_id),
        job_id,
        namespace: "team-a".into(),
        project: "proj".into(),
        store_url: None,
        zone: "us-central1-a".into(),
    };
    let entries: Vec<EnvEntry> = env
        .iter()
        .map(|(k, v)| {
            EnvEntry::Literal(
                k.parse().expect("a valid variable name"),
                SecretValue::new(*v),
            )
        })
        .collect();
    let env = capture(&entries, &EnvSnapshot::new()).expect("captured variables");
    PreparedJob::new(
        record,
        AcceleratorSpec::parse(accelerator).expect("a known accelerator"),
        "gs://proj-kn-cluster-jobs/job-0a1b2c3d/spec.json".into(),
        env,
        deadlines,
    )
}

/// Compare `value`, pretty-printed, with `{dir}/{name}.json`; with
/// `KINETIC_UPDATE_GOLDEN` set, write it instead (then review the diff).
pub fn assert_golden(dir: &Path, name: &str, value: &Value) {
    let path = dir.join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(value).expect("JSON") + "\n";
    if std::env::var_os("KINETIC_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).expect("golden file written");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (set KINETIC_UPDATE_GOLDEN=1 to write it)",
            path.display()
        )
    });
    assert_eq!(
        text,
        want,
        "{name}: manifest differs from {}",
        path.display()
    );
}
