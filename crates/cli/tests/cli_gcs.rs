//! `kinetic run` with its store on a GCS bucket: `kinetic-fake-gcp`'s fake server,
//! reached through `KINETIC_STORE_URL=gs://…` and `KINETIC_GCS_ENDPOINT`,
//! which the local backend's runner also reads.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kinetic_fake_gcp::{FakeGcs, GcsOp};

fn kinetic(home: &Path, cwd: &Path, envs: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kinetic"));
    cmd.args(args)
        .env("HOME", home)
        .env("KINETIC_LOCAL_ROOT", home.join("local"))
        .env_remove("KINETIC_PROFILE")
        .env_remove("KINETIC_PROJECT")
        .env_remove("KINETIC_GCS_ENDPOINT")
        .env_remove("KINETIC_STORE_URL")
        .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
        .current_dir(cwd);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().expect("run kinetic")
}

fn project(home: &Path) -> PathBuf {
    let proj = home.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::write(
        proj.join("pyproject.toml"),
        "[project]\nname = \"proj\"\ndependencies = []\n",
    )
    .unwrap();
    std::fs::write(proj.join("work.py"), "def square(x):\n    return x * x\n").unwrap();
    proj
}

#[test]
fn run_with_the_store_on_a_gcs_bucket() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().canonicalize().unwrap();
    let proj = project(&home);
    let gcs = FakeGcs::with_buckets(&["cli-bucket"]).unwrap();
    let endpoint = gcs.endpoint();
    let out = kinetic(
        &home,
        &proj,
        &[
            ("KINETIC_STORE_URL", "gs://cli-bucket/runs"),
            ("KINETIC_GCS_ENDPOINT", endpoint.as_str()),
        ],
        &["run", "work:square", "--arg", "7"],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    assert_eq!(stdout.trim(), "49", "stderr: {stderr}");
    // The CLI wrote the job under the prefix, the runner wrote its result
    // there, and collecting the value cleaned the job up.
    let requests = gcs.requests();
    assert!(
        requests
            .iter()
            .all(|r| r.bucket == "cli-bucket" && r.name.starts_with("runs/")),
        "{requests:?}"
    );
    assert!(
        requests
            .iter()
            .any(|r| r.op == GcsOp::Put && r.name.starts_with("runs/contexts/")),
        "{requests:?}"
    );
    assert!(
        requests
            .iter()
            .any(|r| r.op == GcsOp::Put && r.name.ends_with("/result.json")),
        "the runner wrote its result to the bucket: {requests:?}"
    );
    // Bucket artifacts are removed only when asked (Kinetic's FAQ); the
    // job's folder says it was cleaned up after its value was collected.
    let objects = gcs.list_objects("cli-bucket");
    assert!(
        objects.iter().any(|(n, _)| n.ends_with("/result.json"))
            && objects.iter().any(|(n, _)| n.ends_with("/cleanup.json")),
        "{objects:?}"
    );
}

#[test]
fn a_bare_gs_url_needs_a_configured_project() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().canonicalize().unwrap();
    let proj = project(&home);
    let out = kinetic(
        &home,
        &proj,
        &[("KINETIC_STORE_URL", "gs://")],
        &["run", "work:square", "--arg", "7"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("KINETIC_STORE_URL") && stderr.contains("project"),
        "{stderr}"
    );
}

/// `data:gs://…` arguments, read as the reference reads them: without a
/// trailing slash a single object (with a warning when its last segment has
/// no `.`), with one a directory; a missing object is named, with the
/// directory of that name hinted.
#[test]
fn a_gs_data_argument_without_a_trailing_slash_is_the_single_object() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().canonicalize().unwrap();
    let proj = project(&home);
    std::fs::write(
        proj.join("look.py"),
        "import os\n\ndef look(path):\n    if os.path.isdir(path):\n        return sorted(os.listdir(path))\n    with open(path) as f:\n        return f.read()\n",
    )
    .unwrap();
    let gcs = FakeGcs::with_buckets(&["cli-bucket", "data-bucket"]).unwrap();
    gcs.put_object("data-bucket", "ds/x", b"the object");
    gcs.put_object("data-bucket", "ds/x/a.txt", b"a");
    gcs.put_object("data-bucket", "ds/only-dir/b.txt", b"b");
    let endpoint = gcs.endpoint();
    let envs = [
        ("KINETIC_STORE_URL", "gs://cli-bucket/runs"),
        ("KINETIC_GCS_ENDPOINT", endpoint.as_str()),
    ];
    let run = |uri: &str| {
        let arg = format!("data:{uri}");
        kinetic(&home, &proj, &envs, &["run", "look:look", "--arg", &arg])
    };

    let out = run("gs://data-bucket/ds/x");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    assert_eq!(stdout.trim(), "the object", "stderr: {stderr}");
    assert!(
        stderr.contains(
            "warning: gs://data-bucket/ds/x has no trailing slash, so it names a single object"
        ) && stderr.contains("write gs://data-bucket/ds/x/"),
        "{stderr}"
    );

    let out = run("gs://data-bucket/ds/x/");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    assert_eq!(stdout.trim(), "[\"a.txt\"]", "stderr: {stderr}");
    assert!(!stderr.contains("trailing slash"), "{stderr}");

    let out = run("gs://data-bucket/ds/only-dir");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("data gs://data-bucket/ds/only-dir: no such object")
            && stderr.contains("end the URI with a slash"),
        "{stderr}"
    );
}
