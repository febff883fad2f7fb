//! Properties of the batch state machine, over random event sequences
//! against a simulated world that answers its commands.

use std::collections::{BTreeMap, BTreeSet};

use kinetic_core::batch::{BatchConfig, BatchMachine, Command, Event, Slot, result_order};
use kinetic_core::ids::JobId;
use kinetic_core::status::JobStatus;
use proptest::prelude::*;

/// One thing the world does next; indices pick among what is outstanding.
#[derive(Debug, Clone)]
enum Action {
    SubmitOk(usize),
    SubmitErr(usize, bool),
    Observe(usize, u8),
    ObserveStale(usize, u8),
    Cancel,
    Pump,
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        6 => any::<usize>().prop_map(Action::SubmitOk),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(i, r)| Action::SubmitErr(i, r)),
        6 => (any::<usize>(), 0u8..5).prop_map(|(i, s)| Action::Observe(i, s)),
        1 => (any::<usize>(), 0u8..5).prop_map(|(i, s)| Action::ObserveStale(i, s)),
        1 => Just(Action::Cancel),
        1 => Just(Action::Pump),
    ]
}

/// A batch's size and settings, and the depth of its worker pool's queue
/// when it runs on one (`set_worker_pool`, `set_prefetch`).
fn config() -> impl Strategy<Value = (usize, BatchConfig, Option<usize>)> {
    (
        1usize..25,
        prop::option::of(1usize..6),
        0u32..3,
        any::<bool>(),
        any::<bool>(),
        prop::option::of(0usize..30),
    )
        .prop_map(|(total, limit, retries, ff, cancel, pool)| {
            let config = BatchConfig::default()
                .max_concurrent(limit)
                .retries(retries)
                .fail_fast(ff, cancel);
            (total, config, pool)
        })
}

fn status(n: u8) -> JobStatus {
    JobStatus::ALL[usize::from(n) % 5]
}

/// The world: submissions in flight, jobs it made, and what the machine asked.
struct World {
    machine: BatchMachine,
    total: usize,
    config: BatchConfig,
    submitting: BTreeMap<usize, u32>,
    next_job: u32,
    submits_per_index: BTreeMap<usize, u32>,
    succeeded: BTreeSet<usize>,
    /// The prefetch of a batch on a worker pool.
    pool: Option<usize>,
}

impl World {
    fn new((total, config, pool): (usize, BatchConfig, Option<usize>)) -> Self {
        let mut machine = BatchMachine::new(total, config.clone());
        if let Some(depth) = pool {
            machine.set_worker_pool(true);
            machine.set_prefetch(depth);
        }
        Self {
            machine,
            total,
            config,
            submitting: BTreeMap::new(),
            next_job: 0,
            submits_per_index: BTreeMap::new(),
            succeeded: BTreeSet::new(),
            pool,
        }
    }

    fn job(&mut self) -> JobId {
        self.next_job += 1;
        format!("job-{:08x}", self.next_job).parse().unwrap()
    }

    fn apply(&mut self, event: Event) -> Result<(), TestCaseError> {
        let before: Vec<Slot> = self.machine.slots().to_vec();
        let cancelled = self.machine.is_cancelled();
        let machine = std::mem::replace(&mut self.machine, BatchMachine::observer(0));
        let (machine, commands) = machine.step(event.clone());
        self.machine = machine;
        let cancelled_now: BTreeSet<usize> = commands
            .iter()
            .filter_map(|c| match c {
                Command::Cancel { index, .. } => Some(*index),
                _ => None,
            })
            .collect();
        prop_assert_eq!(
            cancelled_now.len(),
            commands
                .iter()
                .filter(|c| matches!(c, Command::Cancel { .. }))
                .count(),
            "a job is cancelled once per step"
        );
        if self.pool.is_some() && self.machine.is_stopped() {
            // On a pool, a stopped batch leaves no job waiting in the
            // pool's queue: each one seen queued (or just submitted) was
            // cancelled in this very step and its input skipped.
            for (i, slot) in self.machine.slots().iter().enumerate() {
                prop_assert!(
                    !matches!(
                        slot,
                        Slot::Active {
                            status: JobStatus::Pending,
                            ..
                        }
                    ),
                    "input {} still queued in the pool after the stop",
                    i
                );
                let was_queued = matches!(
                    before[i],
                    Slot::Active {
                        status: JobStatus::Pending,
                        ..
                    }
                ) || (matches!(before[i], Slot::Submitting { .. })
                    && matches!(&event, Event::Submitted { index, .. } if *index == i));
                if was_queued && matches!(slot, Slot::Skipped { .. }) {
                    prop_assert!(
                        cancelled_now.contains(&i),
                        "input {} skipped without a cancel",
                        i
                    );
                }
            }
        }
        // Without a pool, or before a stop, nothing is withdrawn: a
        // submitted input is skipped only on a pool.
        for (i, (old, new)) in before.iter().zip(self.machine.slots()).enumerate() {
            if matches!(old, Slot::Active { .. }) && matches!(new, Slot::Skipped { .. }) {
                prop_assert!(self.pool.is_some(), "input {} withdrawn off a pool", i);
                prop_assert!(
                    matches!(
                        old,
                        Slot::Active {
                            status: JobStatus::Pending,
                            ..
                        }
                    ),
                    "input {} seen running was skipped",
                    i
                );
            }
        }
        // Terminal slots never change.
        for (i, (old, new)) in before.iter().zip(self.machine.slots()).enumerate() {
            if old.is_terminal() {
                prop_assert_eq!(old, new, "slot {} left a terminal state on {:?}", i, event);
            }
        }
        for command in commands {
            if let Command::Submit { index, attempt } = command {
                prop_assert!(!cancelled, "a cancelled batch submitted input {}", index);
                // No input is submitted while it is in flight, or after it succeeded.
                prop_assert!(
                    !self.submitting.contains_key(&index),
                    "input {} submitted twice at once",
                    index
                );
                // A running job is replaced only once it was seen failed.
                let ended_now = matches!(
                    &event,
                    Event::Observed { index: i, job_id, status: JobStatus::Failed | JobStatus::NotFound }
                        if *i == index && before[index].job_id() == Some(job_id)
                );
                prop_assert!(
                    !matches!(before[index], Slot::Active { .. }) || ended_now,
                    "input {} resubmitted while its job runs",
                    index
                );
                prop_assert!(
                    !self.succeeded.contains(&index),
                    "input {} resubmitted after success",
                    index
                );
                let n = self.submits_per_index.entry(index).or_default();
                *n += 1;
                prop_assert_eq!(attempt, *n, "attempts count up by one");
                // Retries are bounded.
                prop_assert!(
                    *n <= self.config.retries + 1,
                    "input {} tried {} times",
                    index,
                    n
                );
                self.submitting.insert(index, attempt);
            }
        }
        // Counts always sum to the total; the limit holds.
        prop_assert_eq!(self.machine.counts().total(), self.total);
        if let Some(limit) = self.config.max_concurrent {
            prop_assert!(self.machine.in_flight() <= limit + self.pool.unwrap_or(0));
        }
        for (i, slot) in self.machine.slots().iter().enumerate() {
            if matches!(
                slot,
                Slot::Ended {
                    status: JobStatus::Succeeded,
                    ..
                }
            ) {
                self.succeeded.insert(i);
            }
        }
        Ok(())
    }

    fn step(&mut self, action: &Action) -> Result<(), TestCaseError> {
        let active: Vec<(usize, JobId)> = self
            .machine
            .active_jobs()
            .map(|(i, j)| (i, j.clone()))
            .collect();
        match action {
            Action::SubmitOk(k) | Action::SubmitErr(k, _) if !self.submitting.is_empty() => {
                let index = *self
                    .submitting
                    .keys()
                    .nth(k % self.submitting.len())
                    .unwrap();
                self.submitting.remove(&index);
                let event = match action {
                    Action::SubmitErr(_, retryable) => Event::SubmitFailed {
                        index,
                        retryable: *retryable,
                    },
                    _ => Event::Submitted {
                        index,
                        job_id: self.job(),
                    },
                };
                self.apply(event)
            }
            Action::Observe(k, s) if !active.is_empty() => {
                let (index, job_id) = active[k % active.len()].clone();
                self.apply(Event::Observed {
                    index,
                    job_id,
                    status: status(*s),
                })
            }
            Action::ObserveStale(k, s) => {
                let index = k % self.total;
                let job_id = self.job();
                self.apply(Event::Observed {
                    index,
                    job_id,
                    status: status(*s),
                })
            }
            Action::Cancel => self.apply(Event::Cancel),
            _ => self.apply(Event::Pump),
        }
    }

    /// Answer everything successfully until the machine is done.
    fn finish(&mut self) -> Result<(), TestCaseError> {
        for _ in 0..10_000 {
            if let Some((&index, _)) = self.submitting.iter().next() {
                self.submitting.remove(&index);
                let job_id = self.job();
                self.apply(Event::Submitted { index, job_id })?;
                continue;
            }
            let active: Option<(usize, JobId)> = self
                .machine
                .active_jobs()
                .map(|(i, j)| (i, j.clone()))
                .next();
            if let Some((index, job_id)) = active {
                self.apply(Event::Observed {
                    index,
                    job_id,
                    status: JobStatus::Succeeded,
                })?;
                continue;
            }
            break;
        }
        prop_assert!(self.machine.is_done(), "{:?}", self.machine.counts());
        prop_assert!(self.machine.is_submission_complete());
        prop_assert!(!self.machine.needs_driver());
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn the_machine_keeps_its_invariants(config in config(), actions in prop::collection::vec(action(), 0..200)) {
        let mut world = World::new(config);
        world.apply(Event::Pump)?;
        for a in &actions {
            world.step(a)?;
        }
        world.finish()?;
        // Every ended input appears once in the completion order.
        let completed = world.machine.completed().to_vec();
        let unique: BTreeSet<usize> = completed.iter().copied().collect();
        prop_assert_eq!(unique.len(), completed.len());
        let ended = world.machine.slots().iter().filter(|s| matches!(s, Slot::Ended { .. })).count();
        prop_assert_eq!(ended, completed.len());
        // The manifest names each submitted input once, with its latest job.
        let children: Vec<usize> = world.machine.children().map(|(i, _, _)| i).collect();
        let named: BTreeSet<usize> = children.iter().copied().collect();
        prop_assert_eq!(named.len(), children.len());
        for (i, job, attempts) in world.machine.children() {
            if let Some(id) = world.machine.slot(i).and_then(Slot::job_id) {
                prop_assert_eq!(id, job);
            }
            prop_assert!(attempts >= 1 && attempts <= world.config.retries + 1);
        }
    }

    #[test]
    fn results_come_in_input_order_when_asked(config in config(), actions in prop::collection::vec(action(), 0..100)) {
        let mut world = World::new(config);
        world.apply(Event::Pump)?;
        for a in &actions {
            world.step(a)?;
        }
        world.finish()?;
        let total = world.total;
        let ordered = result_order(&world.machine, true);
        prop_assert_eq!(ordered, (0..total).collect::<Vec<_>>());
        let unordered = result_order(&world.machine, false);
        let mut sorted = unordered.clone();
        sorted.sort_unstable();
        prop_assert_eq!(sorted, (0..total).collect::<Vec<_>>(), "a permutation of the inputs");
        let n = world.machine.completed().len();
        prop_assert_eq!(&unordered[..n], world.machine.completed(), "ended jobs first, in completion order");
    }

    #[test]
    fn abandon_then_resume_submits_each_input_at_most_once_more(
        config in config(),
        actions in prop::collection::vec(action(), 0..60),
    ) {
        let mut world = World::new(config.clone());
        world.apply(Event::Pump)?;
        for a in &actions {
            world.step(a)?;
        }
        let cancelled = world.machine.is_cancelled() || world.machine.is_stopped();
        world.apply(Event::Abandon)?;
        // In-flight submissions are lost with the process; a resume makes
        // the same attempt again (with the same job id).
        for (index, _) in std::mem::take(&mut world.submitting) {
            *world.submits_per_index.entry(index).or_default() -= 1;
        }
        prop_assert_eq!(world.machine.counts().queued + world.machine.counts().submitting, 0);
        world.apply(Event::Resume)?;
        if !cancelled {
            world.finish()?;
        }
    }
}
