//! Blocks of inputs: an index of a batch submitted in one call
//! ([`crate::ports::Backend::submit_batch`], an Indexed Job on gke) that
//! runs many inputs, one after the other, in one pod.
//!
//! A pod that runs one input pays for a whole start (an interpreter, the
//! download, extract and import of the job) per input; a block's pod pays
//! for it once and then runs each input in a fork of the interpreter that
//! imported the function (`docs/runner-protocol.md`, block mode). What
//! Kubernetes sees is the block: its pod and its index. What each input
//! did, its pod tells the store, one empty object per attempt started and
//! per attempt ended, named by what they say
//! (`_groups/{group_id}/blocks/{block:08}/{input:08}.{attempt:03}.{what}.{unix_ms}.{pod}`,
//! [`BlockMarker`]), so that one listing of a block's folder gives every
//! input's state in it ([`block_states`]). Objects of their own, not one
//! progress document written again and again: a GCS object takes about
//! one write a second.
//!
//! Pure: the backend lists, these functions read.

use std::sync::Arc;

use crate::budget::{Attempt, Outcome};
use crate::record::UtcTimestamp;
use crate::status::{JobState, JobStatus, StatusReason};

/// The most inputs one index runs: a block's markers (two per attempt)
/// then fit one page of a listing (1,000 names).
pub const MAX_BLOCK_SIZE: usize = 400;
/// Blocks per unit of parallelism once each would still hold
/// [`MIN_SPLIT_BLOCK`] inputs: a block that runs long then holds a quarter
/// of a worker's share, not all of it.
const BLOCKS_PER_SLOT: usize = 4;
/// The smallest block a worker's share is split into.
const MIN_SPLIT_BLOCK: usize = 8;
/// The runner's exit when its input or spec cannot be read: a retry
/// cannot mend it.
const EXIT_BAD_INVOCATION: i32 = 2;

/// Inputs per index for a batch of `inputs` inputs with at most
/// `parallelism` running at once: one block per unit of parallelism (each
/// pod starts once and runs its share), four per unit once each block
/// would still hold eight inputs, at most [`MAX_BLOCK_SIZE`]. 1 when every
/// input runs at once (there is nothing to share).
///
/// ```
/// use kinetic_core::batch::block_size;
/// assert_eq!(block_size(6, 2), 3); // two pods of three inputs
/// assert_eq!(block_size(3, 3), 1); // all at once: a pod each
/// assert_eq!(block_size(2_000, 2), 250); // eight blocks, four a worker
/// assert_eq!(block_size(100_000, 2), 400);
/// ```
pub fn block_size(inputs: usize, parallelism: usize) -> usize {
    let inputs = inputs.max(1);
    let parallelism = parallelism.clamp(1, inputs);
    let share = inputs.div_ceil(parallelism);
    let per_slot = if share >= BLOCKS_PER_SLOT * MIN_SPLIT_BLOCK {
        BLOCKS_PER_SLOT
    } else {
        1
    };
    inputs
        .div_ceil(parallelism * per_slot)
        .clamp(1, MAX_BLOCK_SIZE)
}

/// What a marker says of its input's attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerKind {
    /// The attempt started (`start`).
    Start,
    /// The attempt ended with this exit code (`exit-{code}`); a run ended
    /// by a signal reads `128 + signal`, as a shell says it.
    Exit(i32),
}

/// One marker of a block's folder, parsed from its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockMarker {
    /// The input (its index in the batch).
    pub input: usize,
    /// Its attempt (1 for the first; `KINETIC_ATTEMPT`).
    pub attempt: u32,
    /// Started, or ended with a code.
    pub kind: MarkerKind,
    /// When, in Unix milliseconds.
    pub at_ms: u64,
    /// The pod that wrote it (shared: a block's markers name a pod or
    /// two, and a reader that keeps many keeps each name once).
    pub pod: Arc<str>,
}

impl BlockMarker {
    /// The marker's object name in its block's folder.
    ///
    /// ```
    /// use kinetic_core::batch::{BlockMarker, MarkerKind};
    /// let m = BlockMarker { input: 7, attempt: 2, kind: MarkerKind::Exit(1), at_ms: 5, pod: "p-1".into() };
    /// assert_eq!(m.name(), "00000007.002.exit-1.5.p-1");
    /// assert_eq!(BlockMarker::parse(&m.name()), Some(m));
    /// ```
    pub fn name(&self) -> String {
        let what = match self.kind {
            MarkerKind::Start => "start".to_owned(),
            MarkerKind::Exit(code) => format!("exit-{code}"),
        };
        format!(
            "{:08}.{:03}.{what}.{}.{}",
            self.input, self.attempt, self.at_ms, self.pod
        )
    }

    /// The marker a name (the last part of its path) holds; `None` for any
    /// other name.
    pub fn parse(name: &str) -> Option<Self> {
        let mut parts = name.splitn(5, '.');
        let input = parts.next()?;
        let attempt = parts.next()?;
        let what = parts.next()?;
        let at_ms = parts.next()?.parse().ok()?;
        let pod = Arc::from(parts.next()?);
        if input.len() != 8 || attempt.len() != 3 {
            return None;
        }
        let kind = match what {
            "start" => MarkerKind::Start,
            w => MarkerKind::Exit(w.strip_prefix("exit-")?.parse().ok()?),
        };
        Some(Self {
            input: input.parse().ok()?,
            attempt: attempt.parse().ok().filter(|a| *a >= 1)?,
            kind,
            at_ms,
            pod,
        })
    }
}

/// The markers a block's folder holds, from its object names (any other
/// name skipped), each pod's name held once however many markers name it.
pub fn parse_markers<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<BlockMarker> {
    let mut pods: Vec<Arc<str>> = Vec::new();
    names
        .into_iter()
        .filter_map(BlockMarker::parse)
        .map(|mut m| {
            match pods.iter().find(|p| ***p == *m.pod) {
                Some(p) => m.pod = p.clone(),
                None => pods.push(m.pod.clone()),
            }
            m
        })
        .collect()
}

/// What Kubernetes says of a block's index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockRun {
    /// No pod of it yet: it waits for its turn (`parallelism`).
    Waiting,
    /// A pod of it, named so, is pending or running.
    Active(String),
    /// Its last pod failed and the Job starts another (within its
    /// per-index limit): the input that pod was running was lost.
    Restarting,
    /// Its pod ended the block (exit 0): every input it started ended.
    Completed,
    /// No pod runs it again (its pods failed past the per-index limit, the
    /// Job failed, or it is being deleted): why, in words.
    Ended(String),
}

/// The rules of one block: which inputs, how often each is retried,
/// whether the batch stopped starting inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRules {
    /// The block's first input.
    pub first: usize,
    /// How many inputs it holds.
    pub len: usize,
    /// Retries per input.
    pub retries: u32,
    /// The batch stops starting inputs (fail-fast): an input that failed
    /// is not run again.
    pub stopping: bool,
}

/// Every child's state of one block, `(input, attempt, state)`, from its
/// folder's markers and what Kubernetes says of it.
///
/// - An input with no marker is its attempt-1 child `PENDING` (`FAILED`
///   once the block ended without running it).
/// - An attempt with an `exit-` marker ended: `SUCCEEDED` on 0, else
///   `FAILED` with its exit code; every earlier attempt failed.
/// - An attempt started and not ended is `RUNNING` when it is the latest
///   start of the block's active pod; otherwise its pod ended under it:
///   `FAILED`, lost with its pod.
/// - After a failed latest attempt, the next attempt's child is `PENDING`
///   while the block may still run it: within `retries`, not the runner's
///   bad-invocation exit, the block active or restarting, not stopping.
pub fn block_states(
    rules: &BlockRules,
    markers: &[BlockMarker],
    run: &BlockRun,
) -> Vec<(usize, u32, JobState)> {
    let block_end = rules.first + rules.len;
    // The attempt the active pod runs: its latest start, by that pod (a
    // start by an earlier pod of the block was lost with it).
    let running_now = match run {
        BlockRun::Active(pod) => markers
            .iter()
            .filter(|m| m.kind == MarkerKind::Start && *m.pod == **pod)
            .max_by_key(|m| (m.at_ms, m.input, m.attempt))
            .map(|m| (m.input, m.attempt)),
        _ => None,
    };
    let may_run_more = matches!(
        run,
        BlockRun::Active(_) | BlockRun::Restarting | BlockRun::Waiting
    ) && !rules.stopping;
    let mut out = Vec::new();
    for input in rules.first..block_end {
        let mut tries: std::collections::BTreeMap<
            u32,
            (Option<&BlockMarker>, Option<&BlockMarker>),
        > = std::collections::BTreeMap::new();
        for m in markers.iter().filter(|m| m.input == input) {
            let entry = tries.entry(m.attempt).or_default();
            match m.kind {
                MarkerKind::Start => entry.0 = Some(m),
                MarkerKind::Exit(_) => entry.1 = Some(m),
            }
        }
        let Some(&last) = tries.keys().next_back() else {
            let state = match run {
                BlockRun::Ended(why) => {
                    JobState::new(JobStatus::Failed).with_reason(StatusReason::BackendError {
                        message: format!("its block ended before this input ran: {why}"),
                    })
                }
                _ => JobState::new(JobStatus::Pending),
            };
            out.push((input, 1, state));
            continue;
        };
        for earlier in 1..last {
            let state = match tries.get(&earlier) {
                Some(&(start, end)) => attempt_state(earlier, start, end, false),
                None => JobState::new(JobStatus::Failed),
            };
            out.push((input, earlier, state));
        }
        let (start, end) = tries[&last];
        let running = end.is_none() && running_now == Some((input, last));
        let state = attempt_state(last, start, end, running);
        let retryable = state.status == JobStatus::Failed
            && last <= rules.retries
            && !matches!(
                end.map(|m| m.kind),
                Some(MarkerKind::Exit(EXIT_BAD_INVOCATION))
            );
        out.push((input, last, state));
        if retryable && may_run_more {
            out.push((input, last + 1, JobState::new(JobStatus::Pending)));
        }
    }
    out
}

/// One attempt's state from its markers (`running`: its pod runs it now).
fn attempt_state(
    number: u32,
    start: Option<&BlockMarker>,
    end: Option<&BlockMarker>,
    running: bool,
) -> JobState {
    let stamp = |m: &BlockMarker| UtcTimestamp::from_unix_seconds(m.at_ms / 1000);
    let host = start.or(end).map(|m| m.pod.to_string()).unwrap_or_default();
    let mut attempt = Attempt {
        number,
        host,
        started: start.map(stamp),
        ended: end.map(stamp),
        outcome: None,
        reason: None,
    };
    let state = match end.map(|m| m.kind) {
        Some(MarkerKind::Exit(0)) => {
            attempt.outcome = Some(Outcome::Succeeded);
            JobState::new(JobStatus::Succeeded)
        }
        Some(MarkerKind::Exit(code)) => {
            attempt.outcome = Some(Outcome::Failed);
            attempt.reason = Some(format!("exited with code {code}"));
            JobState::new(JobStatus::Failed).with_reason(StatusReason::ExitCode { code })
        }
        _ if running => JobState::new(JobStatus::Running),
        _ => {
            let why = "its pod ended while it ran";
            attempt.outcome = Some(Outcome::Failed);
            attempt.reason = Some(why.to_owned());
            JobState::new(JobStatus::Failed).with_reason(StatusReason::BackendError {
                message: format!("lost: {why}"),
            })
        }
    };
    state.with_attempts(vec![attempt])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(input: usize, attempt: u32, at_ms: u64) -> BlockMarker {
        BlockMarker {
            input,
            attempt,
            kind: MarkerKind::Start,
            at_ms,
            pod: "pod-a".into(),
        }
    }

    fn exit(input: usize, attempt: u32, code: i32, at_ms: u64) -> BlockMarker {
        BlockMarker {
            kind: MarkerKind::Exit(code),
            ..start(input, attempt, at_ms)
        }
    }

    fn rules(retries: u32) -> BlockRules {
        BlockRules {
            first: 10,
            len: 4,
            retries,
            stopping: false,
        }
    }

    fn statuses(states: &[(usize, u32, JobState)]) -> Vec<(usize, u32, JobStatus)> {
        states.iter().map(|(i, a, s)| (*i, *a, s.status)).collect()
    }

    #[test]
    fn a_running_block_has_ended_running_and_pending_inputs() {
        let markers = [
            start(10, 1, 1),
            exit(10, 1, 0, 2),
            start(11, 1, 3),
            exit(11, 1, 1, 4),
            start(11, 2, 5),
        ];
        let got = block_states(&rules(1), &markers, &BlockRun::Active("pod-a".into()));
        assert_eq!(
            statuses(&got),
            vec![
                (10, 1, JobStatus::Succeeded),
                (11, 1, JobStatus::Failed),
                (11, 2, JobStatus::Running),
                (12, 1, JobStatus::Pending),
                (13, 1, JobStatus::Pending),
            ]
        );
        assert_eq!(
            got[1].2.reason,
            Some(StatusReason::ExitCode { code: 1 }),
            "the failed attempt keeps its exit code"
        );
        assert_eq!(got[2].2.attempts[0].number, 2);
        assert_eq!(got[2].2.attempts[0].host, "pod-a");
    }

    #[test]
    fn a_failure_within_its_retries_has_its_next_attempt_pending_unless_stopping() {
        let markers = [start(10, 1, 1), exit(10, 1, 3, 2)];
        let got = block_states(&rules(1), &markers, &BlockRun::Active("pod-a".into()));
        assert_eq!(statuses(&got)[1], (10, 2, JobStatus::Pending));
        let stopping = BlockRules {
            stopping: true,
            ..rules(1)
        };
        let got = block_states(&stopping, &markers, &BlockRun::Active("pod-a".into()));
        assert_eq!(
            statuses(&got)[..2],
            [(10, 1, JobStatus::Failed), (11, 1, JobStatus::Pending)]
        );
        let spent = block_states(&rules(0), &markers, &BlockRun::Active("pod-a".into()));
        assert_eq!(statuses(&spent)[1], (11, 1, JobStatus::Pending));
        let bad = [start(10, 1, 1), exit(10, 1, 2, 2)];
        let got = block_states(&rules(3), &bad, &BlockRun::Active("pod-a".into()));
        assert_eq!(
            statuses(&got)[1],
            (11, 1, JobStatus::Pending),
            "exit 2 is never retried"
        );
    }

    #[test]
    fn an_attempt_its_pod_ended_under_is_lost_and_run_again_by_the_next_pod() {
        let markers = [start(10, 1, 1), exit(10, 1, 0, 2), start(11, 1, 3)];
        let got = block_states(&rules(1), &markers, &BlockRun::Restarting);
        assert_eq!(
            statuses(&got)[1..3],
            [(11, 1, JobStatus::Failed), (11, 2, JobStatus::Pending)]
        );
        assert!(
            matches!(&got[1].2.reason, Some(StatusReason::BackendError { message }) if message.starts_with("lost")),
            "{:?}",
            got[1].2.reason
        );
        // A new pod runs the block and has started nothing yet: the old
        // pod's start is lost all the same.
        let got = block_states(&rules(1), &markers, &BlockRun::Active("pod-b".into()));
        assert_eq!(
            statuses(&got)[1..3],
            [(11, 1, JobStatus::Failed), (11, 2, JobStatus::Pending)]
        );
        // Not the latest start: a later input started, so this one's pod
        // is gone even though the block is active again.
        let markers = [start(10, 1, 1), start(11, 1, 3)];
        let got = block_states(&rules(0), &markers, &BlockRun::Active("pod-a".into()));
        assert_eq!(
            statuses(&got)[..2],
            [(10, 1, JobStatus::Failed), (11, 1, JobStatus::Running)]
        );
    }

    #[test]
    fn a_block_that_ended_fails_the_inputs_it_never_ran() {
        let markers = [start(10, 1, 1), exit(10, 1, 0, 2)];
        let got = block_states(&rules(0), &markers, &BlockRun::Ended("deleted".into()));
        assert_eq!(
            statuses(&got),
            vec![
                (10, 1, JobStatus::Succeeded),
                (11, 1, JobStatus::Failed),
                (12, 1, JobStatus::Failed),
                (13, 1, JobStatus::Failed),
            ]
        );
        // A completed block (its pod stopped on a stop marker) leaves the
        // inputs it did not start pending: nothing runs them.
        let got = block_states(&rules(0), &markers, &BlockRun::Completed);
        assert_eq!(statuses(&got)[1], (11, 1, JobStatus::Pending));
    }

    #[test]
    fn marker_names_round_trip_and_other_names_are_not_markers() {
        for m in [start(3, 1, 99), exit(16_777_215, 255, 137, 1)] {
            assert_eq!(BlockMarker::parse(&m.name()), Some(m));
        }
        let dotted = BlockMarker {
            pod: "a.b.c".into(),
            ..start(1, 1, 1)
        };
        assert_eq!(BlockMarker::parse(&dotted.name()), Some(dotted));
        for name in [
            "stop",
            "00000001.001.start",
            "1.001.start.5.p",
            "00000001.000.start.5.p",
            "00000001.001.exit-x.5.p",
            "00000001.001.other.5.p",
        ] {
            assert_eq!(BlockMarker::parse(name), None, "{name}");
        }
    }

    #[test]
    fn a_folders_markers_share_their_pod_names() {
        let names = [
            "00000001.001.start.1.p-a",
            "other",
            "00000001.001.exit-0.2.p-a",
        ];
        let got = parse_markers(names);
        assert_eq!(got.len(), 2);
        assert!(Arc::ptr_eq(&got[0].pod, &got[1].pod));
        // What a reader that keeps a finished block's markers holds per
        // marker (docs/batches.md gives it).
        assert_eq!(std::mem::size_of::<BlockMarker>(), 48);
    }

    #[test]
    fn block_sizes_give_each_worker_one_block_or_four() {
        assert_eq!(block_size(1, 1), 1);
        assert_eq!(block_size(5, 1), 5);
        assert_eq!(block_size(4, 3), 2);
        assert_eq!(block_size(6, 100), 1);
        assert_eq!(block_size(31, 1), 31);
        assert_eq!(block_size(32, 1), 8);
        assert_eq!(block_size(0, 0), 1);
    }
}
