//! The real `kinetic` binary with `--backend gke` against the fake
//! Kubernetes cluster and the fake GCS server (in this test process, on
//! loopback), pointed at them by the environment `kinetic-fake-gcp`
//! writes: the runner runs as a pod process and its context and result go
//! through the fake GCS server.

use std::process::Output;

use kinetic_fake_gcp::GcsOp;
use kinetic_fake_gcp::k8s::{FakeCluster, FakeNode};
use serde_json::{Value, json};

mod sandbox;

use sandbox::world::{PROJECT_FLAGS, World};

const WORK_PY: &str = r#"
def square(x):
    print("squaring", x, flush=True)
    return x * x


def fail():
    raise RuntimeError("deliberate failure")


def envs():
    import os
    return [os.environ["KERAS_BACKEND"], os.environ["JAX_PLATFORMS"]]
"#;

/// `kinetic run work.py:square --arg 7 --backend gke --json` (prints 49).
const SQUARE_7_ON_GKE: [&str; 7] = [
    "run",
    "work.py:square",
    "--arg",
    "7",
    "--backend",
    "gke",
    "--json",
];

/// A cluster world whose project is `work.py` and a `pyproject.toml`.
async fn cluster_world() -> World {
    World::gke(WORK_PY).pyproject().start().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_with_the_gke_backend_against_the_fake_cluster() {
    let w = cluster_world().await;
    let (gcs, cluster) = (w.gcs(), w.cluster());

    let o = w.kinetic(&SQUARE_7_ON_GKE).await;
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "stdout: {out}\nstderr: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["value"], 49, "stderr: {err}");
    assert!(
        cluster.calls().count("create", "jobs.batch") == 1,
        "{:?}",
        cluster.calls().snapshot()
    );
    assert!(
        cluster.objects("jobs.batch", "default").is_empty(),
        "cleaned up"
    );
    let requests = gcs.requests();
    for object in [".zip", "/spec.json", "/result.json"] {
        assert!(
            requests
                .iter()
                .any(|r| r.op == GcsOp::Put && r.name.ends_with(object)),
            "{object} went through the fake GCS server: {requests:?}"
        );
    }
    assert!(
        requests
            .iter()
            .any(|r| r.op == GcsOp::Get && r.name.starts_with("contexts/")),
        "the pod's runner read its context from GCS: {requests:?}"
    );

    let o = w
        .kinetic(&["run", "work.py:fail", "--backend", "gke"])
        .await;
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("RuntimeError: deliberate failure"), "{err}");
}

/// A project with requirements, for a bundled image.
const REQUIREMENTS: &str = "six==1.16.0\n";

/// The whole fake project `kinetic-fake-gcp` serves: the bundled image is
/// built on the fake Cloud Build from a context uploaded to the builds
/// bucket on the fake GCS server, then the pod runs in it; the second run
/// finds the image in the fake Artifact Registry and builds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_builds_its_image_on_the_fake_cloud_build() {
    let w = World::project(WORK_PY)
        .file("requirements.txt", REQUIREMENTS)
        .wheel("six", "1.16.0")
        .start()
        .await;
    let cloud = w.cloud();
    let o = w.kinetic(&SQUARE_7_ON_GKE).await;
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["value"], 49, "{err}");
    let builds = cloud.cloud_build().builds();
    assert_eq!(builds.len(), 1, "one image built");
    let build = &builds[0];
    assert_eq!(build.status, "SUCCESS");
    let image = build.images().pop().unwrap();
    assert!(
        image.starts_with("us-docker.pkg.dev/fake-project/kn-fake/base:cpu-"),
        "{image}"
    );
    assert!(cloud.cloud_build().has_image(&image));
    // The context came through the builds bucket, requirements baked in.
    let context = build.request["source"]["storageSource"]["bucket"].clone();
    assert_eq!(context, cloud.builds_bucket());
    assert!(
        build
            .files
            .values()
            .any(|text| text.contains("six==1.16.0")),
        "{:?}",
        build.files.keys()
    );
    assert!(build.dockerfile().is_some());

    let o = w.kinetic(&SQUARE_7_ON_GKE).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["value"], 49);
    assert_eq!(
        cloud.cloud_build().builds_created(),
        1,
        "the image is in the registry: no second build"
    );
}

/// `KINETIC_IMAGE` names an image used as is: a project with requirements
/// is refused before anything runs, naming the setting and the way out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_image_refuses_requirements_it_cannot_bake_in() {
    let w = World::gke(WORK_PY)
        .file("requirements.txt", REQUIREMENTS)
        .start()
        .await;
    let o = w
        .kinetic(&["run", "work.py:square", "--arg", "7", "--backend", "gke"])
        .await;
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for want in [
        "KINETIC_IMAGE",
        "--container-image prebuilt",
        "1 requirement line(s)",
    ] {
        assert!(err.contains(want), "{want:?} missing from: {err}");
    }
    assert_eq!(
        w.cluster().calls().count("create", "jobs.batch"),
        0,
        "nothing was submitted"
    );
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The one Job in `namespace`.
fn only_job(cluster: &FakeCluster) -> Value {
    let jobs = cluster.objects("jobs.batch", "default");
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    jobs[0].clone()
}

fn spot_scheduled(job: &Value) -> bool {
    let pod = &job["spec"]["template"]["spec"];
    pod["nodeSelector"]["cloud.google.com/gke-spot"] == "true"
        && pod["tolerations"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["key"] == "cloud.google.com/gke-spot" && t["value"] == "true")
}

/// With a cluster configured (here by per-run flags), a GPU job goes to
/// it, not to the local backend: to the configured cluster's kubeconfig
/// context (not the current one), keeping the job in the cluster's jobs
/// bucket (no store configured), on Spot VMs with `--spot`; `-v` says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gpu_job_goes_to_the_configured_cluster_its_context_and_its_bucket() {
    let w = World::project(WORK_PY).pyproject().start().await;
    let cloud = w.cloud();
    let names = cloud.names().clone();
    // The current context is another cluster, which does not answer.
    std::fs::write(
        w.kubeconfig(),
        FakeCluster::kubeconfig_with_contexts(
            &[
                ("elsewhere", "http://127.0.0.1:9"),
                (&names.kube_context, cloud.cluster().url()),
            ],
            "elsewhere",
            "default",
        ),
    )
    .unwrap();
    let sb = w.sandbox().without(&[
        "KINETIC_STORE_URL",
        "KINETIC_PROJECT",
        "KINETIC_ZONE",
        "KINETIC_CLUSTER",
        "KINETIC_NAMESPACE",
    ]);
    let target: Vec<&str> = PROJECT_FLAGS
        .into_iter()
        .chain(["--namespace", "default"])
        .collect();
    let mut args = vec![
        "run",
        "work.py:square",
        "--arg",
        "3",
        "--accelerator",
        "l4",
        "--spot",
        "--container-image",
        "prebuilt",
        "--detach",
        "--json",
        "-v",
    ];
    args.extend(&target);
    let o = sb.kinetic_async(&args, &[]).await;
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    let out: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(out["backend"], "gke", "{out}");
    assert!(
        err.contains("backend: gke (the local host cannot serve gpu:l4:spot, and cluster 'fake' of project 'fake-project'"),
        "{err}"
    );
    let job = only_job(cloud.cluster());
    let spec_uri = job["metadata"]["annotations"]["kinetic.dev/spec-uri"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        spec_uri.starts_with(&format!("gs://{}/", names.jobs_bucket)),
        "{spec_uri}"
    );
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(
        pod["nodeSelector"]["cloud.google.com/gke-accelerator"],
        "nvidia-l4"
    );
    assert!(spot_scheduled(&job), "{pod}");
    let agents = cloud.cluster().calls().user_agents();
    assert!(
        !agents.is_empty()
            && agents
                .iter()
                .all(|a| a == &format!("kinetic/{}", env!("CARGO_PKG_VERSION"))),
        "{agents:?}"
    );
    // CPU on Spot too, by flag or suffix, on the cluster…
    cloud.cluster().remove_object(
        "jobs.batch",
        "default",
        job["metadata"]["name"].as_str().unwrap(),
    );
    let mut args = vec![
        "run",
        "work.py:square",
        "--arg",
        "3",
        "--spot",
        "--backend",
        "gke",
        "--container-image",
        "prebuilt",
        "--detach",
    ];
    args.extend(&target);
    let o = sb.kinetic_async(&args, &[]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(spot_scheduled(&only_job(cloud.cluster())));
    // …and refused where it cannot be honoured.
    let o = sb
        .kinetic_async(
            &[
                "run",
                "work.py:square",
                "--arg",
                "3",
                "--accelerator",
                "cpu:spot",
                "--backend",
                "local",
            ],
            &[],
        )
        .await;
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no Spot VM"), "{}", stderr(&o));
}

/// Captured variables beat the container's own environment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captured_env_overrides_the_containers_own() {
    let w = cluster_world().await;
    let o = w
        .kinetic(&[
            "run",
            "work.py:envs",
            "--backend",
            "gke",
            "--json",
            "--env",
            "KERAS_BACKEND=torch",
            "--env",
            "JAX_PLATFORMS=cuda",
        ])
        .await;
    assert!(o.status.success(), "{}", stderr(&o));
    let out: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(out["value"], json!(["torch", "cuda"]), "{out}");
}

/// NVIDIA GPU jobs see `JAX_PLATFORMS=cuda` in their pods on gke and on
/// pathways (JAX's `gpu` also means ROCm, which fails to start there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_pods_get_jax_platforms_cuda_on_gke_and_pathways() {
    let w = World::gke(WORK_PY).pyproject().pathways().start().await;
    for (name, label, count) in [
        ("gpu-l4", "nvidia-l4", 1),
        ("gpu-a100", "nvidia-tesla-a100", 4),
        ("gpu-h100", "nvidia-h100-80gb", 1),
    ] {
        w.cluster()
            .add_node(
                &FakeNode::cpu(name)
                    .label("cloud.google.com/gke-accelerator", label)
                    .capacity("nvidia.com/gpu", count)
                    .taint("nvidia.com/gpu", "present", "NoSchedule"),
            )
            .unwrap();
    }
    for backend in ["gke", "pathways"] {
        for accelerator in ["l4", "a100x4", "h100"] {
            let o = w
                .kinetic(&[
                    "run",
                    "work.py:envs",
                    "--backend",
                    backend,
                    "--accelerator",
                    accelerator,
                    "--json",
                ])
                .await;
            assert!(
                o.status.success(),
                "{backend} {accelerator}: {}",
                stderr(&o)
            );
            let out: Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(
                out["value"],
                json!(["jax", "cuda"]),
                "{backend} {accelerator}: {out}"
            );
        }
    }
}

/// A pod the API server refuses (here a ResourceQuota) is reported with
/// the server's message and fails at the pending deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_pod_fails_at_the_pending_deadline_with_the_servers_reason() {
    let w = cluster_world().await;
    w.cluster()
        .insert(
            "resourcequotas",
            "default",
            json!({"apiVersion": "v1", "kind": "ResourceQuota",
                   "metadata": {"name": "no-pods"}, "spec": {"hard": {"pods": "0"}}}),
        )
        .unwrap();
    let o = w
        .kinetic_env(
            &["run", "work.py:square", "--arg", "3", "--backend", "gke"],
            &[("KINETIC_PENDING_DEADLINE", "2")],
        )
        .await;
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("still pending after"), "{err}");
    assert!(err.contains("exceeded quota: no-pods"), "{err}");
}

/// The gke backend refuses a store its pods cannot read, and says what is
/// missing when there is no kubeconfig, no project for a bundled image, or
/// no context for the configured cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_gke_backend_lacks_is_named() {
    let w = cluster_world().await;
    let sb = w.sandbox();
    let run = ["run", "work.py:square", "--arg", "3", "--backend", "gke"];

    let o = w
        .kinetic_env(&run, &[("KINETIC_STORE_URL", "file:///tmp/kinetic-store")])
        .await;
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "KINETIC_STORE_URL=file:///tmp/kinetic-store cannot be used with the gke backend"
        ),
        "{}",
        stderr(&o)
    );
    let o = sb
        .without(&["KINETIC_STORE_URL"])
        .kinetic_async(&run, &[])
        .await;
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no project is configured"),
        "{}",
        stderr(&o)
    );

    let o = sb.without(&["KUBECONFIG"]).kinetic_async(&run, &[]).await;
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    for want in [
        "needs a kubeconfig",
        "KUBECONFIG",
        "gcloud container clusters get-credentials",
    ] {
        assert!(stderr(&o).contains(want), "{want:?}: {}", stderr(&o));
    }

    // No project: a bundled image cannot be built, a prebuilt one needs none.
    let no_image = sb.without(&["KINETIC_IMAGE"]);
    let o = no_image.kinetic_async(&run, &[]).await;
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no project is set")
            && stderr(&o).contains("--container-image prebuilt"),
        "{}",
        stderr(&o)
    );
    let mut prebuilt = run.to_vec();
    prebuilt.extend(["--container-image", "prebuilt", "--detach"]);
    let o = no_image.kinetic_async(&prebuilt, &[]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let job = only_job(w.cluster());
    let image = job["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(image.starts_with("kinetic/base-cpu:"), "{image}");

    // A configured cluster the kubeconfig has no context for.
    let o = w.kinetic_env(&run, &[("KINETIC_PROJECT", "p")]).await;
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("has no context 'gke_p_us-central1-a_kinetic-cluster'")
            && stderr(&o).contains("gcloud container clusters get-credentials kinetic-cluster --zone us-central1-a --project p"),
        "{}",
        stderr(&o)
    );
}

/// After cleanup: `jobs status` says the job was cleaned up, `jobs result`
/// asked twice gives the value twice, `jobs cancel` says it had finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_commands_after_cleanup_say_what_happened() {
    let w = cluster_world().await;
    let o = w
        .kinetic(&[
            "run",
            "work.py:square",
            "--arg",
            "5",
            "--backend",
            "gke",
            "--detach",
        ])
        .await;
    assert!(o.status.success(), "{}", stderr(&o));
    let job_id = String::from_utf8_lossy(&o.stdout).trim().to_owned();
    for _ in 0..2 {
        let o = w.kinetic(&["jobs", "result", &job_id]).await;
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "25");
    }
    assert!(w.cluster().objects("jobs.batch", "default").is_empty());
    let o = w.kinetic(&["jobs", "status", &job_id]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        format!("{job_id}: NOT_FOUND (cleaned up; its result stays in the store)")
    );
    let o = w.kinetic(&["jobs", "cancel", &job_id]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("had already finished"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}
