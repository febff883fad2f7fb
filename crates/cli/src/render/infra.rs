//! What `up`, `down`, `pool`, `status` and `doctor` print: the plan, the
//! progress of long operations (a spinner on a terminal, plain lines
//! otherwise), the status of each piece, the pools, the doctor's checks,
//! and the confirmation asked before acting.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Mutex;
use std::time::Duration;

use indicatif::ProgressBar;
use kinetic_infra_gcp::Progress;
use kinetic_infra_gcp::model::{
    Action, Check, CheckState, InfraTarget, Plan, PoolStatus, StatusReport,
};

use super::RenderError;
use super::{key_values, table};

/// The plan, numbered, with its notes.
pub(crate) fn plan(target: &InfraTarget, plan: &Plan) -> String {
    let mut s = String::new();
    if plan.is_empty() {
        s.push_str(&format!(
            "{target}: nothing to do, everything is in place.\n"
        ));
    } else {
        s.push_str(&format!("Plan for {target}:\n"));
        for (i, a) in plan.actions.iter().enumerate() {
            s.push_str(&super::wrap(
                &format!("  {:>2}. ", i + 1),
                "      ",
                &a.describe(),
            ));
        }
    }
    for n in &plan.notes {
        s.push_str(&super::wrap("note: ", "      ", n));
    }
    s
}

/// Ask `question` on the terminal; `--yes` answers for the user. Without
/// a terminal to ask on, refuse to act.
pub(crate) fn confirm(question: &str, yes: bool) -> Result<bool, RenderError> {
    if yes {
        return Ok(true);
    }
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(RenderError::Usage(format!(
            "{question} needs a yes: pass --yes to go ahead without being asked"
        )));
    }
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    stdin
        .lock()
        .read_line(&mut line)
        .map_err(|e| RenderError::Failed(format!("cannot read the answer: {e}")))?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes" | "Yes"))
}

/// A pool's nodes and how it scales: `0 nodes (scales 0–3)`, `2 nodes, 1
/// ready (scales 0–10)`, `1 node (fixed)`; `-` for nodes not known (the
/// cluster not reached). A pool at 0 nodes that scales is one whose first
/// node the autoscaler adds when a job asks for it.
fn nodes(p: &PoolStatus) -> String {
    let count = match (p.nodes_ready, p.nodes_total) {
        (Some(r), Some(t)) => {
            let noun = if t == 1 { "node" } else { "nodes" };
            if r == t {
                format!("{t} {noun}")
            } else {
                format!("{t} {noun}, {r} ready")
            }
        }
        _ => "-".to_owned(),
    };
    let scales = match (p.min_nodes, p.max_nodes) {
        (Some(min), Some(max)) => format!("scales {min}–{max}"),
        _ => "fixed".to_owned(),
    };
    format!("{count} ({scales})")
}

/// The node pools as a table.
pub(crate) fn pools(pools: &[PoolStatus]) -> String {
    if pools.is_empty() {
        return "No node pools.\n".to_owned();
    }
    let rows: Vec<Vec<String>> = pools
        .iter()
        .map(|p| {
            vec![
                p.name.clone(),
                p.accelerator.clone().unwrap_or_else(|| "cpu".to_owned()),
                p.machine_type.clone(),
                if p.spot { "spot" } else { "on-demand" }.to_owned(),
                nodes(p),
                p.reservation.clone().unwrap_or_else(|| "-".to_owned()),
                p.status.clone(),
            ]
        })
        .collect();
    table(
        &[
            "POOL",
            "ACCELERATOR",
            "MACHINE",
            "PROVISIONING",
            "NODES",
            "RESERVATION",
            "STATUS",
        ],
        &rows,
    )
}

fn check_line(c: &Check) -> String {
    let mark = match c.state {
        CheckState::Pass => "ok   ",
        CheckState::Warn => "warn ",
        CheckState::NotRun => "skip ",
        _ => "FAIL ",
    };
    let mut s = super::wrap(mark, "     ", &format!("{}: {}", c.what, c.detail));
    if let Some(fix) = c.fix.as_ref().filter(|_| c.state != CheckState::Pass) {
        s.push_str(&super::wrap("     fix: ", "          ", fix));
    }
    s
}

/// `kinetic status`: the cluster, the registry, the pools, every piece
/// checked, what is missing with the command that adds it.
/// `deleted`: when `kinetic down` deleted the cluster, as a profile
/// naming it was marked.
pub(crate) fn status(
    report: &StatusReport,
    unreadable: &[(String, String)],
    deleted: Option<&str>,
) -> String {
    let t = &report.target;
    let mut s = key_values(&[
        ("project", t.project.clone()),
        ("zone", t.zone.clone()),
        (
            "cluster",
            format!(
                "{} ({})",
                t.cluster,
                match (&report.cluster, deleted) {
                    (Some(state), _) => state.clone(),
                    (None, Some(when)) => format!("deleted by `kinetic down` at {when}"),
                    (None, None) => "not created".to_owned(),
                }
            ),
        ),
        (
            "endpoint",
            match (&report.endpoint, &report.cluster) {
                (Some(url), _) => url.clone(),
                (None, Some(state)) => format!("none yet (the cluster is {state})"),
                (None, None) => "-".to_owned(),
            },
        ),
        ("registry", report.registry.clone()),
        ("jobs bucket", format!("gs://{}", t.names.jobs_bucket)),
    ]);
    s.push('\n');
    s.push_str(&pools(&report.pools));
    s.push('\n');
    for c in &report.checks {
        s.push_str(&check_line(c));
    }
    for (what, e) in unreadable {
        s.push_str(&format!("FAIL {what}: cannot be read: {e}\n"));
    }
    if report.fixes.is_empty() && unreadable.is_empty() {
        s.push_str("\nEverything is in place.\n");
    } else if !report.fixes.is_empty() {
        s.push_str("\nMissing pieces are added by:\n");
        for f in &report.fixes {
            s.push_str(&format!("  {f}\n"));
        }
    }
    s
}

/// `kinetic doctor`: one line per check, with the fix under a failure.
pub(crate) fn doctor(checks: &[Check]) -> String {
    let mut s: String = checks.iter().map(check_line).collect();
    let count = |state: CheckState| checks.iter().filter(|c| c.state == state).count();
    let (failed, warned, not_run) = (
        count(CheckState::Fail),
        count(CheckState::Warn),
        count(CheckState::NotRun),
    );
    let warnings = match warned {
        0 => String::new(),
        1 => " (1 warning)".to_owned(),
        n => format!(" ({n} warnings)"),
    };
    if failed == 0 {
        s.push_str(&format!(
            "\nAll {} checks passed{warnings}.\n",
            checks.len()
        ));
    } else if not_run > 0 {
        s.push_str(&format!(
            "\n{failed} of {} checks failed{warnings}; {not_run} were not run: fix the failure above, then run kinetic doctor again.\n",
            checks.len()
        ));
    } else {
        s.push_str(&format!(
            "\n{failed} of {} checks failed{warnings}.\n",
            checks.len()
        ));
    }
    s
}

/// What an action is doing, on stderr: a spinner on a terminal, plain
/// lines otherwise (a waiting line when a wait starts, then at most every
/// 10 seconds).
pub(crate) struct InfraProgress {
    bar: Option<ProgressBar>,
    /// The last waiting line printed without a terminal: what, and when.
    last_plain: Mutex<Option<(String, std::time::Instant)>>,
    /// The action under way: its index, the plan's length, what it does.
    current: Mutex<Option<(usize, usize, String)>>,
}

impl InfraProgress {
    pub(crate) fn new() -> Self {
        let bar = super::progress::spinner();
        Self {
            bar,
            last_plain: Mutex::new(None),
            current: Mutex::new(None),
        }
    }

    /// The action under way (index from 0, the plan's length, what it
    /// does), once one started.
    pub(crate) fn current(&self) -> Option<(usize, usize, String)> {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    fn line(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{text}")),
            None => eprintln!("{text}"),
        }
    }
}

impl Progress for InfraProgress {
    fn started(&self, action: &Action, index: usize, total: usize) {
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((index, total, action.describe()));
        let text = format!("[{}/{total}] {}", index + 1, action.describe());
        match &self.bar {
            Some(bar) => {
                bar.reset_elapsed();
                bar.set_message(text);
            }
            None => eprintln!("{text}"),
        }
    }

    fn waiting(&self, what: &str, status: &str, elapsed: Duration) {
        match &self.bar {
            Some(bar) => bar.set_message(format!("waiting for {what}: {status}")),
            None => {
                let mut last = self.last_plain.lock().unwrap_or_else(|p| p.into_inner());
                let due = last
                    .as_ref()
                    .is_none_or(|(w, t)| w != what || t.elapsed() >= Duration::from_secs(10));
                if due {
                    *last = Some((what.to_owned(), std::time::Instant::now()));
                    eprintln!("  waiting for {what}: {status} ({}s)", elapsed.as_secs());
                }
            }
        }
    }

    fn finished(&self, action: &Action, elapsed: Duration) {
        self.line(&format!(
            "done: {} ({:.1}s)",
            action.describe(),
            elapsed.as_secs_f64()
        ));
    }
}
