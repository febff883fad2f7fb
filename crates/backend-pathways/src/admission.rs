//! Slices placed whole: one slice at a time per node pool.
//!
//! kube-scheduler places pods one by one, with no gang placement: two
//! LeaderWorkerSets of a pool that holds one slice each got part of its
//! nodes and neither could ever start. So a multi-host slice is created
//! queued (`replicas: 0`, labelled [`LABEL_SLICE_POOL`] with its pool: TPU
//! type and topology, and Spot) and admitted, scaled to one group, only
//! while no other slice of its pool is in use. Which slice holds the pool
//! is kept in the ConfigMap `kinetic-slices-{pool}` ([`queue_map_name`],
//! key [`HOLDER_KEY`]), changed only at its `resourceVersion`, so two
//! admitters that race (a map's submissions, a client and a host) never
//! both admit: one write conflicts, reads again and sees the pool held.
//!
//! Who admits: the client when it submits a slice and each time it polls
//! a queued one ([`settle`]); and, with no client at all, the host that
//! ends a slice ([`crate::release`]), which admits the next of its pool.
//! Queued slices are admitted oldest first (creation time, then name).
//!
//! This is "one slice at a time per pool", not capacity-aware admission: a
//! pool of GKE multi-host TPU slices is made of whole slices, and knowing
//! how many it holds would need every user and every host to list the
//! cluster's nodes (a cluster-wide right that `edit` does not give).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinetic_core::ports::BackendError;
use kinetic_core::status::{JobState, JobStatus, StatusReason};
use kinetic_kube::status::final_state;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::lws::LeaderWorkerSet;

/// Label on a queued-and-admitted slice: its pool (TPU type and topology,
/// `.spot` for Spot), as `tpu-v5-lite-podslice.4x4`.
pub const LABEL_SLICE_POOL: &str = "kinetic.dev/slice-pool";

/// Variable every host of a pooled slice gets: its pool.
pub const ENV_SLICE_POOL: &str = "KINETIC_SLICE_POOL";

/// The key of the queue ConfigMap naming the slice that holds the pool.
pub const HOLDER_KEY: &str = "holder";

/// Slices a pool runs at once.
pub const SLICES_PER_POOL: u32 = 1;

const TPU_ACCELERATOR: &str = "cloud.google.com/gke-tpu-accelerator";
const TPU_TOPOLOGY: &str = "cloud.google.com/gke-tpu-topology";
const SPOT: &str = "cloud.google.com/gke-spot";

/// The pool of a slice of `hosts` hosts whose pods select nodes with
/// `node_selector`: `{tpu type}.{topology}` (`.spot` added for Spot);
/// `None` for a single host or a selector without a TPU type and topology
/// (nothing to place whole).
pub fn pool_of(node_selector: &BTreeMap<String, String>, hosts: u32) -> Option<String> {
    if hosts < 2 {
        return None;
    }
    let accelerator = node_selector.get(TPU_ACCELERATOR)?;
    let topology = node_selector.get(TPU_TOPOLOGY)?;
    let mut pool = format!("{accelerator}.{topology}");
    if node_selector.get(SPOT).is_some_and(|v| v == "true") {
        pool.push_str(".spot");
    }
    Some(pool)
}

/// The ConfigMap that says which slice holds `pool`.
pub fn queue_map_name(pool: &str) -> String {
    format!("kinetic-slices-{pool}")
}

/// The pool a LeaderWorkerSet was queued in, if any.
pub fn pool_label(set: &LeaderWorkerSet) -> Option<&str> {
    set.metadata
        .labels
        .as_ref()?
        .get(LABEL_SLICE_POOL)
        .map(String::as_str)
}

fn name(set: &LeaderWorkerSet) -> &str {
    set.metadata.name.as_deref().unwrap_or_default()
}

/// Neither ended (a final state) nor being deleted.
fn live(set: &LeaderWorkerSet) -> bool {
    final_state(&set.metadata).is_none() && set.metadata.deletion_timestamp.is_none()
}

/// Live with no group: waiting to be admitted.
pub fn is_queued(set: &LeaderWorkerSet) -> bool {
    live(set) && set.spec.replicas == Some(0)
}

/// What the pool's holder and sets call for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The pool is in use by these slices: nothing to admit. When the
    /// recorded holder is still queued (its admitter stopped between the
    /// two writes), it is scaled now.
    Held {
        /// The slices in use, the holder first.
        in_use: Vec<String>,
        /// The holder, to scale to one group.
        scale: Option<String>,
    },
    /// Admit this queued slice.
    Admit(String),
    /// Nothing queued and nothing in use.
    Idle,
}

/// The next step for a pool whose sets are `sets` and whose recorded
/// holder is `holder`: the holder, while live, holds it (and is scaled if
/// still queued); so does any other live set with a group (made before
/// queues, or by hand); else the oldest queued set is admitted.
pub fn next_step(sets: &[LeaderWorkerSet], holder: Option<&str>) -> Step {
    let held = holder.and_then(|h| sets.iter().find(|s| name(s) == h && live(s)));
    let mut in_use: Vec<String> = held.iter().map(|s| name(s).to_owned()).collect();
    in_use.extend(
        sets.iter()
            .filter(|s| live(s) && !is_queued(s) && Some(name(s)) != holder)
            .map(|s| name(s).to_owned()),
    );
    if !in_use.is_empty() {
        return Step::Held {
            in_use,
            scale: held.filter(|s| is_queued(s)).map(|s| name(s).to_owned()),
        };
    }
    match queue(sets).first() {
        Some(first) => Step::Admit((*first).to_owned()),
        None => Step::Idle,
    }
}

/// The queued sets, oldest first (creation time, then name).
pub fn queue(sets: &[LeaderWorkerSet]) -> Vec<&str> {
    let mut queued: Vec<&LeaderWorkerSet> = sets.iter().filter(|s| is_queued(s)).collect();
    queued.sort_by(|a, b| {
        let at = |s: &LeaderWorkerSet| s.metadata.creation_timestamp.clone().map(|t| t.0);
        at(a).cmp(&at(b)).then_with(|| name(a).cmp(name(b)))
    });
    queued.into_iter().map(name).collect()
}

/// The state of `set` while it waits in `pool`, behind `in_use` and the
/// sets queued before it in `sets`.
pub fn waiting_state(set: &LeaderWorkerSet, pool: &str, sets: &[LeaderWorkerSet]) -> JobState {
    let in_use = match next_step(sets, None) {
        Step::Held { in_use, .. } => in_use,
        _ => Vec::new(),
    };
    let ahead = queue(sets).iter().take_while(|n| **n != name(set)).count();
    JobState::new(JobStatus::Pending).with_reason(StatusReason::WaitingForSlice {
        pool: pool.replace('.', " "),
        hosts: u32::try_from(set.spec.leader_worker_template.size.unwrap_or(1)).unwrap_or(1),
        holds: SLICES_PER_POOL,
        in_use,
        ahead: u32::try_from(ahead).unwrap_or(u32::MAX),
    })
}

/// Admit the next slice of `pool` if the pool is free (see the module's
/// doc), then the state of `set` if it still waits (`None` once it is
/// admitted or holds the pool). Conflicting writes are read again and
/// tried again a few times; other failures go to the caller.
pub async fn settle(
    client: &kube::Client,
    sets_api: &Api<LeaderWorkerSet>,
    namespace: &str,
    pool: &str,
    set: &LeaderWorkerSet,
) -> Result<Option<JobState>, BackendError> {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let map_name = queue_map_name(pool);
    let cx = |verb: &'static str, resource: &'static str| kinetic_kube::error::Context {
        verb,
        resource,
        name: None,
        namespace,
    };
    for _ in 0..8 {
        let sets = sets_api
            .list(&ListParams::default().labels(&format!("{LABEL_SLICE_POOL}={pool}")))
            .await
            .map_err(|e| kinetic_kube::error::map(e, cx("list", "leaderworkersets")))?
            .items;
        let map = maps
            .get_opt(&map_name)
            .await
            .map_err(|e| kinetic_kube::error::map(e, cx("get", "configmaps")))?;
        let holder = map
            .as_ref()
            .and_then(|m| m.data.as_ref()?.get(HOLDER_KEY).cloned());
        let chosen = match next_step(&sets, holder.as_deref()) {
            Step::Idle => return Ok(None),
            Step::Held { in_use, scale } => {
                if let Some(holder) = scale {
                    scale_up(sets_api, &holder).await?;
                }
                if in_use.iter().any(|n| n == name(set)) {
                    return Ok(None);
                }
                let me = sets.iter().find(|s| name(s) == name(set)).unwrap_or(set);
                return Ok(is_queued(me).then(|| waiting_state(me, pool, &sets)));
            }
            Step::Admit(chosen) => chosen,
        };
        let written = match map {
            None => {
                let fresh = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(map_name.clone()),
                        namespace: Some(namespace.to_owned()),
                        labels: Some(BTreeMap::from([(
                            "app.kubernetes.io/managed-by".to_owned(),
                            "kinetic".to_owned(),
                        )])),
                        ..ObjectMeta::default()
                    },
                    data: Some(BTreeMap::from([(HOLDER_KEY.to_owned(), chosen.clone())])),
                    ..ConfigMap::default()
                };
                maps.create(&PostParams::default(), &fresh)
                    .await
                    .map(|_| ())
            }
            Some(mut map) => {
                map.data
                    .get_or_insert_with(BTreeMap::new)
                    .insert(HOLDER_KEY.to_owned(), chosen.clone());
                maps.replace(&map_name, &PostParams::default(), &map)
                    .await
                    .map(|_| ())
            }
        };
        match written {
            Ok(()) => {}
            Err(e) if kinetic_kube::error::code(&e) == Some(409) => continue,
            Err(e) => return Err(kinetic_kube::error::map(e, cx("update", "configmaps"))),
        }
        scale_up(sets_api, &chosen).await?;
        if chosen == name(set) {
            return Ok(None);
        }
        // Another slice took the pool: read again for this one's place.
    }
    Ok(None)
}

/// Give the queued slice `name` its group.
async fn scale_up(sets_api: &Api<LeaderWorkerSet>, name: &str) -> Result<(), BackendError> {
    match sets_api
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if kinetic_kube::error::code(&e) == Some(404) => Ok(()),
        Err(e) => Err(kinetic_kube::error::map(
            e,
            kinetic_kube::error::Context {
                verb: "patch",
                resource: "leaderworkersets",
                name: Some(name),
                namespace: sets_api.namespace().unwrap_or_default(),
            },
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn set(name: &str, replicas: i32, second: u32, ended: bool) -> LeaderWorkerSet {
        let mut s = LeaderWorkerSet::default();
        s.metadata.name = Some(name.to_owned());
        s.metadata.creation_timestamp = Some(Time(
            format!("2026-11-27T10:00:{second:02}Z").parse().unwrap(),
        ));
        if ended {
            s.metadata.annotations = Some(BTreeMap::from([(
                kinetic_kube::pod::ANNOTATION_FINAL_STATE.to_owned(),
                r#"{"status":"SUCCEEDED"}"#.to_owned(),
            )]));
        }
        s.spec.replicas = Some(replicas);
        s.spec.leader_worker_template.size = Some(4);
        s
    }

    #[test]
    fn the_pool_is_the_tpu_type_and_topology_of_a_multi_host_slice() {
        let mut selector = BTreeMap::from([
            (
                TPU_ACCELERATOR.to_owned(),
                "tpu-v5-lite-podslice".to_owned(),
            ),
            (TPU_TOPOLOGY.to_owned(), "4x4".to_owned()),
        ]);
        assert_eq!(
            pool_of(&selector, 4).as_deref(),
            Some("tpu-v5-lite-podslice.4x4")
        );
        assert_eq!(pool_of(&selector, 1), None, "one host is placed whole");
        selector.insert(SPOT.to_owned(), "true".to_owned());
        assert_eq!(
            pool_of(&selector, 4).as_deref(),
            Some("tpu-v5-lite-podslice.4x4.spot")
        );
        assert_eq!(pool_of(&BTreeMap::new(), 4), None);
    }

    #[test]
    fn the_oldest_queued_slice_is_admitted_only_when_the_pool_is_free() {
        let sets = [
            set("b", 0, 2, false),
            set("a", 0, 2, false),
            set("c", 0, 1, false),
        ];
        assert_eq!(next_step(&sets, None), Step::Admit("c".into()));
        assert_eq!(queue(&sets), ["c", "a", "b"]);
        // The holder in use holds it; an ended holder frees it.
        let sets = [set("c", 1, 1, false), set("a", 0, 2, false)];
        assert_eq!(
            next_step(&sets, Some("c")),
            Step::Held {
                in_use: vec!["c".into()],
                scale: None
            }
        );
        let sets = [set("c", 0, 1, true), set("a", 0, 2, false)];
        assert_eq!(next_step(&sets, Some("c")), Step::Admit("a".into()));
        // A holder recorded but never scaled is scaled, not passed over.
        let sets = [set("c", 0, 1, false), set("a", 0, 0, false)];
        assert_eq!(
            next_step(&sets, Some("c")),
            Step::Held {
                in_use: vec!["c".into()],
                scale: Some("c".into())
            }
        );
        // A set with a group that no queue admitted holds the pool too.
        let sets = [set("old", 1, 0, false), set("a", 0, 2, false)];
        assert!(matches!(next_step(&sets, None), Step::Held { .. }));
        assert_eq!(next_step(&[set("x", 0, 0, true)], None), Step::Idle);
    }

    #[test]
    fn a_waiting_slice_says_what_the_pool_holds_and_who_uses_it() {
        let sets = [
            set("kinetic-a", 1, 0, false),
            set("kinetic-b", 0, 1, false),
            set("kinetic-c", 0, 2, false),
        ];
        let state = waiting_state(&sets[2], "tpu-v5-lite-podslice.4x4", &sets);
        assert_eq!(state.status, JobStatus::Pending);
        assert_eq!(
            state.reason.unwrap().to_string(),
            "waiting: pool tpu-v5-lite-podslice 4x4 holds 1 slice of 4 hosts, 1 in use (kinetic-a), 1 queued ahead"
        );
    }
}
