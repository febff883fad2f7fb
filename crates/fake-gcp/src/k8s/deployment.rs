//! Deployments' availability, as the Deployment controller reports it once
//! its pods are ready: the fake runs no pod for a Deployment (its
//! controllers, LeaderWorkerSet's among them, are modelled in-process), so
//! a Deployment is taken to have its replicas ready `start` after it was
//! first seen (image pull, start-up, readiness probe). Until then its
//! status says `Available: False` (`MinimumReplicasUnavailable`), as a
//! fresh one does; then `Available: True` (`MinimumReplicasAvailable`).
//! One found already available (a test's) stays available.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::meta::deleting;
use super::meta::{name_of, ns_of, uid_of};
use super::store::Store;

/// The stored resource.
pub(crate) const RESOURCE: &str = "deployments.apps";

/// Whether the Deployment `deployment` says `Available: True`.
pub(crate) fn available(deployment: &Value) -> bool {
    deployment
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Available")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// The status of a Deployment of `replicas` of which `ready` are ready.
pub(crate) fn status(replicas: i64, ready: i64) -> Value {
    let (available, reason, message) = if ready >= replicas {
        (
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    } else {
        (
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    };
    json!({
        "observedGeneration": 1,
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "unavailableReplicas": replicas - ready,
        "conditions": [
            {"type": "Available", "status": available, "reason": reason, "message": message},
            {"type": "Progressing", "status": "True", "reason": if ready >= replicas { "NewReplicaSetAvailable" } else { "ReplicaSetUpdated" }},
        ],
    })
}

/// The Deployment controller's view of readiness over time.
#[derive(Debug)]
pub(crate) struct Deployments {
    start: Duration,
    first_seen: Mutex<BTreeMap<String, Instant>>,
}

impl Deployments {
    /// Deployments whose pods are ready `start` after they are made.
    pub(crate) fn new(start: Duration) -> Self {
        Self {
            start,
            first_seen: Mutex::new(BTreeMap::new()),
        }
    }

    /// One pass: every Deployment's status from how long it has existed.
    pub(crate) fn reconcile(&self, store: &Store) {
        let now = Instant::now();
        let mut seen = self
            .first_seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let all = store.all(RESOURCE);
        seen.retain(|uid, _| all.iter().any(|d| uid_of(d) == uid));
        for d in all {
            if deleting(&d) {
                continue;
            }
            // One already available (made so by a test) stays so.
            let started = if available(&d) {
                now.checked_sub(self.start).unwrap_or(now)
            } else {
                now
            };
            let since = *seen.entry(uid_of(&d).to_owned()).or_insert(started);
            let replicas = d
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            let ready = if now.duration_since(since) >= self.start {
                replicas
            } else {
                0
            };
            let want = status(replicas, ready);
            if d.get("status") != Some(&want) {
                store.modify(RESOURCE, ns_of(&d), name_of(&d), |d| {
                    d["status"] = want.clone();
                });
            }
        }
    }
}
