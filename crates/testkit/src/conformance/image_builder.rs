//! Conformance suite of the `ImageBuilder` port.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kinetic_core::ports::{BuildError, ImageBuilder, ImageMode, ImageRequest};

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

/// A requirements text no earlier request had.
fn unique() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "pkg-{}-{}-{}\n",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Every case of the suite, in the order [`run`] runs them, with the
/// value of [`ImageCapabilities::builds`](kinetic_core::ports::ImageCapabilities)
/// each is for (`None`: every builder): every builder keeps custom images
/// and gives equal requests one URI; a builder that builds gives new
/// requirements a new image, builds it once and reuses it; one that does
/// not never builds and refuses requirements it would have to bake in. The
/// [`image_builder_conformance_tests!`](crate::image_builder_conformance_tests)
/// macro makes one named test of each.
pub const CASES: &[(&str, Option<bool>)] = &[
    ("custom_images_need_no_build", None),
    ("equal_requests_give_one_uri", None),
    ("an_existing_image_is_not_rebuilt", Some(true)),
    ("inputs_change_the_image", Some(true)),
    ("concurrent_equal_requests_build_once", Some(true)),
    ("a_builder_that_cannot_build_never_builds", Some(false)),
    ("requirements_it_cannot_bake_in_are_refused", Some(false)),
];

/// Run the case named `name`, or skip it when it is for builders that do
/// (or do not) build and this one does not (or does). The skip is
/// asserted against `expected_skips`, as for the backend suite. Returns
/// whether the case ran.
///
/// # Panics
/// When the case fails, when `name` is no case of [`CASES`], or when the
/// skip does not match `expected_skips`.
pub async fn run_case(h: &dyn ImageBuilderHarness, name: &str, expected_skips: &[&str]) -> bool {
    let &(_, builds) = CASES
        .iter()
        .find(|(case, _)| *case == name)
        .unwrap_or_else(|| panic!("no conformance case named {name}"));
    let declared = h.builder().capabilities().builds;
    if builds.is_some_and(|b| b != declared) {
        assert!(
            expected_skips.contains(&name),
            "{name} is skipped (it is for builders with builds = {}), but the test does not expect that skip",
            !declared
        );
        eprintln!(
            "conformance: skipped {name}: it is for builders with builds = {}",
            !declared
        );
        return false;
    }
    assert!(
        !expected_skips.contains(&name),
        "the test expects {name} to be skipped, but it applies to this builder"
    );
    match name {
        "custom_images_need_no_build" => custom_images_need_no_build(h).await,
        "equal_requests_give_one_uri" => equal_requests_give_one_uri(h).await,
        "an_existing_image_is_not_rebuilt" => an_existing_image_is_not_rebuilt(h).await,
        "inputs_change_the_image" => inputs_change_the_image(h).await,
        "concurrent_equal_requests_build_once" => concurrent_equal_requests_build_once(h).await,
        "a_builder_that_cannot_build_never_builds" => {
            a_builder_that_cannot_build_never_builds(h).await
        }
        "requirements_it_cannot_bake_in_are_refused" => {
            requirements_it_cannot_bake_in_are_refused(h).await
        }
        other => panic!("no conformance case named {other}"),
    }
    true
}

/// Run the checks for what the builder declares it can do, in one go
/// (adapters' test suites use
/// [`image_builder_conformance_tests!`](crate::image_builder_conformance_tests),
/// which makes each case its own named test).
pub async fn run(h: &dyn ImageBuilderHarness) {
    let declared = h.builder().capabilities().builds;
    for &(name, builds) in CASES {
        if builds.is_none_or(|b| b == declared) {
            run_case(h, name, &[]).await;
        }
    }
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

/// A bundled request this builder can honour: new requirements for a
/// builder, none for one that does not build.
fn honourable(h: &dyn ImageBuilderHarness) -> ImageRequest {
    if h.builder().capabilities().builds {
        request(ImageMode::Bundled, Some(&unique()))
    } else {
        request(ImageMode::Bundled, None)
    }
}

/// Equal requests resolve to the same URI.
pub async fn equal_requests_give_one_uri(h: &dyn ImageBuilderHarness) {
    let req = honourable(h);
    let first = h.builder().resolve(&req).await.expect("first resolve");
    let second = h.builder().resolve(&req).await.expect("second resolve");
    assert_eq!(
        second.uri, first.uri,
        "equal requests MUST give the same URI"
    );
}

/// The first resolve of a new image builds it; an equal request returns the
/// same URI from the cache without a build.
pub async fn an_existing_image_is_not_rebuilt(h: &dyn ImageBuilderHarness) {
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
    assert_ne!(
        a.uri, b.uri,
        "different requirements MUST give different images"
    );
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

/// A builder that does not build resolves bundled requests without
/// requirements and prebuilt requests to images it has, without a build.
pub async fn a_builder_that_cannot_build_never_builds(h: &dyn ImageBuilderHarness) {
    let before = h.builds();
    for req in [
        request(ImageMode::Bundled, None),
        request(
            ImageMode::Prebuilt {
                repo: "example.com/kinetic".into(),
            },
            None,
        ),
    ] {
        let image =
            h.builder().resolve(&req).await.unwrap_or_else(|e| {
                panic!("{:?} without requirements MUST resolve: {e}", req.mode)
            });
        assert!(image.cached, "an image that is not built is cached");
        assert!(!image.uri.is_empty());
    }
    assert_eq!(h.builds(), before, "a builder that cannot build MUST NOT");
}

/// A bundled request with requirements is refused, never resolved to an
/// image without them, and the refusal says what to do instead.
pub async fn requirements_it_cannot_bake_in_are_refused(h: &dyn ImageBuilderHarness) {
    let before = h.builds();
    let err = h
        .builder()
        .resolve(&request(ImageMode::Bundled, Some("numpy==2.0\n")))
        .await
        .expect_err("requirements MUST NOT be dropped silently");
    assert!(
        matches!(err, BuildError::Unsupported { .. }),
        "MUST be Unsupported, got {err:?}"
    );
    assert!(!err.is_retryable());
    assert!(
        err.to_string().contains("prebuilt"),
        "the refusal MUST say what to do instead (prebuilt mode): {err}"
    );
    assert_eq!(h.builds(), before);
}
