//! List: the jobs of the backend's kind and app in its namespace.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinetic_core::ids::JobId;
use kinetic_core::ports::BackendError;
use kube::Resource;
use kube::api::ListParams;

use super::KubeBackend;
use crate::error;
use crate::pod::{LABEL_APP, LABEL_JOB_ID};
use crate::workload::{KindCall, Workload};

impl<W: Workload> KubeBackend<W> {
    /// [`Backend::list`](kinetic_core::ports::Backend::list): the ids of
    /// the jobs of the backend's app label in its namespace, sorted,
    /// those being deleted left out.
    pub(super) async fn list_jobs(&self) -> Result<Vec<JobId>, BackendError> {
        let ns = &self.options.namespace;
        let api = self.objects(ns).await?;
        let listed = api
            .list(&ListParams::default().labels(&format!("{LABEL_APP}={}", self.traits.app)))
            .await;
        let objects = match listed {
            Ok(objects) => objects,
            Err(e) if error::code(&e) == Some(404) => {
                // A kind the cluster does not serve (a CRD not installed).
                let client = self.client.get().await?;
                return Err(
                    match self
                        .workload
                        .explain_not_found(&client, ns, KindCall::List)
                        .await
                    {
                        Some(why) => why.with_source(e),
                        None => error::map(e, self.cx("list", None, ns)),
                    },
                );
            }
            Err(e) => return Err(error::map(e, self.cx("list", None, ns))),
        };
        let mut ids: Vec<JobId> = objects
            .items
            .iter()
            .filter_map(|o| listed_id(o.meta()))
            .collect();
        ids.sort();
        Ok(ids)
    }
}

/// The id of a listed object's job; `None` for an object being deleted
/// or without a job id.
fn listed_id(meta: &ObjectMeta) -> Option<JobId> {
    if meta.deletion_timestamp.is_some() {
        return None;
    }
    meta.labels.as_ref()?.get(LABEL_JOB_ID)?.parse().ok()
}
