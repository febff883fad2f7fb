//! The fake scheduler: a pod goes to the first node whose labels match its
//! node selector and whose capacity covers its extended-resource requests
//! (`nvidia.com/gpu`, `google.com/tpu`); when none fits, the answer is
//! kube-scheduler's `FailedScheduling` message.

use std::collections::BTreeMap;

use serde_json::Value;

use super::FakeNode;

/// The extended resources a pod asks for (the larger of its limits and
/// requests, per container).
fn wanted(pod: &Value) -> BTreeMap<String, u64> {
    let mut wanted: BTreeMap<String, u64> = BTreeMap::new();
    for c in pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for kind in ["limits", "requests"] {
            if let Some(Value::Object(m)) = c.pointer(&format!("/resources/{kind}")) {
                for (k, v) in m {
                    if k.contains('/') {
                        let n = v
                            .as_str()
                            .and_then(|s| s.parse().ok())
                            .or_else(|| v.as_u64())
                            .unwrap_or(0);
                        let e = wanted.entry(k.clone()).or_default();
                        *e = (*e).max(n);
                    }
                }
            }
        }
    }
    wanted
}

/// The node `pod` goes to, or the scheduler's message when none fits.
pub(crate) fn place(nodes: &[FakeNode], pod: &Value) -> Result<String, String> {
    let selector: BTreeMap<String, String> = pod
        .pointer("/spec/nodeSelector")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    let wanted = wanted(pod);
    let total = nodes.len();
    let mut mismatch = 0;
    let mut insufficient: BTreeMap<String, usize> = BTreeMap::new();
    for node in nodes {
        if !selector.iter().all(|(k, v)| node.labels.get(k) == Some(v)) {
            mismatch += 1;
            continue;
        }
        let short: Vec<&String> = wanted
            .iter()
            .filter(|(k, n)| node.capacity.get(*k).copied().unwrap_or(0) < **n)
            .map(|(k, _)| k)
            .collect();
        if short.is_empty() {
            return Ok(node.name.clone());
        }
        for k in short {
            *insufficient.entry(k.clone()).or_default() += 1;
        }
    }
    let mut parts = Vec::new();
    if mismatch > 0 {
        parts.push(format!(
            "{mismatch} node(s) didn't match Pod's node affinity/selector"
        ));
    }
    for (k, n) in insufficient {
        parts.push(format!("{n} Insufficient {k}"));
    }
    Err(format!(
        "0/{total} nodes are available: {}. preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling.",
        parts.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn nodes() -> Vec<FakeNode> {
        vec![
            FakeNode::cpu("cpu-0"),
            FakeNode::cpu("gpu-0")
                .label("cloud.google.com/gke-accelerator", "nvidia-l4")
                .capacity("nvidia.com/gpu", 1),
        ]
    }

    fn gpu_pod(count: u64) -> Value {
        json!({"spec": {
            "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
            "containers": [{"resources": {"limits": {"nvidia.com/gpu": count.to_string()}}}],
        }})
    }

    #[test]
    fn a_pod_goes_to_a_node_that_fits() {
        assert_eq!(place(&nodes(), &json!({"spec": {}})).unwrap(), "cpu-0");
        assert_eq!(place(&nodes(), &gpu_pod(1)).unwrap(), "gpu-0");
    }

    #[test]
    fn an_unfit_pod_gets_the_schedulers_message() {
        let message = place(&nodes(), &gpu_pod(2)).unwrap_err();
        assert!(
            message.starts_with("0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 Insufficient nvidia.com/gpu."),
            "{message}"
        );
    }
}
