//! The real `kinetic` binary with `--backend gke` against the fake
//! Kubernetes cluster and the fake GCS server (in this test process, on
//! loopback), pointed at them by the environment `kinetic-fake-gcp`
//! writes: the runner runs as a pod process and its context and result go
//! through the fake GCS server.

use std::path::Path;
use std::process::{Command, Output};

use kinetic_fake_gcp::k8s::{FakeCluster, FakeClusterConfig};
use kinetic_fake_gcp::{FakeGcp, FakeGcpConfig, FakeGcs, GcsOp};

const WORK_PY: &str = r#"
def square(x):
    print("squaring", x, flush=True)
    return x * x


def fail():
    raise RuntimeError("deliberate failure")
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

async fn kinetic(dir: &Path, env: Vec<(String, String)>, args: &[&str]) -> Output {
    let dir = dir.to_path_buf();
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kinetic"));
        cmd.args(&args)
            .current_dir(dir.join("home/project"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", dir.join("home"))
            .env("KINETIC_LOCAL_ROOT", dir.join("local"))
            .env("KINETIC_PROFILES_FILE", dir.join("profiles.json"))
            .envs(env);
        cmd.output().unwrap()
    })
    .await
    .unwrap()
}

/// The fake cluster and jobs bucket, and the environment `FakeCluster`
/// gives the CLI (one fixed image, `KINETIC_IMAGE`), with the GCS endpoint.
async fn fixed_image_cluster(dir: &Path) -> (FakeGcs, FakeCluster, Vec<(String, String)>) {
    let gcs = FakeGcs::with_buckets(&["fake-jobs"]).unwrap();
    let cluster = FakeCluster::start(
        FakeClusterConfig::default().env("KINETIC_GCS_ENDPOINT", &gcs.endpoint()),
    )
    .await
    .unwrap();
    let kubeconfig = dir.join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig, "default").unwrap();
    let mut env = cluster.cli_env(&kubeconfig, "gs://fake-jobs", "default");
    env.push(("KINETIC_GCS_ENDPOINT".into(), gcs.endpoint()));
    (gcs, cluster, env)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_with_the_gke_backend_against_the_fake_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("home/project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("pyproject.toml"),
        "[project]\nname = \"p\"\ndependencies = []\n",
    )
    .unwrap();
    std::fs::write(project.join("work.py"), WORK_PY).unwrap();
    let (gcs, cluster, env) = fixed_image_cluster(dir.path()).await;

    let o = kinetic(dir.path(), env.clone(), &SQUARE_7_ON_GKE).await;
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "stdout: {out}\nstderr: {err}");
    assert_eq!(out.trim(), "49", "stderr: {err}");
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
    for object in ["/context.zip", "/spec.json", "/result.json"] {
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
            .any(|r| r.op == GcsOp::Get && r.name.ends_with("/context.zip")),
        "the pod's runner read its context from GCS: {requests:?}"
    );

    let o = kinetic(
        dir.path(),
        env,
        &["run", "work.py:fail", "--backend", "gke"],
    )
    .await;
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("RuntimeError: deliberate failure"), "{err}");
}

/// A project with requirements, for a bundled image.
fn project_with_requirements(dir: &Path) {
    let project = dir.join("home/project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("requirements.txt"), "six==1.16.0\n").unwrap();
    std::fs::write(project.join("work.py"), WORK_PY).unwrap();
}

/// The whole fake project `kinetic-fake-gcp` serves: the bundled image is
/// built on the fake Cloud Build from a context uploaded to the builds
/// bucket on the fake GCS server, then the pod runs in it; the second run
/// finds the image in the fake Artifact Registry and builds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_builds_its_image_on_the_fake_cloud_build() {
    let dir = tempfile::tempdir().unwrap();
    project_with_requirements(dir.path());
    let cloud = FakeGcp::start(FakeGcpConfig::default()).await.unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cloud.write_kubeconfig(&kubeconfig).unwrap();
    let env = cloud.cli_env(&kubeconfig);
    let o = kinetic(dir.path(), env.clone(), &SQUARE_7_ON_GKE).await;
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "49", "{err}");
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

    let o = kinetic(dir.path(), env, &SQUARE_7_ON_GKE).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "49");
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
    let dir = tempfile::tempdir().unwrap();
    project_with_requirements(dir.path());
    let (_gcs, cluster, env) = fixed_image_cluster(dir.path()).await;
    let o = kinetic(
        dir.path(),
        env,
        &["run", "work.py:square", "--arg", "7", "--backend", "gke"],
    )
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
        cluster.calls().count("create", "jobs.batch"),
        0,
        "nothing was submitted"
    );
}
