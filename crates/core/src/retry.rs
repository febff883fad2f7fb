//! Retries in one place: the *policy* — which failures are worth another
//! try ([`Retryable`], or a predicate giving a [`Decision`]) and how long
//! to keep trying ([`RetryPolicy`]: a budget of attempts and of time, and a
//! [`Backoff`] with jitter) — as plain values. The *mechanism*, the one
//! loop that calls, waits and calls again, needs a timer and so lives in
//! `kinetic-engine` (`kinetic_engine::retry::call` and `retry_if`), as
//! tower splits its `Policy` from its `Retry` service.
//!
//! Who retries what, so that nothing is retried twice:
//!
//! - the GCS store retries inside `object_store` (its `RetryConfig`) and
//!   reports what it gave up on as already retried
//!   ([`StoreError::Unavailable`](crate::ports::StoreError::Unavailable)
//!   with `retried: true`); the engine never retries a store call;
//! - the engine wraps every backend in its `RetryBackend` decorator, which
//!   retries backend calls (job and batch polling, submit, cancel…) under
//!   one policy (`EngineBuilder::retry`);
//! - adapters that loop on their own (the GKE backend writing a final
//!   state, the Cloud Build client, the infrastructure adapter's API calls
//!   and its waits for a busy cluster) use the engine's same mechanism and
//!   report what they gave up on as retried, which no layer above retries
//!   again; the Google adapters decide alike which answers to retry
//!   (`kinetic_gcp_common::retry`).
//!
//! ```
//! use std::time::Duration;
//! use kinetic_core::retry::{Backoff, RetryPolicy};
//!
//! let policy = RetryPolicy::new(3, Backoff::new(Duration::from_millis(10), Duration::from_secs(1)));
//! assert_eq!(policy.next_delay(1, Duration::ZERO), Some(Duration::from_millis(10)));
//! assert_eq!(policy.next_delay(2, Duration::from_millis(10)), Some(Duration::from_millis(20)));
//! assert_eq!(policy.next_delay(3, Duration::from_millis(30)), None, "exactly the budget");
//! ```

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What a retry policy needs to know about an error: whether trying again
/// may help, and whether someone already did. The port errors implement it.
pub trait Retryable: Sized {
    /// True when the same call may succeed if tried again later.
    fn is_retryable(&self) -> bool;

    /// True when the call already went through a retry policy that spent
    /// its budget; retrying it again would stack retries.
    fn is_retried(&self) -> bool;

    /// The same error marked as retried, after `attempts` attempts in all
    /// (errors that are not retryable stay as they are).
    fn into_retried(self, attempts: u32) -> Self;
}

/// Add how many attempts were made to a message (nothing for one attempt).
pub(crate) fn note_attempts(message: &mut String, attempts: u32) {
    if attempts > 1 {
        message.push_str(&format!(" (gave up after {attempts} attempts)"));
    }
}

/// What the three port errors share, written once: constructors of the
/// kinds that carry `{ message, source }` (`InvalidInput`,
/// `PermissionDenied`, `Other`) and of `Unavailable { message, retried,
/// source }` (its one retryable kind), the predicates `is_retryable`,
/// `is_retried` and `is_permission_denied`, `with_source` (for those and
/// the `sourced` kinds; the `bare` kinds carry no source), and [`Retryable`].
macro_rules! port_error_kinds {
    ($error:ident, sourced: [$($sourced:ident),*], bare: [$($bare:ident),*]) => {
        impl $error {
            /// The same error with `cause` as its source (kinds that carry
            /// none stay as they are).
            #[must_use]
            pub fn with_source(mut self, cause: impl Into<$crate::ports::BoxError>) -> Self {
                match &mut self {
                    Self::InvalidInput { source, .. }
                    | Self::PermissionDenied { source, .. }
                    | Self::Unavailable { source, .. }
                    | Self::Other { source, .. }
                    $(| Self::$sourced { source, .. })* => *source = Some(cause.into()),
                    $(Self::$bare { .. } => {})*
                }
                self
            }

            /// The `InvalidInput` kind: fix the input.
            pub fn invalid_input(message: impl Into<String>) -> Self {
                Self::InvalidInput {
                    message: message.into(),
                    source: None,
                }
            }

            /// The `PermissionDenied` kind: fix the credentials or permissions.
            pub fn permission_denied(message: impl Into<String>) -> Self {
                Self::PermissionDenied {
                    message: message.into(),
                    source: None,
                }
            }

            /// The `Other` kind: an answer nothing expected.
            pub fn other(message: impl Into<String>) -> Self {
                Self::Other {
                    message: message.into(),
                    source: None,
                }
            }

            /// True for the `PermissionDenied` kind.
            pub fn is_permission_denied(&self) -> bool {
                matches!(self, Self::PermissionDenied { .. })
            }

            /// The `Unavailable` kind, not retried yet.
            pub fn unavailable(message: impl Into<String>) -> Self {
                Self::Unavailable {
                    message: message.into(),
                    retried: false,
                    source: None,
                }
            }

            /// True when the same call may succeed if tried again later
            /// (the `Unavailable` kind), whether or not it was retried already.
            pub fn is_retryable(&self) -> bool {
                matches!(self, Self::Unavailable { .. })
            }

            /// True when the call already went through a retry policy that
            /// spent its budget: retrying it again would stack retries.
            pub fn is_retried(&self) -> bool {
                matches!(self, Self::Unavailable { retried: true, .. })
            }
        }

        impl $crate::retry::Retryable for $error {
            fn is_retryable(&self) -> bool {
                $error::is_retryable(self)
            }

            fn is_retried(&self) -> bool {
                $error::is_retried(self)
            }

            fn into_retried(mut self, attempts: u32) -> Self {
                if let Self::Unavailable {
                    message, retried, ..
                } = &mut self
                {
                    *retried = true;
                    $crate::retry::note_attempts(message, attempts);
                }
                self
            }
        }
    };
}
pub(crate) use port_error_kinds;

/// Exponential backoff with jitter: the wait after the `n`th failed attempt
/// is `initial * multiplier^(n-1)`, capped at `max`, then shortened by a
/// random part of up to `jitter` of itself (so that clients that failed
/// together do not come back together).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Backoff {
    /// Wait after the first failed attempt.
    pub initial: Duration,
    /// Longest wait.
    pub max: Duration,
    /// Growth of the wait per attempt (at least 1).
    pub multiplier: f64,
    /// Share of each wait drawn at random, from 0 (none) to 1 (anything
    /// between zero and the wait).
    pub jitter: f64,
}

impl Backoff {
    /// Waits from `initial`, doubling up to `max`, without jitter.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            multiplier: 2.0,
            jitter: 0.0,
        }
    }

    /// The same, growing by `multiplier` per attempt.
    #[must_use]
    pub fn with_multiplier(mut self, multiplier: f64) -> Self {
        self.multiplier = multiplier;
        self
    }

    /// The same, with `jitter` (clamped to 0..=1) of each wait drawn at random.
    #[must_use]
    pub fn with_jitter(mut self, jitter: f64) -> Self {
        self.jitter = jitter.clamp(0.0, 1.0);
        self
    }

    /// The wait after `failures` failed attempts (1-based), before jitter.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kinetic_core::retry::Backoff;
    /// let b = Backoff::new(Duration::from_secs(1), Duration::from_secs(3));
    /// assert_eq!(b.base_delay(1), Duration::from_secs(1));
    /// assert_eq!(b.base_delay(2), Duration::from_secs(2));
    /// assert_eq!(b.base_delay(3), Duration::from_secs(3));
    /// assert_eq!(b.base_delay(40), Duration::from_secs(3));
    /// ```
    pub fn base_delay(&self, failures: u32) -> Duration {
        let exp = failures.saturating_sub(1).min(62) as i32;
        let grown = self.initial.as_secs_f64() * self.multiplier.max(1.0).powi(exp);
        Duration::try_from_secs_f64(grown)
            .unwrap_or(self.max)
            .min(self.max)
    }

    /// The wait after `failures` failed attempts, jitter included: between
    /// `base * (1 - jitter)` and `base`.
    pub fn delay(&self, failures: u32) -> Duration {
        let base = self.base_delay(failures);
        if self.jitter <= 0.0 || base.is_zero() {
            return base;
        }
        base.mul_f64(1.0 - self.jitter.clamp(0.0, 1.0) * unit_random())
    }

    /// The wait that follows `wait` (for a poll cadence that grows by
    /// `multiplier` up to `max`; no jitter).
    pub fn next(&self, wait: Duration) -> Duration {
        wait.mul_f64(self.multiplier.max(1.0)).min(self.max)
    }
}

/// A number in `[0, 1)`, from the standard library's per-process random
/// hash keys (no random-number crate in the core).
fn unit_random() -> f64 {
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    let bits = RandomState::new().hash_one(DRAWS.fetch_add(1, Ordering::Relaxed));
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// How long a failing call is tried: at most `max_attempts` attempts in
/// all (the first included), no new attempt once `max_elapsed` has passed
/// since the first began, and `backoff` between attempts.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = no retry).
    pub max_attempts: u32,
    /// No attempt starts later than this after the first; `None` = no limit.
    pub max_elapsed: Option<Duration>,
    /// The waits between attempts.
    pub backoff: Backoff,
}

impl Default for RetryPolicy {
    /// 5 attempts within 60 s, waiting 250 ms doubling up to 5 s, half of
    /// each wait drawn at random (about 4 s of waiting in all).
    fn default() -> Self {
        Self {
            max_attempts: 5,
            max_elapsed: Some(Duration::from_secs(60)),
            backoff: Backoff::new(Duration::from_millis(250), Duration::from_secs(5))
                .with_jitter(0.5),
        }
    }
}

/// What to do after a failed attempt: the policy's *which failures* part,
/// as a predicate given to the engine's `retry::retry_if` returns it (`bool`
/// converts: `true` is [`Decision::Retry`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The failure is final: trying again cannot help.
    Stop,
    /// Try again after the policy's backoff, if the budget allows.
    Retry,
    /// Try again, waiting at least this long (a server's `Retry-After`),
    /// but never longer than the backoff's `max`.
    RetryAfter(Duration),
}

impl From<bool> for Decision {
    fn from(retry: bool) -> Self {
        if retry { Self::Retry } else { Self::Stop }
    }
}

/// A call that ended in failure under a [`RetryPolicy`] (the engine's
/// `retry::retry_if`).
#[derive(Debug)]
#[non_exhaustive]
pub struct GaveUp<E> {
    /// The last attempt's error.
    pub error: E,
    /// Attempts made, the first included.
    pub attempts: u32,
    /// True when the last error was one to retry but the budget was spent;
    /// false when it was one not to retry.
    pub exhausted: bool,
}

impl<E> GaveUp<E> {
    /// The failure of a call that ended with `error` after `attempts`
    /// attempts; `exhausted` when the budget ran out on an error worth
    /// retrying.
    pub fn new(error: E, attempts: u32, exhausted: bool) -> Self {
        Self {
            error,
            attempts,
            exhausted,
        }
    }
}

impl RetryPolicy {
    /// At most `max_attempts` attempts (at least 1), with `backoff`
    /// between them and no time limit.
    pub fn new(max_attempts: u32, backoff: Backoff) -> Self {
        Self {
            max_attempts: max_attempts.max(1),
            max_elapsed: None,
            backoff,
        }
    }

    /// One attempt: nothing is retried (failures still come back marked
    /// as retried, so that no layer above retries them either).
    pub fn none() -> Self {
        Self::new(1, Backoff::new(Duration::ZERO, Duration::ZERO))
    }

    /// The same, starting no attempt later than `limit` after the first.
    #[must_use]
    pub fn with_max_elapsed(mut self, limit: Duration) -> Self {
        self.max_elapsed = Some(limit);
        self
    }

    /// The wait before another attempt, after `attempts` failed ones and
    /// `elapsed` since the first began; `None` when the budget is spent.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kinetic_core::retry::{Backoff, RetryPolicy};
    /// let p = RetryPolicy::new(3, Backoff::new(Duration::from_secs(1), Duration::from_secs(10)))
    ///     .with_max_elapsed(Duration::from_secs(4));
    /// assert_eq!(p.next_delay(1, Duration::ZERO), Some(Duration::from_secs(1)));
    /// assert_eq!(p.next_delay(2, Duration::from_secs(1)), Some(Duration::from_secs(2)));
    /// assert_eq!(p.next_delay(3, Duration::from_secs(3)), None, "no attempt left");
    /// assert_eq!(p.next_delay(2, Duration::from_secs(3)), None, "the next would start past 4 s");
    /// ```
    pub fn next_delay(&self, attempts: u32, elapsed: Duration) -> Option<Duration> {
        if attempts >= self.max_attempts {
            return None;
        }
        let wait = self.backoff.delay(attempts);
        match self.max_elapsed {
            Some(limit) if elapsed + wait > limit => None,
            _ => Some(wait),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_its_share() {
        let b = Backoff::new(Duration::from_millis(1000), Duration::from_secs(10)).with_jitter(0.5);
        for failures in 1..6 {
            let base = b.base_delay(failures);
            for _ in 0..50 {
                let d = b.delay(failures);
                assert!(
                    d <= base && d >= base / 2,
                    "{d:?} outside [{:?}, {base:?}]",
                    base / 2
                );
            }
        }
        let none = Backoff::new(Duration::from_millis(10), Duration::from_secs(1));
        assert_eq!(none.delay(3), Duration::from_millis(40));
        assert_eq!(
            none.next(Duration::from_millis(600)),
            Duration::from_secs(1)
        );
    }
}
