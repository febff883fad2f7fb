//! `kinetic image resolve [DIR]`: the image a job from DIR would run in,
//! whether the cluster's Artifact Registry already holds it, and what went
//! into its tag.
//!
//! Cloud access (shared with `kinetic build-image`): tokens from
//! `KINETIC_ACCESS_TOKEN` when set, else Google's credential chain
//! (`GOOGLE_APPLICATION_CREDENTIALS`, application-default credentials, the
//! metadata server); endpoints from `KINETIC_CLOUDBUILD_ENDPOINT` and
//! `KINETIC_ARTIFACTREGISTRY_ENDPOINT` (test servers); the builds bucket
//! from `KINETIC_BUILDS_STORE_URL`, else `gs://{project}-kn-{cluster}-builds`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kinetic_build_cloudbuild::{
    BundledImage, CloudBuildConfig, CloudBuildImageBuilder, GcpTokenSource, KINETIC_VERSION,
    StaticToken, TokenSource,
};
use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_core::config::{self as core_config, PartialConfig, ProcessEnv, ProfileStore};
use kinetic_core::engine::EngineSettings;
use kinetic_core::image::{
    DOCKERFILE_TEMPLATE, ImageTagInputs, default_base_image, prebuilt_image_uri,
};
use kinetic_core::ports::{ImageMode, ImageRequest, ObjectStore};
use kinetic_core::protocol::RUNNER_SOURCE;
use kinetic_core::requirements::{RequirementsMode, ResolvedRequirements, resolve};
use kinetic_store_gcs::{GcsOptions, GcsStore};
use serde_json::{Value, json};

use super::config::config_error;
use super::deps::ModeArg;
use crate::output::{CliError, Output, emit};

/// Environment variables of the cloud image commands.
pub(crate) mod vars {
    /// A bearer token to use as is.
    pub(crate) const ACCESS_TOKEN: &str = "KINETIC_ACCESS_TOKEN";
    /// Cloud Build endpoint override.
    pub(crate) const CLOUDBUILD_ENDPOINT: &str = "KINETIC_CLOUDBUILD_ENDPOINT";
    /// Artifact Registry endpoint override.
    pub(crate) const ARTIFACTREGISTRY_ENDPOINT: &str = "KINETIC_ARTIFACTREGISTRY_ENDPOINT";
    /// Store URL of the builds bucket.
    pub(crate) const BUILDS_STORE_URL: &str = "KINETIC_BUILDS_STORE_URL";
}

/// `--project`, `--zone`, `--cluster`: the target (argument > `KINETIC_*` > profile).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct TargetArgs {
    /// Cloud project (also `KINETIC_PROJECT`).
    #[arg(long)]
    project: Option<String>,
    /// Zone of the cluster (also `KINETIC_ZONE`).
    #[arg(long)]
    zone: Option<String>,
    /// Cluster name (also `KINETIC_CLUSTER`).
    #[arg(long)]
    cluster: Option<String>,
}

impl TargetArgs {
    /// The resolved configuration (project optional).
    pub(crate) fn resolve(&self, profile: Option<&str>) -> Result<PartialConfig, CliError> {
        let path =
            core_config::profiles_path(&ProcessEnv).map_err(|e| CliError::failed(e.to_string()))?;
        let profiles = ProfileStore::load(&path).map_err(|e| CliError::failed(e.to_string()))?;
        let mut args = core_config::ConfigArgs::new();
        if let Some(p) = profile {
            args = args.profile(p);
        }
        if let Some(p) = &self.project {
            args = args.project(p);
        }
        if let Some(z) = &self.zone {
            args = args.zone(z);
        }
        if let Some(c) = &self.cluster {
            args = args.cluster(c);
        }
        core_config::resolve_partial(&args, &ProcessEnv, &profiles).map_err(config_error)
    }
}

fn non_empty(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

/// The Cloud Build builder for a project's cluster. `needs_store`: whether
/// build contexts will be uploaded (otherwise no bucket is opened).
pub(crate) fn cloud_builder(
    project: &str,
    zone: &str,
    cluster: &str,
    needs_store: bool,
) -> Result<CloudBuildImageBuilder, CliError> {
    let mut config = CloudBuildConfig::new(project, zone, cluster);
    if let Some(e) = non_empty(vars::CLOUDBUILD_ENDPOINT) {
        config.cloudbuild_endpoint = e;
    }
    if let Some(e) = non_empty(vars::ARTIFACTREGISTRY_ENDPOINT) {
        config.artifactregistry_endpoint = e;
    }
    let tokens: Arc<dyn TokenSource> = match non_empty(vars::ACCESS_TOKEN) {
        Some(token) => Arc::new(StaticToken::new(token)),
        None => Arc::new(GcpTokenSource::from_env(&config.builds_bucket)),
    };
    let store_url = if needs_store {
        non_empty(vars::BUILDS_STORE_URL)
            .unwrap_or_else(|| format!("gs://{}", config.builds_bucket))
    } else {
        // `image resolve` uploads nothing: no bucket to open.
        "memory://".to_owned()
    };
    let store: Arc<dyn ObjectStore> = Arc::new(
        GcsStore::open(&store_url, &GcsOptions::from_env()).map_err(|e| {
            CliError::usage(format!(
                "builds bucket {store_url}: {e} (set {} to the bucket's store URL)",
                vars::BUILDS_STORE_URL
            ))
        })?,
    );
    CloudBuildImageBuilder::new(config, tokens, store).map_err(|e| CliError::failed(e.to_string()))
}

/// Arguments of `kinetic image`.
#[derive(Debug, clap::Args)]
pub(crate) struct ImageArgs {
    #[command(subcommand)]
    command: ImageCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ImageCommand {
    /// The image a job from DIR would run in, whether it is already built,
    /// and what went into its tag.
    Resolve(ResolveArgs),
}

/// Arguments of `kinetic image resolve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ResolveArgs {
    /// Entry directory of the code; the dependency file is searched from
    /// here (default: the current directory).
    dir: Option<PathBuf>,

    /// Accelerator the job runs on (its category picks the image).
    #[arg(long, default_value = "cpu")]
    accelerator: String,

    /// Python version `X.Y` of the image (`python:X.Y-slim`).
    #[arg(long)]
    python: Option<String>,

    /// `bundled` (built with the requirements) or `prebuilt` (a base image;
    /// requirements installed at start).
    #[arg(long, value_enum, default_value_t = ModeArg::Bundled)]
    mode: ModeArg,

    /// Repository of prebuilt base images (default `KINETIC_BASE_IMAGE_REPO`, profile, `kinetic`).
    #[arg(long)]
    base_image_repo: Option<String>,

    /// Do not ask Artifact Registry whether the image exists.
    #[arg(long)]
    offline: bool,

    #[command(flatten)]
    target: TargetArgs,
}

pub(crate) fn run(args: &ImageArgs, profile: Option<&str>, out: &Output) -> Result<(), CliError> {
    match &args.command {
        ImageCommand::Resolve(a) => resolve_image(a, profile, out),
    }
}

/// `python:X.Y-slim` for `--python X.Y` or the engine's default.
pub(crate) fn base_image(python: Option<&str>) -> Result<String, CliError> {
    let version = python
        .map(str::to_owned)
        .unwrap_or_else(|| EngineSettings::default().python_version);
    let parsed = version
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)));
    match parsed {
        Some((major, minor)) => Ok(default_base_image(major, minor)),
        None => Err(CliError::usage(format!(
            "--python {version:?} is not accepted: expected MAJOR.MINOR such as 3.11"
        ))),
    }
}

fn check_dir(dir: &Path) -> Result<(), CliError> {
    if dir.is_dir() {
        Ok(())
    } else {
        Err(CliError::usage(format!(
            "DIR {} is not a directory: give the directory that holds your code",
            dir.display()
        )))
    }
}

fn resolve_image(args: &ResolveArgs, profile: Option<&str>, out: &Output) -> Result<(), CliError> {
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    check_dir(&dir)?;
    let accelerator =
        AcceleratorSpec::parse(&args.accelerator).map_err(|e| CliError::usage(e.to_string()))?;
    let category = accelerator.category().as_str().to_owned();
    let base = base_image(args.python.as_deref())?;
    let cfg = args.target.resolve(profile)?;
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let mode: RequirementsMode = args.mode.into();
    let deps = resolve(&dir, home.as_deref(), mode).map_err(|e| CliError::failed(e.to_string()))?;

    if mode == RequirementsMode::Prebuilt {
        let repo = args
            .base_image_repo
            .clone()
            .unwrap_or_else(|| cfg.base_image_repo.value.clone());
        let uri = prebuilt_image_uri(repo.trim_end_matches('/'), &category, KINETIC_VERSION);
        return print_prebuilt(out, &uri, &deps);
    }

    let request = ImageRequest::new(
        ImageMode::Bundled,
        base.clone(),
        category.clone(),
        deps.requirements.clone(),
        RUNNER_SOURCE.to_owned(),
        DOCKERFILE_TEMPLATE.to_owned(),
    );
    let (image, cached) = match &cfg.project {
        Some(project) => {
            let builder =
                cloud_builder(&project.value, &cfg.zone.value, &cfg.cluster.value, false)?;
            let image = builder
                .bundled_image(&request)
                .map_err(|e| CliError::usage(e.to_string()))?;
            let cached = if args.offline {
                Cached::Unknown("--offline".to_owned())
            } else {
                let rt = crate::engine::runtime()?;
                match rt.block_on(builder.is_cached(&image)) {
                    Ok(true) => Cached::Yes,
                    Ok(false) => Cached::No,
                    Err(e) => Cached::Failed(e.to_string()),
                }
            };
            (Resolved::Bundled(image), cached)
        }
        None => {
            let inputs = ImageTagInputs {
                base_image: base,
                category,
                kinetic_version: KINETIC_VERSION.to_owned(),
                requirements: deps.requirements.clone(),
                runner_source: RUNNER_SOURCE.to_owned(),
                dockerfile_template: DOCKERFILE_TEMPLATE.to_owned(),
            };
            let description = inputs
                .describe()
                .map_err(|e| CliError::usage(e.to_string()))?;
            (
                Resolved::TagOnly(description),
                Cached::Unknown(
                    "no project: set --project, KINETIC_PROJECT or a profile".to_owned(),
                ),
            )
        }
    };
    print_bundled(out, &image, &cached, &deps)?;
    match cached {
        Cached::Failed(e) => Err(CliError::failed(format!(
            "cannot check Artifact Registry for the image: {e}"
        ))),
        _ => Ok(()),
    }
}

enum Resolved {
    Bundled(BundledImage),
    TagOnly(kinetic_core::image::ImageTagDescription),
}

impl Resolved {
    fn inputs(&self) -> &kinetic_core::image::ImageTagDescription {
        match self {
            Self::Bundled(b) => &b.inputs,
            Self::TagOnly(d) => d,
        }
    }

    fn uri(&self) -> Option<&str> {
        match self {
            Self::Bundled(b) => Some(&b.uri),
            Self::TagOnly(_) => None,
        }
    }
}

enum Cached {
    Yes,
    No,
    Unknown(String),
    Failed(String),
}

impl Cached {
    fn json(&self) -> Value {
        match self {
            Self::Yes => json!(true),
            Self::No => json!(false),
            _ => Value::Null,
        }
    }

    fn text(&self) -> String {
        match self {
            Self::Yes => "yes (no build needed)".to_owned(),
            Self::No => "no (the next job builds it)".to_owned(),
            Self::Unknown(why) => format!("unknown ({why})"),
            Self::Failed(e) => format!("unknown (the check failed: {e})"),
        }
    }
}

fn dependency_json(deps: &ResolvedRequirements) -> Value {
    json!({
        "dependency_file": deps.file.as_ref().map(|f| f.path.to_string_lossy().into_owned()),
        "requirements": deps.requirements,
        "warnings": deps.warnings.iter().map(ToString::to_string).collect::<Vec<_>>(),
    })
}

fn warn_all(deps: &ResolvedRequirements) {
    for warning in &deps.warnings {
        let level = if warning.is_informational() {
            "note"
        } else {
            "warning"
        };
        eprintln!("{level}: {warning}");
    }
}

fn dependency_line(deps: &ResolvedRequirements) -> String {
    match &deps.file {
        Some(f) => format!("{}", f.path.display()),
        None => "none found".to_owned(),
    }
}

fn print_bundled(
    out: &Output,
    image: &Resolved,
    cached: &Cached,
    deps: &ResolvedRequirements,
) -> Result<(), CliError> {
    let inputs = image.inputs();
    if out.is_json() {
        let mut v = json!({
            "mode": "bundled",
            "image": image.uri(),
            "tag": inputs.tag,
            "cached": cached.json(),
            "inputs": inputs,
        });
        if let (Value::Object(m), Value::Object(d)) = (&mut v, dependency_json(deps)) {
            m.extend(d);
        }
        if let Cached::Unknown(why) | Cached::Failed(why) = cached {
            v["cached_note"] = json!(why);
        }
        return out.json(&v);
    }
    warn_all(deps);
    let mut s = String::new();
    s.push_str(&format!(
        "Image:   {}\n",
        image
            .uri()
            .unwrap_or("(the registry needs a project; only the tag is known)")
    ));
    s.push_str(&format!("Tag:     {}\n", inputs.tag));
    s.push_str(&format!("Cached:  {}\n", cached.text()));
    s.push_str("Hash inputs:\n");
    s.push_str(&format!("  base image        {}\n", inputs.base_image));
    s.push_str(&format!("  category          {}\n", inputs.category));
    s.push_str(&format!("  kinetic version   {}\n", inputs.kinetic_version));
    s.push_str(&format!("  dependency file   {}\n", dependency_line(deps)));
    match (&inputs.requirements, &inputs.requirements_sha256) {
        (Some(text), Some(sha)) => {
            let n = text.lines().count();
            let lines = if n == 1 { "line" } else { "lines" };
            s.push_str(&format!(
                "  requirements      sha256 {sha} ({n} {lines}, filtered)\n"
            ));
        }
        _ => s.push_str("  requirements      none\n"),
    }
    s.push_str(&format!(
        "  runner            sha256 {}\n",
        inputs.runner_sha256
    ));
    s.push_str(&format!(
        "  Dockerfile        sha256 {}\n",
        inputs.dockerfile_sha256
    ));
    s.push_str(&format!("  => sha256         {}\n", inputs.hash));
    if let Some(text) = &inputs.requirements {
        s.push_str("Requirements baked in:\n");
        for line in text.lines() {
            s.push_str(&format!("  {line}\n"));
        }
    }
    emit(&s)
}

fn print_prebuilt(out: &Output, uri: &str, deps: &ResolvedRequirements) -> Result<(), CliError> {
    if out.is_json() {
        let mut v = json!({
            "mode": "prebuilt",
            "image": uri,
            "tag": uri.rsplit_once(':').map(|(_, t)| t),
            "cached": Value::Null,
            "cached_note": "prebuilt images are published with `kinetic build-image`; jobs never build them",
        });
        if let (Value::Object(m), Value::Object(d)) = (&mut v, dependency_json(deps)) {
            m.extend(d);
        }
        return out.json(&v);
    }
    warn_all(deps);
    let mut s = format!(
        "Image:   {uri}\nCached:  not applicable (published by `kinetic build-image`; jobs never build it)\nDependency file: {}\n",
        dependency_line(deps)
    );
    match &deps.requirements {
        Some(text) => {
            s.push_str("Installed when the job starts (uv pip install):\n");
            for line in text.lines() {
                s.push_str(&format!("  {line}\n"));
            }
        }
        None => s.push_str("Installed when the job starts: nothing\n"),
    }
    emit(&s)
}
