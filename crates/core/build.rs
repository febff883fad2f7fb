//! Writes the runner the engine embeds (`RUNNER_SOURCE`): the text of
//! `runner/kinetic_runner.py` with the job-side `kinetic` module
//! (`runner/kinetic_job.py`) on its `JOB_MODULE_SOURCE = None` line, as a
//! Python string, so the one file every backend ships carries both.

use std::fmt::Write as _;

const RUNNER: &str = "../../runner/kinetic_runner.py";
const JOB_MODULE: &str = "../../runner/kinetic_job.py";
const PLACEHOLDER: &str = "\nJOB_MODULE_SOURCE = None\n";

fn python_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn main() {
    println!("cargo:rerun-if-changed={RUNNER}");
    println!("cargo:rerun-if-changed={JOB_MODULE}");
    let runner = std::fs::read_to_string(RUNNER).expect("runner/kinetic_runner.py");
    let module = std::fs::read_to_string(JOB_MODULE).expect("runner/kinetic_job.py");
    assert_eq!(
        runner.matches(PLACEHOLDER).count(),
        1,
        "runner/kinetic_runner.py must hold exactly one `JOB_MODULE_SOURCE = None` line"
    );
    let line = format!("\nJOB_MODULE_SOURCE = {}\n", python_string(&module));
    let embedded = runner.replacen(PLACEHOLDER, &line, 1);
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(out.join("kinetic_runner.py"), embedded).expect("write the embedded runner");
}
