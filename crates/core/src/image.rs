//! Container image names and the bundled image's cache key.
//!
//! A bundled image is built once per distinct set of inputs and reused from
//! the cluster's Artifact Registry repository. Its tag is derived from a
//! SHA-256 over every input that changes the image, composed as Kinetic does:
//!
//! ```text
//! "base_image={base}\ncategory={category}\nkinetic={version}\n"
//! + filtered requirements                      (only when non-empty)
//! + "\n---runner---\n" + runner source
//! + "\n---Dockerfile---\n" + Dockerfile template
//! ```
//!
//! The separators name *our* runner and template (Kinetic's are
//! `---remote_runner.py---` and `---Dockerfile.template---`); since our
//! runner and template differ from Kinetic's, our tags differ from Kinetic's
//! by construction, and only the composition rule is shared: a change of
//! runner, template, version, category, base image or filtered
//! requirements gives a new tag; JAX lines removed by the filter never
//! change it (hash the *filtered* text); `""` requirements hash like none.
//!
//! Tag: `{category}-{first 12 hex}`. Image:
//! `{ar_location}-docker.pkg.dev/{project}/kn-{cluster}/base:{tag}`.
//! Prebuilt image: `{repo}/base-{category}:{version}`.
//!
//! ```
//! use kinetic_core::image::{ImageTagInputs, bundled_image_uri};
//!
//! let inputs = ImageTagInputs {
//!     base_image: "python:3.11-slim".into(),
//!     category: "tpu".into(),
//!     kinetic_version: "0.1.0".into(),
//!     requirements: Some("numpy\n".into()),
//!     runner_source: "print('runner')\n".into(),
//!     dockerfile_template: "FROM $base_image\n".into(),
//! };
//! let tag = inputs.tag().unwrap();
//! assert!(tag.as_str().starts_with("tpu-"));
//! assert_eq!(tag.as_str().len(), "tpu-".len() + 12);
//! let uri = bundled_image_uri("europe", "my-proj", "my-cluster", &tag);
//! assert!(uri.starts_with("europe-docker.pkg.dev/my-proj/kn-my-cluster/base:tpu-"));
//! ```

use std::fmt;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::config::{ar_repository, registry_prefix_at};

/// Separator before the runner source in the hash input (ours).
pub const RUNNER_SEPARATOR: &str = "\n---runner---\n";
/// Separator before the Dockerfile template in the hash input (ours).
pub const DOCKERFILE_SEPARATOR: &str = "\n---Dockerfile---\n";
/// Number of hash hex digits in a tag.
pub const TAG_HASH_LEN: usize = 12;
/// Image name inside the cluster repository.
pub const BUNDLED_IMAGE_NAME: &str = "base";

/// The Dockerfile template of job images (`runner/Dockerfile.template`),
/// shipped with the runner it installs. Image builders fill in
/// `$base_image`, `$requirements_copy` and `$install_command`; the bundled
/// image tag hashes this text ([`ImageTagInputs::dockerfile_template`]).
pub const DOCKERFILE_TEMPLATE: &str = include_str!("../../../runner/Dockerfile.template");

/// Where job images hold the runner
/// ([`RUNNER_FILE_NAME`](crate::protocol::RUNNER_FILE_NAME) under `/app`):
/// backends run `python3 -u /app/kinetic_runner.py --spec URI`.
pub const RUNNER_IMAGE_PATH: &str = "/app/kinetic_runner.py";

/// What every job image installs besides the user's requirements, per
/// accelerator category: the JAX build that runs on it, `keras` (always
/// there for users who come from Kinetic) and `cloudpickle` (functions of
/// a client's `__main__` travel pickled by value). The runner itself uses
/// the standard library only.
///
/// The one list of what an image holds: the Dockerfile's install line is
/// rendered from it (`kinetic-build-cloudbuild`) and the fake Cloud Build
/// of `kinetic-fake-gcp` installs from it, so the two cannot drift apart.
pub const IMAGE_PACKAGES: &[(&str, &[&str])] = &[
    ("cpu", &["jax", "keras", "cloudpickle"]),
    ("gpu", &["jax[cuda12]", "keras", "cloudpickle"]),
    ("tpu", &["jax[tpu]>=0.4.6", "keras", "cloudpickle"]),
];

/// The packages of [`IMAGE_PACKAGES`] for `category`, or `None` for a
/// category with no images.
pub fn image_packages(category: &str) -> Option<&'static [&'static str]> {
    IMAGE_PACKAGES
        .iter()
        .find(|(c, _)| *c == category)
        .map(|(_, packages)| *packages)
}

/// The distribution name of a requirement (`jax[tpu]>=0.4.6` → `jax`).
pub fn requirement_name(requirement: &str) -> &str {
    let end = requirement
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(requirement.len());
    &requirement[..end]
}

/// Why an image name could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// The category cannot start a Docker tag.
    #[error(
        "invalid accelerator category '{category}': expected lowercase letters and digits (cpu, gpu, tpu)"
    )]
    InvalidCategory {
        /// The category as given.
        category: String,
    },
}

/// Everything that decides a bundled image's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageTagInputs {
    /// Base image, e.g. `python:3.11-slim` ([`default_base_image`]).
    pub base_image: String,
    /// Accelerator category: `cpu`, `gpu` or `tpu`.
    pub category: String,
    /// Version of this engine (Kinetic's `kinetic={version}` line).
    pub kinetic_version: String,
    /// Requirements after the JAX filter; `None` and `Some("")` are the same.
    pub requirements: Option<String>,
    /// The runner program copied into the image.
    pub runner_source: String,
    /// The Dockerfile template the image is built from.
    pub dockerfile_template: String,
}

impl ImageTagInputs {
    /// The exact text that is hashed (see the module documentation).
    pub fn hash_input(&self) -> String {
        let mut content = format!(
            "base_image={}\ncategory={}\nkinetic={}\n",
            self.base_image, self.category, self.kinetic_version
        );
        if let Some(req) = self.requirements.as_deref() {
            content.push_str(req);
        }
        content.push_str(RUNNER_SEPARATOR);
        content.push_str(&self.runner_source);
        content.push_str(DOCKERFILE_SEPARATOR);
        content.push_str(&self.dockerfile_template);
        content
    }

    /// SHA-256 (64 lowercase hex) of [`ImageTagInputs::hash_input`].
    pub fn hash(&self) -> String {
        sha256_hex(self.hash_input().as_bytes())
    }

    /// The image tag `{category}-{first 12 hex}`.
    pub fn tag(&self) -> Result<ImageTag, ImageError> {
        validate_category(&self.category)?;
        let hash = self.hash();
        Ok(ImageTag {
            tag: format!("{}-{}", self.category, &hash[..TAG_HASH_LEN]),
            hash,
        })
    }

    /// A description of the inputs and the resulting tag, for people and
    /// `kinetic image resolve`.
    pub fn describe(&self) -> Result<ImageTagDescription, ImageError> {
        let tag = self.tag()?;
        let requirements = self
            .requirements
            .as_deref()
            .filter(|r| !r.is_empty())
            .map(str::to_owned);
        Ok(ImageTagDescription {
            base_image: self.base_image.clone(),
            category: self.category.clone(),
            kinetic_version: self.kinetic_version.clone(),
            requirements_sha256: requirements.as_deref().map(|r| sha256_hex(r.as_bytes())),
            requirements,
            runner_sha256: sha256_hex(self.runner_source.as_bytes()),
            dockerfile_sha256: sha256_hex(self.dockerfile_template.as_bytes()),
            hash: tag.hash.clone(),
            tag: tag.tag,
        })
    }
}

/// A bundled image tag with the full hash it came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ImageTag {
    tag: String,
    hash: String,
}

impl ImageTag {
    /// The tag, `{category}-{12 hex}`.
    pub fn as_str(&self) -> &str {
        &self.tag
    }

    /// The full SHA-256 hex the tag was cut from.
    pub fn hash(&self) -> &str {
        &self.hash
    }
}

impl fmt::Display for ImageTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.tag)
    }
}

/// What went into a bundled image tag (serialisable).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageTagDescription {
    /// The base image.
    pub base_image: String,
    /// The accelerator category.
    pub category: String,
    /// The engine version.
    pub kinetic_version: String,
    /// The filtered requirements hashed, or `None` when empty.
    pub requirements: Option<String>,
    /// SHA-256 of the requirements text, when there is one.
    pub requirements_sha256: Option<String>,
    /// SHA-256 of the runner source.
    pub runner_sha256: String,
    /// SHA-256 of the Dockerfile template.
    pub dockerfile_sha256: String,
    /// The full tag hash.
    pub hash: String,
    /// The tag.
    pub tag: String,
}

fn validate_category(category: &str) -> Result<(), ImageError> {
    let ok = !category.is_empty()
        && category
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(ImageError::InvalidCategory {
            category: category.to_owned(),
        })
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The default base image for a client Python version: `python:{major}.{minor}-slim`.
pub fn default_base_image(python_major: u32, python_minor: u32) -> String {
    python_base_image(&format!("{python_major}.{python_minor}"))
}

/// The base image for a Python version written `X.Y`: `python:X.Y-slim`.
pub fn python_base_image(python_version: &str) -> String {
    format!("python:{python_version}-slim")
}

/// The bundled image URI:
/// `{ar_location}-docker.pkg.dev/{project}/kn-{cluster}/base:{tag}`.
pub fn bundled_image_uri(
    ar_location: &str,
    project: &str,
    cluster: &str,
    tag: &ImageTag,
) -> String {
    format!(
        "{}/{BUNDLED_IMAGE_NAME}:{tag}",
        registry_prefix_at(ar_location, project, cluster)
    )
}

/// The Artifact Registry tag resource checked for a cached image:
/// `projects/{project}/locations/{ar_location}/repositories/kn-{cluster}/packages/base/tags/{tag}`.
pub fn registry_tag_resource(
    ar_location: &str,
    project: &str,
    cluster: &str,
    tag: &ImageTag,
) -> String {
    format!(
        "projects/{project}/locations/{ar_location}/repositories/{}/packages/{BUNDLED_IMAGE_NAME}/tags/{tag}",
        ar_repository(cluster)
    )
}

/// The prebuilt image URI: `{repo}/base-{category}:{version}`
/// (e.g. `kinetic/base-gpu:0.0.4`).
pub fn prebuilt_image_uri(repo: &str, category: &str, version: &str) -> String {
    format!("{repo}/base-{category}:{version}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_category_has_cloudpickle_and_names_strip_extras() {
        for category in ["cpu", "gpu", "tpu"] {
            let packages = image_packages(category).unwrap_or_default();
            assert!(packages.contains(&"cloudpickle"), "{category}");
        }
        assert_eq!(image_packages("fpga"), None);
        assert_eq!(requirement_name("jax[tpu]>=0.4.6"), "jax");
        assert_eq!(requirement_name("typing_extensions"), "typing_extensions");
    }
}
