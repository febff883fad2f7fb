//! Cleanup: the job's object deleted in the foreground (its Secret and
//! kept log with it), and the wait for the deletion to finish.

use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kinetic_core::ports::{BackendError, CleanupWait};
use kinetic_core::record::JobRecord;
use kinetic_core::retry::Backoff;
use kube::Resource;
use kube::api::{Api, DeleteParams, WatchEvent, WatchParams};

use super::{KubeBackend, Named, log_map_name};
use crate::error;
use crate::pod;
use crate::workload::Workload;

/// How a watch for an object's deletion ended.
enum Watched {
    /// It saw the object deleted.
    Deleted,
    /// It ended (its timeout, an expired version, a broken stream).
    Ended,
    /// It could not be opened.
    Failed,
}

/// The longest pause between polls of an object being deleted, when it
/// cannot be watched.
pub const MAX_DELETION_POLL: Duration = Duration::from_secs(5);
impl<W: Workload> KubeBackend<W> {
    /// [`Backend::cleanup`](kinetic_core::ports::Backend::cleanup): the
    /// object deleted in the foreground, its Secret and kept log by name
    /// too, then the wait for the object to go.
    pub(super) async fn cleanup_job(
        &self,
        record: &JobRecord,
        wait: CleanupWait,
    ) -> Result<(), BackendError> {
        let api = self.objects(&record.namespace).await?;
        match api
            .delete(&record.k8s_name, &DeleteParams::foreground())
            .await
        {
            Ok(_) => {}
            Err(e) if error::code(&e) == Some(404) => {}
            Err(e) => {
                return Err(error::map(
                    e,
                    self.cx("delete", Some(&record.k8s_name), &record.namespace),
                ));
            }
        }
        // Owned by the object, the Secret goes with it; delete it by name
        // too so that none outlives an object that was never fully created.
        let secrets: Api<Secret> = Api::namespaced(self.client.get().await?, &record.namespace);
        match secrets
            .delete(
                &pod::secret_name(&record.k8s_name),
                &DeleteParams::background(),
            )
            .await
        {
            Ok(_) => {}
            Err(e) if error::code(&e) == Some(404) => {}
            Err(e) => {
                tracing::warn!(job_id = %record.job_id, "could not delete the job's Secret: {e}")
            }
        }
        if self.traits.saves_logs {
            let maps: Api<ConfigMap> = Api::namespaced(self.client.get().await?, &record.namespace);
            match maps
                .delete(&log_map_name(&record.k8s_name), &DeleteParams::background())
                .await
            {
                Ok(_) => {}
                Err(e) if error::code(&e) == Some(404) => {}
                Err(e) => {
                    tracing::warn!(job_id = %record.job_id, "could not delete the job's kept log: {e}")
                }
            }
        }
        self.wait_deleted(&Named::of(record), wait).await
    }

    /// Wait for a foreground deletion to finish, for at most
    /// `wait.timeout`: a watch on the object, which the
    /// API server answers once when it goes, read again (with the object
    /// got afresh) when it ends or breaks; a watch that cannot be opened
    /// falls back to polling that backs off exponentially to
    /// `wait.poll_interval` (at most [`MAX_DELETION_POLL`]). A node that
    /// never confirms its pods' deletion thus costs a few requests, not
    /// several a second.
    pub(super) async fn wait_deleted(
        &self,
        named: &Named,
        wait: CleanupWait,
    ) -> Result<(), BackendError> {
        let started = tokio::time::Instant::now();
        let deadline = started + wait.timeout;
        let longest = wait
            .poll_interval
            .clamp(Duration::from_millis(20), MAX_DELETION_POLL);
        let backoff = Backoff::new(
            self.options
                .poll_interval
                .clamp(Duration::from_millis(20), longest),
            longest,
        );
        let mut failures = 0u32;
        loop {
            let object = match self.get_object(named).await {
                Ok(None) => return Ok(()),
                Ok(Some(object)) => Some(object),
                Err(e) if e.is_retryable() => None,
                Err(e) => return Err(e),
            };
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(BackendError::not_confirmed(
                    &named.job_id,
                    &format!(
                        "the deletion of {} {} in namespace {}",
                        self.traits.kind, named.k8s_name, named.namespace
                    ),
                    wait.timeout,
                ));
            }
            let left = deadline - now;
            let version = object
                .as_ref()
                .and_then(|o| o.meta().resource_version.clone());
            let opened = tokio::time::Instant::now();
            let watched = match version {
                Some(version) => self.watch_until_deleted(named, &version, left).await,
                None => Watched::Failed,
            };
            match watched {
                Watched::Deleted => continue,
                Watched::Ended if opened.elapsed() >= Duration::from_secs(1) => {
                    failures = 0;
                    continue;
                }
                Watched::Ended | Watched::Failed => {}
            }
            // No watch (refused, broken at once): poll, backing off.
            let pause = backoff.delay(failures).min(left);
            failures = failures.saturating_add(1);
            tokio::time::sleep(pause).await;
        }
    }

    /// Watch the object from `version` for at most `left` (whole seconds,
    /// at least one), until it is deleted.
    async fn watch_until_deleted(&self, named: &Named, version: &str, left: Duration) -> Watched {
        let Ok(api) = self.objects(&named.namespace).await else {
            return Watched::Failed;
        };
        let seconds = u32::try_from(left.as_secs().clamp(1, 290)).unwrap_or(290);
        let params = WatchParams::default()
            .fields(&format!("metadata.name={}", named.k8s_name))
            .timeout(seconds);
        let mut stream = match api.watch(&params, version).await {
            Ok(stream) => Box::pin(stream),
            Err(e) => {
                tracing::debug!("cannot watch {} {}: {e}", self.traits.kind, named.k8s_name);
                return Watched::Failed;
            }
        };
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Deleted(_)) => return Watched::Deleted,
                // An expired version, a broken stream: get it again.
                Ok(WatchEvent::Error(_)) | Err(_) => return Watched::Ended,
                Ok(_) => {}
            }
        }
        Watched::Ended
    }
}
