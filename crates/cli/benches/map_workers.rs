//! `kinetic map` on the local backend's worker pools against one process
//! per input (issue 27's local rows), through the real binary, the real
//! runner and a directory store.
//!
//! `cargo bench -p kinetic-cli --bench map_workers` prints each row as the
//! ratio it names:
//!
//! - (a) a map of N trivial inputs (default 10,000) against N bare
//!   `python3 -c pass` started `nproc` at a time (the interpreter `python3`
//!   resolves to, not a version manager's shim, as the local backend
//!   resolves it): the map's inputs per second over the bare starts per
//!   second (goal ≥ 5);
//! - (b) a map of M inputs that each sleep 10 ms (default 1,000) with
//!   `--max-concurrent 2`: the wall time over M × 10 ms / 2 (goal ≤ 1.3).
//!
//! Each row is measured with `--isolation workers` (the default) and with
//! `--isolation process` (the one-interpreter-per-input path, the
//! "before"). `KINETIC_BENCH_INPUTS` and `KINETIC_BENCH_SLEEPS` change N
//! and M; `KINETIC_BENCH_BEFORE` caps the inputs of the process runs
//! (default 1,000 for row (a): its ratio is a rate, so fewer inputs give
//! the same figure in less time).

mod support;

use std::process::{Child, Command, Stdio};
use std::time::Instant;

use support::map;

fn count(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

/// The interpreter `python3` really is (a version manager's shim on `PATH`
/// starts a shell first; the local backend resolves it the same way).
fn real_python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Seconds to run `n` bare `python -c pass`, `parallel` at a time.
fn bare_starts(python: &str, n: usize, parallel: usize) -> f64 {
    let started = Instant::now();
    let mut running: Vec<Child> = Vec::new();
    let mut left = n;
    while left > 0 || !running.is_empty() {
        while left > 0 && running.len() < parallel {
            running.push(
                Command::new(python)
                    .args(["-c", "pass"])
                    .stdin(Stdio::null())
                    .spawn()
                    .expect("python3"),
            );
            left -= 1;
        }
        let first = running.remove(0);
        let mut first = first;
        assert!(first.wait().expect("wait").success());
    }
    started.elapsed().as_secs_f64()
}

fn main() {
    let n = count("KINETIC_BENCH_INPUTS", 10_000);
    let m = count("KINETIC_BENCH_SLEEPS", 1_000);
    let before = count("KINETIC_BENCH_BEFORE", 1_000);
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path().canonicalize().expect("canonical");
    let proj = home.join("proj");
    std::fs::create_dir_all(&proj).expect("mkdir");
    std::fs::write(proj.join("pyproject.toml"), "[project]\nname = \"proj\"\n").expect("write");
    std::fs::write(
        proj.join("work.py"),
        "import time\n\ndef square(x):\n    return x * x\n\ndef nap(x):\n    time.sleep(0.01)\n    return x\n",
    )
    .expect("write");
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let square = |i: usize| (i * i).to_string();
    let same = |i: usize| i.to_string();

    // Warm-up: installs the runner, fills the page cache.
    map(&home, "work:square", 4, &["--poll-interval", "0.2"], square);

    let python = real_python();
    let bare = bare_starts(&python, n, cores);
    let bare_rate = n as f64 / bare;
    let workers_a = map(&home, "work:square", n, &["--poll-interval", "0.2"], square);
    let process_n = before.min(n);
    let process_a = map(
        &home,
        "work:square",
        process_n,
        &["--poll-interval", "0.2", "--isolation", "process"],
        square,
    );
    let rate = |k: usize, s: f64| k as f64 / s;
    println!(
        "(a) local map of trivial inputs vs bare `python3 -c pass` ({python}) started {cores} at a time (goal >= 5x):"
    );
    println!("    bare starts      {n:>6} in {bare:>7.1} s  {bare_rate:>7.1}/s");
    println!(
        "    workers          {n:>6} in {workers_a:>7.1} s  {:>7.1}/s  {:>5.2}x",
        rate(n, workers_a),
        rate(n, workers_a) / bare_rate
    );
    println!(
        "    process (before) {process_n:>6} in {process_a:>7.1} s  {:>7.1}/s  {:>5.2}x",
        rate(process_n, process_a),
        rate(process_n, process_a) / bare_rate
    );

    let ideal = m as f64 * 0.010 / 2.0;
    let flags = ["--max-concurrent", "2", "--poll-interval", "0.2"];
    let workers_b = map(&home, "work:nap", m, &flags, same);
    let mut process_flags = flags.to_vec();
    process_flags.extend(["--isolation", "process"]);
    let process_b = map(&home, "work:nap", m, &process_flags, same);
    println!(
        "(b) local map of {m} inputs sleeping 10 ms, --max-concurrent 2, vs {ideal:.1} s (goal <= 1.3x):"
    );
    println!(
        "    workers          {workers_b:>7.1} s  {:>5.2}x",
        workers_b / ideal
    );
    println!(
        "    process (before) {process_b:>7.1} s  {:>5.2}x",
        process_b / ideal
    );
}
