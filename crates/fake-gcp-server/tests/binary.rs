//! `kinetic-fake-gcp` writes its kubeconfig and env file, serves the fake
//! Kubernetes API, GCS and Cloud Build on loopback, and stops on SIGTERM;
//! `--help` describes it.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn http_get_with(addr: &str, path: &str, headers: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n{headers}\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn http_get(addr: &str, path: &str) -> String {
    http_get_with(addr, path, "")
}

fn http_get_with_token(addr: &str, path: &str, token: &str) -> String {
    http_get_with(addr, path, &format!("Authorization: Bearer {token}\r\n"))
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
        env.contains("export KINETIC_STORE_URL='gs://fake-project-kn-fake-jobs'"),
        "{env}"
    );
    assert!(
        env.contains("export KINETIC_PROJECT='fake-project'"),
        "{env}"
    );
    assert!(env.contains("export KINETIC_CLUSTER='fake'"), "{env}");
    assert!(env.contains("export KINETIC_NAMESPACE='team-a'"), "{env}");
    assert!(
        !env.contains("KINETIC_IMAGE"),
        "images come from the fake Cloud Build: {env}"
    );
    let exported = |name: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("export {name}='")))
            .and_then(|l| l.strip_suffix('\''))
            .unwrap_or_else(|| panic!("{name} not exported: {env}"))
            .to_owned()
    };
    let kc = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(kc.contains("namespace: team-a"), "{kc}");
    let url = exported("KINETIC_FAKE_K8S_URL");
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
    // The jobs and builds buckets exist on the fake GCS server.
    let gcs = exported("KINETIC_GCS_ENDPOINT");
    let gcs = gcs.strip_prefix("http://").unwrap();
    assert!(gcs.starts_with("127.0.0.1:"), "loopback only: {gcs}");
    for bucket in ["fake-project-kn-fake-jobs", "fake-project-kn-fake-builds"] {
        let listing = http_get(gcs, &format!("/{bucket}?list-type=2"));
        assert!(listing.contains(" 200 "), "{bucket}: {listing}");
    }
    // Artifact Registry answers, and wants the exported token.
    let cloud_build = exported("KINETIC_CLOUDBUILD_ENDPOINT");
    assert_eq!(cloud_build, exported("KINETIC_ARTIFACTREGISTRY_ENDPOINT"));
    let cloud_build = cloud_build.strip_prefix("http://").unwrap();
    assert!(cloud_build.starts_with("127.0.0.1:"), "loopback only");
    let tag = "/v1/projects/fake/locations/us/repositories/kn-fake/packages/base/tags/cpu-0";
    let refused = http_get(cloud_build, tag);
    assert!(refused.contains(" 401 "), "{refused}");
    let answer = http_get_with_token(cloud_build, tag, &exported("KINETIC_ACCESS_TOKEN"));
    assert!(
        answer.contains(" 404 ") && answer.contains("NOT_FOUND"),
        "{answer}"
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
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--state-dir <DIR>"), "{err}");
}

#[test]
fn help_describes_every_option() {
    let out = Command::new(env!("CARGO_BIN_EXE_kinetic-fake-gcp"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8_lossy(&out.stdout);
    for want in [
        "Cloud Build",
        "--state-dir <DIR>",
        "--namespace <NS>",
        "--project <PROJECT>",
        "--cluster <CLUSTER>",
        "--python <PYTHON>",
        "--wheelhouse <DIR>",
        "--image-cache <DIR>",
        "--image <IMAGE=PYTHON>",
    ] {
        assert!(help.contains(want), "{want} missing from:\n{help}");
    }
}
