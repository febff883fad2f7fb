//! Ctrl-C, the same way in every command that waits.
//!
//! `main` starts one listener for the whole process ([`listen`]); a
//! command says, at each stage of its work, what a Ctrl-C would leave
//! behind ([`stage`]): what goes on running, what was not done, and the
//! command that picks it up. On Ctrl-C:
//!
//! - a wait wrapped in [`or_interrupt`] ends at once with that message
//!   (exit 130), through the command's ordinary way out, so its progress
//!   display is cleared and the job's output already received is written;
//! - anywhere else (a blocking step, a prompt), the listener itself
//!   prints the message and exits 130;
//! - a second Ctrl-C exits at once, whatever the command is doing.
//!
//! A command that sets no stage ends at Ctrl-C with exit 130 and nothing
//! more, as it would by the signal.

use std::future::Future;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, OnceLock};

use kinetic_engine::{BatchHandle, ProgressEvent};
use tokio::sync::watch;

use crate::error::CliError;

/// What a Ctrl-C leaves behind, in the words the command prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stopped {
    /// What goes on without this process: "job job-… keeps running on
    /// the local backend", "nothing runs".
    pub(crate) goes_on: String,
    /// What was not done: "its value was not collected", "18 of 21 inputs
    /// were never submitted".
    pub(crate) not_done: String,
    /// The command that picks the work up.
    pub(crate) pick_up: PickUp,
    /// A last word, such as the command that stops what goes on.
    pub(crate) also: Option<String>,
}

/// The command that picks up what a Ctrl-C left, as the user types it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PickUp {
    /// Another command goes on from where this one stopped.
    With(String),
    /// The same command, run again, does what is left.
    Again(String),
}

impl Stopped {
    /// What goes on, what was not done, and the command that picks it up.
    pub(crate) fn new(
        goes_on: impl Into<String>,
        not_done: impl Into<String>,
        pick_up: PickUp,
    ) -> Self {
        Self {
            goes_on: goes_on.into(),
            not_done: not_done.into(),
            pick_up,
            also: None,
        }
    }

    /// With a last word (`stop it with …`).
    pub(crate) fn also(mut self, text: impl Into<String>) -> Self {
        self.also = Some(text.into());
        self
    }

    /// `interrupted: GOES ON; NOT DONE; pick it up with `COMMAND` (ALSO)`.
    pub(crate) fn message(&self) -> String {
        let pick_up = match &self.pick_up {
            PickUp::With(command) => format!("pick it up with `{command}`"),
            PickUp::Again(command) => format!("run `{command}` again"),
        };
        let mut text = format!(
            "interrupted: {}; {}; {pick_up}",
            self.goes_on, self.not_done
        );
        if let Some(also) = &self.also {
            text.push_str(&format!(" ({also})"));
        }
        text
    }

    /// Before anything was handed over: nothing goes on, `not_done` was
    /// not done, and this very command does it.
    pub(crate) fn nothing_started(not_done: impl Into<String>) -> Self {
        Self::new("nothing runs", not_done, PickUp::Again(this_command()))
    }

    /// While a submission resolves its image: no job runs, but an image
    /// build it started goes on in the cloud.
    fn building(not_done: &str) -> Self {
        Self::new(
            "no job runs, but an image build it started goes on in the cloud (the next submission reuses the image)",
            not_done,
            PickUp::Again(this_command()),
        )
    }

    /// A job this process no longer waits for.
    pub(crate) fn job(job_id: &str, backend: &str) -> Self {
        Self::new(
            format!("job {job_id} keeps running on the {backend} backend"),
            "its value was not collected",
            PickUp::With(format!("kinetic jobs result {job_id}")),
        )
        .also(format!("stop it with `kinetic jobs cancel {job_id}`"))
    }

    /// A batch this process no longer submits or waits for: its jobs go
    /// on; inputs it did not submit are named, with `batch resume`;
    /// otherwise `then` picks the batch up.
    pub(crate) fn batch(batch: &BatchHandle, then: &str) -> Self {
        let group = batch.group_id();
        let counts = batch.counts();
        let unsent = counts.queued + counts.submitting + batch.never_submitted().len();
        let active = counts.pending + counts.running;
        let goes_on = match active {
            0 => format!("batch {group} stays as it is (no job of it is running)"),
            1 => format!("batch {group} goes on: its 1 submitted job keeps running"),
            n => format!("batch {group} goes on: its {n} submitted jobs keep running"),
        };
        let stopped = if unsent > 0 {
            Self::new(
                goes_on,
                format!(
                    "{unsent} of {} inputs were never submitted, and no value was collected",
                    batch.total()
                ),
                PickUp::With(format!("kinetic batch resume {group}")),
            )
        } else {
            Self::new(
                goes_on,
                "its values were not collected",
                PickUp::With(format!("{then} {group}")),
            )
        };
        stopped.also(format!("stop it with `kinetic batch cancel {group}`"))
    }
}

impl From<Stopped> for CliError {
    fn from(stopped: Stopped) -> Self {
        CliError::interrupted(stopped.message())
    }
}

/// The stage a command is at: what it says on Ctrl-C, worked out then.
type Stage = Arc<dyn Fn() -> Stopped + Send + Sync>;

struct Listener {
    /// This command line, as the user would type it again.
    command: String,
    stage: Mutex<Option<Stage>>,
    /// Counts the Ctrl-Cs passed to waits in [`or_interrupt`].
    pressed: watch::Sender<u64>,
}

static LISTENER: OnceLock<Listener> = OnceLock::new();

impl Listener {
    fn stopped(&self) -> Option<Stopped> {
        let stage = self
            .stage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        stage.map(|say| say())
    }

    /// One Ctrl-C: to the wait that listens, else the end of the process.
    fn ctrl_c(&self, count: u64) {
        if count == 1 && self.pressed.receiver_count() > 0 {
            self.pressed.send_modify(|n| *n += 1);
            return;
        }
        if std::io::stderr().is_terminal() {
            // Past the `^C` the terminal echoed (after a prompt, say): no
            // spinner is drawn here, the waits that draw one end above.
            let _ = std::io::stderr().write_all(b"\n");
        }
        if let Some(stopped) = self.stopped() {
            let _ = writeln!(std::io::stderr(), "{}", stopped.message());
        }
        std::process::exit(130);
    }
}

/// Listen for Ctrl-C (SIGINT) from now on, on a thread of its own, for
/// the rest of the process. Once it returns, a Ctrl-C is caught. `args`
/// are the process's arguments, for the messages that name this command.
pub(crate) fn listen(args: Vec<String>) -> Result<(), CliError> {
    if LISTENER.get().is_some() {
        return Ok(());
    }
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let spawned = std::thread::Builder::new()
        .name("kinetic-ctrl-c".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                    return;
                }
            };
            runtime.block_on(async move {
                let mut signal =
                    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
                    {
                        Ok(s) => s,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                let listener = LISTENER.get_or_init(|| Listener {
                    command: command_line(&args),
                    stage: Mutex::new(None),
                    pressed: watch::channel(0).0,
                });
                let _ = ready_tx.send(Ok(()));
                let mut count = 0;
                while signal.recv().await.is_some() {
                    count += 1;
                    listener.ctrl_c(count);
                }
            });
        });
    let failed = |e: String| CliError::failed(format!("cannot listen for Ctrl-C: {e}"));
    spawned.map_err(|e| failed(e.to_string()))?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(failed(e)),
        Err(_) => Err(failed("the listener stopped".to_owned())),
    }
}

/// From now on, a Ctrl-C says what `say` returns then.
pub(crate) fn stage(say: impl Fn() -> Stopped + Send + Sync + 'static) {
    if let Some(listener) = LISTENER.get() {
        *listener
            .stage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(say));
    }
}

/// Follow a submission's steps before any job exists (`not_done` says
/// what was not submitted): while its image is resolved, and a build may
/// run, a Ctrl-C says so.
pub(crate) fn on_submit_step(event: &ProgressEvent, not_done: &'static str) {
    match event {
        ProgressEvent::ResolvingImage => stage(move || Stopped::building(not_done)),
        ProgressEvent::ImageReady { .. } => stage(move || Stopped::nothing_started(not_done)),
        _ => {}
    }
}

/// `work`, unless Ctrl-C comes first: then the current stage's message
/// as [`CliError::Interrupted`] (exit 130), and `work` is dropped.
pub(crate) async fn or_interrupt<T>(
    work: impl Future<Output = Result<T, CliError>>,
) -> Result<T, CliError> {
    let Some(listener) = LISTENER.get() else {
        return work.await;
    };
    let mut pressed = listener.pressed.subscribe();
    tokio::select! {
        result = work => result,
        _ = pressed.changed() => Err(match listener.stopped() {
            Some(stopped) => stopped.into(),
            None => CliError::interrupted("interrupted"),
        }),
    }
}

/// The command line this process was started with, as a user would type
/// it again (`kinetic map work:f --inputs in.jsonl`).
pub(crate) fn this_command() -> String {
    LISTENER
        .get()
        .map_or_else(|| "kinetic".to_owned(), |l| l.command.clone())
}

/// `kinetic` and `args` but the first (the program), quoted where needed.
fn command_line(args: &[String]) -> String {
    let mut words = vec!["kinetic".to_owned()];
    words.extend(args.iter().skip(1).map(|a| shell_word(a)));
    words.join(" ")
}

/// `word` quoted for a POSIX shell when it needs it.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_what_goes_on_what_was_not_done_and_the_command() {
        assert_eq!(
            Stopped::job("job-0a1b2c3d", "local").message(),
            "interrupted: job job-0a1b2c3d keeps running on the local backend; its value was not collected; pick it up with `kinetic jobs result job-0a1b2c3d` (stop it with `kinetic jobs cancel job-0a1b2c3d`)"
        );
        let again = Stopped::new(
            "nothing was changed",
            "the plan was not carried out",
            PickUp::Again("kinetic up --yes".into()),
        );
        assert_eq!(
            again.message(),
            "interrupted: nothing was changed; the plan was not carried out; run `kinetic up --yes` again"
        );
    }

    #[test]
    fn the_command_line_is_given_back_as_typed() {
        let args = [
            "/usr/bin/kinetic",
            "run",
            "work:f",
            "--kwargs",
            "{\"a\": 1}",
        ];
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        assert_eq!(
            command_line(&args),
            "kinetic run work:f --kwargs '{\"a\": 1}'"
        );
    }

    #[test]
    fn words_are_quoted_only_when_a_shell_needs_it() {
        assert_eq!(shell_word("work:f"), "work:f");
        assert_eq!(shell_word("--arg=7"), "--arg=7");
        assert_eq!(shell_word("{\"a\": 1}"), "'{\"a\": 1}'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
