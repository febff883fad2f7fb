//! What commands show while they work, on stderr: `kinetic run`'s spinner
//! with the current step, and a batch's live bar of counts, on a terminal;
//! nothing but warnings and the job's output otherwise. The job's output
//! always goes to stderr, so stdout holds only the value.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use kinetic_core::batch::BatchCounts;
use kinetic_core::status::{JobState, StatusReason};
use kinetic_engine::{BatchHandle, ProgressEvent};

/// A spinner with a message and the time elapsed, when stderr is a
/// terminal; `None` otherwise.
pub(crate) fn spinner() -> Option<ProgressBar> {
    std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new_spinner();
        // `wide_msg`: the message is cut to the terminal's width, so a
        // long one never wraps onto a new line at every tick.
        bar.set_style(
            ProgressStyle::with_template("{spinner} {wide_msg} [{elapsed}]")
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
    logs: Arc<LogBuffer>,
    /// The last restart line written (each is written once).
    restart_noted: Arc<std::sync::Mutex<String>>,
}

/// How much of a job's output is gathered before it is written out.
const LOG_FLUSH_BYTES: usize = 64 * 1024;

/// How long a line of the job's output may wait in the buffer.
const LOG_FLUSH_EVERY: Duration = Duration::from_millis(50);

/// The job's output on its way to stderr: lines are gathered and written
/// in large writes (stderr is unbuffered, and a write per line caps a
/// fast log at a few tens of MB/s), at the latest [`LOG_FLUSH_EVERY`]
/// after they came, and always before anything else is printed.
struct LogBuffer {
    bar: Option<Arc<ProgressBar>>,
    pending: std::sync::Mutex<Vec<u8>>,
    flusher: std::sync::Once,
    done: std::sync::atomic::AtomicBool,
}

impl LogBuffer {
    fn pending(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn push(self: &Arc<Self>, line: &str) {
        let mut pending = self.pending();
        pending.extend_from_slice(line.as_bytes());
        pending.push(b'\n');
        if pending.len() >= LOG_FLUSH_BYTES {
            self.write(&mut pending);
        }
        drop(pending);
        self.flusher.call_once(|| {
            let logs = Arc::clone(self);
            // Without the thread, lines would still come out at the next
            // flush; with it, a quiet job's last lines are not held back.
            let _ = std::thread::Builder::new()
                .name("kinetic-log-flush".into())
                .spawn(move || {
                    while !logs.done.load(std::sync::atomic::Ordering::Relaxed) {
                        std::thread::sleep(LOG_FLUSH_EVERY);
                        logs.flush();
                    }
                });
        });
    }

    fn flush(&self) {
        let mut pending = self.pending();
        self.write(&mut pending);
    }

    /// Write out and empty `pending` (its lock held, so lines keep their order).
    fn write(&self, pending: &mut Vec<u8>) {
        if pending.is_empty() {
            return;
        }
        let write = || {
            // Like eprint, minus its panic when stderr is gone.
            let _ = std::io::stderr().lock().write_all(pending);
        };
        match &self.bar {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
        pending.clear();
    }
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
        let bar = spinner().map(Arc::new);
        Self {
            logs: Arc::new(LogBuffer {
                bar: bar.clone(),
                pending: std::sync::Mutex::new(Vec::new()),
                flusher: std::sync::Once::new(),
                done: std::sync::atomic::AtomicBool::new(false),
            }),
            bar,
            restart_noted: Arc::default(),
        }
    }

    fn step(&self, message: String) {
        if let Some(bar) = &self.bar {
            bar.set_message(message);
        }
    }

    /// Print a line above the spinner (or plainly without one), in one
    /// write: a job's output passes here line by line, and stderr is not
    /// buffered.
    fn line(&self, text: &str) {
        self.logs.flush();
        let write = || {
            let mut line = String::with_capacity(text.len() + 1);
            line.push_str(text);
            line.push('\n');
            // Like eprintln, minus its panic when stderr is gone.
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        };
        match &self.bar {
            Some(bar) => bar.suspend(write),
            None => write(),
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

    /// Waiting for a job submitted earlier (`kinetic jobs result`): what
    /// for, and the job's state once it is known.
    pub(crate) fn waiting_for(&self, job_id: &str, state: Option<&JobState>) {
        self.step(match state {
            None => format!("waiting for {job_id}"),
            Some(state) => match &state.reason {
                Some(reason) => {
                    format!("waiting for {job_id}: {} ({reason})", state.status.as_str())
                }
                None => format!("waiting for {job_id}: {}", state.status.as_str()),
            },
        });
    }

    /// A new state of the job.
    pub(crate) fn status(&self, job_id: &str, state: &JobState) {
        let text = match &state.reason {
            Some(reason) => format!("{job_id}: {} ({reason})", state.status.as_str()),
            None => format!("{job_id}: {}", state.status.as_str()),
        };
        // A restart is worth a line of its own, terminal or not.
        if let Some(StatusReason::Restarting { .. }) = &state.reason {
            let mut last = self
                .restart_noted
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if *last != text {
                last.clone_from(&text);
                drop(last);
                self.line(&text);
            }
        }
        self.step(text);
    }

    /// A message about the work on stderr, above the spinner when there
    /// is one, plainly otherwise.
    pub(crate) fn note(&self, text: &str) {
        self.line(text);
    }

    /// A line of the job's output (written out with the next lines, soon).
    pub(crate) fn log_line(&self, line: &str) {
        self.logs.push(line);
    }

    /// Write out the job's output still buffered and remove the spinner.
    pub(crate) fn finish(&self) {
        self.logs.flush();
        self.logs
            .done
            .store(true, std::sync::atomic::Ordering::Relaxed);
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
                    "{prefix} [{bar:30}] {pos}/{len} {wide_msg} [{elapsed_precise}]",
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

    /// Run `print` (which writes to stdout) with the bar cleared, so that
    /// the lines it prints are not drawn over.
    pub(crate) fn above<T>(&self, print: impl FnOnce() -> T) -> T {
        match &self.bar {
            Some(bar) => bar.suspend(print),
            None => print(),
        }
    }

    /// A word on what is waited for, before the first counts come.
    pub(crate) fn say(&self, message: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(message.to_owned());
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
