//! The Cloud Build `CreateBuild` request body, as a pure function of its
//! inputs (golden-tested).
//!
//! One `docker build -t IMAGE .` step over the context tarball in the
//! builds bucket, run as the cluster's build service account. For an
//! Artifact Registry image Cloud Build pushes it (`images`); for any other
//! registry (Docker Hub, for `kinetic build-image`) the steps log in with
//! the Secret Manager secrets `dockerhub-username` and `dockerhub-token`
//! and push it themselves.
//!
//! Logs go to `{logs_bucket}` (`GCS_ONLY`), so a failed build's log tail
//! is read back through the same `ObjectStore` as the context, without the
//! Cloud Logging API. (Kinetic uses `CLOUD_LOGGING_ONLY` and shows only a
//! console link.)

use std::time::Duration;

use serde_json::{Value, json};

/// The builder image that runs `docker`.
pub const DOCKER_BUILDER: &str = "gcr.io/cloud-builders/docker";

/// Secret Manager secret holding the Docker Hub user name.
pub const DOCKERHUB_USERNAME_SECRET: &str = "dockerhub-username";
/// Secret Manager secret holding the Docker Hub access token.
pub const DOCKERHUB_TOKEN_SECRET: &str = "dockerhub-token";

/// Where an image is pushed, which decides how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registry {
    /// Artifact Registry (`*.pkg.dev`): Cloud Build pushes with its own
    /// credentials.
    ArtifactRegistry,
    /// Any other registry (Docker Hub): log in with Secret Manager
    /// secrets, then `docker push`.
    DockerHub,
}

impl Registry {
    /// The registry an image URI lives in: a host containing `.pkg.dev`
    /// is Artifact Registry, anything else is treated as Docker Hub.
    pub fn of(image_uri: &str) -> Self {
        let host = image_uri.split('/').next().unwrap_or("");
        if host.contains(".pkg.dev") {
            Self::ArtifactRegistry
        } else {
            Self::DockerHub
        }
    }
}

/// Everything a build request is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildRequestInputs<'a> {
    /// Project the build runs in (and whose secrets it reads).
    pub project: &'a str,
    /// The image to build and push.
    pub image_uri: &'a str,
    /// Bucket holding the context tarball.
    pub source_bucket: &'a str,
    /// Object name of the tarball in that bucket.
    pub source_object: &'a str,
    /// Email of the service account the build runs as.
    pub service_account: &'a str,
    /// `gs://bucket/prefix` the build writes `log-{id}.txt` under.
    pub logs_bucket: &'a str,
    /// Cloud Build's own time limit for the build.
    pub timeout: Duration,
    /// Tags for the console (`kinetic`, `kinetic-cpu`…), each
    /// `[A-Za-z0-9_][A-Za-z0-9_.-]*`.
    pub tags: &'a [String],
}

/// The JSON body of `POST /v1/projects/{p}/locations/{l}/builds`.
pub fn build_request_body(inputs: &BuildRequestInputs<'_>) -> Value {
    let image = inputs.image_uri;
    let build_step = json!({
        "name": DOCKER_BUILDER,
        "args": ["build", "-t", image, "."],
    });
    let mut body = json!({
        "source": {
            "storageSource": {
                "bucket": inputs.source_bucket,
                "object": inputs.source_object,
            }
        },
        "serviceAccount": format!(
            "projects/{}/serviceAccounts/{}",
            inputs.project, inputs.service_account
        ),
        "logsBucket": inputs.logs_bucket,
        "options": { "logging": "GCS_ONLY" },
        "timeout": format!("{}s", inputs.timeout.as_secs().max(1)),
        "tags": inputs.tags,
    });
    match Registry::of(image) {
        Registry::ArtifactRegistry => {
            body["steps"] = json!([build_step]);
            body["images"] = json!([image]);
        }
        Registry::DockerHub => {
            let secret =
                |name: &str| format!("projects/{}/secrets/{name}/versions/latest", inputs.project);
            body["steps"] = json!([
                build_step,
                {
                    "name": DOCKER_BUILDER,
                    "entrypoint": "bash",
                    "args": ["-c", "echo \"$$DOCKERHUB_TOKEN\" | docker login --username \"$$DOCKERHUB_USERNAME\" --password-stdin"],
                    "secretEnv": ["DOCKERHUB_USERNAME", "DOCKERHUB_TOKEN"],
                },
                { "name": DOCKER_BUILDER, "args": ["push", image] },
            ]);
            body["availableSecrets"] = json!({
                "secretManager": [
                    { "versionName": secret(DOCKERHUB_USERNAME_SECRET), "env": "DOCKERHUB_USERNAME" },
                    { "versionName": secret(DOCKERHUB_TOKEN_SECRET), "env": "DOCKERHUB_TOKEN" },
                ]
            });
        }
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registries_are_told_apart_by_host() {
        assert_eq!(
            Registry::of("us-docker.pkg.dev/p/kn-c/base:cpu-0123456789ab"),
            Registry::ArtifactRegistry
        );
        assert_eq!(Registry::of("kinetic/base-cpu:0.1.0"), Registry::DockerHub);
        assert_eq!(
            Registry::of("docker.io/team/base-gpu:1"),
            Registry::DockerHub
        );
        // `.pkg.dev` in a path segment is not a registry host.
        assert_eq!(Registry::of("team/x.pkg.dev:1"), Registry::DockerHub);
    }
}
