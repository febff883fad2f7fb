//! One call plans a whole submission: what the backend is handed
//! ([`plan::JobPlan::prepared`]) is the plan's own output, consistent with
//! the objects it writes, so the execute step adds nothing of its own.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use kinetic_core::budget::BudgetRequest;
use kinetic_core::env::{EnvEntry, EnvSnapshot, SecretValue, capture};
use kinetic_core::hashing::ContentHash;
use kinetic_core::plan::{
    self, ContextFacts, DataFacts, JobFacts, ProjectFacts, SubmissionFacts, UploadSource,
};
use kinetic_core::ports::{Deadlines, ObjectPath};
use kinetic_core::protocol::{RunnerEntrypoint, RunnerPlan, RunnerSpec};
use kinetic_core::record::{JobRecord, UtcTimestamp};
use kinetic_core::settings::EngineSettings;
use kinetic_core::spec::{Arg, Data, Entrypoint, JobSpec};

fn uri_of(p: &ObjectPath) -> String {
    format!("gs://bkt/{p}")
}

fn bytes(source: &UploadSource) -> &Bytes {
    match source {
        UploadSource::Bytes(b) => b,
        UploadSource::File(p) => panic!("{} is a file, not bytes", p.display()),
    }
}

#[test]
fn the_prepared_job_is_the_plans_output() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    std::fs::create_dir_all(&data_dir).unwrap();
    let deadlines = Deadlines {
        run: Some(Duration::from_secs(60)),
        pending: Some(Duration::from_secs(5)),
    };
    let budgets = BudgetRequest {
        retries: Some(2),
        restarts: None,
    };
    let spec = JobSpec::new(Entrypoint::parse("work:f").unwrap())
        .accelerator("v5litepod-8")
        .arg(Arg::Data(
            Data::new("data", dir.path()).unwrap().fuse(true).unwrap(),
        ))
        .deadlines(deadlines)
        .budgets(budgets);
    let settings = EngineSettings::for_cluster("p", "us-central1-a", "c", "default");
    let env = capture(
        &[
            EnvEntry::Literal("PLAIN".parse().unwrap(), SecretValue::new("1")),
            EnvEntry::Required {
                name: "TOKEN".parse().unwrap(),
                secret: true,
            },
        ],
        &EnvSnapshot::from_pairs([("TOKEN", "hunter2-hunter2")]),
    )
    .unwrap();
    let job_id = "job-0a1b2c3d".parse().unwrap();
    let (text, accelerator) = plan::accelerator(&spec, &settings).unwrap();
    let job = JobFacts::new(
        job_id,
        "gke",
        &text,
        &accelerator,
        UtcTimestamp::from_unix_seconds(1_750_000_000),
    )
    .with_env(env.clone());
    let project = ProjectFacts {
        plan: RunnerPlan {
            package_root: "/src".into(),
            entry_rel: String::new(),
            client_cwd_rel: Some(String::new()),
            sys_path_rel: vec![String::new()],
        },
        entrypoint: RunnerEntrypoint::Function {
            module: Some("work".into()),
            path: None,
            function: "f".into(),
        },
    };
    let context = ContextFacts::new([3; 32], 10, 1, UploadSource::File("/tmp/c.zip".into()));
    let mut facts = SubmissionFacts::new(context, project, job);
    facts.data = BTreeMap::from([(
        data_dir.clone(),
        DataFacts::new(ContentHash::from_bytes([9; 32]), true),
    )]);

    let planned = plan::submission(&spec, &settings, facts, &uri_of).unwrap();
    let prepared = &planned.job.prepared;

    // The shared uploads are planned under the job.
    assert_eq!(planned.shared.data.len(), 1);
    assert_eq!(
        planned.shared.context.key.as_str(),
        format!("contexts/{}.zip", "03".repeat(32))
    );
    // The backend is handed the spec the plan writes, and the record it writes.
    assert_eq!(prepared.spec_uri, uri_of(&planned.job.spec.key));
    let record = JobRecord::from_json_bytes(bytes(&planned.job.record_upload.source)).unwrap();
    assert_eq!(prepared.record, record);
    assert_eq!(
        record.created_at,
        UtcTimestamp::from_unix_seconds(1_750_000_000)
    );
    // The variables' values go to the backend, their names to spec.json.
    assert_eq!(prepared.env, env);
    let runner: RunnerSpec = serde_json::from_slice(bytes(&planned.job.spec.source)).unwrap();
    assert_eq!(runner.env_names, ["PLAIN", "TOKEN"]);
    assert_eq!(runner.secret_names, ["TOKEN"]);
    assert!(!String::from_utf8_lossy(bytes(&planned.job.spec.source)).contains("hunter2-hunter2"));
    // The spec's deadlines, budgets, accelerator and mounts.
    assert_eq!(prepared.deadlines, deadlines);
    assert_eq!(prepared.budget_request, budgets);
    assert_eq!(prepared.budgets.retries, 2);
    assert_eq!(prepared.accelerator, accelerator);
    assert_eq!(prepared.fuse_mounts, planned.job.fuse_mounts);
    assert_eq!(prepared.fuse_mounts.len(), 1);
    assert_eq!(prepared.fuse_mounts[0].mount_path, "/_kinetic/fuse-data/0");
}
