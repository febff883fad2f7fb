//! Content hash: Kinetic's test vectors and error cases.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use kinetic_core::hashing::{
    ContentHash, HashError, HashKind, HashOptions, content_hash, content_hash_with,
};

fn write(path: &Path, bytes: &[u8]) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("mkdir");
    }
    fs::write(path, bytes).expect("write");
}

fn hash(path: &Path) -> String {
    content_hash(path).expect("hash").to_string()
}

/// Every hash computed with one thread and with several must agree.
fn hash_all_ways(path: &Path) -> String {
    let one = content_hash_with(path, &HashOptions::default().threads(1)).expect("hash");
    let many = content_hash_with(path, &HashOptions::default().threads(4)).expect("hash");
    assert_eq!(
        one,
        many,
        "thread count changed the result for {}",
        path.display()
    );
    one.hash.to_string()
}

const EMPTY_DIR: &str = "9d1ae5a6cdbe837d499a16cb32234ea2d953c60e8e8fdc88f84a3bbe2d629143";
const A_SUB_B: &str = "906aa0f72a5646bd887f17bfaceaacbb0e1c629e6f3402121cd9b4314267193d";

#[test]
fn vector_empty_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_eq!(hash_all_ways(dir.path()), EMPTY_DIR);
}

#[test]
fn vector_single_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let hello = dir.path().join("hello.txt");
    write(&hello, b"hello\n");
    assert_eq!(
        hash(&hello),
        "565d06b849b37d8a24aae0d602e9b6d12ea51d00864b40ebd026752c90673939"
    );

    let bye = dir.path().join("bye.txt");
    write(&bye, b"hello\n");
    assert_eq!(
        hash(&bye),
        "0e2d68dc49c07f5de09b7b6413fdd075f7370c59cd1dab3bcd3215de90caf712"
    );

    let link = dir.path().join("linktofile.txt");
    symlink(&hello, &link).expect("symlink");
    assert_eq!(
        hash(&link),
        "a92cfdd3342e6e025ca2b3302d6145c3e2e43adeafbe6d544a1873aae6e23935"
    );

    let empty = dir.path().join("empty.bin");
    write(&empty, b"");
    let report = content_hash_with(&empty, &HashOptions::default()).expect("hash");
    assert_eq!(
        report.hash.to_string(),
        "118dace6905a06fae684bf65284efcb9ce2f46a0c26f5c6d09ed9e7f6b2caf8a"
    );
    assert_eq!(
        (report.kind, report.files, report.bytes),
        (HashKind::File, 1, 0)
    );
}

#[test]
fn vector_relative_path_uses_the_normalised_basename() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("hello.txt"), b"hello\n");
    fs::create_dir(dir.path().join("x")).expect("mkdir");
    // `x/../hello.txt` normalises to `hello.txt` (lexically, like abspath).
    let roundabout = dir.path().join("x").join("..").join("hello.txt");
    assert_eq!(
        hash(&roundabout),
        "565d06b849b37d8a24aae0d602e9b6d12ea51d00864b40ebd026752c90673939"
    );
}

#[test]
fn vector_small_tree_empty_subdir_and_symlinked_root() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("data");
    write(&root.join("a.txt"), b"a");
    write(&root.join("sub/b.txt"), b"b");
    let report = content_hash_with(&root, &HashOptions::default()).expect("hash");
    assert_eq!(report.hash.to_string(), A_SUB_B);
    assert_eq!(
        (report.kind, report.files, report.bytes),
        (HashKind::Dir, 2, 2)
    );

    fs::create_dir(root.join("emptysub")).expect("mkdir");
    assert_eq!(hash_all_ways(&root), A_SUB_B);

    let link = dir.path().join("link-to-data");
    symlink(&root, &link).expect("symlink");
    assert_eq!(hash_all_ways(&link), A_SUB_B);
}

#[test]
fn vector_walk_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(&root.join("z.txt"), b"z");
    write(&root.join("B.txt"), b"B");
    write(&root.join("a/x.txt"), b"x");
    write(&root.join("a_b/y.txt"), b"y");
    write(&root.join("a.b/w.txt"), b"w");
    assert_eq!(
        hash_all_ways(root),
        "3ca5cc8357093f199253096969c0276a0fd636da0ea1ca39250f3601a23f083e"
    );
}

#[test]
fn vector_symlinks_inside_the_tree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let outside = dir.path().join("outside");
    write(&outside.join("e-file"), b"e");
    write(&outside.join("edir/e.txt"), b"e");
    let root = dir.path().join("data");
    write(&root.join("a.txt"), b"a");
    write(&root.join("sub/b.txt"), b"b");
    symlink(outside.join("e-file"), root.join("linkfile.txt")).expect("symlink");
    symlink(outside.join("edir"), root.join("linkdir")).expect("symlink");
    let report = content_hash_with(&root, &HashOptions::default()).expect("hash");
    assert_eq!(
        report.hash.to_string(),
        "ea9f0fcbdeb478e6626b7b3f4b7997caafdbfc7b0b7e38bf0d7f2985e63c2d3c"
    );
    assert_eq!(report.files, 3, "linkdir contributes nothing");
}

#[test]
fn vector_unicode_name_and_content() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("\u{e9}.txt"), "\u{fc}".as_bytes());
    assert_eq!(
        hash_all_ways(dir.path()),
        "b8db6ab6bde4306679e2ff205ea75adb5792a5581023f3b08bc3f1adb7d83ef3"
    );
}

#[test]
fn vector_forty_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..40 {
        write(
            &dir.path().join(format!("f{i:03}.txt")),
            i.to_string().as_bytes(),
        );
    }
    assert_eq!(
        hash_all_ways(dir.path()),
        "e1d432ebe5c7c2372c80c9881b01a77afb60176d7dbefc716960e31b84b06b2f"
    );
}

#[test]
fn large_file_goes_through_the_pipelined_reader_and_matches_a_one_shot_hash() {
    use sha2::{Digest, Sha256};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("big.bin");
    // Above the pipelining threshold, not a multiple of the buffer size.
    let data: Vec<u8> = (0..(9 << 20) + 12_345u32)
        .map(|i| (i % 253) as u8)
        .collect();
    write(&path, &data);
    let inner = Sha256::new()
        .chain_update(b"big.bin\0")
        .chain_update(&data)
        .finalize();
    let outer = Sha256::new()
        .chain_update(b"file:")
        .chain_update(inner)
        .finalize();
    let report = content_hash_with(&path, &HashOptions::default()).expect("hash");
    assert_eq!(report.hash.as_bytes()[..], outer[..]);
    assert_eq!(report.bytes, data.len() as u64);

    let plain = kinetic_core::hashing::file_sha256(&path).expect("sha256");
    assert_eq!(plain[..], Sha256::digest(&data)[..]);
}

#[test]
fn missing_path_is_not_found_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nope");
    let err = content_hash(&missing).expect_err("missing");
    assert!(matches!(err, HashError::NotFound { .. }), "{err:?}");
    assert!(err.to_string().contains("nope"), "{err}");
}

#[test]
fn broken_symlink_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("a.txt"), b"a");
    symlink(dir.path().join("gone"), dir.path().join("dangling")).expect("symlink");
    let err = content_hash(dir.path()).expect_err("broken");
    assert!(matches!(err, HashError::BrokenSymlink { .. }), "{err:?}");
    assert!(err.path().ends_with("dangling"), "{err}");
    // Also as the root itself.
    let err = content_hash(dir.path().join("dangling")).expect_err("broken");
    assert!(matches!(err, HashError::BrokenSymlink { .. }), "{err:?}");
}

#[test]
fn non_utf8_file_name_is_an_error() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let name = OsStr::from_bytes(b"bad\xff.txt");
    fs::write(dir.path().join(name), b"x").expect("Linux file systems take non-UTF-8 names");
    let err = content_hash(dir.path()).expect_err("non-utf8");
    assert!(matches!(err, HashError::NonUtf8Name { .. }), "{err:?}");
    // An empty directory with such a name contributes nothing, as in Kinetic.
    let dir2 = tempfile::tempdir().expect("tempdir");
    fs::create_dir(dir2.path().join(OsStr::from_bytes(b"d\xfe"))).expect("mkdir");
    assert_eq!(hash(dir2.path()), EMPTY_DIR);
}

#[test]
fn fifo_is_refused_instead_of_blocking() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo (coreutils) runs");
    assert!(made.success(), "mkfifo {}: {made}", fifo.display());
    let err = content_hash(dir.path()).expect_err("fifo");
    assert!(matches!(err, HashError::NotAFile { .. }), "{err:?}");
    let err = content_hash(&fifo).expect_err("fifo");
    assert!(matches!(err, HashError::NotAFile { .. }), "{err:?}");
}

/// Make `parent/{name}` a directory nobody can list, root included: its
/// own path is longer than `PATH_MAX`, so `opendir` fails with
/// `ENAMETOOLONG` (as a directory without read permission fails for a
/// user). It is built short, then moved under a chain of long names whose
/// length alone stays below the limit. It holds a file, which must not
/// count. Returns the directory's path.
fn unlistable_dir(parent: &Path, scratch: &Path) -> std::path::PathBuf {
    const PATH_MAX: usize = 4096;
    const NAME: usize = 250;
    // A chain of directories whose path leaves room for one more name
    // below the limit, but not for two.
    let mut chain = parent.join("deep");
    while chain.as_os_str().len() + 2 * (NAME + 1) < PATH_MAX {
        chain.push("d".repeat(NAME));
    }
    fs::create_dir_all(&chain).expect("mkdir the chain");
    let outer = "o".repeat(NAME);
    let inner = format!("locked{}", "x".repeat(NAME - 6));
    write(&scratch.join(&outer).join(&inner).join("secret.txt"), b"s");
    fs::rename(scratch.join(&outer), chain.join(&outer)).expect("move under the chain");
    let locked = chain.join(&outer).join(&inner);
    assert!(
        locked.as_os_str().len() >= PATH_MAX,
        "{}",
        locked.as_os_str().len()
    );
    assert!(
        fs::read_dir(chain.join(&outer)).is_ok(),
        "the outer one lists"
    );
    let err = fs::read_dir(&locked).expect_err("nobody can list it");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidFilename, "{err}");
    locked
}

#[test]
fn unlistable_subdirectory_is_skipped_like_kinetic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scratch = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("a.txt"), b"a");
    write(&dir.path().join("sub/b.txt"), b"b");
    let locked = unlistable_dir(dir.path(), scratch.path());
    for threads in [1, 4] {
        let report =
            content_hash_with(dir.path(), &HashOptions::default().threads(threads)).expect("hash");
        // Its file does not count, and the empty chain contributes nothing.
        assert_eq!(report.hash.to_string(), A_SUB_B);
        assert_eq!(report.skipped_dirs, vec![locked.clone()]);
    }
}

#[test]
fn content_hash_display_round_trips() {
    let dir = tempfile::tempdir().expect("tempdir");
    let h = content_hash(dir.path()).expect("hash");
    let back: ContentHash = h.to_string().parse().expect("parse");
    assert_eq!(back, h);
}

/// Drops `path` from the page cache without privileges: `fsync` (only clean
/// pages can be dropped), then `POSIX_FADV_DONTNEED`.
fn evict(path: &Path) {
    use nix::fcntl::{PosixFadviseAdvice, posix_fadvise};
    let file = fs::File::open(path).expect("open");
    file.sync_all().expect("fsync");
    posix_fadvise(&file, 0, 0, PosixFadviseAdvice::POSIX_FADV_DONTNEED).expect("fadvise");
}

/// Whether reading `path` (just evicted) shows a cold disk as the hash
/// sees one: the kernel refuses a read that may not wait, and the read that
/// waits takes 50 µs or more. Evicts the file again.
fn reads_cold(path: &Path) -> bool {
    use rustix::io::{Errno, ReadWriteFlags, preadv2};
    use std::io::Read;
    let mut file = fs::File::open(path).expect("open");
    let mut buf = vec![0u8; 1 << 16];
    let mut slices = [std::io::IoSliceMut::new(&mut buf)];
    let refused = matches!(
        preadv2(&file, &mut slices, 0, ReadWriteFlags::NOWAIT),
        Err(Errno::AGAIN)
    );
    let started = std::time::Instant::now();
    let n = file.read(&mut buf).expect("read");
    assert!(n > 0, "{} is empty", path.display());
    let slow = started.elapsed() >= std::time::Duration::from_micros(50);
    evict(path);
    refused && slow
}

#[test]
fn a_tree_dropped_from_the_page_cache_hashes_the_same() {
    // Under the target directory: a real disk, where a temporary file
    // system could not drop anything.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let root = dir.path().join("data");
    let mut paths = Vec::new();
    for i in 0..600u32 {
        let path = root.join(format!("d{}/f{i:03}.bin", i % 9));
        let body: Vec<u8> = (0..(4096 + i * 37)).map(|j| (j * 7 + i) as u8).collect();
        write(&path, &body);
        paths.push(path);
    }
    let warm = content_hash_with(&root, &HashOptions::default()).expect("hash");
    assert_eq!((warm.files, warm.read_ahead), (600, 0));

    for threads in [1, 2] {
        for path in &paths {
            evict(path);
        }
        let cold_disk = reads_cold(&paths[0]);
        let options = HashOptions::default().threads(threads).readers(8);
        let cold = content_hash_with(&root, &options).expect("hash");
        assert_eq!(cold.hash, warm.hash, "threads {threads}");
        assert_eq!((cold.files, cold.bytes), (warm.files, warm.bytes));
        if cold_disk {
            // The first file missed, so the rest was handed to the readers.
            assert!(cold.read_ahead > 0, "threads {threads}: nothing read ahead");
        } else {
            eprintln!("note: this file system kept the files cached; read-ahead not exercised");
        }
    }
}
