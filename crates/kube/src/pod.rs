//! What every workload kind puts in its pods: labels, annotations, the
//! pod template (image, runner command, environment with the captured
//! values through `envFrom` a Secret, GCS FUSE volumes, tolerations, node
//! selector, resources) and the Secret itself. Pure functions.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    CSIVolumeSource, Container, EnvFromSource, EnvVar, PodSpec, PodTemplateSpec,
    ResourceRequirements, Secret, SecretEnvSource, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kinetic_core::ports::PreparedJob;

/// Label every object of a Kinetic job carries: `app: kinetic`.
pub const LABEL_APP: &str = "app";
/// Value of [`LABEL_APP`] on GKE jobs (batch/v1 Jobs).
pub const APP_KINETIC: &str = "kinetic";
/// Label with the job id.
pub const LABEL_JOB_ID: &str = "job-id";
/// Label with the Job's name, on its pods (also set by Kubernetes).
pub const LABEL_JOB_NAME: &str = "job-name";
/// Label with the batch's group id: one labelled LIST finds a whole batch.
pub const LABEL_GROUP_ID: &str = "group-id";
/// Label with the job's index in its batch.
pub const LABEL_GROUP_INDEX: &str = "group-index";
/// Annotation holding the spec URI the Job runs (idempotent submits compare it).
pub const ANNOTATION_SPEC_URI: &str = "kinetic.dev/spec-uri";
/// Annotation holding the pending deadline in seconds.
pub const ANNOTATION_PENDING_DEADLINE: &str = "kinetic.dev/pending-deadline-seconds";
/// Annotation holding the run deadline in seconds, on workloads whose pods
/// cannot carry it (a StatefulSet's pods refuse `activeDeadlineSeconds`):
/// the backend ends the job once it ran that long.
pub const ANNOTATION_RUN_DEADLINE: &str = "kinetic.dev/run-deadline-seconds";
/// Annotation holding a final state the backend decided (cancelled, pending
/// deadline exceeded), as `JobState` JSON; it wins over everything else.
pub const ANNOTATION_FINAL_STATE: &str = "kinetic.dev/final-state";
/// Annotation holding the attempts the backend saw (JSON, `Attempt`s by
/// pod), rewritten by the backend as they change and merged with what it
/// sees next: a record on the workload that only grows, so that pods
/// deleted (and the events naming them expired) still count.
pub const ANNOTATION_ATTEMPTS: &str = "kinetic.dev/attempts";
/// Annotation on the object of a batch submitted in one call once it was
/// told to start no more inputs (`BatchEnd::StopStarting`): each status
/// read of the batch lowers its parallelism again to the inputs running.
pub const ANNOTATION_BATCH_STOPPING: &str = "kinetic.dev/batch-stopping";
/// The pod annotation that turns on the GCS FUSE CSI sidecar.
pub const ANNOTATION_GCSFUSE: &str = "gke-gcsfuse/volumes";
/// The worker container's name.
pub const CONTAINER_NAME: &str = "kinetic-worker";
/// Where images hold the runner.
pub const RUNNER_PATH: &str = kinetic_core::image::RUNNER_IMAGE_PATH;
/// The GCS FUSE CSI driver.
pub const GCSFUSE_DRIVER: &str = "gcsfuse.csi.storage.gke.io";

/// A GCS FUSE mount for a job's pod (`uri`: `gs://bucket/prefix` of a
/// directory or of one object).
pub use kinetic_core::ports::FuseMount;

/// The knobs of the manifest that are not in the prepared job.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ManifestOptions {
    /// The pod's Kubernetes service account (default `kinetic`).
    pub service_account: String,
    /// Seconds a finished Job is kept (default 600, Kinetic's; Jobs only).
    pub ttl_seconds_after_finished: i32,
    /// Pod failures before the Job fails (default 0: one attempt, as Kinetic; Jobs only).
    pub backoff_limit: i32,
    /// The command that starts the runner in the image; `--spec URI` is appended.
    pub runner_command: Vec<String>,
    /// Pending deadline for jobs that set none (default 15 minutes).
    pub pending_deadline: Duration,
    /// GCS FUSE mounts every pod gets (none by default), before the
    /// job's own ([`PreparedJob::fuse_mounts`]).
    pub fuse_mounts: Vec<FuseMount>,
}

impl Default for ManifestOptions {
    fn default() -> Self {
        Self {
            service_account: "kinetic".into(),
            ttl_seconds_after_finished: 600,
            backoff_limit: 0,
            runner_command: vec!["python3".into(), "-u".into(), RUNNER_PATH.into()],
            pending_deadline: Duration::from_secs(15 * 60),
            fuse_mounts: Vec::new(),
        }
    }
}

impl ManifestOptions {
    /// The same options with another default pending deadline.
    pub fn with_pending_deadline(mut self, deadline: Duration) -> Self {
        self.pending_deadline = deadline;
        self
    }

    /// The same options with these FUSE mounts.
    pub fn with_fuse_mounts(mut self, mounts: Vec<FuseMount>) -> Self {
        self.fuse_mounts = mounts;
        self
    }

    /// The same options with another TTL after the Job finished.
    pub fn with_ttl_seconds_after_finished(mut self, ttl: i32) -> Self {
        self.ttl_seconds_after_finished = ttl;
        self
    }
}

/// Name of the Secret holding a job's captured environment: `{job name}-env`.
pub fn secret_name(job_name: &str) -> String {
    format!("{job_name}-env")
}

/// The labels of a job's objects: `app: {app}`, `job-id`, and the batch's
/// `group-id` and `group-index` when the job is part of one.
pub fn labels(job: &PreparedJob, app: &str) -> BTreeMap<String, String> {
    let r = &job.record;
    let mut m = BTreeMap::new();
    m.insert(LABEL_APP.to_owned(), app.to_owned());
    m.insert(LABEL_JOB_ID.to_owned(), r.job_id.to_string());
    if let Some(g) = &r.group_id {
        m.insert(LABEL_GROUP_ID.to_owned(), g.to_string());
    }
    if let Some(i) = r.group_index {
        m.insert(LABEL_GROUP_INDEX.to_owned(), i.to_string());
    }
    m
}

/// The annotations of a job's workload object: the spec URI it runs and
/// its pending deadline in seconds (the job's, else `options`').
pub fn annotations(job: &PreparedJob, options: &ManifestOptions) -> BTreeMap<String, String> {
    let pending = job.deadlines.pending.unwrap_or(options.pending_deadline);
    BTreeMap::from([
        (ANNOTATION_SPEC_URI.to_owned(), job.spec_uri.clone()),
        (
            ANNOTATION_PENDING_DEADLINE.to_owned(),
            pending.as_secs().max(1).to_string(),
        ),
    ])
}

/// `only-dir` of a FUSE mount: the URI's prefix (its parent for a file),
/// with commas escaped; `None` for a whole bucket.
fn only_dir(path: &str, is_dir: bool) -> Option<String> {
    let prefix = path.trim_matches('/');
    let prefix = if is_dir {
        prefix
    } else {
        prefix.rsplit_once('/').map_or("", |(parent, _)| parent)
    };
    (!prefix.is_empty()).then(|| prefix.replace(',', "\\,"))
}

/// GCS FUSE CSI volumes and their read-only mounts, `gcs-fuse-{i}` in order.
pub fn gcs_fuse_volumes(mounts: &[FuseMount]) -> (Vec<Volume>, Vec<VolumeMount>) {
    let mut volumes = Vec::new();
    let mut volume_mounts = Vec::new();
    for (i, m) in mounts.iter().enumerate() {
        let rest = m.uri.strip_prefix("gs://").unwrap_or(&m.uri);
        let (bucket, path) = rest.split_once('/').unwrap_or((rest, ""));
        let mut options = "implicit-dirs".to_owned();
        if let Some(dir) = only_dir(path, m.is_dir) {
            options.push_str(",only-dir=");
            options.push_str(&dir);
        }
        let name = format!("gcs-fuse-{i}");
        volumes.push(Volume {
            name: name.clone(),
            csi: Some(CSIVolumeSource {
                driver: GCSFUSE_DRIVER.to_owned(),
                volume_attributes: Some(BTreeMap::from([
                    ("bucketName".to_owned(), bucket.to_owned()),
                    ("mountOptions".to_owned(), options),
                ])),
                ..CSIVolumeSource::default()
            }),
            ..Volume::default()
        });
        volume_mounts.push(VolumeMount {
            name,
            mount_path: m.mount_path.clone(),
            read_only: Some(true),
            ..VolumeMount::default()
        });
    }
    (volumes, volume_mounts)
}

/// A variable with a literal value.
pub fn env_var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        ..EnvVar::default()
    }
}

/// What differs between the pods of workload kinds.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct PodSettings {
    /// The pod's `restartPolicy` (`Never` for Kinetic's pods); `None`
    /// leaves the API server's default, `Always`, the only one a
    /// StatefulSet's pods may have.
    pub restart_policy: Option<String>,
    /// Variables after the container's own (`MEGASCALE_…` on a slice).
    pub extra_env: Vec<EnvVar>,
}

impl PodSettings {
    /// Pods that restart as `restart_policy` says, with nothing more.
    pub fn new(restart_policy: &str) -> Self {
        Self {
            restart_policy: Some(restart_policy.to_owned()),
            ..Self::default()
        }
    }

    /// Pods under the API server's default `restartPolicy` (`Always`),
    /// as a StatefulSet requires.
    pub fn always_restarting() -> Self {
        Self::default()
    }

    /// The same settings with these extra variables.
    pub fn with_env(mut self, env: Vec<EnvVar>) -> Self {
        self.extra_env = env;
        self
    }
}

/// The pod template of a prepared job: labels (`app: {app}`, `job-id`,
/// `job-name: {k8s name}`, the batch's), the runner's command, the
/// accelerator's scheduling (the spot toleration keeps its value), the
/// captured environment by reference only (`envFrom` the job's Secret),
/// GCS FUSE volumes with their annotation.
pub fn pod_template(
    job: &PreparedJob,
    options: &ManifestOptions,
    app: &str,
    settings: PodSettings,
) -> PodTemplateSpec {
    let r = &job.record;
    let accel = &job.accelerator;
    let mut pod_labels = labels(job, app);
    pod_labels.insert(LABEL_JOB_NAME.to_owned(), r.k8s_name.clone());
    let mounts: Vec<FuseMount> = options
        .fuse_mounts
        .iter()
        .chain(&job.fuse_mounts)
        .cloned()
        .collect();
    let (volumes, volume_mounts) = gcs_fuse_volumes(&mounts);
    let pod_annotations = (!volumes.is_empty())
        .then(|| BTreeMap::from([(ANNOTATION_GCSFUSE.to_owned(), "true".to_owned())]));
    let resources: BTreeMap<String, Quantity> = accel
        .resources()
        .into_iter()
        .map(|(k, v)| (k, Quantity(v)))
        .collect();
    let node_selector = accel.node_selector();
    let tolerations: Vec<Toleration> = accel
        .tolerations()
        .into_iter()
        .map(|t| Toleration {
            key: Some(t.key),
            operator: Some(t.operator),
            value: t.value,
            effect: Some(t.effect),
            ..Toleration::default()
        })
        .collect();
    let mut command = options.runner_command.clone();
    command.push("--spec".into());
    command.push(job.spec_uri.clone());
    let env_from = (!job.env.is_empty()).then(|| {
        vec![EnvFromSource {
            secret_ref: Some(SecretEnvSource {
                name: secret_name(&r.k8s_name),
                optional: Some(false),
            }),
            ..EnvFromSource::default()
        }]
    });
    let mut env = container_env(job);
    env.extend(settings.extra_env);
    env.extend(debug_env(job));
    let container = Container {
        name: CONTAINER_NAME.to_owned(),
        image: Some(r.image_uri.clone()),
        command: Some(command),
        env: Some(env),
        env_from,
        resources: Some(if resources.is_empty() {
            ResourceRequirements::default()
        } else {
            ResourceRequirements {
                limits: Some(resources.clone()),
                requests: Some(resources),
                ..ResourceRequirements::default()
            }
        }),
        volume_mounts: (!volume_mounts.is_empty()).then_some(volume_mounts),
        ports: debug_ports(job),
        ..Container::default()
    };
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(pod_labels),
            annotations: pod_annotations,
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            restart_policy: settings.restart_policy,
            service_account_name: Some(options.service_account.clone()),
            node_selector: (!node_selector.is_empty()).then_some(node_selector),
            tolerations: (!tolerations.is_empty()).then_some(tolerations),
            volumes: (!volumes.is_empty()).then_some(volumes),
            containers: vec![container],
            ..PodSpec::default()
        }),
    }
}

/// How long a debug job's Job stays after it finished, as Kinetic's
/// (`ttlSecondsAfterFinished`): two hours, to look at it.
pub const DEBUG_TTL_SECONDS: i32 = 7200;

/// A debug job's environment, as Kinetic's pods get it (`KINETIC_DEBUG`,
/// `PYTHONBREAKPOINT`, the wait and the port), plus where debugpy listens:
/// the pod's IP (`KINETIC_DEBUG_HOST` from `status.podIP`), the address
/// the API server's port-forward reaches. Empty for other jobs.
fn debug_env(job: &PreparedJob) -> Vec<EnvVar> {
    if !job.record.debug {
        return Vec::new();
    }
    let mut env: Vec<EnvVar> = kinetic_core::debug::pod_env(
        kinetic_core::debug::DEFAULT_PORT,
        kinetic_core::debug::DEFAULT_WAIT_TIMEOUT,
    )
    .into_iter()
    .map(|(name, value)| env_var(name, &value))
    .collect();
    env.push(field_env(kinetic_core::debug::HOST_ENV, "status.podIP"));
    env
}

/// A variable the kubelet fills from a field of the pod (the downward
/// API): `status.podIP`, `metadata.name`, …
pub fn field_env(name: &str, field_path: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(k8s_openapi::api::core::v1::EnvVarSource {
            field_ref: Some(k8s_openapi::api::core::v1::ObjectFieldSelector {
                field_path: field_path.to_owned(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..EnvVar::default()
    }
}

/// A debug job's container port `5678` named `debugpy`, as Kinetic's.
fn debug_ports(job: &PreparedJob) -> Option<Vec<k8s_openapi::api::core::v1::ContainerPort>> {
    job.record.debug.then(|| {
        vec![k8s_openapi::api::core::v1::ContainerPort {
            name: Some("debugpy".to_owned()),
            container_port: i32::from(kinetic_core::debug::DEFAULT_PORT),
            protocol: Some("TCP".to_owned()),
            ..Default::default()
        }]
    })
}

/// The container's own environment: the job's identity (`JOB_ID`,
/// `GCS_BUCKET`, which the runner reads) and the defaults of the base
/// environment (`KERAS_BACKEND`, `JAX_PLATFORMS`). A default the job
/// captured is left out: explicit `env` entries beat `envFrom`, and a
/// captured variable must override the container's own.
fn container_env(job: &PreparedJob) -> Vec<EnvVar> {
    let r = &job.record;
    let captured = |name: &str| job.env.names().any(|n| n.as_str() == name);
    let defaults = [
        ("KERAS_BACKEND", "jax"),
        ("JAX_PLATFORMS", job.accelerator.jax_platform()),
    ];
    defaults
        .into_iter()
        .filter(|(name, _)| !captured(name))
        .map(|(name, value)| env_var(name, value))
        .chain([
            env_var("JOB_ID", r.job_id.as_str()),
            env_var("GCS_BUCKET", &r.bucket_name),
        ])
        .collect()
}

/// The Secret that carries the job's captured environment to its pod
/// (`envFrom`), owned by the Job so that it goes when the Job goes; `None`
/// when nothing was captured. `owner` names the created workload object.
///
/// The owner reference does not set `blockOwnerDeletion`: that needs
/// `update` on the owner's finalizers wherever the API server enforces owner
/// references, which the built-in `edit` role lacks, and nothing needs
/// the owner's deletion to wait for the Secret (cleanup deletes it by name,
/// the garbage collector with its owner).
///
/// The values are in `stringData`: the one place they are written.
pub fn env_secret(job: &PreparedJob, app: &str, owner: OwnerReference) -> Option<Secret> {
    if job.env.is_empty() {
        return None;
    }
    let r = &job.record;
    let mut labels = BTreeMap::new();
    labels.insert(LABEL_APP.to_owned(), app.to_owned());
    labels.insert(LABEL_JOB_ID.to_owned(), r.job_id.to_string());
    Some(Secret {
        metadata: ObjectMeta {
            name: Some(secret_name(&r.k8s_name)),
            namespace: Some(r.namespace.clone()),
            labels: Some(labels),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".into()),
        string_data: Some(
            job.env
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), v.expose().to_owned()))
                .collect(),
        ),
        ..Secret::default()
    })
}

/// An owner reference to a workload object (`controller: false`, no
/// `blockOwnerDeletion`: see [`env_secret`]).
pub fn owner_reference(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        name: name.to_owned(),
        uid: uid.to_owned(),
        controller: Some(false),
        block_owner_deletion: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuse_only_dir_follows_kinetic() {
        let m = |uri: &str, is_dir: bool| {
            let (v, _) = gcs_fuse_volumes(&[FuseMount {
                uri: uri.into(),
                mount_path: "/m".into(),
                is_dir,
            }]);
            let attrs = v[0]
                .csi
                .as_ref()
                .unwrap()
                .volume_attributes
                .clone()
                .unwrap();
            (attrs["bucketName"].clone(), attrs["mountOptions"].clone())
        };
        assert_eq!(
            m("gs://my-bucket/datasets/imagenet/", true),
            (
                "my-bucket".into(),
                "implicit-dirs,only-dir=datasets/imagenet".into()
            )
        );
        assert_eq!(m("gs://my-bucket/", true).1, "implicit-dirs");
        assert_eq!(
            m("gs://my-bucket/data/weights.h5", false).1,
            "implicit-dirs,only-dir=data"
        );
        assert_eq!(
            m("gs://b/ns/data-cache/abc123/config.json", false).1,
            "implicit-dirs,only-dir=ns/data-cache/abc123"
        );
        assert_eq!(m("gs://b/a,b/", true).1, "implicit-dirs,only-dir=a\\,b");
    }
}
