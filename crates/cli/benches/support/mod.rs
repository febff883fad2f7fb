//! What the `kinetic map` benches share: one timed map through the real
//! binary on the local backend.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// Seconds `kinetic map ENTRY` takes over `n` inputs `0..n`, checking every
/// value.
pub(crate) fn map(
    home: &Path,
    entry: &str,
    n: usize,
    extra: &[&str],
    expect: impl Fn(usize) -> String,
) -> f64 {
    let proj = home.join("proj");
    let inputs = proj.join("inputs.jsonl");
    let text: String = (0..n).map(|i| format!("{i}\n")).collect();
    std::fs::write(&inputs, text).expect("write inputs");
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_kinetic"))
        .args(["map", entry, "--inputs"])
        .arg(&inputs)
        .args(extra)
        .env("HOME", home)
        .env("KINETIC_LOCAL_ROOT", home.join("local"))
        .env(
            "KINETIC_STORE_URL",
            format!("file://{}", home.join("store").display()),
        )
        .env_remove("KINETIC_PROFILE")
        .env_remove("KINETIC_BACKEND")
        .env_remove("KINETIC_LOCAL_MAX_CONCURRENT")
        .current_dir(&proj)
        .output()
        .expect("run kinetic");
    let secs = started.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "kinetic map failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let values: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(values.len(), n);
    for (i, v) in values.iter().enumerate() {
        assert_eq!(*v, expect(i), "input {i}");
    }
    secs
}
