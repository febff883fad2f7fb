//! [`FakeGcp`]: the fake GCS, Kubernetes cluster, Cloud Build and control
//! plane APIs wired as one project, as `kinetic-fake-gcp` serves them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::apis::FakeGoogleApis;
use crate::client::{ClientProfile, ProjectNames};
use crate::cloudbuild::{BuildSchedule, FakeCloudBuild};
use crate::gcs::FakeGcs;
use crate::images::{ImageBuilder, ImageEnvironments};
use crate::k8s::{FakeCluster, FakeClusterConfig};

/// Settings of a [`FakeGcp`].
#[derive(Debug, Clone)]
pub struct FakeGcpConfig {
    client: ClientProfile,
    project: String,
    zone: String,
    cluster: String,
    namespace: String,
    python: PathBuf,
    wheelhouse: Option<PathBuf>,
    image_cache: Option<PathBuf>,
    stand_ins: Vec<(String, PathBuf)>,
    provisioned: bool,
    operation_time: Duration,
    scale_up_delay: Duration,
}

impl FakeGcpConfig {
    /// A project for `client`: project `fake-project`, cluster `fake` in
    /// the client's default zone, jobs in its default namespace, images
    /// built from `python3` with no package index; provisioned (the
    /// cluster, its buckets and registry exist); operations take 200 ms.
    pub fn new(client: ClientProfile) -> Self {
        Self {
            project: "fake-project".into(),
            zone: client.zone.clone(),
            cluster: "fake".into(),
            namespace: client.namespace.clone(),
            client,
            python: PathBuf::from("python3"),
            wheelhouse: None,
            image_cache: None,
            stand_ins: Vec::new(),
            provisioned: true,
            operation_time: Duration::from_millis(200),
            scale_up_delay: Duration::from_millis(300),
        }
    }

    /// The project (default `fake-project`); its buckets are named as the
    /// client names them ([`ClientProfile::naming`]).
    pub fn project(mut self, project: &str) -> Self {
        self.project = project.to_owned();
        self
    }

    /// The cluster (default `fake`).
    pub fn cluster(mut self, cluster: &str) -> Self {
        self.cluster = cluster.to_owned();
        self
    }

    /// The namespace jobs go to (default: the client's).
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = namespace.to_owned();
        self
    }

    /// The host interpreter (default `python3`): the one image
    /// environments are made from, and the fake GCS FUSE driver's. Never
    /// the one a pod's `python3` runs on: that is its image's.
    pub fn python(mut self, python: impl Into<PathBuf>) -> Self {
        self.python = python.into();
        self
    }

    /// Pods have only what their image holds, whatever the settings: each
    /// image the fake Cloud Build builds becomes an environment (a fresh
    /// venv of [`FakeGcpConfig::python`], the image's packages and
    /// requirements installed by pip, the files its recipe adds), pods
    /// run their image's environment, and an image the registry does not
    /// hold cannot be pulled. See [`crate::images`]. This sets the
    /// package index builds and pods install from: `wheelhouse` only (none
    /// by default: nothing can be installed), and keeps environments
    /// under `cache` by image ([`FakeGcpConfig::image_cache`]).
    pub fn wheelhouse(mut self, wheelhouse: impl Into<PathBuf>, cache: impl Into<PathBuf>) -> Self {
        self.wheelhouse = Some(wheelhouse.into());
        self.image_cache = Some(cache.into());
        self
    }

    /// Where image environments are kept, by content, between runs and
    /// shared by fakes (default: a folder of this fake's own, removed
    /// with it, so each image is made anew).
    pub fn image_cache(mut self, cache: impl Into<PathBuf>) -> Self {
        self.image_cache = Some(cache.into());
        self
    }

    /// Name the environment of an image no build makes (a fixed
    /// `KINETIC_IMAGE`, a prebuilt image): its pods run `python` (a bare
    /// name is looked up on `PATH`).
    pub fn image(mut self, image: &str, python: impl Into<PathBuf>) -> Self {
        self.stand_ins.push((image.to_owned(), python.into()));
        self
    }

    /// Whether the project starts with its cluster (running, default pool
    /// of one CPU node), jobs and builds buckets and image repository
    /// (default true), or new: nothing but Service Usage, Resource Manager
    /// and Cloud Storage enabled, for `kinetic up` to build.
    pub fn provisioned(mut self, provisioned: bool) -> Self {
        self.provisioned = provisioned;
        self
    }

    /// How long long-running operations take (default 200 ms; creating a
    /// cluster takes this, a node pool half of it).
    pub fn operation_time(mut self, time: Duration) -> Self {
        self.operation_time = time;
        self
    }

    /// How long the cluster autoscaler takes to add a node (default 300 ms).
    pub fn scale_up_delay(mut self, delay: Duration) -> Self {
        self.scale_up_delay = delay;
        self
    }
}

/// The LeaderWorkerSet manifests the fake serves in place of the release's
/// (the same kinds of object, much smaller).
pub const LWS_MANIFESTS: &str = include_str!("apis/lws-manifests.yaml");

/// The NVIDIA driver installer manifest the fake serves.
pub const NVIDIA_DRIVER_MANIFEST: &str = include_str!("apis/nvidia-driver-installer.yaml");

/// Where [`FakeGcp`] serves them, under its APIs' endpoint.
/// The Role `kinetic up` makes in the jobs' namespace (`kinetic-jobs`):
/// what pathways jobs need that `edit` lacks.
/// The Role `kinetic up` makes for the jobs' pods (a slice's hosts end
/// their LeaderWorkerSet) and its RoleBinding to their service account.
fn slice_hosts_role(namespace: &str, account: &str) -> (serde_json::Value, serde_json::Value) {
    let labels = serde_json::json!({"app.kubernetes.io/managed-by": "kinetic"});
    (
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "kinetic-slice-hosts", "namespace": namespace, "labels": labels},
            "rules": [{"apiGroups": ["leaderworkerset.x-k8s.io"], "resources": ["leaderworkersets"],
                       "verbs": ["get", "list", "patch"]},
                      {"apiGroups": [""], "resources": ["configmaps"],
                       "verbs": ["get", "create", "update"]}],
        }),
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "kinetic-slice-hosts", "namespace": namespace, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kinetic-slice-hosts"},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        }),
    )
}

fn jobs_role(namespace: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "kinetic-jobs", "namespace": namespace,
                     "labels": {"app.kubernetes.io/managed-by": "kinetic"}},
        "rules": [
            {"apiGroups": ["leaderworkerset.x-k8s.io"], "resources": ["leaderworkersets"],
             "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
            {"apiGroups": ["leaderworkerset.x-k8s.io"], "resources": ["leaderworkersets/status"],
             "verbs": ["get"]},
        ],
    })
}

const LWS_PATH: &str = "kubernetes-sigs/lws/releases/download/v0.5.1/manifests.yaml";
const NVIDIA_PATH: &str = "GoogleCloudPlatform/container-engine-accelerators/master/nvidia-driver-installer/cos/daemonset-preloaded.yaml";

/// The variable [`FakeGcp::cli_env`] gives the fake Kubernetes API
/// server's URL in (the fake's own, besides the client's).
pub const FAKE_K8S_URL: &str = "KINETIC_FAKE_K8S_URL";

/// The credential plugin kubeconfigs of GKE clusters run (`gcloud`'s).
pub const AUTH_PLUGIN: &str = "gke-gcloud-auth-plugin";

/// A fake project: GCS with the cluster's jobs and builds buckets, a
/// Kubernetes cluster whose pods read and write them (through
/// `KINETIC_GCS_ENDPOINT`), Cloud Build with Artifact Registry reading
/// build sources from the builds bucket, and the control-plane APIs
/// (Service Usage, Kubernetes Engine, IAM, Resource Manager, Artifact
/// Registry repositories) whose GKE cluster is that Kubernetes cluster.
/// One endpoint serves every Google API but Cloud Storage. Dropping it
/// stops everything.
#[derive(Debug)]
pub struct FakeGcp {
    config: FakeGcpConfig,
    names: ProjectNames,
    gcs: FakeGcs,
    cluster: Arc<FakeCluster>,
    cloud_build: FakeCloudBuild,
    apis: FakeGoogleApis,
    /// The image environments' folder when no cache was named; declared
    /// last, so it is removed after the cluster's pods stopped.
    _own_image_cache: Option<tempfile::TempDir>,
}

impl FakeGcp {
    /// The bearer token the fake APIs require, and the CLI is given.
    pub const ACCESS_TOKEN: &str = "fake-gcp-token";

    /// Start the fakes on loopback. Needs a multi-threaded tokio runtime.
    pub async fn start(config: FakeGcpConfig) -> std::io::Result<Self> {
        let names = (config.client.naming)(&config.project, &config.zone, &config.cluster);
        let gcs = FakeGcs::start()?;
        // A provisioned project's cluster has the jobs' service account
        // `kinetic up` makes; a new one has none until `up` runs.
        let accounts: Vec<(&str, &str)> = if config.provisioned {
            vec![(
                config.namespace.as_str(),
                names.k8s_service_account.as_str(),
            )]
        } else {
            Vec::new()
        };
        let own_cache = match &config.image_cache {
            Some(_) => None,
            None => Some(tempfile::tempdir()?),
        };
        let cache = config
            .image_cache
            .clone()
            .or_else(|| own_cache.as_ref().map(|d| d.path().to_path_buf()))
            .unwrap_or_default();
        let images = Arc::new(ImageEnvironments::new(Some(ImageBuilder {
            base_python: config.python.clone(),
            wheelhouse: config.wheelhouse.clone(),
            cache,
            packages: config.client.image_packages.clone(),
        })));
        for (image, python) in &config.stand_ins {
            images.add_stand_in(image, python);
        }
        let mut cluster_config = FakeClusterConfig::default().images(images.clone());
        for (path, contents) in &config.client.image_files {
            cluster_config = cluster_config.image_file(path, contents);
        }
        // The pods' package index: what they install at start comes from
        // the wheelhouse, never the network; without one there is none.
        cluster_config = cluster_config
            .env("PIP_NO_INDEX", "1")
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1");
        if let Some(wheelhouse) = images.wheelhouse() {
            cluster_config =
                cluster_config.env("PIP_FIND_LINKS", &wheelhouse.display().to_string());
        }
        let cluster = Arc::new(
            FakeCluster::start(
                cluster_config
                    .driver_python(&config.python)
                    .env(&config.client.vars.gcs_endpoint, &gcs.endpoint())
                    .nodes(Vec::new())
                    .service_accounts(&accounts)
                    .scale_up_delay(config.scale_up_delay),
            )
            .await?,
        );
        let cloud_build = FakeCloudBuild::start().await?;
        cloud_build.require_token(Self::ACCESS_TOKEN);
        // The first poll of a build sees it done: a job waits one poll.
        cloud_build.set_schedule(BuildSchedule::success().with_polls(0, 0));
        cloud_build.attach_gcs(&gcs);
        cloud_build.attach_images(images);
        let apis = FakeGoogleApis::start_with(
            &config.project,
            Some(cluster.clone()),
            Some(cloud_build.routes()),
        )
        .await?;
        apis.require_token(Self::ACCESS_TOKEN);
        apis.set_operation_time(config.operation_time);
        apis.serve_manifest(LWS_PATH, LWS_MANIFESTS);
        apis.serve_manifest(NVIDIA_PATH, NVIDIA_DRIVER_MANIFEST);
        if config.provisioned {
            // `kinetic up` installs LeaderWorkerSet.
            cluster
                .install_leader_worker_set()
                .map_err(|e| std::io::Error::other(e.message))?;
            // …and the Role pathways users need beside `edit`.
            cluster
                .insert(
                    "roles.rbac.authorization.k8s.io",
                    &config.namespace,
                    jobs_role(&config.namespace),
                )
                .map_err(|e| std::io::Error::other(e.message))?;
            // …and the Role of the jobs' pods, bound to their account.
            let (role, binding) = slice_hosts_role(&config.namespace, &names.k8s_service_account);
            cluster
                .insert("roles.rbac.authorization.k8s.io", &config.namespace, role)
                .and_then(|_| {
                    cluster.insert(
                        "rolebindings.rbac.authorization.k8s.io",
                        &config.namespace,
                        binding,
                    )
                })
                .map_err(|e| std::io::Error::other(e.message))?;
            gcs.create_bucket_in(&names.jobs_bucket, &config.project, &names.region);
            gcs.create_bucket_in(&names.builds_bucket, &config.project, &names.ar_location);
            apis.provision(
                &config.zone,
                &config.cluster,
                &format!(
                    "projects/{}/locations/{}/repositories/{}",
                    config.project, names.ar_location, names.ar_repository
                ),
                &names.node_service_account,
            );
        }
        Ok(Self {
            config,
            names,
            gcs,
            cluster,
            cloud_build,
            apis,
            _own_image_cache: own_cache,
        })
    }

    /// The fake GCS server.
    pub fn gcs(&self) -> &FakeGcs {
        &self.gcs
    }

    /// The fake Kubernetes cluster (the GKE cluster's API server).
    pub fn cluster(&self) -> &FakeCluster {
        &self.cluster
    }

    /// The fake Cloud Build and Artifact Registry.
    pub fn cloud_build(&self) -> &FakeCloudBuild {
        &self.cloud_build
    }

    /// The fake control-plane APIs.
    pub fn apis(&self) -> &FakeGoogleApis {
        &self.apis
    }

    /// The names the client gives the project's resources.
    pub fn names(&self) -> &ProjectNames {
        &self.names
    }

    /// The cluster's jobs bucket (`{project}-kn-{cluster}-jobs`).
    pub fn jobs_bucket(&self) -> &str {
        &self.names.jobs_bucket
    }

    /// The cluster's builds bucket (`{project}-kn-{cluster}-builds`).
    pub fn builds_bucket(&self) -> &str {
        &self.names.builds_bucket
    }

    /// The kubeconfig a user of this project has: for a provisioned
    /// project, the cluster's context `gke_{project}_{zone}_{cluster}` (as
    /// `gcloud container clusters get-credentials` writes it, with a
    /// token), current, in the configured namespace; for a new project,
    /// an empty one (`kinetic up` adds the context).
    pub fn kubeconfig(&self) -> String {
        if !self.config.provisioned {
            return "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\npreferences: {}\n"
                .to_owned();
        }
        self.cluster
            .kubeconfig_named(&self.names.kube_context, &self.config.namespace)
    }

    /// Write [`FakeGcp::kubeconfig`] to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig())
    }

    /// Write a `gke-gcloud-auth-plugin` into `bin` that gives the fake's
    /// token, as the real plugin gives gcloud's (kubeconfigs `kinetic up`
    /// writes run it). Returns its path.
    pub fn write_auth_plugin(&self, bin: &Path) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(bin)?;
        let path = bin.join(AUTH_PLUGIN);
        let credential = format!(
            "{{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{}\"}}}}",
            Self::ACCESS_TOKEN
        );
        std::fs::write(&path, format!("#!/bin/sh\nprintf '%s\\n' '{credential}'\n"))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
        Ok(path)
    }

    /// The environment that points the `kinetic` CLI at this project, given
    /// the kubeconfig written at `kubeconfig`: the cluster, the jobs bucket
    /// on the fake GCS server (which the runner reads too), every Google
    /// API on the fakes' endpoint, the manifests `kinetic up` installs,
    /// and the token.
    pub fn cli_env(&self, kubeconfig: &Path) -> Vec<(String, String)> {
        let gcs = self.gcs.endpoint();
        let apis = self.apis.endpoint().to_owned();
        let vars = &self.config.client.vars;
        [
            (&vars.kubeconfig, kubeconfig.display().to_string()),
            (&vars.project, self.config.project.clone()),
            (&vars.zone, self.config.zone.clone()),
            (&vars.cluster, self.config.cluster.clone()),
            (&vars.namespace, self.config.namespace.clone()),
            (&vars.store_url, format!("gs://{}", self.names.jobs_bucket)),
            (&vars.gcs_endpoint, gcs),
            (&vars.cloudbuild_endpoint, apis.clone()),
            (&vars.artifactregistry_endpoint, apis.clone()),
            (&vars.container_endpoint, apis.clone()),
            (&vars.iam_endpoint, apis.clone()),
            (&vars.resourcemanager_endpoint, apis.clone()),
            (&vars.serviceusage_endpoint, apis.clone()),
            (
                &vars.lws_manifests_url,
                format!("{apis}/manifests/{LWS_PATH}"),
            ),
            (
                &vars.nvidia_driver_manifest_url,
                format!("{apis}/manifests/{NVIDIA_PATH}"),
            ),
            (&vars.access_token, Self::ACCESS_TOKEN.to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.clone(), v))
        .chain([(FAKE_K8S_URL.to_owned(), self.cluster.url().to_owned())])
        .collect()
    }
}
