//! Everything the commands print: data on stdout (text for people, JSON
//! with `--json`), warnings and the job's own output on stderr, tables,
//! the progress displays ([`progress`]), what the infrastructure
//! commands print ([`infra`]) and the plan of a dry run ([`preview`]). Commands print through here
//! and nowhere else.

pub(crate) mod infra;
pub(crate) mod preview;
pub(crate) mod progress;

use std::io::Write;

use kinetic_core::batch::BatchCounts;
use kinetic_engine::{BatchHandle, BatchItem, ChildError};
use serde::Serialize;
use serde_json::{Value, json};

/// What printing ends with when it cannot go on, or when what it printed
/// is a failure (a batch with failed inputs): the message for the person,
/// and whether it was their input. The command's error type takes it
/// (`From<RenderError> for CliError`); printing knows nothing of the
/// command's errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RenderError {
    /// The user's input (or a missing answer) cannot be used: exit 2.
    Usage(String),
    /// Printing failed, or what was printed is a failure: exit 1.
    Failed(String),
}

impl std::fmt::Display for RenderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Usage(m) | Self::Failed(m) => f.write_str(m),
        }
    }
}

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

    /// Print a value as pretty JSON on stdout, encoded as it is written
    /// (the text of a batch of 100,000 jobs is never held whole). A closed
    /// pipe is not an error, as for [`emit`].
    pub(crate) fn json<T: Serialize>(&self, value: &T) -> Result<(), RenderError> {
        let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
        let written = serde_json::to_writer_pretty(&mut stdout, value)
            // An encoding error stays one (wrapped); a write error is its own.
            .map_err(std::io::Error::from)
            .and_then(|()| stdout.write_all(b"\n"))
            .and_then(|()| stdout.flush());
        match written {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            Err(e)
                if e.get_ref()
                    .is_some_and(|inner| inner.is::<serde_json::Error>()) =>
            {
                Err(RenderError::Failed(format!(
                    "could not encode the output as JSON: {e}"
                )))
            }
            Err(e) => Err(RenderError::Failed(format!(
                "could not write to stdout: {e}"
            ))),
        }
    }

    /// `json` with `--json`, else `text`.
    pub(crate) fn either<T: Serialize>(&self, json: &T, text: &str) -> Result<(), RenderError> {
        if self.json {
            self.json(json)
        } else {
            emit(text)
        }
    }
}

/// Print `text` on stdout as is. A closed pipe (`kinetic accelerators | head`)
/// is not an error: the reader has what it wanted.
pub(crate) fn emit(text: &str) -> Result<(), RenderError> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(RenderError::Failed(format!(
            "could not write to stdout: {e}"
        ))),
    }
}

/// A line on stderr (messages about the work, never data).
pub(crate) fn info(text: &str) {
    eprintln!("{text}");
}

/// `warning: …` on stderr.
pub(crate) fn warn(message: &str) {
    eprintln!("warning: {message}");
}

/// `note: …` (informational) or `warning: …` on stderr.
pub(crate) fn notice(informational: bool, message: &str) {
    let level = if informational { "note" } else { "warning" };
    eprintln!("{level}: {message}");
}

/// The traceback of a job that failed remotely, on stderr; nothing when
/// the runner left none (an error its message says all of).
pub(crate) fn remote_traceback(traceback: &str) {
    if !traceback.trim().is_empty() {
        eprintln!("--- remote traceback ---\n{}", traceback.trim_end());
    }
}

/// What `kinetic map` prints on stdout in place of a failed input's value:
/// `!error` then the input's index. Every value is one line of JSON, and no
/// JSON text starts with `!`, so a script tells a failure from any value
/// (a returned `null`, or a dict shaped like an error) by the first character.
pub(crate) const FAILED_INPUT_MARK: &str = "!error";

/// The width text is wrapped to: the terminal's, set once by `main`
/// ([`set_width`]); none (no wrapping) on a pipe.
static WIDTH: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();

/// Set the width tables and long lines wrap to: stdout's terminal's, or
/// `columns` (the `COLUMNS` variable) when stdout is not a terminal and
/// it is set; else nothing wraps.
pub(crate) fn set_width(columns: Option<&str>) {
    let width = console::Term::stdout()
        .size_checked()
        .map(|(_, cols)| usize::from(cols))
        .or_else(|| columns.and_then(|c| c.trim().parse::<usize>().ok()))
        .filter(|w| *w >= 20);
    let _ = WIDTH.set(width);
}

fn width() -> Option<usize> {
    WIDTH.get().copied().flatten()
}

/// `text` wrapped at spaces to the terminal's width: the first line after
/// `first`, the rest after `rest` (both counted in the width). As is when
/// it fits or nothing wraps.
pub(crate) fn wrap(first: &str, rest: &str, text: &str) -> String {
    let Some(width) = width() else {
        return format!("{first}{text}\n");
    };
    let mut out = String::new();
    let mut line = first.to_owned();
    let mut empty = true;
    for word in text.split(' ') {
        let len = line.chars().count();
        if !empty && len + 1 + word.chars().count() > width {
            out.push_str(line.trim_end());
            out.push('\n');
            line = rest.to_owned();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

/// Left-aligned columns separated by two spaces, with a header row; no
/// trailing spaces. Wider than the terminal, the cells wrap within their
/// columns (comfy-table).
pub(crate) fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let plain = plain_table(headers, rows);
    match width() {
        Some(width) if plain.lines().any(|l| l.chars().count() > width) => {
            wrapped_table(headers, rows, width)
        }
        _ => plain,
    }
}

/// [`table`] within `width` columns: cells wrap inside their column.
fn wrapped_table(headers: &[&str], rows: &[Vec<String>], width: usize) -> String {
    use comfy_table::{CellAlignment, ContentArrangement, Table, presets};
    let mut t = Table::new();
    t.load_style(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(u16::try_from(width).unwrap_or(u16::MAX))
        .set_header(headers.to_vec());
    for row in rows {
        t.add_row(row.clone());
    }
    let last = headers.len().saturating_sub(1);
    for (i, column) in t.column_iter_mut().enumerate() {
        column.set_cell_alignment(CellAlignment::Left);
        column.set_padding((0, if i == last { 0 } else { 2 }));
    }
    let mut out: String = t
        .lines()
        .map(|l| l.trim_end().to_owned())
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    out.push('\n');
    out
}

fn plain_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            s.push_str(cell);
            let pad = widths
                .get(i)
                .copied()
                .unwrap_or(0)
                .saturating_sub(cell.chars().count());
            s.push_str(&" ".repeat(pad));
        }
        let mut s = s.trim_end().to_owned();
        s.push('\n');
        s
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// `key  value` lines with the values aligned.
pub(crate) fn key_values(rows: &[(&str, String)]) -> String {
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(k, v)| format!("{k:width$}  {v}").trim_end().to_owned() + "\n")
        .collect()
}

/// Print a job's value: JSON with `--json`; otherwise a string as itself,
/// nothing for `null` (a command, or a function returning `None`), JSON for
/// the rest. A value that holds pickled Python values (a job submitted by
/// the Python module returned what JSON would change) is printed as it is,
/// with a note on stderr saying where it can be read.
pub(crate) fn value(value: &Value, out: &Output) -> Result<(), RenderError> {
    if let Some(python) = pickled_python(value) {
        note_pickled(&python, "kinetic.attach(JOB_ID).result()");
    }
    match value {
        Value::String(s) if !out.is_json() => emit(&format!("{s}\n")),
        Value::Null if !out.is_json() => Ok(()),
        other => emit(&format!(
            "{}\n",
            serde_json::to_string(other).unwrap_or_default()
        )),
    }
}

/// The note that a value printed as it is holds pickled Python values,
/// which `read_with` (Python code) reads.
fn note_pickled(python: &str, read_with: &str) {
    notice(
        true,
        &format!(
            "the value holds Python objects pickled by Python {python} \
             (\"__kinetic_pickle__\" leaves, printed as they are): only the kinetic Python module \
             reads them, with {read_with} on Python {python}"
        ),
    );
}

/// The Python version of the first pickled Python value (a
/// `{"__kinetic_pickle__": base64, "python": "3.11"}` leaf) in `value`, if
/// it holds one. The runner tags a user's dict of that shape, so such a
/// leaf is always the protocol's.
fn pickled_python(value: &Value) -> Option<String> {
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(map) => {
                if map.get("__kinetic_pickle__").is_some_and(Value::is_string) {
                    let python = map.get("python").and_then(Value::as_str).unwrap_or("?");
                    return Some(python.to_owned());
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    None
}

/// `{id}: {what}` (or its JSON) after an action on a job or batch, whose
/// id is named by `id_key` (`job_id`, `group_id`).
pub(crate) fn done(id_key: &str, id: &str, what: &str, out: &Output) -> Result<(), RenderError> {
    out.either(
        &json!({id_key: id, "done": what}),
        &format!("{id}: {what}\n"),
    )
}

/// Prints a batch's items as they come: with `--json` one object (its
/// `results` written item by item); otherwise one JSON value per input
/// line, `!error INDEX: MESSAGE` where it failed ([`FAILED_INPUT_MARK`]),
/// and the failures' tracebacks on stderr at the end. Holds no item: only
/// the first 20 failures, for that end. [`BatchPrinter::finish`] fails
/// (exit 1) when any input failed.
pub(crate) struct BatchPrinter {
    json: bool,
    printed: usize,
    failed: usize,
    /// The first failures, reported on stderr at the end.
    first_failures: Vec<ChildError>,
    /// The first value that is a pickled Python object.
    pickled: Option<String>,
}

/// Failures whose message (and traceback) `BatchPrinter::finish` shows.
const FAILURES_SHOWN: usize = 20;

impl BatchPrinter {
    pub(crate) fn new(batch: &BatchHandle, out: &Output) -> Result<Self, RenderError> {
        if out.is_json() {
            let head = format!(
                "{{\n  \"group_id\": {},\n  \"total\": {},\n  \"results\": [",
                json!(batch.group_id()),
                batch.total()
            );
            emit(&head)?;
        }
        Ok(Self {
            json: out.is_json(),
            printed: 0,
            failed: 0,
            first_failures: Vec::new(),
            pickled: None,
        })
    }

    /// Print one item now.
    pub(crate) fn item(&mut self, item: BatchItem) -> Result<(), RenderError> {
        let text = if self.json {
            let entry = match &item.outcome {
                Ok(v) => json!({"index": item.index, "job_id": item.job_id, "value": v}),
                Err(e) => {
                    json!({"index": item.index, "job_id": item.job_id, "error": e.to_string()})
                }
            };
            let pretty = serde_json::to_string_pretty(&entry).map_err(|e| {
                RenderError::Failed(format!("could not encode the output as JSON: {e}"))
            })?;
            let sep = if self.printed == 0 { "" } else { "," };
            format!("{sep}\n    {}", pretty.replace('\n', "\n    "))
        } else {
            match &item.outcome {
                Ok(value) => format!("{}\n", serde_json::to_string(value).unwrap_or_default()),
                Err(e) => format!(
                    "{FAILED_INPUT_MARK} {}: {}\n",
                    item.index,
                    e.to_string().trim().replace('\n', " ")
                ),
            }
        };
        emit(&text)?;
        self.printed += 1;
        match item.outcome {
            Ok(value) => {
                if self.pickled.is_none() && !self.json {
                    self.pickled = pickled_python(&value);
                }
            }
            Err(e) => {
                self.failed += 1;
                if self.first_failures.len() < FAILURES_SHOWN {
                    self.first_failures.push(e);
                }
            }
        }
        Ok(())
    }

    /// Close the output, report the failures; fails when any input failed.
    pub(crate) fn finish(self, batch: &BatchHandle) -> Result<(), RenderError> {
        if self.json {
            let close = if self.printed == 0 { "]" } else { "\n  ]" };
            emit(&format!("{close},\n  \"failed\": {}\n}}\n", self.failed))?;
        } else {
            if let Some(python) = &self.pickled {
                note_pickled(python, "kinetic.attach_batch(GROUP_ID).results()");
            }
            for e in &self.first_failures {
                info(&e.to_string());
                if let Some(tb) = e
                    .engine_error()
                    .and_then(|err| err.remote())
                    .and_then(|r| r.traceback.as_ref())
                {
                    info(tb.trim_end());
                }
            }
            if self.failed > FAILURES_SHOWN {
                info(&format!("… and {} more", self.failed - FAILURES_SHOWN));
            }
        }
        let missing = batch.never_submitted();
        if self.failed == 0 {
            Ok(())
        } else if !missing.is_empty() {
            Err(RenderError::Failed(never_submitted(batch, &missing)))
        } else {
            Err(RenderError::Failed(format!(
                "batch {}: {} of {} inputs failed",
                batch.group_id(),
                self.failed,
                batch.total()
            )))
        }
    }
}

/// "12 of 30 inputs were never submitted (inputs 18, 19, …); resume with …".
pub(crate) fn never_submitted(batch: &BatchHandle, missing: &[usize]) -> String {
    let shown: Vec<String> = missing.iter().take(10).map(ToString::to_string).collect();
    let more = if missing.len() > 10 { ", …" } else { "" };
    format!(
        "batch {}: {} of {} inputs were never submitted (inputs {}{more}); resume with `kinetic batch resume {}`",
        batch.group_id(),
        missing.len(),
        batch.total(),
        shown.join(", "),
        batch.group_id()
    )
}

/// A batch's counts as a person reads them, and the inputs that are
/// done: an input never submitted is not done (the engine's counts call
/// it skipped); it is counted apart, with the command that submits it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchTally {
    /// The counts, as the batch has them.
    pub(crate) counts: BatchCounts,
    /// Inputs no job is known for and none will be submitted for.
    pub(crate) never_submitted: usize,
    /// Of the failed inputs, those cancelled (`kinetic batch cancel`),
    /// where the caller read the states.
    pub(crate) cancelled: usize,
}

impl BatchTally {
    /// The batch's counts now (no backend call).
    pub(crate) fn of(batch: &BatchHandle) -> Self {
        Self::new(batch.counts(), batch.never_submitted().len())
    }

    /// `counts`, of which `never_submitted` inputs were never submitted.
    pub(crate) fn new(counts: BatchCounts, never_submitted: usize) -> Self {
        Self {
            counts,
            never_submitted,
            cancelled: 0,
        }
    }

    /// The same tally, saying how many of the failed inputs in `states`
    /// were cancelled.
    pub(crate) fn with_cancelled<'a>(
        mut self,
        states: impl IntoIterator<Item = &'a kinetic_core::status::JobState>,
    ) -> Self {
        self.cancelled = states
            .into_iter()
            .filter(|s| {
                s.status == kinetic_core::status::JobStatus::Failed
                    && s.reason == Some(kinetic_core::status::StatusReason::Cancelled)
            })
            .count();
        self
    }

    /// Never-submitted inputs the counts call skipped (the others are
    /// counted unknown).
    fn skipped_never(&self) -> usize {
        self.never_submitted.saturating_sub(self.counts.unknown)
    }

    /// Inputs that ran, or will not run for a reason other than never
    /// being submitted (failed, cancelled, fail-fast).
    pub(crate) fn done(&self) -> usize {
        self.counts.finished().saturating_sub(self.skipped_never())
    }

    /// True when every input ended with a value.
    pub(crate) fn all_succeeded(&self) -> bool {
        self.counts.succeeded == self.counts.total()
    }

    /// `3/21 done: 3 succeeded; 18 never submitted`, `5/5 done: 5 failed
    /// (5 cancelled)`.
    pub(crate) fn text(&self) -> String {
        let c = &self.counts;
        let failed = if self.cancelled > 0 {
            format!("failed ({} cancelled)", self.cancelled)
        } else {
            "failed".to_owned()
        };
        let parts = [
            ("succeeded", c.succeeded),
            (failed.as_str(), c.failed),
            ("not found", c.not_found),
            ("submit failed", c.submit_failed),
            ("skipped", c.skipped.saturating_sub(self.skipped_never())),
            ("running", c.running),
            ("pending", c.pending),
            ("submitting", c.submitting),
            ("queued", c.queued),
            ("unknown", c.unknown.saturating_sub(self.never_submitted)),
        ];
        let shown: Vec<String> = parts
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(name, n)| format!("{n} {name}"))
            .collect();
        let mut text = format!("{}/{} done", self.done(), c.total());
        if !shown.is_empty() {
            text.push_str(": ");
            text.push_str(&shown.join(", "));
        }
        if self.never_submitted > 0 {
            text.push_str(&format!("; {} never submitted", self.never_submitted));
        }
        text
    }
}

/// A job's output as it is printed on stdout: as stored when stdout is not
/// a terminal (a file, a pipe: the bytes the job wrote), and with its
/// control characters escaped when it is, so that what a job wrote cannot
/// drive the terminal (clear the screen, retitle the window, hide lines).
pub(crate) fn job_output(text: &str) -> std::borrow::Cow<'_, str> {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        escape_controls(text)
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// `text` with every control character but newline and tab written as an
/// escape (`\x1b`, `\r`, `\u{9b}`): ESC starts the terminal's control
/// sequences, and C1 controls (U+0080–U+009F) are read as such too.
pub(crate) fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    let control = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\r' => out.push_str("\\r"),
            c if control(c) && (c as u32) < 0x80 => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if control(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_control_sequences_are_escaped_for_a_terminal() {
        // Issue 25.10: a stored chunk holding `\x1b[2J` cleared the screen.
        assert_eq!(
            escape_controls("step 1\n\x1b[2J\x1b]0;pwned\x07done\r\n\ttab \u{9b}31m é\n"),
            "step 1\n\\x1b[2J\\x1b]0;pwned\\x07done\\r\n\ttab \\u{9b}31m é\n"
        );
        assert!(matches!(
            escape_controls("plain\n\tline"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn pickled_python_values_are_found_wherever_they_are() {
        let leaf = json!({"__kinetic_pickle__": "gAU=", "python": "3.11"});
        assert_eq!(pickled_python(&leaf).as_deref(), Some("3.11"));
        let nested = json!({"a": [1, {"b": leaf}]});
        assert_eq!(pickled_python(&nested).as_deref(), Some("3.11"));
        for plain in [
            json!([1, "x", null]),
            json!({"__kinetic_pickle__": 5}),
            json!({"__kinetic_dict__": [["__kinetic_pickle__", "x"]]}),
        ] {
            assert_eq!(pickled_python(&plain), None, "{plain}");
        }
    }
}
