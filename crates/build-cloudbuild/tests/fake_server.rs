//! The builder against `kinetic-fake-gcp`'s fake Cloud Build and Artifact
//! Registry on 127.0.0.1: conformance, cache hits, single flight, failed
//! builds, retries, permission errors, timeouts, prebuilt publishing.

use std::sync::Arc;
use std::time::Duration;

use kinetic_build_cloudbuild::retry::{Backoff, RetryPolicy};
use kinetic_build_cloudbuild::{
    CloudBuildConfig, CloudBuildImageBuilder, PublishRequest, StaticToken,
};
use kinetic_core::image::DOCKERFILE_TEMPLATE;
use kinetic_core::ports::{
    BuildError, GetOptions, ImageBuilder, ImageMode, ImageRequest, ObjectPath, ObjectStore,
};
use kinetic_core::protocol::RUNNER_SOURCE;
use kinetic_fake_gcp::cloudbuild::{BuildSchedule, FakeCloudBuild, FakeRoute};
use kinetic_testkit::conformance::image_builder::ImageBuilderHarness;
use kinetic_testkit::{MemoryStore, conformance};

const TOKEN: &str = "test-token";

struct World {
    fake: FakeCloudBuild,
    store: Arc<MemoryStore>,
    builder: CloudBuildImageBuilder,
}

fn config(fake: &FakeCloudBuild) -> CloudBuildConfig {
    CloudBuildConfig::new("proj", "us-central1-a", "c1")
        .with_endpoint(&fake.endpoint())
        .with_poll(
            Backoff::new(Duration::from_millis(2), Duration::from_millis(10)).with_multiplier(1.5),
        )
        .with_retry(RetryPolicy::new(
            4,
            Backoff::new(Duration::from_millis(1), Duration::from_millis(5)),
        ))
        .with_build_timeout(Duration::from_secs(20))
}

async fn world_with(edit: impl FnOnce(CloudBuildConfig) -> CloudBuildConfig) -> World {
    let fake = FakeCloudBuild::start().await.unwrap();
    fake.require_token(TOKEN);
    let store = Arc::new(MemoryStore::new());
    fake.attach_bucket(
        "proj-kn-c1-builds",
        kinetic_fake_gcp_server::build_bucket(store.clone()),
    );
    let builder = CloudBuildImageBuilder::new(
        edit(config(&fake)),
        Arc::new(StaticToken::new(TOKEN)),
        store.clone(),
    )
    .unwrap();
    World {
        fake,
        store,
        builder,
    }
}

async fn world() -> World {
    world_with(|c| c).await
}

fn request(requirements: Option<&str>) -> ImageRequest {
    ImageRequest::new(
        ImageMode::Bundled,
        "python:3.11-slim".into(),
        "cpu".into(),
        requirements.map(str::to_owned),
        RUNNER_SOURCE.into(),
        DOCKERFILE_TEMPLATE.into(),
    )
}

struct Harness(World);

impl ImageBuilderHarness for Harness {
    fn builder(&self) -> Arc<dyn ImageBuilder> {
        Arc::new(self.0.builder.clone())
    }

    fn builds(&self) -> u64 {
        self.0.fake.builds_created() as u64
    }
}

/// The suite's harness: builds that poll a few times before they succeed.
async fn conformance_harness() -> Harness {
    let w = world().await;
    w.fake
        .set_schedule(BuildSchedule::success().with_polls(1, 2));
    Harness(w)
}

mod conformance_over_the_fake_server {
    kinetic_testkit::image_builder_conformance_tests! {
        #[tokio::test]
        harness = super::conformance_harness().await;
        skips = [
            "a_builder_that_cannot_build_never_builds",
            "requirements_it_cannot_bake_in_are_refused",
        ];
    }
}

#[tokio::test]
async fn over_the_whole_suite_the_builder_starts_what_the_server_creates() {
    let h = conformance_harness().await;
    conformance::image_builder::run(&h).await;
    assert_eq!(
        h.0.builder.builds_started(),
        h.0.fake.builds_created() as u64
    );
}

#[tokio::test]
async fn a_miss_uploads_the_context_builds_and_pushes() {
    let w = world().await;
    let req = request(Some("numpy==1.26\n"));
    let expected = w.builder.bundled_image(&req).unwrap();
    assert!(
        expected
            .uri
            .starts_with("us-docker.pkg.dev/proj/kn-c1/base:cpu-")
    );
    let image = w.builder.resolve(&req).await.unwrap();
    assert_eq!(image.uri, expected.uri);
    assert!(!image.cached);
    assert!(w.fake.has_image(&image.uri));
    assert_eq!(w.fake.tags(), vec![expected.tag_resource.clone()]);

    let builds = w.fake.builds();
    assert_eq!(builds.len(), 1);
    let build = &builds[0];
    assert_eq!(build.status, "SUCCESS");
    assert_eq!(build.location, "global");
    let body = &build.request;
    assert_eq!(body["images"][0], image.uri.as_str());
    assert_eq!(
        body["serviceAccount"],
        "projects/proj/serviceAccounts/kn-c1-builds@proj.iam.gserviceaccount.com"
    );
    assert_eq!(
        body["source"]["storageSource"]["bucket"],
        "proj-kn-c1-builds"
    );
    let object = body["source"]["storageSource"]["object"].as_str().unwrap();
    assert!(
        object.starts_with("source-") && object.ends_with(".tar.gz"),
        "{object}"
    );
    // The context the build fetched: Dockerfile, runner, requirements.
    assert_eq!(
        build.files.keys().collect::<Vec<_>>(),
        ["Dockerfile", "kinetic_runner.py", "requirements.txt"]
    );
    assert_eq!(build.files["requirements.txt"], "numpy==1.26\n");
    assert_eq!(build.files["kinetic_runner.py"], RUNNER_SOURCE);
    let dockerfile = build.dockerfile().unwrap();
    assert!(
        dockerfile.starts_with("# Job image") && dockerfile.contains("FROM python:3.11-slim\n")
    );
    assert!(dockerfile.contains("COPY requirements.txt /tmp/requirements.txt\n"));
    assert!(
        dockerfile.contains(
            "RUN uv pip install --system jax keras cloudpickle -r /tmp/requirements.txt\n"
        )
    );
    // Every call carried the token (the fake refuses others).
    assert_eq!(w.fake.requests(FakeRoute::GetTag), 1);
}

#[tokio::test]
async fn a_cache_hit_makes_no_build() {
    let w = world().await;
    let req = request(Some("pandas\n"));
    let image = w.builder.bundled_image(&req).unwrap();
    assert!(!w.builder.is_cached(&image).await.unwrap());
    assert!(w.fake.add_image(&image.uri));
    assert!(w.builder.is_cached(&image).await.unwrap());
    let resolved = w.builder.resolve(&req).await.unwrap();
    assert_eq!(resolved.uri, image.uri);
    assert!(resolved.cached);
    assert_eq!(w.fake.builds_created(), 0);
    assert_eq!(w.fake.requests(FakeRoute::CreateBuild), 0);
    assert!(
        w.store.list(None).await.unwrap().is_empty(),
        "no context is uploaded on a hit"
    );
}

#[tokio::test]
async fn concurrent_submits_of_one_missing_image_start_one_build() {
    let w = world().await;
    w.fake
        .set_schedule(BuildSchedule::success().with_polls(2, 3));
    let req = request(Some("scipy\n"));
    let results = futures_util::future::join_all((0..8).map(|_| w.builder.resolve(&req))).await;
    let uris: Vec<String> = results.into_iter().map(|r| r.unwrap().uri).collect();
    assert!(uris.windows(2).all(|p| p[0] == p[1]));
    assert_eq!(w.fake.builds_created(), 1);
    assert_eq!(w.fake.requests(FakeRoute::GetTag), 1, "one cache check too");
    // The next resolve is a plain cache hit.
    assert!(w.builder.resolve(&req).await.unwrap().cached);
    assert_eq!(w.fake.builds_created(), 1);
}

#[tokio::test]
async fn concurrent_waiters_share_a_failure_instead_of_rebuilding() {
    let w = world().await;
    w.fake.set_schedule(
        BuildSchedule::failure("Build step 0 failed", "Step #0: boom\nERROR\n").with_polls(1, 1),
    );
    let req = request(Some("broken\n"));
    let results = futures_util::future::join_all((0..3).map(|_| w.builder.resolve(&req))).await;
    for r in results {
        assert!(matches!(r, Err(BuildError::BuildFailed { .. })), "{r:?}");
    }
    assert_eq!(w.fake.builds_created(), 1);
}

#[tokio::test]
async fn a_failed_build_reports_its_log_url_and_log_tail() {
    let w = world_with(|mut c| {
        c.log_tail_lines = 3;
        c
    })
    .await;
    let log = (1..=50)
        .map(|i| format!("Step #0: line {i}"))
        .chain(["ERROR: pip install failed: no matching distribution for nopkg==9".to_owned()])
        .collect::<Vec<_>>()
        .join("\n");
    w.fake.schedule_next(BuildSchedule::failure(
        "Build step 0 \"gcr.io/cloud-builders/docker\" failed: step exited with non-zero status: 1",
        &log,
    ));
    let err = w
        .builder
        .resolve(&request(Some("nopkg==9\n")))
        .await
        .unwrap_err();
    let BuildError::BuildFailed {
        build_id,
        status,
        log_url,
        log_tail,
    } = &err
    else {
        panic!("expected BuildFailed, got {err:?}");
    };
    let id = &w.fake.builds()[0].id;
    assert_eq!(build_id, id);
    assert!(status.starts_with("FAILURE (Build step 0"), "{status}");
    assert!(
        log_url.contains(id) && log_url.contains("project=proj"),
        "{log_url}"
    );
    assert_eq!(
        log_tail,
        "Step #0: line 49\nStep #0: line 50\nERROR: pip install failed: no matching distribution for nopkg==9"
    );
    let text = err.to_string();
    assert!(text.contains(id), "{text}");
    assert!(text.contains(log_url), "{text}");
    assert!(
        text.contains("no matching distribution for nopkg==9"),
        "{text}"
    );
    assert!(!err.is_retryable());
    // The log is where the build wrote it, in the builds bucket.
    let path = ObjectPath::parse(format!("build-logs/log-{id}.txt")).unwrap();
    assert!(w.store.get(&path, GetOptions::default()).await.is_ok());
    // Nothing was pushed.
    assert!(w.fake.tags().is_empty());
}

#[tokio::test]
async fn overload_and_server_errors_are_retried() {
    let w = world().await;
    w.fake.fail_next(FakeRoute::GetTag, 503, 1);
    w.fake.fail_next(FakeRoute::CreateBuild, 429, 2);
    w.fake.fail_next(FakeRoute::GetBuild, 500, 1);
    let image = w.builder.resolve(&request(Some("retry\n"))).await.unwrap();
    assert!(!image.cached);
    assert_eq!(w.fake.requests(FakeRoute::GetTag), 2);
    assert_eq!(w.fake.requests(FakeRoute::CreateBuild), 3);
    assert_eq!(w.fake.builds_created(), 1);
}

#[tokio::test]
async fn retries_end_with_an_unavailable_error() {
    let w = world().await;
    w.fake.fail_next(FakeRoute::CreateBuild, 503, 100);
    let err = w
        .builder
        .resolve(&request(Some("down\n")))
        .await
        .unwrap_err();
    assert!(err.is_retryable(), "{err:?}");
    assert!(err.is_retried(), "the client's retries are spent: {err:?}");
    assert!(err.to_string().contains("after 4 attempt(s)"), "{err}");
    assert_eq!(w.fake.requests(FakeRoute::CreateBuild), 4);
}

#[tokio::test]
async fn a_cache_check_that_keeps_failing_still_builds() {
    let w = world().await;
    w.fake.fail_next(FakeRoute::GetTag, 500, 100);
    let image = w
        .builder
        .resolve(&request(Some("nocache\n")))
        .await
        .unwrap();
    assert!(!image.cached);
    assert_eq!(w.fake.builds_created(), 1);
}

#[tokio::test]
async fn forbidden_calls_name_the_missing_permission_and_are_not_retried() {
    let w = world().await;
    w.fake.fail_next(FakeRoute::CreateBuild, 403, 1);
    let err = w
        .builder
        .resolve(&request(Some("perm\n")))
        .await
        .unwrap_err();
    assert!(
        matches!(err, BuildError::PermissionDenied { .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("cloudbuild.builds.create"), "{text}");
    assert!(
        text.contains("kn-c1-builds@proj.iam.gserviceaccount.com"),
        "{text}"
    );
    assert_eq!(w.fake.requests(FakeRoute::CreateBuild), 1);

    w.fake.fail_next(FakeRoute::GetTag, 403, 1);
    let err = w
        .builder
        .resolve(&request(Some("perm2\n")))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("artifactregistry.tags.get"),
        "{err}"
    );
    assert_eq!(
        w.fake.builds_created(),
        0,
        "no build without the cache check"
    );
}

#[tokio::test]
async fn a_disabled_api_says_to_enable_it() {
    let w = world().await;
    w.fake.fail_next_with(
        FakeRoute::CreateBuild,
        403,
        "Cloud Build API has not been used in project proj before or it is disabled.",
        Some("SERVICE_DISABLED"),
        1,
    );
    let err = w
        .builder
        .resolve(&request(Some("api\n")))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("enable the Cloud Build API"), "{text}");
    assert!(
        text.contains("gcloud services enable cloudbuild.googleapis.com --project proj"),
        "{text}"
    );
}

#[tokio::test]
async fn a_refused_token_says_to_refresh_credentials() {
    let fake = FakeCloudBuild::start().await.unwrap();
    fake.require_token("the-right-one");
    let builder = CloudBuildImageBuilder::new(
        config(&fake),
        Arc::new(StaticToken::new("a-wrong-one")),
        Arc::new(MemoryStore::new()),
    )
    .unwrap();
    let err = builder.resolve(&request(Some("x\n"))).await.unwrap_err();
    assert!(
        matches!(err, BuildError::PermissionDenied { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("gcloud auth application-default login"),
        "{err}"
    );
    assert!(
        !err.to_string().contains("a-wrong-one"),
        "no token in errors"
    );
}

#[tokio::test]
async fn a_build_that_never_ends_times_out() {
    let w = world_with(|c| c.with_build_timeout(Duration::from_millis(150))).await;
    w.fake.set_schedule(BuildSchedule::never_finishes());
    let err = w
        .builder
        .resolve(&request(Some("slow\n")))
        .await
        .unwrap_err();
    let BuildError::Timeout { build_id, .. } = &err else {
        panic!("expected a timeout, got {err:?}");
    };
    assert_eq!(build_id, &w.fake.builds()[0].id);
    assert!(w.fake.requests(FakeRoute::GetBuild) >= 2, "it polled");
    assert_eq!(w.fake.builds()[0].request["timeout"], "1s");
}

#[tokio::test]
async fn a_missing_source_fails_the_build() {
    // The builds bucket the fake reads from is not where the builder wrote.
    let fake = FakeCloudBuild::start().await.unwrap();
    fake.attach_bucket(
        "proj-kn-c1-builds",
        kinetic_fake_gcp_server::build_bucket(Arc::new(MemoryStore::new())),
    );
    let builder = CloudBuildImageBuilder::new(
        config(&fake),
        Arc::new(StaticToken::new(TOKEN)),
        Arc::new(MemoryStore::new()),
    )
    .unwrap();
    let err = builder.resolve(&request(Some("y\n"))).await.unwrap_err();
    assert!(err.to_string().contains("cannot fetch the source"), "{err}");
    assert!(
        err.to_string()
            .contains("no log at gs://proj-kn-c1-builds/build-logs/log-"),
        "{err}"
    );
}

#[tokio::test]
async fn prebuilt_and_custom_images_make_no_call() {
    let w = world().await;
    let mut req = request(Some("numpy\n"));
    req.mode = ImageMode::Prebuilt {
        repo: "us-docker.pkg.dev/proj/images/".into(),
    };
    let image = w.builder.resolve(&req).await.unwrap();
    assert_eq!(
        image.uri,
        format!(
            "us-docker.pkg.dev/proj/images/base-cpu:{}",
            kinetic_build_cloudbuild::KINETIC_VERSION
        )
    );
    req.mode = ImageMode::Custom {
        uri: "example.com/me/img:1".into(),
    };
    assert_eq!(
        w.builder.resolve(&req).await.unwrap().uri,
        "example.com/me/img:1"
    );
    req.category = "fpga".into();
    req.mode = ImageMode::Prebuilt {
        repo: "kinetic".into(),
    };
    let err = w.builder.resolve(&req).await.unwrap_err();
    assert!(err.to_string().contains("'fpga'"), "{err}");
    assert_eq!(w.fake.requests(FakeRoute::Any), 0);
}

#[tokio::test]
async fn blank_requirements_share_the_no_requirements_image() {
    let w = world().await;
    let a = w.builder.bundled_image(&request(None)).unwrap();
    let b = w.builder.bundled_image(&request(Some(" \n"))).unwrap();
    assert_eq!(a.uri, b.uri);
    w.builder.resolve(&request(Some("\n"))).await.unwrap();
    let build = &w.fake.builds()[0];
    assert!(!build.files.contains_key("requirements.txt"));
    assert!(!build.dockerfile().unwrap().contains("requirements.txt"));
}

#[tokio::test]
async fn publishing_prebuilt_base_images() {
    let w = world().await;
    let ar = PublishRequest::new(
        "us-docker.pkg.dev/proj/images",
        "gpu",
        "0.1.0",
        "python:3.12-slim",
    );
    let hub = PublishRequest::new("kinetic", "tpu", "0.1.0", "python:3.12-slim")
        .with_dockerfile("FROM scratch\n".into());
    let (a, b) = futures_util::future::join(w.builder.publish(&ar), w.builder.publish(&hub)).await;
    let a = a.unwrap();
    let b = b.unwrap();
    assert_eq!(a.image, "us-docker.pkg.dev/proj/images/base-gpu:0.1.0");
    assert!(
        a.digest
            .as_deref()
            .is_some_and(|d| d.starts_with("sha256:"))
    );
    assert_eq!(b.image, "kinetic/base-tpu:0.1.0");
    assert!(w.fake.has_image(&a.image) && w.fake.has_image(&b.image));
    let builds = w.fake.builds();
    let gpu = builds
        .iter()
        .find(|b| b.images() == [a.image.clone()])
        .unwrap();
    let dockerfile = gpu.dockerfile().unwrap();
    assert!(dockerfile.contains("FROM python:3.12-slim\n"));
    assert!(dockerfile.contains("'jax[cuda12]'") && !dockerfile.contains("requirements.txt"));
    let tpu = builds
        .iter()
        .find(|x| x.images() == [b.image.clone()])
        .unwrap();
    assert_eq!(tpu.dockerfile(), Some("FROM scratch\n"));
    assert!(tpu.request["availableSecrets"]["secretManager"].is_array());
}
