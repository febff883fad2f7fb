//! [`FakeGcp`]: the fake GCS, Kubernetes cluster and Cloud Build wired as one
//! project, as `kinetic-fake-gcp` serves them.

use std::path::{Path, PathBuf};

use kinetic_core::config::{DEFAULT_NAMESPACE, DEFAULT_ZONE, DerivedNames};
use kinetic_core::settings::vars;

use crate::cloudbuild::{BuildSchedule, FakeCloudBuild};
use crate::gcs::FakeGcs;
use crate::k8s::{FakeCluster, FakeClusterConfig};

/// Settings of a [`FakeGcp`].
#[derive(Debug, Clone)]
pub struct FakeGcpConfig {
    project: String,
    zone: String,
    cluster: String,
    namespace: String,
    python: PathBuf,
}

impl Default for FakeGcpConfig {
    /// Project `fake`, cluster `fake` in the default zone, namespace
    /// `default`, pods run by `python3`.
    fn default() -> Self {
        Self {
            project: "fake".into(),
            zone: DEFAULT_ZONE.into(),
            cluster: "fake".into(),
            namespace: DEFAULT_NAMESPACE.into(),
            python: PathBuf::from("python3"),
        }
    }
}

impl FakeGcpConfig {
    /// The project (default `fake`); its buckets are named as Kinetic names them.
    pub fn project(mut self, project: &str) -> Self {
        self.project = project.to_owned();
        self
    }

    /// The cluster (default `fake`).
    pub fn cluster(mut self, cluster: &str) -> Self {
        self.cluster = cluster.to_owned();
        self
    }

    /// The namespace jobs go to (default `default`).
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = namespace.to_owned();
        self
    }

    /// The interpreter that runs the pods' `python3` (default `python3`).
    pub fn python(mut self, python: impl Into<PathBuf>) -> Self {
        self.python = python.into();
        self
    }
}

/// A fake project: GCS with the cluster's jobs and builds buckets, a
/// Kubernetes cluster whose pods read and write them (through
/// `KINETIC_GCS_ENDPOINT`), and Cloud Build with Artifact Registry reading
/// build sources from the builds bucket. Dropping it stops everything.
#[derive(Debug)]
pub struct FakeGcp {
    config: FakeGcpConfig,
    names: DerivedNames,
    gcs: FakeGcs,
    cluster: FakeCluster,
    cloud_build: FakeCloudBuild,
}

impl FakeGcp {
    /// The bearer token the fake Cloud Build requires, and the CLI is given.
    pub const ACCESS_TOKEN: &str = "fake-gcp-token";

    /// Start the three fakes on loopback. Needs a multi-threaded tokio runtime.
    pub async fn start(config: FakeGcpConfig) -> std::io::Result<Self> {
        let names = DerivedNames::new(&config.project, &config.zone, &config.cluster);
        let gcs = FakeGcs::with_buckets(&[&names.jobs_bucket, &names.builds_bucket])?;
        let cluster = FakeCluster::start(
            FakeClusterConfig::default()
                .python(&config.python)
                .env(vars::GCS_ENDPOINT, &gcs.endpoint()),
        )
        .await?;
        let cloud_build = FakeCloudBuild::start().await?;
        cloud_build.require_token(Self::ACCESS_TOKEN);
        // The first poll of a build sees it done: a job waits one poll.
        cloud_build.set_schedule(BuildSchedule::success().with_polls(0, 0));
        cloud_build.attach_gcs(&gcs);
        Ok(Self {
            config,
            names,
            gcs,
            cluster,
            cloud_build,
        })
    }

    /// The fake GCS server.
    pub fn gcs(&self) -> &FakeGcs {
        &self.gcs
    }

    /// The fake Kubernetes cluster.
    pub fn cluster(&self) -> &FakeCluster {
        &self.cluster
    }

    /// The fake Cloud Build and Artifact Registry.
    pub fn cloud_build(&self) -> &FakeCloudBuild {
        &self.cloud_build
    }

    /// The cluster's jobs bucket (`{project}-kn-{cluster}-jobs`).
    pub fn jobs_bucket(&self) -> &str {
        &self.names.jobs_bucket
    }

    /// The cluster's builds bucket (`{project}-kn-{cluster}-builds`).
    pub fn builds_bucket(&self) -> &str {
        &self.names.builds_bucket
    }

    /// Write a kubeconfig for the cluster, in the configured namespace.
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        self.cluster.write_kubeconfig(path, &self.config.namespace)
    }

    /// The environment that points the `kinetic` CLI at this project, given
    /// the kubeconfig written at `kubeconfig`: the cluster, the jobs bucket
    /// on the fake GCS server (which the runner reads too), and Cloud Build
    /// for images (bundled images are built there, from the builds bucket).
    pub fn cli_env(&self, kubeconfig: &Path) -> Vec<(String, String)> {
        let gcs = self.gcs.endpoint();
        let cloud_build = self.cloud_build.endpoint();
        [
            (vars::KUBECONFIG, kubeconfig.display().to_string()),
            (vars::PROJECT, self.config.project.clone()),
            (vars::ZONE, self.config.zone.clone()),
            (vars::CLUSTER, self.config.cluster.clone()),
            (vars::NAMESPACE, self.config.namespace.clone()),
            (vars::STORE_URL, format!("gs://{}", self.names.jobs_bucket)),
            (vars::GCS_ENDPOINT, gcs),
            (vars::CLOUDBUILD_ENDPOINT, cloud_build.clone()),
            (vars::ARTIFACTREGISTRY_ENDPOINT, cloud_build),
            (vars::ACCESS_TOKEN, Self::ACCESS_TOKEN.to_owned()),
            ("KINETIC_FAKE_K8S_URL", self.cluster.url().to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }
}
