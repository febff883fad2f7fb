//! `GcsStore` passes the ObjectStore conformance suite over every URL kind
//! it serves: a bucket on `kinetic-fake-gcp`'s fake GCS server (at its root and
//! under a prefix), a local directory and memory. (The testkit's own
//! in-memory fake runs it in `crates/testkit/tests/memory_store.rs`.)

use kinetic_core::ports::ObjectStore;
use kinetic_fake_gcp::FakeGcs;
use kinetic_store_gcs::{GcsOptions, GcsStore};
use kinetic_testkit::conformance;

#[tokio::test]
async fn the_whole_suite_leaves_no_upload_open_on_the_fake_server() {
    let (gcs, store) = fake_server_store();
    conformance::object_store::run(&store).await;
    assert_eq!(gcs.pending_multipart_uploads(), 0, "no upload is left open");
}

#[tokio::test]
async fn gs_bucket_under_a_prefix_conforms_and_stays_inside_it() {
    let gcs = FakeGcs::with_buckets(&["conformance-bucket"]).unwrap();
    gcs.put_object("conformance-bucket", "outside", b"x");
    let store = GcsStore::open(
        "gs://conformance-bucket/some/prefix",
        &GcsOptions::emulator(&gcs.endpoint()),
    )
    .unwrap();
    conformance::object_store::run(&store).await;
    let names = gcs.list_objects("conformance-bucket");
    assert!(
        names
            .iter()
            .all(|(n, _)| n == "outside" || n.starts_with("some/prefix/")),
        "{names:?}"
    );
    assert!(
        store
            .list(None)
            .await
            .unwrap()
            .iter()
            .all(|m| m.path.as_str() != "outside"),
        "a prefixed store lists only its own objects"
    );
}

/// A `file://` store, with the directory it lives in.
fn file_store() -> (tempfile::TempDir, GcsStore) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().join("store").display());
    let store = GcsStore::from_url(&url).unwrap();
    (dir, store)
}

fn fake_server_store() -> (FakeGcs, GcsStore) {
    let gcs = FakeGcs::with_buckets(&["conformance-bucket"]).unwrap();
    // Small pages, so every listing follows continuation tokens.
    gcs.set_page_size(7);
    let store = GcsStore::open(
        "gs://conformance-bucket",
        &GcsOptions::emulator(&gcs.endpoint()),
    )
    .unwrap();
    (gcs, store)
}

mod gs_bucket_on_the_fake_server {
    kinetic_testkit::object_store_conformance_tests! {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        store_with_guard = super::fake_server_store();
    }
}

mod file_url_store {
    kinetic_testkit::object_store_conformance_tests! {
        #[tokio::test]
        store_with_guard = super::file_store();
    }
}

mod memory_url_store {
    kinetic_testkit::object_store_conformance_tests! {
        #[tokio::test]
        store = super::GcsStore::from_url("memory://").unwrap();
    }
}

#[test]
fn file_uris_point_into_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let store = GcsStore::local_dir(dir.path()).unwrap();
    let p = kinetic_core::ports::ObjectPath::parse("job-1/spec.json").unwrap();
    assert_eq!(
        store.uri(&p),
        format!("file://{}/job-1/spec.json", dir.path().display())
    );
}

#[test]
fn gs_uris_name_bucket_prefix_and_path() {
    let p = kinetic_core::ports::ObjectPath::parse("job-1/spec.json").unwrap();
    let opts = GcsOptions::emulator("http://127.0.0.1:9");
    let root = GcsStore::open("gs://my-bucket", &opts).unwrap();
    assert_eq!(root.uri(&p), "gs://my-bucket/job-1/spec.json");
    let nested = GcsStore::open("gs://my-bucket/a/b/", &opts).unwrap();
    assert_eq!(nested.uri(&p), "gs://my-bucket/a/b/job-1/spec.json");
    let jobs = GcsStore::for_jobs_bucket("proj", "kinetic-cluster", &opts).unwrap();
    assert_eq!(jobs.base_uri(), "gs://proj-kn-kinetic-cluster-jobs");
}

#[test]
fn bad_urls_are_named() {
    let err = GcsStore::from_url("ftp://x/y").unwrap_err().to_string();
    assert!(
        err.contains("ftp") && err.contains("file:///") && err.contains("gs://"),
        "{err}"
    );
    let err = GcsStore::from_url("not a url").unwrap_err().to_string();
    assert!(err.contains("not a url"), "{err}");
    let err = GcsStore::from_url("gs://Bad_Bucket/x")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("gs://Bad_Bucket/x") && err.contains("bucket"),
        "{err}"
    );
    let err = GcsStore::open(
        "gs://ok-bucket",
        &GcsOptions::default().with_endpoint("localhost:1"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("localhost:1") && err.contains("http://"),
        "{err}"
    );
}
