//! The table of settings: every setting the program reads, once, with its
//! name, the environment variables it is read from, what applies when no
//! source gives it, what it is, and whether its value is a secret.
//!
//! Resolution ([`Settings::resolve`](super::Settings::resolve)) reads each
//! setting's variables from here, [`Settings::entries`](super::Settings::entries)
//! (what `kinetic config` shows) lists the table's settings in its order,
//! and the settings table of `docs/configuration.md` is
//! [`markdown_table`], checked by a test to be up to date. A
//! [`SettingKey`] prints as its name and parses from its name or its
//! first variable:
//!
//! ```
//! use kinetic_core::settings::SettingKey;
//!
//! let key: SettingKey = "KINETIC_ZONE".parse()?;
//! assert_eq!(key, SettingKey::Zone);
//! assert_eq!(key.as_ref(), "zone");
//! assert_eq!(key.var(), Some("KINETIC_ZONE"));
//! assert_eq!(key.info().default, "`us-central1-a`");
//! assert!(SettingKey::AccessToken.info().secret);
//! assert!("zones".parse::<SettingKey>().is_err());
//! # Ok::<(), kinetic_core::settings::UnknownSettingKey>(())
//! ```

use std::fmt;
use std::str::FromStr;

/// What the table says of one setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyInfo {
    /// The setting.
    pub key: SettingKey,
    /// Its name (`zone`, `store_url`): the key of `kinetic config --json`.
    pub name: &'static str,
    /// The environment variables it is read from, first wins (an empty
    /// one counts as unset); none for a setting derived from others.
    pub vars: &'static [&'static str],
    /// Whether the active profile gives it (after the variables).
    pub profile: bool,
    /// What applies when no argument, variable or profile gives it, in words.
    pub default: &'static str,
    /// What `kinetic config` says when it has no value (`None`: it always
    /// has one).
    pub unset: Option<&'static str>,
    /// What it is.
    pub doc: &'static str,
    /// Whether its value is a secret: never shown, logged or stored.
    pub secret: bool,
    /// Whether [`Settings::entries`](super::Settings::entries) lists it
    /// (`false` for what `kinetic config` shows above the table: the
    /// profile and the profiles file; and for `HOME`, which only gives
    /// other settings their defaults).
    pub listed: bool,
}

macro_rules! setting_keys {
    ($(
        $variant:ident {
            name: $name:literal,
            vars: [$($var:expr),*],
            profile: $profile:literal,
            default: $default:expr,
            unset: $unset:expr,
            secret: $secret:literal,
            listed: $listed:literal,
            doc: $doc:literal $(,)?
        }
    ),* $(,)?) => {
        /// A setting, by name: one row of [`KEYS`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum SettingKey {
            $(
                #[doc = $doc]
                $variant,
            )*
        }

        /// Every setting, in the order `kinetic config` lists them.
        pub const KEYS: &[KeyInfo] = &[
            $(
                KeyInfo {
                    key: SettingKey::$variant,
                    name: $name,
                    vars: &[$($var),*],
                    profile: $profile,
                    default: $default,
                    unset: $unset,
                    doc: $doc,
                    secret: $secret,
                    listed: $listed,
                },
            )*
        ];
    };
}

setting_keys! {
    Profile {
        name: "profile",
        vars: ["KINETIC_PROFILE"],
        profile: false,
        default: "the profile stored as current (`kinetic profile use`)",
        unset: Some("no profile is stored as current"),
        secret: false,
        listed: false,
        doc: "The profile that gives project, zone, cluster and namespace.",
    },
    ProfilesFile {
        name: "profiles_file",
        vars: ["KINETIC_PROFILES_FILE"],
        profile: false,
        default: "`~/.kinetic/profiles.json`",
        unset: Some("needs HOME or KINETIC_PROFILES_FILE"),
        secret: false,
        listed: false,
        doc: "The profiles file, shared with Kinetic.",
    },
    Home {
        name: "home",
        vars: ["HOME"],
        profile: false,
        default: "none: the local root, the kubeconfig and the profiles file then need their own variables",
        unset: Some("the paths that default under it need their own variables"),
        secret: false,
        listed: false,
        doc: "The home directory, under which the local root, the kubeconfig and the profiles file default.",
    },
    Project {
        name: "project",
        vars: ["KINETIC_PROJECT", "GOOGLE_CLOUD_PROJECT"],
        profile: true,
        default: "none: required for the cluster's buckets, registry and images",
        unset: Some("required for the cluster's buckets, registry and images"),
        secret: false,
        listed: true,
        doc: "The GCP project (`GOOGLE_CLOUD_PROJECT` comes after the profile).",
    },
    Zone {
        name: "zone",
        vars: ["KINETIC_ZONE"],
        profile: true,
        default: "`us-central1-a`",
        unset: None,
        secret: false,
        listed: true,
        doc: "The GCP zone.",
    },
    Cluster {
        name: "cluster",
        vars: ["KINETIC_CLUSTER"],
        profile: true,
        default: "`kinetic-cluster`",
        unset: None,
        secret: false,
        listed: true,
        doc: "The GKE cluster.",
    },
    Namespace {
        name: "namespace",
        vars: ["KINETIC_NAMESPACE"],
        profile: true,
        default: "`default`",
        unset: None,
        secret: false,
        listed: true,
        doc: "The Kubernetes namespace.",
    },
    OutputDir {
        name: "output_dir",
        vars: ["KINETIC_OUTPUT_DIR"],
        profile: false,
        default: "outputs/{job_id} in the jobs store",
        unset: Some("outputs/{job_id} in the jobs store"),
        secret: false,
        listed: true,
        doc: "Where jobs write their outputs.",
    },
    BaseImageRepo {
        name: "base_image_repo",
        vars: ["KINETIC_BASE_IMAGE_REPO"],
        profile: false,
        default: "`kinetic`",
        unset: None,
        secret: false,
        listed: true,
        doc: "The repository of the prebuilt base images.",
    },
    Backend {
        name: "backend",
        vars: ["KINETIC_BACKEND"],
        profile: false,
        default: "`local`",
        unset: None,
        secret: false,
        listed: true,
        doc: "The backend for jobs that name none.",
    },
    AcceleratorBackend {
        name: "accelerator_backend",
        vars: [],
        profile: false,
        default: "`gke` when a project is configured, else the backend setting",
        unset: Some("the backend setting: no cluster is configured for GPU and TPU jobs"),
        secret: false,
        listed: true,
        doc: "Where GPU and TPU jobs go when no backend is named (derived).",
    },
    StoreUrl {
        name: "store_url",
        vars: ["KINETIC_STORE_URL"],
        profile: false,
        default: "`file://{local_root}/store` for local jobs, the cluster's jobs bucket for cluster jobs",
        unset: Some("local jobs need HOME or KINETIC_LOCAL_ROOT; cluster jobs a project or KINETIC_STORE_URL=gs://BUCKET"),
        secret: false,
        listed: true,
        doc: "The jobs store of the configured backend (`file:///dir`, `memory://`, `gs://bucket[/prefix]`, or a bare `gs://` for the cluster's jobs bucket).",
    },
    ClusterStoreUrl {
        name: "cluster_store_url",
        vars: [],
        profile: false,
        default: "`gs://{project}-kn-{cluster}-jobs`, or a `gs://` store_url",
        unset: Some("needs a project, or KINETIC_STORE_URL=gs://BUCKET"),
        secret: false,
        listed: true,
        doc: "The jobs store of cluster (gke, pathways) jobs (derived).",
    },
    GcsEndpoint {
        name: "gcs_endpoint",
        vars: ["KINETIC_GCS_ENDPOINT"],
        profile: false,
        default: "Google's",
        unset: Some("Google's"),
        secret: false,
        listed: true,
        doc: "A GCS endpoint used without authentication (tests, emulators); the runner reads it too.",
    },
    ApplicationCredentials {
        name: "application_credentials",
        vars: ["GOOGLE_APPLICATION_CREDENTIALS"],
        profile: false,
        default: "gcloud's file, then the metadata server",
        unset: Some("gcloud's file, then the metadata server"),
        secret: false,
        listed: true,
        doc: "The file Application Default Credentials start from.",
    },
    Kubeconfig {
        name: "kubeconfig",
        vars: ["KUBECONFIG"],
        profile: false,
        default: "`~/.kube/config`",
        unset: Some("no kubeconfig: no gke backend"),
        secret: false,
        listed: true,
        doc: "The kubeconfig file(s), `:`-separated.",
    },
    KubeContext {
        name: "kube_context",
        vars: ["KINETIC_KUBE_CONTEXT"],
        profile: false,
        default: "`gke_{project}_{zone}_{cluster}` when a project is configured, else the kubeconfig's current context",
        unset: Some("the kubeconfig's current context"),
        secret: false,
        listed: true,
        doc: "The kubeconfig context the cluster backends use; a GKE context of another cluster is refused.",
    },
    Image {
        name: "image",
        vars: ["KINETIC_IMAGE"],
        profile: false,
        default: "resolved per job",
        unset: Some("resolved per job"),
        secret: false,
        listed: true,
        doc: "One image every job runs in.",
    },
    BuildsStoreUrl {
        name: "builds_store_url",
        vars: ["KINETIC_BUILDS_STORE_URL"],
        profile: false,
        default: "`gs://{project}-kn-{cluster}-builds`",
        unset: Some("needs a project"),
        secret: false,
        listed: true,
        doc: "The store image builds upload their contexts to.",
    },
    CloudbuildEndpoint {
        name: "cloudbuild_endpoint",
        vars: ["KINETIC_CLOUDBUILD_ENDPOINT"],
        profile: false,
        default: "Google's",
        unset: Some("Google's"),
        secret: false,
        listed: true,
        doc: "The Cloud Build API endpoint (test servers).",
    },
    ArtifactregistryEndpoint {
        name: "artifactregistry_endpoint",
        vars: ["KINETIC_ARTIFACTREGISTRY_ENDPOINT"],
        profile: false,
        default: "Google's",
        unset: Some("Google's"),
        secret: false,
        listed: true,
        doc: "The Artifact Registry API endpoint (test servers).",
    },
    AccessToken {
        name: "access_token",
        vars: ["KINETIC_ACCESS_TOKEN"],
        profile: false,
        default: "Application Default Credentials",
        unset: Some("Application Default Credentials"),
        secret: true,
        listed: true,
        doc: "A bearer token for the Google APIs, used as is.",
    },
    ContainerEndpoint {
        name: "container_endpoint",
        vars: ["KINETIC_CONTAINER_ENDPOINT"],
        profile: false,
        default: "Google's",
        unset: Some("Google's"),
        secret: false,
        listed: true,
        doc: "The Kubernetes Engine API endpoint (test servers).",
    },
    IamEndpoint {
        name: "iam_endpoint",
        vars: ["KINETIC_IAM_ENDPOINT"],
        profile: false,
        default: "Google's",
        unset: Some("Google's"),
        secret: false,
        listed: true,
        doc: "The IAM API endpoint (test servers).",
    },
    ResourcemanagerEndpoint {
        name: "resourcemanager_endpoint",
        vars: ["KINETIC_RESOURCEMANAGER_ENDPOINT"],
        profile: false,
        default: "Google's",
        unset: Some("Google's"),
        secret: false,
        listed: true,
        doc: "The Cloud Resource Manager API endpoint (test servers).",
    },
    ServiceusageEndpoint {
        name: "serviceusage_endpoint",
        vars: ["KINETIC_SERVICEUSAGE_ENDPOINT"],
        profile: false,
        default: "Google's",
        unset: Some("Google's"),
        secret: false,
        listed: true,
        doc: "The Service Usage API endpoint (test servers).",
    },
    LwsManifestsUrl {
        name: "lws_manifests_url",
        vars: ["KINETIC_LWS_MANIFESTS_URL"],
        profile: false,
        default: "the LeaderWorkerSet v0.5.1 release",
        unset: Some("the LeaderWorkerSet v0.5.1 release"),
        secret: false,
        listed: true,
        doc: "Where `kinetic up` fetches the LeaderWorkerSet manifests.",
    },
    NvidiaDriverManifestUrl {
        name: "nvidia_driver_manifest_url",
        vars: ["KINETIC_NVIDIA_DRIVER_MANIFEST_URL"],
        profile: false,
        default: "the installer GKE's documentation applies",
        unset: Some("the installer GKE's documentation applies"),
        secret: false,
        listed: true,
        doc: "Where `kinetic up` and `pool add` fetch the NVIDIA driver installer manifest.",
    },
    OperationTimeout {
        name: "operation_timeout",
        vars: ["KINETIC_OPERATION_TIMEOUT"],
        profile: false,
        default: "45 minutes per cloud operation",
        unset: Some("45 minutes per cloud operation"),
        secret: false,
        listed: true,
        doc: "Seconds `kinetic up`, `down` and `pool` wait for one cloud operation.",
    },
    Reservation {
        name: "reservation",
        vars: ["KINETIC_RESERVATION"],
        profile: false,
        default: "new node pools consume no reservation",
        unset: Some("new node pools consume no reservation"),
        secret: false,
        listed: true,
        doc: "The Compute Engine reservation new node pools consume.",
    },
    PackageRoot {
        name: "package_root",
        vars: ["KINETIC_PACKAGE_ROOT"],
        profile: false,
        default: "detected from the entrypoint",
        unset: Some("detected from the entrypoint"),
        secret: false,
        listed: true,
        doc: "The package root of the user's project.",
    },
    DefaultExcludes {
        name: "default_excludes",
        vars: ["KINETIC_NO_DEFAULT_EXCLUDES"],
        profile: false,
        default: "`true`; `KINETIC_NO_DEFAULT_EXCLUDES=1` makes it `false`",
        unset: None,
        secret: false,
        listed: true,
        doc: "Whether packing leaves out `.venv`, `node_modules` and the like.",
    },
    ContextSizeWarnBytes {
        name: "context_size_warn_bytes",
        vars: ["KINETIC_CONTEXT_SIZE_WARN_MB"],
        profile: false,
        default: "100 MiB",
        unset: None,
        secret: false,
        listed: true,
        doc: "Packed projects larger than this get a warning (the variable is in MiB; `0` disables it; a value that is no number is reported and the default used).",
    },
    ContextMaxBytes {
        name: "context_max_bytes",
        vars: ["KINETIC_CONTEXT_MAX_MB"],
        profile: false,
        default: "4096 MiB",
        unset: None,
        secret: false,
        listed: true,
        doc: "What a packed project may expand to in the job (the variable is in MiB), checked before uploading and by the runner before extracting.",
    },
    ContextMaxFiles {
        name: "context_max_files",
        vars: ["KINETIC_CONTEXT_MAX_FILES"],
        profile: false,
        default: "50000",
        unset: None,
        secret: false,
        listed: true,
        doc: "How many entries a packed project may hold.",
    },
    ContextMaxRatio {
        name: "context_max_ratio",
        vars: ["KINETIC_CONTEXT_MAX_RATIO"],
        profile: false,
        default: "200",
        unset: None,
        secret: false,
        listed: true,
        doc: "How far a packed project may expand (extracted size over archive size).",
    },
    PendingDeadline {
        name: "pending_deadline",
        vars: ["KINETIC_PENDING_DEADLINE"],
        profile: false,
        default: "the backend's default (900 s on gke)",
        unset: Some("the backend's default (900 s on gke)"),
        secret: false,
        listed: true,
        doc: "Seconds a Kubernetes job may stay pending for a blocking reason.",
    },
    LocalRoot {
        name: "local_root",
        vars: ["KINETIC_LOCAL_ROOT"],
        profile: false,
        default: "`~/.kinetic/local`",
        unset: Some("needs HOME or KINETIC_LOCAL_ROOT"),
        secret: false,
        listed: true,
        doc: "Where the local backend keeps its state (an absolute path).",
    },
    LocalMaxConcurrent {
        name: "local_max_concurrent",
        vars: ["KINETIC_LOCAL_MAX_CONCURRENT"],
        profile: false,
        default: "one per core",
        unset: Some("one per core"),
        secret: false,
        listed: true,
        doc: "Jobs the local backend runs at once (1 to 1024).",
    },
    LocalGpus {
        name: "local_gpus",
        vars: ["KINETIC_LOCAL_GPUS"],
        profile: false,
        default: "counted with nvidia-smi -L",
        unset: Some("counted with nvidia-smi -L"),
        secret: false,
        listed: true,
        doc: "GPUs the local backend hands out (devices `0..N`; `0` for none).",
    },
}

impl SettingKey {
    /// Every setting, in table order.
    pub fn all() -> impl Iterator<Item = SettingKey> {
        KEYS.iter().map(|info| info.key)
    }

    /// What the table says of this setting.
    pub const fn info(self) -> &'static KeyInfo {
        &KEYS[self as usize]
    }

    /// The setting's name (`zone`).
    pub const fn name(self) -> &'static str {
        self.info().name
    }

    /// The first variable it is read from, if any.
    pub const fn var(self) -> Option<&'static str> {
        match self.info().vars {
            [first, ..] => Some(first),
            [] => None,
        }
    }

    /// The first variable it is read from, for a setting the table gives
    /// one (checked when the program is compiled: `vars` uses it in
    /// constants).
    ///
    /// # Panics
    /// For a derived setting, which has no variable; in a constant, that
    /// is a compile error.
    pub const fn env_var(self) -> &'static str {
        match self.var() {
            Some(var) => var,
            None => panic!("a derived setting has no variable"),
        }
    }
}

impl AsRef<str> for SettingKey {
    fn as_ref(&self) -> &str {
        self.name()
    }
}

impl fmt::Display for SettingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no setting's (parsing a [`SettingKey`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown setting '{given}': expected a setting's name or variable ({expected})")]
#[non_exhaustive]
pub struct UnknownSettingKey {
    /// What was given.
    pub given: String,
    /// The names accepted, comma-separated.
    pub expected: String,
}

impl FromStr for SettingKey {
    type Err = UnknownSettingKey;

    /// A setting by its name (`zone`) or one of its variables (`KINETIC_ZONE`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KEYS.iter()
            .find(|info| info.name == s || info.vars.contains(&s))
            .map(|info| info.key)
            .ok_or_else(|| UnknownSettingKey {
                given: s.to_owned(),
                expected: KEYS
                    .iter()
                    .map(|info| info.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

/// The table as the settings section of `docs/configuration.md` shows it:
/// one row per setting with its variables, whether a profile gives it,
/// its default and what it is.
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| setting | variables | profile | default | what it is |\n|---|---|---|---|---|\n",
    );
    for info in KEYS {
        let vars = if info.vars.is_empty() {
            "(derived)".to_owned()
        } else {
            info.vars
                .iter()
                .map(|v| format!("`{v}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let secret = if info.secret {
            " Secret: never shown."
        } else {
            ""
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {}{} |\n",
            info.name,
            vars,
            if info.profile { "yes" } else { "" },
            info.default.replace('|', "\\|"),
            info.doc.replace('|', "\\|"),
            secret,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_row_is_its_keys_and_names_and_variables_are_unique() {
        let mut names = std::collections::BTreeSet::new();
        let mut vars = std::collections::BTreeSet::new();
        for (index, info) in KEYS.iter().enumerate() {
            assert_eq!(info.key as usize, index, "{}", info.name);
            assert_eq!(info.key.info(), info);
            assert!(names.insert(info.name), "{} twice", info.name);
            for var in info.vars {
                assert!(vars.insert(*var), "{var} twice");
            }
            assert_eq!(info.name.parse::<SettingKey>(), Ok(info.key));
            if let Some(var) = info.key.var() {
                assert_eq!(var.parse::<SettingKey>(), Ok(info.key));
            }
            assert!(!info.doc.is_empty() && !info.default.is_empty());
        }
    }

    #[test]
    fn an_unknown_name_is_an_error_listing_the_names() {
        let err = "zones".parse::<SettingKey>().unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("unknown setting 'zones': expected a setting's name or variable (profile, profiles_file, home, project, zone,"),
            "{text}"
        );
        assert!(text.ends_with("local_gpus)"), "{text}");
    }

    #[test]
    fn the_defaults_in_words_are_the_typed_defaults() {
        use crate::config::{
            DEFAULT_BASE_IMAGE_REPO, DEFAULT_CLUSTER, DEFAULT_NAMESPACE, DEFAULT_ZONE,
        };
        use crate::protocol::ExtractLimits;
        for (key, value) in [
            (SettingKey::Zone, DEFAULT_ZONE),
            (SettingKey::Cluster, DEFAULT_CLUSTER),
            (SettingKey::Namespace, DEFAULT_NAMESPACE),
            (SettingKey::BaseImageRepo, DEFAULT_BASE_IMAGE_REPO),
            (SettingKey::Backend, super::super::DEFAULT_BACKEND),
        ] {
            assert_eq!(key.info().default, format!("`{value}`"));
        }
        let limits = ExtractLimits::default();
        let mib = 1024 * 1024;
        for (key, value) in [
            (
                SettingKey::ContextSizeWarnBytes,
                format!("{} MiB", crate::packaging::DEFAULT_SIZE_WARN_BYTES / mib),
            ),
            (
                SettingKey::ContextMaxBytes,
                format!("{} MiB", limits.max_bytes / mib),
            ),
            (SettingKey::ContextMaxFiles, limits.max_entries.to_string()),
            (SettingKey::ContextMaxRatio, limits.max_ratio.to_string()),
        ] {
            assert_eq!(key.info().default, value, "{key}");
        }
    }
}
