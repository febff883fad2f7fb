//! `kinetic image resolve` and `kinetic build-image` through the real
//! binary, against `kinetic-fake-gcp`'s fake Cloud Build and Artifact Registry.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Arc;

use kinetic_fake_gcp::cloudbuild::{BuildSchedule, FakeCloudBuild, FakeRoute};
use kinetic_store_gcs::GcsStore;
use serde_json::Value;

const TOKEN: &str = "cli-test-token";

struct World {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    code: PathBuf,
}

impl World {
    fn new(requirements: &str) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().canonicalize().unwrap();
        let code = home.join("proj");
        std::fs::create_dir_all(code.join(".git")).unwrap();
        std::fs::write(code.join("requirements.txt"), requirements).unwrap();
        Self {
            _tmp: tmp,
            home,
            code,
        }
    }

    fn command(&self, args: &[&str], fake: Option<&FakeCloudBuild>) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_kinetic"));
        c.args(args)
            .env("HOME", &self.home)
            .current_dir(&self.home)
            .env_remove("KINETIC_PROFILE")
            .env_remove("KINETIC_PROJECT")
            .env_remove("KINETIC_ZONE")
            .env_remove("KINETIC_CLUSTER")
            .env_remove("GOOGLE_APPLICATION_CREDENTIALS");
        if let Some(fake) = fake {
            c.env("KINETIC_PROJECT", "proj")
                .env("KINETIC_CLUSTER", "c1")
                .env("KINETIC_ZONE", "us-central1-a")
                .env("KINETIC_CLOUDBUILD_ENDPOINT", fake.endpoint())
                .env("KINETIC_ARTIFACTREGISTRY_ENDPOINT", fake.endpoint())
                .env("KINETIC_ACCESS_TOKEN", TOKEN);
        }
        c
    }
}

/// Run the binary off the runtime's threads, so the fake keeps serving.
async fn run(mut command: Command) -> Output {
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolve_prints_the_tag_the_cache_state_and_the_inputs() {
    let w = World::new("numpy==1.26\njax\n");
    let fake = FakeCloudBuild::start().await.unwrap();
    fake.require_token(TOKEN);
    let code = w.code.to_str().unwrap().to_owned();

    let offline = run(w.command(&["image", "resolve", &code, "--json"], None)).await;
    assert!(offline.status.success(), "{offline:?}");
    let offline = json(&offline);
    assert_eq!(offline["image"], Value::Null);
    assert_eq!(offline["cached"], Value::Null);
    let tag = offline["tag"].as_str().unwrap().to_owned();
    assert!(tag.starts_with("cpu-") && tag.len() == 16, "{tag}");

    let miss = run(w.command(&["image", "resolve", &code, "--json"], Some(&fake))).await;
    assert!(miss.status.success(), "{miss:?}");
    let miss = json(&miss);
    let image = format!("us-docker.pkg.dev/proj/kn-c1/base:{tag}");
    assert_eq!(
        miss["image"],
        image.as_str(),
        "same tag with or without a project"
    );
    assert_eq!(miss["cached"], false);
    assert_eq!(miss["requirements"], "numpy==1.26\n");
    assert_eq!(miss["inputs"]["requirements"], "numpy==1.26\n");
    assert_eq!(miss["inputs"]["base_image"], "python:3.11-slim");
    assert!(miss["warnings"][0].as_str().unwrap().contains("'jax'"));

    assert!(fake.add_image(&image));
    let hit = run(w.command(&["image", "resolve", &code], Some(&fake))).await;
    let text = String::from_utf8_lossy(&hit.stdout);
    assert!(hit.status.success(), "{hit:?}");
    assert!(text.contains(&format!("Image:   {image}\n")), "{text}");
    assert!(text.contains("Cached:  yes"), "{text}");
    assert!(text.contains("dependency file   "), "{text}");
    assert!(
        text.contains("Requirements baked in:\n  numpy==1.26\n"),
        "{text}"
    );
    assert_eq!(fake.requests(FakeRoute::GetTag), 2);
    assert_eq!(fake.builds_created(), 0, "resolve never builds");

    // Another accelerator, another image.
    let tpu = run(w.command(
        &[
            "image",
            "resolve",
            &code,
            "--json",
            "--accelerator",
            "v5e-4",
        ],
        Some(&fake),
    ))
    .await;
    assert!(json(&tpu)["tag"].as_str().unwrap().starts_with("tpu-"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolve_fails_when_the_registry_refuses() {
    let w = World::new("numpy\n");
    let fake = FakeCloudBuild::start().await.unwrap();
    fake.fail_next(FakeRoute::GetTag, 403, 1);
    let code = w.code.to_str().unwrap().to_owned();
    let out = run(w.command(&["image", "resolve", &code], Some(&fake))).await;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("artifactregistry.tags.get"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn build_image_publishes_each_category() {
    let w = World::new("");
    let fake = FakeCloudBuild::start().await.unwrap();
    fake.require_token(TOKEN);
    fake.set_schedule(BuildSchedule::success().with_polls(0, 0));
    let bucket = w.home.join("builds-bucket");
    let store = GcsStore::local_dir(&bucket).unwrap();
    fake.attach_bucket(
        "proj-kn-c1-builds",
        kinetic_fake_gcp_server::build_bucket(Arc::new(store)),
    );
    let mut command = w.command(
        &[
            "build-image",
            "--repo",
            "us-docker.pkg.dev/proj/images",
            "--category",
            "tpu",
            "--category",
            "cpu",
            "--tag",
            "v9",
            "--json",
        ],
        Some(&fake),
    );
    command.env(
        "KINETIC_BUILDS_STORE_URL",
        format!("file://{}", bucket.display()),
    );
    let out = run(command).await;
    assert!(out.status.success(), "{out:?}");
    let v = json(&out);
    let images: Vec<&str> = v["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["image"].as_str().unwrap())
        .collect();
    assert_eq!(
        images,
        [
            "us-docker.pkg.dev/proj/images/base-cpu:v9",
            "us-docker.pkg.dev/proj/images/base-tpu:v9"
        ]
    );
    assert!(
        v["images"][0]["digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    for image in images {
        assert!(fake.has_image(image), "{image}");
    }
    assert_eq!(fake.builds_created(), 2);
    let tpu = fake
        .builds()
        .into_iter()
        .find(|b| b.images() == ["us-docker.pkg.dev/proj/images/base-tpu:v9"])
        .unwrap();
    assert!(tpu.dockerfile().unwrap().contains("libtpu_releases.html"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn build_image_needs_a_project_and_a_repo() {
    let w = World::new("");
    let out = run(w.command(&["build-image", "--repo", "us-docker.pkg.dev/p/r"], None)).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--project"));
    let out = run(w.command(&["build-image", "--repo", "x/y:1"], None)).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("without tag"));
}
