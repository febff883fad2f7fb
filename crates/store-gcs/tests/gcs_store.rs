//! `GcsStore` over the fake GCS server: multipart streaming, error kinds,
//! the one retry layer, pagination, and the XML calls the port does not
//! use (copy) through `object_store` itself.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kinetic_core::ports::{GetOptions, ObjectPath, ObjectStore, PutOptions, StoreError};
use kinetic_fake_gcp::{FakeGcs, GcsFault, GcsOp};
use kinetic_store_gcs::{GcsOptions, GcsStore, RetrySettings};

const BUCKET: &str = "test-bucket";

fn path(s: &str) -> ObjectPath {
    ObjectPath::parse(s).unwrap()
}

fn setup() -> (FakeGcs, GcsStore) {
    let gcs = FakeGcs::with_buckets(&[BUCKET]).unwrap();
    let store = GcsStore::open(
        &format!("gs://{BUCKET}"),
        &GcsOptions::emulator(&gcs.endpoint()).with_parts(5 * 1024 * 1024, 2),
    )
    .unwrap();
    (gcs, store)
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i / 251) as u8)
        .collect()
}

#[tokio::test]
async fn large_files_go_up_in_parts_and_come_back_whole() {
    let (gcs, store) = setup();
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(23 * 1024 * 1024 + 17);
    let src = dir.path().join("big.bin");
    std::fs::write(&src, &data).unwrap();
    let p = path("job-1/big.bin");
    let n = store
        .put_file(
            &p,
            &src,
            PutOptions::default().with_content_type("application/x-test"),
        )
        .await
        .unwrap();
    assert_eq!(n, data.len() as u64);
    assert_eq!(gcs.count(GcsOp::InitiateMultipart), 1);
    assert_eq!(gcs.count(GcsOp::UploadPart), 5, "23 MiB in 5 MiB parts");
    assert_eq!(gcs.count(GcsOp::CompleteMultipart), 1);
    assert_eq!(
        gcs.count(GcsOp::Put),
        0,
        "no single-shot upload of a large file"
    );
    assert_eq!(gcs.pending_multipart_uploads(), 0);
    assert_eq!(
        gcs.content_type(BUCKET, "job-1/big.bin").as_deref(),
        Some("application/x-test")
    );

    let dest = dir.path().join("back.bin");
    assert_eq!(
        store.get_to_file(&p, &dest).await.unwrap(),
        data.len() as u64
    );
    assert!(
        std::fs::read(&dest).unwrap() == data,
        "downloaded bytes differ"
    );
    let mid = store
        .get(&p, GetOptions::range(5_000_000..5_000_100))
        .await
        .unwrap();
    assert_eq!(&mid[..], &data[5_000_000..5_000_100]);
}

#[tokio::test]
async fn a_failed_part_leaves_no_object_and_no_open_upload() {
    let (gcs, store) = setup();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("big.bin");
    std::fs::write(&src, pattern(16 * 1024 * 1024)).unwrap();
    gcs.inject(GcsFault::status(503).on(GcsOp::UploadPart).after(1));
    let err = store
        .put_file(&path("job-1/big.bin"), &src, PutOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_retryable(), "a 503 is retryable: {err:?}");
    assert!(gcs.object(BUCKET, "job-1/big.bin").is_none());
    assert!(
        store
            .head(&path("job-1/big.bin"))
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert_eq!(gcs.count(GcsOp::AbortMultipart), 1, "the upload is aborted");
    assert_eq!(gcs.pending_multipart_uploads(), 0);
}

#[tokio::test]
async fn create_if_absent_on_a_large_file_refuses_an_existing_object() {
    let (gcs, store) = setup();
    gcs.put_object(BUCKET, "taken", b"old");
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("big.bin");
    std::fs::write(&src, pattern(6 * 1024 * 1024)).unwrap();
    let err = store
        .put_file(&path("taken"), &src, PutOptions::create_if_absent())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::AlreadyExists { .. }), "{err:?}");
    assert_eq!(gcs.object(BUCKET, "taken").unwrap(), b"old");
}

#[tokio::test]
async fn http_failures_map_to_what_the_caller_does_next() {
    let (gcs, store) = setup();
    let p = path("a/b.json");
    let put = || store.put(&p, Bytes::from_static(b"{}"), PutOptions::default());

    for status in [503, 500, 429] {
        gcs.inject(GcsFault::status(status).on(GcsOp::Put));
        let err = put().await.unwrap_err();
        assert!(
            matches!(err, StoreError::Unavailable { .. }) && err.is_retryable(),
            "{status}: {err:?}"
        );
        assert!(
            find::<object_store::Error>(&err).is_some(),
            "object_store's error is the source: {err:?}"
        );
        assert!(
            err.to_string().contains("gs://test-bucket/a/b.json"),
            "{err}"
        );
    }
    gcs.inject(GcsFault::status(403).on(GcsOp::Put));
    let err = put().await.unwrap_err();
    assert!(
        matches!(err, StoreError::PermissionDenied { .. }),
        "{err:?}"
    );
    assert!(!err.is_retryable());

    put().await.unwrap();
    let err = store
        .put(&p, Bytes::from_static(b"x"), PutOptions::create_if_absent())
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::AlreadyExists { .. }),
        "412 → {err:?}"
    );

    gcs.inject(GcsFault::status(503).on(GcsOp::Head));
    assert!(store.head(&p).await.unwrap_err().is_retryable());
    gcs.inject(GcsFault::status(503).on(GcsOp::Get));
    assert!(
        store
            .get(&p, GetOptions::default())
            .await
            .unwrap_err()
            .is_retryable()
    );
    gcs.inject(GcsFault::status(503).on(GcsOp::List));
    assert!(store.list(None).await.unwrap_err().is_retryable());
    gcs.inject(GcsFault::status(503).on(GcsOp::Delete));
    assert!(store.delete(&p).await.unwrap_err().is_retryable());
    assert!(
        store.head(&p).await.is_ok(),
        "the failed delete deleted nothing"
    );

    let missing = path("nothing/here");
    assert!(
        store
            .get(&missing, GetOptions::default())
            .await
            .unwrap_err()
            .is_not_found()
    );
    store
        .delete(&missing)
        .await
        .expect("deleting a missing object succeeds");
}

#[tokio::test]
async fn a_missing_bucket_is_not_found_and_a_dead_endpoint_is_unavailable() {
    let gcs = FakeGcs::start().unwrap();
    let store = GcsStore::open(
        "gs://no-such-bucket",
        &GcsOptions::emulator(&gcs.endpoint()),
    )
    .unwrap();
    assert!(store.head(&path("x")).await.unwrap_err().is_not_found());

    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dead = GcsStore::open(
        "gs://some-bucket",
        &GcsOptions::emulator(&format!("http://127.0.0.1:{port}")),
    )
    .unwrap();
    let err = dead.head(&path("x")).await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable { .. }), "{err:?}");
}

#[tokio::test]
async fn retries_happen_once_inside_the_client() {
    let gcs = FakeGcs::with_buckets(&[BUCKET]).unwrap();
    let retry = RetrySettings::none()
        .max_retries(2)
        .retry_timeout(Duration::from_secs(10))
        .backoff(Duration::from_millis(1), Duration::from_millis(5));
    let store = GcsStore::open(
        &format!("gs://{BUCKET}"),
        &GcsOptions::emulator(&gcs.endpoint()).with_retry(retry),
    )
    .unwrap();
    let p = path("k");
    gcs.inject(GcsFault::status(503).on(GcsOp::Put).times(2));
    store
        .put(&p, Bytes::from_static(b"v"), PutOptions::default())
        .await
        .expect("two 503s are absorbed by two retries");
    assert_eq!(gcs.count(GcsOp::Put), 3);

    gcs.clear_requests();
    gcs.inject(GcsFault::status(503).on(GcsOp::Put).always());
    let err = store
        .put(&p, Bytes::from_static(b"v"), PutOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_retryable(), "{err:?}");
    assert!(err.is_retried(), "reported as retried already: {err:?}");
    let answer = find::<kinetic_store_gcs::GoogleError>(&err)
        .expect("the HTTP answer is in the error's chain");
    assert_eq!(answer.code, 503);
    assert!(
        answer.has_reason("ServiceUnavailable"),
        "GCS's XML error body is parsed: {answer:?}"
    );
    assert_eq!(gcs.count(GcsOp::Put), 3, "1 attempt + 2 retries, no more");
    gcs.clear_faults();

    // A conditional create is not idempotent: object_store does not retry it
    // on a 503 (the object may have been written), and neither do we.
    gcs.clear_requests();
    gcs.inject(GcsFault::status(503).on(GcsOp::Put));
    let err = store
        .put(
            &path("new"),
            Bytes::from_static(b"v"),
            PutOptions::create_if_absent(),
        )
        .await;
    assert!(gcs.count(GcsOp::Put) <= 3, "{err:?}");
}

/// The first error of type `T` in `err`'s chain of causes.
fn find<'a, T: std::error::Error + 'static>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    let mut cause = Some(err);
    while let Some(e) = cause {
        if let Some(found) = e.downcast_ref::<T>() {
            return Some(found);
        }
        cause = e.source();
    }
    None
}

#[tokio::test]
async fn listings_follow_continuation_tokens() {
    let (gcs, store) = setup();
    gcs.set_page_size(3);
    for i in 0..10 {
        gcs.put_object(BUCKET, &format!("many/f{i:02}"), b"x");
    }
    gcs.put_object(BUCKET, "many-not/x", b"x");
    let listed = store.list(Some(&path("many"))).await.unwrap();
    assert_eq!(listed.len(), 10);
    assert!(gcs.count(GcsOp::List) >= 4, "10 objects in pages of 3");
    assert_eq!(store.delete_prefix(&path("many")).await.unwrap(), 10);
    assert_eq!(gcs.list_objects(BUCKET), vec![("many-not/x".to_owned(), 1)]);
}

#[tokio::test]
async fn object_names_keep_their_characters() {
    let (gcs, store) = setup();
    let p = path("default/data-cache/h/a b#c%d+e.txt");
    store
        .put(&p, Bytes::from_static(b"odd"), PutOptions::default())
        .await
        .unwrap();
    assert_eq!(
        gcs.object(BUCKET, "default/data-cache/h/a b#c%d+e.txt")
            .unwrap(),
        b"odd",
        "the object has exactly the port's name, so the runner finds it"
    );
    let listed = store.list(Some(&path("default"))).await.unwrap();
    assert_eq!(listed[0].path, p);
}

#[tokio::test]
async fn copy_and_conditional_copy_through_object_store() {
    use object_store::ObjectStoreExt;
    use object_store::gcp::{GcpCredential, GoogleCloudStorageBuilder};
    let gcs = FakeGcs::with_buckets(&[BUCKET]).unwrap();
    let raw = GoogleCloudStorageBuilder::new()
        .with_bucket_name(BUCKET)
        .with_base_url(&gcs.endpoint())
        .with_credentials(Arc::new(object_store::StaticCredentialProvider::new(
            GcpCredential {
                bearer: String::new(),
            },
        )))
        .with_client_options(object_store::ClientOptions::new().with_allow_http(true))
        .with_retry(object_store::RetryConfig {
            max_retries: 0,
            ..Default::default()
        })
        .build()
        .unwrap();
    let a = object_store::path::Path::from("src/a");
    let b = object_store::path::Path::from("dst/b");
    raw.put(&a, Bytes::from_static(b"copied").into())
        .await
        .unwrap();
    raw.copy(&a, &b).await.unwrap();
    assert_eq!(gcs.object(BUCKET, "dst/b").unwrap(), b"copied");
    let err = raw.copy_if_not_exists(&a, &b).await.unwrap_err();
    assert!(
        matches!(err, object_store::Error::AlreadyExists { .. }),
        "{err:?}"
    );
    let err = raw
        .copy(&object_store::path::Path::from("nope"), &b)
        .await
        .unwrap_err();
    assert!(
        matches!(err, object_store::Error::NotFound { .. }),
        "{err:?}"
    );
    let listing = object_store::ObjectStore::list_with_delimiter(
        &raw,
        Some(&object_store::path::Path::from("src")),
    )
    .await
    .unwrap();
    assert_eq!(listing.objects.len(), 1);
    let top = object_store::ObjectStore::list_with_delimiter(&raw, None)
        .await
        .unwrap();
    let prefixes: Vec<_> = top.common_prefixes.iter().map(|p| p.to_string()).collect();
    assert_eq!(prefixes, vec!["dst", "src"]);
}
