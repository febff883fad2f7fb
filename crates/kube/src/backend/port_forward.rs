//! Port forwarding: the API server's `pods/portforward` to the job's
//! running log pod.

use kinetic_core::ports::{BackendCapabilities, BackendError, PortStream};
use kinetic_core::record::JobRecord;

use super::{KubeBackend, Named, not_found};
use crate::error::{self, Context};
use crate::status::sort_oldest_first;
use crate::workload::Workload;

/// The refusal to forward a port of a job that ended.
fn ended_forward(port: u16, named: &Named) -> BackendError {
    BackendError::invalid_input(format!(
        "cannot forward port {port} of job {}: it has ended",
        named.job_id
    ))
}

impl<W: Workload> KubeBackend<W> {
    /// [`Backend::port_forward`](kinetic_core::ports::Backend::port_forward):
    /// the API server's `pods/portforward` (a
    /// WebSocket) to the job's running pod, one per call.
    pub(super) async fn forward_port(
        &self,
        job: &JobRecord,
        port: u16,
    ) -> Result<PortStream, BackendError> {
        if !self.traits.capabilities.port_forward {
            return Err(BackendCapabilities::undeclared(self.name(), "port_forward"));
        }
        let named = Named::of(job);
        let mut pods = self
            .list_pods(&named.namespace, &self.traits.log_selector(&named.k8s_name))
            .await?;
        if pods.is_empty() {
            return Err(match self.get_object(&named).await? {
                None => not_found(self.name(), &named),
                // An ended workload whose pods are gone (a slice is scaled
                // to no group when it ends).
                Some(object) if self.workload.is_finished(&object) => ended_forward(port, &named),
                Some(_) => BackendError::invalid_input(format!(
                    "cannot forward port {port} of job {}: it has no pod yet",
                    named.job_id
                )),
            });
        }
        sort_oldest_first(&mut pods);
        let running = pods
            .iter()
            .rev()
            .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
        let Some(pod) = running else {
            return Err(BackendError::invalid_input(format!(
                "cannot forward port {port} of job {}: its pod is not running",
                named.job_id
            )));
        };
        if let Some(object) = self.get_object(&named).await?
            && self.workload.is_finished(&object)
        {
            // A slice's hosts hold their containers after the job ended.
            return Err(ended_forward(port, &named));
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let api = self.pods(&named.namespace).await?;
        let mut forwarder = api.portforward(&name, &[port]).await.map_err(|e| {
            error::map(
                e,
                Context {
                    verb: "create",
                    resource: "pods/portforward",
                    name: Some(&name),
                    namespace: &named.namespace,
                },
            )
        })?;
        let (Some(stream), Some(error)) = (forwarder.take_stream(port), forwarder.take_error(port))
        else {
            return Err(BackendError::other(format!(
                "the port-forward to pod {name} gave no stream for port {port}"
            )));
        };
        Ok(Box::new(
            tokio_util::compat::TokioAsyncReadCompatExt::compat(
                crate::forward::ForwardedPort::new(
                    stream,
                    Box::pin(error),
                    forwarder,
                    format!("port {port} of pod {name}"),
                ),
            ),
        ))
    }
}
