//! Golden tests: the Dockerfiles rendered from the shipped template and the
//! Cloud Build request bodies, byte for byte. `KINETIC_UPDATE_GOLDEN=1`
//! rewrites the files (then review the diff).

use std::path::PathBuf;
use std::time::Duration;

use kinetic_build_cloudbuild::dockerfile::{DockerfileInputs, render_dockerfile};
use kinetic_build_cloudbuild::request::{BuildRequestInputs, build_request_body};
use kinetic_core::image::DOCKERFILE_TEMPLATE;

fn check(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("KINETIC_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with KINETIC_UPDATE_GOLDEN=1)", path.display()));
    assert_eq!(actual, expected, "{name} differs from its golden file");
}

fn dockerfile(category: &str, with_requirements: bool) -> String {
    render_dockerfile(&DockerfileInputs {
        template: DOCKERFILE_TEMPLATE,
        base_image: "python:3.11-slim",
        category,
        with_requirements,
    })
    .unwrap()
}

#[test]
fn dockerfile_cpu_without_requirements() {
    check("Dockerfile.cpu", &dockerfile("cpu", false));
}

#[test]
fn dockerfile_tpu_with_requirements() {
    check("Dockerfile.tpu-requirements", &dockerfile("tpu", true));
}

#[test]
fn dockerfile_gpu_with_requirements() {
    check("Dockerfile.gpu-requirements", &dockerfile("gpu", true));
}

#[test]
fn every_placeholder_of_the_template_is_filled() {
    for category in ["cpu", "gpu", "tpu"] {
        for reqs in [false, true] {
            let d = dockerfile(category, reqs);
            for placeholder in ["$base_image", "$requirements_copy", "$install_command"] {
                assert!(!d.contains(placeholder), "{placeholder} left in:\n{d}");
            }
            assert!(d.contains("COPY kinetic_runner.py /app/kinetic_runner.py"));
            assert_eq!(d.contains("COPY requirements.txt"), reqs);
        }
    }
}

fn body(image: &str) -> String {
    let tags = vec!["kinetic".to_owned(), "kinetic-cpu".to_owned()];
    let value = build_request_body(&BuildRequestInputs {
        project: "my-proj",
        image_uri: image,
        source_bucket: "my-proj-kn-c1-builds",
        source_object: "source-1700000000-0a1b2c3d.tar.gz",
        service_account: "kn-c1-builds@my-proj.iam.gserviceaccount.com",
        logs_bucket: "gs://my-proj-kn-c1-builds/build-logs",
        timeout: Duration::from_secs(1200),
        tags: &tags,
    });
    serde_json::to_string_pretty(&value).unwrap() + "\n"
}

#[test]
fn build_request_for_artifact_registry() {
    check(
        "build-request.artifact-registry.json",
        &body("us-docker.pkg.dev/my-proj/kn-c1/base:cpu-0123456789ab"),
    );
}

#[test]
fn build_request_for_docker_hub() {
    check(
        "build-request.docker-hub.json",
        &body("kinetic/base-cpu:0.1.0"),
    );
}
