//! The Kubernetes client: given, or read from a kubeconfig when first used
//! (context choice, user agent).

use std::path::{Path, PathBuf};

use kinetic_core::ports::BackendError;
use tokio::sync::OnceCell;

/// What the backends tell the API server they are: `kinetic/{version}`.
pub const USER_AGENT: &str = concat!("kinetic/", env!("CARGO_PKG_VERSION"));

/// Where a backend gets its Kubernetes client.
#[derive(Clone)]
enum ClientSource {
    Given,
    Kubeconfig {
        path: Option<PathBuf>,
        context: Option<String>,
    },
}

/// A Kubernetes client made once, on first use: the one given, or the
/// one a kubeconfig describes. Building it does no IO.
pub struct LazyClient {
    source: ClientSource,
    client: OnceCell<kube::Client>,
}

impl std::fmt::Debug for LazyClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("LazyClient");
        match &self.source {
            ClientSource::Given => d.field("source", &"given kube::Client"),
            ClientSource::Kubeconfig { path, context } => {
                d.field("kubeconfig", path).field("context", context)
            }
        };
        d.field("connected", &self.client.initialized()).finish()
    }
}

impl LazyClient {
    /// This client.
    pub fn given(client: kube::Client) -> Self {
        Self {
            source: ClientSource::Given,
            client: OnceCell::new_with(Some(client)),
        }
    }

    /// The client of `context` (else the current one) in the kubeconfig at
    /// `path` (else `KUBECONFIG`, else `~/.kube/config`), read when first
    /// used.
    pub fn from_kubeconfig(path: Option<PathBuf>, context: Option<String>) -> Self {
        Self {
            source: ClientSource::Kubeconfig { path, context },
            client: OnceCell::new(),
        }
    }

    /// The client, made now if it was not yet.
    pub async fn get(&self) -> Result<kube::Client, BackendError> {
        self.client
            .get_or_try_init(|| async {
                match &self.source {
                    ClientSource::Given => Err(BackendError::other(
                        "the given Kubernetes client is missing".to_owned(),
                    )),
                    ClientSource::Kubeconfig { path, context } => {
                        let config = kube_config(path.as_deref(), context.as_deref()).await?;
                        kube::Client::try_from(config).map_err(|e| {
                            BackendError::other(format!("cannot build a Kubernetes client: {e}"))
                                .with_source(e)
                        })
                    }
                }
            })
            .await
            .cloned()
    }
}

/// The client configuration of `context` (else the current one) in the
/// kubeconfig at `path` (else `KUBECONFIG`'s files merged, else
/// `~/.kube/config`), identifying itself as [`USER_AGENT`]. A context the
/// kubeconfig lacks is an error naming the contexts it has and how to add
/// the cluster's.
pub async fn kube_config(
    path: Option<&Path>,
    context: Option<&str>,
) -> Result<kube::Config, BackendError> {
    let location = || {
        path.map_or_else(
            || "KUBECONFIG / ~/.kube/config".to_owned(),
            |p| p.display().to_string(),
        )
    };
    let read = match path {
        Some(p) => kube::config::Kubeconfig::read_from(p),
        None => kube::config::Kubeconfig::read(),
    };
    let kubeconfig = read.map_err(|e| {
        BackendError::invalid_input(format!(
            "cannot read the kubeconfig ({}): {e}; for GKE run `gcloud container clusters get-credentials CLUSTER --zone ZONE --project PROJECT`",
            location()
        ))
        .with_source(e)
    })?;
    if let Some(wanted) = context
        && !kubeconfig.contexts.iter().any(|c| c.name == wanted)
    {
        let have: Vec<&str> = kubeconfig
            .contexts
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        let fix = match wanted
            .strip_prefix("gke_")
            .map(|r| r.splitn(3, '_').collect::<Vec<_>>())
        {
            Some(parts) if parts.len() == 3 => format!(
                "run `gcloud container clusters get-credentials {} --zone {} --project {}`",
                parts[2], parts[1], parts[0]
            ),
            _ => "add it (or choose another with KINETIC_KUBE_CONTEXT)".to_owned(),
        };
        return Err(BackendError::invalid_input(format!(
            "the kubeconfig ({}) has no context '{wanted}' (it has: {}); {fix}, or set KINETIC_KUBE_CONTEXT to the context to use",
            location(),
            if have.is_empty() {
                "none".to_owned()
            } else {
                have.join(", ")
            }
        )));
    }
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_owned),
        ..Default::default()
    };
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| {
            BackendError::invalid_input(format!(
                "cannot load the Kubernetes configuration ({}): {e}; for GKE run `gcloud container clusters get-credentials CLUSTER --zone ZONE --project PROJECT`",
                location()
            ))
            .with_source(e)
        })?;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(USER_AGENT),
    ));
    Ok(config)
}
