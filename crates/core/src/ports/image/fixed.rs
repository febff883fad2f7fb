//! [`FixedImage`]: an [`ImageBuilder`] that resolves requests to one image
//! the user built and pushed (Kinetic's custom image contract), never
//! building.

use async_trait::async_trait;

use super::{BuildError, ImageBuilder, ImageCapabilities, ImageMode, ImageRequest, ResolvedImage};

/// Resolves requests to one image, never building: for a cluster whose
/// image is managed outside Kinetic (it must hold the runner at
/// [`RUNNER_IMAGE_PATH`](crate::image::RUNNER_IMAGE_PATH) and the job's
/// dependencies), and for test clusters that ignore images.
///
/// - A custom request keeps its own URI.
/// - A prebuilt request resolves to the fixed image: the runner installs
///   the requirements when the job starts.
/// - A bundled request without requirements resolves to the fixed image.
/// - A bundled request with requirements is [`BuildError::Unsupported`]:
///   the fixed image cannot have them baked in, and dropping them silently
///   would run the job without its dependencies. The error names the
///   setting that chose the image ([`FixedImage::with_origin`]) and the
///   alternatives.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use kinetic_core::ports::{BuildError, FixedImage, ImageBuilder, ImageMode, ImageRequest};
///
/// let fixed = FixedImage::new("us-docker.pkg.dev/p/r/job:1").unwrap().with_origin("KINETIC_IMAGE");
/// let request = |mode, requirements: Option<&str>| ImageRequest::new(mode,
///     "python:3.11-slim".into(), "cpu".into(), requirements.map(str::to_owned),
///     String::new(), String::new());
/// let image = fixed.resolve(&request(ImageMode::Bundled, None)).await.unwrap();
/// assert_eq!(image.uri, "us-docker.pkg.dev/p/r/job:1");
/// let err = fixed.resolve(&request(ImageMode::Bundled, Some("numpy\n"))).await.unwrap_err();
/// assert!(matches!(err, BuildError::Unsupported { .. }));
/// assert!(err.to_string().contains("KINETIC_IMAGE"));
/// # });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedImage {
    uri: String,
    origin: Option<String>,
}

impl FixedImage {
    /// Resolve to `uri`; fails when it is empty.
    pub fn new(uri: &str) -> Result<Self, BuildError> {
        if uri.trim().is_empty() {
            return Err(BuildError::invalid_input(
                "the fixed image URI is empty: expected e.g. us-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG",
            ));
        }
        Ok(Self {
            uri: uri.trim().to_owned(),
            origin: None,
        })
    }

    /// Name the setting that chose this image (such as `KINETIC_IMAGE`),
    /// so that a refused request says what to change.
    pub fn with_origin(mut self, setting: &str) -> Self {
        self.origin = Some(setting.to_owned());
        self
    }

    /// The image.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    fn cannot_bake_in(&self, request: &ImageRequest) -> BuildError {
        let lines = request.requirement_lines().count();
        let (image, instead) = match &self.origin {
            Some(setting) => (
                format!("the image {} set by {setting}", self.uri),
                format!(", or unset {setting} so that an image is built with them"),
            ),
            None => (format!("the fixed image {}", self.uri), String::new()),
        };
        BuildError::Unsupported {
            message: format!(
                "{image} is used as is, so the project's {lines} requirement line(s) cannot be baked into it; \
                 use `--container-image prebuilt` (ImageMode::Prebuilt), which installs them when the job starts{instead}"
            ),
        }
    }
}

#[async_trait]
impl ImageBuilder for FixedImage {
    fn capabilities(&self) -> ImageCapabilities {
        ImageCapabilities::fixed()
    }

    async fn resolve(&self, request: &ImageRequest) -> Result<ResolvedImage, BuildError> {
        match &request.mode {
            ImageMode::Custom { uri } => Ok(ResolvedImage::new(uri.clone(), true)),
            ImageMode::Bundled if request.has_requirements() => Err(self.cannot_bake_in(request)),
            _ => Ok(ResolvedImage::new(self.uri.clone(), true)),
        }
    }
}
