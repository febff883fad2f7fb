//! Debug jobs through the real binary with `--backend gke` on the fake
//! cluster: the pod's runner starts debugpy on the pod's IP, `kinetic jobs
//! debug` forwards a local port through the API server's
//! `pods/portforward`, a DAP client attaches through it, and the value
//! comes back; the Job is kept (with Kinetic's two-hour TTL).
//!
//! The jobs' fixed image is a stand-in named explicitly to the cluster:
//! the interpreter of the venv `scripts/test.sh` builds
//! (`target/python-venv`, which has debugpy from PyPI).

mod dap;
mod sandbox;

use std::process::Stdio;
use std::time::Duration;

use dap::WORK_PY;
use sandbox::world::World;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debugger_attaches_to_a_pod_through_the_api_servers_port_forward() {
    let w = World::gke(WORK_PY)
        .python(dap::venv_bin().join("python3"))
        .start()
        .await;
    let cluster = w.cluster();

    let o = w
        .kinetic(&[
            "run",
            "--detach",
            "--debug",
            "work:square",
            "--arg",
            "7",
            "--backend",
            "gke",
        ])
        .await;
    assert!(o.status.success(), "{}", text(&o.stderr));
    let job = text(&o.stdout).trim().to_owned();

    let mut debug = w
        .sandbox()
        .command(&["jobs", "debug", &job, "--port", "0"], &[])
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

    let o = w.kinetic(&["jobs", "result", &job]).await;
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
