//! Dependency-file discovery on real directories.

use std::fs;
use std::path::{Path, PathBuf};

use kinetic_core::requirements::{
    DependencyFileKind, RequirementsError, RequirementsMode, RequirementsWarning, discover,
    normalize_path, resolve,
};

struct Tree {
    _tmp: tempfile::TempDir,
    /// Plays `$HOME`; discovery never walks above it.
    home: PathBuf,
}

impl Tree {
    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let home = normalize_path(tmp.path()).expect("normalise");
        Self { _tmp: tmp, home }
    }

    fn dir(&self, rel: &str) -> PathBuf {
        let p = self.home.join(rel);
        fs::create_dir_all(&p).expect("mkdir");
        p
    }

    fn file(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.home.join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).expect("mkdir");
        }
        fs::write(&p, text).expect("write");
        p
    }

    fn discover(&self, rel: &str) -> kinetic_core::requirements::Discovery {
        discover(&self.dir(rel), Some(&self.home)).expect("discover")
    }
}

#[test]
fn requirements_txt_in_the_entry_dir() {
    let t = Tree::new();
    t.dir("repo/.git");
    let f = t.file("repo/src/requirements.txt", "numpy\n");
    let d = t.discover("repo/src");
    let file = d.file.expect("found");
    assert_eq!(file.path, f);
    assert_eq!(file.kind, DependencyFileKind::RequirementsTxt);
    assert_eq!(d.repo_root, Some(t.home.join("repo")));
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
}

#[test]
fn requirements_txt_wins_over_pyproject_with_a_note() {
    let t = Tree::new();
    t.dir("repo/.git");
    let r = t.file("repo/requirements.txt", "numpy\n");
    let p = t.file("repo/pyproject.toml", "[project]\n");
    let d = t.discover("repo");
    assert_eq!(d.file.expect("found").path, r);
    assert_eq!(
        d.warnings,
        vec![RequirementsWarning::PyprojectShadowed {
            requirements: r,
            pyproject: p
        }]
    );
    assert!(d.warnings[0].is_informational());
}

#[test]
fn directories_with_the_file_names_are_ignored() {
    let t = Tree::new();
    t.dir("repo/.git");
    t.dir("repo/requirements.txt");
    let p = t.file(
        "repo/pyproject.toml",
        "[project]\ndependencies = [\"numpy\"]\n",
    );
    let d = t.discover("repo");
    let file = d.file.expect("found");
    assert_eq!(file.path, p);
    assert_eq!(file.kind, DependencyFileKind::PyprojectToml);
}

#[test]
fn walks_up_to_the_repository_root() {
    let t = Tree::new();
    t.dir("repo/.git");
    let f = t.file("repo/requirements.txt", "numpy\n");
    let d = t.discover("repo/a/b/c");
    assert_eq!(d.file.expect("found").path, f);
    assert!(d.warnings.is_empty(), "inside a repository: no warning");
}

#[test]
fn nearest_file_wins() {
    let t = Tree::new();
    t.dir("repo/.git");
    t.file("repo/requirements.txt", "numpy\n");
    let near = t.file("repo/pkg/pyproject.toml", "[project]\n");
    let d = t.discover("repo/pkg/sub");
    assert_eq!(d.file.expect("found").path, near);
}

#[test]
fn never_looks_above_the_repository_root() {
    let t = Tree::new();
    t.file("requirements.txt", "numpy\n");
    t.dir("repo/.git");
    let d = t.discover("repo/src");
    assert_eq!(d.file, None);
    assert_eq!(d.repo_root, Some(t.home.join("repo")));
}

#[test]
fn a_git_file_also_marks_the_root() {
    let t = Tree::new();
    t.file("requirements.txt", "numpy\n");
    t.file("wt/.git", "gitdir: /elsewhere\n");
    let d = t.discover("wt/src");
    assert_eq!(d.file, None);
    assert_eq!(d.repo_root, Some(t.home.join("wt")));
}

#[test]
fn stops_at_home() {
    let t = Tree::new();
    // A file above home must never be found: home is the temp dir, so put
    // the entry one level down and check that the walk stops at home.
    let d = t.discover("proj/src");
    assert_eq!(d.file, None);
    assert_eq!(d.repo_root, None);
    assert!(d.warnings.is_empty());
}

#[test]
fn file_in_home_is_found_but_warned_about_without_git() {
    let t = Tree::new();
    let f = t.file("requirements.txt", "numpy\n");
    let d = t.discover("proj/src");
    assert_eq!(d.file.as_ref().map(|f| &f.path), Some(&f));
    assert_eq!(
        d.warnings,
        vec![RequirementsWarning::OutsideCodeDirectory {
            path: f,
            entry_dir: t.home.join("proj/src")
        }]
    );
}

#[test]
fn file_in_entry_dir_without_git_is_not_warned_about() {
    let t = Tree::new();
    t.file("proj/requirements.txt", "numpy\n");
    let d = t.discover("proj");
    assert!(d.file.is_some());
    assert!(d.warnings.is_empty());
}

#[test]
fn pyproject_without_dependencies_is_still_selected() {
    let t = Tree::new();
    t.dir("repo/.git");
    t.file("repo/requirements.txt", "numpy\n");
    let p = t.file("repo/app/pyproject.toml", "[project]\nname = \"app\"\n");
    let r = resolve(&t.dir("repo/app"), Some(&t.home), RequirementsMode::Bundled).expect("ok");
    assert_eq!(r.file.expect("found").path, p.clone());
    assert_eq!(r.requirements, None);
    assert!(
        r.warnings
            .iter()
            .any(|w| matches!(w, RequirementsWarning::PyprojectDeclaresNoDependencies { path, .. } if *path == p))
    );
}

#[test]
fn unparseable_pyproject_does_not_fail_discovery() {
    let t = Tree::new();
    t.dir("repo/.git");
    t.file("repo/pyproject.toml", "[project\n");
    let d = t.discover("repo");
    assert!(d.file.is_some());
    let err = resolve(
        &t.home.join("repo"),
        Some(&t.home),
        RequirementsMode::Bundled,
    )
    .expect_err("must fail");
    assert!(matches!(err, RequirementsError::InvalidPyproject { .. }));
}

#[test]
fn missing_entry_dir_is_an_error_naming_it() {
    let t = Tree::new();
    let missing = t.home.join("nope");
    let err = discover(&missing, Some(&t.home)).expect_err("must fail");
    assert!(matches!(err, RequirementsError::NotADirectory { .. }));
    assert!(err.to_string().contains("nope"));
    let file = t.file("afile", "");
    assert!(discover(&file, Some(&t.home)).is_err());
}

#[test]
fn entry_dir_is_normalised_lexically() {
    let t = Tree::new();
    t.dir("repo/.git");
    t.dir("repo/src");
    let d = discover(&t.home.join("repo/src/../src/./"), Some(&t.home)).expect("ok");
    assert_eq!(d.entry_dir, t.home.join("repo/src"));
    assert_eq!(
        normalize_path(Path::new("/a/../../b")).expect("ok"),
        PathBuf::from("/b")
    );
}

#[test]
fn resolve_filters_for_the_mode() {
    let t = Tree::new();
    t.dir("repo/.git");
    t.file(
        "repo/requirements.txt",
        "numpy \\\n  --hash=sha256:a\njax[tpu]\n",
    );
    let bundled = resolve(
        &t.home.join("repo"),
        Some(&t.home),
        RequirementsMode::Bundled,
    )
    .expect("ok");
    assert_eq!(
        bundled.requirements.as_deref(),
        Some("numpy \\\n  --hash=sha256:a\n")
    );
    assert_eq!(bundled.warnings.len(), 1);
    let prebuilt = resolve(
        &t.home.join("repo"),
        Some(&t.home),
        RequirementsMode::Prebuilt,
    )
    .expect("ok");
    assert_eq!(
        prebuilt.requirements.as_deref(),
        Some("numpy --hash=sha256:a\n")
    );
}

#[test]
fn a_utf8_bom_is_dropped() {
    let t = Tree::new();
    t.dir("repo/.git");
    t.file("repo/requirements.txt", "\u{feff}jax\nnumpy\n");
    let r = resolve(
        &t.home.join("repo"),
        Some(&t.home),
        RequirementsMode::Bundled,
    )
    .expect("ok");
    assert_eq!(r.requirements.as_deref(), Some("numpy\n"));
}
