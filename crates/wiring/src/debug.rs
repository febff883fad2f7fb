//! Attaching a debugger to a debug job from this machine, as the `kinetic
//! jobs debug` command and the Python module's `debug_attach` do: a local
//! TCP port on loopback whose every connection is forwarded to the job's
//! debugger through its backend ([`kinetic_core::ports::Backend::port_forward`]:
//! the Kubernetes API's port-forward, or the local backend's loopback
//! port).

use std::net::SocketAddr;
use std::time::Duration;

use kinetic_core::debug::{DebugEndpoint, launch_configuration};
use kinetic_core::status::JobStatus;
use kinetic_engine::{EngineError, JobHandle};
use serde_json::Value;
use tokio::net::TcpListener;

/// How often the forwarder looks whether the job has ended.
const END_POLL: Duration = Duration::from_secs(2);

/// A local port forwarded to a debug job's debugger: made by
/// [`DebugForward::bind`], served by [`DebugForward::serve`].
#[derive(Debug)]
pub struct DebugForward {
    handle: JobHandle,
    listener: TcpListener,
    endpoint: DebugEndpoint,
}

/// Why a debug forward could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DebugForwardError {
    /// The local port cannot be listened on.
    #[error(
        "cannot listen on localhost:{port}: {source}; port {port} may already be in use (choose another with --port)"
    )]
    Bind {
        /// The port asked for.
        port: u16,
        /// The error.
        source: std::io::Error,
    },
    /// Waiting for the job's debugger failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl DebugForward {
    /// Listen on `127.0.0.1:local_port` (`0`: a free port), then wait up to
    /// `ready_timeout` for the job's debugger
    /// ([`JobHandle::wait_debug_ready`]). The port is taken first, so that
    /// one in use is said at once.
    ///
    /// # Errors
    /// [`DebugForwardError::Bind`] when the port is taken;
    /// [`DebugForwardError::Engine`] when the job ends first, is no debug
    /// job, or the wait times out.
    pub async fn bind(
        handle: JobHandle,
        local_port: u16,
        ready_timeout: Duration,
    ) -> Result<Self, DebugForwardError> {
        let listener = TcpListener::bind(("127.0.0.1", local_port))
            .await
            .map_err(|source| DebugForwardError::Bind {
                port: local_port,
                source,
            })?;
        let endpoint = handle
            .wait_debug_ready(ready_timeout, Duration::from_secs(1))
            .await?;
        Ok(Self {
            handle,
            listener,
            endpoint,
        })
    }

    /// The local address debuggers connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// What the job's runner said about its debugger.
    pub fn endpoint(&self) -> &DebugEndpoint {
        &self.endpoint
    }

    /// The VS Code `launch.json` attaching through this forward, mapping
    /// `local_root` (default `${workspaceFolder}`) to the job's workspace.
    pub fn launch_configuration(&self, local_root: Option<&str>) -> Value {
        launch_configuration(
            self.local_addr().port(),
            local_root,
            &self.endpoint.workspace,
        )
    }

    /// Forward every connection to the local port to the job's debug port,
    /// until the job ends; gives its final status. A connection the job's
    /// side refuses is closed and logged; the forward goes on.
    ///
    /// # Errors
    /// When the job's status cannot be read.
    pub async fn serve(self) -> Result<JobStatus, EngineError> {
        // The port as the job sees it, where its runner said debugpy listens.
        let job_port = self.endpoint.port;
        let mut poll = tokio::time::interval(END_POLL);
        loop {
            tokio::select! {
                accepted = self.listener.accept() => {
                    let (mut local, peer) = match accepted {
                        Ok(pair) => pair,
                        Err(e) => {
                            tracing::warn!("accepting a debugger connection failed: {e}");
                            continue;
                        }
                    };
                    let handle = self.handle.clone();
                    tokio::spawn(async move {
                        let mut remote = match handle.port_forward(job_port).await {
                            Ok(stream) => tokio_util::compat::FuturesAsyncReadCompatExt::compat(stream),
                            Err(e) => {
                                tracing::warn!(%peer, "cannot reach the job's debugger: {e}");
                                return;
                            }
                        };
                        if let Err(e) = tokio::io::copy_bidirectional(&mut local, &mut remote).await {
                            tracing::debug!(%peer, "debugger connection ended: {e}");
                        }
                    });
                }
                _ = poll.tick() => {
                    let state = self.handle.status().await?;
                    if state.status.is_terminal() || state.status == JobStatus::NotFound {
                        return Ok(state.status);
                    }
                }
            }
        }
    }
}
