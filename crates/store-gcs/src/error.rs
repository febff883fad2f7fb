//! `object_store` errors mapped onto the port's kinds, from their types.
//!
//! `object_store` gives typed kinds for 404, 409, 412, 403 and 401 and for
//! operations a store lacks. A request it retried to the end of its
//! `RetryConfig` (429, 408, 5xx, a broken connection) comes back as
//! `Generic`, with the status kept only in a private type. So the HTTP
//! client this crate hands `object_store` (`StatusConnector`) turns each
//! such answer into the public `HttpError` type `object_store` already
//! retries, with the answer parsed as its source ([`GoogleError`], the one
//! parser of Google's error bodies every Google adapter uses; its `code`
//! is the HTTP status); the mapping below finds one or the other in the
//! error's chain by type.
//! No message text is ever parsed.
//!
//! The original `object_store::Error` is kept as the port error's source.

use std::error::Error as StdError;

use async_trait::async_trait;
use kinetic_core::ports::StoreError;
use kinetic_gcp_common::GoogleError;
use object_store::ClientOptions;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse, HttpService,
    ReqwestConnector,
};

/// Statuses `object_store` maps to typed kinds itself; every other failed
/// answer is turned into an `HttpError` so that its status survives.
fn typed_by_object_store(status: u16) -> bool {
    matches!(status, 304 | 401 | 403 | 404 | 409 | 412)
}

/// The `HttpConnector` of every GCS store: reqwest, as `object_store`
/// builds it from the client options, behind [`StatusService`].
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct StatusConnector;

impl HttpConnector for StatusConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let inner = ReqwestConnector::default().connect(options)?;
        Ok(HttpClient::new(StatusService { inner }))
    }
}

/// Turns a failed answer whose status `object_store` does not type into an
/// `HttpError` carrying the answer, parsed ([`GoogleError`]): the source
/// of the port error, in its chain of causes (`std::error::Error::source`). Its kind keeps `object_store`'s
/// retry decision as it was: a status it retries (408, 429, 5xx) becomes
/// `Request` (always retried, as those statuses are), any other `Unknown`
/// (never retried, as those statuses are not).
#[derive(Debug)]
struct StatusService {
    inner: HttpClient,
}

#[async_trait]
impl HttpService for StatusService {
    async fn call(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        let response = self.inner.execute(request).await?;
        let status = response.status().as_u16();
        if status < 400 || typed_by_object_store(status) {
            return Ok(response);
        }
        let kind = if retried_by_object_store(status) {
            HttpErrorKind::Request
        } else {
            HttpErrorKind::Unknown
        };
        let body = response.into_body().bytes().await.unwrap_or_default();
        Err(HttpError::new(
            kind,
            GoogleError::from_answer(status, &body),
        ))
    }
}

/// The statuses `object_store`'s retry loop retries.
fn retried_by_object_store(status: u16) -> bool {
    matches!(status, 408 | 429 | 500..=599)
}

/// What the error's chain says about the failed request, found by type.
enum Failure {
    /// An answer with this status.
    Status(u16),
    /// No answer: the request failed on the way (its kind says how).
    Transport(HttpErrorKind),
    /// A local file system error.
    Io(std::io::ErrorKind),
    /// Nothing known.
    Unknown,
}

fn failure_of(err: &(dyn StdError + 'static)) -> Failure {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(s) = e.downcast_ref::<GoogleError>() {
            return Failure::Status(s.code);
        }
        if let Some(http) = e.downcast_ref::<HttpError>() {
            // The status, when the source below is ours, wins over the kind.
            if let Some(s) = http.source().and_then(|s| s.downcast_ref::<GoogleError>()) {
                return Failure::Status(s.code);
            }
            return Failure::Transport(http.kind());
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return Failure::Io(io.kind());
        }
        current = e.source();
    }
    Failure::Unknown
}

/// Map an `object_store` error about `what` (a URI) into the port's kinds.
/// `retried` says whether the store's requests go through `object_store`'s
/// retry loop (an HTTP store): a transient failure is then reported as
/// already retried.
pub(crate) fn map_error(err: object_store::Error, what: String, retried: bool) -> StoreError {
    use object_store::Error as E;
    let message = format!("{what}: {err}");
    let kind = match &err {
        E::NotFound { .. } => StoreError::not_found(what),
        E::AlreadyExists { .. } => StoreError::already_exists(what),
        E::InvalidPath { source } => {
            StoreError::invalid_input(format!("invalid object path {what}: {source}"))
        }
        E::UnknownConfigurationKey { .. } => StoreError::invalid_input(message),
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => {
            StoreError::permission_denied(message)
        }
        E::NotSupported { .. } | E::NotImplemented { .. } => StoreError::unsupported(message),
        E::Precondition { .. } => StoreError::other(format!("precondition failed for {message}")),
        _ => match failure_of(&err) {
            Failure::Status(status) if retried_by_object_store(status) => {
                unavailable(message, retried)
            }
            Failure::Status(400 | 411 | 413 | 414 | 416 | 422) => {
                StoreError::invalid_input(message)
            }
            Failure::Transport(
                HttpErrorKind::Connect
                | HttpErrorKind::Request
                | HttpErrorKind::Timeout
                | HttpErrorKind::Interrupted,
            ) => unavailable(message, retried),
            Failure::Io(kind) => map_io_kind(kind, message),
            _ => StoreError::other(message),
        },
    };
    kind.with_source(err)
}

fn unavailable(message: String, retried: bool) -> StoreError {
    StoreError::Unavailable {
        message,
        retried,
        source: None,
    }
}

/// A local I/O failure, by its kind.
fn map_io_kind(kind: std::io::ErrorKind, message: String) -> StoreError {
    use std::io::ErrorKind as K;
    match kind {
        K::NotFound => StoreError::not_found(message),
        K::PermissionDenied => StoreError::permission_denied(message),
        K::AlreadyExists => StoreError::already_exists(message),
        K::InvalidInput | K::InvalidFilename => StoreError::invalid_input(message),
        _ => StoreError::other(message),
    }
}

/// `BufWriter` reports failures as `std::io::Error` wrapping the
/// `object_store` error: map that one where it is there, else by the I/O
/// error's kind.
pub(crate) fn map_io_error(err: std::io::Error, what: &str, retried: bool) -> StoreError {
    let wraps_object_store = err
        .get_ref()
        .is_some_and(|inner| inner.is::<object_store::Error>());
    if wraps_object_store {
        return match err
            .into_inner()
            .map(|e| e.downcast::<object_store::Error>())
        {
            Some(Ok(inner)) => map_error(*inner, what.to_owned(), retried),
            Some(Err(other)) => StoreError::other(format!("{what}: {other}")).with_source(other),
            None => StoreError::other(what.to_owned()),
        };
    }
    let message = format!("{what}: {err}");
    match failure_of(&err) {
        Failure::Transport(_) | Failure::Status(_) => unavailable(message, retried),
        _ => map_io_kind(err.kind(), message),
    }
    .with_source(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generic(source: impl StdError + Send + Sync + 'static) -> object_store::Error {
        object_store::Error::Generic {
            store: "GCS",
            source: Box::new(source),
        }
    }

    #[test]
    fn statuses_and_transport_failures_pick_the_kind_from_their_types() {
        let status = |s: u16| {
            let kind = if retried_by_object_store(s) {
                HttpErrorKind::Request
            } else {
                HttpErrorKind::Unknown
            };
            generic(HttpError::new(kind, GoogleError::from_answer(s, b"x")))
        };
        for s in [503, 500, 429, 408] {
            let e = map_error(status(s), "gs://b/x".into(), true);
            assert!(e.is_retryable() && e.is_retried(), "{s}: {e:?}");
            assert!(e.to_string().contains("gs://b/x"), "{e}");
        }
        assert!(matches!(
            map_error(status(400), "gs://b/x".into(), true),
            StoreError::InvalidInput { .. }
        ));
        assert!(matches!(
            map_error(status(418), "gs://b/x".into(), true),
            StoreError::Other { .. }
        ));
        let refused = generic(HttpError::new(
            HttpErrorKind::Connect,
            std::io::Error::other("connection refused"),
        ));
        let e = map_error(refused, "gs://b/x".into(), false);
        assert!(e.is_retryable() && !e.is_retried(), "{e:?}");
        let odd = generic(std::fmt::Error);
        assert!(matches!(
            map_error(odd, "gs://b/x".into(), true),
            StoreError::Other { .. }
        ));
    }

    #[test]
    fn the_object_store_error_is_the_source() {
        let e = map_error(
            object_store::Error::NotFound {
                path: "x".into(),
                source: "gone".into(),
            },
            "gs://b/x".into(),
            true,
        );
        assert!(e.is_not_found());
        let source = e.source().expect("a source");
        assert!(source.is::<object_store::Error>());
    }

    #[test]
    fn local_file_errors_map_by_their_io_kind() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let e = map_io_error(io, "file:///x", false);
        assert!(e.is_permission_denied(), "{e:?}");
    }
}
