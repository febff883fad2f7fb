//! Prepared job → LeaderWorkerSet: one group (`replicas: 1`) of as many
//! pods as the slice has hosts, leader and workers from one pod template
//! (the shared Kubernetes layer's), recreated together when one restarts.
//! Pure; the golden files under `tests/golden/` pin its JSON.

use k8s_openapi::api::core::v1::EnvVar;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinetic_core::ports::PreparedJob;
use kinetic_kube::pod::{self, ManifestOptions, PodSettings, env_var};
pub use kinetic_kube::pod::{LABEL_APP, LABEL_JOB_ID, LABEL_JOB_NAME};

use crate::lws::{
    self, ENV_LEADER_ADDRESS, ENV_WORKER_INDEX, LeaderWorkerSet, LeaderWorkerSetSpec,
    LeaderWorkerTemplate, RECREATE_GROUP_ON_POD_RESTART,
};

/// Value of the `app` label on Pathways jobs.
pub const APP_PATHWAYS: &str = "kinetic-pathways";

/// The variables every host gets besides the container's own: JAX's
/// multi-slice coordinator is the group's leader
/// (`MEGASCALE_COORDINATOR_ADDRESS=$(LWS_LEADER_ADDRESS)`), the job is one
/// slice (`MEGASCALE_NUM_SLICES=1`), and the TPU runtime's host index is
/// the pod's worker index (`TPU_WORKER_ID=$(LWS_WORKER_INDEX)`). The
/// `$(…)` references are expanded by the kubelet from the variables the
/// LeaderWorkerSet controller puts first in the container.
pub fn slice_env() -> Vec<EnvVar> {
    vec![
        env_var(
            "MEGASCALE_COORDINATOR_ADDRESS",
            &format!("$({ENV_LEADER_ADDRESS})"),
        ),
        env_var("MEGASCALE_NUM_SLICES", "1"),
        env_var("TPU_WORKER_ID", &format!("$({ENV_WORKER_INDEX})")),
    ]
}

/// The line the leader's host prints when its command ended, before the
/// exit code: `[kinetic] leader ended: exit code 0`.
pub const LEADER_ENDED: &str = "[kinetic] leader ended: exit code ";

/// The start of the line a worker prints when its command succeeded:
/// `[kinetic] host 2 finished; …`.
pub const WORKER_FINISHED: &str = "[kinetic] host ";

/// The shell script that runs a host's command, then keeps the pod
/// running where the job needs it: a pod that ends is recreated by its
/// StatefulSet (running the job again), and a worker recreated restarts
/// the whole group. So the leader, once its command ended, prints
/// [`LEADER_ENDED`] and its exit code (the backend reads it in the
/// leader's log, then ends the group and keeps the log), and a worker
/// that succeeded waits for the leader; a worker that failed exits, which
/// fails the job.
pub const HOLD_WORKERS: &str = r#""$@"; code=$?; if [ "${LWS_WORKER_INDEX:-0}" = 0 ]; then echo "[kinetic] leader ended: exit code $code" >&2; exec sleep 2147483647; fi; if [ "$code" -eq 0 ]; then echo "[kinetic] host ${LWS_WORKER_INDEX} finished; waiting for the leader to end the slice" >&2; exec sleep 2147483647; fi; exit "$code""#;

/// `command` run under [`HOLD_WORKERS`].
pub fn hold_workers(command: Vec<String>) -> Vec<String> {
    let mut out = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        HOLD_WORKERS.to_owned(),
        "kinetic-host".to_owned(),
    ];
    out.extend(command);
    out
}

/// The LeaderWorkerSet of a prepared job, at API version `api_version`
/// (`leaderworkerset.x-k8s.io/v1`): labels `app: kinetic-pathways` and
/// `job-id` (and the batch's), the spec URI and pending deadline as
/// annotations, `replicas: 1`, `size` = the accelerator's hosts,
/// `restartPolicy: RecreateGroupOnPodRestart`, and one pod template for
/// leader and workers.
///
/// The pods' own `restartPolicy` is `Never`: a host that ends stays
/// ended, so its exit code and reason are read rather than lost to a
/// restart of the whole group (which would run the job again); the run
/// deadline is each pod's `activeDeadlineSeconds`.
pub fn lws_manifest(
    job: &PreparedJob,
    options: &ManifestOptions,
    api_version: &str,
) -> LeaderWorkerSet {
    let r = &job.record;
    let size = i32::try_from(job.accelerator.num_hosts().max(1)).unwrap_or(i32::MAX);
    let settings = PodSettings::new("Never")
        .with_env(slice_env())
        .with_active_deadline(
            job.deadlines
                .run
                .map(|d| i64::try_from(d.as_secs().max(1)).unwrap_or(i64::MAX)),
        );
    let mut template = pod::pod_template(job, options, APP_PATHWAYS, settings);
    if let Some(c) = template
        .spec
        .as_mut()
        .and_then(|s| s.containers.first_mut())
    {
        c.command = c.command.take().map(hold_workers);
    }
    LeaderWorkerSet {
        api_version: api_version.to_owned(),
        kind: lws::KIND.to_owned(),
        metadata: ObjectMeta {
            name: Some(r.k8s_name.clone()),
            namespace: Some(r.namespace.clone()),
            labels: Some(pod::labels(job, APP_PATHWAYS)),
            annotations: Some(pod::annotations(job, options)),
            ..ObjectMeta::default()
        },
        spec: LeaderWorkerSetSpec {
            replicas: Some(1),
            leader_worker_template: LeaderWorkerTemplate {
                leader_template: Some(template.clone()),
                worker_template: template,
                size: Some(size),
                restart_policy: Some(RECREATE_GROUP_ON_POD_RESTART.to_owned()),
            },
            startup_policy: None,
        },
        status: None,
    }
}
