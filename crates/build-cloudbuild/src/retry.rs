//! Which Cloud Build and Artifact Registry answers are worth another try:
//! the *which failures* part of the retry policy, [`decide`], the rule
//! every Google adapter shares (`kinetic_gcp_common::retry`). How long to
//! keep trying, the backoff and the loop itself are `kinetic_core::retry`'s,
//! shared with the rest of the engine ([`RetryPolicy`], [`Backoff`]); what
//! the client gives up on is reported as already retried, so that no
//! caller retries it again.

use std::time::Duration;

pub use kinetic_core::retry::{Backoff, Decision, RetryPolicy};
pub use kinetic_gcp_common::retry::decide;

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
    fn polls_slow_down_to_the_cap() {
        let p = Backoff::new(Duration::from_secs(2), Duration::from_secs(4)).with_multiplier(1.5);
        assert_eq!(p.next(Duration::from_secs(2)), Duration::from_secs(3));
        assert_eq!(p.next(Duration::from_secs(3)), Duration::from_secs(4));
        assert_eq!(default_poll().initial, Duration::from_secs(2));
    }
}
