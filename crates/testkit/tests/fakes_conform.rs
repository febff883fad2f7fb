//! The fakes pass the conformance suites every adapter runs.

use std::sync::Arc;

use kinetic_core::ports::ImageBuilder;
use kinetic_testkit::conformance::image_builder::ImageBuilderHarness;
use kinetic_testkit::{FakeBackendHarness, FakeImageBuilder, conformance};

#[tokio::test]
async fn fake_backend_conforms() {
    conformance::backend::run(&FakeBackendHarness::default()).await;
}

struct FakeImages(FakeImageBuilder);

impl ImageBuilderHarness for FakeImages {
    fn builder(&self) -> Arc<dyn ImageBuilder> {
        Arc::new(self.0.clone())
    }

    fn builds(&self) -> u64 {
        self.0.builds()
    }
}

#[tokio::test]
async fn fake_image_builder_conforms() {
    let fake = FakeImageBuilder::new("us-docker.pkg.dev/p/kn-c")
        .with_build_time(std::time::Duration::from_millis(20));
    conformance::image_builder::run(&FakeImages(fake)).await;
}
