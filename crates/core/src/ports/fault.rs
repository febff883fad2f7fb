//! Fault injection, the plan: scripted errors and added latency that the
//! fault-injecting decorators of each port (`kinetic-engine`'s
//! `FaultyStore`, `FaultyBackend` and `FaultyImageBuilder`, which wait the
//! latency) and the fake servers draw at the start of every call.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

/// Scripted faults: errors handed out to the next calls (of any operation,
/// or of one named operation after some number of calls), and a latency
/// added to every call. Operation names are chosen by whoever consults the
/// plan; the port decorators use the port's method names.
///
/// ```
/// use kinetic_core::ports::FaultPlan;
///
/// let plan = FaultPlan::default();
/// plan.fail_on("get", 1, "second get fails");
/// assert_eq!(plan.draw("get").into_result(), Ok(()));
/// assert_eq!(plan.draw("put").into_result(), Ok(()));
/// assert_eq!(plan.draw("get").into_result(), Err("second get fails"));
/// assert_eq!(plan.draw("get").into_result(), Ok(()));
/// assert_eq!(plan.calls("get"), 3);
/// ```
#[derive(Debug)]
pub struct FaultPlan<E> {
    inner: Mutex<Inner<E>>,
}

#[derive(Debug)]
struct Inner<E> {
    next: VecDeque<E>,
    targeted: Vec<Targeted<E>>,
    latency: Duration,
    /// Calls of each operation so far, failed ones included.
    calls: BTreeMap<&'static str, u64>,
}

#[derive(Debug)]
struct Targeted<E> {
    op: &'static str,
    /// Calls of `op` to let through before failing.
    skip: usize,
    error: Option<E>,
}

impl<E> Default for FaultPlan<E> {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Inner {
                next: VecDeque::new(),
                targeted: Vec::new(),
                latency: Duration::ZERO,
                calls: BTreeMap::new(),
            }),
        }
    }
}

impl<E> FaultPlan<E> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<E>> {
        // A panicking test thread must not wedge every later call.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next call, whatever it is, fails with `error`. Calls queue up.
    pub fn fail_next(&self, error: E) {
        self.lock().next.push_back(error);
    }

    /// The call of `op` after `skip` more successful calls of it fails with `error`.
    pub fn fail_on(&self, op: &'static str, skip: usize, error: E) {
        self.lock().targeted.push(Targeted {
            op,
            skip,
            error: Some(error),
        });
    }

    /// Add `latency` to every call from now on.
    pub fn set_latency(&self, latency: Duration) {
        self.lock().latency = latency;
    }

    /// How many times `op` was called so far (checked against the plan),
    /// the calls that failed included: what a test counts to show how
    /// often a layer above tried.
    pub fn calls(&self, op: &str) -> u64 {
        self.lock().calls.get(op).copied().unwrap_or(0)
    }

    /// Forget every scripted error and the latency (not the call counts).
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.next.clear();
        inner.targeted.clear();
        inner.latency = Duration::ZERO;
    }

    /// Called at the start of `op`: counts the call and hands out the
    /// latency to wait and the scripted error, if one is due. The caller
    /// waits the latency (this crate has no timer), then fails or goes on.
    pub fn draw(&self, op: &'static str) -> Fault<E> {
        let (latency, due) = {
            let mut inner = self.lock();
            *inner.calls.entry(op).or_default() += 1;
            let mut due = inner.next.pop_front();
            if due.is_none() {
                for t in inner
                    .targeted
                    .iter_mut()
                    .filter(|t| t.op == op && t.error.is_some())
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
        };
        Fault {
            latency,
            error: due,
        }
    }
}

/// What one call drew from a [`FaultPlan`]: how long to wait before
/// going on, and the error to fail with, if one was due.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Fault<E> {
    /// The latency to add before the call goes on (zero: none).
    pub latency: Duration,
    /// The scripted error the call fails with, if one was due.
    pub error: Option<E>,
}

impl<E> Fault<E> {
    /// The error as a result, once the latency has been waited.
    pub fn into_result(self) -> Result<(), E> {
        self.error.map_or(Ok(()), Err)
    }
}
