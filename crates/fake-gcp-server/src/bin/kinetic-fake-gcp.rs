//! `kinetic-fake-gcp`: a fake Google Cloud for the `kinetic` CLI, on
//! loopback only — a fake Kubernetes cluster (API server, controller,
//! scheduler, autoscaler and a kubelet that runs pods as local processes),
//! a fake GCS server (XML and JSON APIs) holding the cluster's jobs and
//! builds buckets, a fake Cloud Build with Artifact Registry that builds
//! the jobs' images from the builds bucket, and the control-plane APIs
//! `kinetic up` drives (Service Usage, Kubernetes Engine, IAM, Resource
//! Manager). With `--empty` the project starts new, for `kinetic up`.
//!
//! Writes `DIR/kubeconfig` and `DIR/env` (shell `export` lines that point
//! the CLI at the fakes), prints `ready` and serves until SIGINT or
//! SIGTERM. Then:
//!
//! ```text
//! source DIR/env
//! kinetic run work.py:square --arg 7 --backend gke --json   # prints 49
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use kinetic_fake_gcp::FakeGcp;

/// A fake Google Cloud on 127.0.0.1 for the `kinetic` CLI: Kubernetes, GCS,
/// Cloud Build and the APIs `kinetic up` drives. Writes DIR/kubeconfig,
/// DIR/bin/gke-gcloud-auth-plugin and DIR/env (`source DIR/env` points the
/// CLI at the fakes) and serves until SIGINT or SIGTERM.
#[derive(Debug, Parser)]
#[command(name = "kinetic-fake-gcp", version)]
struct Args {
    /// Where to write `kubeconfig` and `env` (created if missing).
    #[arg(long, value_name = "DIR")]
    state_dir: PathBuf,
    /// The namespace jobs go to.
    #[arg(long, value_name = "NS", default_value = "default")]
    namespace: String,
    /// The fake project (its buckets are `{project}-kn-{cluster}-jobs` and `-builds`).
    #[arg(long, value_name = "PROJECT", default_value = "fake-project")]
    project: String,
    /// The fake cluster.
    #[arg(long, value_name = "CLUSTER", default_value = "fake")]
    cluster: String,
    /// The host interpreter image environments are made from (never the
    /// one a pod runs: pods run their image's `python3`).
    #[arg(long, value_name = "PYTHON", default_value = "python3")]
    python: PathBuf,
    /// The package index: each built image is a venv with its packages
    /// installed from this wheelhouse only, and pods install from it at
    /// start (without it nothing can be installed). Pods have only what
    /// their image holds; an image the registry lacks is ErrImagePull.
    #[arg(long, value_name = "DIR")]
    wheelhouse: Option<PathBuf>,
    /// Where image environments are kept between runs (default DIR/images
    /// under --state-dir).
    #[arg(long, value_name = "DIR")]
    image_cache: Option<PathBuf>,
    /// An image no build makes and the interpreter its pods run
    /// (IMAGE=PYTHON; repeatable).
    #[arg(long = "image", value_name = "IMAGE=PYTHON")]
    images: Vec<String>,
    /// Start with a new project (no cluster, buckets or registry; most
    /// APIs disabled), for `kinetic up` to build.
    #[arg(long)]
    empty: bool,
    /// Seconds each long-running operation (creating a cluster, a node
    /// pool) takes.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    operation_time: f64,
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

    let operation_time =
        std::time::Duration::try_from_secs_f64(args.operation_time).map_err(|_| {
            format!(
                "--operation-time {}: expected a number of seconds",
                args.operation_time
            )
        })?;
    let config = kinetic_fake_gcp_server::fake_gcp_config()
        .project(&args.project)
        .cluster(&args.cluster)
        .namespace(&args.namespace)
        .python(&args.python)
        .provisioned(!args.empty)
        .operation_time(operation_time);
    let mut config = config;
    let cache = match &args.image_cache {
        Some(c) => std::path::absolute(c).map_err(|e| format!("{}: {e}", c.display()))?,
        None => dir.join("images"),
    };
    config = config.image_cache(&cache);
    if let Some(wheelhouse) = &args.wheelhouse {
        let wheelhouse = std::path::absolute(wheelhouse)
            .map_err(|e| format!("{}: {e}", wheelhouse.display()))?;
        config = config.wheelhouse(wheelhouse, cache);
    }
    for spec in &args.images {
        let Some((image, python)) = spec.rsplit_once('=') else {
            return Err(format!("--image {spec}: expected IMAGE=PYTHON"));
        };
        config = config.image(image, python);
    }
    let cloud = FakeGcp::start(config)
        .await
        .map_err(|e| format!("cannot start the fakes: {e}"))?;

    let kubeconfig = dir.join("kubeconfig");
    write_atomic(&kubeconfig, &cloud.kubeconfig())
        .map_err(|e| format!("{}: {e}", kubeconfig.display()))?;
    let bin = dir.join("bin");
    cloud
        .write_auth_plugin(&bin)
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    let mut env_text: String = cloud
        .cli_env(&kubeconfig)
        .iter()
        .map(|(k, v)| format!("export {k}={}\n", shell_quote(v)))
        .collect();
    // The kubeconfig `kinetic up` writes runs gke-gcloud-auth-plugin.
    env_text.push_str(&format!(
        "export PATH={}:\"$PATH\"\n",
        shell_quote(&bin.display().to_string())
    ));
    let env_file = dir.join("env");
    write_atomic(&env_file, &env_text).map_err(|e| format!("{}: {e}", env_file.display()))?;
    println!(
        "ready: Kubernetes API at {}, GCS at {}, Google APIs at {}; source {}",
        cloud.cluster().url(),
        cloud.gcs().endpoint(),
        cloud.apis().endpoint(),
        env_file.display()
    );

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("cannot watch SIGTERM: {e}"))?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    drop(cloud);
    Ok(())
}

fn main() -> ExitCode {
    // --help and --version print and exit 0; bad arguments exit 2.
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kinetic-fake-gcp: cannot start the async runtime: {e}");
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
