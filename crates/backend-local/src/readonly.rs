//! FUSE data on the local backend: each mount of a job
//! ([`PreparedJob::fuse_mounts`]) is the directory of the store that holds
//! it (a `file://` store's data cache entry: no copy), bind-mounted
//! read-only at `{job}/mounts/{mount path}` — where the runner looks for
//! it (`--mount-root`) — in a mount namespace of the job's own.
//!
//! The namespace is made by `unshare --map-root-user --mount` (a user
//! namespace, so it needs no privilege), whose shell mounts each directory
//! with `mount --bind -o ro` and then starts the job. A read-only bind
//! mount is enforced by the kernel for every process, root included:
//! writing, creating, renaming or deleting under it fails with `EROFS`.
//! What it does not stop is a job that calls `mount(2)` itself to remount
//! its own namespace read-write; nothing outside the job's namespace sees
//! the mount, and the host's directory stays writable by its owner.
//!
//! `gs://` data cannot be mounted here (there is no GCS FUSE driver on the
//! host): such a job is refused with a message saying what works instead.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use kinetic_core::advice::{Advice, Knob};
use kinetic_core::ports::{BackendError, PreparedJob};

/// The shell run inside the namespace: `SRC DST` pairs, `--`, then the
/// command.
const MOUNT_SCRIPT: &str = r#"while [ "$1" != "--" ]; do mount --bind -o ro "$1" "$2" || exit 126; shift 2; done; shift; exec "$@""#;

/// One read-only mount: the host directory and where it is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bind {
    pub(crate) source: PathBuf,
    pub(crate) target: PathBuf,
}

/// The binds of `job`, shown under `mount_root`.
///
/// # Errors
/// [`BackendError::Unsupported`] for data that is not in a `file://`
/// store, or whose directory is missing.
pub(crate) fn binds(job: &PreparedJob, mount_root: &Path) -> Result<Vec<Bind>, BackendError> {
    job.fuse_mounts
        .iter()
        .map(|m| {
            let Some(dir) = m.dir_uri().strip_prefix("file://") else {
                return Err(BackendError::unsupported_with(
                    format!(
                        "the local backend cannot mount {} at {} (fuse=True): it has no GCS FUSE driver, and mounts read-only only data of its own file:// store (local paths, uploaded to its data cache)",
                        m.uri, m.mount_path
                    ),
                    Advice::new()
                        .text("pass the gs:// data without fuse (the runner downloads it), or run on a cluster (")
                        .set(Knob::Backend, "gke")
                        .text(")"),
                ));
            };
            let source = PathBuf::from(dir);
            if !source.is_dir() {
                return Err(BackendError::unsupported(format!(
                    "the local backend cannot mount {} at {}: {} is not a directory of its store",
                    m.uri,
                    m.mount_path,
                    source.display()
                )));
            }
            Ok(Bind {
                source,
                target: mount_root.join(m.mount_path.trim_start_matches('/')),
            })
        })
        .collect()
}

/// The command that starts `program` with `binds` mounted read-only
/// (made by [`binds`] and tried by [`check`]): `program` itself when there
/// are none. Creates the targets.
///
/// # Errors
/// When a target cannot be created.
pub(crate) fn command(program: &Path, binds: &[Bind]) -> Result<Command, BackendError> {
    if binds.is_empty() {
        return Ok(Command::new(program));
    }
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--map-root-user",
        "--mount",
        "--",
        "sh",
        "-c",
        MOUNT_SCRIPT,
        "sh",
    ]);
    for b in binds {
        std::fs::create_dir_all(&b.target).map_err(|e| {
            BackendError::other(format!("local backend: {}: {e}", b.target.display()))
        })?;
        cmd.arg(&b.source).arg(&b.target);
    }
    cmd.arg("--").arg(OsString::from(program));
    Ok(cmd)
}

/// Tries the mounts of `binds` once, on targets in a scratch directory
/// made under `root` and removed after (starting `true`), so that a host
/// refusing the namespace or the mounts is told before the job is claimed.
///
/// # Errors
/// [`BackendError::Unsupported`] naming what the host refused.
pub(crate) fn check(binds: &[Bind], root: &Path) -> Result<(), BackendError> {
    if binds.is_empty() {
        return Ok(());
    }
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let scratch = root.join(format!(
        "mount-probe-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let trial: Vec<Bind> = binds
        .iter()
        .enumerate()
        .map(|(i, b)| Bind {
            source: b.source.clone(),
            target: scratch.join(i.to_string()),
        })
        .collect();
    let ran = command(Path::new("true"), &trial).and_then(|mut cmd| {
        let out = cmd.stdin(Stdio::null()).output();
        let _ = std::fs::remove_dir_all(&scratch);
        out.map_err(|e| BackendError::other(format!("cannot run unshare: {e}")))
    })?;
    if ran.status.success() {
        return Ok(());
    }
    Err(BackendError::unsupported(format!(
        "the local backend shows FUSE data as read-only bind mounts in a user namespace of the job (unshare --map-root-user --mount), and this host refused them ({}); use fuse=False (the data is downloaded) on this host",
        String::from_utf8_lossy(&ran.stderr).trim()
    )))
}
