//! Conformance suite of the `ObjectStore` port.
//!
//! [`run`] checks every sentence of the contract on `kinetic_core::ports::ObjectStore`
//! against one store. Each check works under its own fresh prefix, so the
//! suite can run against a store that holds other objects. A violation
//! panics with the sentence it broke.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use kinetic_core::ports::{GetOptions, ObjectPath, ObjectStore, PutOptions, StoreError};

fn path(s: &str) -> ObjectPath {
    ObjectPath::parse(s).unwrap_or_else(|e| panic!("test path {s}: {e}"))
}

fn fresh_prefix() -> ObjectPath {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    path(&format!(
        "conformance-{}-{}-{n}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ))
}

async fn put(store: &dyn ObjectStore, p: &ObjectPath, data: &'static [u8]) {
    store
        .put(p, Bytes::from_static(data), PutOptions::default())
        .await
        .unwrap_or_else(|e| panic!("put {p}: {e}"));
}

async fn get(store: &dyn ObjectStore, p: &ObjectPath) -> Bytes {
    store
        .get(p, GetOptions::default())
        .await
        .unwrap_or_else(|e| panic!("get {p}: {e}"))
}

/// Every case of the suite, in the order [`run`] runs them. The
/// [`object_store_conformance_tests!`](crate::object_store_conformance_tests)
/// macro makes one named test of each.
pub const CASES: &[&str] = &[
    "put_then_get_round_trips",
    "overwrite_replaces",
    "create_if_absent",
    "missing_objects_are_not_found",
    "ranges",
    "head_reports_size",
    "version_tags_change_on_rewrite",
    "list_is_segment_wise_sorted_and_deep",
    "delete_is_idempotent",
    "delete_prefix_counts_and_spares_siblings",
    "put_file_streams_a_local_file",
    "get_to_file_writes_whole_files_only",
    "get_to_file_never_replaces_what_is_not_a_file",
    "concurrent_puts_are_all_visible",
];

/// Run the case named `name` against `store`.
///
/// # Panics
/// When the case fails, or `name` is no case of [`CASES`].
pub async fn run_case(store: &dyn ObjectStore, name: &str) {
    match name {
        "put_then_get_round_trips" => put_then_get_round_trips(store).await,
        "overwrite_replaces" => overwrite_replaces(store).await,
        "create_if_absent" => create_if_absent(store).await,
        "missing_objects_are_not_found" => missing_objects_are_not_found(store).await,
        "ranges" => ranges(store).await,
        "head_reports_size" => head_reports_size(store).await,
        "version_tags_change_on_rewrite" => version_tags_change_on_rewrite(store).await,
        "list_is_segment_wise_sorted_and_deep" => list_is_segment_wise_sorted_and_deep(store).await,
        "delete_is_idempotent" => delete_is_idempotent(store).await,
        "delete_prefix_counts_and_spares_siblings" => {
            delete_prefix_counts_and_spares_siblings(store).await
        }
        "put_file_streams_a_local_file" => put_file_streams_a_local_file(store).await,
        "get_to_file_writes_whole_files_only" => get_to_file_writes_whole_files_only(store).await,
        "get_to_file_never_replaces_what_is_not_a_file" => {
            get_to_file_never_replaces_what_is_not_a_file(store).await
        }
        "concurrent_puts_are_all_visible" => concurrent_puts_are_all_visible(store).await,
        other => panic!("no conformance case named {other}"),
    }
}

/// Run every check against `store`, in one go (adapters' test suites use
/// [`object_store_conformance_tests!`](crate::object_store_conformance_tests),
/// which makes each case its own named test).
pub async fn run(store: &dyn ObjectStore) {
    for name in CASES {
        run_case(store, name).await;
    }
}

/// `put` then `get` returns the same bytes; `uri` is stable for a path.
pub async fn put_then_get_round_trips(store: &dyn ObjectStore) {
    let p = fresh_prefix().child("a/b.json").expect("path");
    put(store, &p, b"{\"x\": 1}").await;
    assert_eq!(
        &get(store, &p).await[..],
        b"{\"x\": 1}",
        "get returns what put stored"
    );
    assert_eq!(
        store.uri(&p),
        store.uri(&p),
        "uri MUST be stable for the same path"
    );
    assert!(
        store.uri(&p).ends_with("a/b.json"),
        "uri names the object: {}",
        store.uri(&p)
    );
    let typed = fresh_prefix().child("typed.json").expect("path");
    store
        .put(
            &typed,
            Bytes::from_static(b"{}"),
            PutOptions::default().with_content_type("application/json"),
        )
        .await
        .expect("a put with a content type MUST succeed (stores without attributes drop it)");
    assert_eq!(&get(store, &typed).await[..], b"{}");
    let empty = fresh_prefix().child("empty").expect("path");
    put(store, &empty, b"").await;
    assert!(
        get(store, &empty).await.is_empty(),
        "an empty object reads back empty"
    );
}

/// With `Overwrite`, put MUST replace any existing object.
pub async fn overwrite_replaces(store: &dyn ObjectStore) {
    let p = fresh_prefix().child("x").expect("path");
    put(store, &p, b"first").await;
    put(store, &p, b"second, longer").await;
    assert_eq!(
        &get(store, &p).await[..],
        b"second, longer",
        "overwrite MUST replace"
    );
}

/// With `CreateIfAbsent`, put MUST fail with `AlreadyExists` when an object is there, leaving it untouched.
pub async fn create_if_absent(store: &dyn ObjectStore) {
    let p = fresh_prefix().child("marker").expect("path");
    store
        .put(
            &p,
            Bytes::from_static(b"one"),
            PutOptions::create_if_absent(),
        )
        .await
        .expect("create-if-absent on a free path succeeds");
    let err = store
        .put(
            &p,
            Bytes::from_static(b"two"),
            PutOptions::create_if_absent(),
        )
        .await
        .expect_err("create-if-absent on a taken path MUST fail");
    assert!(
        matches!(err, StoreError::AlreadyExists { .. }),
        "MUST be AlreadyExists, got {err:?}"
    );
    assert_eq!(
        &get(store, &p).await[..],
        b"one",
        "the existing object MUST be untouched"
    );
}

/// A missing object MUST be `NotFound` for get and head.
pub async fn missing_objects_are_not_found(store: &dyn ObjectStore) {
    let p = fresh_prefix().child("nothing-here").expect("path");
    let err = store
        .get(&p, GetOptions::default())
        .await
        .expect_err("get of a missing object fails");
    assert!(err.is_not_found(), "get MUST be NotFound, got {err:?}");
    let err = store
        .head(&p)
        .await
        .expect_err("head of a missing object fails");
    assert!(err.is_not_found(), "head MUST be NotFound, got {err:?}");
    assert!(!err.is_retryable(), "NotFound is not retryable");
}

/// Ranged gets: a range inside the object, one cut at its end, an empty
/// one, and one starting past the end (`InvalidInput`).
pub async fn ranges(store: &dyn ObjectStore) {
    let p = fresh_prefix().child("digits").expect("path");
    put(store, &p, b"0123456789").await;
    let r = |a, b| store.get(&p, GetOptions::range(a..b));
    assert_eq!(&r(2, 5).await.expect("range")[..], b"234");
    assert_eq!(
        &r(7, 100).await.expect("range past end")[..],
        b"789",
        "a range ending past the end is cut"
    );
    assert!(r(4, 4).await.expect("empty range").is_empty());
    assert_eq!(
        &r(10, 12).await.expect("range at end")[..],
        b"",
        "a range starting at the end is empty"
    );
    let err = r(11, 12)
        .await
        .expect_err("a range starting past the end fails");
    assert!(
        matches!(err, StoreError::InvalidInput { .. }),
        "MUST be InvalidInput, got {err:?}"
    );
}

/// `head` reports the size.
pub async fn head_reports_size(store: &dyn ObjectStore) {
    let p = fresh_prefix().child("sized").expect("path");
    put(store, &p, b"12345").await;
    let meta = store.head(&p).await.expect("head");
    assert_eq!(meta.size, 5);
    assert_eq!(meta.path, p);
}

/// A store that gives version tags gives the same one from `head` and
/// `list`, and another one once the object is written again.
pub async fn version_tags_change_on_rewrite(store: &dyn ObjectStore) {
    let prefix = fresh_prefix();
    let p = prefix.child("v.txt").expect("path");
    put(store, &p, b"one").await;
    let first = store.head(&p).await.expect("head");
    let listed = store.list(Some(&prefix)).await.expect("list");
    assert_eq!(
        listed.iter().find(|m| m.path == p).map(|m| &m.e_tag),
        Some(&first.e_tag),
        "head and list MUST give the same version tag"
    );
    // Some file systems keep one modification time for writes close together.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    put(store, &p, b"two").await;
    let second = store.head(&p).await.expect("head");
    if first.e_tag.is_some() {
        assert_ne!(
            first.e_tag, second.e_tag,
            "a version tag MUST change when the object is written again"
        );
    }
}

/// `list` returns everything strictly under the prefix, segment-wise, at
/// any depth, sorted; an empty listing is not an error.
pub async fn list_is_segment_wise_sorted_and_deep(store: &dyn ObjectStore) {
    let root = fresh_prefix();
    let a = root.child("a").expect("path");
    for name in ["a/z", "a/b/c/d", "a/b/c2", "ab/x", "a0"] {
        put(store, &root.child(name).expect("path"), b"x").await;
    }
    let listed: Vec<String> = store
        .list(Some(&a))
        .await
        .expect("list")
        .into_iter()
        .map(|m| m.path.as_str().trim_start_matches(root.as_str()).to_owned())
        .collect();
    assert_eq!(
        listed,
        vec!["/a/b/c/d", "/a/b/c2", "/a/z"],
        "list MUST return objects strictly under the prefix, segment-wise, sorted, at any depth"
    );
    let none = store
        .list(Some(&root.child("missing").expect("path")))
        .await
        .expect("empty list");
    assert!(none.is_empty(), "an empty listing is not an error");
    let all = store.list(None).await.expect("list all");
    assert!(
        all.iter()
            .any(|m| m.path == root.child("ab/x").expect("path")),
        "None lists the whole store"
    );
    assert!(
        all.windows(2).all(|w| w[0].path <= w[1].path),
        "list MUST be sorted"
    );
}

/// Deleting removes; deleting a missing object succeeds.
pub async fn delete_is_idempotent(store: &dyn ObjectStore) {
    let p = fresh_prefix().child("gone").expect("path");
    put(store, &p, b"x").await;
    store.delete(&p).await.expect("delete");
    assert!(store.head(&p).await.expect_err("deleted").is_not_found());
    store
        .delete(&p)
        .await
        .expect("deleting a missing object MUST succeed");
}

/// `delete_prefix` deletes everything under the prefix, returns the count,
/// spares `ab/…` when deleting `a`, and succeeds with 0 on an empty prefix.
pub async fn delete_prefix_counts_and_spares_siblings(store: &dyn ObjectStore) {
    let root = fresh_prefix();
    for name in [
        "job/spec.json",
        "job/logs/out.log",
        "job/result.json",
        "jobx/keep",
        "job-2/keep",
    ] {
        put(store, &root.child(name).expect("path"), b"x").await;
    }
    let n = store
        .delete_prefix(&root.child("job").expect("path"))
        .await
        .expect("delete_prefix");
    assert_eq!(n, 3, "delete_prefix returns how many were deleted");
    let left: Vec<_> = store
        .list(Some(&root))
        .await
        .expect("list")
        .into_iter()
        .map(|m| m.path)
        .collect();
    assert_eq!(
        left,
        vec![
            root.child("job-2/keep").expect("p"),
            root.child("jobx/keep").expect("p")
        ]
    );
    let n = store
        .delete_prefix(&root.child("job").expect("path"))
        .await
        .expect("again");
    assert_eq!(n, 0, "an empty prefix MUST succeed with 0");
}

/// `put_file` stores a local file whole (also one larger than an upload
/// chunk); an unreadable local file is `InvalidInput` naming it.
pub async fn put_file_streams_a_local_file(store: &dyn ObjectStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let small = dir.path().join("small.txt");
    tokio::fs::write(&small, b"hello file")
        .await
        .expect("write");
    let p = fresh_prefix().child("small.txt").expect("path");
    let n = store
        .put_file(&p, &small, PutOptions::default())
        .await
        .expect("put_file");
    assert_eq!(n, 10);
    assert_eq!(&get(store, &p).await[..], b"hello file");

    let big = dir.path().join("big.bin");
    let data: Vec<u8> = (0..(9 * 1024 * 1024 + 123))
        .map(|i: u32| (i % 251) as u8)
        .collect();
    tokio::fs::write(&big, &data).await.expect("write");
    let p = fresh_prefix().child("big.bin").expect("path");
    let n = store
        .put_file(&p, &big, PutOptions::default())
        .await
        .expect("put_file big");
    assert_eq!(n, data.len() as u64);
    assert_eq!(store.head(&p).await.expect("head").size, data.len() as u64);
    assert!(
        get(store, &p).await[..] == data[..],
        "a large file MUST round-trip whole"
    );

    let err = store
        .put_file(&p, &big, PutOptions::create_if_absent())
        .await
        .expect_err("create-if-absent over an existing object");
    assert!(
        matches!(err, StoreError::AlreadyExists { .. }),
        "got {err:?}"
    );

    let missing = dir.path().join("no-such-file");
    let err = store
        .put_file(
            &fresh_prefix().child("x").expect("path"),
            &missing,
            PutOptions::default(),
        )
        .await
        .expect_err("missing local file");
    assert!(
        matches!(&err, StoreError::InvalidInput { message, .. } if message.contains("no-such-file")),
        "MUST be InvalidInput naming the file, got {err:?}"
    );
}

/// `get_to_file` writes the whole object; a missing object is `NotFound`
/// and leaves no file behind.
pub async fn get_to_file_writes_whole_files_only(store: &dyn ObjectStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = fresh_prefix().child("down.txt").expect("path");
    put(store, &p, b"downloaded").await;
    let dest = dir.path().join("down.txt");
    assert_eq!(store.get_to_file(&p, &dest).await.expect("get_to_file"), 10);
    assert_eq!(tokio::fs::read(&dest).await.expect("read"), b"downloaded");

    let dest2 = dir.path().join("never.txt");
    let err = store
        .get_to_file(&fresh_prefix().child("missing").expect("path"), &dest2)
        .await
        .expect_err("missing object");
    assert!(err.is_not_found(), "MUST be NotFound, got {err:?}");
    let mut entries = tokio::fs::read_dir(dir.path()).await.expect("read_dir");
    let mut names = Vec::new();
    while let Some(e) = entries.next_entry().await.expect("entry") {
        names.push(e.file_name().to_string_lossy().into_owned());
    }
    assert_eq!(
        names,
        vec!["down.txt"],
        "a failed download MUST leave no file behind"
    );
}

/// `get_to_file` refuses a destination that is a directory or a FIFO (a
/// rename would replace it) with `InvalidInput`, and leaves it as it was.
pub async fn get_to_file_never_replaces_what_is_not_a_file(store: &dyn ObjectStore) {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let p = fresh_prefix().child("down.txt").expect("path");
    put(store, &p, b"downloaded").await;
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success(), "mkfifo failed");
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).expect("mkdir");
    for dest in [&fifo, &sub] {
        let err = store
            .get_to_file(&p, dest)
            .await
            .expect_err("a FIFO or a directory MUST be refused");
        assert!(
            matches!(err, StoreError::InvalidInput { .. }),
            "MUST be InvalidInput, got {err:?}"
        );
    }
    let kind = std::fs::symlink_metadata(&fifo).expect("fifo").file_type();
    assert!(kind.is_fifo(), "the FIFO MUST stay a FIFO");
    assert!(sub.is_dir(), "the directory MUST stay a directory");
}

/// Puts from many tasks at once are all visible afterwards.
pub async fn concurrent_puts_are_all_visible(store: &dyn ObjectStore) {
    let root = fresh_prefix();
    let puts = (0..32).map(|i| {
        let p = root.child(&format!("f{i:02}")).expect("path");
        async move {
            store
                .put(&p, Bytes::from(format!("{i}")), PutOptions::default())
                .await
                .expect("concurrent put");
        }
    });
    futures_util::future::join_all(puts).await;
    let listed = store.list(Some(&root)).await.expect("list");
    assert_eq!(listed.len(), 32, "every completed put MUST be visible");
    assert_eq!(
        &get(store, &root.child("f07").expect("path")).await[..],
        b"7"
    );
}
