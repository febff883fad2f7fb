//! An ordered parallel map: items are produced lazily on the calling thread,
//! processed on a fixed set of worker threads, and their results consumed on
//! the calling thread **in the order the items were produced**.
//!
//! Both the content hash (per-file digests folded in walk order) and the
//! archive writer (entries compressed in parallel, written in walk order) need
//! exactly this shape, so it lives here once.
//!
//! Design notes:
//! - The producer (e.g. a directory walk) runs on the calling thread while the
//!   workers are busy, so walking overlaps hashing.
//! - At most `window` items are in flight (sent but not yet consumed), so
//!   memory stays bounded however many items there are, and a slow item only
//!   delays the fold, never grows the buffers past the window.
//! - Every worker owns a state built once by `init` (a reusable read buffer),
//!   so there is no per-item allocation in the hot path.
//! - With one thread everything runs inline on the calling thread: the result
//!   is the same by construction, since consumption order never depends on
//!   which worker finished first.

use std::any::Any;
use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};
use std::thread;

type Panic = Box<dyn Any + Send + 'static>;

/// Runs `work` over `items` on `threads` workers and hands each result to
/// `consume` in item order.
///
/// The first error (from the producer or from `consume`) stops the run: no
/// new items are started, items already queued are dropped unprocessed, and
/// the error is returned. A panic in a worker is re-raised on the calling
/// thread.
pub(crate) fn ordered_map<T, R, S, E, I, Init, Work, Consume>(
    threads: usize,
    window: usize,
    items: I,
    init: Init,
    work: Work,
    mut consume: Consume,
) -> Result<(), E>
where
    I: Iterator<Item = Result<T, E>>,
    T: Send,
    R: Send,
    Init: Fn() -> S + Sync,
    Work: Fn(&mut S, T) -> R + Sync,
    Consume: FnMut(R) -> Result<(), E>,
{
    // However many threads were asked for, no more than MAX_THREADS start.
    let threads = threads.min(super::MAX_THREADS);
    if threads <= 1 {
        let mut state = init();
        for item in items {
            consume(work(&mut state, item?))?;
        }
        return Ok(());
    }
    let window = window.max(threads);
    let cancelled = AtomicBool::new(false);
    let (job_tx, job_rx) = mpsc::sync_channel::<(usize, T)>(window);
    let job_rx = Mutex::new(job_rx);
    let (res_tx, res_rx) = mpsc::channel::<(usize, Result<R, Panic>)>();

    thread::scope(|scope| {
        for _ in 0..threads {
            let res_tx = res_tx.clone();
            let (job_rx, init, work, cancelled) = (&job_rx, &init, &work, &cancelled);
            scope.spawn(move || {
                let mut state = match panic::catch_unwind(AssertUnwindSafe(init)) {
                    Ok(state) => state,
                    Err(payload) => {
                        let _ = res_tx.send((usize::MAX, Err(payload)));
                        return;
                    }
                };
                loop {
                    let job = {
                        let guard = job_rx.lock().unwrap_or_else(|e| e.into_inner());
                        guard.recv()
                    };
                    let Ok((seq, item)) = job else { break };
                    if cancelled.load(Ordering::Relaxed) {
                        continue; // drain and drop: the run already failed
                    }
                    let result = panic::catch_unwind(AssertUnwindSafe(|| work(&mut state, item)));
                    if res_tx.send((seq, result)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(res_tx);

        let mut reorder = Reorder::new();
        let outcome = (|| -> Result<(), E> {
            for item in items {
                let item = item?;
                while reorder.in_flight() >= window {
                    let message = recv_or_panic(&res_rx);
                    reorder.accept(message, &mut consume)?;
                }
                // The channel has room for `window` items and at most
                // `window` are in flight, so this send does not block for
                // long; it fails only if every worker is gone (after a panic,
                // which the receive below re-raises).
                if job_tx.send((reorder.next_seq, item)).is_err() {
                    let message = recv_or_panic(&res_rx);
                    reorder.accept(message, &mut consume)?;
                }
                reorder.next_seq += 1;
                while let Ok(message) = res_rx.try_recv() {
                    reorder.accept(message, &mut consume)?;
                }
            }
            while reorder.in_flight() > 0 {
                let message = recv_or_panic(&res_rx);
                reorder.accept(message, &mut consume)?;
            }
            Ok(())
        })();
        if outcome.is_err() {
            cancelled.store(true, Ordering::Relaxed);
        }
        drop(job_tx);
        outcome
    })
}

/// Groups the `Ok` items of `items` into batches of up to `size` items, so
/// that a parallel run pays its per-item costs (channel messages, wake-ups)
/// once per batch. An error ends the current batch and is yielded after it,
/// keeping its place in the order.
pub(crate) fn batched<T, E>(
    items: impl Iterator<Item = Result<T, E>>,
    size: usize,
) -> impl Iterator<Item = Result<Vec<T>, E>> {
    batched_by_weight(items, size, u64::MAX, |_| 0)
}

/// Like [`batched`], but a batch also ends once the `weight` of its items
/// (bytes, say) reaches `max_weight`, which bounds the memory a batch's
/// results can take.
pub(crate) fn batched_by_weight<T, E>(
    items: impl Iterator<Item = Result<T, E>>,
    size: usize,
    max_weight: u64,
    weight: impl Fn(&T) -> u64,
) -> impl Iterator<Item = Result<Vec<T>, E>> {
    let mut items = items.fuse();
    let mut held_error: Option<E> = None;
    std::iter::from_fn(move || {
        if let Some(e) = held_error.take() {
            return Some(Err(e));
        }
        let mut batch = Vec::with_capacity(size.min(64));
        let mut total = 0u64;
        for item in items.by_ref() {
            match item {
                Ok(item) => {
                    total = total.saturating_add(weight(&item));
                    batch.push(item);
                    if batch.len() >= size || total >= max_weight {
                        break;
                    }
                }
                Err(e) if batch.is_empty() => return Some(Err(e)),
                Err(e) => {
                    held_error = Some(e);
                    break;
                }
            }
        }
        (!batch.is_empty()).then_some(Ok(batch))
    })
}

fn recv_or_panic<R>(rx: &mpsc::Receiver<(usize, Result<R, Panic>)>) -> (usize, Result<R, Panic>) {
    match rx.recv() {
        Ok(message) => message,
        // Workers only exit once the job channel is closed, which happens
        // after the last receive; reaching this is a bug, not bad input.
        Err(_) => panic!("ordered_map: all worker threads exited with work in flight"),
    }
}

/// Results that arrived out of order, waiting for their predecessors.
struct Reorder<R> {
    /// Sequence number of the next item to hand out.
    next_seq: usize,
    /// Sequence number of `pending[0]`: the next result to consume.
    base: usize,
    pending: VecDeque<Option<R>>,
}

impl<R> Reorder<R> {
    fn new() -> Self {
        Self {
            next_seq: 0,
            base: 0,
            pending: VecDeque::new(),
        }
    }

    fn in_flight(&self) -> usize {
        self.next_seq - self.base
    }

    fn accept<E>(
        &mut self,
        (seq, result): (usize, Result<R, Panic>),
        consume: &mut impl FnMut(R) -> Result<(), E>,
    ) -> Result<(), E> {
        let value = match result {
            Ok(value) => value,
            Err(payload) => panic::resume_unwind(payload),
        };
        let index = seq - self.base;
        if self.pending.len() <= index {
            self.pending.resize_with(index + 1, || None);
        }
        self.pending[index] = Some(value);
        while let Some(Some(_)) = self.pending.front() {
            if let Some(Some(value)) = self.pending.pop_front() {
                self.base += 1;
                consume(value)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(threads: usize, n: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let items = (0..n).map(Ok::<usize, String>);
        ordered_map(
            threads,
            8,
            items,
            || 0usize,
            |calls, x| {
                *calls += 1;
                // Make late items finish first now and then.
                if x % 7 == 0 {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
                x * 2
            },
            |r| {
                out.push(r);
                Ok(())
            },
        )
        .expect("no error");
        out
    }

    #[test]
    fn results_come_back_in_item_order_for_any_thread_count() {
        let expected: Vec<usize> = (0..500).map(|x| x * 2).collect();
        for threads in [1, 2, 3, 8] {
            assert_eq!(run(threads, 500), expected, "threads={threads}");
        }
    }

    #[test]
    fn batches_keep_order_and_errors_keep_their_place() {
        let items = vec![Ok(1), Ok(2), Ok(3), Err("e"), Ok(5)];
        let got: Vec<Result<Vec<i32>, &str>> = batched(items.into_iter(), 2).collect();
        assert_eq!(
            got,
            vec![Ok(vec![1, 2]), Ok(vec![3]), Err("e"), Ok(vec![5])]
        );
        let none: Vec<Result<Vec<i32>, &str>> = batched(std::iter::empty(), 4).collect();
        assert!(none.is_empty());
        let items = vec![Ok::<u64, ()>(5), Ok(5), Ok(1), Ok(20), Ok(1)];
        let got: Vec<Vec<u64>> = batched_by_weight(items.into_iter(), 10, 10, |w| *w)
            .map(|b| b.expect("ok"))
            .collect();
        assert_eq!(got, vec![vec![5, 5], vec![1, 20], vec![1]]);
    }

    #[test]
    fn producer_error_stops_the_run() {
        let items = (0..100).map(|x| if x == 50 { Err(x) } else { Ok(x) });
        let mut seen = 0;
        let result = ordered_map(
            2,
            4,
            items,
            || (),
            |_, x| x,
            |_| {
                seen += 1;
                Ok(())
            },
        );
        assert_eq!(result, Err(50));
        assert!(seen <= 50);
    }

    #[test]
    fn consumer_error_stops_the_run() {
        let items = (0..1000).map(Ok::<usize, usize>);
        let result = ordered_map(
            2,
            4,
            items,
            || (),
            |_, x| x,
            |x| if x == 10 { Err(x) } else { Ok(()) },
        );
        assert_eq!(result, Err(10));
    }

    #[test]
    #[should_panic(expected = "boom")]
    fn worker_panic_is_re_raised() {
        let items = (0..10).map(Ok::<usize, ()>);
        let _ = ordered_map(
            2,
            4,
            items,
            || (),
            |_, x| {
                if x == 3 {
                    panic!("boom");
                }
                x
            },
            |_| Ok(()),
        );
    }
}
