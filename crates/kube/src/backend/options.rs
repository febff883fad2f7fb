//! [`KubeOptions`]: the settings of a [`KubeBackend`].

use std::sync::Arc;
use std::time::Duration;

#[cfg(doc)]
use kinetic_core::ports::CleanupWait;
use kinetic_core::ports::ObjectStore;
use kinetic_core::retry::{Backoff, RetryPolicy};

#[cfg(doc)]
use super::KubeBackend;
use crate::pod::ManifestOptions;

/// Settings of a [`KubeBackend`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct KubeOptions {
    /// Namespace `list` looks in (jobs themselves use their record's).
    pub namespace: String,
    /// Manifest settings (service account, TTL, default pending deadline…).
    pub manifest: ManifestOptions,
    /// Poll interval of `follow_logs`, and the first pause of `cleanup`'s
    /// polls when it cannot watch the object (default 250 ms; the pauses
    /// grow up to the call's [`CleanupWait::poll_interval`]).
    pub poll_interval: Duration,
    /// Attempts at writing a job's final state (cancel, an expired pending
    /// deadline) when the object keeps changing under the write (409 on its
    /// resource version): 5 attempts, 50 ms doubling, with jitter.
    pub conflict_retry: RetryPolicy,
    /// The store the jobs' runners write to, where the backend reads the
    /// markers of a batch in blocks (and writes its stop marker). Without
    /// it the backend takes no batch in blocks (its capabilities say so).
    pub store: Option<Arc<dyn ObjectStore>>,
}

impl Default for KubeOptions {
    fn default() -> Self {
        Self {
            namespace: "default".into(),
            manifest: ManifestOptions::default(),
            poll_interval: Duration::from_millis(250),
            conflict_retry: RetryPolicy::new(
                5,
                Backoff::new(Duration::from_millis(50), Duration::from_secs(1)).with_jitter(0.5),
            ),
            store: None,
        }
    }
}

impl KubeOptions {
    /// Options for `namespace` with every other default.
    pub fn new(namespace: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            ..Self::default()
        }
    }

    /// The same options with another default pending deadline (jobs that
    /// set `Deadlines::pending` keep theirs).
    pub fn pending_deadline(mut self, deadline: Duration) -> Self {
        self.manifest.pending_deadline = deadline;
        self
    }

    /// The same options with these manifest settings.
    pub fn manifest(mut self, manifest: ManifestOptions) -> Self {
        self.manifest = manifest;
        self
    }

    /// The same options with another poll interval.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// The same options with another policy for writes that conflict
    /// with a concurrent change ([`KubeOptions::conflict_retry`]).
    pub fn conflict_retry(mut self, policy: RetryPolicy) -> Self {
        self.conflict_retry = policy;
        self
    }

    /// The same options with the jobs' store ([`KubeOptions::store`]): the
    /// backend then takes batches in blocks.
    pub fn store(mut self, store: Arc<dyn ObjectStore>) -> Self {
        self.store = Some(store);
        self
    }
}
