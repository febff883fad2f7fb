//! The cluster's entry in the user's kubeconfig, as `gcloud container
//! clusters get-credentials` writes it: a cluster, a user whose token
//! comes from `gke-gcloud-auth-plugin`, and a context, all named
//! `gke_{project}_{zone}_{cluster}`, made current. Editing is pure (a YAML
//! document as JSON in, out); [`read()`] and [`write()`] do the IO, keeping
//! every other entry and key of the file.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::error::InfraError;

/// The credential plugin GKE kubeconfigs run.
pub const AUTH_PLUGIN: &str = "gke-gcloud-auth-plugin";

/// Where a cluster is and how to trust it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterAccess {
    /// The context, cluster and user name (`gke_{project}_{zone}_{cluster}`).
    pub context: String,
    /// The API server's URL.
    pub server: String,
    /// The cluster's CA certificate, base64 PEM as GKE gives it (`None`
    /// or empty: none).
    pub ca_data: Option<String>,
}

fn cluster_entry(access: &ClusterAccess) -> Value {
    let mut cluster = json!({"server": access.server});
    if let Some(ca) = access.ca_data.as_deref().filter(|c| !c.is_empty()) {
        cluster["certificate-authority-data"] = json!(ca);
    }
    json!({"name": access.context, "cluster": cluster})
}

fn context_entry(access: &ClusterAccess) -> Value {
    json!({"name": access.context, "context": {"cluster": access.context, "user": access.context}})
}

fn upsert(doc: &mut Value, key: &str, entry: Value) {
    let name = entry["name"].clone();
    if !doc[key].is_array() {
        doc[key] = json!([]);
    }
    if let Value::Array(list) = &mut doc[key] {
        match list.iter_mut().find(|e| e["name"] == name) {
            Some(e) => *e = entry,
            None => list.push(entry),
        }
    }
}

fn remove(doc: &mut Value, key: &str, name: &str) {
    if let Value::Array(list) = &mut doc[key] {
        list.retain(|e| e["name"] != name);
    }
}

/// A kubeconfig with nothing in it.
pub fn empty() -> Value {
    json!({"apiVersion": "v1", "kind": "Config", "preferences": {}, "clusters": [], "contexts": [], "users": []})
}

/// `doc` with the cluster's entries (replacing same-named ones) and its
/// context current.
pub fn merged(mut doc: Value, access: &ClusterAccess) -> Value {
    if !doc.is_object() {
        doc = empty();
    }
    upsert(&mut doc, "clusters", cluster_entry(access));
    upsert(
        &mut doc,
        "users",
        json!({"name": access.context, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": AUTH_PLUGIN,
            "installHint": "Install gke-gcloud-auth-plugin for use with kubectl by following https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl#install_plugin",
            "provideClusterInfo": true,
        }}}),
    );
    upsert(&mut doc, "contexts", context_entry(access));
    doc["current-context"] = json!(access.context);
    doc
}

/// `doc` without the context `context` and its cluster and user; the
/// current context is cleared when it was that one.
pub fn removed(mut doc: Value, context: &str) -> Value {
    for key in ["clusters", "users", "contexts"] {
        remove(&mut doc, key, context);
    }
    if doc["current-context"] == context {
        doc["current-context"] = json!("");
    }
    doc
}

/// The server of `context`'s cluster (when the context exists) and the
/// current context.
pub fn state(doc: &Value, context: &str) -> (Option<String>, Option<String>) {
    let find = |key: &str, name: &str| {
        doc[key]
            .as_array()
            .and_then(|l| l.iter().find(|e| e["name"] == name).cloned())
    };
    let server = find("contexts", context)
        .and_then(|c| {
            c.pointer("/context/cluster")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .and_then(|cluster| find("clusters", &cluster))
        .and_then(|c| {
            c.pointer("/cluster/server")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
    let current = doc["current-context"]
        .as_str()
        .filter(|c| !c.is_empty())
        .map(str::to_owned);
    (server, current)
}

/// A kubeconfig for this process alone: the cluster with a bearer token.
pub fn with_token(access: &ClusterAccess, token: &str) -> Value {
    let mut doc = empty();
    upsert(&mut doc, "clusters", cluster_entry(access));
    upsert(
        &mut doc,
        "users",
        json!({"name": access.context, "user": {"token": token}}),
    );
    upsert(&mut doc, "contexts", context_entry(access));
    doc["current-context"] = json!(access.context);
    doc
}

/// The file to edit: the first of the `:`-separated `KUBECONFIG` files (as
/// kubectl writes new entries there), else `~/.kube/config`.
pub fn path(kubeconfig_setting: &str) -> PathBuf {
    PathBuf::from(
        kubeconfig_setting
            .split(':')
            .next()
            .unwrap_or(kubeconfig_setting),
    )
}

/// The kubeconfig at `path` (an empty one when the file does not exist).
///
/// # Errors
/// [`InfraError::Kubeconfig`] when it cannot be read or is not YAML.
pub fn read(path: &Path) -> Result<Value, InfraError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(empty()),
        Err(e) => {
            return Err(InfraError::Kubeconfig {
                message: format!("cannot read the kubeconfig {}: {e}", path.display()),
            });
        }
    };
    if text.trim().is_empty() {
        return Ok(empty());
    }
    serde_saphyr::from_str::<Value>(&text).map_err(|e| InfraError::Kubeconfig {
        message: format!("the kubeconfig {} is not valid YAML: {e}", path.display()),
    })
}

/// Write `doc` to `path` (directories made, owner-only permissions, via a
/// temporary file renamed into place, so a reader never sees half a file).
///
/// # Errors
/// [`InfraError::Kubeconfig`] naming the file.
pub fn write(path: &Path, doc: &Value) -> Result<(), InfraError> {
    let fail = |e: &dyn std::fmt::Display| InfraError::Kubeconfig {
        message: format!("cannot write the kubeconfig {}: {e}", path.display()),
    };
    let text = serde_saphyr::to_string(doc).map_err(|e| fail(&e))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| fail(&e))?;
    }
    let tmp = path.with_extension(format!("kinetic-{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| fail(&e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| fail(&e))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| fail(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access() -> ClusterAccess {
        ClusterAccess {
            context: "gke_p_us-central1-a_c".into(),
            server: "https://34.1.2.3".into(),
            ca_data: Some("Q0E=".into()),
        }
    }

    #[test]
    fn merge_keeps_other_entries_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kube/config");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(
            &file,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: other\n  cluster:\n    server: https://10.0.0.1\ncontexts:\n- name: other\n  context:\n    cluster: other\n    user: other\ncurrent-context: other\nusers:\n- name: other\n  user:\n    token: t\npreferences: {}\n",
        )
        .unwrap();
        let doc = merged(read(&file).unwrap(), &access());
        write(&file, &doc).unwrap();
        let back = read(&file).unwrap();
        assert_eq!(back, doc);
        assert_eq!(
            state(&back, "gke_p_us-central1-a_c"),
            (
                Some("https://34.1.2.3".into()),
                Some("gke_p_us-central1-a_c".into())
            )
        );
        assert_eq!(back["clusters"].as_array().unwrap().len(), 2);
        assert_eq!(back["users"][1]["user"]["exec"]["command"], AUTH_PLUGIN);
        assert_eq!(
            back["clusters"][1]["cluster"]["certificate-authority-data"],
            "Q0E="
        );
        // Merging again replaces, never duplicates.
        assert_eq!(merged(back.clone(), &access()), back);
        // The config kube reads is the one written.
        let kc = kube::config::Kubeconfig::read_from(&file).unwrap();
        assert_eq!(kc.current_context.as_deref(), Some("gke_p_us-central1-a_c"));

        let gone = removed(back, "gke_p_us-central1-a_c");
        assert_eq!(state(&gone, "gke_p_us-central1-a_c"), (None, None));
        assert_eq!(gone["contexts"].as_array().unwrap().len(), 1);
        assert_eq!(state(&empty(), "x"), (None, None));
        assert_eq!(read(&dir.path().join("missing")).unwrap(), empty());
        assert_eq!(path("/a/one:/b/two"), PathBuf::from("/a/one"));
        std::fs::write(dir.path().join("bad"), "clusters: [").unwrap();
        assert!(
            read(&dir.path().join("bad"))
                .unwrap_err()
                .to_string()
                .contains("not valid YAML")
        );
    }
}
