//! Which answers of a Google API are worth another try: the *which
//! failures* part of a retry policy, shared by every Google adapter. How
//! long to keep trying, the backoff and the loop itself are
//! `kinetic_core::retry`'s ([`RetryPolicy`](kinetic_core::retry::RetryPolicy)),
//! one mechanism for the whole project.

use std::time::Duration;

use kinetic_core::retry::Decision;
use reqwest::header::{HeaderMap, RETRY_AFTER};

/// The decision for an HTTP status (`None`: a transport failure, such as
/// a refused or reset connection or a timeout): throttling (429), server
/// errors (5xx) and transport failures are tried again, honouring the
/// server's `Retry-After` where it sent one; every other answer stays
/// what it is.
///
/// ```
/// use std::time::Duration;
/// use kinetic_core::retry::Decision;
/// use kinetic_gcp_common::retry::decide;
/// assert_eq!(decide(Some(503), None), Decision::Retry);
/// assert_eq!(decide(Some(429), Some(Duration::from_secs(3))), Decision::RetryAfter(Duration::from_secs(3)));
/// assert_eq!(decide(None, None), Decision::Retry);
/// assert_eq!(decide(Some(403), None), Decision::Stop);
/// assert_eq!(decide(Some(404), None), Decision::Stop);
/// ```
pub fn decide(status: Option<u16>, retry_after: Option<Duration>) -> Decision {
    match (status, retry_after) {
        (None | Some(429 | 500..=599), Some(after)) => Decision::RetryAfter(after),
        (None | Some(429 | 500..=599), None) => Decision::Retry,
        (Some(_), _) => Decision::Stop,
    }
}

/// The decision for a request that got no answer, from what went wrong:
/// a refused connection (nothing listens at the endpoint: a wrong or
/// closed endpoint, which waiting does not open) is final; a timeout, a
/// reset or a broken connection is tried again.
///
/// ```
/// use kinetic_core::retry::Decision;
/// use kinetic_gcp_common::retry::decide_transport;
/// let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
/// assert_eq!(decide_transport(&refused), Decision::Stop);
/// let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
/// assert_eq!(decide_transport(&reset), Decision::Retry);
/// ```
pub fn decide_transport(error: &(dyn std::error::Error + 'static)) -> Decision {
    if connection_refused(error) {
        Decision::Stop
    } else {
        decide(None, None)
    }
}

/// True when `error`, or an error it was caused by, is a refused
/// connection.
pub fn connection_refused(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(e) = current {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        current = e.source();
    }
    false
}

/// `error` followed by the errors it was caused by, joined by `: ` (a
/// `reqwest` error alone says "error sending request", not why).
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut current = error.source();
    while let Some(e) = current {
        let part = e.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        current = e.source();
    }
    text
}

/// The wait an answer's `Retry-After` header asks for, in its
/// delta-seconds form (the one Google sends); `None` without one.
///
/// ```
/// use std::time::Duration;
/// use kinetic_gcp_common::retry::retry_after;
/// use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};
/// let mut headers = HeaderMap::new();
/// assert_eq!(retry_after(&headers), None);
/// headers.insert(RETRY_AFTER, HeaderValue::from_static(" 7 "));
/// assert_eq!(retry_after(&headers), Some(Duration::from_secs(7)));
/// ```
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    #[test]
    fn every_status_class_is_decided() {
        for s in [200, 201, 204, 301, 400, 401, 403, 404, 409, 412] {
            assert_eq!(decide(Some(s), None), Decision::Stop, "{s}");
            assert_eq!(
                decide(Some(s), Some(Duration::from_secs(1))),
                Decision::Stop,
                "{s}"
            );
        }
        for s in [429, 500, 502, 503, 504, 599] {
            assert_eq!(decide(Some(s), None), Decision::Retry, "{s}");
        }
    }

    /// An error that wraps another, as reqwest's wraps hyper's wraps io's.
    #[derive(Debug)]
    struct Wrapped(std::io::Error);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("error sending request")
        }
    }

    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_refused_connection_is_final_wherever_it_is_in_the_chain() {
        use std::io::{Error, ErrorKind};
        let refused = Wrapped(Error::new(
            ErrorKind::ConnectionRefused,
            "Connection refused",
        ));
        assert_eq!(decide_transport(&refused), Decision::Stop);
        assert_eq!(
            error_chain(&refused),
            "error sending request: Connection refused"
        );
        for kind in [
            ErrorKind::TimedOut,
            ErrorKind::ConnectionReset,
            ErrorKind::BrokenPipe,
        ] {
            assert_eq!(
                decide_transport(&Wrapped(Error::from(kind))),
                Decision::Retry,
                "{kind:?}"
            );
        }
    }

    #[test]
    fn a_retry_after_that_is_not_seconds_is_ignored() {
        let mut headers = HeaderMap::new();
        headers.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&headers), None);
        headers.insert(RETRY_AFTER, HeaderValue::from_static("-1"));
        assert_eq!(retry_after(&headers), None);
    }
}
