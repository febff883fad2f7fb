//! `context.zip` entries compared with what Python's `zipfile` writes for
//! the same tree: the reference script
//! `tests/reference/zip_reference.py` packs the tree with `zipfile`, then
//! dumps both archives; names, order, directory entries, sizes, CRCs,
//! external attributes (mode and file-type bits), creator system,
//! timestamps and contents must all be equal. The compression method too,
//! except where we store a file that Python deflates: that is allowed only
//! when Python's deflate did not shrink it either.
//!
//! Needs `python3` (3.11 in CI): without it these tests fail.

use std::fs::{self, File};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kinetic_core::packaging::{PackOptions, PackWarning, PackagingPlan, pack};
use serde_json::Value;

#[path = "support/noise.rs"]
mod support;
use support::noise;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/zip_reference.py")
}

fn python(args: &[&str]) -> Value {
    let output = Command::new("python3")
        .arg(script())
        .args(args)
        .output()
        .expect("python3 runs (this comparison needs it; scripts/test.sh installs it)");
    assert!(
        output.status.success(),
        "python3 {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("python printed JSON")
}

fn write(path: &Path, bytes: &[u8]) {
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, bytes).expect("write");
}

fn set_mtime(path: &Path, when: SystemTime) {
    File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(when))
        .expect("set mtime");
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A tree with every archive rule's case and every packager case Kinetic pins.
fn build_tree(base: &Path) -> (PathBuf, Vec<PathBuf>) {
    let root = base.join("proj");
    write(&root.join("train.py"), b"print('hi')\n");
    write(&root.join("pkg/__init__.py"), b"");
    write(&root.join("pkg/model.py"), b"class Model:\n    pass\n");
    write(&root.join("pkg/sub/deep.py"), b"X = 1\n");
    write(&root.join("run.sh"), b"#!/bin/sh\necho hi\n");
    chmod(&root.join("run.sh"), 0o755);
    write(&root.join("private.cfg"), b"k=v\n");
    chmod(&root.join("private.cfg"), 0o600);
    write(&root.join("setgid.bin"), b"x");
    chmod(&root.join("setgid.bin"), 0o2750);
    write(&root.join("\u{e9}t\u{e9}.py"), "# caf\u{e9}\n".as_bytes());
    write(&root.join("empty.txt"), b"");
    // Streamed (larger than the in-memory limit) and compressible.
    let big: Vec<u8> = (0..(4 << 20) + 4097u32)
        .map(|i| b"abcdefgh\n"[(i % 9) as usize])
        .collect();
    write(&root.join("assets/big.txt"), &big);
    // Incompressible: in memory, and streamed; and a file whose start is
    // random but whose rest is text (deflated: only its start looks random).
    write(&root.join("assets/noise.bin"), &noise(40 << 10, 1));
    write(
        &root.join("assets/noise_big.bin"),
        &noise((4 << 20) + 5000, 2),
    );
    let mut mixed = noise(20 << 10, 3);
    mixed.extend(big.iter().take(200 << 10));
    write(&root.join("assets/mixed.bin"), &mixed);

    // Always and default exclusions.
    write(&root.join(".git/HEAD"), b"ref: refs/heads/main\n");
    write(&root.join("pkg/__pycache__/model.cpython-311.pyc"), b"\0\0");
    write(&root.join(".venv/lib/site.py"), b"");
    write(&root.join("node_modules/x/index.js"), b"");
    write(&root.join(".pytest_cache/v"), b"");
    write(&root.join(".DS_Store"), b"\0");
    write(&root.join("sub/.DS_Store"), b"\0"); // sub becomes an empty dir entry

    // Empty directories.
    fs::create_dir_all(root.join("checkpoints")).expect("mkdir");
    fs::create_dir_all(root.join("nested/empty/leaf")).expect("mkdir");

    // .kineticignore.
    write(&root.join(".kineticignore"), b"# junk\n*.ckpt\ndata/\n");
    write(&root.join("big.ckpt"), b"weights");
    write(&root.join("data/train.csv"), b"1,2\n");
    write(&root.join("notdata/data"), b"a file named data is kept\n");

    // Credential-shaped files are archived.
    write(&root.join(".env"), b"TOKEN=x\n");
    write(&root.join("keys/id_rsa"), b"-----\n");

    // Symlinks: a followed directory, a loop, a broken link, a file link.
    let outside = base.join("outside");
    write(&outside.join("shared/lib.py"), b"def f():\n    return 1\n");
    symlink(outside.join("shared"), root.join("shared")).expect("symlink");
    symlink(&root, root.join("pkg/loop")).expect("symlink");
    symlink(root.join("nowhere"), root.join("dangling.py")).expect("symlink");
    symlink(root.join("self.py"), root.join("self.py")).expect("symlink");
    symlink(root.join("train.py"), root.join("train_link.py")).expect("symlink");

    // A stale plan that the supplied plan replaces.
    write(&root.join(".kinetic/plan.json"), b"{\"stale\": true}");

    // Local Data to exclude: one by its path, one through a symlinked alias.
    write(&root.join("dataset/part-0"), b"rows");
    write(&root.join("weights/w.bin"), b"w");
    symlink(root.join("weights"), base.join("weights-alias")).expect("symlink");
    let excludes = vec![root.join("dataset"), root.join("weights")];

    // Timestamps: before 1980, after 2107, and a fraction that rounds up.
    set_mtime(&root.join("train.py"), UNIX_EPOCH);
    set_mtime(
        &root.join("pkg/model.py"),
        UNIX_EPOCH + Duration::from_secs(7_258_118_400),
    );
    set_mtime(
        &root.join("pkg/sub/deep.py"),
        UNIX_EPOCH + Duration::new(1_700_000_000, 999_999_999),
    );
    set_mtime(
        &root.join("run.sh"),
        UNIX_EPOCH + Duration::new(1_700_000_001, 500_000_000),
    );
    (root, excludes)
}

fn plan(root: &Path) -> PackagingPlan {
    PackagingPlan {
        package_root: root.to_str().expect("utf-8").to_owned(),
        entry_rel: "pkg".to_owned(),
        client_cwd_rel: None,
        sys_path_rel: vec![String::new(), "src".to_owned(), "\u{e9}".to_owned()],
    }
}

fn entries(dump: &Value) -> &Vec<Value> {
    assert_eq!(dump["testzip"], Value::Null, "a CRC check failed");
    dump["entries"].as_array().expect("entries")
}

/// Compares the archives entry by entry; returns the names of the files we
/// stored where Python deflated.
fn compare(rust_zip: &Path, python_zip: &Path) -> Vec<String> {
    let ours = python(&["dump", rust_zip.to_str().expect("utf-8")]);
    let theirs = python(&["dump", python_zip.to_str().expect("utf-8")]);
    let (ours, theirs) = (entries(&ours), entries(&theirs));
    let names = |v: &Vec<Value>| -> Vec<String> {
        v.iter()
            .map(|e| e["name"].as_str().expect("name").to_owned())
            .collect()
    };
    assert_eq!(names(ours), names(theirs), "entry names and order");
    let mut stored = Vec::new();
    for (a, b) in ours.iter().zip(theirs) {
        let name = a["name"].as_str().expect("name");
        for field in [
            "is_dir",
            "file_size",
            "crc",
            "external_attr",
            "create_system",
            "sha256",
        ] {
            assert_eq!(a[field], b[field], "{field} of {name}");
        }
        // The plan is stamped with the current time by both writers.
        if name != ".kinetic/plan.json" {
            assert_eq!(a["date_time"], b["date_time"], "date_time of {name}");
        }
        const STORED: u64 = 0;
        const DEFLATED: u64 = 8;
        let (ours_method, theirs_method) = (&a["compress_type"], &b["compress_type"]);
        if ours_method != theirs_method {
            assert_eq!(
                (ours_method.as_u64(), theirs_method.as_u64()),
                (Some(STORED), Some(DEFLATED)),
                "compress_type of {name}"
            );
            // Another deflater may win a few bytes where ours does not
            // (tiny files), but never a real share of the file.
            let size = b["file_size"].as_u64().expect("size");
            let deflated = b["compress_size"].as_u64().expect("size");
            assert!(
                deflated + (size / 50).max(16) >= size,
                "{name} was stored, but Python's deflate shrank it ({size} -> {deflated} bytes)"
            );
            stored.push(name.to_owned());
        }
    }
    stored
}

#[test]
fn archive_entries_equal_pythons_zipfile() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (root, excludes) = build_tree(dir.path());
    let plan = plan(&root);

    let rust_zip = dir.path().join("rust.zip");
    let mut options = PackOptions::default().plan(plan.clone()).size_warn_bytes(0);
    // One exclude through a symlinked alias: matched by identity.
    options = options
        .exclude(&excludes[0])
        .exclude(dir.path().join("weights-alias"));
    let report = pack(&root, &rust_zip, &options).expect("pack");

    let python_zip = dir.path().join("python.zip");
    let plan_json = serde_json::to_string(&plan).expect("json");
    let root_s = root.to_str().expect("utf-8");
    let py = python(&[
        "pack",
        root_s,
        python_zip.to_str().expect("utf-8"),
        "--exclude",
        excludes[0].to_str().expect("utf-8"),
        "--exclude",
        excludes[1].to_str().expect("utf-8"),
        "--plan-json",
        &plan_json,
    ]);
    let stored = compare(&rust_zip, &python_zip);
    // Random bytes are stored, whether held in memory or streamed; so are
    // files too small for deflate to win; text and a file that is random
    // only at its start are deflated as Python deflates them.
    for name in [
        "assets/noise.bin",
        "assets/noise_big.bin",
        "empty.txt",
        "setgid.bin",
    ] {
        assert!(
            stored.contains(&name.to_owned()),
            "{name} not stored: {stored:?}"
        );
    }
    for name in ["assets/big.txt", "assets/mixed.bin", ".kinetic/plan.json"] {
        assert!(!stored.contains(&name.to_owned()), "{name} stored");
    }
    assert_eq!(report.stored, stored.len());

    // The same skips, in the same order.
    let theirs: Vec<(String, String)> = py["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .map(|w| {
            (
                w[0].as_str().expect("kind").to_owned(),
                root.join(w[1].as_str().expect("rel")).display().to_string(),
            )
        })
        .collect();
    let ours: Vec<(String, String)> = report
        .warnings
        .iter()
        .filter_map(|w| match w {
            PackWarning::SymlinkLoop { path } | PackWarning::BrokenSymlink { path, .. } => {
                Some((w.kind().to_owned(), path.display().to_string()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(ours, theirs);
    assert!(
        report
            .warnings
            .iter()
            .any(|w| matches!(w, PackWarning::SecretFiles { files, .. } if files == &[".env".to_owned(), "keys/id_rsa".to_owned()])),
        "{:?}",
        report.warnings
    );
}

#[test]
fn archive_entries_equal_pythons_zipfile_without_default_excludes_or_plan() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("p");
    write(&root.join("a.py"), b"a");
    write(&root.join(".venv/bin/python"), b"#!");
    write(&root.join("node_modules/m.js"), b"m");
    write(&root.join(".DS_Store"), b"d");
    write(&root.join(".git/config"), b"c");
    write(&root.join(".kinetic/plan.json"), b"{\"real\": 1}");
    let rust_zip = dir.path().join("rust.zip");
    pack(
        &root,
        &rust_zip,
        &PackOptions::default().default_excludes(false),
    )
    .expect("pack");
    let python_zip = dir.path().join("python.zip");
    python(&[
        "pack",
        root.to_str().expect("utf-8"),
        python_zip.to_str().expect("utf-8"),
        "--no-default-excludes",
    ]);
    compare(&rust_zip, &python_zip);
}
