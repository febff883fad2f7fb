//! [`FaultyImageBuilder`]: an [`ImageBuilder`] around another that fails or
//! slows down the calls a test scripts, and forwards everything else.

use std::sync::Arc;

use async_trait::async_trait;

use kinetic_core::ports::FaultPlan;
use kinetic_core::ports::{
    BuildError, ImageBuilder, ImageCapabilities, ImageRequest, ResolvedImage,
};

/// Fault injection for any [`ImageBuilder`]: before each `resolve` it
/// consults a [`FaultPlan`] (operation name `resolve`); a due error is
/// returned without calling the inner builder, otherwise the call goes
/// through as is. Capabilities are the inner builder's. With nothing
/// scripted it behaves exactly as the inner builder. Clones share the plan.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use kinetic_core::ports::{BuildError, ImageBuilder, ImageMode, ImageRequest};
/// use kinetic_engine::layers::{FaultyImageBuilder};
/// use kinetic_testkit::FakeImageBuilder;
///
/// let images = FaultyImageBuilder::new(Arc::new(FakeImageBuilder::new("us-docker.pkg.dev/p/r")));
/// images.faults().fail_next(BuildError::unavailable("scripted"));
/// let request = ImageRequest::new(ImageMode::Bundled, "python:3.11-slim".into(), "cpu".into(),
///     None, "print('runner')\n".into(), "FROM $base_image\n".into());
/// assert!(images.resolve(&request).await.unwrap_err().is_retryable());
/// assert!(images.resolve(&request).await.is_ok());
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct FaultyImageBuilder {
    inner: Arc<dyn ImageBuilder>,
    faults: Arc<FaultPlan<BuildError>>,
}

impl FaultyImageBuilder {
    /// Wrap `inner`, with nothing scripted yet.
    pub fn new(inner: Arc<dyn ImageBuilder>) -> Self {
        Self {
            inner,
            faults: Arc::default(),
        }
    }

    /// The plan: `fail_next`, `fail_on("resolve", n, err)`, latency.
    pub fn faults(&self) -> &FaultPlan<BuildError> {
        &self.faults
    }

    /// The wrapped builder.
    pub fn inner(&self) -> &Arc<dyn ImageBuilder> {
        &self.inner
    }
}

#[async_trait]
impl ImageBuilder for FaultyImageBuilder {
    fn capabilities(&self) -> ImageCapabilities {
        self.inner.capabilities()
    }

    async fn resolve(&self, request: &ImageRequest) -> Result<ResolvedImage, BuildError> {
        super::check(&self.faults, "resolve").await?;
        self.inner.resolve(request).await
    }
}
