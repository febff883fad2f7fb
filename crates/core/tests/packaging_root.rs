//! Package root detection: the layouts Kinetic's tests pin, each built in a temp dir with a fake `$HOME`.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use kinetic_core::packaging::{
    PackageRootError, PackageRootInputs, PackagingPlan, detect_package_root,
};

struct Fixture {
    _dir: tempfile::TempDir,
    /// Canonical base (so `/tmp` symlinks do not matter).
    base: PathBuf,
    home: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = fs::canonicalize(dir.path()).expect("canonicalize");
        let home = base.join("home");
        fs::create_dir_all(&home).expect("mkdir");
        Self {
            _dir: dir,
            base,
            home,
        }
    }

    fn touch(&self, rel: &str) -> PathBuf {
        let path = self.base.join(rel);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(&path, b"").expect("write");
        path
    }

    fn mkdir(&self, rel: &str) -> PathBuf {
        let path = self.base.join(rel);
        fs::create_dir_all(&path).expect("mkdir");
        path
    }

    fn detect(&self, entry: &Path) -> PackagingPlan {
        detect_package_root(&PackageRootInputs::new(entry, &self.home, entry)).expect("detect")
    }

    fn root_of(&self, entry: &Path) -> (String, String) {
        let plan = self.detect(entry);
        (plan.package_root, plan.entry_rel)
    }

    fn s(&self, rel: &str) -> String {
        self.base.join(rel).to_str().expect("utf-8").to_owned()
    }
}

#[test]
fn flat_project_in_home_is_its_own_root() {
    let f = Fixture::new();
    let proj = f.mkdir("home/proj");
    f.touch("home/proj/train.py");
    assert_eq!(f.root_of(&proj), (f.s("home/proj"), String::new()));
}

#[test]
fn pyproject_above_the_code_makes_the_root() {
    let f = Fixture::new();
    f.touch("home/repo/pyproject.toml");
    let proj = f.mkdir("home/repo/proj");
    assert_eq!(f.root_of(&proj), (f.s("home/repo"), "proj".to_owned()));
}

#[test]
fn git_marker_and_package_escape() {
    let f = Fixture::new();
    f.mkdir("home/repo/.git");
    f.touch("home/repo/pkg/__init__.py");
    let pkg = f.base.join("home/repo/pkg");
    assert_eq!(f.root_of(&pkg), (f.s("home/repo"), "pkg".to_owned()));
}

#[test]
fn git_file_of_a_worktree_counts_as_a_marker() {
    let f = Fixture::new();
    f.touch("home/wt/.git");
    let code = f.mkdir("home/wt/code");
    assert_eq!(f.root_of(&code), (f.s("home/wt"), "code".to_owned()));
}

#[test]
fn nested_packages_are_escaped_to_the_marker() {
    let f = Fixture::new();
    f.touch("home/repo/setup.py");
    f.touch("home/repo/pkg/__init__.py");
    f.touch("home/repo/pkg/sub/__init__.py");
    let sub = f.base.join("home/repo/pkg/sub");
    assert_eq!(f.root_of(&sub), (f.s("home/repo"), "pkg/sub".to_owned()));
}

#[test]
fn package_without_markers_roots_at_its_parent() {
    let f = Fixture::new();
    f.touch("home/proj/pkg/__init__.py");
    let pkg = f.base.join("home/proj/pkg");
    assert_eq!(f.root_of(&pkg), (f.s("home/proj"), "pkg".to_owned()));
}

#[test]
fn home_is_never_adopted_unless_the_walk_starts_there() {
    let f = Fixture::new();
    f.touch("home/pyproject.toml");
    let proj = f.mkdir("home/proj");
    assert_eq!(f.root_of(&proj), (f.s("home/proj"), String::new()));
    assert_eq!(f.root_of(&f.home), (f.s("home"), String::new()));
}

#[test]
fn package_escape_stops_at_home() {
    let f = Fixture::new();
    f.touch("home/__init__.py");
    f.touch("home/pkg/__init__.py");
    let pkg = f.base.join("home/pkg");
    assert_eq!(f.root_of(&pkg), (f.s("home"), "pkg".to_owned()));
}

#[test]
fn src_layout_sys_path_and_filtering() {
    let f = Fixture::new();
    f.touch("home/repo/pyproject.toml");
    let src = f.mkdir("home/repo/src");
    let entry = f.mkdir("home/repo/src/app");
    f.mkdir("home/repo/tools");
    f.mkdir("home/repo/.venv/lib/python3.11/site-packages");
    f.mkdir("home/repo/dist-packages");
    f.mkdir("elsewhere");
    let sys_path = vec![
        f.s("home/repo/src"),
        f.s("home/repo/src"), // duplicate
        f.s("home/repo/tools"),
        f.s("home/repo/.venv/lib/python3.11/site-packages"),
        f.s("home/repo/dist-packages"),
        f.s("elsewhere"),         // outside the root
        f.s("home/repo/missing"), // does not exist
        f.s("home/repo"),         // the root itself ("" is always first)
        String::new(),            // Python's "" entry
        "tools".to_owned(),       // relative: resolved against the client cwd
    ];
    let cwd = f.base.join("home/repo");
    let plan =
        detect_package_root(&PackageRootInputs::new(&entry, &f.home, &cwd).sys_path(sys_path))
            .expect("detect");
    assert_eq!(plan.package_root, f.s("home/repo"));
    assert_eq!(plan.entry_rel, "src/app");
    assert_eq!(plan.client_cwd_rel.as_deref(), Some(""));
    assert_eq!(plan.sys_path_rel, vec!["", "src", "tools"]);
    let _ = src;
}

#[test]
fn client_cwd_inside_outside_and_through_a_symlink() {
    let f = Fixture::new();
    f.touch("home/repo/pyproject.toml");
    let entry = f.mkdir("home/repo/app");
    let inside = f.mkdir("home/repo/app/sub");
    let outside = f.mkdir("home/other");
    let detect = |cwd: &Path| {
        detect_package_root(&PackageRootInputs::new(&entry, &f.home, cwd))
            .expect("detect")
            .client_cwd_rel
    };
    assert_eq!(detect(&inside), Some("app/sub".to_owned()));
    assert_eq!(detect(&outside), None);
    // The cwd reached through a symlinked alias: matched via realpath.
    let alias = f.base.join("alias");
    symlink(f.base.join("home/repo"), &alias).expect("symlink");
    assert_eq!(detect(&alias.join("app")), Some("app".to_owned()));
}

#[test]
fn override_is_used_as_is_when_it_contains_the_entry() {
    let f = Fixture::new();
    f.touch("home/repo/pyproject.toml");
    let entry = f.mkdir("home/repo/a/b");
    let inputs = PackageRootInputs::new(&entry, &f.home, &entry)
        .package_root_override(Some(f.s("home/repo/a")));
    let plan = detect_package_root(&inputs).expect("detect");
    assert_eq!(
        (plan.package_root, plan.entry_rel),
        (f.s("home/repo/a"), "b".to_owned())
    );

    // `~` expands to the home directory.
    let inputs =
        PackageRootInputs::new(&entry, &f.home, &entry).package_root_override(Some("~/repo"));
    assert_eq!(
        detect_package_root(&inputs).expect("detect").package_root,
        f.s("home/repo")
    );

    // Empty means unset.
    let inputs = PackageRootInputs::new(&entry, &f.home, &entry).package_root_override(Some(""));
    assert_eq!(
        detect_package_root(&inputs).expect("detect").package_root,
        f.s("home/repo")
    );
}

#[test]
fn override_errors_name_the_value() {
    let f = Fixture::new();
    let entry = f.mkdir("home/repo/app");
    f.mkdir("home/other");
    let inputs = PackageRootInputs::new(&entry, &f.home, &entry)
        .package_root_override(Some(f.s("home/nope")));
    let err = detect_package_root(&inputs).expect_err("not a dir");
    assert!(matches!(
        err,
        PackageRootError::OverrideNotADirectory { .. }
    ));
    assert!(
        err.to_string().contains("is not an existing directory"),
        "{err}"
    );

    let inputs = PackageRootInputs::new(&entry, &f.home, &entry)
        .package_root_override(Some(f.s("home/other")));
    let err = detect_package_root(&inputs).expect_err("does not contain");
    assert!(matches!(
        err,
        PackageRootError::OverrideDoesNotContainEntry { .. }
    ));
    assert!(
        err.to_string()
            .contains("does not contain the code being packaged"),
        "{err}"
    );
}

#[test]
fn relative_client_cwd_is_rejected() {
    let err =
        detect_package_root(&PackageRootInputs::new("/x", "/home/u", "rel")).expect_err("relative");
    assert!(matches!(err, PackageRootError::RelativeClientCwd { .. }));
}
