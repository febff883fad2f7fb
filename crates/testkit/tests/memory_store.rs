//! The in-memory store passes the ObjectStore conformance suite and its
//! clones share objects.

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
