//! `kinetic build-image --repo REPO`: build and push the prebuilt base
//! images `{repo}/base-{category}:{tag}` on the cluster's
//! Cloud Build, one build per category, in parallel.
//!
//! An Artifact Registry repository (`*.pkg.dev`) is pushed to by Cloud
//! Build itself; any other registry (Docker Hub) needs the Secret Manager
//! secrets `dockerhub-username` and `dockerhub-token` in the project.
//! Cloud access is as for `kinetic image resolve` (see `commands::image`).

use std::path::PathBuf;

use kinetic_build_cloudbuild::request::{
    DOCKERHUB_TOKEN_SECRET, DOCKERHUB_USERNAME_SECRET, Registry,
};
use kinetic_build_cloudbuild::{FinishedBuild, KINETIC_VERSION, PublishRequest};
use kinetic_core::ports::BuildError;
use serde_json::{Value, json};

use crate::engine::{Invocation, cloud_builder};
use crate::error::CliError;
use crate::flags::{TargetArgs, base_image};
use crate::render::{self, Output, emit};

/// An accelerator category.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub(crate) enum CategoryArg {
    /// CPU only.
    Cpu,
    /// NVIDIA GPUs (CUDA 12 JAX).
    Gpu,
    /// TPUs (libtpu JAX).
    Tpu,
}

impl CategoryArg {
    fn as_str(self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::Gpu => "gpu",
            Self::Tpu => "tpu",
        }
    }
}

/// Arguments of `kinetic build-image`.
#[derive(Debug, clap::Args)]
pub(crate) struct BuildImageArgs {
    /// Repository to push to: `REGION-docker.pkg.dev/PROJECT/REPO`, or a
    /// Docker Hub namespace.
    #[arg(long)]
    repo: String,

    /// Category to build (repeatable; default: cpu, gpu and tpu).
    #[arg(long = "category", value_enum)]
    categories: Vec<CategoryArg>,

    /// Image tag (default: this engine's version, which prebuilt jobs use).
    #[arg(long)]
    tag: Option<String>,

    /// A Dockerfile to build instead of the generated one; it must install
    /// `uv` and copy the runner to `/app/kinetic_runner.py`.
    #[arg(long)]
    dockerfile: Option<PathBuf>,

    /// Python version `X.Y` of the generated images (`python:X.Y-slim`).
    #[arg(long)]
    python: Option<String>,

    #[command(flatten)]
    target: TargetArgs,
}

pub(crate) fn run(args: &BuildImageArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    let repo = args.repo.trim().trim_end_matches('/');
    if repo.is_empty() || repo.contains(':') || repo.contains('@') {
        return Err(CliError::usage(format!(
            "--repo {:?} is not accepted: expected a repository without tag, such as us-docker.pkg.dev/PROJECT/REPO or a Docker Hub namespace",
            args.repo
        )));
    }
    let tag = args
        .tag
        .clone()
        .unwrap_or_else(|| KINETIC_VERSION.to_owned());
    if !is_docker_tag(&tag) {
        return Err(CliError::usage(format!(
            "--tag {tag:?} is not accepted: expected an image tag of 1 to 128 letters, digits, '_', '.' and '-', not starting with '.' or '-'"
        )));
    }
    let base = base_image(args.python.as_deref())?;
    let dockerfile = match &args.dockerfile {
        Some(path) => Some(std::fs::read_to_string(path).map_err(|e| {
            CliError::usage(format!(
                "--dockerfile {}: {e} (give a readable Dockerfile)",
                path.display()
            ))
        })?),
        None => None,
    };
    let mut categories = args.categories.clone();
    if categories.is_empty() {
        categories = vec![CategoryArg::Cpu, CategoryArg::Gpu, CategoryArg::Tpu];
    }
    categories.sort();
    categories.dedup();

    let settings = inv.settings(&args.target.settings_args(inv))?;
    let project = settings.project.as_ref().map(|p| p.value.clone()).ok_or_else(|| {
        CliError::usage(
            "kinetic build-image builds on the cluster's Cloud Build: set --project, KINETIC_PROJECT or a profile",
        )
    })?;
    let builder = cloud_builder(&settings, true)?;
    if Registry::of(repo) == Registry::DockerHub && !out.is_json() {
        render::notice(
            true,
            &format!(
                "{repo} is not an Artifact Registry repository: the builds log in to Docker Hub with the Secret Manager secrets {DOCKERHUB_USERNAME_SECRET} and {DOCKERHUB_TOKEN_SECRET} of project {project}"
            ),
        );
    }
    let requests: Vec<PublishRequest> = categories
        .iter()
        .map(|c| {
            let r = PublishRequest::new(repo, c.as_str(), &tag, &base);
            match &dockerfile {
                Some(d) => r.with_dockerfile(d.clone()),
                None => r,
            }
        })
        .collect();
    if !out.is_json() {
        for r in &requests {
            render::info(&format!("building {}", r.image));
        }
    }
    let rt = crate::engine::runtime()?;
    let results: Vec<Result<FinishedBuild, BuildError>> = rt.block_on(
        futures_util::future::join_all(requests.iter().map(|r| builder.publish(r))),
    );
    report(out, &requests, &results)?;
    let failed = results.iter().filter(|r| r.is_err()).count();
    if failed > 0 {
        return Err(CliError::failed(format!(
            "{failed} of {} image builds failed",
            results.len()
        )));
    }
    Ok(())
}

fn report(
    out: &Output,
    requests: &[PublishRequest],
    results: &[Result<FinishedBuild, BuildError>],
) -> Result<(), CliError> {
    if out.is_json() {
        let items: Vec<Value> = requests
            .iter()
            .zip(results)
            .map(|(r, result)| match result {
                Ok(b) => json!({
                    "image": r.image, "category": r.category, "ok": true,
                    "build_id": b.build_id, "digest": b.digest, "log_url": b.log_url,
                }),
                Err(e) => json!({
                    "image": r.image, "category": r.category, "ok": false, "error": e.to_string(),
                }),
            })
            .collect();
        return Ok(out.json(&json!({ "images": items }))?);
    }
    let mut s = String::new();
    for (r, result) in requests.iter().zip(results) {
        match result {
            Ok(b) => s.push_str(&format!(
                "pushed {}{} (build {})\n",
                r.image,
                b.digest
                    .as_deref()
                    .map(|d| format!("@{d}"))
                    .unwrap_or_default(),
                b.build_id
            )),
            Err(e) => s.push_str(&format!("FAILED {}: {e}\n", r.image)),
        }
    }
    Ok(emit(&s)?)
}

/// A tag as the Docker reference grammar allows it: `[A-Za-z0-9_]`
/// followed by up to 127 of `[A-Za-z0-9_.-]`.
fn is_docker_tag(tag: &str) -> bool {
    let mut chars = tag.chars();
    tag.len() <= 128
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

#[cfg(test)]
mod tag_tests {
    use super::is_docker_tag;

    #[test]
    fn tags_follow_the_docker_grammar() {
        for ok in ["0.1.0", "latest", "_x", "v1.2-rc_3", &"a".repeat(128)] {
            assert!(is_docker_tag(ok), "{ok}");
        }
        for bad in [
            "",
            "bad tag",
            ".x",
            "-x",
            "a:b",
            "a/b",
            &"a".repeat(129),
            "é",
        ] {
            assert!(!is_docker_tag(bad), "{bad}");
        }
    }
}
