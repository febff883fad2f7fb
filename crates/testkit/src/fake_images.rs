//! An in-memory [`ImageBuilder`]: a registry of tags, builds that take a
//! scripted time, and one build per image however many equal requests
//! arrive at once. Failures are scripted with
//! [`FaultyImageBuilder`](kinetic_engine::layers::FaultyImageBuilder).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use kinetic_core::image::{ImageTagInputs, prebuilt_image_uri};
use kinetic_core::ports::{
    BuildError, ImageBuilder, ImageCapabilities, ImageMode, ImageRequest, ResolvedImage,
};

/// The engine version the fake tags images with.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// An in-memory image builder. Clones share the registry.
#[derive(Debug, Clone)]
pub struct FakeImageBuilder {
    registry_prefix: String,
    registry: Arc<Mutex<BTreeSet<String>>>,
    in_flight: Arc<Mutex<BTreeMap<String, Arc<tokio::sync::Mutex<()>>>>>,
    builds: Arc<AtomicU64>,
    build_time: Duration,
}

impl FakeImageBuilder {
    /// A builder pushing bundled images under `registry_prefix`
    /// (e.g. `us-docker.pkg.dev/proj/kn-cluster`).
    pub fn new(registry_prefix: &str) -> Self {
        Self {
            registry_prefix: registry_prefix.trim_end_matches('/').to_owned(),
            registry: Arc::default(),
            in_flight: Arc::default(),
            builds: Arc::default(),
            build_time: Duration::ZERO,
        }
    }

    /// Each build takes this long.
    pub fn with_build_time(mut self, build_time: Duration) -> Self {
        self.build_time = build_time;
        self
    }

    /// Builds run so far.
    pub fn builds(&self) -> u64 {
        self.builds.load(Ordering::Relaxed)
    }

    /// True when the registry holds `uri`.
    pub fn has_image(&self, uri: &str) -> bool {
        lock(&self.registry).contains(uri)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[async_trait]
impl ImageBuilder for FakeImageBuilder {
    fn capabilities(&self) -> ImageCapabilities {
        ImageCapabilities::building()
    }

    async fn resolve(&self, request: &ImageRequest) -> Result<ResolvedImage, BuildError> {
        let uri = match &request.mode {
            ImageMode::Custom { uri } => return Ok(ResolvedImage::new(uri.clone(), true)),
            ImageMode::Prebuilt { repo } => {
                return Ok(ResolvedImage::new(
                    prebuilt_image_uri(repo, &request.category, VERSION),
                    true,
                ));
            }
            _ => {
                let inputs = ImageTagInputs {
                    base_image: request.base_image.clone(),
                    category: request.category.clone(),
                    kinetic_version: VERSION.to_owned(),
                    requirements: request.requirements.clone(),
                    runner_source: request.runner_source.clone(),
                    dockerfile_template: request.dockerfile_template.clone(),
                };
                let tag = inputs
                    .tag()
                    .map_err(|e| BuildError::invalid_input(e.to_string()).with_source(e))?;
                format!("{}/base:{tag}", self.registry_prefix)
            }
        };
        // One build per image: equal requests queue on the same lock and
        // find the image in the registry once the first build is done.
        let gate = lock(&self.in_flight)
            .entry(uri.clone())
            .or_default()
            .clone();
        let _guard = gate.lock().await;
        if self.has_image(&uri) {
            return Ok(ResolvedImage::new(uri, true));
        }
        self.builds.fetch_add(1, Ordering::Relaxed);
        if !self.build_time.is_zero() {
            tokio::time::sleep(self.build_time).await;
        }
        lock(&self.registry).insert(uri.clone());
        Ok(ResolvedImage::new(uri, false))
    }
}
