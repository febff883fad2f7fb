//! `kinetic-fake-gcp` writes its kubeconfig and env file, serves the fake
//! Kubernetes API on loopback, and stops on SIGTERM.
#![cfg(feature = "fake-k8s")]

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn http_get(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn writes_env_serves_and_stops() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kinetic-fake-gcp"))
        .args(["--state-dir"])
        .arg(dir.path())
        .args(["--namespace", "team-a"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let env_file = dir.path().join("env");
    let start = Instant::now();
    while !env_file.exists() {
        assert!(start.elapsed() < Duration::from_secs(30), "no env file");
        std::thread::sleep(Duration::from_millis(20));
    }
    let env = std::fs::read_to_string(&env_file).unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    assert!(
        env.contains(&format!("export KUBECONFIG='{}'", kubeconfig.display())),
        "{env}"
    );
    assert!(
        env.contains("export KINETIC_STORE_URL='gs://fake-kn-fake-jobs'"),
        "{env}"
    );
    assert!(
        env.contains("export KINETIC_GCS_ENDPOINT='http://127.0.0.1:"),
        "{env}"
    );
    assert!(env.contains("export KINETIC_IMAGE="), "{env}");
    assert!(env.contains("export KINETIC_NAMESPACE='team-a'"), "{env}");
    let kc = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(kc.contains("namespace: team-a"), "{kc}");
    let url = env
        .lines()
        .find_map(|l| l.strip_prefix("export KINETIC_FAKE_K8S_URL='"))
        .and_then(|l| l.strip_suffix('\''))
        .unwrap();
    let addr = url.strip_prefix("http://").unwrap();
    assert!(addr.starts_with("127.0.0.1:"), "loopback only: {addr}");
    let answer = http_get(addr, "/apis/batch/v1/namespaces/team-a/jobs");
    assert!(
        answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"),
        "{answer}"
    );
    assert!(answer.contains("\"kind\":\"JobList\""), "{answer}");
    let missing = http_get(addr, "/apis/batch/v1/namespaces/team-a/jobs/nope");
    assert!(
        missing.contains(" 404 ") && missing.contains("\"reason\":\"NotFound\""),
        "{missing}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn refuses_a_missing_state_dir() {
    let out = Command::new(env!("CARGO_BIN_EXE_kinetic-fake-gcp"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--state-dir is required"));
}
