//! Prepared job → Kubernetes objects: the batch/v1 Job and the Secret
//! that carries the captured environment. Pure functions; the golden
//! files under `tests/golden/` pin their JSON. The pod template, labels
//! and the Secret are the shared Kubernetes layer's ([`kinetic_kube::pod`]).

use k8s_openapi::api::batch::v1::{
    Job, JobSpec, PodFailurePolicy, PodFailurePolicyOnPodConditionsPattern, PodFailurePolicyRule,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinetic_core::ports::PreparedJob;
use kinetic_kube::pod::{self, PodSettings};
pub use kinetic_kube::pod::{
    ANNOTATION_FINAL_STATE, ANNOTATION_GCSFUSE, ANNOTATION_PENDING_DEADLINE, ANNOTATION_SPEC_URI,
    APP_KINETIC, CONTAINER_NAME, FuseMount, GCSFUSE_DRIVER, LABEL_APP, LABEL_GROUP_ID,
    LABEL_GROUP_INDEX, LABEL_JOB_ID, LABEL_JOB_NAME, ManifestOptions, RUNNER_PATH,
    gcs_fuse_volumes, secret_name,
};

/// Annotation carrying the job's infrastructure restart budget (see
/// [`kinetic_core::budget`]), present when the job has a failure budget.
pub const ANNOTATION_RESTARTS: &str = "kinetic.dev/restarts";

/// The batch/v1 Job of a prepared job: the shared pod template (labels
/// `app: kinetic`, `job-id`, `job-name`; `restartPolicy: Never`),
/// `backoffLimit` and `ttlSecondsAfterFinished` from `options`, and
/// `activeDeadlineSeconds` from the run deadline.
///
/// A job with failure budgets gets `backoffLimit` = its application
/// retries (at least `options`'), a [`budget_policy`], and its restart
/// budget in [`ANNOTATION_RESTARTS`] for the status to enforce.
pub fn job_manifest(job: &PreparedJob, options: &ManifestOptions) -> Job {
    let r = &job.record;
    let budgets = job.budgets;
    let mut annotations = pod::annotations(job, options);
    if !budgets.is_zero() {
        annotations.insert(ANNOTATION_RESTARTS.to_owned(), budgets.restarts.to_string());
    }
    let retries = i32::try_from(budgets.retries).unwrap_or(i32::MAX);
    Job {
        metadata: ObjectMeta {
            name: Some(r.k8s_name.clone()),
            namespace: Some(r.namespace.clone()),
            labels: Some(pod::labels(job, APP_KINETIC)),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(options.backoff_limit.max(retries)),
            pod_failure_policy: (!budgets.is_zero()).then(|| budget_policy(budgets.restarts)),
            // A debug job stays longer, to be looked at (Kinetic's 2 hours).
            ttl_seconds_after_finished: Some(if r.debug {
                options
                    .ttl_seconds_after_finished
                    .max(pod::DEBUG_TTL_SECONDS)
            } else {
                options.ttl_seconds_after_finished
            }),
            active_deadline_seconds: job
                .deadlines
                .run
                .map(|d| i64::try_from(d.as_secs().max(1)).unwrap_or(i64::MAX)),
            template: pod::pod_template(job, options, APP_KINETIC, job_pod_settings()),
            ..JobSpec::default()
        }),
        status: None,
    }
}

/// The Job's pods: `restartPolicy: Never`, and, through the downward API,
/// the pod's name in `KINETIC_POD_NAME`, which the runner keeps in the
/// marker by which it claims its attempt number (`KINETIC_ATTEMPT`): every
/// attempt of a Job runs the same template, and a pod cannot ask the API
/// server which attempt it is; and the pod's IP address (`status.podIP`)
/// in [`NODE_IPS_ENV`], the address of the job's one host.
fn job_pod_settings() -> PodSettings {
    PodSettings::new("Never").with_env(vec![
        pod::field_env(kinetic_core::budget::POD_NAME_ENV, "metadata.name"),
        pod::field_env(NODE_IPS_ENV, "status.podIP"),
    ])
}

/// The variable that tells the runner the job's host addresses, one per
/// line: a Job's one pod sets its own.
pub const NODE_IPS_ENV: &str = "KINETIC_NODE_IPS";

/// The pod failure policy that keeps infrastructure failures off the
/// application budget: a pod the cluster disrupted (its `DisruptionTarget`
/// condition: preempted, evicted, its node shut down) is not counted
/// against `backoffLimit` but replaced (`Ignore`) while the job has a
/// restart budget — the backend counts those and stops the Job once the
/// budget is spent — and fails the Job at once (`FailJob`) when it has
/// none, so that no application retry is spent on it.
pub fn budget_policy(restarts: u32) -> PodFailurePolicy {
    PodFailurePolicy {
        rules: vec![PodFailurePolicyRule {
            action: if restarts > 0 { "Ignore" } else { "FailJob" }.to_owned(),
            on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                type_: "DisruptionTarget".to_owned(),
                status: "True".to_owned(),
            }]),
            on_exit_codes: None,
        }],
    }
}

/// The Secret that carries the job's captured environment to its pod
/// (`envFrom`), owned by the Job (uid `job_uid`) so that it goes when the
/// Job goes; `None` when nothing was captured.
pub fn env_secret(job: &PreparedJob, job_uid: &str) -> Option<Secret> {
    let owner = pod::owner_reference("batch/v1", "Job", &job.record.k8s_name, job_uid);
    pod::env_secret(job, APP_KINETIC, owner)
}
