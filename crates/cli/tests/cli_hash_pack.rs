//! `kinetic hash` and `kinetic pack` through the real binary.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use sha2::{Digest, Sha256};

fn kinetic(args: &[&str]) -> Output {
    kinetic_env(args, &[])
}

fn kinetic_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kinetic"));
    cmd.args(args)
        .env_remove("KINETIC_NO_DEFAULT_EXCLUDES")
        .env_remove("KINETIC_CONTEXT_SIZE_WARN_MB");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run kinetic")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> Value {
    assert!(o.status.success(), "failed: {}", stderr(o));
    serde_json::from_slice(&o.stdout).expect("JSON on stdout")
}

fn write(path: &Path, bytes: &[u8]) {
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, bytes).expect("write");
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn hash_prints_the_kinetic_hash_of_a_file_and_a_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("hello.txt");
    write(&file, b"hello\n");
    let o = kinetic(&["hash", s(&file)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o).trim(),
        "565d06b849b37d8a24aae0d602e9b6d12ea51d00864b40ebd026752c90673939"
    );

    let data = dir.path().join("data");
    write(&data.join("a.txt"), b"a");
    write(&data.join("sub/b.txt"), b"b");
    let o = kinetic(&["hash", s(&data)]);
    assert_eq!(
        stdout(&o).trim(),
        "906aa0f72a5646bd887f17bfaceaacbb0e1c629e6f3402121cd9b4314267193d"
    );
}

#[test]
fn hash_json_has_every_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("a.txt"), b"a");
    write(&dir.path().join("sub/b.txt"), b"b");
    let v = json(&kinetic(&["--json", "hash", s(dir.path())]));
    assert_eq!(v["path"], s(dir.path()));
    assert_eq!(
        v["hash"],
        "906aa0f72a5646bd887f17bfaceaacbb0e1c629e6f3402121cd9b4314267193d"
    );
    assert_eq!(v["kind"], "dir");
    assert_eq!(v["files"], 2);
    assert_eq!(v["bytes"], 2);
    assert!(v["seconds"].as_f64().is_some_and(|x| x >= 0.0));
    assert!(v["mb_per_s"].as_f64().is_some_and(|x| x >= 0.0));

    let v = json(&kinetic(&["hash", "--json", s(&dir.path().join("a.txt"))]));
    assert_eq!(v["kind"], "file");
    assert_eq!(v["files"], 1);
}

#[test]
fn hash_of_a_missing_path_is_a_usage_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("no-such-data");
    let o = kinetic(&["hash", s(&missing)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no-such-data"), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
}

#[test]
fn hash_of_a_tree_with_a_broken_symlink_fails_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("a.txt"), b"a");
    symlink(dir.path().join("gone"), dir.path().join("dangling")).expect("symlink");
    let o = kinetic(&["hash", s(dir.path())]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("dangling"), "{}", stderr(&o));
}

fn project(base: &Path) -> PathBuf {
    let root = base.join("proj");
    write(&root.join("train.py"), b"print('hi')\n");
    write(&root.join("pkg/model.py"), b"X = 1\n");
    write(&root.join(".venv/lib/site.py"), b"");
    write(&root.join(".env"), b"TOKEN=1\n");
    write(&root.join("data/big.bin"), &[7u8; 4096]);
    symlink(root.join("missing"), root.join("broken.py")).expect("symlink");
    root
}

fn sha256_hex(path: &Path) -> String {
    hex::encode(Sha256::digest(fs::read(path).expect("read zip")))
}

/// Entry names from the central directory of a ZIP file (no python needed).
fn zip_names(zip: &Path) -> Vec<String> {
    let bytes = fs::read(zip).expect("read zip");
    let mut names = Vec::new();
    let mut i = 0;
    while i + 46 <= bytes.len() {
        if bytes[i..i + 4] == [0x50, 0x4b, 0x01, 0x02] {
            let n = u16::from_le_bytes([bytes[i + 28], bytes[i + 29]]) as usize;
            let m = u16::from_le_bytes([bytes[i + 30], bytes[i + 31]]) as usize;
            let k = u16::from_le_bytes([bytes[i + 32], bytes[i + 33]]) as usize;
            names.push(String::from_utf8_lossy(&bytes[i + 46..i + 46 + n]).into_owned());
            i += 46 + n + m + k;
        } else {
            i += 1;
        }
    }
    names
}

#[test]
fn pack_writes_the_archive_and_reports_warnings_and_a_summary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = project(dir.path());
    let out = dir.path().join("context.zip");
    let o = kinetic(&[
        "pack",
        s(&root),
        s(&out),
        "--exclude",
        s(&root.join("data")),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let warning_lines: Vec<&str> = err.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(warning_lines.len(), 2, "{err}");
    assert!(
        err.contains("broken symlink") && err.contains("broken.py"),
        "{err}"
    );
    assert!(
        err.contains("credential-shaped") && err.contains(".env"),
        "{err}"
    );
    let summary = stdout(&o);
    assert!(summary.contains(&sha256_hex(&out)), "{summary}");
    assert!(summary.contains("3 files"), "{summary}");
    assert_eq!(zip_names(&out), vec![".env", "train.py", "pkg/model.py"]);
    // Nothing else was left next to the archive.
    let mut left: Vec<String> = fs::read_dir(dir.path())
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, vec!["context.zip", "proj"]);
}

#[test]
fn pack_json_reports_entries_bytes_warnings_and_sha256() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = project(dir.path());
    let out = dir.path().join("context.zip");
    let plan = format!(
        r#"{{"package_root": "{}", "entry_rel": "pkg", "client_cwd_rel": null, "sys_path_rel": [""]}}"#,
        s(&root)
    );
    let v = json(&kinetic(&[
        "--json",
        "pack",
        s(&root),
        s(&out),
        "--plan-json",
        &plan,
    ]));
    // .env, train.py, data/big.bin, pkg/model.py, and the plan.
    assert_eq!(v["entries"], 5, "{v}");
    assert_eq!(v["files"], 4);
    assert_eq!(v["bytes_in"], 8 + 12 + 4096 + 6);
    assert_eq!(v["bytes_out"], fs::metadata(&out).expect("zip").len());
    assert_eq!(v["sha256"], sha256_hex(&out));
    let warnings = v["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 2, "{v}");
    assert!(warnings.iter().all(Value::is_string));
    assert_eq!(
        zip_names(&out).last().map(String::as_str),
        Some(".kinetic/plan.json")
    );
}

#[test]
fn pack_rejects_a_bad_plan_json_naming_the_flag_and_the_shape() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = project(dir.path());
    let out = dir.path().join("context.zip");
    for bad in ["{not json", r#"{"package_root": "/r"}"#, "[1]"] {
        let o = kinetic(&["pack", s(&root), s(&out), "--plan-json", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        let err = stderr(&o);
        assert!(err.contains("--plan-json"), "{err}");
        for key in [
            "package_root",
            "entry_rel",
            "client_cwd_rel",
            "sys_path_rel",
        ] {
            assert!(err.contains(key), "{err}");
        }
        assert!(!out.exists(), "no archive on a usage error");
    }
}

#[test]
fn pack_refuses_a_plan_json_that_escapes_the_root() {
    // Issue 25.9: the plan was stored as given, '..' and absolute paths too.
    let dir = tempfile::tempdir().expect("tempdir");
    let root = project(dir.path());
    let out = dir.path().join("context.zip");
    for (bad, key) in [
        (
            r#"{"package_root": "/r", "entry_rel": "../../x", "client_cwd_rel": null, "sys_path_rel": [""]}"#,
            "entry_rel",
        ),
        (
            r#"{"package_root": "/r", "entry_rel": "", "client_cwd_rel": null, "sys_path_rel": ["", "/usr/lib"]}"#,
            "sys_path_rel",
        ),
    ] {
        let o = kinetic(&["pack", s(&root), s(&out), "--plan-json", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        let err = stderr(&o);
        assert!(
            err.contains("--plan-json")
                && err.contains(key)
                && err.contains("leaves the package root"),
            "{err}"
        );
        assert!(!out.exists(), "no archive for a plan that escapes");
    }
}

#[test]
fn pack_of_a_missing_source_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = kinetic(&[
        "pack",
        s(&dir.path().join("nope")),
        s(&dir.path().join("c.zip")),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("nope"), "{}", stderr(&o));
}

#[test]
fn no_default_excludes_comes_from_the_environment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("p");
    write(&root.join("a.py"), b"a");
    write(&root.join(".venv/x.py"), b"x");
    let out = dir.path().join("c.zip");
    let o = kinetic_env(
        &["pack", s(&root), s(&out)],
        &[("KINETIC_NO_DEFAULT_EXCLUDES", "1")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(zip_names(&out), vec!["a.py", ".venv/x.py"]);
    let o = kinetic(&["pack", s(&root), s(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(zip_names(&out), vec!["a.py"]);
}

#[test]
fn size_warning_threshold_comes_from_the_environment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("p");
    write(&root.join("small.py"), b"x");
    // Incompressible bytes (xorshift), so the archive really is ~40 KB.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<u8> = (0..40_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect();
    write(&root.join("big.bin"), &noise);
    let out = dir.path().join("c.zip");
    let o = kinetic_env(
        &["pack", s(&root), s(&out)],
        &[("KINETIC_CONTEXT_SIZE_WARN_MB", "0.01")],
    );
    let err = stderr(&o);
    assert!(
        err.contains("big.bin") && err.contains(".kineticignore"),
        "{err}"
    );
    let o = kinetic_env(
        &["pack", s(&root), s(&out)],
        &[("KINETIC_CONTEXT_SIZE_WARN_MB", "0")],
    );
    assert!(!stderr(&o).contains("big.bin"), "{}", stderr(&o));
}

#[test]
fn an_old_archive_inside_the_source_is_not_packed_into_the_new_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("p");
    write(&root.join("a.py"), b"a");
    let out = root.join("context.zip");
    for _ in 0..2 {
        let o = kinetic(&["pack", s(&root), s(&out)]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    assert_eq!(zip_names(&out), vec!["a.py"]);
}

/// Timestamps are local time, as Python's `ZipInfo.from_file` records them:
/// with a non-UTC zone, both writers must agree.
#[test]
fn timestamps_follow_the_local_time_zone_like_python() {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/tests/reference/zip_reference.py");
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("p");
    write(&root.join("a.py"), b"a");
    write(&root.join("b/c.py"), b"c");
    let tz = [("TZ", "Asia/Kolkata")];
    let ours = dir.path().join("ours.zip");
    let o = kinetic_env(&["pack", s(&root), s(&ours)], &tz);
    assert!(o.status.success(), "{}", stderr(&o));
    let theirs = dir.path().join("theirs.zip");
    let py = |args: &[&str]| -> Value {
        let o = Command::new("python3")
            .arg(&script)
            .args(args)
            .envs(tz)
            .output()
            .expect("python3 runs (this comparison needs it; scripts/test.sh installs it)");
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_slice(&o.stdout).expect("json")
    };
    py(&["pack", s(&root), s(&theirs)]);
    let a = py(&["dump", s(&ours)]);
    let b = py(&["dump", s(&theirs)]);
    let (a, b) = (
        a["entries"].as_array().expect("entries"),
        b["entries"].as_array().expect("entries"),
    );
    assert_eq!(a.len(), 2);
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x["name"], y["name"]);
        assert_eq!(x["date_time"], y["date_time"], "{}", x["name"]);
        assert_eq!(x["external_attr"], y["external_attr"]);
    }
}
