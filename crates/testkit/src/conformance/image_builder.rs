//! Conformance suite of the `ImageBuilder` port.

use std::sync::Arc;

use kinetic_core::ports::{ImageBuilder, ImageMode, ImageRequest};

/// What the suite needs from the builder under test.
pub trait ImageBuilderHarness: Send + Sync {
    /// The builder under test.
    fn builder(&self) -> Arc<dyn ImageBuilder>;
    /// Builds started so far (to check cache hits and single builds).
    fn builds(&self) -> u64;
}

fn request(mode: ImageMode, requirements: Option<&str>) -> ImageRequest {
    ImageRequest::new(
        mode,
        "python:3.11-slim".into(),
        "cpu".into(),
        requirements.map(str::to_owned),
        "print('runner')\n".into(),
        "FROM $base_image\n".into(),
    )
}

fn unique() -> String {
    format!(
        "pkg-{}\n",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    )
}

/// Run every check.
pub async fn run(h: &dyn ImageBuilderHarness) {
    custom_images_need_no_build(h).await;
    equal_requests_share_one_image(h).await;
    inputs_change_the_image(h).await;
    concurrent_equal_requests_build_once(h).await;
}

/// A custom image resolves to its URI without a build.
pub async fn custom_images_need_no_build(h: &dyn ImageBuilderHarness) {
    let before = h.builds();
    let uri = "example.com/team/image:1".to_owned();
    let image = h
        .builder()
        .resolve(&request(
            ImageMode::Custom { uri: uri.clone() },
            Some("numpy\n"),
        ))
        .await
        .expect("custom");
    assert_eq!(image.uri, uri, "a custom request MUST resolve to its URI");
    assert_eq!(h.builds(), before, "a custom request MUST NOT build");
}

/// The first resolve of a new image builds it; an equal request returns the
/// same URI from the cache without a build.
pub async fn equal_requests_share_one_image(h: &dyn ImageBuilderHarness) {
    let req = request(ImageMode::Bundled, Some(&unique()));
    let before = h.builds();
    let first = h.builder().resolve(&req).await.expect("first resolve");
    assert!(!first.cached, "a new image is built");
    assert_eq!(h.builds(), before + 1);
    let second = h.builder().resolve(&req).await.expect("second resolve");
    assert_eq!(
        second.uri, first.uri,
        "equal requests MUST give the same URI"
    );
    assert!(second.cached, "an existing image MUST NOT be rebuilt");
    assert_eq!(h.builds(), before + 1);
}

/// Different requirements give a different image.
pub async fn inputs_change_the_image(h: &dyn ImageBuilderHarness) {
    let a = h
        .builder()
        .resolve(&request(ImageMode::Bundled, Some(&unique())))
        .await
        .expect("a");
    let b = h
        .builder()
        .resolve(&request(ImageMode::Bundled, Some(&unique())))
        .await
        .expect("b");
    assert_ne!(a.uri, b.uri);
}

/// Equal requests at the same time start one build, not several.
pub async fn concurrent_equal_requests_build_once(h: &dyn ImageBuilderHarness) {
    let req = request(ImageMode::Bundled, Some(&unique()));
    let before = h.builds();
    let builder = h.builder();
    let all = futures_util::future::join_all((0..4).map(|_| builder.resolve(&req))).await;
    let uris: Vec<String> = all.into_iter().map(|r| r.expect("resolve").uri).collect();
    assert!(uris.windows(2).all(|w| w[0] == w[1]));
    assert_eq!(
        h.builds(),
        before + 1,
        "equal concurrent requests SHOULD start one build"
    );
}
