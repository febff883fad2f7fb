//! What commands show while they work, on stderr: `kinetic run`'s spinner
//! with the current step, and a batch's live bar of counts, on a terminal;
//! nothing but warnings and the job's output otherwise. The job's output
//! always goes to stderr, so stdout holds only the value.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use kinetic_core::batch::BatchCounts;
use kinetic_core::engine::{BatchHandle, ProgressEvent};
use kinetic_core::status::JobState;

/// A spinner with a message and the time elapsed, when stderr is a
/// terminal; `None` otherwise.
pub(crate) fn spinner() -> Option<ProgressBar> {
    std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(100));
        bar
    })
}

/// Shared progress display.
#[derive(Clone)]
pub(crate) struct Progress {
    bar: Option<Arc<ProgressBar>>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("terminal", &self.bar.is_some())
            .finish()
    }
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

impl Progress {
    /// A spinner when stderr is a terminal, silence otherwise.
    pub(crate) fn new() -> Self {
        Self {
            bar: spinner().map(Arc::new),
        }
    }

    fn step(&self, message: String) {
        if let Some(bar) = &self.bar {
            bar.set_message(message);
        }
    }

    /// Print a line above the spinner (or plainly without one).
    fn line(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{text}")),
            None => eprintln!("{text}"),
        }
    }

    /// A submission step.
    pub(crate) fn event(&self, event: &ProgressEvent) {
        match event {
            ProgressEvent::HashingData { path } => self.step(format!("hashing {}", path.display())),
            ProgressEvent::DataReady {
                path,
                cache_hit,
                bytes,
            } => self.step(if *cache_hit {
                format!("{} already in the data cache", path.display())
            } else {
                format!("uploaded {} ({})", path.display(), mb(*bytes))
            }),
            ProgressEvent::Packaging { root } => self.step(format!("packaging {}", root.display())),
            ProgressEvent::ContextUploaded { entries, bytes } => {
                self.step(format!(
                    "uploaded the project ({entries} entries, {})",
                    mb(*bytes)
                ));
            }
            ProgressEvent::ResolvingImage => self.step("resolving the container image".into()),
            ProgressEvent::ImageReady { uri, cached } => {
                self.step(format!(
                    "image {uri}{}",
                    if *cached { " (cached)" } else { " (built)" }
                ));
            }
            ProgressEvent::Submitting { job_id, backend } => {
                self.step(format!("submitting {job_id} to {backend}"))
            }
            ProgressEvent::Warning(w) => self.line(&format!("warning: {w}")),
            _ => {}
        }
    }

    /// Waiting for the job.
    pub(crate) fn waiting(&self, job_id: &str) {
        self.step(format!("{job_id}: submitted"));
    }

    /// A new state of the job.
    pub(crate) fn status(&self, job_id: &str, state: &JobState) {
        let text = match &state.reason {
            Some(reason) => format!("{job_id}: {} ({reason})", state.status.as_str()),
            None => format!("{job_id}: {}", state.status.as_str()),
        };
        self.step(text);
    }

    /// A line of the job's output.
    pub(crate) fn log_line(&self, line: &str) {
        self.line(line);
    }

    /// Remove the spinner.
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// A live bar of a batch's counts on a terminal; nothing otherwise.
pub(crate) struct BatchProgress {
    bar: Option<ProgressBar>,
}

impl BatchProgress {
    pub(crate) fn new(batch: &BatchHandle) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(batch.total() as u64);
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {pos}/{len} {msg} [{elapsed_precise}]",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_prefix(batch.group_id().to_string());
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Self { bar }
    }

    pub(crate) fn show(&self, counts: &BatchCounts) {
        if let Some(bar) = &self.bar {
            bar.set_position(counts.finished() as u64);
            bar.set_message(summary(counts));
        }
    }

    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// `3 running · 61 pending · 2 failed`: what is not yet succeeded.
fn summary(c: &BatchCounts) -> String {
    let parts = [
        ("running", c.running),
        ("pending", c.pending),
        ("submitting", c.submitting),
        ("queued", c.queued),
        ("unknown", c.unknown),
        ("failed", c.failed + c.not_found),
        ("not submitted", c.submit_failed + c.skipped),
    ];
    parts
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| format!("{n} {name}"))
        .collect::<Vec<_>>()
        .join(" · ")
}
