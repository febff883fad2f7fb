//! How fast `kinetic run` streams a job's output: a Python job on the
//! local backend prints 100 MB (1,000,000 lines of 100 bytes) and the real
//! binary streams it to its stderr, which this bench reads and counts.
//!
//! `cargo bench -p kinetic-cli --bench log_stream` prints the wall time of
//! the run that streams, of the same job writing its 100 MB to `/dev/null`
//! instead (everything but the streaming), and the streaming rate: the
//! megabytes over the difference. Target: at least 100 MB/s.
//! `KINETIC_BENCH_MB=N` changes the size.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

const WORK_PY: &str = r#"
import sys

def spew(mb, to_log):
    line = "x" * 99 + "\n"
    chunk = line * 1000
    out = sys.stdout if to_log else open("/dev/null", "w")
    for _ in range(mb * 10):
        out.write(chunk)
    out.flush()
    return mb * 10000
"#;

fn megabytes() -> u64 {
    std::env::var("KINETIC_BENCH_MB")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(100)
}

/// One `kinetic run`: its wall time and the bytes it wrote to stderr.
fn run(home: &Path, mb: u64, to_log: bool) -> (f64, u64) {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kinetic"))
        .args(["run", "work:spew", "--arg", &mb.to_string(), "--arg"])
        .arg(if to_log { "true" } else { "false" })
        .env("HOME", home)
        .env("KINETIC_LOCAL_ROOT", home.join("local"))
        .env(
            "KINETIC_STORE_URL",
            format!("file://{}", home.join("store").display()),
        )
        .env_remove("KINETIC_PROFILE")
        .env_remove("KINETIC_BACKEND")
        .current_dir(home.join("proj"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kinetic");
    let mut stderr = child.stderr.take().expect("stderr");
    let counter = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0u64;
        loop {
            match stderr.read(&mut buf) {
                Ok(0) | Err(_) => return total,
                Ok(n) => total += n as u64,
            }
        }
    });
    let out = child.wait_with_output().expect("wait");
    let streamed = counter.join().expect("counter");
    let secs = started.elapsed().as_secs_f64();
    assert!(out.status.success(), "kinetic run failed");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        (mb * 10000).to_string()
    );
    (secs, streamed)
}

fn main() {
    let mb = megabytes();
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path().canonicalize().expect("canonical");
    std::fs::create_dir_all(home.join("proj")).expect("mkdir");
    std::fs::write(home.join("proj/work.py"), WORK_PY).expect("write");

    // Warm-up: installs the runner, fills the page cache.
    run(&home, 1, true);
    let (quiet, _) = run(&home, mb, false);
    let (streaming, streamed) = run(&home, mb, true);
    let bytes = mb * 1_000_000;
    assert!(
        streamed >= bytes,
        "only {streamed} of {bytes} bytes of output reached stderr"
    );
    let cost = (streaming - quiet).max(1e-3);
    println!("kinetic run, a job printing {mb} MB in 100-byte lines, local backend:");
    println!("  job writing to /dev/null (no streaming): {quiet:.2} s");
    println!("  job printing, streamed to stderr:       {streaming:.2} s");
    println!(
        "  streaming: {:.2} s for {mb} MB = {:.0} MB/s (target >= 100 MB/s)",
        cost,
        mb as f64 / cost
    );
}
