//! The adapter's errors, by what the caller does next: fix the input,
//! fix a permission or enable an API, wait and retry, or read the cloud's
//! own message. Each keeps what the cloud said.

use std::time::Duration;

/// Why provisioning (or reading) the infrastructure failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InfraError {
    /// The request was refused as invalid (a name taken, a bad value).
    #[error("{message}")]
    InvalidInput {
        /// What, and what the cloud said.
        message: String,
    },
    /// The caller lacks a permission or credentials, or an API is off.
    #[error("{message}")]
    PermissionDenied {
        /// What, which permission or API, and how to get it.
        message: String,
    },
    /// The service could not be reached or was overloaded, after retries.
    #[error("{message}")]
    Unavailable {
        /// What, and the last failure.
        message: String,
    },
    /// A long-running operation ended in error.
    #[error("{what} failed: {message}")]
    OperationFailed {
        /// What it was doing.
        what: String,
        /// The operation's error.
        message: String,
    },
    /// A long-running operation did not finish in time.
    #[error("{what} did not finish within {}s; it may still be running: run the command again to wait for it (KINETIC_OPERATION_TIMEOUT sets the limit)", .after.as_secs())]
    Timeout {
        /// What it was doing.
        what: String,
        /// The limit.
        after: Duration,
    },
    /// Kubernetes refused or failed a call on the cluster.
    #[error("{message}")]
    Kube {
        /// What, and what the API server said.
        message: String,
    },
    /// The kubeconfig could not be read or written.
    #[error("{message}")]
    Kubeconfig {
        /// Which file, and why.
        message: String,
    },
    /// Anything else (an answer that makes no sense).
    #[error("{message}")]
    Other {
        /// What happened.
        message: String,
    },
}

impl InfraError {
    /// True when the same call may succeed later (overload, outage,
    /// timeout), as opposed to an answer that stays the same.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable { .. } | Self::Timeout { .. })
    }

    /// True when the user's input is at fault.
    pub fn is_invalid_input(&self) -> bool {
        matches!(self, Self::InvalidInput { .. })
    }

    pub(crate) fn other(message: impl Into<String>) -> Self {
        Self::Other {
            message: message.into(),
        }
    }
}

impl From<crate::model::InfraError> for InfraError {
    fn from(e: crate::model::InfraError) -> Self {
        Self::InvalidInput {
            message: e.to_string(),
        }
    }
}
