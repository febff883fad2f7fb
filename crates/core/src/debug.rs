//! Debug jobs: what a job run with `debug` (Kinetic's `debug=True`) asks of
//! the runner and the backend, the readiness marker the runner writes once
//! debugpy listens, and the VS Code launch configuration a client attaches
//! with.
//!
//! The runner of a debug job starts debugpy on the leader, writes
//! `{job_id}/.debug_ready` ([`DebugEndpoint`]), waits for a client, and
//! stops before the call; the client waits for the marker
//! (`kinetic_engine::JobHandle::wait_debug_ready`), forwards a local port
//! to the job's debug port ([`crate::ports::Backend::port_forward`]) and
//! prints [`launch_configuration`]. A debug job is kept when its value
//! comes back (its logs and objects stay for inspection) unless cleanup is
//! asked for.
//!
//! ```
//! use kinetic_core::debug::{launch_configuration, DebugEndpoint};
//! let ready = DebugEndpoint::parse(br#"{"host":"10.0.0.7","port":5678,"workspace":"/tmp/kinetic-run-x/workspace"}"#)?;
//! let launch = launch_configuration(5678, Some("/home/me/proj"), &ready.workspace);
//! assert_eq!(launch["configurations"][0]["request"], "attach");
//! assert_eq!(launch["configurations"][0]["pathMappings"][0]["remoteRoot"], "/tmp/kinetic-run-x/workspace");
//! # Ok::<(), kinetic_core::debug::DebugError>(())
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The port debugpy listens on in a pod, as Kinetic's.
pub const DEFAULT_PORT: u16 = 5678;

/// How long the runner waits for a debugger to attach, as Kinetic's
/// `KINETIC_DEBUG_WAIT_TIMEOUT` default.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(600);

/// How long a client waits for a debug job's debugger to listen, as
/// Kinetic's `debug_attach`.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(600);

/// Where the workspace of Kinetic's pods sits; the remote root of the
/// launch configuration when the marker names none.
pub const KINETIC_REMOTE_ROOT: &str = "/tmp/workspace";

/// The variable naming the address debugpy listens on (the pod's IP on
/// Kubernetes, through the downward API; a loopback address locally).
pub const HOST_ENV: &str = "KINETIC_DEBUG_HOST";

/// The variable naming the port debugpy listens on, when a backend picks
/// one other than the spec's (the local backend, where jobs share the
/// host's ports).
pub const PORT_ENV: &str = "KINETIC_DEBUG_PORT";

/// The environment a debug job's leader gets on Kubernetes, as Kinetic's
/// pods do (`KINETIC_DEBUG`, `PYTHONBREAKPOINT`, the wait timeout and the
/// port); the runner reads its settings from `spec.json`, these tell the
/// user's code that it runs under a debugger.
pub fn pod_env(port: u16, wait_timeout: Duration) -> Vec<(&'static str, String)> {
    vec![
        ("KINETIC_DEBUG", "1".to_owned()),
        ("PYTHONBREAKPOINT", "debugpy.breakpoint".to_owned()),
        (
            "KINETIC_DEBUG_WAIT_TIMEOUT",
            wait_timeout.as_secs().to_string(),
        ),
        (PORT_ENV, port.to_string()),
    ]
}

/// The variable that tells a host of a multi-host debug job other than the
/// leader to wait, before its call, until the leader's debugger has a
/// client (`1`), as Kinetic's Pathways workers get it.
pub const WAIT_LEADER_ENV: &str = "KINETIC_DEBUG_WAIT_LEADER";

/// What the other hosts allow the leader for its own setup (download,
/// install, extract) on top of its wait for a client, as Kinetic's
/// workers do: they wait at most [`worker_wait_bound`].
pub const LEADER_SETUP_GRACE: Duration = Duration::from_secs(60);

/// How long a host told to wait for the leader ([`WAIT_LEADER_ENV`])
/// waits for it at most: the leader's wait for a client plus
/// [`LEADER_SETUP_GRACE`]; past it the host fails in phase
/// `debugger setup`.
///
/// ```
/// use std::time::Duration;
/// use kinetic_core::debug::worker_wait_bound;
/// assert_eq!(worker_wait_bound(Duration::from_secs(600)), Duration::from_secs(660));
/// ```
pub fn worker_wait_bound(wait_timeout: Duration) -> Duration {
    wait_timeout + LEADER_SETUP_GRACE
}

/// The environment of the other hosts of a multi-host debug job on
/// Kubernetes, as Kinetic's Pathways workers get it: told to wait for the
/// leader ([`WAIT_LEADER_ENV`]) and for how long the leader waits for a
/// client; no `KINETIC_DEBUG`, no breakpoint hook and no port (they run no
/// debugger).
pub fn worker_pod_env(wait_timeout: Duration) -> Vec<(&'static str, String)> {
    vec![
        (WAIT_LEADER_ENV, "1".to_owned()),
        (
            "KINETIC_DEBUG_WAIT_TIMEOUT",
            wait_timeout.as_secs().to_string(),
        ),
    ]
}

/// A readiness marker that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("the debug readiness marker is not valid: {message}")]
pub struct DebugError {
    message: String,
}

/// What the runner writes to `{job_id}/.debug_ready` once debugpy
/// listens: where, and where the job's workspace sits (the remote root of
/// the path mappings).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DebugEndpoint {
    /// The address debugpy listens on, as the job sees it.
    pub host: String,
    /// The port debugpy listens on, as the job sees it.
    pub port: u16,
    /// The extracted project on the job's host.
    #[serde(default = "default_workspace")]
    pub workspace: String,
}

fn default_workspace() -> String {
    KINETIC_REMOTE_ROOT.to_owned()
}

impl DebugEndpoint {
    /// Parse a marker's bytes.
    ///
    /// # Errors
    /// [`DebugError`] when they are not the JSON object the runner writes.
    pub fn parse(bytes: &[u8]) -> Result<Self, DebugError> {
        serde_json::from_slice(bytes).map_err(|e| DebugError {
            message: format!("{e} (expected {{\"host\": …, \"port\": …, \"workspace\": …}})"),
        })
    }
}

/// The VS Code `launch.json` that attaches to a debug job through
/// `localhost:local_port`: `type: debugpy`, `request: attach`, and path
/// mappings from `local_root` (default `${workspaceFolder}`) to the job's
/// workspace.
pub fn launch_configuration(local_port: u16, local_root: Option<&str>, remote_root: &str) -> Value {
    json!({
        "version": "0.2.0",
        "configurations": [{
            "name": "Kinetic: attach to job",
            "type": "debugpy",
            "request": "attach",
            "connect": {"host": "localhost", "port": local_port},
            "pathMappings": [{
                "localRoot": local_root.unwrap_or("${workspaceFolder}"),
                "remoteRoot": remote_root,
            }],
            "justMyCode": false,
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_configuration_defaults_to_the_workspace_folder() {
        let launch = launch_configuration(6000, None, KINETIC_REMOTE_ROOT);
        let c = &launch["configurations"][0];
        assert_eq!(c["type"], "debugpy");
        assert_eq!(c["connect"], json!({"host": "localhost", "port": 6000}));
        assert_eq!(c["pathMappings"][0]["localRoot"], "${workspaceFolder}");
        assert_eq!(c["pathMappings"][0]["remoteRoot"], "/tmp/workspace");
    }

    #[test]
    fn markers_parse_and_bad_ones_say_what_is_expected() {
        let e = DebugEndpoint::parse(br#"{"host":"127.0.0.1","port":40000}"#).unwrap();
        assert_eq!(e.port, 40000);
        assert_eq!(e.workspace, KINETIC_REMOTE_ROOT);
        let err = DebugEndpoint::parse(b"ready").unwrap_err().to_string();
        assert!(err.contains("expected {\"host\""), "{err}");
    }

    #[test]
    fn pod_env_is_kinetics() {
        let env = pod_env(5678, DEFAULT_WAIT_TIMEOUT);
        assert!(env.contains(&("PYTHONBREAKPOINT", "debugpy.breakpoint".to_owned())));
        assert!(env.contains(&("KINETIC_DEBUG_WAIT_TIMEOUT", "600".to_owned())));
        assert!(env.contains(&("KINETIC_DEBUG_PORT", "5678".to_owned())));
    }
}
