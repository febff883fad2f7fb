//! The environment variables settings are read from, as constants: each
//! is the variable the table of settings ([`super::KEYS`]) gives its
//! setting, so it is spelled once.

use super::SettingKey;

/// GCP project.
pub const PROJECT: &str = SettingKey::Project.env_var();
/// GCP zone.
pub const ZONE: &str = SettingKey::Zone.env_var();
/// GKE cluster.
pub const CLUSTER: &str = SettingKey::Cluster.env_var();
/// The kubeconfig context the gke backend uses (default: the configured
/// cluster's, `gke_{project}_{zone}_{cluster}`, else the current one).
pub const KUBE_CONTEXT: &str = SettingKey::KubeContext.env_var();
/// Kubernetes namespace.
pub const NAMESPACE: &str = SettingKey::Namespace.env_var();
/// Profile to use instead of the stored current one.
pub const PROFILE: &str = SettingKey::Profile.env_var();
/// Path of the profiles file instead of `~/.kinetic/profiles.json`.
pub const PROFILES_FILE: &str = SettingKey::ProfilesFile.env_var();
/// Where jobs write outputs.
pub const OUTPUT_DIR: &str = SettingKey::OutputDir.env_var();
/// Repository of the prebuilt base images.
pub const BASE_IMAGE_REPO: &str = SettingKey::BaseImageRepo.env_var();
/// Last fallback for the project (Google's own convention).
pub const GOOGLE_CLOUD_PROJECT: &str = SettingKey::Project.info().vars[1];
/// The package root, instead of detecting it.
pub const PACKAGE_ROOT: &str = SettingKey::PackageRoot.env_var();
/// `1` keeps `.venv`, `node_modules` and the like in the packed project.
pub const NO_DEFAULT_EXCLUDES: &str = SettingKey::DefaultExcludes.env_var();
/// Size (MiB) of a packed project above which a warning is shown; `0` disables it.
pub const CONTEXT_SIZE_WARN_MB: &str = SettingKey::ContextSizeWarnBytes.env_var();
/// Largest total size (MiB) a packed project may expand to in the job.
pub const CONTEXT_MAX_MB: &str = SettingKey::ContextMaxBytes.env_var();
/// Most entries a packed project may hold.
pub const CONTEXT_MAX_FILES: &str = SettingKey::ContextMaxFiles.env_var();
/// Largest expansion ratio (expanded size over archive size) of a packed project.
pub const CONTEXT_MAX_RATIO: &str = SettingKey::ContextMaxRatio.env_var();
/// The backend for jobs that name none.
pub const BACKEND: &str = SettingKey::Backend.env_var();
/// The jobs store URL.
pub const STORE_URL: &str = SettingKey::StoreUrl.env_var();
/// A GCS endpoint used without authentication (tests, emulators); the
/// runner reads the same variable.
pub const GCS_ENDPOINT: &str = SettingKey::GcsEndpoint.env_var();
/// The file Application Default Credentials start from (Google's variable).
pub const GOOGLE_APPLICATION_CREDENTIALS: &str = SettingKey::ApplicationCredentials.env_var();
/// One image every job runs in, instead of resolving one.
pub const IMAGE: &str = SettingKey::Image.env_var();
/// The builds bucket's store URL.
pub const BUILDS_STORE_URL: &str = SettingKey::BuildsStoreUrl.env_var();
/// Cloud Build endpoint (test servers).
pub const CLOUDBUILD_ENDPOINT: &str = SettingKey::CloudbuildEndpoint.env_var();
/// Artifact Registry endpoint (test servers).
pub const ARTIFACTREGISTRY_ENDPOINT: &str = SettingKey::ArtifactregistryEndpoint.env_var();
/// Kubernetes Engine (Container) API endpoint (test servers).
pub const CONTAINER_ENDPOINT: &str = SettingKey::ContainerEndpoint.env_var();
/// IAM API endpoint (test servers).
pub const IAM_ENDPOINT: &str = SettingKey::IamEndpoint.env_var();
/// Cloud Resource Manager API endpoint (test servers).
pub const RESOURCEMANAGER_ENDPOINT: &str = SettingKey::ResourcemanagerEndpoint.env_var();
/// Service Usage API endpoint (test servers).
pub const SERVICEUSAGE_ENDPOINT: &str = SettingKey::ServiceusageEndpoint.env_var();
/// Where `kinetic up` fetches the LeaderWorkerSet manifests.
pub const LWS_MANIFESTS_URL: &str = SettingKey::LwsManifestsUrl.env_var();
/// Where `kinetic up` and `pool add` fetch the NVIDIA driver installer manifest.
pub const NVIDIA_DRIVER_MANIFEST_URL: &str = SettingKey::NvidiaDriverManifestUrl.env_var();
/// Seconds `kinetic up`, `down` and `pool` wait for one cloud operation.
pub const OPERATION_TIMEOUT: &str = SettingKey::OperationTimeout.env_var();
/// The Compute Engine reservation `kinetic pool add` consumes.
pub const RESERVATION: &str = SettingKey::Reservation.env_var();
/// A bearer token for the Google APIs, used as is.
pub const ACCESS_TOKEN: &str = SettingKey::AccessToken.env_var();
/// Seconds a job may stay pending for a blocking reason on Kubernetes.
pub const PENDING_DEADLINE: &str = SettingKey::PendingDeadline.env_var();
/// Where the local backend keeps its state.
pub const LOCAL_ROOT: &str = SettingKey::LocalRoot.env_var();
/// Jobs the local backend runs at once.
pub const LOCAL_MAX_CONCURRENT: &str = SettingKey::LocalMaxConcurrent.env_var();
/// GPUs the local backend hands out (devices `0..N`), instead of counting
/// them with `nvidia-smi`; `0` declares a host without GPUs.
pub const LOCAL_GPUS: &str = SettingKey::LocalGpus.env_var();
/// The kubeconfig file(s) (Kubernetes' variable; `:`-separated).
pub const KUBECONFIG: &str = SettingKey::Kubeconfig.env_var();
/// The user's home directory.
pub const HOME: &str = SettingKey::Home.env_var();
