//! The environment variables settings are read from, each named once.

/// GCP project.
pub const PROJECT: &str = "KINETIC_PROJECT";
/// GCP zone.
pub const ZONE: &str = "KINETIC_ZONE";
/// GKE cluster.
pub const CLUSTER: &str = "KINETIC_CLUSTER";
/// The kubeconfig context the gke backend uses (default: the configured
/// cluster's, `gke_{project}_{zone}_{cluster}`, else the current one).
pub const KUBE_CONTEXT: &str = "KINETIC_KUBE_CONTEXT";
/// Kubernetes namespace.
pub const NAMESPACE: &str = "KINETIC_NAMESPACE";
/// Profile to use instead of the stored current one.
pub const PROFILE: &str = "KINETIC_PROFILE";
/// Path of the profiles file instead of `~/.kinetic/profiles.json`.
pub const PROFILES_FILE: &str = "KINETIC_PROFILES_FILE";
/// Where jobs write outputs.
pub const OUTPUT_DIR: &str = "KINETIC_OUTPUT_DIR";
/// Repository of the prebuilt base images.
pub const BASE_IMAGE_REPO: &str = "KINETIC_BASE_IMAGE_REPO";
/// Last fallback for the project (Google's own convention).
pub const GOOGLE_CLOUD_PROJECT: &str = "GOOGLE_CLOUD_PROJECT";
/// The package root, instead of detecting it.
pub const PACKAGE_ROOT: &str = "KINETIC_PACKAGE_ROOT";
/// `1` keeps `.venv`, `node_modules` and the like in the packed project.
pub const NO_DEFAULT_EXCLUDES: &str = "KINETIC_NO_DEFAULT_EXCLUDES";
/// Size (MiB) of a packed project above which a warning is shown; `0` disables it.
pub const CONTEXT_SIZE_WARN_MB: &str = "KINETIC_CONTEXT_SIZE_WARN_MB";
/// Largest total size (MiB) a packed project may expand to in the job.
pub const CONTEXT_MAX_MB: &str = "KINETIC_CONTEXT_MAX_MB";
/// Most entries a packed project may hold.
pub const CONTEXT_MAX_FILES: &str = "KINETIC_CONTEXT_MAX_FILES";
/// Largest expansion ratio (expanded size over archive size) of a packed project.
pub const CONTEXT_MAX_RATIO: &str = "KINETIC_CONTEXT_MAX_RATIO";
/// The backend for jobs that name none.
pub const BACKEND: &str = "KINETIC_BACKEND";
/// The jobs store URL.
pub const STORE_URL: &str = "KINETIC_STORE_URL";
/// A GCS endpoint used without authentication (tests, emulators); the
/// runner reads the same variable.
pub const GCS_ENDPOINT: &str = "KINETIC_GCS_ENDPOINT";
/// The file Application Default Credentials start from (Google's variable).
pub const GOOGLE_APPLICATION_CREDENTIALS: &str = "GOOGLE_APPLICATION_CREDENTIALS";
/// One image every job runs in, instead of resolving one.
pub const IMAGE: &str = "KINETIC_IMAGE";
/// The builds bucket's store URL.
pub const BUILDS_STORE_URL: &str = "KINETIC_BUILDS_STORE_URL";
/// Cloud Build endpoint (test servers).
pub const CLOUDBUILD_ENDPOINT: &str = "KINETIC_CLOUDBUILD_ENDPOINT";
/// Artifact Registry endpoint (test servers).
pub const ARTIFACTREGISTRY_ENDPOINT: &str = "KINETIC_ARTIFACTREGISTRY_ENDPOINT";
/// Kubernetes Engine (Container) API endpoint (test servers).
pub const CONTAINER_ENDPOINT: &str = "KINETIC_CONTAINER_ENDPOINT";
/// IAM API endpoint (test servers).
pub const IAM_ENDPOINT: &str = "KINETIC_IAM_ENDPOINT";
/// Cloud Resource Manager API endpoint (test servers).
pub const RESOURCEMANAGER_ENDPOINT: &str = "KINETIC_RESOURCEMANAGER_ENDPOINT";
/// Service Usage API endpoint (test servers).
pub const SERVICEUSAGE_ENDPOINT: &str = "KINETIC_SERVICEUSAGE_ENDPOINT";
/// Where `kinetic up` fetches the LeaderWorkerSet manifests.
pub const LWS_MANIFESTS_URL: &str = "KINETIC_LWS_MANIFESTS_URL";
/// Where `kinetic up` and `pool add` fetch the NVIDIA driver installer manifest.
pub const NVIDIA_DRIVER_MANIFEST_URL: &str = "KINETIC_NVIDIA_DRIVER_MANIFEST_URL";
/// Seconds `kinetic up`, `down` and `pool` wait for one cloud operation.
pub const OPERATION_TIMEOUT: &str = "KINETIC_OPERATION_TIMEOUT";
/// The Compute Engine reservation `kinetic pool add` consumes.
pub const RESERVATION: &str = "KINETIC_RESERVATION";
/// A bearer token for the Google APIs, used as is.
pub const ACCESS_TOKEN: &str = "KINETIC_ACCESS_TOKEN";
/// Seconds a job may stay pending for a blocking reason on Kubernetes.
pub const PENDING_DEADLINE: &str = "KINETIC_PENDING_DEADLINE";
/// Where the local backend keeps its state.
pub const LOCAL_ROOT: &str = "KINETIC_LOCAL_ROOT";
/// Jobs the local backend runs at once.
pub const LOCAL_MAX_CONCURRENT: &str = "KINETIC_LOCAL_MAX_CONCURRENT";
/// GPUs the local backend hands out (devices `0..N`), instead of counting
/// them with `nvidia-smi`; `0` declares a host without GPUs.
pub const LOCAL_GPUS: &str = "KINETIC_LOCAL_GPUS";
/// The kubeconfig file(s) (Kubernetes' variable; `:`-separated).
pub const KUBECONFIG: &str = "KUBECONFIG";
/// The user's home directory.
pub const HOME: &str = "HOME";
