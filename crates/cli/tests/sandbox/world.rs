//! One fake cloud for the CLI tests, started in the test process on
//! loopback, with a [`Sandbox`] already pointed at it.
//!
//! Two kinds, as the tests need them:
//! - [`World::gke`]: the fake GCS server (jobs bucket `fake-jobs`) and
//!   the fake Kubernetes API server with its Job controller and kubelet,
//!   one fixed image (`KINETIC_IMAGE`) and no Cloud Build; `.pathways()`
//!   adds a four-host `v5litepod-16` TPU slice and LeaderWorkerSet. No
//!   build makes the fixed image, so the world names its interpreter: a
//!   stand-in, the host's `python3` unless `.python(…)` names another.
//! - [`World::project`]: the whole fake project of `kinetic-fake-gcp`
//!   (GCS, cluster, Cloud Build with Artifact Registry, the control-plane
//!   APIs), provisioned or new (`.new_project(…)`, for `kinetic up`). Its
//!   images are what the fake Cloud Build makes of them (fresh venvs,
//!   kept by content in `target/fake-images`, shared with the Python
//!   tests), their requirements installed from the world's wheelhouse of
//!   stand-in wheels (`.wheel(…)`); an image nothing built nor named cannot
//!   be pulled.
//!
//! The world owns the servers and the sandbox: dropped, it stops the
//! servers and kills every pod process, then removes the sandbox.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use kinetic_fake_gcp::k8s::{FAKE_IMAGE, FakeCluster, FakeNode};
use kinetic_fake_gcp::{FakeGcp, FakeGcpConfig, FakeGcs};
use kinetic_fake_gcp_server::{cluster_cli_env, fake_cluster_config, fake_gcp_config};

use super::Sandbox;

/// The jobs bucket of a [`World::gke`] world (`gs://fake-jobs`).
pub(crate) const JOBS_BUCKET: &str = "fake-jobs";

/// The flags that name the cluster of a [`World::project`] world.
pub(crate) const PROJECT_FLAGS: [&str; 6] = [
    "--project",
    "fake-project",
    "--zone",
    "us-central1-a",
    "--cluster",
    "fake",
];

/// A `pyproject.toml` with no dependencies.
pub(crate) const PYPROJECT: &str = "[project]\nname = \"p\"\ndependencies = []\n";

/// The servers of a world; declared before the sandbox in [`World`], so
/// they stop (and their pods die) before the sandbox is removed.
#[allow(clippy::large_enum_variant)] // one a test, never moved
enum Cloud {
    Cluster { cluster: FakeCluster, gcs: FakeGcs },
    Project(FakeGcp),
}

/// A running fake cloud and a sandbox pointed at it.
pub(crate) struct World {
    cloud: Cloud,
    sandbox: Sandbox,
}

/// What a [`World`] is started with.
pub(crate) struct WorldBuilder {
    work_py: String,
    files: Vec<(String, String)>,
    project: Option<FakeGcpConfig>,
    buckets: Vec<String>,
    pathways: bool,
    slice_hosts_bound: bool,
    python: Option<PathBuf>,
    kill_grace: Option<Duration>,
    wheels: Vec<(String, String)>,
}

impl World {
    /// A fake cluster and GCS server, jobs in `gs://fake-jobs`, namespace
    /// `default`, pods in one fixed image; `work_py` is the project's
    /// `work.py`.
    pub(crate) fn gke(work_py: &str) -> WorldBuilder {
        WorldBuilder {
            work_py: work_py.to_owned(),
            files: Vec::new(),
            project: None,
            buckets: vec![JOBS_BUCKET.to_owned()],
            pathways: false,
            slice_hosts_bound: true,
            python: None,
            kill_grace: None,
            wheels: Vec::new(),
        }
    }

    /// The whole fake project (`fake-project`, cluster `fake`), provisioned,
    /// with Cloud Build building the jobs' images.
    pub(crate) fn project(work_py: &str) -> WorldBuilder {
        WorldBuilder {
            project: Some(fake_gcp_config()),
            buckets: Vec::new(),
            ..Self::gke(work_py)
        }
    }

    /// The sandbox, its commands pointed at this world.
    pub(crate) fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// `kinetic ARGS` in the sandbox, against this world.
    pub(crate) async fn kinetic(&self, args: &[&str]) -> Output {
        self.sandbox.kinetic_async(args, &[]).await
    }

    /// `kinetic ARGS` with `env` on top of the world's.
    pub(crate) async fn kinetic_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.sandbox.kinetic_async_env(args, env).await
    }

    /// The kubeconfig `KUBECONFIG` names.
    pub(crate) fn kubeconfig(&self) -> PathBuf {
        self.sandbox.path("kubeconfig")
    }

    /// The Kubernetes API server.
    pub(crate) fn cluster(&self) -> &FakeCluster {
        match &self.cloud {
            Cloud::Cluster { cluster, .. } => cluster,
            Cloud::Project(cloud) => cloud.cluster(),
        }
    }

    /// The GCS server.
    pub(crate) fn gcs(&self) -> &FakeGcs {
        match &self.cloud {
            Cloud::Cluster { gcs, .. } => gcs,
            Cloud::Project(cloud) => cloud.gcs(),
        }
    }

    /// The whole fake project; only a [`World::project`] world has one.
    pub(crate) fn cloud(&self) -> &FakeGcp {
        match &self.cloud {
            Cloud::Project(cloud) => cloud,
            Cloud::Cluster { .. } => {
                panic!("a World::gke world has no fake project: start it with World::project")
            }
        }
    }

    /// Another home, whose project's `work.py` is `work_py`, pointed at
    /// this world as the first was when it started: its own kubeconfig,
    /// auth plugin and settings.
    pub(crate) fn another_sandbox(&self, work_py: &str) -> Sandbox {
        let sandbox = Sandbox::new(work_py);
        let env = self.point(&sandbox);
        sandbox.with_env(env)
    }

    /// Write `sandbox`'s kubeconfig (and, for a project, the auth plugin
    /// its kubeconfigs run); the environment that points the CLI here.
    fn point(&self, sandbox: &Sandbox) -> Vec<(String, String)> {
        let kubeconfig = sandbox.path("kubeconfig");
        match &self.cloud {
            Cloud::Cluster { cluster, gcs } => {
                cluster.write_kubeconfig(&kubeconfig, "default").unwrap();
                let mut env = cluster_cli_env(
                    cluster,
                    &kubeconfig,
                    &format!("gs://{JOBS_BUCKET}"),
                    "default",
                );
                env.push(("KINETIC_GCS_ENDPOINT".into(), gcs.endpoint()));
                env
            }
            Cloud::Project(cloud) => {
                cloud.write_kubeconfig(&kubeconfig).unwrap();
                let bin = sandbox.path("bin");
                cloud.write_auth_plugin(&bin).unwrap();
                let mut env = cloud.cli_env(&kubeconfig);
                env.push(("PATH".into(), path_with(&bin)));
                env
            }
        }
    }
}

/// `PATH` with `bin` first.
fn path_with(bin: &Path) -> String {
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Where image environments are kept by content between runs: the folder
/// the Python tests keep theirs in (`target/fake-images`).
fn image_cache() -> PathBuf {
    let debug = Path::new(env!("CARGO_BIN_EXE_kinetic"))
        .parent()
        .expect("target/debug");
    debug.with_file_name("fake-images")
}

/// Write a wheel of `name` `version` whose module is empty into
/// `wheelhouse` (written with Python's `zipfile`, as a build backend would).
fn stand_in_wheel(wheelhouse: &Path, name: &str, version: &str) {
    let script = r#"
import base64, hashlib, sys, zipfile
folder, name, version = sys.argv[1:]
dist = "%s-%s" % (name, version)
meta = "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version)
wheel = "Wheel-Version: 1.0\nGenerator: kinetic-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
files = {name + ".py": b"", dist + ".dist-info/METADATA": meta.encode(),
         dist + ".dist-info/WHEEL": wheel.encode()}
digest = lambda b: base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b"=").decode()
record = "".join("%s,sha256=%s,%d\n" % (p, digest(b), len(b)) for p, b in files.items())
record += dist + ".dist-info/RECORD,,\n"
with zipfile.ZipFile("%s/%s-py3-none-any.whl" % (folder, dist), "w") as whl:
    for p, b in files.items():
        whl.writestr(p, b)
    whl.writestr(dist + ".dist-info/RECORD", record)
"#;
    let o = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(wheelhouse)
        .args([name, version])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "writing the {name} wheel: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A host of a `v5litepod-16` slice: four TPU chips, topology 4x4.
fn tpu_node(name: &str) -> FakeNode {
    FakeNode::cpu(name)
        .label(
            "cloud.google.com/gke-tpu-accelerator",
            "tpu-v5-lite-podslice",
        )
        .label("cloud.google.com/gke-tpu-topology", "4x4")
        .capacity("google.com/tpu", 4)
}

impl WorldBuilder {
    /// A file of the project (`rel` under `home/project`).
    pub(crate) fn file(mut self, rel: &str, text: &str) -> Self {
        self.files.push((rel.to_owned(), text.to_owned()));
        self
    }

    /// A `pyproject.toml` with no dependencies ([`PYPROJECT`]).
    pub(crate) fn pyproject(self) -> Self {
        self.file("pyproject.toml", PYPROJECT)
    }

    /// One more (empty) bucket on the GCS server of a cluster world.
    pub(crate) fn bucket(mut self, name: &str) -> Self {
        assert!(self.project.is_none(), "a project's buckets are its own");
        self.buckets.push(name.to_owned());
        self
    }

    /// Four `v5litepod-16` hosts (`tpu-0`…`tpu-3`) and LeaderWorkerSet
    /// installed, for the pathways backend.
    pub(crate) fn pathways(mut self) -> Self {
        assert!(
            self.project.is_none(),
            "pathways hosts are a cluster world's"
        );
        self.pathways = true;
        self
    }

    /// A pathways world whose slice hosts Role is not bound to the jobs'
    /// account (a cluster `kinetic up` has not updated): hosts cannot end
    /// their slice.
    pub(crate) fn slice_hosts_unbound(mut self) -> Self {
        self.slice_hosts_bound = false;
        self
    }

    /// The interpreter of the fixed image a cluster world's pods run (a
    /// stand-in named to the cluster; default the host's `python3`), or
    /// the one a project's image environments are made from.
    pub(crate) fn python(mut self, python: impl Into<PathBuf>) -> Self {
        self.python = Some(python.into());
        self
    }

    /// A stand-in wheel of `name` `version` (an empty module) in the
    /// project's wheelhouse, for requirements its images install.
    pub(crate) fn wheel(mut self, name: &str, version: &str) -> Self {
        assert!(self.project.is_some(), "a cluster world builds no images");
        self.wheels.push((name.to_owned(), version.to_owned()));
        self
    }

    /// How long the kubelet waits after SIGTERM before SIGKILL.
    pub(crate) fn kill_grace(mut self, grace: Duration) -> Self {
        assert!(self.project.is_none(), "set on a cluster world");
        self.kill_grace = Some(grace);
        self
    }

    /// How long the project's cluster autoscaler takes to add a node.
    pub(crate) fn scale_up_delay(mut self, delay: Duration) -> Self {
        let config = self
            .project
            .take()
            .expect("scale_up_delay is a World::project's");
        self.project = Some(config.scale_up_delay(delay));
        self
    }

    /// A new project (nothing but the basic APIs; `kinetic up` builds the
    /// rest), whose long-running operations take `operation_time`.
    pub(crate) fn new_project(mut self, operation_time: Duration) -> Self {
        let config = self
            .project
            .take()
            .expect("new_project is a World::project's");
        self.project = Some(config.provisioned(false).operation_time(operation_time));
        self
    }

    /// Start the servers, then write the sandbox: the project, the
    /// kubeconfig (at `kubeconfig` in the sandbox, outside HOME) and the
    /// settings that point `kinetic` at the world.
    pub(crate) async fn start(self) -> World {
        let sandbox = Sandbox::new(&self.work_py);
        for (rel, text) in &self.files {
            sandbox.write(&format!("home/project/{rel}"), text);
        }
        let cloud = match self.project {
            Some(mut config) => {
                if let Some(python) = self.python {
                    config = config.python(python);
                }
                let wheelhouse = sandbox.path("wheelhouse");
                std::fs::create_dir_all(&wheelhouse).unwrap();
                for (name, version) in &self.wheels {
                    stand_in_wheel(&wheelhouse, name, version);
                }
                config = config.wheelhouse(wheelhouse, image_cache());
                Cloud::Project(FakeGcp::start(config).await.unwrap())
            }
            None => {
                let buckets: Vec<&str> = self.buckets.iter().map(String::as_str).collect();
                let gcs = FakeGcs::with_buckets(&buckets).unwrap();
                let python = self.python.unwrap_or_else(|| PathBuf::from("python3"));
                let config = fake_cluster_config()
                    .env("KINETIC_GCS_ENDPOINT", &gcs.endpoint())
                    .image(FAKE_IMAGE, python);
                let mut config = config;
                if let Some(grace) = self.kill_grace {
                    config = config.kill_grace(grace);
                }
                if self.pathways {
                    config = config.nodes((0..4).map(|i| tpu_node(&format!("tpu-{i}"))).collect());
                }
                let cluster = FakeCluster::start(config).await.unwrap();
                if self.pathways {
                    cluster.install_leader_worker_set().unwrap();
                    // As `kinetic up` leaves it: the jobs' pods may end
                    // their slice (the hosts Role bound to their account).
                    let hosts = kinetic_infra_gcp::model::RoleSpec::slice_hosts("kinetic");
                    cluster
                        .insert(
                            "roles.rbac.authorization.k8s.io",
                            "default",
                            hosts.to_json("default"),
                        )
                        .unwrap();
                    if self.slice_hosts_bound {
                        cluster
                            .insert(
                                "rolebindings.rbac.authorization.k8s.io",
                                "default",
                                hosts.binding_json("default").unwrap(),
                            )
                            .unwrap();
                    }
                }
                Cloud::Cluster { cluster, gcs }
            }
        };
        let mut world = World { cloud, sandbox };
        let env = world.point(&world.sandbox);
        world.sandbox = world.sandbox.with_env(env);
        world
    }
}
