//! `kinetic image resolve [DIR]`: the image a job from DIR would run in,
//! whether the cluster's Artifact Registry already holds it, and what went
//! into its tag. The request is planned by the engine's own step
//! ([`kinetic_core::plan::image`]); cloud access is the wiring's
//! ([`crate::engine::cloud_builder`]).

use std::path::{Path, PathBuf};

use kinetic_build_cloudbuild::{BundledImage, KINETIC_VERSION};
use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_core::image::{ImageTagInputs, prebuilt_image_uri};
use kinetic_core::plan::{self, ImageChoice};
use kinetic_core::ports::ImageMode;
use kinetic_core::requirements::{RequirementsMode, ResolvedRequirements, resolve};
use kinetic_core::settings::Settings;
use serde_json::{Value, json};

use crate::engine::{Invocation, cloud_builder};
use crate::error::{CliError, build_error};
use crate::flags::{ModeArg, TargetArgs, python_version};
use crate::render::{self, Output, emit};

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

pub(crate) fn run(args: &ImageArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    match &args.command {
        ImageCommand::Resolve(a) => resolve_image(a, inv, out),
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

fn resolve_image(args: &ResolveArgs, inv: &Invocation, out: &Output) -> Result<(), CliError> {
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    check_dir(&dir)?;
    let accelerator =
        AcceleratorSpec::parse(&args.accelerator).map_err(|e| CliError::usage(e.to_string()))?;
    let python = python_version(args.python.as_deref())?;
    let mut settings_args = args.target.settings_args(inv);
    if let Some(repo) = &args.base_image_repo {
        settings_args = settings_args.base_image_repo(repo);
    }
    let settings = inv.settings(&settings_args)?;
    let mode = match RequirementsMode::from(args.mode) {
        RequirementsMode::Prebuilt => ImageMode::Prebuilt {
            repo: settings
                .base_image_repo
                .value
                .trim_end_matches('/')
                .to_owned(),
        },
        _ => ImageMode::Bundled,
    };
    let deps = resolve(
        &dir,
        settings.home.as_deref(),
        plan::requirements_mode(&mode),
    )
    .map_err(|e| CliError::failed(e.to_string()))?;
    // The same planning step a job's submission takes.
    let image = plan::image(&mode, &python, &accelerator, Ok(deps.clone()))
        .map_err(|e| CliError::failed(e.to_string()))?;
    let ImageChoice::Resolve(request) = image.image else {
        return Err(CliError::failed("no image to resolve for this mode"));
    };
    if let ImageMode::Prebuilt { repo } = &request.mode {
        let uri = prebuilt_image_uri(repo, &request.category, KINETIC_VERSION);
        return print_prebuilt(out, &uri, &deps);
    }
    let (image, cached) = match &settings.project {
        Some(_) => resolve_bundled(&settings, &request, args.offline)?,
        None => {
            let inputs = ImageTagInputs {
                base_image: request.base_image.clone(),
                category: request.category.clone(),
                kinetic_version: KINETIC_VERSION.to_owned(),
                requirements: request.requirements.clone(),
                runner_source: request.runner_source.clone(),
                dockerfile_template: request.dockerfile_template.clone(),
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

/// The bundled image in the configured cluster's registry, and whether it
/// is there (unless `offline`).
fn resolve_bundled(
    settings: &Settings,
    request: &kinetic_core::ports::ImageRequest,
    offline: bool,
) -> Result<(Resolved, Cached), CliError> {
    let builder = cloud_builder(settings, false)?;
    let image = builder.bundled_image(request).map_err(build_error)?;
    let cached = if offline {
        Cached::Unknown("--offline".to_owned())
    } else {
        let rt = crate::engine::runtime()?;
        match rt.block_on(builder.is_cached(&image)) {
            Ok(true) => Cached::Yes,
            Ok(false) => Cached::No,
            Err(e) => Cached::Failed(e.to_string()),
        }
    };
    Ok((Resolved::Bundled(image), cached))
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
        render::notice(warning.is_informational(), &warning.to_string());
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
        return Ok(out.json(&v)?);
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
    Ok(emit(&s)?)
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
        return Ok(out.json(&v)?);
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
    Ok(emit(&s)?)
}
