//! The fake Cloud Build's image environments: a fresh venv (never the
//! host's packages) with the recipe's files and `ENV`, cached by image; a
//! requirement the wheelhouse lacks fails the build with pip's words.

use std::collections::BTreeMap;
use std::process::Command;

mod support;

use kinetic_fake_gcp::images::{ImageBuilder, ImageEnvironments};

const DOCKERFILE: &str = "FROM python:3.11-slim\nRUN uv pip install --system jax keras cloudpickle\n\
WORKDIR /app\nCOPY kinetic_runner.py /app/kinetic_runner.py\nENV KERAS_BACKEND=jax PYTHONUNBUFFERED=1\n";

fn images(dir: &std::path::Path) -> ImageEnvironments {
    let wheelhouse = dir.join("wheelhouse");
    std::fs::create_dir_all(&wheelhouse).unwrap();
    ImageEnvironments::new(Some(ImageBuilder {
        base_python: "python3".into(),
        wheelhouse: Some(wheelhouse),
        cache: dir.join("cache"),
        packages: support::profile().image_packages,
    }))
}

#[test]
fn a_built_image_is_a_fresh_venv_with_the_recipes_files() {
    let dir = tempfile::tempdir().unwrap();
    let images = images(dir.path());
    let image = "us-docker.pkg.dev/p/kn-c/base:cpu-0123456789ab";
    let files = BTreeMap::from([
        ("Dockerfile".to_owned(), DOCKERFILE.to_owned()),
        (
            "kinetic_runner.py".to_owned(),
            "print('runner')\n".to_owned(),
        ),
    ]);
    let log = images.build(image, &files).unwrap();
    // Not in this wheelhouse: left out, and said so.
    assert!(
        log.contains("left out") && log.contains("jax keras cloudpickle"),
        "{log}"
    );
    let env = images.get(image).expect("the registry holds it");
    let runner = env.file("/app/kinetic_runner.py").expect("COPY");
    assert_eq!(
        std::fs::read_to_string(runner).unwrap(),
        "print('runner')\n"
    );
    assert_eq!(
        env.env.get("KERAS_BACKEND").map(String::as_str),
        Some("jax")
    );
    let out = Command::new(&env.python)
        .args([
            "-c",
            "import sys; print(sys.prefix != sys.base_prefix, sys.flags.no_site)",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "True 0");
    // A second build of the same image reuses the environment.
    let again = images.build(image, &files).unwrap();
    assert!(again.contains("cached"), "{again}");
}

#[test]
fn a_requirement_the_wheelhouse_lacks_fails_the_build() {
    let dir = tempfile::tempdir().unwrap();
    let images = images(dir.path());
    let image = "us-docker.pkg.dev/p/kn-c/base:cpu-aaaaaaaaaaaa";
    let files = BTreeMap::from([
        ("Dockerfile".to_owned(), DOCKERFILE.to_owned()),
        (
            "requirements.txt".to_owned(),
            "no-such-package-anywhere\n".to_owned(),
        ),
    ]);
    let err = images.build(image, &files).unwrap_err();
    assert!(err.contains("no-such-package-anywhere"), "{err}");
    assert_eq!(images.get(image), None);
}

/// Without a wheelhouse there is no package index at all: the image's
/// packages are left out (and the log says why), and a requirement fails
/// the build as a build without network would; no image is registered.
#[test]
fn without_a_wheelhouse_nothing_can_be_installed() {
    let dir = tempfile::tempdir().unwrap();
    let images = ImageEnvironments::new(Some(ImageBuilder {
        base_python: "python3".into(),
        wheelhouse: None,
        cache: dir.path().join("cache"),
        packages: support::profile().image_packages,
    }));
    assert_eq!(images.wheelhouse(), None);
    let image = "us-docker.pkg.dev/p/kn-c/base:cpu-bbbbbbbbbbbb";
    let files = BTreeMap::from([
        ("Dockerfile".to_owned(), DOCKERFILE.to_owned()),
        ("requirements.txt".to_owned(), "six==1.16.0\n".to_owned()),
    ]);
    let err = images.build(image, &files).unwrap_err();
    assert!(
        err.contains(
            "left out (no wheelhouse: the fake has no package index): jax keras cloudpickle"
        ),
        "{err}"
    );
    assert!(err.contains("six==1.16.0"), "{err}");
    assert_eq!(images.get(image), None);
}
