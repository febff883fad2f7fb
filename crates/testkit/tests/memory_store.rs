//! The in-memory store passes the ObjectStore conformance suite and injects faults.

use bytes::Bytes;
use kinetic_core::ports::{GetOptions, ObjectPath, ObjectStore, PutOptions, StoreError};
use kinetic_testkit::{MemoryStore, conformance};

#[tokio::test]
async fn memory_store_conforms() {
    conformance::object_store::run(&MemoryStore::new()).await;
}

#[tokio::test]
async fn fail_next_and_fail_on_script_errors() {
    let store = MemoryStore::new();
    let p = ObjectPath::parse("a/b").unwrap();
    store.faults().fail_next(StoreError::Unavailable {
        message: "scripted".into(),
    });
    let err = store
        .put(&p, Bytes::from_static(b"x"), PutOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_retryable());
    store
        .put(&p, Bytes::from_static(b"x"), PutOptions::default())
        .await
        .unwrap();

    // The third get fails; the others pass.
    store.faults().fail_on(
        "get",
        2,
        StoreError::PermissionDenied {
            message: "no".into(),
        },
    );
    for _ in 0..2 {
        store.get(&p, GetOptions::default()).await.unwrap();
    }
    store.head(&p).await.unwrap();
    let err = store.get(&p, GetOptions::default()).await.unwrap_err();
    assert!(matches!(err, StoreError::PermissionDenied { .. }));
    store.get(&p, GetOptions::default()).await.unwrap();
}

#[tokio::test]
async fn clones_share_objects() {
    let a = MemoryStore::new();
    let b = a.clone();
    let p = ObjectPath::parse("x").unwrap();
    a.put(&p, Bytes::from_static(b"shared"), PutOptions::default())
        .await
        .unwrap();
    drop(a);
    assert_eq!(
        &b.get(&p, GetOptions::default()).await.unwrap()[..],
        b"shared"
    );
    assert_eq!(b.snapshot().len(), 1);
}
