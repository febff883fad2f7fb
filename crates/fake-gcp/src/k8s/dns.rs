//! The cluster's DNS, as its DNS server answers pods: a pod with a
//! `hostname` and a `subdomain`, selected by a headless Service
//! (`clusterIP: None`) of the subdomain's name in its namespace, is
//! `{hostname}.{subdomain}.{namespace}.svc.cluster.local`, its IP address
//! (`status.podIP`); a pod that is not ready only when the Service
//! publishes not-ready addresses, and a pod being deleted or that ended
//! not at all, as endpoints leave them out.
//!
//! The fake's pods are processes of this host, whose resolver cannot be
//! pointed at the cluster, so the records are published as a hosts file,
//! `{root}/cluster-dns/hosts`, rewritten whole after each kubelet pass, and
//! every container's Python resolves through it: the directory holds a
//! `sitecustomize` module ([`RESOLVER`]) that the kubelet puts first on the
//! container's `PYTHONPATH`, which looks names up in the file (with a pod's
//! search domains `svc.cluster.local` and `cluster.local`) before the
//! host's resolver. `PYTHONPATH` keeps it, so every Python process of the
//! container resolves the cluster's names, as every process of a pod does;
//! programs other than Python resolve as the host does.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::meta::{deleting, phase, pod_ready};
use super::meta::{name_of, ns_of, str_at};
use super::store::Store;

/// The `sitecustomize` module that resolves the cluster's names.
pub(crate) const RESOLVER: &str = include_str!("cluster_dns.py");

/// The domain of the cluster's names.
pub(crate) const CLUSTER_DOMAIN: &str = "cluster.local";

/// The directory of the resolver and its records under the fake's `root`.
pub(crate) fn dir(root: &Path) -> PathBuf {
    root.join("cluster-dns")
}

/// Every pod's name and address the cluster's DNS answers, as
/// `(fully qualified name, IP address)`, sorted by name.
pub(crate) fn records(store: &Store) -> Vec<(String, String)> {
    let services = store.all("services");
    let mut out: Vec<(String, String)> = store
        .all_where("pods", |p| {
            !deleting(p) && !matches!(phase(p), "Succeeded" | "Failed")
        })
        .iter()
        .filter_map(|pod| {
            let hostname = str_at(pod, "/spec/hostname").filter(|h| !h.is_empty())?;
            let subdomain = str_at(pod, "/spec/subdomain").filter(|s| !s.is_empty())?;
            let ip = str_at(pod, "/status/podIP").filter(|ip| !ip.is_empty())?;
            let ns = ns_of(pod);
            let service = services
                .iter()
                .find(|s| ns_of(s) == ns && name_of(s) == subdomain)?;
            let publishes = service
                .pointer("/spec/publishNotReadyAddresses")
                .and_then(Value::as_bool)
                == Some(true);
            (str_at(service, "/spec/clusterIP") == Some("None")
                && selects(service, pod)
                && (publishes || pod_ready(pod)))
            .then(|| {
                (
                    format!("{hostname}.{subdomain}.{ns}.svc.{CLUSTER_DOMAIN}"),
                    ip.to_owned(),
                )
            })
        })
        .collect();
    out.sort();
    out
}

/// Whether the Service's selector (every label of it) matches the pod.
fn selects(service: &Value, pod: &Value) -> bool {
    let Some(selector) = service
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .filter(|s| !s.is_empty())
    else {
        return false;
    };
    selector
        .iter()
        .all(|(k, v)| pod.pointer("/metadata/labels").and_then(|l| l.get(k)) == Some(v))
}

/// Write the resolver and the current records under `root` (the records
/// only when they changed, replaced whole so that a reader never sees
/// half a file).
pub(crate) fn publish(store: &Store, root: &Path) -> std::io::Result<()> {
    let dir = dir(root);
    std::fs::create_dir_all(&dir)?;
    write_if_changed(&dir.join("sitecustomize.py"), RESOLVER)?;
    let text: String = records(store)
        .iter()
        .map(|(name, ip)| format!("{ip} {name}\n"))
        .collect();
    write_if_changed(&dir.join("hosts"), &text)
}

fn write_if_changed(path: &Path, text: &str) -> std::io::Result<()> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(());
    }
    let partial = path.with_extension(format!("{}.part", std::process::id()));
    std::fs::write(&partial, text)?;
    std::fs::rename(&partial, path)
}

/// A container's `PYTHONPATH`: the resolver's directory first, then the
/// pod spec's own value, if any.
pub(crate) fn python_path(root: &Path, own: Option<&str>) -> String {
    let dir = dir(root).display().to_string();
    match own.filter(|p| !p.is_empty()) {
        Some(own) => format!("{dir}:{own}"),
        None => dir,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, labels: Value, ready: bool) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "ns", "labels": labels},
               "spec": {"hostname": name, "subdomain": "set"},
               "status": {"phase": "Running", "podIP": format!("127.9.0.{}", name.len()),
                          "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    }

    fn service(publish: bool, cluster_ip: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "set", "namespace": "ns"},
               "spec": {"clusterIP": cluster_ip, "selector": {"app": "a"},
                        "publishNotReadyAddresses": publish}})
    }

    #[test]
    fn a_headless_service_publishes_the_pods_it_selects() {
        let store = Store::new();
        store
            .create("pods", "ns", pod("p", json!({"app": "a"}), true))
            .unwrap();
        store
            .create("pods", "ns", pod("other", json!({"app": "b"}), true))
            .unwrap();
        store
            .create("pods", "ns", pod("slow", json!({"app": "a"}), false))
            .unwrap();
        assert!(records(&store).is_empty(), "no Service, no records");
        store
            .create("services", "ns", service(false, "None"))
            .unwrap();
        assert_eq!(
            records(&store),
            [(
                "p.set.ns.svc.cluster.local".to_owned(),
                "127.9.0.1".to_owned()
            )]
        );
        store.modify("services", "ns", "set", |s| {
            s["spec"]["publishNotReadyAddresses"] = json!(true);
        });
        assert_eq!(records(&store).len(), 2, "not-ready pods published too");
        store.modify("services", "ns", "set", |s| {
            s["spec"]["clusterIP"] = json!("10.0.0.9");
        });
        assert!(records(&store).is_empty(), "only a headless Service");
    }

    #[test]
    fn the_pythonpath_puts_the_resolver_first() {
        let root = Path::new("/fake");
        assert_eq!(python_path(root, None), "/fake/cluster-dns");
        assert_eq!(python_path(root, Some("")), "/fake/cluster-dns");
        assert_eq!(python_path(root, Some("/a:/b")), "/fake/cluster-dns:/a:/b");
    }
}
