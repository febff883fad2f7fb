//! `kinetic-fake-gcp`: a fake Google Cloud for the `kinetic` CLI, on
//! loopback only — a fake Kubernetes cluster (API server, controller and a
//! kubelet that runs pods as local processes) and a fake GCS server (XML
//! API) holding the jobs bucket, which the CLI and the pods' runner share.
//!
//! ```text
//! kinetic-fake-gcp --state-dir DIR [--namespace NS] [--python PYTHON]
//! ```
//!
//! Writes `DIR/kubeconfig` and `DIR/env` (shell `export` lines that point
//! the CLI at the fakes), prints `ready` and serves until SIGINT or
//! SIGTERM. Then:
//!
//! ```text
//! source DIR/env
//! kinetic run work.py:square --arg 7 --backend gke --json   # prints 49
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use kinetic_testkit::FakeGcs;
use kinetic_testkit::fake_k8s::{FakeCluster, FakeClusterConfig};

/// The jobs bucket the fake GCS server holds.
const BUCKET: &str = "fake-kn-fake-jobs";

const USAGE: &str = "usage: kinetic-fake-gcp --state-dir DIR [--namespace NS] [--python PYTHON]";

struct Args {
    state_dir: PathBuf,
    namespace: String,
    python: String,
}

fn parse_args() -> Result<Args, String> {
    let mut state_dir = None;
    let mut namespace = "default".to_owned();
    let mut python = "python3".to_owned();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |flag: &str| {
            it.next()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match arg.as_str() {
            "--state-dir" => state_dir = Some(PathBuf::from(value("--state-dir")?)),
            "--namespace" => namespace = value("--namespace")?,
            "--python" => python = value("--python")?,
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument '{other}'\n{USAGE}")),
        }
    }
    let state_dir = state_dir.ok_or_else(|| format!("--state-dir is required\n{USAGE}"))?;
    Ok(Args {
        state_dir,
        namespace,
        python,
    })
}

/// Quote a value for a POSIX shell.
fn shell_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "'\\''"))
}

fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

async fn serve(args: Args) -> Result<(), String> {
    let dir = std::path::absolute(&args.state_dir)
        .map_err(|e| format!("{}: {e}", args.state_dir.display()))?;
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;

    let gcs = FakeGcs::with_buckets(&[BUCKET])
        .map_err(|e| format!("cannot start the fake GCS server: {e}"))?;
    let endpoint = gcs.endpoint();
    // Every pod process reads and writes gs:// objects on the fake server.
    let pod_env = BTreeMap::from([("KINETIC_GCS_ENDPOINT".to_owned(), endpoint.clone())]);
    let mut config = FakeClusterConfig::default().python(&args.python);
    for (k, v) in &pod_env {
        config = config.env(k, v);
    }
    let cluster = FakeCluster::start(config)
        .await
        .map_err(|e| format!("cannot start the fake Kubernetes API server: {e}"))?;

    let kubeconfig = dir.join("kubeconfig");
    write_atomic(&kubeconfig, &cluster.kubeconfig(&args.namespace))
        .map_err(|e| format!("{}: {e}", kubeconfig.display()))?;
    let store_url = format!("gs://{BUCKET}");
    let mut exports = cluster.cli_env(&kubeconfig, &store_url, &args.namespace);
    exports.push(("KINETIC_GCS_ENDPOINT".to_owned(), endpoint.clone()));
    let env_text: String = exports
        .iter()
        .map(|(k, v)| format!("export {k}={}\n", shell_quote(v)))
        .collect();
    let env_file = dir.join("env");
    write_atomic(&env_file, &env_text).map_err(|e| format!("{}: {e}", env_file.display()))?;
    println!(
        "ready: Kubernetes API at {}; source {}",
        cluster.url(),
        env_file.display()
    );

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("cannot watch SIGTERM: {e}"))?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    drop(cluster);
    drop(gcs);
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kinetic-fake-gcp: {e}");
            ExitCode::from(1)
        }
    }
}
