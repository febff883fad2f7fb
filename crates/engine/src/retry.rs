//! The retry mechanism over [`kinetic_core::retry`]'s policy: the one loop
//! that calls, waits on tokio's clock and calls again. The policy (what to
//! retry, how long to wait) is a plain value in the core; the waiting is
//! here, with the engine's timer (a test with a paused clock runs the waits
//! instantly).
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
//! use std::time::Duration;
//! use kinetic_core::ports::StoreError;
//! use kinetic_core::retry::{Backoff, RetryPolicy};
//!
//! let policy = RetryPolicy::new(3, Backoff::new(Duration::from_millis(10), Duration::from_secs(1)));
//! let mut calls = 0;
//! let result: Result<(), StoreError> = kinetic_engine::retry::call(&policy, || {
//!     calls += 1;
//!     async { Err(StoreError::unavailable("busy")) }
//! })
//! .await;
//! let err = result.unwrap_err();
//! assert_eq!(calls, 3, "exactly the budget");
//! assert!(err.is_retried(), "reported as already retried");
//! # });
//! ```

use std::future::Future;
use std::time::Duration;

use kinetic_core::retry::{Decision, GaveUp, RetryPolicy, Retryable};
use tokio::time::Instant;

/// The mechanism: run `attempt` until it succeeds, fails with an error
/// `retry_if` does not accept ([`Decision::Stop`], or `false`), or the
/// budget is spent, waiting the backoff between attempts (at least
/// what a [`Decision::RetryAfter`] asks, up to the backoff's `max`).
pub async fn retry_if<T, E, D, F, Fut>(
    policy: &RetryPolicy,
    mut retry_if: impl FnMut(&E) -> D,
    mut attempt: F,
) -> Result<T, GaveUp<E>>
where
    D: Into<Decision>,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let started = Instant::now();
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let error = match attempt().await {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        let at_least = match retry_if(&error).into() {
            Decision::Stop => {
                return Err(GaveUp::new(error, attempts, false));
            }
            Decision::Retry => Duration::ZERO,
            Decision::RetryAfter(after) => after.min(policy.backoff.max),
        };
        match policy.next_delay(attempts, started.elapsed()) {
            Some(wait) => {
                let wait = wait.max(at_least);
                tracing::debug!(
                    attempt = attempts,
                    ?wait,
                    "retrying after a retryable failure"
                );
                tokio::time::sleep(wait).await;
            }
            None => {
                return Err(GaveUp::new(error, attempts, true));
            }
        }
    }
}

/// Run a port call under `policy`: errors that are retryable and
/// not yet retried are tried again; the error that ends it comes back
/// marked as retried when it was retryable, so no layer above retries
/// it again. An error already retried below is returned at once.
pub async fn call<T, E, F, Fut>(policy: &RetryPolicy, attempt: F) -> Result<T, E>
where
    E: Retryable,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    retry_if(policy, |e: &E| e.is_retryable() && !e.is_retried(), attempt)
        .await
        .map_err(|gave_up| {
            if gave_up.exhausted {
                gave_up.error.into_retried(gave_up.attempts)
            } else {
                gave_up.error
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kinetic_core::ports::StoreError;
    use kinetic_core::retry::Backoff;

    #[tokio::test(start_paused = true)]
    async fn a_call_is_tried_up_to_its_budget_and_comes_back_retried() {
        let policy = RetryPolicy::new(
            4,
            Backoff::new(Duration::from_secs(1), Duration::from_secs(8)),
        );
        let mut calls = 0;
        let started = Instant::now();
        let err = call(&policy, || {
            calls += 1;
            async { Err::<(), _>(StoreError::unavailable("busy")) }
        })
        .await
        .unwrap_err();
        assert_eq!(calls, 4);
        assert!(err.is_retried());
        assert!(
            err.to_string().contains("gave up after 4 attempts"),
            "{err}"
        );
        assert_eq!(started.elapsed(), Duration::from_secs(1 + 2 + 4));
    }

    #[tokio::test(start_paused = true)]
    async fn errors_not_worth_retrying_or_already_retried_are_returned_at_once() {
        let policy = RetryPolicy::default();
        for error in [
            StoreError::not_found("x"),
            StoreError::permission_denied("x"),
            StoreError::unavailable("x").into_retried(3),
        ] {
            let mut calls = 0;
            let mut error = Some(error);
            let _ = call(&policy, || {
                calls += 1;
                let e = error.take().expect("called once");
                async move { Err::<(), _>(e) }
            })
            .await;
            assert_eq!(calls, 1);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn success_after_failures_is_returned() {
        let policy = RetryPolicy::new(
            5,
            Backoff::new(Duration::from_millis(1), Duration::from_millis(1)),
        );
        let mut calls = 0;
        let value = call(&policy, || {
            calls += 1;
            let n = calls;
            async move {
                if n < 3 {
                    Err(StoreError::unavailable("busy"))
                } else {
                    Ok(n)
                }
            }
        })
        .await
        .unwrap();
        assert_eq!(value, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_hint_waits_at_least_that_long_but_never_past_the_max() {
        let policy = RetryPolicy::new(
            3,
            Backoff::new(Duration::from_millis(10), Duration::from_secs(5)),
        );
        let started = Instant::now();
        let gave_up = retry_if(
            &policy,
            |_: &()| Decision::RetryAfter(Duration::from_secs(60)),
            || async { Err::<(), ()>(()) },
        )
        .await
        .unwrap_err();
        assert!(gave_up.exhausted);
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(10),
            "two waits of 5 s"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_time_budget_ends_the_retries() {
        let policy = RetryPolicy::new(
            100,
            Backoff::new(Duration::from_secs(1), Duration::from_secs(1)),
        )
        .with_max_elapsed(Duration::from_millis(3500));
        let mut calls = 0;
        let gave_up = retry_if(
            &policy,
            |_: &()| true,
            || {
                calls += 1;
                async { Err::<(), ()>(()) }
            },
        )
        .await
        .unwrap_err();
        assert!(gave_up.exhausted);
        assert_eq!(
            calls, 4,
            "attempts at 0, 1, 2 and 3 s; a fifth would start past 3.5 s"
        );
        assert_eq!(gave_up.attempts, 4);
    }
}
