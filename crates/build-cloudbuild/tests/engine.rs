//! The engine resolves images through the Cloud Build builder: bundled
//! images are built from the shipped template and the project's filtered
//! requirements; prebuilt images get `{job_id}/requirements.txt` for the
//! runner to install; custom images ignore requirements with a warning.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kinetic_build_cloudbuild::retry::{Backoff, RetryPolicy};
use kinetic_build_cloudbuild::{CloudBuildConfig, CloudBuildImageBuilder, StaticToken};
use kinetic_core::env::EnvSnapshot;
use kinetic_core::image::DOCKERFILE_TEMPLATE;
use kinetic_core::ports::{GetOptions, ImageMode, ObjectPath, ObjectStore};
use kinetic_core::protocol::{RUNNER_SOURCE, RunnerSpec};
use kinetic_engine::{Engine, EngineSettings, Entrypoint, JobSpec, ProgressEvent, SubmitOptions};
use kinetic_fake_gcp::cloudbuild::{FakeCloudBuild, FakeRoute};
use kinetic_testkit::{FakeBackend, MemoryStore};
use sha2::Digest;

struct World {
    _dir: tempfile::TempDir,
    project: PathBuf,
    fake: FakeCloudBuild,
    jobs: Arc<MemoryStore>,
    engine: Engine,
}

async fn world(requirements: &str) -> World {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let project = home.join("proj");
    std::fs::create_dir_all(project.join(".git")).unwrap();
    std::fs::write(project.join("train.py"), "def main():\n    return 1\n").unwrap();
    std::fs::write(project.join("requirements.txt"), requirements).unwrap();

    let fake = FakeCloudBuild::start().await.unwrap();
    let builds = Arc::new(MemoryStore::new());
    fake.attach_bucket(
        "proj-kn-c1-builds",
        kinetic_fake_gcp_server::build_bucket(builds.clone()),
    );
    let config = CloudBuildConfig::new("proj", "us-central1-a", "c1")
        .with_endpoint(&fake.endpoint())
        .with_poll(
            Backoff::new(Duration::from_millis(2), Duration::from_millis(10)).with_multiplier(1.5),
        )
        .with_retry(RetryPolicy::none());
    let builder =
        CloudBuildImageBuilder::new(config, Arc::new(StaticToken::new("t")), builds).unwrap();
    let jobs = Arc::new(MemoryStore::new());
    let backend = FakeBackend::new("gke", jobs.clone()).with_image(true);
    let mut env = EnvSnapshot::new();
    env.insert("HOME", home.to_string_lossy());
    let engine = Engine::builder()
        .store(jobs.clone())
        .backend(Arc::new(backend))
        .default_backend("gke")
        .image_builder(Arc::new(builder))
        .env_snapshot(env)
        .settings(EngineSettings::default().with_home(&home))
        .build()
        .unwrap();
    World {
        _dir: dir,
        project,
        fake,
        jobs,
        engine,
    }
}

impl World {
    fn spec(&self, image: ImageMode) -> JobSpec {
        let mut spec = JobSpec::new(Entrypoint::parse("train:main").unwrap())
            .working_dir(self.project.clone());
        spec.image = image;
        spec
    }

    async fn submit(&self, image: ImageMode) -> (String, RunnerSpec, Vec<String>) {
        let warnings = Arc::new(Mutex::new(Vec::new()));
        let sink = warnings.clone();
        let options = SubmitOptions::with_progress(Arc::new(move |e: &ProgressEvent| {
            if let ProgressEvent::Warning(w) = e {
                sink.lock().unwrap().push(w.clone());
            }
        }));
        let handle = self
            .engine
            .submit_with(self.spec(image), options)
            .await
            .unwrap();
        let spec = self.read(&format!("{}/spec.json", handle.id())).await;
        let spec: RunnerSpec = serde_json::from_slice(&spec).unwrap();
        let warnings = warnings.lock().unwrap().clone();
        (handle.record().image_uri.clone(), spec, warnings)
    }

    async fn read(&self, path: &str) -> Vec<u8> {
        self.jobs
            .get(&ObjectPath::parse(path).unwrap(), GetOptions::default())
            .await
            .unwrap()
            .to_vec()
    }
}

#[tokio::test]
async fn bundled_images_bake_in_the_filtered_requirements_and_the_real_template() {
    let w = world("numpy==1.26\njax[tpu]>=0.4\nscipy\n").await;
    let (uri, spec, warnings) = w.submit(ImageMode::Bundled).await;
    assert!(
        uri.starts_with("us-docker.pkg.dev/proj/kn-c1/base:cpu-"),
        "{uri}"
    );
    assert_eq!(
        spec.requirements, None,
        "bundled images install nothing at start"
    );
    assert!(
        warnings.iter().any(|w| w.contains("jax[tpu]>=0.4")),
        "the dropped JAX line is reported: {warnings:?}"
    );
    let builds = w.fake.builds();
    assert_eq!(builds.len(), 1);
    let files = &builds[0].files;
    assert_eq!(files["requirements.txt"], "numpy==1.26\nscipy\n");
    assert_eq!(files["kinetic_runner.py"], RUNNER_SOURCE);
    let dockerfile = &files["Dockerfile"];
    assert!(dockerfile.contains("FROM python:3.11-slim\n"));
    assert!(dockerfile.contains("COPY requirements.txt /tmp/requirements.txt\n"));
    // The template in the request is the shipped one: the tag the engine
    // got is the one its inputs hash to.
    let first_line = DOCKERFILE_TEMPLATE.lines().next().unwrap();
    assert!(dockerfile.starts_with(first_line));

    // A second job with the same dependencies reuses the image.
    let (again, _, _) = w.submit(ImageMode::Bundled).await;
    assert_eq!(again, uri);
    assert_eq!(w.fake.builds_created(), 1);
}

#[tokio::test]
async fn prebuilt_images_install_the_requirements_at_start() {
    let w = world("pandas \\\n  >=2\njax\n").await;
    let (uri, spec, _) = w
        .submit(ImageMode::Prebuilt {
            repo: "us-docker.pkg.dev/proj/images".into(),
        })
        .await;
    assert_eq!(
        uri,
        format!(
            "us-docker.pkg.dev/proj/images/base-cpu:{}",
            kinetic_build_cloudbuild::KINETIC_VERSION
        )
    );
    let artifact = spec.requirements.expect("requirements for the runner");
    let path = format!("{}/requirements.txt", spec.job_id);
    assert!(artifact.uri.ends_with(&path), "{}", artifact.uri);
    let text = w.read(&path).await;
    assert_eq!(String::from_utf8_lossy(&text), "pandas >=2\n");
    assert_eq!(artifact.sha256, hex::encode(sha2::Sha256::digest(&text)));
    assert_eq!(
        w.fake.requests(FakeRoute::Any),
        0,
        "no build, no cache check"
    );
}

#[tokio::test]
async fn prebuilt_images_with_nothing_to_install_get_no_requirements() {
    let w = world("jax\n\njaxlib\n").await;
    let (_, spec, _) = w
        .submit(ImageMode::Prebuilt {
            repo: "kinetic".into(),
        })
        .await;
    assert_eq!(spec.requirements, None);
    let listed = w.jobs.list(None).await.unwrap();
    assert!(
        listed
            .iter()
            .all(|m| m.path.file_name() != "requirements.txt")
    );
}

#[tokio::test]
async fn custom_images_ignore_requirements_with_a_warning() {
    let w = world("numpy\n").await;
    let (uri, spec, warnings) = w
        .submit(ImageMode::Custom {
            uri: "example.com/team/img:7".into(),
        })
        .await;
    assert_eq!(uri, "example.com/team/img:7");
    assert_eq!(spec.requirements, None);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("requirements.txt are ignored")
                && w.contains("example.com/team/img:7")),
        "{warnings:?}"
    );
    assert_eq!(w.fake.requests(FakeRoute::Any), 0);
}

#[tokio::test]
async fn an_unusable_requirement_fails_the_submit_before_any_build() {
    let w = world("-e .\n").await;
    let err = w
        .engine
        .submit(w.spec(ImageMode::Bundled))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Unusable requirement"), "{err}");
    assert_eq!(w.fake.builds_created(), 0);
    assert!(
        w.jobs.list(None).await.unwrap().is_empty(),
        "nothing left behind"
    );
}
