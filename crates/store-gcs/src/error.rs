//! `object_store` errors mapped onto the port's kinds.
//!
//! `object_store` gives typed errors for 404, 412, 409, 403 and 401, but
//! reports throttling (429) and server or connection failures as
//! `Generic`, with the HTTP status only in the message of a private error
//! type. Those are what a caller may retry, so they are recognised here:
//! by the public `HttpError` kind where the chain holds one, else by the
//! status in the message. The tests over the fake server pin this (an
//! `object_store` upgrade that changes the text fails them).

use kinetic_core::ports::StoreError;
use object_store::client::{HttpError, HttpErrorKind};

/// Map an `object_store` error about `what` (a URI) into the port's kinds.
pub(crate) fn map_error(err: object_store::Error, what: String) -> StoreError {
    use object_store::Error as E;
    match err {
        E::NotFound { .. } => StoreError::NotFound { path: what },
        E::AlreadyExists { .. } => StoreError::AlreadyExists { path: what },
        E::InvalidPath { source } => StoreError::InvalidInput {
            message: format!("invalid object path {what}: {source}"),
        },
        E::PermissionDenied { source, .. } | E::Unauthenticated { source, .. } => {
            StoreError::PermissionDenied {
                message: format!("{what}: {source}"),
            }
        }
        E::Precondition { source, .. } => StoreError::Other {
            message: format!("precondition failed for {what}: {source}"),
        },
        other => {
            if transport_failure(&other) {
                return StoreError::Unavailable {
                    message: format!("{what}: {other}"),
                };
            }
            classify_text(&other.to_string(), &what)
        }
    }
}

/// True when the error chain holds a connection, request or timeout failure.
fn transport_failure(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(http) = e.downcast_ref::<HttpError>() {
            return matches!(
                http.kind(),
                HttpErrorKind::Connect
                    | HttpErrorKind::Request
                    | HttpErrorKind::Timeout
                    | HttpErrorKind::Interrupted
            );
        }
        current = e.source();
    }
    false
}

/// Classify a failure from its message: 429, 408 and 5xx are
/// [`StoreError::Unavailable`], 416 and 400 [`StoreError::InvalidInput`].
pub(crate) fn classify_text(text: &str, what: &str) -> StoreError {
    let message = format!("{what}: {text}");
    match http_status(text) {
        Some(429 | 408) | Some(500..=599) => StoreError::Unavailable { message },
        Some(400 | 416) => StoreError::InvalidInput { message },
        Some(403 | 401) => StoreError::PermissionDenied { message },
        _ => StoreError::Other { message },
    }
}

/// The status in `object_store`'s "…status code: 503 Service Unavailable…".
fn http_status(text: &str) -> Option<u16> {
    let at = text.find("status code: ")? + "status code: ".len();
    text.get(at..at + 3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_in_messages_pick_the_kind() {
        let t = |s: &str| classify_text(s, "gs://b/x");
        assert!(
            t("Server returned non-2xx status code: 503 Service Unavailable: x").is_retryable()
        );
        assert!(t("Server returned non-2xx status code: 429 Too Many Requests").is_retryable());
        assert!(matches!(
            t("Server returned non-2xx status code: 400 Bad Request"),
            StoreError::InvalidInput { .. }
        ));
        assert!(matches!(t("something else"), StoreError::Other { .. }));
        assert!(t("status code: 50").to_string().contains("gs://b/x"));
    }
}
