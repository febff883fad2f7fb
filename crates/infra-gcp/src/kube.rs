//! Inside the cluster, through `kube`: the jobs' namespace and service
//! account with its Workload Identity annotation, published manifests
//! (LeaderWorkerSet, the NVIDIA driver installer) applied object by object,
//! and the nodes of each pool. The client talks to the API server GKE
//! reports for the cluster, with the caller's Google token.

use std::collections::BTreeMap;

use crate::model::{
    KubeSpec, LABEL_NODE_POOL, ManifestBundle, ObservedKube, WORKLOAD_IDENTITY_ANNOTATION,
};
use k8s_openapi::api::core::v1::{Namespace, Node, ServiceAccount};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use crate::error::InfraError;
use crate::kubeconfig::{self, ClusterAccess};

/// What `what` failed with, as the API server said it.
pub(crate) fn kube_error(what: &str, e: kube::Error) -> InfraError {
    match e {
        kube::Error::Api(status) => {
            let hint = match status.code {
                401 | 403 => {
                    " (your account needs roles/container.admin, or roles/container.developer for jobs)"
                }
                _ => "",
            };
            InfraError::Kube {
                message: format!(
                    "{what} failed: the cluster's API server said {} {}: {}{hint}",
                    status.code, status.reason, status.message
                ),
            }
        }
        other => InfraError::Kube {
            message: format!("{what} failed: cannot reach the cluster's API server: {other}"),
        },
    }
}

/// A client of the cluster at `access`, authenticated with `token`.
pub(crate) async fn client(
    access: &ClusterAccess,
    token: &str,
) -> Result<kube::Client, InfraError> {
    let doc = kubeconfig::with_token(access, token);
    let text = serde_json::to_string(&doc).map_err(|e| InfraError::other(e.to_string()))?;
    let kc = kube::config::Kubeconfig::from_yaml(&text).map_err(|e| {
        InfraError::other(format!(
            "cannot configure a client of {}: {e}",
            access.server
        ))
    })?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| {
                InfraError::other(format!(
                    "cannot configure a client of {}: {e}",
                    access.server
                ))
            })?;
    kube::Client::try_from(config)
        .map_err(|e| InfraError::other(format!("cannot build a client of {}: {e}", access.server)))
}

/// The Kubernetes version of the API server `client` talks to.
pub(crate) async fn version(client: &kube::Client) -> Result<String, InfraError> {
    client
        .apiserver_version()
        .await
        .map(|v| v.git_version)
        .map_err(|e| kube_error("asking the cluster's version", e))
}

/// The API of the kind `api_version`/`kind` (found by discovery), in
/// `namespace` when the kind is namespaced.
async fn dynamic_api(
    client: &kube::Client,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
) -> Result<Api<DynamicObject>, InfraError> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| kube_error(&format!("finding the {api_version} {kind} API"), e))?;
    Ok(match caps.scope {
        kube::discovery::Scope::Namespaced => {
            Api::namespaced_with(client.clone(), namespace.unwrap_or("default"), &resource)
        }
        kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
    })
}

/// Whether the object marking `bundle` installed exists.
pub(crate) async fn installed(
    client: &kube::Client,
    bundle: &ManifestBundle,
) -> Result<bool, InfraError> {
    let api = dynamic_api(
        client,
        &bundle.marker_api_version,
        &bundle.marker_kind,
        bundle.marker_namespace.as_deref(),
    )
    .await?;
    api.get_opt(&bundle.marker_name)
        .await
        .map(|o| o.is_some())
        .map_err(|e| {
            kube_error(
                &format!("reading {} {}", bundle.marker_kind, bundle.marker_name),
                e,
            )
        })
}

/// What is inside the cluster.
pub(crate) async fn observe(
    client: &kube::Client,
    spec: &KubeSpec,
) -> Result<ObservedKube, InfraError> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = namespaces
        .get_opt(&spec.namespace)
        .await
        .map_err(|e| kube_error(&format!("reading namespace {}", spec.namespace), e))?
        .is_some();
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &spec.namespace);
    let service_account = accounts
        .get_opt(&spec.service_account)
        .await
        .map_err(|e| {
            kube_error(
                &format!(
                    "reading service account {}/{}",
                    spec.namespace, spec.service_account
                ),
                e,
            )
        })?
        .map(|sa| {
            sa.metadata
                .annotations
                .and_then(|a| a.get(WORKLOAD_IDENTITY_ANNOTATION).cloned())
                .unwrap_or_default()
        });
    Ok(ObservedKube {
        namespace,
        service_account,
        lws: installed(client, &spec.lws).await?,
        nvidia_driver: installed(client, &spec.nvidia_driver).await?,
        ..ObservedKube::default()
    })
}

/// Nodes (ready, total) per pool.
pub(crate) async fn nodes_by_pool(
    client: &kube::Client,
) -> Result<BTreeMap<String, (u32, u32)>, InfraError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes
        .list(&ListParams::default())
        .await
        .map_err(|e| kube_error("listing the cluster's nodes", e))?;
    let mut counts: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for node in list.items {
        let Some(pool) = node
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_NODE_POOL))
            .cloned()
        else {
            continue;
        };
        let ready = node
            .status
            .and_then(|s| s.conditions)
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let entry = counts.entry(pool).or_default();
        entry.1 += 1;
        if ready {
            entry.0 += 1;
        }
    }
    Ok(counts)
}

/// Make the namespace if missing, then the service account with its
/// Workload Identity annotation (or set the annotation on an existing one).
pub(crate) async fn apply_service_account(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    google_service_account: &str,
) -> Result<(), InfraError> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let what = format!("creating namespace {namespace}");
    if namespaces
        .get_opt(namespace)
        .await
        .map_err(|e| kube_error(&what, e))?
        .is_none()
    {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}}))
            .map_err(|e| InfraError::other(e.to_string()))?;
        match namespaces.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(kube_error(&what, e)),
        }
    }
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let what = format!("creating service account {namespace}/{name}");
    let annotations = json!({WORKLOAD_IDENTITY_ANNOTATION: google_service_account});
    match accounts
        .get_opt(name)
        .await
        .map_err(|e| kube_error(&what, e))?
    {
        None => {
            let sa: ServiceAccount = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": namespace,
                             "labels": {"app.kubernetes.io/managed-by": "kinetic"},
                             "annotations": annotations},
            }))
            .map_err(|e| InfraError::other(e.to_string()))?;
            match accounts.create(&PostParams::default(), &sa).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    patch_annotation(&accounts, name, &annotations, &what).await
                }
                Err(e) => Err(kube_error(&what, e)),
            }
        }
        Some(_) => patch_annotation(&accounts, name, &annotations, &what).await,
    }
}

async fn patch_annotation(
    accounts: &Api<ServiceAccount>,
    name: &str,
    annotations: &Value,
    what: &str,
) -> Result<(), InfraError> {
    accounts
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
        )
        .await
        .map(|_| ())
        .map_err(|e| kube_error(what, e))
}

/// The objects of a multi-document YAML manifest (empty documents skipped).
///
/// # Errors
/// [`InfraError::InvalidInput`] when it is not YAML or an object lacks
/// `apiVersion`, `kind` or `metadata.name`.
pub fn manifest_objects(text: &str, source: &str) -> Result<Vec<Value>, InfraError> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|e| InfraError::InvalidInput {
            message: format!("{source} is not a YAML manifest: {e}"),
        })?;
    let mut objects = Vec::new();
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
        let ok = doc["apiVersion"].is_string()
            && doc["kind"].is_string()
            && doc.pointer("/metadata/name").is_some_and(Value::is_string);
        if !ok {
            return Err(InfraError::InvalidInput {
                message: format!(
                    "{source} holds an object without apiVersion, kind or metadata.name: {}",
                    doc.to_string().chars().take(200).collect::<String>()
                ),
            });
        }
        objects.push(doc);
    }
    Ok(objects)
}

/// Create every object of `objects` that does not exist yet, in order;
/// objects that exist are left as they are. Returns how many were created.
pub(crate) async fn install(client: &kube::Client, objects: &[Value]) -> Result<usize, InfraError> {
    let mut created = 0;
    for object in objects {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str);
        let api = dynamic_api(client, api_version, kind, namespace).await?;
        let what = format!("creating {kind} {name}");
        if api
            .get_opt(name)
            .await
            .map_err(|e| kube_error(&what, e))?
            .is_some()
        {
            continue;
        }
        let dynamic: DynamicObject = serde_json::from_value(object.clone())
            .map_err(|e| InfraError::other(format!("{what}: {e}")))?;
        match api.create(&PostParams::default(), &dynamic).await {
            Ok(_) => created += 1,
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(kube_error(&what, e)),
        }
    }
    Ok(created)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_are_split_into_objects() {
        let objects = manifest_objects(
            "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\n# nothing\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: d\n  namespace: kube-system\n",
            "test",
        )
        .unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[1]["metadata"]["namespace"], "kube-system");
        let e = manifest_objects("kind: X\n", "the LWS manifests").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("the LWS manifests holds an object without"),
            "{e}"
        );
        assert!(manifest_objects("a: [", "m").is_err());
    }
}
