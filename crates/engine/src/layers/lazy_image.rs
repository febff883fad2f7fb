//! [`LazyImageBuilder`]: an [`ImageBuilder`] whose inner builder is made
//! on first use, so that a program that never needs an image never pays
//! for (or fails on) setting one up — credentials, clients, endpoints.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use futures_util::future::BoxFuture;
use tokio::sync::OnceCell;

use kinetic_core::ports::{
    BuildError, ImageBuilder, ImageCapabilities, ImageRequest, ResolvedImage,
};

type Make =
    Box<dyn Fn() -> BoxFuture<'static, Result<Arc<dyn ImageBuilder>, BuildError>> + Send + Sync>;

/// Builds its inner builder from an async constructor on the first
/// `resolve`, then forwards every call to it.
///
/// - Concurrent first calls run the constructor once and all wait for it.
/// - A constructor that fails makes that call fail with its error, and the
///   next call tries again (nothing is cached but success).
/// - [`ImageBuilder::capabilities`] are the ones declared at construction
///   (the inner builder may not exist yet); they must be the inner's.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use kinetic_core::ports::{FixedImage, ImageBuilder, ImageCapabilities, ImageMode, ImageRequest};
/// use kinetic_engine::layers::{LazyImageBuilder};
///
/// let lazy = LazyImageBuilder::new(ImageCapabilities::fixed(), || async {
///     Ok(Arc::new(FixedImage::new("registry.example/job:1")?) as Arc<dyn ImageBuilder>)
/// });
/// assert!(!lazy.is_ready());
/// let request = ImageRequest::new(ImageMode::Bundled, "python:3.11-slim".into(), "cpu".into(),
///     None, String::new(), String::new());
/// assert_eq!(lazy.resolve(&request).await.unwrap().uri, "registry.example/job:1");
/// assert!(lazy.is_ready());
/// # });
/// ```
pub struct LazyImageBuilder {
    capabilities: ImageCapabilities,
    make: Make,
    inner: OnceCell<Arc<dyn ImageBuilder>>,
}

impl LazyImageBuilder {
    /// A builder that runs `make` on first use. `capabilities` are those of
    /// the builder `make` returns.
    pub fn new<F, Fut>(capabilities: ImageCapabilities, make: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Arc<dyn ImageBuilder>, BuildError>> + Send + 'static,
    {
        Self {
            capabilities,
            make: Box::new(move || Box::pin(make())),
            inner: OnceCell::new(),
        }
    }

    /// True once the inner builder was made.
    pub fn is_ready(&self) -> bool {
        self.inner.initialized()
    }
}

impl fmt::Debug for LazyImageBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazyImageBuilder")
            .field("capabilities", &self.capabilities)
            .field("inner", &self.inner.get())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl ImageBuilder for LazyImageBuilder {
    fn capabilities(&self) -> ImageCapabilities {
        self.capabilities
    }

    async fn resolve(&self, request: &ImageRequest) -> Result<ResolvedImage, BuildError> {
        let inner = self.inner.get_or_try_init(|| (self.make)()).await?;
        inner.resolve(request).await
    }
}
