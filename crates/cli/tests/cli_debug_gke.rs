//! Debug jobs through the real binary with `--backend gke` on the fake
//! cluster: the pod's runner starts debugpy on the pod's IP, `kinetic jobs
//! debug` forwards a local port through the API server's
//! `pods/portforward`, a DAP client attaches through it, and the value
//! comes back; the Job is kept (with Kinetic's two-hour TTL).
//!
//! The pods run on the interpreter of the venv `scripts/test.sh` builds
//! (`target/python-venv`, which has debugpy from PyPI).

mod dap;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use dap::WORK_PY;
use kinetic_fake_gcp::FakeGcs;
use kinetic_fake_gcp::k8s::{FakeCluster, FakeClusterConfig};

fn kinetic(dir: &Path, env: &[(String, String)], args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kinetic"));
    cmd.args(args)
        .current_dir(dir.join("home/project"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir.join("home"))
        .env("KINETIC_LOCAL_ROOT", dir.join("local"))
        .env("KINETIC_PROFILES_FILE", dir.join("profiles.json"))
        .envs(env.iter().cloned())
        .stdin(Stdio::null());
    cmd
}

async fn output(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debugger_attaches_to_a_pod_through_the_api_servers_port_forward() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("home/project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("work.py"), WORK_PY).unwrap();
    let gcs = FakeGcs::with_buckets(&["fake-jobs"]).unwrap();
    let cluster = FakeCluster::start(
        FakeClusterConfig::default()
            .python(dap::venv_bin().join("python3"))
            .env("KINETIC_GCS_ENDPOINT", &gcs.endpoint()),
    )
    .await
    .unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig, "default").unwrap();
    let mut env = cluster.cli_env(&kubeconfig, "gs://fake-jobs", "default");
    env.push(("KINETIC_GCS_ENDPOINT".into(), gcs.endpoint()));

    let o = output(kinetic(
        dir.path(),
        &env,
        &[
            "run",
            "--detach",
            "--debug",
            "work:square",
            "--arg",
            "7",
            "--backend",
            "gke",
        ],
    ))
    .await;
    assert!(o.status.success(), "{}", text(&o.stderr));
    let job = text(&o.stdout).trim().to_owned();

    let mut debug = kinetic(dir.path(), &env, &["jobs", "debug", &job, "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = debug.stdout.take().unwrap();
    let launch = tokio::task::spawn_blocking(move || dap::read_launch(stdout))
        .await
        .unwrap();
    let config = &launch["configurations"][0];
    assert_eq!(config["type"], "debugpy", "{launch}");
    assert_eq!(
        config["pathMappings"][0]["localRoot"], "${workspaceFolder}",
        "{launch}"
    );
    let port = u16::try_from(config["connect"]["port"].as_u64().unwrap()).unwrap();

    let stopped = tokio::task::spawn_blocking(move || {
        dap::attach_and_continue(("127.0.0.1", port), Duration::from_secs(60))
    })
    .await
    .unwrap();
    assert!(stopped.is_some(), "the job stopped before the call");
    let o = tokio::task::spawn_blocking(move || debug.wait_with_output().unwrap())
        .await
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("ended (SUCCEEDED)"),
        "{}",
        text(&o.stderr)
    );

    let o = output(kinetic(dir.path(), &env, &["jobs", "result", &job])).await;
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout).trim(), "49");
    // Kept, with Kinetic's debug manifest.
    let name = format!("kinetic-{job}");
    let k8s_job = cluster
        .object("jobs.batch", "default", &name)
        .unwrap_or_else(|| panic!("the debug job {name} was cleaned up"));
    assert_eq!(k8s_job["spec"]["ttlSecondsAfterFinished"], 7200);
    let container = &k8s_job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["ports"][0]["name"], "debugpy");
    assert_eq!(container["ports"][0]["containerPort"], 5678);
    let pods = cluster.objects("pods", "default");
    let ip = pods[0]["status"]["podIP"].as_str().unwrap();
    assert!(
        ip.starts_with("127.") && ip != "127.0.0.1",
        "each pod has its own loopback IP: {ip}"
    );
}
