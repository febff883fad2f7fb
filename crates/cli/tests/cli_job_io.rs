//! What crosses between the client and a job, through the real binary on
//! the local backend: values whole (integers of any size, deep nesting,
//! strings JSON text carries but UTF-8 cannot, both ways), packed projects
//! within the extraction limits, and secret values kept out of what the
//! job's errors and logs show.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const VALUES_PY: &str = r#"
import os


def big():
    return 2 ** 100


def kind(x):
    return [type(x).__name__, x + 1]


def kinds(**kwargs):
    return {k: [type(v).__name__, v] for k, v in kwargs.items()}


def nested(depth):
    value = 1
    for _ in range(depth):
        value = [value]
    return value


def depth(value):
    n = 0
    while isinstance(value, list):
        value = value[0]
        n += 1
    return n


def surrogates():
    return {"lone": "a\ud800b", "pair": "\ud83d\ude00", "plain": "\U0001f600", "keys": {"k\udfff": 1}}


def describe(value):
    return [list(map(ord, value["lone"])), list(map(ord, value["pair"])), list(map(ord, value["plain"])), [list(map(ord, k)) for k in value["keys"]]]


def a_set():
    return {1, 2}


def leak(name):
    value = os.environ[name]
    print("the token is " + value, flush=True)
    raise RuntimeError("cannot use token " + value)
"#;

struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let project = dir.path().join("project");
        std::fs::create_dir_all(&project).expect("mkdir");
        std::fs::write(project.join("values.py"), VALUES_PY).expect("write");
        Self { dir }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn project(&self) -> PathBuf {
        self.root().join("project")
    }

    fn kinetic(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kinetic"));
        cmd.args(args)
            .current_dir(self.project())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.root())
            .env("KINETIC_LOCAL_ROOT", self.root().join("local"))
            .env("KINETIC_PROFILES_FILE", self.root().join("profiles.json"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("run kinetic")
    }

    /// `kinetic run ENTRY ARGS… --json`, which must succeed; its value.
    fn value(&self, args: &[&str]) -> Value {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        all.push("--json");
        let o = self.kinetic(&all, &[]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let mut answer =
            kinetic_core::json::parse(text.as_bytes()).unwrap_or_else(|e| panic!("{e}: {text}"));
        // `run --json` answers {"job_id", "value"}.
        answer
            .get_mut("value")
            .map(Value::take)
            .unwrap_or_else(|| panic!("no value in {text}"))
    }
}

#[test]
fn integers_beyond_64_bits_come_back_exact() {
    let p = Project::new();
    let o = p.kinetic(&["run", "values:big"], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "1267650600228229401496703205376\n"
    );
}

#[test]
fn integers_beyond_64_bits_reach_the_function_exact() {
    let p = Project::new();
    let big = "1267650600228229401496703205376";
    let value = p.value(&["values:kind", "--arg", big]);
    assert_eq!(
        value.to_string(),
        r#"["int",1267650600228229401496703205377]"#
    );
    let value = p.value(&[
        "values:kinds",
        "--kwargs",
        r#"{"a": -98765432109876543210987654321, "b": 0.1}"#,
    ]);
    assert_eq!(
        value.to_string(),
        r#"{"a":["int",-98765432109876543210987654321],"b":["float",0.1]}"#
    );
}

#[test]
fn lists_nested_deeper_than_128_go_both_ways() {
    let p = Project::new();
    let value = p.value(&["values:nested", "--arg", "300"]);
    let text = value.to_string();
    assert_eq!(text.matches('[').count(), 300, "{text}");
    let deep = format!("{}1{}", "[".repeat(400), "]".repeat(400));
    let value = p.value(&["values:depth", "--arg", &deep]);
    assert_eq!(value, Value::from(400));
}

#[test]
fn nesting_beyond_the_protocol_limit_is_a_clear_error_not_a_crash() {
    let p = Project::new();
    let o = p.kinetic(&["run", "values:nested", "--arg", "2000"], &[]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("ResultNotJSON") && err.contains("512"),
        "{err}"
    );
    let deep = format!("{}1{}", "[".repeat(600), "]".repeat(600));
    let o = p.kinetic(&["run", "values:depth", "--arg", &deep], &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--arg") && err.contains("512"), "{err}");
}

/// A value JSON cannot carry names its type and what to do instead, and
/// shows none of the runner's frames.
#[test]
fn a_result_json_cannot_carry_names_its_type_and_the_way_out() {
    let p = Project::new();
    let o = p.kinetic(&["run", "values:a_set"], &[]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("the function returned a set"), "{err}");
    assert!(err.contains("{1, 2}"), "{err}");
    assert!(err.contains("return JSON values"), "{err}");
    assert!(err.contains("the Python API"), "{err}");
    assert!(!err.contains("remote traceback"), "{err}");
    assert!(!err.contains("kinetic_runner.py"), "{err}");
    assert!(!err.contains("json/encoder.py"), "{err}");
}

#[test]
fn a_number_beyond_a_float_is_refused_naming_the_argument() {
    // Python would read 1e999 as inf: refused before anything is sent.
    let p = Project::new();
    for number in ["1e999", "[1, -1E400]", "1.5e-999"] {
        let o = p.kinetic(&["run", "values:depth", "--arg", number], &[]);
        assert_eq!(o.status.code(), Some(2), "{number}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("--arg") && err.contains("out of the range of a float"),
            "{err}"
        );
    }
}

#[test]
fn strings_with_surrogates_round_trip() {
    let p = Project::new();
    let value = p.value(&["values:surrogates"]);
    assert_eq!(
        value["lone"],
        serde_json::json!({"__kinetic_str__": ["a", 0xd800, "b"]})
    );
    assert_eq!(value["plain"], Value::from("\u{1f600}"));
    let back = p.value(&["values:describe", "--arg", &value.to_string()]);
    assert_eq!(
        back,
        serde_json::json!([
            [97, 0xd800, 98],
            [0xd83d, 0xde00],
            [0x1f600],
            [[107, 0xdfff]]
        ])
    );
}

#[test]
fn a_project_beyond_the_extraction_limits_is_refused_before_upload() {
    let p = Project::new();
    for n in 0..4 {
        std::fs::write(p.project().join(format!("extra{n}.py")), "x = 1\n").expect("write");
    }
    let o = p.kinetic(
        &["run", "values:big"],
        &[("KINETIC_CONTEXT_MAX_FILES", "3")],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("KINETIC_CONTEXT_MAX_FILES") && err.contains("limit of 3"),
        "{err}"
    );
    let store = p.root().join("local/store");
    let uploaded: Vec<_> = std::fs::read_dir(&store)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(uploaded.is_empty(), "{uploaded:?}");
    let o = p.kinetic(
        &["run", "values:big"],
        &[("KINETIC_CONTEXT_MAX_RATIO", "x")],
    );
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn secret_values_are_redacted_from_errors_tracebacks_and_logs() {
    let p = Project::new();
    let secret = "tok-51c0ffee-beef";
    let o = p.kinetic(
        &[
            "run",
            "values:leak",
            "--arg",
            "\"API_KEY_TWO\"",
            "--secret",
            "API_KEY_TWO",
        ],
        &[("API_KEY_TWO", secret)],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot use token <redacted>"), "{err}");
    assert!(err.contains("the token is <redacted>"), "{err}");
    assert!(!err.contains(secret), "{err}");
    // Nothing the engine stored holds it: result.json, the logs, the spec.
    let mut leaks = Vec::new();
    let mut stack = vec![p.root().join("local")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if std::fs::read(&path)
                .is_ok_and(|b| b.windows(secret.len()).any(|w| w == secret.as_bytes()))
            {
                leaks.push(path);
            }
        }
    }
    assert!(leaks.is_empty(), "the secret is stored in {leaks:?}");
    let job = err
        .split_whitespace()
        .find(|w| w.starts_with("job-"))
        .map(|w| w.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-'))
        .expect("a job id in the error");
    let o = p.kinetic(&["jobs", "logs", job], &[("API_KEY_TWO", secret)]);
    let logs = String::from_utf8_lossy(&o.stdout);
    assert!(
        logs.contains("<redacted>") && !logs.contains(secret),
        "{logs}"
    );
    let o = p.kinetic(&["run", "values:big", "--secret", "API_KEY_TWO=x"], &[]);
    assert_eq!(o.status.code(), Some(2));
}
