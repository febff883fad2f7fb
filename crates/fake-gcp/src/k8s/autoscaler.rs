//! The fake cluster autoscaler: node groups (a GKE node pool each) grow
//! when a pod is unschedulable and a node of the group would take it, and
//! shrink when a node has run no pod for a while, within the group's
//! bounds and by whole units (a multi-host TPU slice is several nodes).
//! It writes the events the real one writes on the pod, with its messages
//! (cluster-autoscaler's `EventingScaleUpStatusProcessor`):
//! `TriggeredScaleUp` (`pod triggered scale-up: [{GROUP-ID 0->1 (max: 3)}]`,
//! the group's id being, on GKE, the URL of the pool's managed instance
//! group) when a group can take the pod, and, in a pass that scales
//! nothing up, `NotTriggerScaleUp` (`pod didn't trigger scale-up: 2
//! node(s) didn't match Pod's node affinity/selector, 1 max node group
//! size reached`: each reason counted once per group that gave it, the
//! template's scheduler reasons or `max node group size reached`; nothing
//! after the colon when no group is considered). Only autoscaled groups
//! are considered (a GKE pool without autoscaling is not a node group of
//! the autoscaler), and it runs only while one exists. The real one runs
//! every 10 s (`--scan-interval`) and records `NotTriggerScaleUp` each
//! time (the event recorder counts the repeats); this one repeats it at
//! most that often per pod.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::FakeNode;
use super::meta::{name_of, uid_of};
use super::scheduler;
use super::store::Store;

/// A group of identical nodes the autoscaler sizes: one GKE node pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeGroup {
    /// The group's name (the pool's).
    pub name: String,
    /// The autoscaler's id of the group, as its events name it: on GKE the
    /// URL of the pool's managed instance group
    /// (`https://www.googleapis.com/compute/v1/projects/P/zones/Z/instanceGroups/gke-CLUSTER-POOL-HASH-grp`).
    pub id: String,
    /// The pool has autoscaling on: only then does the autoscaler size
    /// it, consider it for a pending pod and name it in its events; a pool
    /// without keeps its nodes.
    pub autoscaled: bool,
    /// Names of its nodes start with this (`gke-{cluster}-{pool}-`).
    pub node_prefix: String,
    /// What each node looks like (its name is ignored).
    pub template: FakeNode,
    /// Fewest nodes.
    pub min: u32,
    /// Most nodes.
    pub max: u32,
    /// Nodes added or removed at once (the VMs of one TPU slice; else 1).
    pub step: u32,
}

#[derive(Debug)]
struct GroupState {
    group: NodeGroup,
    /// When pods started waiting for this group.
    wanted_since: Option<Instant>,
    /// When each node last ran nothing.
    idle_since: BTreeMap<String, Instant>,
}

/// How fast the autoscaler reacts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AutoscalerTiming {
    pub(crate) scale_up_delay: Duration,
    pub(crate) scale_down_after: Duration,
}

/// The autoscaler's state.
#[derive(Debug)]
pub(crate) struct Autoscaler {
    timing: AutoscalerTiming,
    groups: Mutex<BTreeMap<String, GroupState>>,
    /// When each event (pod uid, reason, message) was last recorded.
    events: Mutex<BTreeMap<(String, &'static str, String), Instant>>,
    next: Mutex<u64>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// How often the real autoscaler runs (`--scan-interval`): it records a
/// `NotTriggerScaleUp` again at most this often for the same pod.
const SCAN_INTERVAL: Duration = Duration::from_secs(10);

/// The label GKE gives every node of a pool.
const POOL_LABEL: &str = "cloud.google.com/gke-nodepool";

fn unschedulable(pod: &Value) -> bool {
    pod.pointer("/spec/nodeName").is_none()
        && pod.pointer("/metadata/deletionTimestamp").is_none()
        && pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "PodScheduled" && c["reason"] == "Unschedulable")
}

impl Autoscaler {
    pub(crate) fn new(timing: AutoscalerTiming) -> Self {
        Self {
            timing,
            groups: Mutex::default(),
            events: Mutex::default(),
            next: Mutex::new(0),
        }
    }

    /// Start sizing `group` (replacing a group of the same name).
    pub(crate) fn set_group(&self, group: NodeGroup) {
        lock(&self.groups).insert(
            group.name.clone(),
            GroupState {
                group,
                wanted_since: None,
                idle_since: BTreeMap::new(),
            },
        );
    }

    /// Stop sizing `name`; its nodes are removed.
    pub(crate) fn remove_group(&self, store: &Store, name: &str) {
        lock(&self.groups).remove(name);
        for node in group_nodes(store, name) {
            store.remove("nodes", "", name_of(&node));
        }
    }

    /// Forget every group (the cluster is gone).
    pub(crate) fn clear(&self) {
        lock(&self.groups).clear();
        lock(&self.events).clear();
    }

    /// Add `n` nodes to the group, named as GKE names them.
    pub(crate) fn add_nodes(&self, store: &Store, group: &NodeGroup, n: u32) {
        for _ in 0..n {
            let id = {
                let mut next = lock(&self.next);
                *next += 1;
                *next
            };
            let name = format!("{}{id:04x}", group.node_prefix);
            let mut node = group.template.clone().named(&name);
            node.labels
                .insert(POOL_LABEL.to_owned(), group.name.clone());
            let _ = store.create("nodes", "", node.to_json());
        }
    }

    /// Record an event on `pod`, unless the same one was recorded less
    /// than `again` ago (`None`: once).
    fn event(
        &self,
        store: &Store,
        pod: &Value,
        reason: &'static str,
        message: &str,
        again: Option<Duration>,
    ) {
        let now = Instant::now();
        {
            let mut events = lock(&self.events);
            let key = (uid_of(pod).to_owned(), reason, message.to_owned());
            if let Some(last) = events.get(&key)
                && again.is_none_or(|a| now.duration_since(*last) < a)
            {
                return;
            }
            events.insert(key, now);
        }
        super::events::record(
            store,
            pod,
            super::events::Event {
                kind: "Normal",
                reason,
                message,
                component: "cluster-autoscaler",
            },
        );
    }

    /// One pass: grow groups that pending pods need, shrink idle ones.
    pub(crate) fn reconcile(&self, store: &Store) {
        let mut groups = lock(&self.groups);
        if !groups.values().any(|s| s.group.autoscaled) {
            return;
        }
        let pods = store.all("pods");
        let pending: Vec<&Value> = pods.iter().filter(|p| unschedulable(p)).collect();
        let none = BTreeMap::new();
        let mut wanted: BTreeSet<String> = BTreeSet::new();
        // Pods no group can take, with why per group.
        let mut refused: Vec<(&Value, BTreeMap<String, usize>)> = Vec::new();
        for pod in &pending {
            let mut why: BTreeMap<String, usize> = BTreeMap::new();
            let mut fits = None;
            for (name, state) in groups.iter().filter(|(_, s)| s.group.autoscaled) {
                let g = &state.group;
                let template = g.template.clone().named("template").to_json();
                match scheduler::misfit(&template, pod, &none) {
                    Some(reasons) => {
                        // Each reason once per group.
                        for r in reasons.into_iter().collect::<BTreeSet<_>>() {
                            *why.entry(r).or_default() += 1;
                        }
                    }
                    None => {
                        let size = group_nodes(store, name).len() as u32;
                        if size + g.step <= g.max {
                            fits = Some((name.clone(), size));
                            break;
                        }
                        *why.entry("max node group size reached".to_owned())
                            .or_default() += 1;
                    }
                }
            }
            match fits {
                Some((name, size)) => {
                    let g = &groups[&name].group;
                    let message = format!(
                        "pod triggered scale-up: [{{{} {size}->{} (max: {})}}]",
                        g.id,
                        size + g.step,
                        g.max
                    );
                    self.event(store, pod, "TriggeredScaleUp", &message, None);
                    wanted.insert(name);
                }
                None => refused.push((pod, why)),
            }
        }
        // The real autoscaler tells the pods it did not help only in a pass
        // that scaled nothing up.
        if wanted.is_empty() {
            for (pod, why) in refused {
                let mut reasons: Vec<String> =
                    why.iter().map(|(r, n)| format!("{n} {r}")).collect();
                reasons.sort();
                let message = format!("pod didn't trigger scale-up: {}", reasons.join(", "));
                self.event(
                    store,
                    pod,
                    "NotTriggerScaleUp",
                    &message,
                    Some(SCAN_INTERVAL),
                );
            }
        }
        let used = scheduler::usage(&pods);
        let now = Instant::now();
        for (name, state) in groups.iter_mut() {
            if wanted.contains(name) {
                let since = *state.wanted_since.get_or_insert(now);
                if now.duration_since(since) >= self.timing.scale_up_delay {
                    self.add_nodes(store, &state.group, state.group.step);
                    state.wanted_since = None;
                }
            } else {
                state.wanted_since = None;
            }
            let nodes = group_nodes(store, name);
            let mut size = nodes.len() as u32;
            for node in &nodes {
                let node_name = name_of(node).to_owned();
                let busy = used.contains_key(&node_name)
                    || pods.iter().any(|p| {
                        p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(&node_name)
                            && !matches!(
                                p.pointer("/status/phase").and_then(Value::as_str),
                                Some("Succeeded" | "Failed")
                            )
                    });
                if busy {
                    state.idle_since.remove(&node_name);
                    continue;
                }
                let since = *state.idle_since.entry(node_name.clone()).or_insert(now);
                if now.duration_since(since) >= self.timing.scale_down_after
                    && size >= state.group.min + state.group.step
                {
                    store.remove("nodes", "", &node_name);
                    state.idle_since.remove(&node_name);
                    size -= 1;
                }
            }
        }
    }
}

/// The nodes of the pool `name`.
pub(crate) fn group_nodes(store: &Store, name: &str) -> Vec<Value> {
    store
        .all("nodes")
        .into_iter()
        .filter(|n| {
            n.pointer(&format!(
                "/metadata/labels/{}",
                POOL_LABEL.replace('/', "~1")
            ))
            .and_then(Value::as_str)
                == Some(name)
        })
        .collect()
}
