//! How commands print: text for people, JSON with `--json`, and errors.

use std::fmt;
use std::io::Write;

use serde::Serialize;

/// Where and how a command prints its data.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Output {
    json: bool,
}

impl Output {
    pub(crate) fn new(json: bool) -> Self {
        Self { json }
    }

    /// True when the user asked for `--json`.
    pub(crate) fn is_json(&self) -> bool {
        self.json
    }

    /// Print a value as pretty JSON on stdout.
    pub(crate) fn json<T: Serialize>(&self, value: &T) -> Result<(), CliError> {
        let text = serde_json::to_string_pretty(value)
            .map_err(|e| CliError::failed(format!("could not encode the output as JSON: {e}")))?;
        emit(&format!("{text}\n"))
    }
}

/// Print `text` on stdout as is. A closed pipe (`kinetic accelerators | head`)
/// is not an error: the reader has what it wanted.
pub(crate) fn emit(text: &str) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::failed(format!("could not write to stdout: {e}"))),
    }
}

/// A command's failure: bad input (exit 2) or a failure of the work (exit 1).
#[derive(Debug)]
pub(crate) enum CliError {
    /// The user's input was not acceptable; the message names it and what is accepted.
    Usage(String),
    /// The input was fine but the work failed.
    Failed(String),
}

impl CliError {
    pub(crate) fn usage(msg: impl Into<String>) -> Self {
        Self::Usage(msg.into())
    }

    pub(crate) fn failed(msg: impl Into<String>) -> Self {
        Self::Failed(msg.into())
    }

    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => 2,
            Self::Failed(_) => 1,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, always: a multi-line message is folded so scripts can grep it.
        let msg = match self {
            Self::Usage(m) | Self::Failed(m) => m,
        };
        write!(f, "{}", msg.trim().replace('\n', " "))
    }
}
