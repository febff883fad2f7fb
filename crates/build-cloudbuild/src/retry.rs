//! Retries: the *decision* (which outcomes are worth another try, how long
//! to wait) apart from the *mechanism* (the loop in the HTTP client).

use std::time::Duration;

/// What to do with one HTTP outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// The answer is final (success, or an error retrying cannot fix).
    Done,
    /// Try again after a backoff: throttling (429), a server error (5xx)
    /// or a transport failure (connection refused or reset, timeout).
    Retry,
}

/// The decision for an HTTP status; `None` is a transport failure.
///
/// ```
/// use kinetic_build_cloudbuild::retry::{RetryDecision, decide};
/// assert_eq!(decide(Some(503)), RetryDecision::Retry);
/// assert_eq!(decide(Some(429)), RetryDecision::Retry);
/// assert_eq!(decide(None), RetryDecision::Retry);
/// assert_eq!(decide(Some(403)), RetryDecision::Done);
/// assert_eq!(decide(Some(404)), RetryDecision::Done);
/// ```
pub fn decide(status: Option<u16>) -> RetryDecision {
    match status {
        None | Some(429 | 500..=599) => RetryDecision::Retry,
        Some(_) => RetryDecision::Done,
    }
}

/// How often and how patiently a call is retried: exponential backoff from
/// `initial_backoff`, multiplied by `multiplier` per attempt, capped at
/// `max_backoff`, for at most `max_attempts` attempts in all.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = no retry).
    pub max_attempts: u32,
    /// Wait before the second attempt.
    pub initial_backoff: Duration,
    /// Longest wait between two attempts.
    pub max_backoff: Duration,
    /// Growth of the wait per attempt.
    pub multiplier: f64,
}

impl Default for RetryPolicy {
    /// 6 attempts, 0.5 s doubling up to 16 s (about 30 s of waiting).
    fn default() -> Self {
        Self {
            max_attempts: 6,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(16),
            multiplier: 2.0,
        }
    }
}

impl RetryPolicy {
    /// A policy with these numbers.
    pub fn new(max_attempts: u32, initial_backoff: Duration, max_backoff: Duration) -> Self {
        Self {
            max_attempts: max_attempts.max(1),
            initial_backoff,
            max_backoff,
            multiplier: 2.0,
        }
    }

    /// No retries at all.
    pub fn none() -> Self {
        Self::new(1, Duration::ZERO, Duration::ZERO)
    }

    /// The wait after failed attempt number `attempt` (1-based), or `None`
    /// when no attempt is left. A server's `Retry-After` is honoured up to
    /// `max_backoff`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kinetic_build_cloudbuild::retry::RetryPolicy;
    /// let p = RetryPolicy::new(4, Duration::from_secs(1), Duration::from_secs(3));
    /// assert_eq!(p.backoff(1, None), Some(Duration::from_secs(1)));
    /// assert_eq!(p.backoff(2, None), Some(Duration::from_secs(2)));
    /// assert_eq!(p.backoff(3, None), Some(Duration::from_secs(3)));
    /// assert_eq!(p.backoff(4, None), None);
    /// assert_eq!(p.backoff(1, Some(Duration::from_secs(60))), Some(Duration::from_secs(3)));
    /// ```
    pub fn backoff(&self, attempt: u32, retry_after: Option<Duration>) -> Option<Duration> {
        if attempt >= self.max_attempts {
            return None;
        }
        let exp = attempt.saturating_sub(1).min(62) as i32;
        let wait = self
            .initial_backoff
            .mul_f64(self.multiplier.max(1.0).powi(exp))
            .min(self.max_backoff);
        Some(match retry_after {
            Some(after) => after.min(self.max_backoff).max(wait),
            None => wait,
        })
    }
}

/// How a running build is polled: the first poll after `initial`, then
/// waits growing by `multiplier` up to `max`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct PollPolicy {
    /// Wait before the first poll.
    pub initial: Duration,
    /// Longest wait between polls.
    pub max: Duration,
    /// Growth of the wait per poll.
    pub multiplier: f64,
}

impl Default for PollPolicy {
    /// 2 s, growing by half up to 15 s (builds take minutes).
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(2),
            max: Duration::from_secs(15),
            multiplier: 1.5,
        }
    }
}

impl PollPolicy {
    /// A policy with these numbers.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            multiplier: 1.5,
        }
    }

    /// The wait after `wait`.
    pub fn next(&self, wait: Duration) -> Duration {
        wait.mul_f64(self.multiplier.max(1.0)).min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_class_is_decided() {
        for s in [200, 201, 204, 301, 400, 401, 403, 404, 409, 412] {
            assert_eq!(decide(Some(s)), RetryDecision::Done, "{s}");
        }
        for s in [429, 500, 502, 503, 504, 599] {
            assert_eq!(decide(Some(s)), RetryDecision::Retry, "{s}");
        }
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy::default();
        let waits: Vec<_> = (1..=6).map(|a| p.backoff(a, None)).collect();
        assert_eq!(
            waits,
            vec![
                Some(Duration::from_millis(500)),
                Some(Duration::from_secs(1)),
                Some(Duration::from_secs(2)),
                Some(Duration::from_secs(4)),
                Some(Duration::from_secs(8)),
                None
            ]
        );
        assert_eq!(RetryPolicy::none().backoff(1, None), None);
        let big = RetryPolicy::new(100, Duration::from_secs(1), Duration::from_secs(5));
        assert_eq!(big.backoff(99, None), Some(Duration::from_secs(5)));
    }

    #[test]
    fn polls_slow_down_to_the_cap() {
        let p = PollPolicy::new(Duration::from_secs(2), Duration::from_secs(4));
        assert_eq!(p.next(Duration::from_secs(2)), Duration::from_secs(3));
        assert_eq!(p.next(Duration::from_secs(3)), Duration::from_secs(4));
    }
}
