//! Requirements: JAX filter, prebuilt processing, pyproject parsing and
//! the bundled-mode decision (where Kinetic leaves continuations orphaned).

use std::path::PathBuf;

use kinetic_core::requirements::{
    DependencyFile, DependencyFileKind, IgnoredDependencySource, RequirementPosition,
    RequirementsError, RequirementsMode, RequirementsWarning, UnusableReason, check_usable,
    dependency_text, filter_jax, join_continuations, parse_pyproject, prepare, unusable_reason,
};

fn req_file() -> DependencyFile {
    DependencyFile {
        path: PathBuf::from("/proj/requirements.txt"),
        kind: DependencyFileKind::RequirementsTxt,
    }
}

fn pyproject_file() -> DependencyFile {
    DependencyFile {
        path: PathBuf::from("/proj/pyproject.toml"),
        kind: DependencyFileKind::PyprojectToml,
    }
}

// ---------------------------------------------------------------- JAX filter table

const FILTERED: &[&str] = &[
    "jax",
    "JAX",
    "Jax[tpu]>=0.4",
    "jax[cuda12]==0.4.30",
    "jax[cpu]",
    "  jax  ",
    "jaxlib",
    "jaxlib>=0.4.6",
    "libtpu",
    "libtpu-nightly",
    "libtpu_nightly",
    "libtpu.nightly",
    "LibTPU-Nightly",
    "jax ; python_version>'3.9'",
    "jax @ git+https://github.com/google/jax",
    "jax>=0.4 \\",
    "jax==0.4.30 #kn:keep",
    "jax==0.4.30  # KN:KEEP",
];

const KEPT: &[&str] = &[
    "jax-metal",
    "jax_lib",
    "jax.lib",
    "jaxtyping",
    "flax",
    "jax==0.4.30 # kn:keep",
    "jax==0.4.30  # kn:keep",
    "-e git+https://x#egg=jax",
    "--find-links https://x jax",
    "# jax",
];

#[test]
fn every_filtered_row_of_the_table_is_dropped() {
    for line in FILTERED {
        for text in [line.to_string(), format!("{line}\n")] {
            let out = filter_jax(&text);
            assert_eq!(out.text, "", "{line:?} should be filtered");
            assert_eq!(out.warnings.len(), 1, "{line:?} should warn once");
        }
    }
}

#[test]
fn every_kept_row_of_the_table_is_kept_verbatim() {
    for line in KEPT {
        for text in [line.to_string(), format!("{line}\n"), format!("{line}\r\n")] {
            let out = filter_jax(&text);
            assert_eq!(out.text, text, "{line:?} should be kept");
            assert!(out.warnings.is_empty(), "{line:?} should not warn");
        }
    }
}

#[test]
fn pinned_mixed_input() {
    let input = "numpy==1.26\njax[tpu]>=0.4.6\nscipy\njaxlib\nkeras\njax==0.4.30  # kn:keep\n";
    let out = filter_jax(input);
    assert_eq!(
        out.text,
        "numpy==1.26\nscipy\nkeras\njax==0.4.30  # kn:keep\n"
    );
    assert_eq!(
        out.warnings,
        vec![
            RequirementsWarning::JaxLineDropped {
                line: 2,
                text: "jax[tpu]>=0.4.6".into(),
                package: "jax".into()
            },
            RequirementsWarning::JaxLineDropped {
                line: 4,
                text: "jaxlib".into(),
                package: "jaxlib".into()
            },
        ]
    );
}

#[test]
fn pinned_comments_and_blanks() {
    assert_eq!(
        filter_jax("# ML deps\nnumpy\n\njax\n# end\n").text,
        "# ML deps\nnumpy\n\n# end\n"
    );
}

#[test]
fn pinned_all_jax_gives_empty() {
    let out = filter_jax("jax\njaxlib\nlibtpu\n");
    assert_eq!(out.text, "");
    assert_eq!(out.warnings.len(), 3);
}

#[test]
fn warning_names_the_package_as_written() {
    let out = filter_jax("numpy\nLibTPU-Nightly>=1\n");
    match &out.warnings[..] {
        [RequirementsWarning::JaxLineDropped { line, package, .. }] => {
            assert_eq!(*line, 2);
            assert_eq!(package, "LibTPU-Nightly");
        }
        other => panic!("unexpected warnings {other:?}"),
    }
    assert!(out.warnings[0].to_string().contains("# kn:keep"));
}

// ------------------------------------------------ bundled mode

#[test]
fn bundled_drops_continuation_lines_of_a_filtered_jax_line() {
    // Kinetic's bundled mode would leave "    --hash=sha256:abc" orphaned.
    let input = "jax==0.4.30 \\\n    --hash=sha256:abc \\\n    --hash=sha256:def\nnumpy==1.26 \\\n    --hash=sha256:123\n";
    let out = prepare(input, RequirementsMode::Bundled, &req_file()).expect("usable");
    assert_eq!(out.text, "numpy==1.26 \\\n    --hash=sha256:123\n");
    assert_eq!(out.warnings.len(), 1);
    assert!(!out.text.contains("sha256:abc"));
}

#[test]
fn bundled_keeps_physical_lines_and_endings() {
    let input = "numpy \\\r\n  --hash=a\r\nscipy";
    let out = prepare(input, RequirementsMode::Bundled, &req_file()).expect("usable");
    assert_eq!(out.text, input);
}

#[test]
fn bundled_refuses_local_paths_too() {
    let err =
        prepare("numpy\n-e .\n", RequirementsMode::Bundled, &req_file()).expect_err("must fail");
    assert!(matches!(
        err,
        RequirementsError::Unusable {
            reason: UnusableReason::EditableLocalPath,
            position: RequirementPosition::Line(2),
            ..
        }
    ));
}

#[test]
fn a_comment_ending_in_backslash_does_not_swallow_the_next_line() {
    // pip reads "# note \" as a comment; the next line is a requirement.
    let out = filter_jax("# note \\\njax\n");
    assert_eq!(out.text, "# note \\\n");
    let out = prepare(
        "# note \\\nnumpy\n",
        RequirementsMode::Prebuilt,
        &req_file(),
    )
    .expect("ok");
    assert_eq!(out.text, "# note \\\nnumpy\n");
}

#[test]
fn kn_keep_on_a_continued_line_keeps_the_whole_group() {
    let input = "jax==0.4.30 \\\n  --hash=sha256:abc  # kn:keep\n";
    assert_eq!(filter_jax(input).text, input);
}

// ------------------------------------------------ continuations

#[test]
fn continuation_joining_examples() {
    assert_eq!(join_continuations("numpy \\"), "numpy\n");
    assert_eq!(join_continuations("x\n\ny"), "x\n\ny\n");
    assert_eq!(join_continuations(""), "");
    assert_eq!(
        join_continuations("a \\\n  b \\\n  c\n"),
        "a   b c\n",
        "leading spaces of middle continuation lines are kept"
    );
    assert_eq!(
        join_continuations("numpy==1 \\\n    --hash=sha256:a\nscipy\n"),
        "numpy==1 --hash=sha256:a\nscipy\n"
    );
}

#[test]
fn prebuilt_output_is_joined_and_filtered() {
    let input = "numpy==1.26 \\\n    --hash=sha256:1\njax==0.4 \\\n    --hash=sha256:2\nscipy";
    let out = prepare(input, RequirementsMode::Prebuilt, &req_file()).expect("usable");
    assert_eq!(out.text, "numpy==1.26 --hash=sha256:1\nscipy\n");
    assert_eq!(
        out.install_text(),
        Some("numpy==1.26 --hash=sha256:1\nscipy\n")
    );
}

#[test]
fn prebuilt_nothing_left_means_nothing_to_install() {
    for input in ["jax\njaxlib\nlibtpu\n", "", "\n\n", "jax\n\n"] {
        let out = prepare(input, RequirementsMode::Prebuilt, &req_file()).expect("usable");
        assert_eq!(out.install_text(), None, "{input:?}");
    }
    let out = prepare(
        "# only a comment\n",
        RequirementsMode::Prebuilt,
        &req_file(),
    )
    .expect("ok");
    assert!(out.install_text().is_some(), "a comment is not blank");
}

// ------------------------------------------------ rejection table

/// (line, our verdict, Kinetic's verdict when it differs)
const REJECTION_TABLE: &[(&str, Option<UnusableReason>)] = &[
    ("-e .", Some(UnusableReason::EditableLocalPath)),
    ("-e ../lib", Some(UnusableReason::EditableLocalPath)),
    ("--editable ./pkg", Some(UnusableReason::EditableLocalPath)),
    ("--editable=./pkg", Some(UnusableReason::EditableLocalPath)),
    ("-e git+https://github.com/org/repo#egg=x", None),
    ("-e hg+https://hg.example.com/repo#egg=x", None),
    ("-e bzr+https://bzr.example.com/repo#egg=x", None),
    ("-e svn+svn://svn.example.com/repo#egg=x", None),
    ("-e http://example.com/pkg.tar.gz", None),
    ("-e https://example.com/pkg.tar.gz", None),
    ("-r base.txt", Some(UnusableReason::NestedRequirementsFile)),
    (
        "--requirement=base.txt",
        Some(UnusableReason::NestedRequirementsFile),
    ),
    ("-c c.txt", Some(UnusableReason::NestedRequirementsFile)),
    (
        "--constraint c.txt",
        Some(UnusableReason::NestedRequirementsFile),
    ),
    ("pkg @ file:///opt/pkg.whl", Some(UnusableReason::FileUrl)),
    ("file:///opt/pkg.whl", Some(UnusableReason::FileUrl)),
    (
        "--find-links file:///opt/wheels",
        Some(UnusableReason::FileUrl),
    ),
    ("./pkg", Some(UnusableReason::RelativePath)),
    ("../pkg", Some(UnusableReason::RelativePath)),
    (".\\pkg", Some(UnusableReason::RelativePath)),
    ("..\\pkg", Some(UnusableReason::RelativePath)),
    (".", Some(UnusableReason::RelativePath)),
    ("..", Some(UnusableReason::RelativePath)),
    ("/opt/pkg", Some(UnusableReason::AbsolutePath)),
    ("pkg @ ./v", Some(UnusableReason::LocalDirectReference)),
    ("pkg @ /opt/v", Some(UnusableReason::LocalDirectReference)),
    ("pkg @ https://example.com/pkg-1.0-py3-none-any.whl", None),
    ("--index-url https://pypi.example.com/simple", None),
    ("--extra-index-url https://pypi.example.com/simple", None),
    (
        "-f https://storage.googleapis.com/jax-releases/libtpu_releases.html",
        None,
    ),
    ("# see ./vendor", None),
    ("numpy==1.26", None),
    ("", None),
];

/// Rows where Kinetic accepts a line that can only fail on the pod; we
/// refuse them (documented in `requirements::usable`).
const CLOSED_GAPS: &[(&str, UnusableReason)] = &[
    ("-rbase.txt", UnusableReason::NestedRequirementsFile),
    ("pkg@./v", UnusableReason::LocalDirectReference),
    ("C:\\x\\y", UnusableReason::AbsolutePath),
    ("-e.", UnusableReason::EditableLocalPath),
    ("--find-links ./wheels", UnusableReason::LocalFindLinks),
];

#[test]
fn every_row_of_the_rejection_table() {
    for (line, expected) in REJECTION_TABLE {
        assert_eq!(unusable_reason(line), *expected, "{line:?}");
    }
}

#[test]
fn gaps_kinetic_leaves_open_are_closed() {
    for (line, expected) in CLOSED_GAPS {
        assert_eq!(unusable_reason(line), Some(*expected), "{line:?}");
    }
}

#[test]
fn remote_nested_files_and_trailing_comments_are_accepted() {
    assert_eq!(unusable_reason("-r https://example.com/base.txt"), None);
    assert_eq!(
        unusable_reason("numpy  # vendored copy in ./vendor, see file://x"),
        None
    );
    assert_eq!(unusable_reason("   "), None);
}

#[test]
fn rejection_error_names_file_line_and_reason() {
    let text = "numpy\n\n--requirement=base.txt\n";
    let err = check_usable(text, &req_file()).expect_err("must fail");
    let msg = err.to_string();
    assert!(msg.contains("/proj/requirements.txt"), "{msg}");
    assert!(msg.contains("line 3"), "{msg}");
    assert!(msg.contains("'--requirement=base.txt'"), "{msg}");
    assert!(msg.contains("nested requirements"), "{msg}");
    assert!(!msg.contains('\n'));
}

#[test]
fn rejection_of_a_continued_line_names_its_first_line() {
    let err = prepare(
        "numpy\npkg \\\n  @ ./v\n",
        RequirementsMode::Prebuilt,
        &req_file(),
    )
    .expect_err("must fail");
    match err {
        RequirementsError::Unusable {
            position,
            line,
            reason,
            ..
        } => {
            assert_eq!(position, RequirementPosition::Line(2));
            assert_eq!(line, "pkg @ ./v");
            assert_eq!(reason, UnusableReason::LocalDirectReference);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn rejection_comes_before_the_jax_filter() {
    // Kinetic's order: join, reject, filter.
    let err = prepare(
        "jax @ ./vendor/jax\n",
        RequirementsMode::Prebuilt,
        &req_file(),
    );
    assert!(err.is_err());
}

// ------------------------------------------------ pyproject

#[test]
fn pyproject_dependencies_are_joined_with_trailing_newline() {
    let text =
        "[project]\nname = \"x\"\ndependencies = [\"numpy>=1.26\", \"jax[tpu]\", \"keras\"]\n";
    let parsed = parse_pyproject(text, &pyproject_file().path).expect("valid");
    assert_eq!(parsed.dependencies, ["numpy>=1.26", "jax[tpu]", "keras"]);
    assert_eq!(parsed.requirements_text(), "numpy>=1.26\njax[tpu]\nkeras\n");
    let read = dependency_text(&pyproject_file(), text).expect("valid");
    assert!(read.warnings.is_empty());
    let prepared = prepare(&read.text, RequirementsMode::Bundled, &read.file).expect("usable");
    assert_eq!(prepared.text, "numpy>=1.26\nkeras\n");
}

#[test]
fn pyproject_without_dependencies_warns_listing_other_sources() {
    let cases: &[(&str, &[IgnoredDependencySource])] = &[
        ("[project]\nname = \"x\"\n", &[]),
        ("[project]\ndependencies = []\n", &[]),
        ("", &[]),
        (
            "[tool.poetry.dependencies]\nnumpy = \"*\"\n",
            &[IgnoredDependencySource::PoetryDependencies],
        ),
        (
            "[dependency-groups]\ndev = [\"pytest\"]\n",
            &[IgnoredDependencySource::DependencyGroups],
        ),
        (
            "[project.optional-dependencies]\ngpu = [\"cupy\"]\n",
            &[IgnoredDependencySource::OptionalDependencies],
        ),
        (
            "[project]\ndynamic = [\"version\", \"dependencies\"]\n",
            &[IgnoredDependencySource::DynamicDependencies],
        ),
        (
            "[project]\ndynamic = [\"dependencies\"]\n[project.optional-dependencies]\na = []\n[dependency-groups]\nd = []\n[tool.poetry.dependencies]\npython = \"^3.11\"\n",
            &[
                IgnoredDependencySource::PoetryDependencies,
                IgnoredDependencySource::DependencyGroups,
                IgnoredDependencySource::OptionalDependencies,
                IgnoredDependencySource::DynamicDependencies,
            ],
        ),
    ];
    for (text, sources) in cases {
        let read = dependency_text(&pyproject_file(), text).expect("valid");
        assert_eq!(read.text, "", "{text:?}");
        assert_eq!(
            read.warnings,
            vec![RequirementsWarning::PyprojectDeclaresNoDependencies {
                path: pyproject_file().path,
                ignored: sources.to_vec(),
            }],
            "{text:?}"
        );
    }
    let warning = &dependency_text(
        &pyproject_file(),
        "[tool.poetry.dependencies]\nnumpy = \"*\"\n",
    )
    .expect("valid")
    .warnings[0];
    let msg = warning.to_string();
    assert!(msg.contains("declares no [project].dependencies"), "{msg}");
    assert!(msg.contains("[tool.poetry.dependencies]"), "{msg}");
}

#[test]
fn invalid_pyproject_is_an_error_naming_the_file() {
    for text in [
        "[project\n",
        "[project]\ndependencies = \"numpy\"\n",
        "[project]\ndependencies = [1]\n",
        "project = 1\n",
    ] {
        let err = dependency_text(&pyproject_file(), text).expect_err("must fail");
        assert!(
            matches!(err, RequirementsError::InvalidPyproject { .. }),
            "{text:?}: {err:?}"
        );
        assert!(err.to_string().contains("/proj/pyproject.toml"));
    }
}

#[test]
fn pyproject_rejection_names_the_dependency_entry() {
    let read = dependency_text(
        &pyproject_file(),
        "[project]\ndependencies = [\"numpy\", \"mylib @ file:///src/mylib\"]\n",
    )
    .expect("valid");
    let err = prepare(&read.text, RequirementsMode::Prebuilt, &read.file).expect_err("must fail");
    assert!(
        err.to_string().contains("[project].dependencies entry 2"),
        "{err}"
    );
}

#[test]
fn requirements_file_text_is_taken_as_is() {
    let read = dependency_text(&req_file(), "numpy\n").expect("ok");
    assert_eq!(read.text, "numpy\n");
    assert!(read.warnings.is_empty());
}

#[test]
fn mode_parses_and_prints() {
    assert_eq!("bundled".parse(), Ok(RequirementsMode::Bundled));
    assert_eq!("prebuilt".parse(), Ok(RequirementsMode::Prebuilt));
    let err = "Bundled"
        .parse::<RequirementsMode>()
        .expect_err("must fail");
    assert!(err.to_string().contains("'Bundled'"));
    assert!(err.to_string().contains("bundled or prebuilt"));
    assert_eq!(RequirementsMode::Prebuilt.to_string(), "prebuilt");
}
