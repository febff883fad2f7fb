//! Content hash properties: a naive model of Kinetic's
//! algorithm computed from the in-memory tree must agree with the parallel
//! implementation reading the same tree from disk, for every thread count;
//! and the hash must be sensitive to names, contents and boundaries.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use kinetic_core::hashing::{HashOptions, content_hash, content_hash_with};
use proptest::prelude::*;
use sha2::{Digest, Sha256};

/// A directory tree in memory. `BTreeMap<String, _>` iterates in byte
/// order, which for UTF-8 is Python's code-point order.
#[derive(Debug, Clone, Default)]
struct Tree {
    files: BTreeMap<String, Vec<u8>>,
    dirs: BTreeMap<String, Tree>,
}

impl Tree {
    fn write(&self, at: &Path) {
        fs::create_dir_all(at).expect("mkdir");
        for (name, bytes) in &self.files {
            fs::write(at.join(name), bytes).expect("write");
        }
        for (name, sub) in &self.dirs {
            sub.write(&at.join(name));
        }
    }

    /// Kinetic's walk: files of a directory sorted, then subdirectories
    /// sorted, recursively.
    fn digests(&self, prefix: &str, out: &mut Vec<[u8; 32]>) {
        for (name, bytes) in &self.files {
            let rel = format!("{prefix}{name}");
            let d = Sha256::new()
                .chain_update(rel.as_bytes())
                .chain_update([0u8])
                .chain_update(bytes)
                .finalize();
            out.push(d.into());
        }
        for (name, sub) in &self.dirs {
            sub.digests(&format!("{prefix}{name}/"), out);
        }
    }

    fn model_hash(&self) -> String {
        let mut digests = Vec::new();
        self.digests("", &mut digests);
        let mut h = Sha256::new();
        h.update(b"dir:");
        for d in digests {
            h.update(d);
        }
        hex::encode(h.finalize())
    }
}

fn name() -> impl Strategy<Value = String> + Clone {
    // Characters chosen to exercise the ordering: upper before lower,
    // '.' and '_' around letters, and a non-ASCII letter.
    proptest::collection::vec(
        prop::sample::select(vec!['a', 'b', 'B', '.', '_', '-', 'é', '1']),
        1..5,
    )
    .prop_map(|chars| chars.into_iter().collect::<String>())
    .prop_filter("not . or ..", |n| n != "." && n != "..")
}

fn tree() -> impl Strategy<Value = Tree> {
    let files = proptest::collection::btree_map(
        name(),
        proptest::collection::vec(any::<u8>(), 0..40),
        0..6,
    );
    let leaf = files.clone().prop_map(|files| Tree {
        files,
        dirs: BTreeMap::new(),
    });
    leaf.prop_recursive(3, 40, 4, move |inner| {
        (
            files.clone(),
            proptest::collection::btree_map(name(), inner, 0..4),
        )
            .prop_map(|(mut files, dirs)| {
                files.retain(|n, _| !dirs.contains_key(n));
                Tree { files, dirs }
            })
    })
}

fn hash_threads(path: &Path, threads: usize) -> String {
    content_hash_with(path, &HashOptions::default().threads(threads))
        .expect("hash")
        .hash
        .to_string()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn implementation_matches_the_model_for_any_thread_count(t in tree()) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("root");
        t.write(&root);
        let want = t.model_hash();
        prop_assert_eq!(hash_threads(&root, 1), want.clone());
        prop_assert_eq!(hash_threads(&root, 2), want.clone());
        prop_assert_eq!(hash_threads(&root, 5), want);
    }

    #[test]
    fn changing_any_file_content_changes_the_hash(t in tree(), extra in any::<u8>()) {
        let mut t = t;
        let dir = tempfile::tempdir().expect("tempdir");
        t.write(&dir.path().join("before"));
        let Some(bytes) = t.files.values_mut().next() else { return Ok(()) };
        bytes.push(extra);
        t.write(&dir.path().join("after"));
        prop_assert_ne!(
            content_hash(dir.path().join("before")).expect("hash"),
            content_hash(dir.path().join("after")).expect("hash")
        );
    }

    #[test]
    fn renaming_a_file_changes_the_hash(t in tree()) {
        let mut t = t;
        let Some((name, bytes)) = t.files.pop_first() else { return Ok(()) };
        let dir = tempfile::tempdir().expect("tempdir");
        let mut before = t.clone();
        before.files.insert(name.clone(), bytes.clone());
        let renamed = format!("{name}~");
        if before.files.contains_key(&renamed) || before.dirs.contains_key(&renamed) {
            return Ok(());
        }
        t.files.insert(renamed, bytes);
        before.write(&dir.path().join("before"));
        t.write(&dir.path().join("after"));
        prop_assert_ne!(
            content_hash(dir.path().join("before")).expect("hash"),
            content_hash(dir.path().join("after")).expect("hash")
        );
    }
}

fn tree_of(files: &[(&str, &str)]) -> Tree {
    let mut t = Tree::default();
    for (path, content) in files {
        let mut node = &mut t;
        let parts: Vec<&str> = path.split('/').collect();
        for dir in &parts[..parts.len() - 1] {
            node = node.dirs.entry((*dir).to_owned()).or_default();
        }
        node.files.insert(
            parts[parts.len() - 1].to_owned(),
            content.as_bytes().to_vec(),
        );
    }
    t
}

fn disk_hash(t: &Tree) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    t.write(dir.path());
    let got = content_hash(dir.path()).expect("hash").to_string();
    assert_eq!(got, t.model_hash());
    got
}

#[test]
fn name_content_boundary_matters() {
    assert_ne!(
        disk_hash(&tree_of(&[("a", "bc")])),
        disk_hash(&tree_of(&[("ab", "c")]))
    );
}

#[test]
fn entry_boundary_matters() {
    assert_ne!(
        disk_hash(&tree_of(&[("x", "y"), ("z", "")])),
        disk_hash(&tree_of(&[("x", ""), ("yz", "")]))
    );
}

#[test]
fn file_and_directory_holding_it_differ() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().join("d");
    fs::create_dir(&d).expect("mkdir");
    fs::write(d.join("f.txt"), b"same").expect("write");
    assert_ne!(
        content_hash(&d).expect("hash"),
        content_hash(d.join("f.txt")).expect("hash")
    );
}

#[test]
fn deterministic_at_the_parallel_threshold_sizes() {
    for n in [16usize, 17, 46] {
        let files: Vec<(String, String)> = (0..n)
            .map(|i| (format!("f{i:02}"), format!("content {i}")))
            .collect();
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let t = tree_of(&refs);
        let dir = tempfile::tempdir().expect("tempdir");
        t.write(dir.path());
        let want = t.model_hash();
        for threads in [1, 2, 3, 8] {
            for _ in 0..3 {
                assert_eq!(
                    hash_threads(dir.path(), threads),
                    want,
                    "n={n} threads={threads}"
                );
            }
        }
    }
}
