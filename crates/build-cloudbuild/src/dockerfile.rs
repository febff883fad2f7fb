//! The Dockerfile and build context of a job image: pure
//! functions from the request's inputs to bytes.
//!
//! The template (`kinetic_core::image::DOCKERFILE_TEMPLATE`) has three
//! placeholders, filled in as Python's `string.Template.safe_substitute`
//! would: `$base_image`, `$requirements_copy` and `$install_command` (also
//! spelled `${name}`); `$$` is a literal `$`; any other `$word` (a shell
//! variable in a `RUN` line) is left as it is.

use std::io::Write as _;

use kinetic_core::ports::BuildError;
use kinetic_core::protocol::RUNNER_FILE_NAME;

/// Path of the requirements file inside the image while it is built.
pub const REQUIREMENTS_IN_IMAGE: &str = "/tmp/requirements.txt";

/// Find-links page of the `libtpu` wheels, added to TPU installs.
pub const LIBTPU_FIND_LINKS: &str =
    "https://storage.googleapis.com/jax-releases/libtpu_releases.html";

/// Python packages every job image installs besides the user's, per
/// accelerator category, as words of a shell command: the list is
/// [`kinetic_core::image::IMAGE_PACKAGES`] (which the fake Cloud Build
/// installs too), requirements with extras or versions quoted.
pub fn accelerator_packages(category: &str) -> Result<String, BuildError> {
    let packages = kinetic_core::image::image_packages(category).ok_or_else(|| {
        BuildError::invalid_input(format!(
            "invalid accelerator category '{category}' for an image: expected cpu, gpu or tpu"
        ))
    })?;
    Ok(packages
        .iter()
        .map(|p| {
            if kinetic_core::image::requirement_name(p) == *p {
                (*p).to_owned()
            } else {
                format!("'{p}'")
            }
        })
        .collect::<Vec<_>>()
        .join(" "))
}

/// The `RUN` line that installs the accelerator's packages and, when
/// `with_requirements`, the user's requirements (with `uv`, into the
/// system Python).
pub fn install_command(category: &str, with_requirements: bool) -> Result<String, BuildError> {
    let mut line = format!(
        "RUN uv pip install --system {}",
        accelerator_packages(category)?
    );
    if with_requirements {
        line.push_str(" -r ");
        line.push_str(REQUIREMENTS_IN_IMAGE);
    }
    if category == "tpu" {
        line.push_str(" -f ");
        line.push_str(LIBTPU_FIND_LINKS);
    }
    Ok(line)
}

/// What a Dockerfile is rendered from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerfileInputs<'a> {
    /// The template text.
    pub template: &'a str,
    /// The base image (`python:3.11-slim`).
    pub base_image: &'a str,
    /// `cpu`, `gpu` or `tpu`.
    pub category: &'a str,
    /// Whether a `requirements.txt` is in the context and installed.
    pub with_requirements: bool,
}

/// The Dockerfile for `inputs` (see the module documentation).
pub fn render_dockerfile(inputs: &DockerfileInputs<'_>) -> Result<String, BuildError> {
    if inputs.base_image.trim().is_empty() {
        return Err(BuildError::invalid_input(
            "the base image is empty: expected an image such as python:3.11-slim",
        ));
    }
    let requirements_copy = if inputs.with_requirements {
        format!("COPY requirements.txt {REQUIREMENTS_IN_IMAGE}")
    } else {
        String::new()
    };
    let install = install_command(inputs.category, inputs.with_requirements)?;
    Ok(substitute(inputs.template, |name| match name {
        "base_image" => Some(inputs.base_image),
        "requirements_copy" => Some(&requirements_copy),
        "install_command" => Some(&install),
        _ => None,
    }))
}

/// `string.Template.safe_substitute`: `$name` and `${name}` replaced when
/// `value` knows the name, `$$` → `$`, everything else kept.
fn substitute<'v>(template: &str, value: impl Fn(&str) -> Option<&'v str>) -> String {
    let mut out = String::with_capacity(template.len() + 256);
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
            continue;
        }
        let (name, consumed) = if let Some(braced) = after.strip_prefix('{') {
            match braced.find('}') {
                Some(end) if is_identifier(&braced[..end]) => (&braced[..end], end + 2),
                _ => ("", 0),
            }
        } else {
            let end = after
                .char_indices()
                .find(|&(i, c)| {
                    !(c == '_' || c.is_ascii_alphanumeric()) || (i == 0 && c.is_ascii_digit())
                })
                .map_or(after.len(), |(i, _)| i);
            (&after[..end], end)
        };
        match (consumed, value(name)) {
            (1.., Some(v)) => {
                out.push_str(v);
                rest = &after[consumed..];
            }
            _ => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// The files of a build context, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildContext {
    /// The rendered Dockerfile.
    pub dockerfile: String,
    /// The runner, copied to `/app/kinetic_runner.py`.
    pub runner_source: String,
    /// The filtered requirements, when there are any.
    pub requirements: Option<String>,
}

impl BuildContext {
    /// The files in archive order: `Dockerfile`, the runner,
    /// `requirements.txt` (when present).
    pub fn files(&self) -> Vec<(&'static str, &[u8])> {
        let mut files = vec![
            ("Dockerfile", self.dockerfile.as_bytes()),
            (RUNNER_FILE_NAME, self.runner_source.as_bytes()),
        ];
        if let Some(r) = &self.requirements {
            files.push(("requirements.txt", r.as_bytes()));
        }
        files
    }

    /// The context as a gzip tarball. Deterministic: equal contexts give
    /// equal bytes (mode 0644, owner 0, time 0, no gzip name or time).
    pub fn to_tar_gz(&self) -> Result<Vec<u8>, BuildError> {
        let io = |e: std::io::Error| {
            BuildError::other(format!("cannot write the build context archive: {e}")).with_source(e)
        };
        let gz = flate2::GzBuilder::new()
            .mtime(0)
            .write(Vec::new(), flate2::Compression::default());
        let mut tar = tar::Builder::new(gz);
        tar.mode(tar::HeaderMode::Deterministic);
        for (name, data) in self.files() {
            let mut header = tar::Header::new_ustar();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_mtime(0);
            header.set_uid(0);
            header.set_gid(0);
            header.set_entry_type(tar::EntryType::Regular);
            tar.append_data(&mut header, name, data).map_err(io)?;
        }
        let mut gz = tar.into_inner().map_err(io)?;
        gz.flush().map_err(io)?;
        gz.finish().map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitution_follows_safe_substitute() {
        let v = |n: &str| match n {
            "a" => Some("A"),
            "b_1" => Some("B"),
            _ => None,
        };
        assert_eq!(
            substitute("$a-${b_1}-$$a-$c-${c}-$-${", v),
            "A-B-$a-$c-${c}-$-${"
        );
        assert_eq!(substitute("x$a", v), "xA");
        assert_eq!(substitute("$ab $a.", v), "$ab A.");
        assert_eq!(substitute("$1a", v), "$1a");
        assert_eq!(substitute("", v), "");
    }

    #[test]
    fn install_lines_per_category() {
        assert_eq!(
            install_command("cpu", false).unwrap(),
            "RUN uv pip install --system jax keras cloudpickle"
        );
        assert_eq!(
            install_command("gpu", true).unwrap(),
            "RUN uv pip install --system 'jax[cuda12]' keras cloudpickle -r /tmp/requirements.txt"
        );
        assert_eq!(
            install_command("tpu", true).unwrap(),
            "RUN uv pip install --system 'jax[tpu]>=0.4.6' keras cloudpickle -r /tmp/requirements.txt -f https://storage.googleapis.com/jax-releases/libtpu_releases.html"
        );
        let err = install_command("fpga", false).unwrap_err().to_string();
        assert!(
            err.contains("'fpga'") && err.contains("cpu, gpu or tpu"),
            "{err}"
        );
    }

    #[test]
    fn tarballs_are_deterministic_and_hold_the_files() {
        let ctx = BuildContext {
            dockerfile: "FROM x\n".into(),
            runner_source: "print(1)\n".into(),
            requirements: Some("numpy\n".into()),
        };
        let a = ctx.to_tar_gz().unwrap();
        assert_eq!(a, ctx.to_tar_gz().unwrap());
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&a[..]));
        let mut seen = Vec::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
            seen.push((entry.path().unwrap().display().to_string(), text));
        }
        assert_eq!(
            seen,
            vec![
                ("Dockerfile".to_owned(), "FROM x\n".to_owned()),
                ("kinetic_runner.py".to_owned(), "print(1)\n".to_owned()),
                ("requirements.txt".to_owned(), "numpy\n".to_owned()),
            ]
        );
    }
}
