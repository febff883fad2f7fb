//! The fake cluster autoscaler: node groups (a GKE node pool each) grow
//! when a pod is unschedulable and a node of the group would take it, and
//! shrink when a node has run no pod for a while, within the group's
//! bounds and by whole units (a multi-host TPU slice is several nodes).
//! It writes the events the real one writes on the pod:
//! `TriggeredScaleUp` and `NotTriggerScaleUp`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::FakeNode;
use super::meta::{name_of, ns_of, uid_of};
use super::scheduler;
use super::store::{Store, now_rfc3339};

/// A group of identical nodes the autoscaler sizes: one GKE node pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeGroup {
    /// The group's name (the pool's).
    pub name: String,
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
    events: Mutex<BTreeSet<(String, &'static str)>>,
    next: Mutex<u64>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

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

    fn event(&self, store: &Store, pod: &Value, reason: &'static str, kind: &str, message: &str) {
        if !lock(&self.events).insert((uid_of(pod).to_owned(), reason)) {
            return;
        }
        let now = now_rfc3339();
        let _ = store.create(
            "events",
            ns_of(pod),
            json!({
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"generateName": format!("{}.", name_of(pod))},
                "involvedObject": {"kind": "Pod", "name": name_of(pod), "namespace": ns_of(pod),
                                   "uid": uid_of(pod), "apiVersion": "v1"},
                "reason": reason,
                "message": message,
                "type": kind,
                "source": {"component": "cluster-autoscaler"},
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }),
        );
    }

    /// One pass: grow groups that pending pods need, shrink idle ones.
    pub(crate) fn reconcile(&self, store: &Store) {
        let mut groups = lock(&self.groups);
        if groups.is_empty() {
            return;
        }
        let pods = store.all("pods");
        let pending: Vec<&Value> = pods.iter().filter(|p| unschedulable(p)).collect();
        let none = BTreeMap::new();
        let mut wanted: BTreeSet<String> = BTreeSet::new();
        for pod in &pending {
            let mut why: Vec<String> = Vec::new();
            let mut fits = None;
            for (name, state) in groups.iter() {
                let g = &state.group;
                let template = g.template.clone().named("template").to_json();
                match scheduler::place(&[template], pod, &none) {
                    Err(message) => why.push(message),
                    Ok(_) => {
                        let size = group_nodes(store, name).len() as u32;
                        if size + g.step <= g.max {
                            fits = Some((name.clone(), size));
                            break;
                        }
                        why.push(format!("max node group size reached ({})", g.max));
                    }
                }
            }
            match fits {
                Some((name, size)) => {
                    let g = &groups[&name].group;
                    let message = format!(
                        "pod triggered scale-up: [{{{}grp {size}->{} (max: {})}}]",
                        g.node_prefix,
                        size + g.step,
                        g.max
                    );
                    self.event(store, pod, "TriggeredScaleUp", "Normal", &message);
                    wanted.insert(name);
                }
                None => {
                    let message = format!(
                        "pod didn't trigger scale-up: {} node group(s) cannot take it",
                        why.len()
                    );
                    self.event(store, pod, "NotTriggerScaleUp", "Normal", &message);
                }
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
