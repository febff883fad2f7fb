//! The fake scheduler, over the cluster's Node objects: a pod goes to the
//! first ready node whose taints it tolerates, whose labels match its node
//! selector and whose free extended resources (`nvidia.com/gpu`,
//! `google.com/tpu`: allocatable minus what the pods bound there request)
//! cover its requests. Each node is judged by kube-scheduler's filters in
//! their order — NodeUnschedulable, TaintToleration, NodeAffinity,
//! NodeResourcesFit — and when none fits, the answer is kube-scheduler's
//! `FailedScheduling` message: one count per reason, sorted.

use std::collections::BTreeMap;

use serde_json::Value;

/// The extended resources a pod asks for (the larger of its limits and
/// requests, per container, summed over containers).
pub(crate) fn wanted(pod: &Value) -> BTreeMap<String, u64> {
    let mut total: BTreeMap<String, u64> = BTreeMap::new();
    for c in pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let mut one: BTreeMap<String, u64> = BTreeMap::new();
        for kind in ["limits", "requests"] {
            if let Some(Value::Object(m)) = c.pointer(&format!("/resources/{kind}")) {
                for (k, v) in m {
                    if k.contains('/') {
                        let n = quantity(v);
                        let e = one.entry(k.clone()).or_default();
                        *e = (*e).max(n);
                    }
                }
            }
        }
        for (k, n) in one {
            *total.entry(k).or_default() += n;
        }
    }
    total
}

fn quantity(v: &Value) -> u64 {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| v.as_u64())
        .unwrap_or(0)
}

/// A node's taint, as `spec.taints[]` holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Taint {
    key: String,
    value: String,
    effect: String,
}

fn taints(node: &Value) -> Vec<Taint> {
    node.pointer("/spec/taints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|t| Taint {
            key: t["key"].as_str().unwrap_or_default().to_owned(),
            value: t["value"].as_str().unwrap_or_default().to_owned(),
            effect: t["effect"].as_str().unwrap_or_default().to_owned(),
        })
        .collect()
}

/// Whether one of the pod's tolerations tolerates `taint` (Kubernetes'
/// rules: an empty key with `Exists` tolerates everything; an empty
/// effect matches every effect; `Equal` is the default operator).
fn tolerated(tolerations: &[Value], taint: &Taint) -> bool {
    tolerations.iter().any(|t| {
        let key = t["key"].as_str().unwrap_or_default();
        let op = t["operator"].as_str().unwrap_or("Equal");
        let effect = t["effect"].as_str().unwrap_or_default();
        let effect_ok = effect.is_empty() || effect == taint.effect;
        let key_ok = key.is_empty() && op == "Exists" || key == taint.key;
        let value_ok = op == "Exists" || t["value"].as_str().unwrap_or_default() == taint.value;
        effect_ok && key_ok && value_ok
    })
}

fn labels(node: &Value) -> BTreeMap<String, String> {
    node.pointer("/metadata/labels")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

fn ready(node: &Value) -> bool {
    node.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// Why `pod` cannot go to `node` (kube-scheduler's reason), in filter order.
pub(crate) fn misfit(
    node: &Value,
    pod: &Value,
    used: &BTreeMap<String, u64>,
) -> Option<Vec<String>> {
    if node.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
        return Some(vec!["node(s) were unschedulable".to_owned()]);
    }
    if !ready(node) {
        return Some(vec![
            "node(s) had untolerated taint {node.kubernetes.io/not-ready: }".to_owned(),
        ]);
    }
    let tolerations: Vec<Value> = pod
        .pointer("/spec/tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(t) = taints(node)
        .into_iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|t| !tolerated(&tolerations, t))
    {
        return Some(vec![format!(
            "node(s) had untolerated taint {{{}: {}}}",
            t.key, t.value
        )]);
    }
    let selector: BTreeMap<String, String> = pod
        .pointer("/spec/nodeSelector")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    let node_labels = labels(node);
    if !selector.iter().all(|(k, v)| node_labels.get(k) == Some(v)) {
        return Some(vec![
            "node(s) didn't match Pod's node affinity/selector".to_owned(),
        ]);
    }
    let short: Vec<String> = wanted(pod)
        .into_iter()
        .filter(|(k, n)| {
            let allocatable = node
                .pointer(&format!("/status/allocatable/{}", k.replace('/', "~1")))
                .map_or(0, quantity);
            allocatable < used.get(k).copied().unwrap_or(0) + n
        })
        .map(|(k, _)| format!("Insufficient {k}"))
        .collect();
    (!short.is_empty()).then_some(short)
}

/// What the pods bound to each node (and not finished) request.
pub(crate) fn usage(pods: &[Value]) -> BTreeMap<String, BTreeMap<String, u64>> {
    let mut used: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for p in pods {
        let Some(node) = p.pointer("/spec/nodeName").and_then(Value::as_str) else {
            continue;
        };
        let phase = p.pointer("/status/phase").and_then(Value::as_str);
        if matches!(phase, Some("Succeeded" | "Failed")) {
            continue;
        }
        let entry = used.entry(node.to_owned()).or_default();
        for (k, n) in wanted(p) {
            *entry.entry(k).or_default() += n;
        }
    }
    used
}

/// The node `pod` goes to, or the scheduler's message when none fits.
/// `used` is what the pods already bound request, per node.
pub(crate) fn place(
    nodes: &[Value],
    pod: &Value,
    used: &BTreeMap<String, BTreeMap<String, u64>>,
) -> Result<String, String> {
    let none = BTreeMap::new();
    let total = nodes.len();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for node in nodes {
        let name = node
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match misfit(node, pod, used.get(name).unwrap_or(&none)) {
            None => return Ok(name.to_owned()),
            Some(why) => {
                for r in why {
                    *reasons.entry(r).or_default() += 1;
                }
            }
        }
    }
    let mut parts: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    let detail = if parts.is_empty() {
        "no nodes available to schedule pods".to_owned()
    } else {
        parts.join(", ")
    };
    Err(format!(
        "0/{total} nodes are available: {detail}. preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling."
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::k8s::FakeNode;

    fn nodes() -> Vec<Value> {
        vec![
            FakeNode::cpu("cpu-0").to_json(),
            FakeNode::cpu("gpu-0")
                .label("cloud.google.com/gke-accelerator", "nvidia-l4")
                .capacity("nvidia.com/gpu", 1)
                .taint("nvidia.com/gpu", "present", "NoSchedule")
                .to_json(),
        ]
    }

    fn gpu_pod(count: u64) -> Value {
        json!({"spec": {
            "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"resources": {"limits": {"nvidia.com/gpu": count.to_string()}}}],
        }})
    }

    #[test]
    fn a_pod_goes_to_a_node_that_fits() {
        let none = BTreeMap::new();
        assert_eq!(
            place(&nodes(), &json!({"spec": {}}), &none).unwrap(),
            "cpu-0"
        );
        assert_eq!(place(&nodes(), &gpu_pod(1), &none).unwrap(), "gpu-0");
    }

    #[test]
    fn an_unfit_pod_gets_the_schedulers_message() {
        let none = BTreeMap::new();
        let message = place(&nodes(), &gpu_pod(2), &none).unwrap_err();
        assert!(
            message.starts_with("0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't match Pod's node affinity/selector."),
            "{message}"
        );
        // A busy GPU is not free.
        let used = BTreeMap::from([(
            "gpu-0".to_owned(),
            BTreeMap::from([("nvidia.com/gpu".to_owned(), 1)]),
        )]);
        assert!(
            place(&nodes(), &gpu_pod(1), &used)
                .unwrap_err()
                .contains("1 Insufficient nvidia.com/gpu")
        );
    }

    #[test]
    fn taints_repel_pods_that_do_not_tolerate_them() {
        let none = BTreeMap::new();
        let gpu_only = vec![nodes().remove(1)];
        let message = place(&gpu_only, &json!({"spec": {}}), &none).unwrap_err();
        assert!(
            message.starts_with("0/1 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}."),
            "{message}"
        );
        let spot = vec![
            FakeNode::cpu("spot-0")
                .label("cloud.google.com/gke-spot", "true")
                .taint("cloud.google.com/gke-spot", "true", "NoSchedule")
                .to_json(),
        ];
        let message = place(&spot, &json!({"spec": {}}), &none).unwrap_err();
        assert!(
            message.contains("untolerated taint {cloud.google.com/gke-spot: true}"),
            "{message}"
        );
        let tolerant = json!({"spec": {"tolerations": [
            {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]}});
        assert_eq!(place(&spot, &tolerant, &none).unwrap(), "spot-0");
        let wrong_value = json!({"spec": {"tolerations": [
            {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "false", "effect": "NoSchedule"}]}});
        assert!(place(&spot, &wrong_value, &none).is_err());
        let everything = json!({"spec": {"tolerations": [{"operator": "Exists"}]}});
        assert_eq!(place(&spot, &everything, &none).unwrap(), "spot-0");
        assert!(
            place(&[], &everything, &none)
                .unwrap_err()
                .starts_with("0/0 nodes are available: no nodes available")
        );
    }
}
