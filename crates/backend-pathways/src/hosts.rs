//! A lost host of a slice, from what Kubernetes 1.32+ and LeaderWorkerSet
//! v0.5.1+ really leave behind. Pure: objects in, a reason out.
//!
//! A host is lost when its container restarts (killed outside the host
//! wrapper: out of memory, a signal), its pod fails (evicted, its node shut
//! down) or its pod is deleted. Between two polls the pod may be gone
//! already, and nothing on the cluster says it failed:
//!
//! - the StatefulSet controller deletes a pod in a terminal phase and makes
//!   it again under the same name, telling only `SuccessfulDelete` (`delete
//!   Pod P in StatefulSet S successful`) and `SuccessfulCreate`;
//! - the LeaderWorkerSet controller, on a restart or deletion in a group
//!   whose `restartPolicy` is `RecreateGroupOnPodRestart`, deletes the
//!   group's leader (and so every pod of the group) and tells `Worker pod P
//!   failed, deleted leader pod L to recreate group G`, an event named
//!   `RecreateGroupOnPodRestart` in v0.5.1 and `RecreateGroup` from v0.9;
//! - the pods made again have new UIDs under the names the hosts had.
//!
//! So [`observe`] keeps a record on the LeaderWorkerSet ([`ANNOTATION_HOSTS`],
//! written by the backend after each status read): for each host's pod
//! name, the UID first seen and how that pod ended, if a poll saw it end.
//! The record only grows: a UID once recorded is never replaced.
//! [`lost_host`] then finds a lost host in the events of both controllers,
//! under both event names, or in a pod whose UID is not the recorded one.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Event, Pod};
use kinetic_core::status::StatusReason;
use kinetic_kube::status::{failure_reason, pod_phase};
use serde::{Deserialize, Serialize};

use crate::lws::{KIND, LeaderWorkerSet};
use crate::status::worker_index;

/// The annotation on a LeaderWorkerSet holding the record of its hosts'
/// pods (JSON: pod name → [`SeenPod`]).
pub const ANNOTATION_HOSTS: &str = "kinetic.dev/hosts";

/// The reasons of the event the LeaderWorkerSet controller records when it
/// recreates a group: v0.5.1's (the release `kinetic up` installs) and
/// v0.9's.
pub const RECREATE_GROUP_EVENTS: [&str; 2] = ["RecreateGroupOnPodRestart", "RecreateGroup"];

/// What a status read saw of one host's pod.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SeenPod {
    /// The UID of the first pod seen under the name.
    pub uid: String,
    /// How that pod ended, if a read saw it end (`evicted: …`, `exit code
    /// 137 (OOMKilled)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// Whether a read saw that pod running and ready.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ready: bool,
}

/// The record kept on `lws`; empty when it has none (or it cannot be read).
pub fn recorded(lws: &LeaderWorkerSet) -> BTreeMap<String, SeenPod> {
    lws.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_HOSTS))
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// How `pod` ended, if it did: its container restarted (the reason of its
/// last termination), or it failed or is being disrupted.
pub fn ended(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    let restarted = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.restart_count > 0)
        .and_then(|c| c.last_state.as_ref()?.terminated.as_ref());
    if let Some(last) = restarted {
        return Some(match last.reason.as_deref() {
            Some(r) if r != "Error" && !r.is_empty() => {
                format!("exit code {} ({r})", last.exit_code)
            }
            _ => format!("exit code {}", last.exit_code),
        });
    }
    let disrupted = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "DisruptionTarget" && c.status == "True");
    if disrupted || pod_phase(pod) == "Failed" {
        return Some(match failure_reason(pod) {
            Some(StatusReason::Evicted { message }) if message.is_empty() => "evicted".to_owned(),
            Some(StatusReason::Evicted { message }) => format!("evicted: {message}"),
            Some(StatusReason::Preempted) => "preempted (its node was reclaimed)".to_owned(),
            Some(StatusReason::OomKilled) => "out of memory (OOMKilled)".to_owned(),
            Some(StatusReason::ExitCode { code }) => format!("exit code {code}"),
            Some(other) => other.to_string(),
            None => format!("pod {}", pod_phase(pod).to_lowercase()),
        });
    }
    None
}

/// The record `seen` grown by `pods`: a name not seen yet gets its pod's
/// UID; a pod under its recorded UID that ended gets how. A recorded UID
/// is never replaced (a pod under another UID is the host lost).
pub fn observe(mut seen: BTreeMap<String, SeenPod>, pods: &[Pod]) -> BTreeMap<String, SeenPod> {
    for pod in pods {
        let (Some(name), Some(uid)) = (pod.metadata.name.as_ref(), pod.metadata.uid.as_ref())
        else {
            continue;
        };
        let entry = seen.entry(name.clone()).or_insert_with(|| SeenPod {
            uid: uid.clone(),
            ended: None,
            ready: false,
        });
        if &entry.uid != uid {
            continue;
        }
        if entry.ended.is_none()
            && let Some(how) = ended(pod)
        {
            entry.ended = Some(how);
        }
        entry.ready |= running_and_ready(pod);
    }
    seen
}

/// The pod an event's message names after `prefix` (up to the next space).
fn pod_after<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    message.strip_prefix(prefix)?.split_whitespace().next()
}

/// The host a pod of the set `set` is: its index from its name (the
/// leader `{set}-{group}`, worker `i` `{set}-{group}-{i}`).
fn host_of(set: &str, pod: &str) -> Option<u32> {
    let p = Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(pod.to_owned()),
            ..Default::default()
        },
        ..Pod::default()
    };
    worker_index(&p, set)
}

/// The lost host of the slice `lws`, if one was lost: from the
/// LeaderWorkerSet controller's event recreating the group (either name),
/// a StatefulSet's `SuccessfulDelete` of one of the slice's pods, or a pod
/// whose UID is not the one recorded in `seen` (see [`observe`]). Events
/// older than the LeaderWorkerSet are another job's; the lowest host of
/// the earliest evidence is the one reported.
pub fn lost_host(
    lws: &LeaderWorkerSet,
    pods: &[Pod],
    events: &[Event],
    seen: &BTreeMap<String, SeenPod>,
) -> Option<StatusReason> {
    let set = lws.metadata.name.as_deref()?;
    let since = lws.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let uid = lws.metadata.uid.as_deref();
    let recent = |e: &&Event| {
        since.is_none_or(|s| {
            e.last_timestamp
                .as_ref()
                .or(e.first_timestamp.as_ref())
                .is_none_or(|t| t.0 >= s)
        })
    };
    let ours = |name: &str| name == set || name.starts_with(&format!("{set}-"));
    let what = |pod: &str| match seen.get(pod).and_then(|s| s.ended.as_deref()) {
        Some(how) => format!("failed: {how}"),
        None => "failed".to_owned(),
    };
    let lost = |pod: &str, cause: String| {
        Some(StatusReason::HostLost {
            host: host_of(set, pod)?,
            pod: pod.to_owned(),
            cause,
        })
    };
    let mut events: Vec<&Event> = events.iter().filter(recent).collect();
    events.sort_by_key(|e| {
        e.last_timestamp
            .as_ref()
            .or(e.first_timestamp.as_ref())
            .map(|t| t.0)
    });
    for e in events {
        let about = &e.involved_object;
        let (Some(reason), Some(message), Some(name)) = (
            e.reason.as_deref(),
            e.message.as_deref(),
            about.name.as_deref(),
        ) else {
            continue;
        };
        let found = match (about.kind.as_deref(), reason) {
            (Some(KIND), r) if RECREATE_GROUP_EVENTS.contains(&r) && name == set => {
                if uid.is_some() && about.uid.is_some() && about.uid.as_deref() != uid {
                    continue;
                }
                pod_after(message, "Worker pod ").map(|pod| {
                    let cause = format!(
                        "{}; the LeaderWorkerSet controller recreated the slice ({r})",
                        what(pod)
                    );
                    (pod, cause)
                })
            }
            (Some("StatefulSet"), "SuccessfulDelete") if ours(name) => {
                pod_after(message, "delete Pod ")
                    .filter(|p| ours(p))
                    .map(|pod| {
                        let cause = format!(
                            "{}; its StatefulSet deleted the pod and made it again",
                            what(pod)
                        );
                        (pod, cause)
                    })
            }
            _ => None,
        };
        if let Some((pod, cause)) = found
            && let Some(reason) = lost(pod, cause)
        {
            return Some(reason);
        }
    }
    let mut replaced: Vec<(u32, &str)> = pods
        .iter()
        .filter_map(|p| {
            let name = p.metadata.name.as_deref()?;
            let uid = p.metadata.uid.as_deref()?;
            let recorded = seen.get(name)?;
            (uid != recorded.uid)
                .then(|| Some((host_of(set, name)?, name)))
                .flatten()
        })
        .collect();
    // The host seen ending first; else the lowest replaced.
    replaced.sort_by_key(|(host, name)| (seen.get(*name).is_none_or(|s| s.ended.is_none()), *host));
    if let Some((_, pod)) = replaced.first() {
        return lost(
            pod,
            format!("{}; its pod was replaced by another (a new UID)", what(pod)),
        );
    }
    unavailable_again(lws, pods, seen)
}

/// Whether `pod` is running, ready and not being deleted.
fn running_and_ready(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && pod_phase(p) == "Running"
        && p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The slice's `Available` condition `False`: the LeaderWorkerSet
/// controller sets it `True` once every host of the group is running and
/// ready, and turns it `False` (never removes it) when one no longer is.
/// The host reported is the lowest one not running and ready now (its pod
/// missing, pending, or not ready).
///
/// `Available` is also `True` for a set at zero replicas (none of none is
/// ready: a slice queued for its pool, [`crate::admission`]) and turns
/// `False` when it is admitted, before its hosts start: so the condition
/// counts only once a read saw every host running and ready ([`observe`]),
/// which is what "had every host ready" says.
fn unavailable_again(
    lws: &LeaderWorkerSet,
    pods: &[Pod],
    seen: &BTreeMap<String, SeenPod>,
) -> Option<StatusReason> {
    let set = lws.metadata.name.as_deref()?;
    let lost_it = lws
        .status
        .as_ref()?
        .conditions
        .iter()
        .any(|c| c.type_ == crate::lws::CONDITION_AVAILABLE && c.status == "False");
    if !lost_it {
        return None;
    }
    let size = u32::try_from(lws.spec.leader_worker_template.size.unwrap_or(1)).unwrap_or(1);
    let name_of = |host: u32| {
        if host == 0 {
            format!("{set}-0")
        } else {
            format!("{set}-0-{host}")
        }
    };
    let was_whole = (0..size.max(1)).all(|host| seen.get(&name_of(host)).is_some_and(|s| s.ready));
    if !was_whole {
        return None;
    }
    (0..size.max(1)).find_map(|host| {
        let name = name_of(host);
        let pod = pods.iter().find(|p| p.metadata.name.as_deref() == Some(&name));
        if pod.is_some_and(running_and_ready) {
            return None;
        }
        let how = seen
            .get(&name)
            .and_then(|s| s.ended.as_deref())
            .map_or_else(|| "is not ready".to_owned(), |h| format!("failed: {h}"));
        Some(StatusReason::HostLost {
            host,
            pod: name,
            cause: format!(
                "{how}; the slice had every host ready, then lost one (the LeaderWorkerSet's Available condition is False)"
            ),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, uid: &str, status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "uid": uid}, "status": status}))
            .unwrap()
    }

    #[test]
    fn the_record_keeps_the_first_uid_and_how_it_ended() {
        let running = json!({"phase": "Running"});
        let seen = observe(BTreeMap::new(), &[pod("s-0", "a", running.clone())]);
        assert_eq!(
            seen["s-0"],
            SeenPod {
                uid: "a".into(),
                ended: None,
                ready: false
            }
        );
        let evicted = json!({"phase": "Failed", "reason": "Evicted", "message": "low on memory"});
        let seen = observe(seen, &[pod("s-0", "a", evicted)]);
        assert_eq!(seen["s-0"].ended.as_deref(), Some("evicted: low on memory"));
        // Another UID under the name never replaces the record.
        let seen = observe(seen, &[pod("s-0", "b", running)]);
        assert_eq!(seen["s-0"].uid, "a");
    }

    #[test]
    fn a_restarted_container_ended_with_its_last_termination() {
        let p = pod(
            "s-0-1",
            "a",
            json!({"phase": "Running", "containerStatuses": [{"name": "c", "image": "i", "imageID": "",
                "ready": false, "restartCount": 1,
                "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}),
        );
        assert_eq!(ended(&p).as_deref(), Some("exit code 137 (OOMKilled)"));
        assert_eq!(ended(&pod("s-0", "a", json!({"phase": "Running"}))), None);
    }
}
