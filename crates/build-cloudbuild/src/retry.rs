//! Which Cloud Build and Artifact Registry answers are worth another try:
//! the *which failures* part of the retry policy. How long to keep trying,
//! the backoff and the loop itself are `kinetic_core::retry`'s, shared with
//! the rest of the engine ([`RetryPolicy`], [`Backoff`]); what the client
//! gives up on is reported as already retried, so that no caller retries
//! it again.

use std::time::Duration;

pub use kinetic_core::retry::{Backoff, Decision, RetryPolicy};

/// The decision for an HTTP status (`None`: a transport failure, such as
/// a refused or reset connection or a timeout), honouring the server's
/// `Retry-After` where it sent one.
///
/// ```
/// use std::time::Duration;
/// use kinetic_build_cloudbuild::retry::{Decision, decide};
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

/// The policy of every API call by default: 6 attempts within 60 s,
/// waiting 0.5 s doubling up to 16 s with a quarter of each wait drawn at
/// random (about 30 s of waiting in all).
pub fn default_policy() -> RetryPolicy {
    RetryPolicy::new(
        6,
        Backoff::new(Duration::from_millis(500), Duration::from_secs(16)).with_jitter(0.25),
    )
    .with_max_elapsed(Duration::from_secs(60))
}

/// How a running build is polled by default: the first poll after 2 s, then
/// waits growing by half up to 15 s (builds take minutes).
pub fn default_poll() -> Backoff {
    Backoff::new(Duration::from_secs(2), Duration::from_secs(15)).with_multiplier(1.5)
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn polls_slow_down_to_the_cap() {
        let p = Backoff::new(Duration::from_secs(2), Duration::from_secs(4)).with_multiplier(1.5);
        assert_eq!(p.next(Duration::from_secs(2)), Duration::from_secs(3));
        assert_eq!(p.next(Duration::from_secs(3)), Duration::from_secs(4));
        assert_eq!(default_poll().initial, Duration::from_secs(2));
    }
}
