//! [`FixedImage`]: an `ImageBuilder` that resolves every request to one
//! image the user built and pushed (Kinetic's custom image contract).

use async_trait::async_trait;
use kinetic_core::ports::{BuildError, ImageBuilder, ImageMode, ImageRequest, ResolvedImage};

/// Resolves every request to one image, never building: for a cluster
/// whose image is managed outside Kinetic (it must hold the runner at
/// [`crate::manifest::RUNNER_PATH`] and the job's dependencies), and for
/// test clusters that ignore images. A request in custom mode keeps its own URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedImage {
    uri: String,
}

impl FixedImage {
    /// Resolve to `uri`; fails when it is empty.
    pub fn new(uri: &str) -> Result<Self, BuildError> {
        if uri.trim().is_empty() {
            return Err(BuildError::InvalidInput {
                message: "the fixed image URI is empty: expected e.g. us-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG".into(),
            });
        }
        Ok(Self {
            uri: uri.trim().to_owned(),
        })
    }

    /// The image.
    pub fn uri(&self) -> &str {
        &self.uri
    }
}

#[async_trait]
impl ImageBuilder for FixedImage {
    async fn resolve(&self, request: &ImageRequest) -> Result<ResolvedImage, BuildError> {
        Ok(match &request.mode {
            ImageMode::Custom { uri } => ResolvedImage::new(uri.clone(), true),
            _ => ResolvedImage::new(self.uri.clone(), true),
        })
    }
}
