//! # kinetic-gcp-common
//!
//! What the Google Cloud adapters of Kinetic for Rust share, so that each
//! is written once:
//!
//! - [`token`]: [`TokenSource`], the seam every REST client takes its
//!   bearer tokens from, with the production [`GcpTokenSource`]
//!   (Application Default Credentials, through `object_store`'s GCP
//!   credential chain) and [`StaticToken`] for tests and pre-issued tokens.
//! - [`google`]: [`GoogleError`], Google's JSON error body
//!   (`{"error": {"code", "message", "status", "details"}}`) parsed into
//!   what callers decide on: the canonical status, the `ErrorInfo` reasons
//!   (`SERVICE_DISABLED`, `IAM_PERMISSION_DENIED`), the permission named.
//!   It is the source of every adapter error made from an answer.
//! - [`retry`]: which answers are worth another try ([`retry::decide`],
//!   honouring `Retry-After`); the policy and the loop that runs it are
//!   `kinetic_core::retry`'s.
//!
//! ```
//! use kinetic_gcp_common::GoogleError;
//!
//! let body = br#"{"error": {"code": 403, "status": "PERMISSION_DENIED",
//!   "message": "Kubernetes Engine API has not been used in project p before or it is disabled.",
//!   "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED",
//!                "metadata": {"service": "container.googleapis.com"}}]}}"#;
//! let e = GoogleError::from_answer(403, body);
//! assert!(e.service_disabled());
//! assert_eq!(e.metadata("service"), Some("container.googleapis.com"));
//! assert!(e.to_string().starts_with("HTTP 403 PERMISSION_DENIED: Kubernetes Engine API"));
//! ```

pub mod google;
pub mod retry;
pub mod token;

pub use google::GoogleError;
pub use token::{GcpTokenSource, StaticToken, TokenError, TokenSource};
