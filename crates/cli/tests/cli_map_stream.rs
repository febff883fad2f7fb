//! `kinetic map` streams (issue 27, point 3): it reads its inputs line by
//! line and prints each value as soon as it and the inputs before it
//! ended, while later inputs still run or wait to be submitted. On the
//! local backend with the host's python3 and a directory store.

mod local_world;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use local_world::World;
use serde_json::{Value, json};

/// Input 0 answers at once; every other input waits for `{home}/release`.
fn work_py(home: &std::path::Path) -> String {
    format!(
        r#"
import os, time

RELEASE = {release:?}

def gated_square(x):
    if x != 0:
        for _ in range(12000):
            if os.path.exists(RELEASE):
                break
            time.sleep(0.01)
        else:
            raise RuntimeError("never released")
    return x * x
"#,
        release = home.join("release").to_string_lossy()
    )
}

#[test]
fn map_prints_the_first_value_while_later_inputs_wait_to_be_submitted() {
    let w = World::with_work(work_py);
    let n = 200u64;
    let lines: Vec<Value> = (0..n).map(|i| json!(i)).collect();
    let inputs = w.inputs("inputs.jsonl", &lines);
    let mut child = w
        .command(&[
            "map",
            "work:gated_square",
            "--inputs",
            &inputs,
            "--max-concurrent",
            "2",
            "--poll-interval",
            "0.2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kinetic map");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.expect("a line")).is_err() {
                return;
            }
        }
    });
    // Inputs 1 and 2 hold the two places until released, so the other
    // 197 cannot have been submitted yet: a map that printed only once
    // every input ended would print nothing here.
    let first = rx.recv_timeout(Duration::from_secs(180));
    let running = child.try_wait().expect("try_wait").is_none();
    std::fs::write(w.home.join("release"), "go").expect("release");
    let Ok(first) = first else {
        let out = child.wait_with_output().expect("wait");
        panic!(
            "no value printed while inputs were held; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    };
    assert_eq!(first, "0");
    assert!(running, "kinetic map ended before its inputs were released");
    let rest: Vec<String> = rx.iter().collect();
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected: Vec<String> = (1..n).map(|i| (i * i).to_string()).collect();
    assert_eq!(rest, expected);
}

#[test]
fn a_dry_run_reads_100000_input_lines() {
    let w = World::new("def square(x):\n    return x * x\n");
    let lines: Vec<Value> = (0..100_000u64).map(|i| json!({"x": i})).collect();
    let inputs = w.inputs("inputs.jsonl", &lines);
    let out = w.kinetic(&[
        "map",
        "work:square",
        "--inputs",
        &inputs,
        "--dry-run",
        "--json",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("100000"), "{text}");
}
