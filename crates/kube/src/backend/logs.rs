//! Logs: the log pods' logs across their restarts, and the log kept in
//! a ConfigMap for kinds whose pods go with the job.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinetic_core::ports::{BackendError, LogOptions, tail_lines};
use kinetic_core::record::JobRecord;
use kube::api::{Api, LogParams, PostParams};

use super::{KubeBackend, Named, not_found};
use crate::error::{self, Context};
use crate::pod::{CONTAINER_NAME, LABEL_APP, LABEL_JOB_ID};
use crate::workload::Workload;

impl<W: Workload> KubeBackend<W> {
    /// [`Backend::logs`](kinetic_core::ports::Backend::logs): the kept
    /// log once there is one, the log pods' otherwise.
    pub(super) async fn job_logs(
        &self,
        record: &JobRecord,
        options: LogOptions,
    ) -> Result<String, BackendError> {
        if self.traits.saves_logs
            && let Some(text) = self.saved_log(record).await?
        {
            return Ok(match options.tail {
                Some(n) => tail_lines(&text, n),
                None => text,
            });
        }
        self.pod_logs(&Named::of(record), options).await
    }

    /// The log kept in the job's ConfigMap, if any.
    async fn saved_log(&self, record: &JobRecord) -> Result<Option<String>, BackendError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.get().await?, &record.namespace);
        match api.get(&log_map_name(&record.k8s_name)).await {
            Ok(map) => Ok(map.data.and_then(|mut d| d.remove(LOG_KEY))),
            Err(e) if error::code(&e) == Some(404) => Ok(None),
            Err(e) => Err(error::map(
                e,
                Context {
                    verb: "get",
                    resource: "configmaps",
                    name: None,
                    namespace: &record.namespace,
                },
            )),
        }
    }

    /// Keep the log of the job's log pods in its ConfigMap (see
    /// [`crate::WorkloadTraits::saves_logs`]); a log that cannot be read or kept is
    /// only a warning: the final state matters more.
    pub(super) async fn save_log(&self, record: &Named, object: &W::Object) {
        let text = match self.pod_logs(record, LogOptions::default()).await {
            Ok(text) => text,
            Err(e) => {
                tracing::warn!(job_id = %record.job_id, "could not read the job's log to keep it: {e}");
                return;
            }
        };
        let map = ConfigMap {
            metadata: ObjectMeta {
                name: Some(log_map_name(&record.k8s_name)),
                namespace: Some(record.namespace.clone()),
                labels: Some(BTreeMap::from([
                    (LABEL_APP.to_owned(), self.traits.app.to_owned()),
                    (LABEL_JOB_ID.to_owned(), record.job_id.to_string()),
                ])),
                owner_references: Some(vec![self.workload.owner(object)]),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(
                LOG_KEY.to_owned(),
                kept_end(&text).to_owned(),
            )])),
            ..ConfigMap::default()
        };
        let result = match self.client.get().await {
            Ok(client) => Api::<ConfigMap>::namespaced(client, &record.namespace)
                .create(&PostParams::default(), &map)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = result {
            tracing::warn!(job_id = %record.job_id, "could not keep the job's log: {e}");
        }
    }

    /// The log of the job's log pods, across their restarts.
    async fn pod_logs(&self, record: &Named, options: LogOptions) -> Result<String, BackendError> {
        let pods = self
            .list_pods(
                &record.namespace,
                &self.traits.log_selector(&record.k8s_name),
            )
            .await?;
        if pods.is_empty() && self.get_object(record).await?.is_none() {
            return Err(not_found(self.name(), record));
        }
        let api = self.pods(&record.namespace).await?;
        let single = pods.len() == 1;
        let mut text = String::new();
        for pod in &pods {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let restarts = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first())
                .map_or(0, |c| c.restart_count);
            let mut params = LogParams {
                container: Some(CONTAINER_NAME.to_owned()),
                ..LogParams::default()
            };
            if restarts > 0 {
                params.previous = true;
                if let Ok(prev) = api.logs(&name, &params).await {
                    text.push_str(&prev);
                }
                params.previous = false;
            }
            if single && restarts == 0 {
                params.tail_lines = options.tail.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
            }
            match api.logs(&name, &params).await {
                Ok(t) => text.push_str(&t),
                // 400: the container has not started (pending): no output yet.
                Err(e) if matches!(error::code(&e), Some(400 | 404)) => {}
                Err(e) => {
                    return Err(error::map(
                        e,
                        Context {
                            verb: "get",
                            resource: "pods/log",
                            name: None,
                            namespace: &record.namespace,
                        },
                    ));
                }
            }
        }
        Ok(match options.tail {
            Some(n) => tail_lines(&text, n),
            None => text,
        })
    }
}

/// The most of a job's log kept in its ConfigMap (whose limit is 1 MiB).
const SAVED_LOG_MAX: usize = 900 * 1024;
/// The ConfigMap key of a kept log.
const LOG_KEY: &str = "log";

/// Name of the ConfigMap keeping a job's log: `{name}-log`.
pub fn log_map_name(k8s_name: &str) -> String {
    format!("{k8s_name}-log")
}

/// The end of `text` a ConfigMap can hold (at most [`SAVED_LOG_MAX`]
/// bytes, starting on a character).
fn kept_end(text: &str) -> &str {
    let mut start = text.len().saturating_sub(SAVED_LOG_MAX);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_log_is_named_after_the_object() {
        assert_eq!(log_map_name("kinetic-abc"), "kinetic-abc-log");
    }

    #[test]
    fn a_kept_log_is_the_end_of_a_long_one_cut_on_a_character() {
        assert_eq!(kept_end("short"), "short");
        let long = format!("{}é{}", "a".repeat(10), "b".repeat(SAVED_LOG_MAX - 1));
        let kept = kept_end(&long);
        // The cut falls inside `é`: the kept end starts after it.
        assert!(kept.len() < SAVED_LOG_MAX);
        assert!(kept.chars().all(|c| c == 'b'));
        assert_eq!(kept.len(), SAVED_LOG_MAX - 1);
    }
}
