//! Following a job's log: its log pods one after the other (a retried
//! pod, a recreated leader), until the job ended and each was read.

use std::collections::BTreeSet;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_util::{AsyncBufReadExt, Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kinetic_core::ports::{BackendError, LogStream, terminal_line};
use kinetic_core::record::JobRecord;
use kube::api::{Api, ListParams, LogParams};

use super::{KubeBackend, Named, not_found};
use crate::error::{self, Context};
use crate::pod::CONTAINER_NAME;
use crate::status::{pod_started, sort_oldest_first};
use crate::workload::{Workload, WorkloadTraits};

impl<W: Workload> KubeBackend<W> {
    /// [`Backend::follow_logs`](kinetic_core::ports::Backend::follow_logs):
    /// the log pods followed one after the other until the job ended.
    pub(super) async fn follow(&self, record: &JobRecord) -> Result<LogStream, BackendError> {
        let Some(object) = self.get_object(&Named::of(record)).await? else {
            return Err(not_found(self.name(), &Named::of(record)));
        };
        let follower = Follower {
            cx: FollowCtx {
                object,
                objects: self.objects(&record.namespace).await?,
                pods: self.pods(&record.namespace).await?,
                workload: self.workload.clone(),
                log_selector: self.traits.log_selector(&record.k8s_name),
                all_selector: WorkloadTraits::pods_selector(&record.k8s_name),
                name: record.k8s_name.clone(),
                poll: self.options.poll_interval,
            },
            seen: BTreeSet::new(),
            current: None,
            done: false,
        };
        Ok(Box::pin(futures_util::stream::unfold(
            follower,
            |mut f| async move {
                let item = f.next_line().await?;
                Some((item, f))
            },
        )))
    }
}

type LineStream = Pin<Box<dyn Stream<Item = Result<String, BackendError>> + Send>>;

/// What a [`Follower`] reads from.
struct FollowCtx<W: Workload> {
    /// The object as the follow began (for [`Workload::ended_in_logs`]).
    object: W::Object,
    objects: Api<W::Object>,
    pods: Api<Pod>,
    workload: Arc<W>,
    log_selector: String,
    all_selector: String,
    name: String,
    poll: Duration,
}

/// Follows a job's log pods one after the other (a retried pod's log, or
/// a recreated group's leader, follows the first's), ending once the job
/// ended and every started log pod was read to its end.
struct Follower<W: Workload> {
    cx: FollowCtx<W>,
    /// Pods already followed, by uid (a recreated pod keeps its name).
    seen: BTreeSet<String>,
    current: Option<LineStream>,
    done: bool,
}

fn pod_key(pod: &Pod) -> String {
    pod.metadata
        .uid
        .clone()
        .or_else(|| pod.metadata.name.clone())
        .unwrap_or_default()
}

impl<W: Workload> Follower<W> {
    async fn next_line(&mut self) -> Option<Result<String, BackendError>> {
        loop {
            if self.done {
                return None;
            }
            if let Some(stream) = self.current.as_mut() {
                match stream.next().await {
                    Some(item) => {
                        // A line that tells the job ended is its last.
                        if let Ok(line) = &item
                            && self
                                .cx
                                .workload
                                .ended_in_logs(&self.cx.object, std::slice::from_ref(line))
                                .is_some()
                        {
                            self.done = true;
                        }
                        return Some(item);
                    }
                    None => self.current = None,
                }
                continue;
            }
            let cx = &self.cx;
            let mut pods = match cx
                .pods
                .list(&ListParams::default().labels(&cx.all_selector))
                .await
            {
                Ok(l) => l.items,
                Err(e) => {
                    self.done = true;
                    return Some(Err(error::map(
                        e,
                        Context {
                            verb: "list",
                            resource: "pods",
                            name: None,
                            namespace: "",
                        },
                    )));
                }
            };
            sort_oldest_first(&mut pods);
            let log_pods = label_match(&pods, &cx.log_selector);
            if let Some(pod) = log_pods
                .into_iter()
                .find(|p| pod_started(p) && !self.seen.contains(&pod_key(p)))
            {
                let name = pod.metadata.name.clone().unwrap_or_default();
                self.seen.insert(pod_key(pod));
                let params = LogParams {
                    container: Some(CONTAINER_NAME.to_owned()),
                    follow: true,
                    ..LogParams::default()
                };
                match cx.pods.log_stream(&name, &params).await {
                    Ok(reader) => {
                        let lines = reader.lines().map(|l| {
                            l.map(|t| terminal_line(&t).to_owned()).map_err(|e| {
                                BackendError::unavailable(format!("log stream broke: {e}"))
                                    .with_source(e)
                            })
                        });
                        self.current = Some(Box::pin(lines));
                    }
                    Err(e) => tracing::debug!("cannot follow the log of pod {name}: {e}"),
                }
                continue;
            }
            let object = match cx.objects.get(&cx.name).await {
                Ok(o) => o,
                Err(_) => {
                    self.done = true;
                    return None;
                }
            };
            let state = cx.workload.state(&object, &pods, &[], SystemTime::now());
            if state.status.is_terminal() {
                self.done = true;
                return None;
            }
            tokio::time::sleep(cx.poll).await;
        }
    }
}

/// The pods whose labels match `selector` (`k=v` terms joined by `,`).
fn label_match<'a>(pods: &'a [Pod], selector: &str) -> Vec<&'a Pod> {
    let terms: Vec<(&str, &str)> = selector
        .split(',')
        .filter_map(|t| t.split_once('='))
        .collect();
    pods.iter()
        .filter(|p| {
            let labels = p.metadata.labels.as_ref();
            terms
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(*k)).is_some_and(|have| have == v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_match_labels_exactly() {
        let pod = |labels: &[(&str, &str)]| Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Pod::default()
        };
        let pods = [
            pod(&[("job-name", "a"), ("idx", "0")]),
            pod(&[("job-name", "a"), ("idx", "1")]),
            pod(&[("job-name", "b"), ("idx", "0")]),
        ];
        assert_eq!(label_match(&pods, "job-name=a").len(), 2);
        assert_eq!(label_match(&pods, "job-name=a,idx=0").len(), 1);
        assert_eq!(label_match(&pods, "job-name=c").len(), 0);
    }
}
