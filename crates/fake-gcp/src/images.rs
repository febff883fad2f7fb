//! What the fake registry's images hold: each image is an environment on
//! this machine, and a pod of that image runs its container's `python3`
//! from it, never the interpreter the tests run on.
//!
//! - The fake Cloud Build makes the environment of each image it builds
//!   ([`ImageEnvironments::build`]): a fresh venv (never
//!   `--system-site-packages`) made by the base interpreter, the image's
//!   packages ([`ImageBuilder::packages`], the client's list its
//!   Dockerfile's install line is rendered from) and the context's
//!   `requirements.txt` installed by pip from a local wheelhouse (no index
//!   is reached; without a wheelhouse nothing can be installed), the files
//!   the Dockerfile's `COPY` lines add (the runner) under the
//!   environment's root and its `ENV` variables. Environments are
//!   cached by image under a directory kept between runs (a bundled image's
//!   tag hashes everything that changes it).
//! - An image no build made is known only when a test names its
//!   environment explicitly ([`ImageEnvironments::add_stand_in`]).
//! - Any other image cannot be pulled (`ErrImagePull`): a pod never runs
//!   on an interpreter its image does not name.
//!
//! The image's packages the wheelhouse lacks (the JAX build and `keras`:
//! hundreds of megabytes) are left out of the environment, and the build
//! log says so.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

/// The environment of one image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageEnvironment {
    /// The image's `python3`.
    pub python: PathBuf,
    /// The directory put first on the container's `PATH` (holds `python3`).
    pub bin: PathBuf,
    /// Where the files the image adds lie (`/app/x` at `root/app/x`).
    pub root: Option<PathBuf>,
    /// The image's `ENV` variables (the pod's own override them).
    pub env: BTreeMap<String, String>,
}

impl ImageEnvironment {
    /// The host path of `image_path` when the image adds that file.
    pub fn file(&self, image_path: &str) -> Option<PathBuf> {
        let rel = image_path.strip_prefix('/')?;
        let path = self.root.as_ref()?.join(rel);
        path.is_file().then_some(path)
    }
}

/// How the fake Cloud Build makes environments.
#[derive(Debug, Clone)]
pub struct ImageBuilder {
    /// The interpreter venvs are made from (`python3 -m venv`).
    pub base_python: PathBuf,
    /// Where pip finds every package (`--no-index --find-links`); `None`:
    /// there is no package index at all, so an image holds only what its
    /// recipe copies in, and a build whose requirements name a package
    /// fails as a build without network does.
    pub wheelhouse: Option<PathBuf>,
    /// Where environments are kept, by image.
    pub cache: PathBuf,
    /// The requirements each accelerator category's base image holds
    /// (`cpu` → `jax`, `keras`…): the client's
    /// ([`crate::ClientProfile::image_packages`]).
    pub packages: BTreeMap<String, Vec<String>>,
}

/// The environments of the fake registry's images.
#[derive(Debug)]
pub struct ImageEnvironments {
    builder: Option<ImageBuilder>,
    envs: Mutex<HashMap<String, ImageEnvironment>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `image`'s tag (`…/base:cpu-0123` → `cpu-0123`).
fn tag_of(image: &str) -> Option<&str> {
    let (name, tag) = image.rsplit_once(':')?;
    (!tag.contains('/') && !name.is_empty()).then_some(tag)
}

/// The accelerator category of a job image: a bundled image's tag
/// (`…/base:cpu-0123…`) or a prebuilt image's name (`…/base-gpu:0.1.0`).
fn category_of<'a>(image: &'a str, packages: &BTreeMap<String, Vec<String>>) -> Option<&'a str> {
    let tag = tag_of(image)?;
    let from_tag = tag.split('-').next().filter(|c| packages.contains_key(*c));
    let name = &image[..image.len() - tag.len() - 1];
    let from_name = name
        .rsplit('/')
        .next()
        .and_then(|n| n.strip_prefix("base-"))
        .filter(|c| packages.contains_key(*c));
    from_tag.or(from_name)
}

/// The project name a requirement starts with (`jax[tpu]>=0.4.6` →
/// `jax`), as PEP 508 spells names: letters, digits, `-`, `_` and `.`.
fn requirement_name(requirement: &str) -> &str {
    let end = requirement
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(requirement.len());
    &requirement[..end]
}

fn run(cmd: &mut Command, log: &mut String) -> Result<(), String> {
    log.push_str(&format!("$ {cmd:?}\n"));
    let out = cmd
        .output()
        .map_err(|e| format!("{log}cannot start {cmd:?}: {e}\n"))?;
    log.push_str(&String::from_utf8_lossy(&out.stdout));
    log.push_str(&String::from_utf8_lossy(&out.stderr));
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{log}{cmd:?} failed: {}\n", out.status))
    }
}

/// `program` as `PATH` finds it when it is a bare name (`python3`), else
/// as given (also when `PATH` has no such program: starting it fails).
fn on_path(program: PathBuf) -> PathBuf {
    if program.components().count() != 1 {
        return program;
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(&program))
        .find(|p| p.is_file())
        .unwrap_or(program)
}

/// `ENV a=1 b=2` (the `key=value` form).
fn env_line(line: &str, env: &mut BTreeMap<String, String>) {
    for word in line.split_whitespace() {
        if let Some((k, v)) = word.split_once('=') {
            env.insert(k.to_owned(), v.trim_matches('"').to_owned());
        }
    }
}

impl ImageEnvironments {
    /// Environments made by `builder` (`None`: only stand-ins).
    pub fn new(builder: Option<ImageBuilder>) -> Self {
        Self {
            builder,
            envs: Mutex::default(),
        }
    }

    /// Whether builds make environments (a builder is set).
    pub fn builds(&self) -> bool {
        self.builder.is_some()
    }

    /// The wheelhouse pods install from at start, when there is one.
    pub fn wheelhouse(&self) -> Option<&Path> {
        self.builder.as_ref().and_then(|b| b.wheelhouse.as_deref())
    }

    /// Say explicitly that `image` (one no build made, such as a fixed
    /// `KINETIC_IMAGE`) runs on `python`, its `PATH` the interpreter's
    /// directory: a named stand-in, never a fallback. A bare name
    /// (`python3`) is the one `PATH` finds now.
    pub fn add_stand_in(&self, image: &str, python: impl Into<PathBuf>) {
        let python = on_path(python.into());
        let bin = python
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
        lock(&self.envs).insert(
            image.to_owned(),
            ImageEnvironment {
                python,
                bin,
                root: None,
                env: BTreeMap::new(),
            },
        );
    }

    /// The environment of `image`, when the registry holds one.
    pub fn get(&self, image: &str) -> Option<ImageEnvironment> {
        lock(&self.envs).get(image).cloned()
    }

    /// Make the environment of `image` from a build context (`files` by
    /// name: `Dockerfile`, the runner, `requirements.txt`), or reuse the
    /// cached one. Returns the build log, or the log of the failure.
    pub fn build(&self, image: &str, files: &BTreeMap<String, String>) -> Result<String, String> {
        self.build_or_reuse(image, files, true)
            .unwrap_or_else(|| Ok(String::new()))
    }

    /// The cached environment of `image` for these `files`, registered as
    /// [`ImageEnvironments::build`] does, or `None` when it must be made.
    pub fn reuse(&self, image: &str, files: &BTreeMap<String, String>) -> Option<String> {
        self.build_or_reuse(image, files, false)?.ok()
    }

    fn build_or_reuse(
        &self,
        image: &str,
        files: &BTreeMap<String, String>,
        make: bool,
    ) -> Option<Result<String, String>> {
        let Some(builder) = &self.builder else {
            return Some(Ok(String::new()));
        };
        let Some(packages) =
            category_of(image, &builder.packages).and_then(|c| builder.packages.get(c))
        else {
            return Some(Err(format!(
                "the fake Cloud Build cannot tell the accelerator category of {image} (expected a bundled tag cpu-…, gpu-…, tpu-… or a prebuilt base-cpu, base-gpu, base-tpu image)\n"
            )));
        };
        let dockerfile = files.get("Dockerfile").map(String::as_str).unwrap_or("");
        let wheels: std::collections::BTreeSet<String> = builder
            .wheelhouse
            .as_ref()
            .and_then(|w| std::fs::read_dir(w).ok())
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().to_lowercase())
                    .collect()
            })
            .unwrap_or_default();
        let in_wheelhouse = |p: &str| {
            let name = requirement_name(p).to_lowercase().replace('-', "_");
            wheels.iter().any(|w| w.starts_with(&format!("{name}-")))
        };
        let (install, left_out): (Vec<&str>, Vec<&str>) = packages
            .iter()
            .map(String::as_str)
            .partition(|p| in_wheelhouse(p));
        // The key: everything that changes the environment.
        let mut key = Sha256::new();
        for part in [
            image,
            &builder.base_python.display().to_string(),
            &wheels.iter().cloned().collect::<Vec<_>>().join(","),
        ] {
            key.update(part.as_bytes());
            key.update(b"\n");
        }
        for (name, text) in files {
            key.update(name.as_bytes());
            key.update(text.as_bytes());
        }
        let key = hex::encode(key.finalize());
        let dir = builder.cache.join(&key[..16]);
        let mut log = format!("fake image {image}: environment {}\n", dir.display());
        if !left_out.is_empty() {
            let wheelhouse = builder.wheelhouse.as_ref().map_or_else(
                || "no wheelhouse: the fake has no package index".to_owned(),
                |w| format!("not in the wheelhouse {}", w.display()),
            );
            log.push_str(&format!(
                "left out ({wheelhouse}): {}\n",
                left_out.join(" ")
            ));
        }
        if !dir.join("venv/bin/python3").exists() {
            if !make {
                return None;
            }
            if let Err(e) = std::fs::create_dir_all(&builder.cache) {
                return Some(Err(format!("{log}{}: {e}\n", builder.cache.display())));
            }
            let part = builder
                .cache
                .join(format!("{}.part-{}", &key[..16], std::process::id()));
            let _ = std::fs::remove_dir_all(&part);
            let made = self.make(builder, &part, &install, files, dockerfile, &mut log);
            match made {
                Ok(()) => {
                    if std::fs::rename(&part, &dir).is_err() {
                        // Another server made it meanwhile.
                        let _ = std::fs::remove_dir_all(&part);
                    }
                }
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&part);
                    return Some(Err(e));
                }
            }
        } else {
            log.push_str("cached\n");
        }
        let mut env = BTreeMap::new();
        for line in dockerfile.lines() {
            if let Some(rest) = line.trim().strip_prefix("ENV ") {
                env_line(rest, &mut env);
            }
        }
        let bin = dir.join("venv").join("bin");
        lock(&self.envs).insert(
            image.to_owned(),
            ImageEnvironment {
                python: bin.join("python3"),
                bin,
                root: Some(dir.join("root")),
                env,
            },
        );
        Some(Ok(log))
    }

    fn make(
        &self,
        builder: &ImageBuilder,
        dir: &Path,
        install: &[&str],
        files: &BTreeMap<String, String>,
        dockerfile: &str,
        log: &mut String,
    ) -> Result<(), String> {
        let venv = dir.join("venv");
        run(
            Command::new(&builder.base_python)
                .args(["-m", "venv"])
                .arg(&venv),
            log,
        )?;
        let mut pip = Command::new(venv.join("bin").join("python3"));
        pip.args([
            "-m",
            "pip",
            "install",
            "--no-index",
            "--disable-pip-version-check",
            "--no-input",
            "-q",
        ]);
        match &builder.wheelhouse {
            Some(wheelhouse) => {
                pip.arg("--find-links").arg(wheelhouse);
            }
            None => log.push_str(
                "no wheelhouse: the fake Cloud Build has no package index, so no requirement can be installed\n",
            ),
        }
        pip.args(install);
        if let Some(requirements) = files.get("requirements.txt") {
            let path = dir.join("requirements.txt");
            std::fs::write(&path, requirements).map_err(|e| format!("{log}{e}\n"))?;
            pip.arg("-r").arg(&path);
        }
        if !install.is_empty() || files.contains_key("requirements.txt") {
            run(pip.env_remove("PIP_REQUIRE_VIRTUALENV"), log)?;
        }
        // What the recipe's COPY lines add from the context.
        for line in dockerfile.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            if let ["COPY", src, dst] = words.as_slice()
                && let Some(text) = files.get(*src)
            {
                let dst = if dst.ends_with('/') {
                    format!("{dst}{src}")
                } else {
                    (*dst).to_owned()
                };
                let path = dir.join("root").join(dst.trim_start_matches('/'));
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| format!("{log}{e}\n"))?;
                }
                std::fs::write(&path, text).map_err(|e| format!("{log}{e}\n"))?;
                log.push_str(&format!("COPY {src} {dst}\n"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_and_env_lines() {
        let packages: BTreeMap<String, Vec<String>> = ["cpu", "gpu", "tpu"]
            .into_iter()
            .map(|c| (c.to_owned(), vec!["jax".to_owned()]))
            .collect();
        assert_eq!(
            tag_of("us-docker.pkg.dev/p/r/base:cpu-0123"),
            Some("cpu-0123")
        );
        assert_eq!(tag_of("localhost:5000/base"), None);
        assert_eq!(
            category_of("us-docker.pkg.dev/p/r/base:tpu-0123", &packages),
            Some("tpu")
        );
        assert_eq!(
            category_of("us-docker.pkg.dev/p/r/base-gpu:0.1.0", &packages),
            Some("gpu")
        );
        assert_eq!(
            category_of("us-docker.pkg.dev/p/r/base:0.1.0", &packages),
            None
        );
        assert_eq!(requirement_name("jax[tpu]>=0.4.6"), "jax");
        assert_eq!(
            requirement_name("google-cloud-storage"),
            "google-cloud-storage"
        );
        let mut env = BTreeMap::new();
        env_line("KERAS_BACKEND=jax PYTHONUNBUFFERED=1", &mut env);
        assert_eq!(env.get("KERAS_BACKEND").map(String::as_str), Some("jax"));
    }

    #[test]
    fn an_image_is_known_only_when_built_or_named() {
        let images = ImageEnvironments::new(None);
        assert_eq!(images.get("kinetic/base-cpu:0.1.0"), None);
        images.add_stand_in("kinetic/base-cpu:0.1.0", "/opt/py/bin/python3");
        let env = images.get("kinetic/base-cpu:0.1.0").expect("named");
        assert_eq!(env.bin, PathBuf::from("/opt/py/bin"));
        assert_eq!(env.file("/app/kinetic_runner.py"), None);
    }
}
