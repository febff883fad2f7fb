//! `kinetic map` on the local backend: 200 trivial Python jobs through the
//! real binary, the real runner and a directory store.
//!
//! `cargo bench -p kinetic-cli --bench map_local` prints the wall time and
//! jobs per second, with the local backend running as many jobs at once as
//! the machine has cores (its default): with `kinetic map`'s default flags
//! (64 in flight, 1 s polls), and with as many in flight as local slots
//! and 0.1 s polls (a queued input waits for a poll to see a slot free).
//! `KINETIC_BENCH_JOBS=N` changes the number of jobs.

mod support;

use std::path::Path;

fn jobs() -> usize {
    std::env::var("KINETIC_BENCH_JOBS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(200)
}

/// Seconds `kinetic map work:square` takes over `jobs` inputs, checking
/// every value.
fn run(home: &Path, jobs: usize, extra: &[&str]) -> f64 {
    support::map(home, "work:square", jobs, extra, |i| (i * i).to_string())
}

fn main() {
    let jobs = jobs();
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path().canonicalize().expect("canonical");
    let proj = home.join("proj");
    std::fs::create_dir_all(&proj).expect("mkdir");
    std::fs::write(proj.join("pyproject.toml"), "[project]\nname = \"proj\"\n").expect("write");
    std::fs::write(proj.join("work.py"), "def square(x):\n    return x * x\n").expect("write");
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let slots = cores.to_string();

    // Warm-up: installs the runner, fills the page cache.
    run(&home, 2, &["--poll-interval", "0.2"]);
    let default = run(&home, jobs, &[]);
    let matched = run(
        &home,
        jobs,
        &["--max-concurrent", &slots, "--poll-interval", "0.1"],
    );
    println!("kinetic map, {jobs} trivial Python jobs, local backend ({cores} slots = cores):");
    println!(
        "  default flags (64 in flight, 1 s polls)  {default:>7.1} s  {:>6.1} jobs/s",
        jobs as f64 / default
    );
    println!(
        "  --max-concurrent {slots} --poll-interval 0.1   {matched:>7.1} s  {:>6.1} jobs/s",
        jobs as f64 / matched
    );
}
