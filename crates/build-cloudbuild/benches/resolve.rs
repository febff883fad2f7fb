//! Figures of the image builder on this machine: hashing the tag inputs,
//! packing the build context, and resolving against the loopback fake
//! (a cache hit; many equal submits at once). Prints; asserts nothing
//! about time.
//!
//! `cargo bench -p kinetic-build-cloudbuild --bench resolve`

use std::sync::Arc;
use std::time::{Duration, Instant};

use kinetic_build_cloudbuild::dockerfile::{BuildContext, DockerfileInputs, render_dockerfile};
use kinetic_build_cloudbuild::retry::{Backoff, RetryPolicy};
use kinetic_build_cloudbuild::{CloudBuildConfig, CloudBuildImageBuilder, StaticToken};
use kinetic_core::image::{DOCKERFILE_TEMPLATE, ImageTagInputs};
use kinetic_core::ports::{ImageBuilder, ImageMode, ImageRequest};
use kinetic_core::protocol::RUNNER_SOURCE;
use kinetic_fake_gcp::cloudbuild::{BuildSchedule, FakeCloudBuild};
use kinetic_testkit::MemoryStore;

fn requirements(lines: usize) -> String {
    (0..lines)
        .map(|i| format!("package-{i}>=1.{i}\n"))
        .collect()
}

fn per_call(label: &str, n: u32, mut f: impl FnMut()) {
    let start = Instant::now();
    for _ in 0..n {
        f();
    }
    let each = start.elapsed() / n;
    println!("{label:<48} {each:>12.2?} per call ({n} calls)");
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn request(reqs: &str) -> ImageRequest {
    ImageRequest::new(
        ImageMode::Bundled,
        "python:3.11-slim".into(),
        "tpu".into(),
        Some(reqs.to_owned()),
        RUNNER_SOURCE.into(),
        DOCKERFILE_TEMPLATE.into(),
    )
}

fn main() {
    let reqs = requirements(200);
    println!(
        "runner {} bytes, template {} bytes, requirements 200 lines ({} bytes)",
        RUNNER_SOURCE.len(),
        DOCKERFILE_TEMPLATE.len(),
        reqs.len()
    );
    let inputs = ImageTagInputs {
        base_image: "python:3.11-slim".into(),
        category: "tpu".into(),
        kinetic_version: "0.1.0".into(),
        requirements: Some(reqs.clone()),
        runner_source: RUNNER_SOURCE.into(),
        dockerfile_template: DOCKERFILE_TEMPLATE.into(),
    };
    per_call("image tag (SHA-256 of the inputs)", 2000, || {
        std::hint::black_box(inputs.tag().unwrap());
    });
    let context = BuildContext {
        dockerfile: render_dockerfile(&DockerfileInputs {
            template: DOCKERFILE_TEMPLATE,
            base_image: "python:3.11-slim",
            category: "tpu",
            with_requirements: true,
        })
        .unwrap(),
        runner_source: RUNNER_SOURCE.into(),
        requirements: Some(reqs.clone()),
    };
    let size = context.to_tar_gz().unwrap().len();
    per_call(&format!("build context tar.gz ({size} bytes)"), 500, || {
        std::hint::black_box(context.to_tar_gz().unwrap());
    });

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let fake = FakeCloudBuild::start().await.unwrap();
        let store = Arc::new(MemoryStore::new());
        fake.attach_bucket("proj-kn-c1-builds", kinetic_fake_gcp_server::build_bucket(store.clone()));
        fake.set_schedule(BuildSchedule::success().with_polls(2, 3));
        let config = CloudBuildConfig::new("proj", "us-central1-a", "c1")
            .with_endpoint(&fake.endpoint())
            .with_poll(Backoff::new(Duration::from_millis(5), Duration::from_millis(20)).with_multiplier(1.5))
            .with_retry(RetryPolicy::none());
        let builder =
            CloudBuildImageBuilder::new(config, Arc::new(StaticToken::new("t")), store).unwrap();

        // Many equal submits at once: one build.
        let req = request(&reqs);
        let start = Instant::now();
        let all = futures_util::future::join_all((0..64).map(|_| builder.resolve(&req))).await;
        assert!(all.iter().all(Result::is_ok));
        println!(
            "64 concurrent resolves of one missing image      {:>12.2?} total, {} build(s) started (fake: 5 polls at 5-20 ms)",
            start.elapsed(),
            fake.builds_created()
        );

        // Cache hits: one GetTag each over loopback HTTP.
        let mut samples = Vec::new();
        for _ in 0..300 {
            let t = Instant::now();
            let r = builder.resolve(&req).await.unwrap();
            samples.push(t.elapsed());
            assert!(r.cached);
        }
        samples.sort();
        println!(
            "cache-hit resolve (one GetTag, loopback)          p50 {:>9.2?}  p99 {:>9.2?}  max {:>9.2?}",
            percentile(&samples, 0.5),
            percentile(&samples, 0.99),
            samples[samples.len() - 1]
        );
    });
}
