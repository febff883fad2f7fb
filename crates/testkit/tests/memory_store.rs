//! The in-memory store passes the ObjectStore conformance suite and its
//! clones share objects; the counting decorator passes the suite too, and
//! counts each call that reaches the store.

use bytes::Bytes;
use kinetic_core::ports::{GetOptions, ObjectPath, ObjectStore, PutOptions};
use kinetic_testkit::MemoryStore;

mod memory_store_conformance {
    use kinetic_testkit::MemoryStore;

    kinetic_testkit::object_store_conformance_tests! {
        #[tokio::test]
        store = MemoryStore::new();
    }
}

mod counting_store_conformance {
    use std::sync::Arc;

    use kinetic_testkit::{CountingStore, MemoryStore};

    kinetic_testkit::object_store_conformance_tests! {
        #[tokio::test]
        store = CountingStore::new(Arc::new(MemoryStore::new()));
    }
}

#[tokio::test]
async fn the_counting_store_counts_each_call_and_its_clones_share_the_count() {
    use std::sync::Arc;

    use kinetic_testkit::CountingStore;

    let store = CountingStore::new(Arc::new(MemoryStore::new()));
    let shared = store.clone();
    let p = ObjectPath::parse("a/b").unwrap();
    let _ = store.uri(&p);
    assert_eq!(store.calls(), 0, "naming an object asks the store nothing");
    store
        .put(&p, Bytes::from_static(b"x"), PutOptions::default())
        .await
        .unwrap();
    store.get(&p, GetOptions::default()).await.unwrap();
    store.head(&p).await.unwrap();
    store.list(None).await.unwrap();
    assert!(
        store
            .get(&ObjectPath::parse("nope").unwrap(), GetOptions::default())
            .await
            .is_err()
    );
    store.delete(&p).await.unwrap();
    store
        .delete_prefix(&ObjectPath::parse("a").unwrap())
        .await
        .unwrap();
    assert_eq!(shared.calls(), 7);
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
