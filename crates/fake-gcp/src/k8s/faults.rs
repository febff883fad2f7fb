//! [`ApiFaults`]: scripted failures and latency of the fake API server's
//! calls, drawn at the start of every call.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use super::store::ApiError;

/// Scripted API failures: errors handed out to the next calls (of any
/// verb, or of one verb after some number of its calls), a latency added
/// to every call, and the count of calls of each verb. The verbs are
/// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete` and `log`.
#[derive(Debug, Default)]
pub struct ApiFaults {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    next: VecDeque<ApiError>,
    targeted: Vec<Targeted>,
    latency: Duration,
    /// Calls of each verb so far, failed ones included.
    calls: BTreeMap<&'static str, u64>,
}

#[derive(Debug)]
struct Targeted {
    verb: &'static str,
    /// Calls of `verb` to let through before failing.
    skip: usize,
    error: Option<ApiError>,
}

impl ApiFaults {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panicking test thread must not wedge every later call.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next call, whatever its verb, fails with `error`. Calls queue up.
    pub fn fail_next(&self, error: ApiError) {
        self.lock().next.push_back(error);
    }

    /// The call of `verb` after `skip` more successful calls of it fails
    /// with `error`.
    pub fn fail_on(&self, verb: &'static str, skip: usize, error: ApiError) {
        self.lock().targeted.push(Targeted {
            verb,
            skip,
            error: Some(error),
        });
    }

    /// Add `latency` to every call from now on.
    pub fn set_latency(&self, latency: Duration) {
        self.lock().latency = latency;
    }

    /// How many times `verb` was called so far, the failed calls included.
    pub fn calls(&self, verb: &str) -> u64 {
        self.lock().calls.get(verb).copied().unwrap_or(0)
    }

    /// Forget every scripted error and the latency (not the call counts).
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.next.clear();
        inner.targeted.clear();
        inner.latency = Duration::ZERO;
    }

    /// Called at the start of a call of `verb`: counts it and hands out the
    /// latency to wait and the scripted error, if one is due.
    pub(crate) fn draw(&self, verb: &'static str) -> (Duration, Option<ApiError>) {
        let mut inner = self.lock();
        *inner.calls.entry(verb).or_default() += 1;
        let mut due = inner.next.pop_front();
        if due.is_none() {
            for t in inner
                .targeted
                .iter_mut()
                .filter(|t| t.verb == verb && t.error.is_some())
            {
                if t.skip == 0 {
                    due = t.error.take();
                    break;
                }
                t.skip -= 1;
            }
            inner.targeted.retain(|t| t.error.is_some());
        }
        (inner.latency, due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conflict() -> ApiError {
        ApiError::bad_request("scripted")
    }

    #[test]
    fn a_targeted_failure_skips_then_fails_once_and_every_call_counts() {
        let faults = ApiFaults::default();
        faults.fail_on("get", 1, conflict());
        assert!(faults.draw("get").1.is_none());
        assert!(faults.draw("list").1.is_none());
        assert_eq!(
            faults.draw("get").1.map(|e| e.message),
            Some("scripted".into())
        );
        assert!(faults.draw("get").1.is_none());
        assert_eq!(faults.calls("get"), 3);
        faults.fail_next(conflict());
        faults.set_latency(Duration::from_millis(5));
        faults.clear();
        assert_eq!(faults.draw("patch"), (Duration::ZERO, None));
    }
}
