//! The in-memory store passes the ObjectStore conformance suite and its
//! clones share objects.

use bytes::Bytes;
use kinetic_core::ports::{GetOptions, ObjectPath, ObjectStore, PutOptions};
use kinetic_testkit::{MemoryStore, conformance};

#[tokio::test]
async fn memory_store_conforms() {
    conformance::object_store::run(&MemoryStore::new()).await;
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
