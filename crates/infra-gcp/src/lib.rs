//! # kinetic-infra-gcp
//!
//! The Google Cloud side of `kinetic up`, `down`, `status`, `pool` and
//! `doctor`: [`GcpInfra`] reads what exists back from the cloud's APIs
//! into a [`crate::model::Observed`] ([`GcpInfra::observe`]) and
//! carries out the plan `crate::model` makes from it
//! ([`GcpInfra::execute`]). There is no state file: the cloud is the state,
//! so a run that stopped midway is finished by running it again.
//!
//! - REST, over the one HTTP stack (`reqwest`, rustls with aws-lc-rs) and
//!   the shared token source: Service Usage (APIs), Cloud Storage's JSON
//!   API (buckets, their lifecycle rule, labels and IAM policy), Artifact
//!   Registry (the repository and its policy), IAM (service accounts and
//!   their policies), Resource Manager (the project's policy, read,
//!   modified and written back with its etag), Kubernetes Engine (the
//!   cluster and node pools, long-running operations polled with a
//!   timeout and progress). Request bodies are pure ([`request`]).
//!   Failed calls are retried under one `kinetic_core::retry` policy
//!   ([`GcpInfraConfig::retry`]) deciding as every Google adapter does
//!   (`kinetic_gcp_common::retry`); operations are polled with its
//!   [`Backoff`] ([`GcpInfraConfig::poll`]).
//! - Inside the cluster, through `kube` with the caller's Google token
//!   (no kubeconfig needed): the jobs' service account with its Workload
//!   Identity annotation, and published manifests (LeaderWorkerSet, the
//!   NVIDIA driver installer) applied object by object.
//! - The user's kubeconfig gets the cluster's context as `gcloud container
//!   clusters get-credentials` writes it ([`kubeconfig`]).
//!
//! ```no_run
//! # async fn demo(settings: &kinetic_core::settings::Settings) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use kinetic_infra_gcp::model::{self, Desired};
//! use kinetic_gcp_common::GcpTokenSource;
//! use kinetic_infra_gcp::{GcpInfra, GcpInfraConfig, PlainProgress};
//!
//! let desired = Desired::from_settings(settings)?;
//! let tokens = Arc::new(GcpTokenSource::application_default(&desired.buckets[0].name, None));
//! let cloud = GcpInfra::new(desired.clone(), GcpInfraConfig::default(), tokens)?;
//! let observation = cloud.observe().await;
//! let plan = model::plan_up(&desired, &observation.complete()?, None)?;
//! cloud.execute(&plan, &PlainProgress).await?;
//! # Ok(()) }
//! ```

mod doctor;
mod error;
mod execute;
mod http;
pub mod kube;
pub mod kubeconfig;
pub mod model;
mod observe;
pub mod request;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::model::{Action, Desired};
use kinetic_core::retry::{Backoff, RetryPolicy};
use kinetic_gcp_common::TokenSource;

pub use error::InfraError;

/// How every request of the infrastructure commands identifies itself, to
/// Google's APIs and to the cluster's API server (`kinetic/{version}`, as
/// the Kubernetes backends do).
pub const USER_AGENT: &str = concat!("kinetic/", env!("CARGO_PKG_VERSION"));
pub use observe::Observation;

/// Where each API is served (Google's by default; test servers otherwise).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Endpoints {
    /// Service Usage.
    pub serviceusage: String,
    /// Kubernetes Engine.
    pub container: String,
    /// IAM.
    pub iam: String,
    /// Cloud Resource Manager.
    pub resourcemanager: String,
    /// Cloud Storage (the JSON API).
    pub storage: String,
    /// Artifact Registry.
    pub artifactregistry: String,
}

impl Default for Endpoints {
    fn default() -> Self {
        Self {
            serviceusage: "https://serviceusage.googleapis.com".into(),
            container: "https://container.googleapis.com".into(),
            iam: "https://iam.googleapis.com".into(),
            resourcemanager: "https://cloudresourcemanager.googleapis.com".into(),
            storage: "https://storage.googleapis.com".into(),
            artifactregistry: "https://artifactregistry.googleapis.com".into(),
        }
    }
}

impl Endpoints {
    /// Every API at `base` (one test server serving them all).
    pub fn all_at(base: &str) -> Self {
        let b = base.trim_end_matches('/').to_owned();
        Self {
            serviceusage: b.clone(),
            container: b.clone(),
            iam: b.clone(),
            resourcemanager: b.clone(),
            storage: b.clone(),
            artifactregistry: b,
        }
    }
}

/// How [`GcpInfra`] works.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GcpInfraConfig {
    /// The APIs' endpoints.
    pub endpoints: Endpoints,
    /// The kubeconfig file the cluster's context is read from and written
    /// to (`None`: it is neither read nor written).
    pub kubeconfig: Option<PathBuf>,
    /// How long one long-running operation may take (default 45 minutes;
    /// creating a cluster takes 5–10).
    pub operation_timeout: Duration,
    /// How long-running operations (and clusters, pools, IAM catching up)
    /// are polled: the first poll after 250 ms, then waits growing by
    /// half up to 10 s, within `operation_timeout`.
    pub poll: Backoff,
    /// Retries of each API call (throttling, server errors, transport
    /// failures, `Retry-After` honoured, an API just enabled that Google
    /// has not propagated yet) and of IAM policy writes that met a
    /// concurrent change: 6 attempts, waiting 0.5 s doubling up to 8 s.
    /// A refused connection is not retried: nothing listens there.
    pub retry: RetryPolicy,
    /// Told of every call that is tried again, as it is (one line: what,
    /// why, which attempt comes); `None`: nobody is told.
    pub on_retry: Option<RetryNotice>,
}

/// Where a line saying that a call is tried again goes (e.g. the CLI's
/// stderr): "reading cluster c: Kubernetes Engine said HTTP 503 …; trying
/// again in 1s (attempt 2 of 6)".
#[derive(Clone)]
pub struct RetryNotice(Arc<dyn Fn(&str) + Send + Sync>);

impl RetryNotice {
    /// A notice that hands each line to `say`.
    pub fn new(say: impl Fn(&str) + Send + Sync + 'static) -> Self {
        Self(Arc::new(say))
    }

    /// Say `line`.
    pub fn say(&self, line: &str) {
        (self.0)(line);
    }
}

impl std::fmt::Debug for RetryNotice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RetryNotice(..)")
    }
}

impl Default for GcpInfraConfig {
    fn default() -> Self {
        Self {
            endpoints: Endpoints::default(),
            kubeconfig: None,
            operation_timeout: Duration::from_secs(45 * 60),
            poll: execute::default_poll(),
            retry: http::default_retry(),
            on_retry: None,
        }
    }
}

impl GcpInfraConfig {
    /// The same configuration with these endpoints.
    #[must_use]
    pub fn endpoints(mut self, endpoints: Endpoints) -> Self {
        self.endpoints = endpoints;
        self
    }

    /// The same configuration with this kubeconfig file.
    #[must_use]
    pub fn kubeconfig(mut self, path: impl Into<PathBuf>) -> Self {
        self.kubeconfig = Some(path.into());
        self
    }

    /// The same configuration with this operation timeout.
    #[must_use]
    pub fn operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = timeout;
        self
    }

    /// The same configuration polling operations with these waits.
    #[must_use]
    pub fn poll(mut self, poll: Backoff) -> Self {
        self.poll = poll;
        self
    }

    /// The same configuration retrying API calls under this policy.
    #[must_use]
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The same configuration telling `notice` of every call tried again.
    #[must_use]
    pub fn on_retry(mut self, notice: RetryNotice) -> Self {
        self.on_retry = Some(notice);
        self
    }
}

/// What a caller is told while a plan runs.
pub trait Progress: Send + Sync {
    /// Action `index` (0-based) of `total` starts.
    fn started(&self, action: &Action, index: usize, total: usize);
    /// Still waiting on `what` (a long-running operation), in `status`,
    /// for `elapsed` so far.
    fn waiting(&self, what: &str, status: &str, elapsed: Duration);
    /// The action finished after `elapsed`.
    fn finished(&self, action: &Action, elapsed: Duration);
}

/// Progress as plain lines on stderr.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlainProgress;

impl Progress for PlainProgress {
    fn started(&self, action: &Action, index: usize, total: usize) {
        eprintln!("[{}/{total}] {}", index + 1, action.describe());
    }

    fn waiting(&self, what: &str, status: &str, elapsed: Duration) {
        eprintln!("  waiting for {what}: {status} ({}s)", elapsed.as_secs());
    }

    fn finished(&self, _action: &Action, elapsed: Duration) {
        eprintln!("  done in {:.1}s", elapsed.as_secs_f64());
    }
}

/// A cluster's infrastructure on Google Cloud: observed and provisioned.
#[derive(Debug, Clone)]
pub struct GcpInfra {
    desired: Desired,
    config: GcpInfraConfig,
    rest: http::Rest,
}

impl GcpInfra {
    /// The infrastructure `desired`, reached with `config` and tokens from
    /// `tokens`.
    ///
    /// # Errors
    /// [`InfraError::Other`] when the HTTP client cannot be built.
    pub fn new(
        desired: Desired,
        config: GcpInfraConfig,
        tokens: Arc<dyn TokenSource>,
    ) -> Result<Self, InfraError> {
        let rest = http::Rest::new(tokens, &desired.target.project, config.retry)?
            .with_notice(config.on_retry.clone());
        Ok(Self {
            desired,
            config,
            rest,
        })
    }

    /// What it provisions.
    pub fn desired(&self) -> &Desired {
        &self.desired
    }

    /// Get a token once, before anything is asked of the APIs: without
    /// credentials every call of [`GcpInfra::observe`] would look for them
    /// again (the metadata server included), one after the other.
    ///
    /// # Errors
    /// [`InfraError::PermissionDenied`] saying why there is no token and
    /// how to get credentials.
    pub async fn check_credentials(&self) -> Result<(), InfraError> {
        self.rest.token().await.map(drop)
    }
}
