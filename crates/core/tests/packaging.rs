//! `pack` behaviour: the packager cases Kinetic pins and
//! the guarantees of the Rust port (atomic write, determinism, streaming).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Read;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use kinetic_core::packaging::{PackOptions, PackReport, PackWarning, PackagingPlan, pack};
use sha2::{Digest, Sha256};

#[path = "support/noise.rs"]
mod support;
use support::noise;

fn write(path: &Path, bytes: &[u8]) {
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, bytes).expect("write");
}

/// name -> (unix mode from external_attr, content)
fn read_zip(path: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut archive = zip::ZipArchive::new(File::open(path).expect("open")).expect("zip");
    let mut out = BTreeMap::new();
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i).expect("entry");
        let mode = entry.unix_mode().unwrap_or(0);
        let mut data = Vec::new();
        entry
            .read_to_end(&mut data)
            .expect("read entry (CRC checked)");
        let name = entry.name().expect("utf-8 name").into_owned();
        out.insert(name, (mode, data));
    }
    out
}

fn names(path: &Path) -> Vec<String> {
    let mut archive = zip::ZipArchive::new(File::open(path).expect("open")).expect("zip");
    (0..archive.len())
        .map(|i| {
            let entry = archive.by_index_raw(i).expect("entry");
            entry.name().expect("utf-8 name").into_owned()
        })
        .collect()
}

struct Case {
    dir: tempfile::TempDir,
    root: PathBuf,
}

impl Case {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("proj");
        fs::create_dir(&root).expect("mkdir");
        Self { dir, root }
    }

    fn file(&self, rel: &str, bytes: &[u8]) -> PathBuf {
        let path = self.root.join(rel);
        write(&path, bytes);
        path
    }

    fn out(&self) -> PathBuf {
        self.dir.path().join("context.zip")
    }

    fn pack(&self, options: &PackOptions) -> PackReport {
        pack(&self.root, self.out(), options).expect("pack")
    }

    fn names(&self, options: &PackOptions) -> Vec<String> {
        self.pack(options);
        names(&self.out())
    }
}

#[test]
fn git_and_pycache_are_excluded_and_nested_paths_kept() {
    let c = Case::new();
    c.file("a.py", b"a");
    c.file("pkg/mod/deep.py", b"d");
    c.file(".git/HEAD", b"ref");
    c.file("pkg/__pycache__/x.pyc", b"\0");
    assert_eq!(
        c.names(&PackOptions::default()),
        vec!["a.py", "pkg/mod/deep.py"]
    );
}

#[test]
fn empty_root_gives_an_empty_archive() {
    let c = Case::new();
    let report = c.pack(&PackOptions::default());
    assert_eq!((report.entries, report.files, report.dirs), (0, 0, 0));
    assert!(names(&c.out()).is_empty());
}

#[test]
fn symlinked_directory_is_archived_and_a_loop_is_skipped_with_a_warning() {
    let c = Case::new();
    c.file("main.py", b"m");
    write(&c.dir.path().join("lib/shared/lib.py"), b"def f(): pass\n");
    symlink(c.dir.path().join("lib/shared"), c.root.join("shared")).expect("symlink");
    symlink(&c.root, c.root.join("self")).expect("symlink");
    let report = c.pack(&PackOptions::default());
    assert_eq!(names(&c.out()), vec!["main.py", "shared/lib.py"]);
    let loops: Vec<&PackWarning> = report
        .warnings
        .iter()
        .filter(|w| w.kind() == "symlink_loop")
        .collect();
    assert_eq!(loops.len(), 1, "{:?}", report.warnings);
    assert!(loops[0].to_string().contains("symlink loop"));
}

#[test]
fn dangling_symlink_is_skipped_with_a_warning() {
    let c = Case::new();
    c.file("a.py", b"a");
    symlink(c.root.join("gone.py"), c.root.join("link.py")).expect("symlink");
    symlink(c.root.join("self.py"), c.root.join("self.py")).expect("symlink");
    let report = c.pack(&PackOptions::default());
    assert_eq!(names(&c.out()), vec!["a.py"]);
    assert_eq!(
        report
            .warnings
            .iter()
            .filter(|w| w.kind() == "broken_symlink")
            .count(),
        2,
        "a dangling link and a self-loop are both broken"
    );
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.kind() == "broken_symlink" && w.to_string().contains("broken symlink")),
        "{:?}",
        report.warnings
    );
}

#[test]
fn exec_bit_and_file_type_are_recorded() {
    let c = Case::new();
    let script = c.file("run.sh", b"#!/bin/sh\n");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).expect("chmod");
    c.file("data.txt", b"x");
    c.pack(&PackOptions::default());
    let entries = read_zip(&c.out());
    assert_eq!(entries["run.sh"].0, 0o100755);
    assert_eq!(entries["data.txt"].0 & 0o170000, 0o100000);
}

#[test]
fn empty_subdirectories_are_stored_as_directory_entries() {
    let c = Case::new();
    c.file("a.py", b"a");
    fs::create_dir_all(c.root.join("checkpoints")).expect("mkdir");
    fs::create_dir_all(c.root.join("x/y/z")).expect("mkdir");
    c.file("only_ignored/.DS_Store", b"\0");
    let report = c.pack(&PackOptions::default());
    assert_eq!(
        names(&c.out()),
        vec!["a.py", "checkpoints/", "only_ignored/", "x/y/z/"]
    );
    assert_eq!(report.dirs, 3);
    let entries = read_zip(&c.out());
    assert_eq!(entries["checkpoints/"].0, 0o40755);
}

#[test]
fn mtime_of_1970_does_not_fail() {
    let c = Case::new();
    let old = c.file("old.py", b"o");
    File::options()
        .write(true)
        .open(&old)
        .and_then(|f| f.set_modified(UNIX_EPOCH))
        .expect("mtime");
    assert_eq!(c.names(&PackOptions::default()), vec!["old.py"]);
}

#[test]
fn default_exclusions_and_turning_them_off() {
    let c = Case::new();
    c.file("a.py", b"a");
    c.file(".venv/lib.py", b"v");
    c.file("node_modules/m.js", b"m");
    c.file(".pytest_cache/x", b"p");
    c.file(".DS_Store", b"d");
    assert_eq!(c.names(&PackOptions::default()), vec!["a.py"]);
    let all = c.names(&PackOptions::default().default_excludes(false));
    assert_eq!(
        all,
        vec![
            ".DS_Store",
            "a.py",
            ".pytest_cache/x",
            ".venv/lib.py",
            "node_modules/m.js"
        ]
    );
}

#[test]
fn kineticignore_patterns() {
    let c = Case::new();
    c.file(".kineticignore", b"# junk\n*.ckpt\ndata/\n");
    c.file("big.ckpt", b"w");
    c.file("sub/more.ckpt", b"w");
    c.file("data/train.csv", b"1");
    c.file("keep/data", b"a file called data");
    c.file("main.py", b"m");
    // `sub` lost its only file, so it is kept as an empty directory, as in
    // Kinetic.
    assert_eq!(
        c.names(&PackOptions::default()),
        vec![".kineticignore", "main.py", "keep/data", "sub/"]
    );
}

#[test]
fn size_warning_names_the_big_file_and_kineticignore() {
    let c = Case::new();
    let mut x = 88_172_645_463_325_252u64;
    let noise: Vec<u8> = (0..30_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    c.file("weights.bin", &noise);
    c.file("small.py", b"s");
    let threshold = (0.01 * 1024.0 * 1024.0) as u64;
    let report = c.pack(&PackOptions::default().size_warn_bytes(threshold));
    let warning = report
        .warnings
        .iter()
        .find(|w| w.kind() == "large_archive")
        .expect("size warning");
    let text = warning.to_string();
    assert!(
        text.contains("weights.bin") && text.contains(".kineticignore"),
        "{text}"
    );
    let PackWarning::LargeArchive { largest, .. } = warning else {
        panic!("kind")
    };
    assert_eq!(largest[0], ("weights.bin".to_owned(), 30_000));
    // 0 disables it.
    let report = c.pack(&PackOptions::default().size_warn_bytes(0));
    assert!(report.warnings.iter().all(|w| w.kind() != "large_archive"));
}

#[test]
fn credential_shaped_files_are_shipped_but_warned_about() {
    let c = Case::new();
    c.file(".env", b"A=1");
    c.file(".env.production", b"B=2");
    c.file("ssh/id_rsa", b"key");
    c.file("certs/server.pem", b"pem");
    c.file("main.py", b"m");
    let report = c.pack(&PackOptions::default());
    assert_eq!(report.files, 5);
    let secrets: Vec<&PackWarning> = report
        .warnings
        .iter()
        .filter(|w| w.kind() == "secret_files")
        .collect();
    assert_eq!(secrets.len(), 1);
    let PackWarning::SecretFiles { files, .. } = secrets[0] else {
        panic!("kind")
    };
    assert_eq!(
        files,
        &[".env", ".env.production", "certs/server.pem", "ssh/id_rsa"]
    );
}

fn plan() -> PackagingPlan {
    PackagingPlan {
        package_root: "/home/u/proj".to_owned(),
        entry_rel: String::new(),
        client_cwd_rel: Some(String::new()),
        sys_path_rel: vec![String::new()],
    }
}

#[test]
fn plan_is_written_once_and_replaces_a_stale_one() {
    let c = Case::new();
    c.file("main.py", b"m");
    c.file(".kinetic/plan.json", b"{\"stale\": true}");
    c.pack(&PackOptions::default().plan(plan()));
    let all = names(&c.out());
    assert_eq!(
        all.iter()
            .filter(|n| n.as_str() == ".kinetic/plan.json")
            .count(),
        1
    );
    let entries = read_zip(&c.out());
    assert_eq!(
        String::from_utf8(entries[".kinetic/plan.json"].1.clone()).expect("utf-8"),
        plan().to_python_json()
    );
    assert_eq!(entries[".kinetic/plan.json"].0, 0o600);
    // Without a plan the real file is shipped as is.
    c.pack(&PackOptions::default());
    assert_eq!(
        read_zip(&c.out())[".kinetic/plan.json"].1,
        b"{\"stale\": true}"
    );
}

#[test]
fn excluded_paths_lexical_canonical_and_aliased() {
    let c = Case::new();
    c.file("main.py", b"m");
    c.file("data/a.csv", b"1");
    c.file("more/b.csv", b"2");
    c.file("one.bin", b"3");
    let alias = c.dir.path().join("alias-to-more");
    symlink(c.root.join("more"), &alias).expect("symlink");
    let options = PackOptions::default()
        .exclude(c.root.join("data"))
        .exclude(&alias)
        .exclude(c.root.join("x/../one.bin"));
    assert_eq!(c.names(&options), vec!["main.py"]);
}

#[test]
fn large_files_are_streamed_and_round_trip() {
    let c = Case::new();
    let big: Vec<u8> = (0..(5 << 20) + 3u32).map(|i| (i % 251) as u8).collect();
    c.file("assets/big.bin", &big);
    c.file("small.txt", b"s");
    let report = c.pack(&PackOptions::default());
    assert_eq!(report.bytes_in, big.len() as u64 + 1);
    let entries = read_zip(&c.out());
    assert_eq!(entries["assets/big.bin"].1, big);
}

/// name -> compression method
fn methods(path: &Path) -> BTreeMap<String, zip::CompressionMethod> {
    let mut archive = zip::ZipArchive::new(File::open(path).expect("open")).expect("zip");
    (0..archive.len())
        .map(|i| {
            let entry = archive.by_index_raw(i).expect("entry");
            (
                entry.name().expect("utf-8").into_owned(),
                entry.compression(),
            )
        })
        .collect()
}

#[test]
fn what_deflate_cannot_shrink_is_stored_and_the_rest_deflated() {
    use zip::CompressionMethod::{Deflated, Stored};
    let c = Case::new();
    let text = "def f(x):\n    return x * 2\n".repeat(4000).into_bytes();
    let random = noise(300 << 10, 7);
    let random_big = noise((5 << 20) + 11, 8); // streamed
    // Random at the start only: the samples further in show text.
    let mut mixed = noise(30 << 10, 9);
    mixed.extend_from_slice(&text);
    // Text with one random stretch in the middle.
    let mut text_big = text.repeat(50);
    text_big.splice(3 << 20..3 << 20, noise(64 << 10, 10));
    c.file("code.py", &text);
    c.file("weights.bin", &random);
    c.file("big/weights.bin", &random_big);
    c.file("mixed.bin", &mixed);
    c.file("big/log.txt", &text_big);
    c.file("empty.txt", b"");
    let report = c.pack(&PackOptions::default());
    let got = methods(&c.out());
    let want = BTreeMap::from([
        ("big/log.txt".to_owned(), Deflated),
        ("big/weights.bin".to_owned(), Stored),
        ("code.py".to_owned(), Deflated),
        ("empty.txt".to_owned(), Stored),
        ("mixed.bin".to_owned(), Deflated),
        ("weights.bin".to_owned(), Stored),
    ]);
    assert_eq!(got, want);
    assert_eq!(report.stored, 3);
    // Stored entries hold the bytes as they are and round-trip.
    let entries = read_zip(&c.out());
    assert_eq!(entries["weights.bin"].1, random);
    assert_eq!(entries["big/weights.bin"].1, random_big);
    assert_eq!(entries["big/log.txt"].1, text_big);
    // Storing costs nothing over the bytes themselves.
    let archive = fs::metadata(c.out()).expect("stat").len();
    assert!(archive < (random.len() + random_big.len()) as u64 + (400 << 10));
}

#[test]
fn archive_bytes_do_not_depend_on_the_thread_count() {
    let c = Case::new();
    for i in 0..60 {
        c.file(
            &format!("d{}/f{i:02}.py", i % 7),
            format!("x = {i}\n").repeat(i * 10).as_bytes(),
        );
    }
    fs::create_dir_all(c.root.join("empty")).expect("mkdir");
    let sha = |threads| c.pack(&PackOptions::default().threads(threads)).sha256;
    let one = sha(1);
    assert_eq!(sha(2), one);
    assert_eq!(sha(5), one);
}

#[test]
fn report_matches_the_file_and_no_temporary_file_is_left() {
    let c = Case::new();
    c.file("a.py", b"aaaa");
    c.file("b/c.py", b"cc");
    let report = c.pack(&PackOptions::default());
    let bytes = fs::read(c.out()).expect("read");
    assert_eq!(report.sha256, hex::encode(Sha256::digest(&bytes)));
    assert_eq!(report.bytes_out, bytes.len() as u64);
    assert_eq!((report.entries, report.files, report.bytes_in), (2, 2, 6));
    assert_eq!(report.path, c.out());
    let left: Vec<_> = fs::read_dir(c.dir.path())
        .expect("ls")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(left.len(), 2, "{left:?}"); // proj and context.zip
}

#[test]
fn a_failed_pack_leaves_an_existing_archive_untouched() {
    let c = Case::new();
    c.file("a.py", b"a");
    c.pack(&PackOptions::default());
    let before = fs::read(c.out()).expect("read");
    let missing = c.dir.path().join("no-such-root");
    let err = pack(&missing, c.out(), &PackOptions::default()).expect_err("missing root");
    assert!(err.to_string().contains("no-such-root"), "{err}");
    let file_as_root = c.root.join("a.py");
    assert!(pack(&file_as_root, c.out(), &PackOptions::default()).is_err());
    assert_eq!(fs::read(c.out()).expect("read"), before);
    let err = pack(
        &c.root,
        c.dir.path().join("nodir/c.zip"),
        &PackOptions::default(),
    )
    .expect_err("missing out dir");
    assert!(err.to_string().contains("nodir"), "{err}");
}

#[test]
fn special_and_non_utf8_names_are_skipped_with_warnings() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let c = Case::new();
    c.file("a.py", b"a");
    let fifo = c.root.join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo (coreutils) runs");
    assert!(made.success(), "mkfifo {}: {made}", fifo.display());
    let bad = c.root.join(OsStr::from_bytes(b"bad\xff.py"));
    fs::write(&bad, b"x").expect("Linux file systems take non-UTF-8 names");
    let report = c.pack(&PackOptions::default());
    assert_eq!(names(&c.out()), vec!["a.py"]);
    let kinds: Vec<&str> = report.warnings.iter().map(PackWarning::kind).collect();
    assert!(kinds.contains(&"non_utf8_name"), "{kinds:?}");
    assert!(kinds.contains(&"not_a_regular_file"), "{kinds:?}");
}

/// A file that opens but cannot be read, root included: `/proc/self/mem`
/// is a regular file whose first page (address 0) is never mapped, so
/// reading it fails with `EIO` (as a file without read permission fails
/// for a user). The archive goes on without it and says so.
#[test]
fn unreadable_file_is_skipped_with_a_warning() {
    let c = Case::new();
    c.file("a.py", b"a");
    let mem = Path::new("/proc/self/mem");
    let mut buf = [0u8; 1];
    let err = File::open(mem)
        .expect("/proc/self/mem opens")
        .read(&mut buf)
        .expect_err("the first page of memory cannot be read");
    assert_eq!(err.raw_os_error(), Some(5), "EIO: {err}");
    symlink(mem, c.root.join("locked.py")).expect("symlink");
    let report = c.pack(&PackOptions::default());
    assert_eq!(names(&c.out()), vec!["a.py"]);
    let unreadable: Vec<&PackWarning> = report
        .warnings
        .iter()
        .filter(|w| w.kind() == "unreadable_file")
        .collect();
    assert_eq!(unreadable.len(), 1, "{:?}", report.warnings);
    assert!(
        unreadable[0].to_string().contains("locked.py"),
        "{}",
        unreadable[0]
    );
}
