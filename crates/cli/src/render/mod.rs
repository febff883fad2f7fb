//! Everything the commands print: data on stdout (text for people, JSON
//! with `--json`), warnings and the job's own output on stderr, tables,
//! the progress displays ([`progress`]), and what the infrastructure
//! commands print ([`infra`]). Commands print through here
//! and nowhere else.

pub(crate) mod infra;
pub(crate) mod progress;

use std::io::Write;

use kinetic_engine::{BatchHandle, BatchItem, ChildError};
use serde::Serialize;
use serde_json::{Value, json};

use crate::error::CliError;

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

    /// `json` with `--json`, else `text`.
    pub(crate) fn either<T: Serialize>(&self, json: &T, text: &str) -> Result<(), CliError> {
        if self.json {
            self.json(json)
        } else {
            emit(text)
        }
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

/// A command's failure, on stderr.
pub(crate) fn error(err: &CliError) {
    eprintln!("error: {err}");
}

/// The traceback of a job that failed remotely, on stderr.
pub(crate) fn remote_traceback(traceback: &str) {
    eprintln!("--- remote traceback ---\n{}", traceback.trim_end());
}

/// Left-aligned columns separated by two spaces, with a header row; no
/// trailing spaces.
pub(crate) fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
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
pub(crate) fn value(value: &Value, out: &Output) -> Result<(), CliError> {
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
pub(crate) fn done(id_key: &str, id: &str, what: &str, out: &Output) -> Result<(), CliError> {
    out.either(
        &json!({id_key: id, "done": what}),
        &format!("{id}: {what}\n"),
    )
}

/// Print a batch's items: with `--json` one object; otherwise one JSON
/// value per input line (`null` where it failed) and the failures on
/// stderr. Fails (exit 1) when any input failed.
pub(crate) fn batch_items(
    batch: &BatchHandle,
    items: &[BatchItem],
    out: &Output,
) -> Result<(), CliError> {
    let failed: Vec<&ChildError> = items
        .iter()
        .filter_map(|i| i.outcome.as_ref().err())
        .collect();
    if out.is_json() {
        let results: Vec<Value> = items
            .iter()
            .map(|i| match &i.outcome {
                Ok(v) => json!({"index": i.index, "job_id": i.job_id, "value": v}),
                Err(e) => json!({"index": i.index, "job_id": i.job_id, "error": e.to_string()}),
            })
            .collect();
        out.json(&json!({
            "group_id": batch.group_id(),
            "total": batch.total(),
            "failed": failed.len(),
            "results": results,
        }))?;
    } else {
        let mut text = String::new();
        for item in items {
            let value = item.value().cloned().unwrap_or(Value::Null);
            text.push_str(&serde_json::to_string(&value).unwrap_or_default());
            text.push('\n');
        }
        emit(&text)?;
        if let Some(python) = items
            .iter()
            .find_map(|i| i.value().and_then(pickled_python))
        {
            note_pickled(&python, "kinetic.attach_batch(GROUP_ID).results()");
        }
        for e in failed.iter().take(20) {
            info(&e.to_string());
            if let Some(tb) = e
                .engine_error()
                .and_then(|err| err.remote())
                .and_then(|r| r.traceback.as_ref())
            {
                info(tb.trim_end());
            }
        }
        if failed.len() > 20 {
            info(&format!("… and {} more", failed.len() - 20));
        }
    }
    let missing = batch.never_submitted();
    if failed.is_empty() {
        Ok(())
    } else if !missing.is_empty() {
        Err(CliError::failed(crate::commands::batch::never_submitted(
            batch, &missing,
        )))
    } else {
        Err(CliError::failed(format!(
            "batch {}: {} of {} inputs failed",
            batch.group_id(),
            failed.len(),
            batch.total()
        )))
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
