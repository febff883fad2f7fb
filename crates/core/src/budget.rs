//! Failure budgets: how many times a job is run again after its attempt
//! ends badly, counted apart for the two kinds of failure.
//!
//! - The **infrastructure** budget ([`Budgets::restarts`]) absorbs what the
//!   job did not cause: its node was preempted (a Spot VM reclaimed), lost
//!   or drained (the pod evicted). Spot jobs get [`SPOT_RESTARTS`] by
//!   default, other jobs none.
//! - The **application** budget ([`Budgets::retries`]) absorbs what the
//!   job did: an exception, a non-zero exit, running out of memory. It is 0
//!   by default: a failing function fails at once.
//!
//! [`decide`] is the pure rule every backend applies: given how the
//! attempts so far ended, run again (and which attempt that is) or fail
//! (with the message that names the spent budget and how to raise it).
//! Each attempt is kept as an [`Attempt`] in the job's history
//! (`{job_id}/attempts.json`, see [`crate::layout::attempts`]).
//!
//! ```
//! use kinetic_core::budget::{BudgetRequest, Decision, Outcome, decide};
//!
//! let budgets = BudgetRequest::default().resolve(true); // a spot job
//! assert_eq!((budgets.restarts, budgets.retries), (3, 0));
//! let decision = decide(budgets, &[Outcome::Preempted]);
//! assert_eq!(decision, Decision::Restart { attempt: 2, of: 4, after: Outcome::Preempted });
//! assert_eq!(decision.to_string(), "preempted, restarting (attempt 2 of 4)");
//! assert!(matches!(decide(budgets, &[Outcome::Failed]), Decision::Fail { .. }));
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::record::UtcTimestamp;

/// The variable that tells the job which attempt it is: `1` for the first
/// run, one more for each run after a failure (a retry) or a disruption
/// (a restart). Set by the local supervisor, or by the runner from the
/// start markers of a single-host job ([`crate::layout::starts`]).
pub const ATTEMPT_ENV: &str = "KINETIC_ATTEMPT";

/// The variable that names the pod a runner runs in (the downward API's
/// `metadata.name`), kept in the run's start marker.
pub const POD_NAME_ENV: &str = "KINETIC_POD_NAME";

/// The infrastructure restart budget of a Spot job when none is asked.
pub const SPOT_RESTARTS: u32 = 3;

/// The largest budget accepted (either kind): past it a job that cannot
/// succeed would run for ever.
pub const MAX_BUDGET: u32 = 100;

/// The budgets a job asked for; `None` takes the default
/// ([`BudgetRequest::resolve`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BudgetRequest {
    /// Application retries (`--retries`, `retries=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    /// Infrastructure restarts (`--restarts`, `restarts=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarts: Option<u32>,
}

impl BudgetRequest {
    /// True when the job asked for either budget explicitly.
    pub fn is_explicit(&self) -> bool {
        self.retries.is_some() || self.restarts.is_some()
    }

    /// The budgets to apply: what was asked, else 0 retries and
    /// [`SPOT_RESTARTS`] restarts for a Spot job (0 otherwise).
    pub fn resolve(&self, spot: bool) -> Budgets {
        Budgets {
            retries: self.retries.unwrap_or(0),
            restarts: self
                .restarts
                .unwrap_or(if spot { SPOT_RESTARTS } else { 0 }),
        }
    }

    /// Check both budgets are within [`MAX_BUDGET`].
    pub fn validate(&self) -> Result<(), BudgetError> {
        for (name, value) in [("retries", self.retries), ("restarts", self.restarts)] {
            if let Some(v) = value
                && v > MAX_BUDGET
            {
                return Err(BudgetError {
                    name,
                    input: v.to_string(),
                });
            }
        }
        Ok(())
    }
}

/// A budget that is not a whole number from 0 to [`MAX_BUDGET`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid {name} budget '{input}': expected a whole number from 0 to {MAX_BUDGET} (how many times the job may run again)"
)]
#[non_exhaustive]
pub struct BudgetError {
    /// `retries` or `restarts`.
    pub name: &'static str,
    /// The text given.
    pub input: String,
}

/// Parse a budget (`retries` or `restarts`) from text.
pub fn parse_budget(name: &'static str, text: &str) -> Result<u32, BudgetError> {
    let err = || BudgetError {
        name,
        input: text.to_owned(),
    };
    let v: u32 = text.trim().parse().map_err(|_| err())?;
    if v > MAX_BUDGET {
        return Err(err());
    }
    Ok(v)
}

/// The budgets a job runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Budgets {
    /// Application failures absorbed (run again after each).
    pub retries: u32,
    /// Infrastructure failures absorbed (run again after each).
    pub restarts: u32,
}

impl Budgets {
    /// The most attempts a job may make: one, plus each budget.
    pub fn max_attempts(&self) -> u32 {
        1 + self.retries + self.restarts
    }

    /// True when neither budget allows a second attempt.
    pub fn is_zero(&self) -> bool {
        self.retries == 0 && self.restarts == 0
    }
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It finished successfully.
    Succeeded,
    /// The job itself failed (an exception, a non-zero exit, out of memory).
    Failed,
    /// Its node was preempted (Spot VM reclaimed, node shut down).
    Preempted,
    /// Its pod was evicted (node drained, pressure) or its node was lost.
    Evicted,
}

impl Outcome {
    /// True for the infrastructure's failures (preempted, evicted).
    pub fn is_infrastructure(self) -> bool {
        matches!(self, Self::Preempted | Self::Evicted)
    }

    /// The lower-case word: `succeeded`, `failed`, `preempted`, `evicted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Preempted => "preempted",
            Self::Evicted => "evicted",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One attempt of a job, as its history keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// 1 for the first attempt.
    pub number: u32,
    /// Where it ran: the pod (Kubernetes) or the process (local).
    pub host: String,
    /// When it started running, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<UtcTimestamp>,
    /// When it ended, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<UtcTimestamp>,
    /// How it ended; `None` while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// Why, in words (`exited with code 1`, `node was preempted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "attempt {} on {}: ", self.number, self.host)?;
        match self.outcome {
            Some(o) => write!(f, "{o}")?,
            None if self.started.is_some() => f.write_str("running")?,
            None => f.write_str("pending")?,
        }
        if let Some(r) = &self.reason {
            write!(f, " ({r})")?;
        }
        if let Some(s) = self.started {
            write!(f, ", started {s}")?;
        }
        if let Some(e) = self.ended {
            write!(f, ", ended {e}")?;
        }
        Ok(())
    }
}

/// The attempt history of a job (`{job_id}/attempts.json`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AttemptHistory {
    /// Its attempts, first first.
    pub attempts: Vec<Attempt>,
}

/// Why an attempt seen running is now taken to have ended evicted: its
/// pod is gone without its end having been seen.
pub const DELETED_POD: &str = "its pod was deleted before it ended (its node removed, or evicted)";

/// The union of the history `kept` and the attempts `seen` now, keyed by
/// host (the pod): `kept`'s order, each host's entry from `seen` when it
/// has one (unless `kept`'s has an end and `seen`'s tells no time: a
/// guess), then the hosts only `seen` has, in its order; numbered again
/// from the first one's number (1 for a job's own history; more for a
/// batch child whose input ran before it). A `kept` attempt `seen` no longer has stays: ended, as it was;
/// seen running, as ended [`Outcome::Evicted`] ([`DELETED_POD`]) when
/// `seen` has others; seen neither started nor ended (a placeholder: a pod
/// not yet running, a process without its id), dropped. So a history
/// only grows.
pub fn merge_attempts(kept: &[Attempt], seen: &[Attempt]) -> Vec<Attempt> {
    let mut out: Vec<Attempt> = kept
        .iter()
        .filter(|k| {
            k.started.is_some() || k.outcome.is_some() || seen.iter().any(|s| s.host == k.host)
        })
        .map(|k| match seen.iter().find(|s| s.host == k.host) {
            Some(s) if !(k.outcome.is_some() && s.started.is_none() && s.ended.is_none()) => {
                s.clone()
            }
            Some(_) => k.clone(),
            None if k.outcome.is_none() && !seen.is_empty() => Attempt {
                outcome: Some(Outcome::Evicted),
                reason: Some(DELETED_POD.to_owned()),
                ..k.clone()
            },
            None => k.clone(),
        })
        .collect();
    out.extend(
        seen.iter()
            .filter(|s| !kept.iter().any(|k| k.host == s.host))
            .cloned(),
    );
    // Numbered from the first's number: 1 for a job's own history, more
    // for a batch child whose input ran before it (a retry's child counts
    // on from its input's earlier runs, as `KINETIC_ATTEMPT` does).
    let first = out.first().map_or(1, |a| a.number.max(1));
    for (i, a) in out.iter_mut().enumerate() {
        a.number = u32::try_from(i).unwrap_or(u32::MAX).saturating_add(first);
    }
    out
}

/// What to do once an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The last attempt succeeded: the job succeeded.
    Succeed,
    /// Run again after an infrastructure failure (`after`).
    Restart {
        /// The number of the attempt to make.
        attempt: u32,
        /// The most attempts the budgets allow.
        of: u32,
        /// How the last attempt ended.
        after: Outcome,
    },
    /// Run again after an application failure.
    Retry {
        /// The number of the attempt to make.
        attempt: u32,
        /// The most attempts the budgets allow.
        of: u32,
    },
    /// The budget of the last failure's kind is spent: the job failed.
    Fail {
        /// How the last attempt ended.
        after: Outcome,
        /// Why, naming the spent budget and how to raise it.
        message: String,
    },
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Succeed => f.write_str("succeeded"),
            Self::Restart { attempt, of, after } => {
                write!(f, "{after}, restarting (attempt {attempt} of {of})")
            }
            Self::Retry { attempt, of } => {
                write!(f, "failed, retrying (attempt {attempt} of {of})")
            }
            Self::Fail { message, .. } => f.write_str(message),
        }
    }
}

/// The message of a job whose infrastructure budget is spent.
pub fn restarts_spent(times: u32, budget: u32, after: Outcome) -> String {
    format!(
        "{after} {times} time{s}, more than its infrastructure restart budget of {budget}; raise it with `--restarts N` (`restarts=N` in Python)",
        s = if times == 1 { "" } else { "s" },
    )
}

/// The message of a job whose application budget is spent.
pub fn retries_spent(times: u32, budget: u32) -> String {
    format!(
        "failed {times} time{s}, more than its application retry budget of {budget}; raise it with `--retries N` (`retries=N` in Python)",
        s = if times == 1 { "" } else { "s" },
    )
}

/// What to do given how every attempt so far ended (`ended`, first
/// first, the last one just ended) under `budgets`. Each kind of failure
/// spends its own budget: the job runs again while the count of the last
/// failure's kind is within its budget, and fails once it exceeds it.
/// With no attempt ended, the first attempt runs ([`Decision::Restart`]
/// is never returned then: it is [`Decision::Retry`] of attempt 1).
pub fn decide(budgets: Budgets, ended: &[Outcome]) -> Decision {
    let of = budgets.max_attempts();
    let attempt = u32::try_from(ended.len())
        .unwrap_or(u32::MAX)
        .saturating_add(1);
    let Some(&last) = ended.last() else {
        return Decision::Retry { attempt: 1, of };
    };
    let count = |infra: bool| {
        u32::try_from(
            ended
                .iter()
                .filter(|o| **o != Outcome::Succeeded && o.is_infrastructure() == infra)
                .count(),
        )
        .unwrap_or(u32::MAX)
    };
    match last {
        Outcome::Succeeded => Decision::Succeed,
        Outcome::Preempted | Outcome::Evicted => {
            let times = count(true);
            if times > budgets.restarts {
                Decision::Fail {
                    after: last,
                    message: restarts_spent(times, budgets.restarts, last),
                }
            } else {
                Decision::Restart {
                    attempt,
                    of,
                    after: last,
                }
            }
        }
        Outcome::Failed => {
            let times = count(false);
            if times > budgets.retries {
                Decision::Fail {
                    after: last,
                    message: retries_spent(times, budgets.retries),
                }
            } else {
                Decision::Retry { attempt, of }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn attempt(host: &str, started: bool, outcome: Option<Outcome>) -> Attempt {
        Attempt {
            number: 0,
            host: host.to_owned(),
            started: started.then(UtcTimestamp::now),
            ended: None,
            outcome,
            reason: None,
        }
    }

    #[test]
    fn a_merged_history_only_grows_and_keeps_what_was_seen() {
        let kept = [
            attempt("a", true, Some(Outcome::Failed)),
            attempt("b", true, None),
            attempt("pending", false, None),
        ];
        // "a" gone (its end kept), "b" gone while running (deleted),
        // "pending" gone before it ran (dropped), "c" new.
        let seen = [attempt("c", true, None)];
        let merged = merge_attempts(&kept, &seen);
        let hosts: Vec<&str> = merged.iter().map(|a| a.host.as_str()).collect();
        assert_eq!(hosts, ["a", "b", "c"]);
        assert_eq!(merged[0].outcome, Some(Outcome::Failed));
        assert_eq!(merged[1].outcome, Some(Outcome::Evicted));
        assert_eq!(merged[1].reason.as_deref(), Some(DELETED_POD));
        assert_eq!(merged[2].outcome, None);
        assert_eq!(
            merged.iter().map(|a| a.number).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        // A guess without times does not replace an end seen before.
        let guess = [attempt("a", false, Some(Outcome::Evicted))];
        assert_eq!(
            merge_attempts(&kept[..1], &guess)[0].outcome,
            Some(Outcome::Failed)
        );
        // Nothing seen: the history as kept.
        assert_eq!(merge_attempts(&kept[..2], &[]).len(), 2);
    }

    #[test]
    fn a_history_that_starts_past_1_keeps_counting_from_there() {
        // A batch input's retry: its child's one run is the input's
        // second (KINETIC_ATTEMPT=2).
        let kept = [Attempt {
            number: 2,
            ..attempt("a", true, Some(Outcome::Failed))
        }];
        let seen = [
            attempt("a", true, Some(Outcome::Failed)),
            attempt("b", true, None),
        ];
        let seen = [
            Attempt {
                number: 2,
                ..seen[0].clone()
            },
            Attempt {
                number: 3,
                ..seen[1].clone()
            },
        ];
        let numbers = |v: Vec<Attempt>| v.iter().map(|a| a.number).collect::<Vec<_>>();
        assert_eq!(numbers(merge_attempts(&kept, &seen)), [2, 3]);
        assert_eq!(numbers(merge_attempts(&[], &seen)), [2, 3]);
        assert_eq!(numbers(merge_attempts(&kept, &[])), [2]);
    }

    fn outcome() -> impl Strategy<Value = Outcome> {
        prop_oneof![
            Just(Outcome::Failed),
            Just(Outcome::Preempted),
            Just(Outcome::Evicted)
        ]
    }

    #[test]
    fn defaults_give_spot_jobs_three_restarts_and_nobody_retries() {
        assert_eq!(
            BudgetRequest::default().resolve(true),
            Budgets {
                retries: 0,
                restarts: 3
            }
        );
        assert!(BudgetRequest::default().resolve(false).is_zero());
        let asked = BudgetRequest {
            retries: Some(2),
            restarts: Some(0),
        };
        assert_eq!(
            asked.resolve(true),
            Budgets {
                retries: 2,
                restarts: 0
            }
        );
    }

    #[test]
    fn budgets_parse_whole_numbers_within_the_limit() {
        assert_eq!(parse_budget("retries", " 2 "), Ok(2));
        for bad in ["-1", "two", "1.5", "", "101"] {
            let e = parse_budget("retries", bad).unwrap_err();
            assert!(e.to_string().contains("invalid retries budget"), "{e}");
            assert!(e.to_string().contains("from 0 to 100"), "{e}");
        }
        let too_many = BudgetRequest {
            retries: None,
            restarts: Some(101),
        };
        assert_eq!(too_many.validate().unwrap_err().name, "restarts");
    }

    #[test]
    fn the_status_words_match_the_documented_line() {
        let b = Budgets {
            retries: 0,
            restarts: 3,
        };
        let d = decide(b, &[Outcome::Preempted]);
        assert_eq!(d.to_string(), "preempted, restarting (attempt 2 of 4)");
        let spent = decide(b, &[Outcome::Preempted; 4]);
        assert_eq!(
            spent.to_string(),
            "preempted 4 times, more than its infrastructure restart budget of 3; raise it with `--restarts N` (`restarts=N` in Python)"
        );
        assert!(matches!(
            decide(b, &[Outcome::Failed]),
            Decision::Fail { .. }
        ));
    }

    proptest! {
        /// A success ends the job whatever came before.
        #[test]
        fn success_is_final(retries in 0u32..5, restarts in 0u32..5, before in proptest::collection::vec(outcome(), 0..6)) {
            let mut ended = before;
            ended.push(Outcome::Succeeded);
            prop_assert_eq!(decide(Budgets { retries, restarts }, &ended), Decision::Succeed);
        }

        /// The job runs again exactly while the last failure's kind is
        /// within its budget, and the other kind's failures never count.
        #[test]
        fn each_kind_spends_its_own_budget(retries in 0u32..5, restarts in 0u32..5, ended in proptest::collection::vec(outcome(), 1..12)) {
            let b = Budgets { retries, restarts };
            let last = *ended.last().unwrap();
            let infra = ended.iter().filter(|o| o.is_infrastructure()).count() as u32;
            let app = ended.len() as u32 - infra;
            let d = decide(b, &ended);
            let within = if last.is_infrastructure() { infra <= restarts } else { app <= retries };
            match d {
                Decision::Restart { attempt, after, .. } => {
                    prop_assert!(within && last.is_infrastructure());
                    prop_assert_eq!(after, last);
                    prop_assert_eq!(attempt as usize, ended.len() + 1);
                }
                Decision::Retry { attempt, .. } => {
                    prop_assert!(within && !last.is_infrastructure());
                    prop_assert_eq!(attempt as usize, ended.len() + 1);
                }
                Decision::Fail { message, after } => {
                    prop_assert!(!within);
                    prop_assert_eq!(after, last);
                    let flag = if last.is_infrastructure() { "--restarts" } else { "--retries" };
                    prop_assert!(message.contains(flag), "{}", message);
                }
                Decision::Succeed => prop_assert!(false, "no success was given"),
            }
        }

        /// Following the decisions from a first attempt never runs more
        /// than `max_attempts` attempts.
        #[test]
        fn attempts_stay_within_the_total(retries in 0u32..5, restarts in 0u32..5, fates in proptest::collection::vec(outcome(), 20)) {
            let b = Budgets { retries, restarts };
            let mut ended = Vec::new();
            for fate in fates {
                ended.push(fate);
                match decide(b, &ended) {
                    Decision::Restart { attempt, of, .. } | Decision::Retry { attempt, of } => {
                        prop_assert!(attempt <= of);
                        prop_assert_eq!(of, b.max_attempts());
                    }
                    Decision::Fail { .. } => break,
                    Decision::Succeed => unreachable!(),
                }
            }
            prop_assert!(ended.len() as u32 <= b.max_attempts());
        }
    }
}
