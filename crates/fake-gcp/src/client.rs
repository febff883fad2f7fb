//! [`ClientProfile`]: what the fake project knows of the client it serves
//! (Kinetic, say) — the files its images hold, the packages of its base
//! images, the variables that point it at a project, how it names a
//! project's resources, and its default zone and namespace. The fake
//! depends on no client crate: whoever starts it fills the profile
//! (`kinetic-fake-gcp-server` fills it from `kinetic-core`).

use std::collections::BTreeMap;

/// The environment variables that point the client at a project, by
/// what each one says ([`crate::FakeGcp::cli_env`] writes them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientVars {
    /// The kubeconfig path (`KUBECONFIG`).
    pub kubeconfig: String,
    /// The project.
    pub project: String,
    /// The zone.
    pub zone: String,
    /// The cluster.
    pub cluster: String,
    /// The namespace jobs go to.
    pub namespace: String,
    /// The jobs store's URL (`gs://BUCKET`).
    pub store_url: String,
    /// The GCS endpoint; pods get it too, pointing their runner at the
    /// fake GCS server.
    pub gcs_endpoint: String,
    /// The Cloud Build endpoint.
    pub cloudbuild_endpoint: String,
    /// The Artifact Registry endpoint.
    pub artifactregistry_endpoint: String,
    /// The Kubernetes Engine endpoint.
    pub container_endpoint: String,
    /// The IAM endpoint.
    pub iam_endpoint: String,
    /// The Resource Manager endpoint.
    pub resourcemanager_endpoint: String,
    /// The Service Usage endpoint.
    pub serviceusage_endpoint: String,
    /// Where the LeaderWorkerSet manifests are fetched from.
    pub lws_manifests_url: String,
    /// Where the NVIDIA driver installer manifest is fetched from.
    pub nvidia_driver_manifest_url: String,
    /// The access token for Google APIs.
    pub access_token: String,
}

/// The names the client gives a project's resources, derived from the
/// project, zone and cluster by [`ClientProfile::naming`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectNames {
    /// The region of the zone (the jobs bucket's location).
    pub region: String,
    /// The jobs bucket.
    pub jobs_bucket: String,
    /// The builds bucket.
    pub builds_bucket: String,
    /// The Artifact Registry location (the builds bucket's location).
    pub ar_location: String,
    /// The Artifact Registry repository.
    pub ar_repository: String,
    /// The nodes' Google service account (email).
    pub node_service_account: String,
    /// The image builds' Google service account (email).
    pub build_service_account: String,
    /// The jobs' Kubernetes service account.
    pub k8s_service_account: String,
    /// The kubeconfig context of the cluster.
    pub kube_context: String,
}

/// What the fake project knows of the client it serves. There is no
/// default: a fake that guessed a client's names would pass tests the
/// client fails.
#[derive(Debug, Clone)]
pub struct ClientProfile {
    /// Files every image holds, `(path in the image, contents)`: the
    /// client's runner, say. The kubelet maps each path to a host file
    /// with those contents ([`crate::k8s::FakeClusterConfig::image_file`]).
    pub image_files: Vec<(String, String)>,
    /// The requirements the client's base images hold, by accelerator
    /// category (`cpu`, `gpu`, `tpu`); the fake Cloud Build installs them
    /// into each image's environment ([`crate::images`]).
    pub image_packages: BTreeMap<String, Vec<String>>,
    /// The client's variables.
    pub vars: ClientVars,
    /// How the client names the resources of `(project, zone, cluster)`.
    pub naming: fn(&str, &str, &str) -> ProjectNames,
    /// The zone a project's cluster is in unless told otherwise.
    pub zone: String,
    /// The namespace jobs go to unless told otherwise.
    pub namespace: String,
}
