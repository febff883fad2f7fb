//! The host's GPUs as a resource of the local backend, through the real
//! binary with a stand-in `nvidia-smi` first on `PATH`: jobs get whole
//! devices of their own and wait for them, CPU jobs see none, and JAX is
//! told to use CUDA.

mod sandbox;

use std::path::Path;
use std::time::{Duration, Instant};

use sandbox::{Sandbox, stderr, stdout};
use serde_json::Value;

const WORK_PY: &str = r#"
import os
import time


def hold(seconds):
    start = time.time()
    time.sleep(seconds)
    return {
        "devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "start": start,
        "end": time.time(),
    }


def devices():
    return [os.environ.get("JAX_PLATFORMS"), os.environ.get("CUDA_VISIBLE_DEVICES")]
"#;

/// A sandbox whose `PATH` starts with an `nvidia-smi` that lists `gpus`
/// devices, as the real one does (`nvidia-smi -L`).
fn with_gpus(gpus: u32) -> Sandbox {
    let sb = Sandbox::new(WORK_PY);
    let mut list = String::new();
    for i in 0..gpus {
        list.push_str(&format!(
            "GPU {i}: NVIDIA L4 (UUID: GPU-{i:08x}-0000-0000-0000-000000000000)\n"
        ));
    }
    let smi = sb.write(
        "bin/nvidia-smi",
        &format!("#!/bin/sh\ncat <<'EOF'\n{list}EOF\n"),
    );
    executable(&smi);
    let path = format!(
        "{}:{}",
        sb.path("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    sb.with_var("PATH", &path)
}

fn executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// The `--json` value of `kinetic run ARGS`.
fn run_value(sb: &Sandbox, args: &[&str]) -> Value {
    let mut all = vec!["--json", "run", "--backend", "local"];
    all.extend_from_slice(args);
    let o = sb.kinetic(&all);
    assert!(o.status.success(), "{}", stderr(&o));
    json(&stdout(&o))["value"].clone()
}

/// Six one-GPU jobs on a host with two GPUs and room for six jobs: never
/// more than two run at once, each on one device of its own, and no two
/// jobs on one device overlap in time.
#[test]
fn a_map_of_one_gpu_jobs_shares_two_gpus_one_job_per_device() {
    let sb = with_gpus(2).with_var("KINETIC_LOCAL_MAX_CONCURRENT", "6");
    let inputs = sb.write("home/project/in.jsonl", &"1.5\n".repeat(6));
    let o = sb.kinetic(&[
        "map",
        "work:hold",
        "--inputs",
        &inputs.display().to_string(),
        "--backend",
        "local",
        "--accelerator",
        "l4",
        "--max-concurrent",
        "6",
        "--poll-interval",
        "0.05",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let jobs: Vec<(String, f64, f64)> = stdout(&o)
        .lines()
        .map(|line| {
            let v = json(line);
            let devices = v["devices"].as_str().unwrap_or_default().to_owned();
            (
                devices,
                v["start"].as_f64().unwrap(),
                v["end"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(jobs.len(), 6, "{}", stdout(&o));
    for (devices, ..) in &jobs {
        assert!(
            devices == "0" || devices == "1",
            "each job sees exactly one device of the two: {jobs:?}"
        );
    }
    let overlap = |a: &(String, f64, f64), b: &(String, f64, f64)| a.1 < b.2 && b.1 < a.2;
    for (i, a) in jobs.iter().enumerate() {
        for b in &jobs[i + 1..] {
            assert!(
                a.0 != b.0 || !overlap(a, b),
                "two jobs on device {} at once: {jobs:?}",
                a.0
            );
        }
        let at_once = jobs.iter().filter(|b| b.1 <= a.1 && a.1 < b.2).count();
        assert!(at_once <= 2, "{at_once} jobs at once: {jobs:?}");
    }
}

/// A CPU job sees no GPU, whatever the host has.
#[test]
fn a_cpu_job_sees_no_gpu() {
    let sb = with_gpus(2);
    let v = run_value(&sb, &["work:devices", "--accelerator", "cpu"]);
    assert_eq!(v, serde_json::json!(["cpu", ""]));
}

/// JAX is told to use CUDA (its `gpu` also means ROCm, which fails to
/// start on an NVIDIA host), and the job sees as many devices as it asked
/// for.
#[test]
fn gpu_jobs_get_jax_platforms_cuda_and_their_devices() {
    let sb = with_gpus(4);
    for (accelerator, devices) in [("l4", "0"), ("a100x4", "0,1,2,3"), ("h100", "0")] {
        let v = run_value(&sb, &["work:devices", "--accelerator", accelerator]);
        assert_eq!(v, serde_json::json!(["cuda", devices]), "{accelerator}");
    }
    // A captured value still wins.
    let v = run_value(
        &sb,
        &[
            "work:devices",
            "--accelerator",
            "l4",
            "--env",
            "JAX_PLATFORMS=cuda,cpu",
        ],
    );
    assert_eq!(v[0], "cuda,cpu");
}

/// A job waiting for a GPU another job holds is PENDING and says so.
#[test]
fn a_job_waiting_for_a_gpu_says_which_job_holds_it() {
    let sb = with_gpus(1);
    let detach = |seconds: &str| {
        let o = sb.kinetic(&[
            "run",
            "--detach",
            "--backend",
            "local",
            "--accelerator",
            "l4",
            "work:hold",
            "--arg",
            seconds,
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o).trim().to_owned()
    };
    let first = detach("30");
    let second = detach("0");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let s = stdout(&sb.kinetic(&["jobs", "status", &second]));
        if s.contains("waiting for 1 GPU of 1 (1 held by") {
            break s;
        }
        assert!(Instant::now() < deadline, "never said it waits: {s}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.contains("PENDING"), "{status}");
    assert!(status.contains(&format!("1 held by {first}")), "{status}");
    let o = sb.kinetic(&["jobs", "cancel", &first]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = sb.kinetic(&["jobs", "result", &second]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(json(&stdout(&o))["devices"], "0", "{}", stdout(&o));
}

/// More GPUs than the host has, or GPUs on a host where they cannot be
/// counted, is an error naming the count and the accelerator, or the
/// setting that declares them; the setting then serves.
#[test]
fn gpus_the_host_cannot_give_are_refused_and_the_setting_declares_them() {
    let sb = with_gpus(2);
    let o = sb.kinetic(&[
        "run",
        "--backend",
        "local",
        "--accelerator",
        "a100x4",
        "work:devices",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("'gpu:a100x4' needs 4 GPUs but this host has 2 (listed by nvidia-smi -L)"),
        "{}",
        stderr(&o)
    );

    // No nvidia-smi: only the interpreter on PATH.
    let sb = Sandbox::new(WORK_PY);
    let python = python3();
    let bin = sb.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(&python, bin.join("python3")).unwrap();
    let sb = sb.with_var("PATH", &bin.display().to_string());
    let o = sb.kinetic(&[
        "run",
        "--backend",
        "local",
        "--accelerator",
        "l4",
        "work:devices",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("KINETIC_LOCAL_GPUS"), "{}", stderr(&o));
    let sb = sb.with_var("KINETIC_LOCAL_GPUS", "1");
    let v = run_value(&sb, &["work:devices", "--accelerator", "l4"]);
    assert_eq!(v, serde_json::json!(["cuda", "0"]));
}

fn python3() -> std::path::PathBuf {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 is needed by these tests");
    std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}
