//! Golden JSON of the Job and Secret manifests. Regenerate with
//! `KINETIC_UPDATE_GOLDEN=1 cargo test -p kinetic-backend-gke --test manifest_golden`
//! and review the diff.

use std::path::PathBuf;
use std::time::Duration;

use kinetic_backend_gke::manifest::{self, FuseMount, ManifestOptions};
use kinetic_core::ids::GroupId;
use kinetic_core::ports::{Deadlines, PreparedJob};
use kinetic_testkit::fixtures::{assert_golden, fixed_job};
use serde_json::Value;

fn job(accelerator: &str, env: &[(&str, &str)], deadlines: Deadlines) -> PreparedJob {
    fixed_job("gke", accelerator, env, deadlines)
}

fn golden(name: &str, value: &Value) {
    assert_golden(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden"),
        name,
        value,
    );
}

#[test]
fn cpu_job() {
    let m = manifest::job_manifest(
        &job("cpu", &[], Deadlines::default()),
        &ManifestOptions::default(),
    );
    golden("job_cpu", &serde_json::to_value(&m).unwrap());
}

#[test]
fn gpu_spot_job_keeps_the_spot_toleration_value() {
    let m = manifest::job_manifest(
        &job("l4x2:spot", &[], Deadlines::default()),
        &ManifestOptions::default(),
    );
    let v = serde_json::to_value(&m).unwrap();
    let tolerations = &v["spec"]["template"]["spec"]["tolerations"];
    assert_eq!(tolerations[1]["value"], "true", "{tolerations}");
    golden("job_gpu_l4x2_spot", &v);
}

#[test]
fn tpu_job_with_deadlines_env_group_and_fuse() {
    let mut j = job(
        "v5litepod-4",
        &[("WANDB_API_KEY", "s3cr3t-sentinel"), ("MY_FLAG", "1")],
        Deadlines {
            run: Some(Duration::from_secs(3600)),
            pending: Some(Duration::from_secs(120)),
        },
    );
    j.record.group_id = Some("grp-00ff00ff".parse::<GroupId>().unwrap());
    j.record.group_index = Some(3);
    let options = ManifestOptions::default().with_fuse_mounts(vec![
        FuseMount {
            uri: "gs://my-bucket/datasets/imagenet/".into(),
            mount_path: "/data".into(),
            is_dir: true,
        },
        FuseMount {
            uri: "gs://b/ns/data-cache/abc123/config.json".into(),
            mount_path: "/_kinetic/fuse-data/0".into(),
            is_dir: false,
        },
    ]);
    let m = manifest::job_manifest(&j, &options);
    let v = serde_json::to_value(&m).unwrap();
    assert!(
        !v.to_string().contains("s3cr3t-sentinel"),
        "a captured value MUST NOT be in the Job"
    );
    golden("job_tpu_v5litepod4_full", &v);
    let secret = manifest::env_secret(&j, "6f1c0a9e-0000-4000-8000-000000000001").unwrap();
    golden("secret_env", &serde_json::to_value(&secret).unwrap());
    assert!(manifest::env_secret(&job("cpu", &[], Deadlines::default()), "uid").is_none());
}

#[test]
fn backend_default_pending_deadline_applies_when_the_job_sets_none() {
    let m = manifest::job_manifest(
        &job("cpu", &[], Deadlines::default()),
        &ManifestOptions::default().with_pending_deadline(Duration::from_secs(90)),
    );
    let annotations = m.metadata.annotations.unwrap();
    assert_eq!(annotations[manifest::ANNOTATION_PENDING_DEADLINE], "90");
    assert!(m.spec.unwrap().active_deadline_seconds.is_none());
}

#[test]
fn a_jobs_fuse_mounts_become_csi_volumes_with_the_sidecar_annotation() {
    let plain = manifest::job_manifest(
        &job("cpu", &[], Deadlines::default()),
        &ManifestOptions::default(),
    );
    let v = serde_json::to_value(&plain).unwrap();
    assert!(
        v["spec"]["template"]["metadata"]
            .get("annotations")
            .is_none(),
        "no FUSE, no annotation"
    );
    assert!(v["spec"]["template"]["spec"].get("volumes").is_none());
    let j = job("cpu", &[], Deadlines::default()).with_fuse_mounts(vec![FuseMount {
        uri: "gs://b/default/data-cache/h/config.json".into(),
        mount_path: "/_kinetic/fuse-data/0".into(),
        is_dir: false,
    }]);
    let options = ManifestOptions::default().with_fuse_mounts(vec![FuseMount {
        uri: "gs://shared/".into(),
        mount_path: "/shared".into(),
        is_dir: true,
    }]);
    let v = serde_json::to_value(manifest::job_manifest(&j, &options)).unwrap();
    let template = &v["spec"]["template"];
    assert_eq!(
        template["metadata"]["annotations"][manifest::ANNOTATION_GCSFUSE],
        "true"
    );
    assert_eq!(
        template["spec"]["volumes"],
        serde_json::json!([
            {"name": "gcs-fuse-0", "csi": {"driver": "gcsfuse.csi.storage.gke.io",
                "volumeAttributes": {"bucketName": "shared", "mountOptions": "implicit-dirs"}}},
            {"name": "gcs-fuse-1", "csi": {"driver": "gcsfuse.csi.storage.gke.io",
                "volumeAttributes": {"bucketName": "b", "mountOptions": "implicit-dirs,only-dir=default/data-cache/h"}}},
        ])
    );
    assert_eq!(
        template["spec"]["containers"][0]["volumeMounts"],
        serde_json::json!([
            {"name": "gcs-fuse-0", "mountPath": "/shared", "readOnly": true},
            {"name": "gcs-fuse-1", "mountPath": "/_kinetic/fuse-data/0", "readOnly": true},
        ])
    );
}

#[test]
fn a_job_with_budgets_gets_its_retries_and_a_pod_failure_policy() {
    let spot = job("l4:spot", &[], Deadlines::default())
        .with_budgets(kinetic_core::budget::BudgetRequest::default());
    let v =
        serde_json::to_value(manifest::job_manifest(&spot, &ManifestOptions::default())).unwrap();
    assert_eq!(v["spec"]["backoffLimit"], 0);
    assert_eq!(v["metadata"]["annotations"]["kinetic.dev/restarts"], "3");
    assert_eq!(
        v["spec"]["podFailurePolicy"],
        serde_json::json!({"rules": [{"action": "Ignore",
            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]})
    );
    let asked = kinetic_core::budget::BudgetRequest {
        retries: Some(2),
        restarts: Some(0),
    };
    let on_demand = job("cpu", &[], Deadlines::default()).with_budgets(asked);
    let v = serde_json::to_value(manifest::job_manifest(
        &on_demand,
        &ManifestOptions::default(),
    ))
    .unwrap();
    assert_eq!(v["spec"]["backoffLimit"], 2);
    assert_eq!(
        v["spec"]["podFailurePolicy"]["rules"][0]["action"],
        "FailJob"
    );
    // Without budgets: Kinetic's Job, no policy, no annotation.
    let plain = job("cpu", &[], Deadlines::default())
        .with_budgets(kinetic_core::budget::BudgetRequest::default());
    let v =
        serde_json::to_value(manifest::job_manifest(&plain, &ManifestOptions::default())).unwrap();
    assert!(v["spec"].get("podFailurePolicy").is_none());
    assert!(
        v["metadata"]["annotations"]
            .get("kinetic.dev/restarts")
            .is_none()
    );
}

/// NVIDIA GPU jobs get `JAX_PLATFORMS=cuda`: JAX's `gpu` also means ROCm,
/// whose backend fails to start on an NVIDIA host.
#[test]
fn gpu_jobs_get_jax_platforms_cuda() {
    for accelerator in ["l4", "a100x4", "h100"] {
        let m = manifest::job_manifest(
            &job(accelerator, &[], Deadlines::default()),
            &ManifestOptions::default(),
        );
        let v = serde_json::to_value(&m).unwrap();
        let env = v["spec"]["template"]["spec"]["containers"][0]["env"].to_string();
        assert!(
            env.contains(r#"{"name":"JAX_PLATFORMS","value":"cuda"}"#),
            "{accelerator}: {env}"
        );
    }
}
