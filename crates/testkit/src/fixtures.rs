//! Fixtures for manifest tests: a prepared job with fixed identity, and
//! golden JSON files compared byte for byte.

use std::path::Path;

use bytes::Bytes;
use kinetic_core::env::{EnvEntry, EnvSnapshot, SecretValue, capture};
use kinetic_core::ids::JobId;
use kinetic_core::plan::{
    self, ContextFacts, JobFacts, ProjectFacts, SubmissionFacts, UploadSource,
};
use kinetic_core::ports::{Deadlines, ObjectPath, PreparedJob};
use kinetic_core::protocol::{RunnerEntrypoint, RunnerPlan};
use kinetic_core::record::UtcTimestamp;
use kinetic_core::settings::EngineSettings;
use kinetic_core::spec::{Entrypoint, JobSpec};
use serde_json::Value;

/// The job id of [`fixed_job`].
pub const FIXED_JOB_ID: &str = "job-0a1b2c3d";

/// A prepared job of `backend` on `accelerator`, with a fixed id, project,
/// bucket, image and creation time (so its manifests are stable), these
/// captured variables and deadlines, planned as the engine plans a job
/// ([`kinetic_core::plan::submission`]). Panics on an accelerator the
/// registry refuses (a test's own input).
pub fn fixed_job(
    backend: &str,
    accelerator: &str,
    env: &[(&str, &str)],
    deadlines: Deadlines,
) -> PreparedJob {
    let job_id: JobId = FIXED_JOB_ID.parse().expect("a valid job id");
    let spec = JobSpec::new(Entrypoint::parse("train:main").expect("an entrypoint"))
        .accelerator(accelerator)
        .deadlines(deadlines);
    let mut settings = EngineSettings::for_cluster("proj", "us-central1-a", "cluster", "team-a");
    settings.bucket_name = "proj-kn-cluster-jobs".into();
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
    let (accelerator_text, parsed) =
        plan::accelerator(&spec, &settings).expect("a known accelerator");
    let mut job = JobFacts::new(
        job_id,
        backend,
        &accelerator_text,
        &parsed,
        UtcTimestamp::from_unix_seconds(1_774_432_800),
    )
    .with_env(env);
    job.image_uri = "us-docker.pkg.dev/proj/kn-cluster/base-cpu:abc123".into();
    let project = ProjectFacts {
        plan: RunnerPlan {
            package_root: "/src".into(),
            entry_rel: String::new(),
            client_cwd_rel: Some(String::new()),
            sys_path_rel: vec![String::new()],
        },
        entrypoint: RunnerEntrypoint::Function {
            module: Some("train".into()),
            path: None,
            function: "main".into(),
        },
    };
    let context = ContextFacts::new([0; 32], 0, 0, UploadSource::Bytes(Bytes::new()));
    let uri_of = |p: &ObjectPath| format!("gs://proj-kn-cluster-jobs/{p}");
    plan::submission(
        &spec,
        &settings,
        SubmissionFacts::new(context, project, job),
        &uri_of,
    )
    .expect("the fixed job plans")
    .job
    .prepared
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
