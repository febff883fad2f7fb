//! Long-running operations: each finishes at its due time, applying its
//! effect (a cluster running, a pool deleted, services enabled) or, when
//! scripted to fail, leaving what it made in `ERROR`. Rendered in the
//! shape of the API that started it (GKE's `Operation`, or
//! `google.longrunning.Operation`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{App, container};

/// Which API an operation belongs to (its JSON shape).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    Container,
    ServiceUsage,
    ArtifactRegistry,
}

/// What happens when an operation finishes.
#[derive(Debug, Clone)]
pub(crate) enum Effect {
    ClusterCreated { name: String },
    ClusterDeleted { name: String },
    ClusterUpdated { name: String, update: Value },
    PoolCreated { cluster: String, pool: String },
    PoolDeleted { cluster: String, pool: String },
    ServicesEnabled { services: Vec<String> },
    RepositoryCreated { name: String },
    RepositoryDeleted { name: String },
}

#[derive(Debug, Clone)]
pub(crate) struct Op {
    pub(crate) id: String,
    api: Api,
    pub(crate) kind: String,
    location: String,
    target: String,
    start_time: String,
    end_time: Option<String>,
    due: Instant,
    pub(crate) done: bool,
    error: Option<String>,
    effect: Option<Effect>,
}

#[derive(Debug)]
pub(crate) struct Operations {
    pub(crate) duration: Duration,
    ops: BTreeMap<String, Op>,
    failing: Vec<(String, String)>,
    next: u64,
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

impl Operations {
    pub(crate) fn new(duration: Duration) -> Self {
        Self {
            duration,
            ops: BTreeMap::new(),
            failing: Vec::new(),
            next: 0,
        }
    }

    pub(crate) fn fail_next(&mut self, kind: &str, message: &str) {
        self.failing.push((kind.to_owned(), message.to_owned()));
    }

    /// Start an operation of `kind` on `target`, taking `scale` × the
    /// operation time; returns its id.
    pub(crate) fn start(
        &mut self,
        api: Api,
        kind: &str,
        location: &str,
        target: &str,
        effect: Effect,
        scale: f64,
    ) -> String {
        self.next += 1;
        let id = match api {
            Api::Container => format!(
                "operation-{}-{:08x}",
                1_700_000_000_000u64 + self.next,
                self.next
            ),
            Api::ServiceUsage => format!("acf.p2-123456789012-{:08x}", self.next),
            Api::ArtifactRegistry => format!("{:08x}-0000-4000-8000-{:012x}", self.next, self.next),
        };
        let error = self
            .failing
            .iter()
            .position(|(k, _)| k == kind)
            .map(|i| self.failing.remove(i).1);
        self.ops.insert(
            id.clone(),
            Op {
                id: id.clone(),
                api,
                kind: kind.to_owned(),
                location: location.to_owned(),
                target: target.to_owned(),
                start_time: now(),
                end_time: None,
                due: Instant::now() + self.duration.mul_f64(scale),
                done: false,
                error,
                effect: Some(effect),
            },
        );
        id
    }

    pub(crate) fn get(&self, id: &str) -> Option<&Op> {
        self.ops.get(id)
    }

    /// The operation running on the cluster `name`'s resources, if any.
    pub(crate) fn running_on(&self, cluster_path: &str) -> Option<&Op> {
        self.ops
            .values()
            .find(|o| o.api == Api::Container && !o.done && o.target.contains(cluster_path))
    }
}

impl Op {
    /// The operation as its API renders it; `project` and `number` name
    /// the project.
    pub(crate) fn to_json(&self, project: &str, number: u64) -> Value {
        match self.api {
            Api::Container => {
                let mut v = json!({
                    "name": self.id,
                    "zone": self.location,
                    "operationType": self.kind,
                    "status": if self.done { "DONE" } else { "RUNNING" },
                    "selfLink": format!("https://container.googleapis.com/v1/projects/{number}/zones/{}/operations/{}", self.location, self.id),
                    "targetLink": format!("https://container.googleapis.com/v1/{}", self.target),
                    "startTime": self.start_time,
                });
                if let Some(end) = &self.end_time {
                    v["endTime"] = json!(end);
                }
                if !self.done {
                    v["progress"] = json!({"status": "RUNNING", "metrics": [
                        {"name": "CLUSTER_DEPLOYMENTS_TOTAL", "intValue": "10"}]});
                }
                if let (true, Some(e)) = (self.done, &self.error) {
                    v["error"] = json!({"code": 13, "message": e});
                    v["statusMessage"] = json!(e);
                }
                v
            }
            Api::ServiceUsage | Api::ArtifactRegistry => {
                let name = if self.api == Api::ServiceUsage {
                    format!("operations/{}", self.id)
                } else {
                    format!(
                        "projects/{project}/locations/{}/operations/{}",
                        self.location, self.id
                    )
                };
                let mut v = json!({"name": name, "done": self.done});
                if self.done {
                    match &self.error {
                        Some(e) => v["error"] = json!({"code": 13, "message": e}),
                        None => {
                            v["response"] =
                                json!({"@type": "type.googleapis.com/google.protobuf.Empty"})
                        }
                    }
                }
                v
            }
        }
    }
}

/// Finish every operation that is due, applying its effect.
pub(crate) fn advance(app: &App) {
    let finished: Vec<(Effect, Option<String>)> = {
        let mut st = app.lock();
        let now = Instant::now();
        let due: Vec<String> = st
            .ops
            .ops
            .values()
            .filter(|o| !o.done && o.due <= now)
            .map(|o| o.id.clone())
            .collect();
        let mut out = Vec::new();
        for id in due {
            if let Some(op) = st.ops.ops.get_mut(&id) {
                op.done = true;
                op.end_time = Some(super::operations::now());
                if let Some(effect) = op.effect.take() {
                    out.push((effect, op.error.clone()));
                }
            }
        }
        out
    };
    for (effect, error) in finished {
        container::finish(app, effect, error);
    }
}
