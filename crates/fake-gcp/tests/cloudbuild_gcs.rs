//! The fake Cloud Build reads build sources from a fake GCS server's
//! buckets and writes build logs there, as the real one does in GCS: a
//! context tarball in the bucket is fetched and built; a missing one fails
//! the build's fetch step, with the log in the logs bucket.

use std::io::{Read, Write};

use kinetic_fake_gcp::cloudbuild::BuildSchedule;
use kinetic_fake_gcp::{FakeCloudBuild, FakeGcs};
use serde_json::{Value, json};

/// One HTTP/1.0 request; the answer's status and JSON body.
fn call(endpoint: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let addr = endpoint.strip_prefix("http://").expect("http endpoint");
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("read");
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let json = answer
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(Value::Null);
    (status, json)
}

/// A build context: a `tar.gz` holding these files.
fn context(files: &[(&str, &str)]) -> Vec<u8> {
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    for (name, text) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(text.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, name, text.as_bytes())
            .expect("append");
    }
    tar.into_inner().expect("tar").finish().expect("gzip")
}

fn build_request(object: &str) -> Value {
    json!({
        "source": {"storageSource": {"bucket": "p-kn-c-builds", "object": object}},
        "steps": [{"name": "gcr.io/cloud-builders/docker", "args": ["build", "-t", "us-docker.pkg.dev/p/kn-c/base:cpu-1", "."]}],
        "images": ["us-docker.pkg.dev/p/kn-c/base:cpu-1"],
        "logsBucket": "gs://p-kn-c-builds/build-logs",
    })
}

/// Create a build and poll it until it ends; its final JSON. Blocking: run
/// it off the runtime that serves the fake.
async fn build(cloud_build: &FakeCloudBuild, object: &str) -> Value {
    let endpoint = cloud_build.endpoint();
    let object = object.to_owned();
    tokio::task::spawn_blocking(move || build_blocking(&endpoint, &object))
        .await
        .expect("the build's polls")
}

fn build_blocking(endpoint: &str, object: &str) -> Value {
    let (status, op) = call(
        endpoint,
        "POST",
        "/v1/projects/p/locations/global/builds",
        Some(&build_request(object)),
    );
    assert_eq!(status, 200, "{op}");
    let id = op["metadata"]["build"]["id"]
        .as_str()
        .expect("a build id")
        .to_owned();
    for _ in 0..10 {
        let (status, b) = call(
            endpoint,
            "GET",
            &format!("/v1/projects/p/locations/global/builds/{id}"),
            None,
        );
        assert_eq!(status, 200, "{b}");
        if !matches!(b["status"].as_str(), Some("QUEUED" | "WORKING")) {
            return b;
        }
    }
    panic!("build {id} never ended")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builds_read_their_source_from_the_fake_gcs_buckets() {
    let gcs = FakeGcs::with_buckets(&["p-kn-c-builds"]).unwrap();
    let cloud_build = FakeCloudBuild::start().await.unwrap();
    cloud_build.set_schedule(BuildSchedule::success().with_polls(1, 1));
    cloud_build.attach_gcs(&gcs);
    gcs.put_object(
        "p-kn-c-builds",
        "contexts/a.tar.gz",
        &context(&[
            ("Dockerfile", "FROM python:3.11-slim\n"),
            ("requirements.txt", "six\n"),
        ]),
    );

    let done = build(&cloud_build, "contexts/a.tar.gz").await;
    assert_eq!(done["status"], "SUCCESS", "{done}");
    let fetched = &cloud_build.builds()[0];
    assert_eq!(fetched.dockerfile(), Some("FROM python:3.11-slim\n"));
    assert_eq!(
        fetched.files.get("requirements.txt").map(String::as_str),
        Some("six\n")
    );
    assert!(cloud_build.has_image("us-docker.pkg.dev/p/kn-c/base:cpu-1"));
    let log = gcs
        .object(
            "p-kn-c-builds",
            &format!("build-logs/log-{}.txt", fetched.id),
        )
        .expect("the build's log is in the logs bucket");
    assert!(String::from_utf8_lossy(&log).contains("DONE"));
    // Reading the bucket in process is not a client request of the server.
    assert!(gcs.requests().is_empty(), "{:?}", gcs.requests());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_missing_from_the_bucket_fails_the_fetch_step() {
    let gcs = FakeGcs::with_buckets(&["p-kn-c-builds"]).unwrap();
    let cloud_build = FakeCloudBuild::start().await.unwrap();
    cloud_build.attach_gcs(&gcs);
    let done = build(&cloud_build, "contexts/missing.tar.gz").await;
    assert_eq!(done["status"], "FAILURE", "{done}");
    let detail = done["statusDetail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("cannot fetch the source gs://p-kn-c-builds/contexts/missing.tar.gz")
            && detail.contains("NoSuchKey"),
        "{detail}"
    );
    assert!(!cloud_build.has_image("us-docker.pkg.dev/p/kn-c/base:cpu-1"));
    let id = &cloud_build.builds()[0].id;
    let log = gcs
        .object("p-kn-c-builds", &format!("build-logs/log-{id}.txt"))
        .expect("the failed build's log is in the logs bucket");
    assert!(String::from_utf8_lossy(&log).contains("FETCHSOURCE"));
}
