//! Local jobs against the floor of one interpreter start, each row a ratio
//! measured in this one run:
//!
//! 1. `kinetic run` of a trivial function, warm, p50, against `python3 -c
//!    pass` p50 (target: at most 2×);
//! 2. `kinetic map` of trivial inputs in jobs per second, against bare
//!    `python3 -c pass` started two at a time (target: at least 0.45 of it);
//! 3. the same map with `--max-concurrent 2`, against the map with its
//!    default flags (target: at most 1.3× its wall time).
//!
//! `cargo bench -p kinetic-cli --bench speed_local`. The real interpreter
//! (what `python3` on PATH resolves to, through a version manager's shim if
//! need be) is put first on PATH for the floor and for kinetic alike, and
//! the local backend has two slots. `KINETIC_BENCH_JOBS=N` sets the map's
//! inputs (default 100), `KINETIC_BENCH_RUNS=N` the runs of row 1
//! (default 21).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

struct Bench {
    home: PathBuf,
    path: String,
    python: PathBuf,
}

impl Bench {
    fn new(home: &Path) -> Self {
        let out = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3 is needed by this bench");
        let python = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let dir = python.parent().expect("interpreter's directory");
        let path = format!(
            "{}:{}",
            dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let proj = home.join("proj");
        std::fs::create_dir_all(&proj).expect("mkdir");
        std::fs::write(proj.join("pyproject.toml"), "[project]\nname = \"proj\"\n").expect("write");
        std::fs::write(proj.join("work.py"), "def square(x):\n    return x * x\n").expect("write");
        Self {
            home: home.to_owned(),
            path,
            python,
        }
    }

    fn kinetic(&self, args: &[&str]) -> (Duration, String) {
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_kinetic"))
            .args(args)
            .env("HOME", &self.home)
            .env("PATH", &self.path)
            .env("KINETIC_LOCAL_ROOT", self.home.join("local"))
            .env("KINETIC_LOCAL_MAX_CONCURRENT", "2")
            .env(
                "KINETIC_STORE_URL",
                format!("file://{}", self.home.join("store").display()),
            )
            .env_remove("KINETIC_PROFILE")
            .env_remove("KINETIC_BACKEND")
            .current_dir(self.home.join("proj"))
            .output()
            .expect("run kinetic");
        let took = started.elapsed();
        assert!(
            out.status.success(),
            "kinetic {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        (took, String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn python_pass(&self) -> Duration {
        let started = Instant::now();
        let status = Command::new(&self.python)
            .args(["-c", "pass"])
            .env("PATH", &self.path)
            .status()
            .expect("run python3");
        assert!(status.success());
        started.elapsed()
    }

    fn map(&self, jobs: usize, extra: &[&str]) -> Duration {
        let inputs = self.home.join("proj").join("inputs.jsonl");
        let text: String = (0..jobs).map(|i| format!("{i}\n")).collect();
        std::fs::write(&inputs, text).expect("write inputs");
        let inputs = inputs.display().to_string();
        let mut args = vec!["map", "work:square", "--inputs", &inputs];
        args.extend_from_slice(extra);
        let (took, out) = self.kinetic(&args);
        let values: Vec<&str> = out.lines().collect();
        assert_eq!(values.len(), jobs);
        assert_eq!(values[jobs - 1], ((jobs - 1) * (jobs - 1)).to_string());
        took
    }

    /// `jobs` bare interpreter starts, two at a time.
    fn python_two_at_a_time(&self, jobs: usize) -> Duration {
        let started = Instant::now();
        std::thread::scope(|s| {
            for share in [jobs / 2, jobs - jobs / 2] {
                s.spawn(move || {
                    for _ in 0..share {
                        self.python_pass();
                    }
                });
            }
        });
        started.elapsed()
    }
}

fn p50(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn main() {
    let jobs = env_count("KINETIC_BENCH_JOBS", 100);
    let runs = env_count("KINETIC_BENCH_RUNS", 21);
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path().canonicalize().expect("canonical");
    let bench = Bench::new(&home);
    println!(
        "interpreter: {} (first on PATH); load average at start: {}",
        bench.python.display(),
        load()
    );

    // Warm-up: installs the runner, fills the page cache and the caches.
    for _ in 0..3 {
        bench.kinetic(&["run", "work:square", "--arg", "3"]);
        bench.python_pass();
    }
    let (mut ours, mut floor) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let (took, out) = bench.kinetic(&["run", "work:square", "--arg", "3"]);
        assert_eq!(out.trim(), "9");
        ours.push(took);
        floor.push(bench.python_pass());
    }
    let (ours, floor) = (p50(ours), p50(floor));
    println!(
        "kinetic run, warm, p50 of {runs}: {:.1} ms = {:.2}× python3 -c pass ({:.1} ms)  [target ≤ 2×]",
        ms(ours),
        ours.as_secs_f64() / floor.as_secs_f64(),
        ms(floor)
    );

    let bare = bench.python_two_at_a_time(jobs);
    let unlimited = bench.map(jobs, &[]);
    let bare_rate = jobs as f64 / bare.as_secs_f64();
    let map_rate = jobs as f64 / unlimited.as_secs_f64();
    println!(
        "kinetic map of {jobs}: {map_rate:.1} jobs/s = {:.2} of python3 -c pass two at a time ({bare_rate:.1} per s)  [target ≥ 0.45]",
        map_rate / bare_rate
    );

    let limited = bench.map(jobs, &["--max-concurrent", "2"]);
    println!(
        "kinetic map of {jobs} --max-concurrent 2: {:.2} s = {:.2}× the map with default flags ({:.2} s)  [target ≤ 1.3×]",
        limited.as_secs_f64(),
        limited.as_secs_f64() / unlimited.as_secs_f64(),
        unlimited.as_secs_f64()
    );
    println!("load average at end: {}", load());
}
