//! Golden JSON of the LeaderWorkerSet and its Secret. Regenerate with
//! `KINETIC_UPDATE_GOLDEN=1 cargo test -p kinetic-backend-pathways --test manifest_golden`
//! and review the diff.

use std::path::PathBuf;
use std::time::Duration;

use kinetic_backend_pathways::manifest::{APP_PATHWAYS, lws_manifest};
use kinetic_backend_pathways::{FuseMount, ManifestOptions};
use kinetic_core::ids::GroupId;
use kinetic_core::ports::Deadlines;
use kinetic_kube::pod::{env_secret, owner_reference};
use kinetic_testkit::fixtures::{assert_golden, fixed_job};
use serde_json::Value;

const V1: &str = "leaderworkerset.x-k8s.io/v1";

fn golden(name: &str, value: &Value) {
    assert_golden(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden"),
        name,
        value,
    );
}

#[test]
fn v5litepod_16_is_one_group_of_four_hosts() {
    let job = fixed_job("pathways", "v5litepod-16", &[], Deadlines::default());
    let v = serde_json::to_value(lws_manifest(&job, &ManifestOptions::default(), V1)).unwrap();
    assert_eq!(v["metadata"]["name"], "keras-pathways-job-0a1b2c3d");
    assert_eq!(v["metadata"]["labels"]["app"], "kinetic-pathways");
    // Created queued in its pool, admitted when the pool is free.
    assert_eq!(v["spec"]["replicas"], 0);
    assert_eq!(
        v["metadata"]["labels"]["kinetic.dev/slice-pool"],
        "tpu-v5-lite-podslice.4x4"
    );
    let t = &v["spec"]["leaderWorkerTemplate"];
    assert_eq!(t["size"], 4);
    assert_eq!(t["restartPolicy"], "RecreateGroupOnPodRestart");
    assert_eq!(t["leaderTemplate"], t["workerTemplate"]);
    let env = t["workerTemplate"]["spec"]["containers"][0]["env"].to_string();
    for want in [
        r#"{"name":"MEGASCALE_COORDINATOR_ADDRESS","value":"$(LWS_LEADER_ADDRESS)"}"#,
        r#"{"name":"MEGASCALE_NUM_SLICES","value":"1"}"#,
        r#"{"name":"TPU_WORKER_ID","value":"$(LWS_WORKER_INDEX)"}"#,
    ] {
        assert!(env.contains(want), "{want} in {env}");
    }
    golden("lws_v5litepod16", &v);
}

#[test]
fn any_accelerator_runs_as_a_group_of_its_hosts() {
    for (accelerator, size) in [("cpu", 1), ("l4", 1), ("v5litepod-4", 1), ("v3-16", 4)] {
        let job = fixed_job("pathways", accelerator, &[], Deadlines::default());
        let lws = lws_manifest(&job, &ManifestOptions::default(), V1);
        assert_eq!(
            lws.spec.leader_worker_template.size,
            Some(size),
            "{accelerator}"
        );
    }
}

#[test]
fn spot_slice_with_deadlines_env_group_and_fuse() {
    let mut job = fixed_job(
        "pathways",
        "v5litepod-16:spot",
        &[("WANDB_API_KEY", "s3cr3t-sentinel")],
        Deadlines {
            run: Some(Duration::from_secs(3600)),
            pending: Some(Duration::from_secs(120)),
        },
    );
    job.record.group_id = Some("grp-00ff00ff".parse::<GroupId>().unwrap());
    job.record.group_index = Some(3);
    let options = ManifestOptions::default().with_fuse_mounts(vec![FuseMount {
        uri: "gs://my-bucket/datasets/imagenet/".into(),
        mount_path: "/data".into(),
        is_dir: true,
    }]);
    let v = serde_json::to_value(lws_manifest(
        &job,
        &options,
        "leaderworkerset.x-k8s.io/v1beta1",
    ))
    .unwrap();
    assert!(
        !v.to_string().contains("s3cr3t-sentinel"),
        "a captured value MUST NOT be in the LeaderWorkerSet"
    );
    // A StatefulSet's pods restart `Always` and carry no deadline: the run
    // deadline is the backend's, from the set's annotation.
    for t in ["leaderTemplate", "workerTemplate"] {
        let pod = &v["spec"]["leaderWorkerTemplate"][t]["spec"];
        assert!(pod.get("activeDeadlineSeconds").is_none(), "{pod}");
        assert!(pod.get("restartPolicy").is_none(), "{pod}");
    }
    assert_eq!(
        v["metadata"]["annotations"]["kinetic.dev/run-deadline-seconds"],
        "3600"
    );
    golden("lws_v5litepod16_spot_full", &v);
    let owner = owner_reference(
        V1,
        "LeaderWorkerSet",
        "keras-pathways-job-0a1b2c3d",
        "uid-1",
    );
    let secret = env_secret(&job, APP_PATHWAYS, owner).unwrap();
    golden("secret_env", &serde_json::to_value(&secret).unwrap());
}

#[test]
fn a_jobs_fuse_mounts_reach_every_host_of_the_slice() {
    let job =
        fixed_job("pathways", "v5litepod-16", &[], Deadlines::default()).with_fuse_mounts(vec![
            FuseMount {
                uri: "gs://b/default/data-cache/h".into(),
                mount_path: "/_kinetic/fuse-data/0".into(),
                is_dir: true,
            },
        ]);
    let v = serde_json::to_value(lws_manifest(
        &job,
        &ManifestOptions::default(),
        "leaderworkerset.x-k8s.io/v1",
    ))
    .unwrap();
    for t in ["leaderTemplate", "workerTemplate"] {
        let template = &v["spec"]["leaderWorkerTemplate"][t];
        assert_eq!(
            template["metadata"]["annotations"]["gke-gcsfuse/volumes"], "true",
            "{t}"
        );
        assert_eq!(
            template["spec"]["volumes"][0]["csi"]["volumeAttributes"]["mountOptions"],
            "implicit-dirs,only-dir=default/data-cache/h",
            "{t}"
        );
        assert_eq!(
            template["spec"]["containers"][0]["volumeMounts"][0]["mountPath"],
            "/_kinetic/fuse-data/0",
            "{t}"
        );
    }
}

/// A debug job's leader runs the debugger (Kinetic's debug variables, the
/// pod's IP as its address, port 5678 named `debugpy`); its workers run
/// none and wait for it: `KINETIC_DEBUG_WAIT_LEADER=1` tells their runner
/// to wait before the call until the leader writes `{job_id}/.leader_ready`
/// (once its debugger has a client), at most the leader's wait
/// (`KINETIC_DEBUG_WAIT_TIMEOUT`) plus a minute for its setup.
#[test]
fn a_debug_slice_runs_the_debugger_on_the_leader_and_its_workers_wait_for_it() {
    let mut job = fixed_job("pathways", "v5litepod-16", &[], Deadlines::default());
    job.record.debug = true;
    let v = serde_json::to_value(lws_manifest(&job, &ManifestOptions::default(), V1)).unwrap();
    let t = &v["spec"]["leaderWorkerTemplate"];
    let env_of = |template: &Value| -> Vec<(String, Value)> {
        template["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let value = e
                    .get("value")
                    .cloned()
                    .unwrap_or_else(|| e["valueFrom"].clone());
                (e["name"].as_str().unwrap().to_owned(), value)
            })
            .collect()
    };
    let leader = env_of(&t["leaderTemplate"]);
    let worker = env_of(&t["workerTemplate"]);
    let has = |env: &[(String, Value)], name: &str| {
        env.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
    };
    assert_eq!(has(&leader, "KINETIC_DEBUG"), Some("1".into()));
    assert_eq!(
        has(&leader, "PYTHONBREAKPOINT"),
        Some("debugpy.breakpoint".into())
    );
    assert_eq!(
        has(&leader, "KINETIC_DEBUG_HOST").unwrap()["fieldRef"]["fieldPath"],
        "status.podIP"
    );
    assert_eq!(has(&leader, "KINETIC_DEBUG_WAIT_LEADER"), None);
    let ports = &t["leaderTemplate"]["spec"]["containers"][0]["ports"];
    assert_eq!(ports[0]["name"], "debugpy");
    assert_eq!(ports[0]["containerPort"], 5678);

    assert_eq!(has(&worker, "KINETIC_DEBUG_WAIT_LEADER"), Some("1".into()));
    assert_eq!(
        has(&worker, "KINETIC_DEBUG_WAIT_TIMEOUT"),
        Some("600".into())
    );
    for name in [
        "KINETIC_DEBUG",
        "PYTHONBREAKPOINT",
        "KINETIC_DEBUG_HOST",
        "KINETIC_DEBUG_PORT",
    ] {
        assert_eq!(has(&worker, name), None, "{name} on a worker");
    }
    assert!(
        t["workerTemplate"]["spec"]["containers"][0]
            .get("ports")
            .is_none()
    );
    // Both run their command under the hold, with the slice's variables.
    for template in [&t["leaderTemplate"], &t["workerTemplate"]] {
        let c = &template["spec"]["containers"][0];
        assert_eq!(c["command"][3], "kinetic-host", "{c}");
    }
    assert_eq!(
        has(&worker, "TPU_WORKER_ID"),
        Some("$(LWS_WORKER_INDEX)".into())
    );
    golden("lws_v5litepod16_debug", &v);
}

/// NVIDIA GPU jobs get `JAX_PLATFORMS=cuda` on every host: JAX's `gpu`
/// also means ROCm, whose backend fails to start on an NVIDIA host.
#[test]
fn gpu_jobs_get_jax_platforms_cuda() {
    for accelerator in ["l4", "a100x4", "h100"] {
        let job = fixed_job("pathways", accelerator, &[], Deadlines::default());
        let v = serde_json::to_value(lws_manifest(&job, &ManifestOptions::default(), V1)).unwrap();
        let t = &v["spec"]["leaderWorkerTemplate"];
        for template in ["leaderTemplate", "workerTemplate"] {
            let env = t[template]["spec"]["containers"][0]["env"].to_string();
            assert!(
                env.contains(r#"{"name":"JAX_PLATFORMS","value":"cuda"}"#),
                "{accelerator} {template}: {env}"
            );
        }
    }
}
