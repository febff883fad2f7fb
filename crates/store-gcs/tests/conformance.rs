//! `GcsStore` passes the ObjectStore conformance suite over every URL kind
//! it serves without a network: a local directory and memory.

use kinetic_core::ports::ObjectStore;
use kinetic_store_gcs::GcsStore;
use kinetic_testkit::conformance;

#[tokio::test]
async fn file_url_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().join("store").display());
    let store = GcsStore::from_url(&url).unwrap();
    conformance::object_store::run(&store).await;
}

#[tokio::test]
async fn memory_url_store_conforms() {
    conformance::object_store::run(&GcsStore::from_url("memory://").unwrap()).await;
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
fn bad_urls_are_named() {
    let err = GcsStore::from_url("ftp://x/y").unwrap_err().to_string();
    assert!(err.contains("ftp") && err.contains("file:///"), "{err}");
    let err = GcsStore::from_url("not a url").unwrap_err().to_string();
    assert!(err.contains("not a url"), "{err}");
}
