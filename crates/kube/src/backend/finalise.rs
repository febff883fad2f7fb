//! Final states: cancel, and the final state written on the object with
//! the kind's end patch, retried on conflicting writes.

use kinetic_core::ports::BackendError;
use kinetic_core::record::JobRecord;
use kinetic_core::status::{JobState, JobStatus, StatusReason};
use kube::Resource;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::{KubeBackend, Named};
use crate::error::{self, api_status};
use crate::pod::ANNOTATION_FINAL_STATE;
use crate::workload::Workload;

impl<W: Workload> KubeBackend<W> {
    /// Cancel: the final state `Failed (cancelled)` written on the
    /// object unless it ended (read from its pods first when the kind
    /// [`crate::WorkloadTraits::ends_in_pods`]).
    pub(super) async fn cancel_job(&self, record: &JobRecord) -> Result<(), BackendError> {
        if self.traits.ends_in_pods && self.job_status(record).await?.status.is_terminal() {
            return Ok(());
        }
        let state = JobState::new(JobStatus::Failed).with_reason(StatusReason::Cancelled);
        self.finalise(&Named::of(record), &state).await
    }

    /// Write a final state on the object unless it already ended, and end
    /// it with the kind's [`crate::WorkloadTraits::end_patch`] (a Job's
    /// `activeDeadlineSeconds` becomes 1; a LeaderWorkerSet's replicas
    /// 0), so its pods stop and the state stays. A concurrent change of
    /// the object (409 on the resource version) is read again and retried
    /// under [`KubeOptions::conflict_retry`]; other failures go to the
    /// caller (the engine's retry decorator retries the transient ones).
    pub(super) async fn finalise(
        &self,
        record: &Named,
        state: &JobState,
    ) -> Result<(), BackendError> {
        let api = self.objects(&record.namespace).await?;
        let text = serde_json::to_string(state).map_err(|e| {
            BackendError::other(format!("cannot encode a job state: {e}")).with_source(e)
        })?;
        let attempt = || async {
            let Some(object) = self.get_object(record).await? else {
                return Ok(());
            };
            if self.workload.is_finished(&object) {
                return Ok(());
            }
            if self.traits.saves_logs {
                self.save_log(record, &object).await;
            }
            let patch = final_patch(
                object.meta().resource_version.clone(),
                &text,
                &self.traits.end_patch,
            );
            match api
                .patch(
                    &record.k8s_name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => Ok(()),
                Err(e) if error::code(&e) == Some(404) => Ok(()),
                Err(e) => Err(error::map(
                    e,
                    self.cx("patch", Some(&record.k8s_name), &record.namespace),
                )),
            }
        };
        let conflict = |e: &BackendError| api_status(e).is_some_and(|s| s.code == 409);
        kinetic_engine::retry::retry_if(&self.options.conflict_retry, conflict, attempt)
            .await
            .map_err(|gave_up| {
                if !gave_up.exhausted {
                    return gave_up.error;
                }
                // Out of attempts on conflicts: retried already, here.
                BackendError::Unavailable {
                    message: format!(
                        "job {} kept changing while its final state was being written (gave up after {} attempts)",
                        record.job_id, gave_up.attempts
                    ),
                    retried: true,
                    source: Some(Box::new(gave_up.error)),
                }
            })
    }
}

/// The merge patch that writes final state `text` on an object at
/// `resource_version` (so that a concurrent change makes it conflict) and
/// stops its pods with the kind's `end` patch.
fn final_patch(
    resource_version: Option<String>,
    text: &str,
    end: &serde_json::Value,
) -> serde_json::Value {
    let mut patch = json!({
        "metadata": {
            "resourceVersion": resource_version,
            "annotations": {ANNOTATION_FINAL_STATE: text},
        },
    });
    if let (Some(p), serde_json::Value::Object(end)) = (patch.as_object_mut(), end) {
        p.extend(end.clone());
    }
    patch
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_patch_writes_the_state_at_the_version_and_ends_the_object() {
        let patch = final_patch(
            Some("42".into()),
            r#"{"status":"FAILED"}"#,
            &json!({"spec": {"replicas": 0}}),
        );
        assert_eq!(
            patch,
            json!({
                "metadata": {
                    "resourceVersion": "42",
                    "annotations": {ANNOTATION_FINAL_STATE: r#"{"status":"FAILED"}"#},
                },
                "spec": {"replicas": 0},
            })
        );
    }

    #[test]
    fn final_patch_without_an_end_patch_writes_the_state_alone() {
        let patch = final_patch(None, "{}", &serde_json::Value::Null);
        assert_eq!(patch.as_object().map(|o| o.len()), Some(1));
        assert_eq!(
            patch["metadata"]["annotations"][ANNOTATION_FINAL_STATE],
            "{}"
        );
    }
}
