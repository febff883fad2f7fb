//! Inside the cluster, through `kube`: the jobs' namespace and service
//! account with its Workload Identity annotation, published manifests
//! (LeaderWorkerSet, the NVIDIA driver installer) applied object by object,
//! and the nodes of each pool. The client talks to the API server GKE
//! reports for the cluster, with the caller's Google token.

use std::collections::BTreeMap;

use crate::model::{
    KubeSpec, LABEL_NODE_POOL, ManifestBundle, ObservedKube, RoleRule, RoleSpec,
    WORKLOAD_IDENTITY_ANNOTATION,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
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
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| {
                InfraError::other(format!(
                    "cannot configure a client of {}: {e}",
                    access.server
                ))
            })?;
    config.headers.push((
        reqwest::header::USER_AGENT,
        reqwest::header::HeaderValue::from_static(crate::USER_AGENT),
    ));
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

/// Why the installed `bundle` does not serve yet, `None` when it does: its
/// controller's Deployment missing or without `Available: True`, or (for
/// LeaderWorkerSet) its webhook not answering. The webhook is asked as the
/// API server asks it: a server-side dry run of an invalid LeaderWorkerSet
/// (in the controller's namespace) goes through the mutating webhook before it is refused
/// as invalid (422); a webhook that cannot be called fails it with 500.
pub(crate) async fn not_serving(
    client: &kube::Client,
    bundle: &ManifestBundle,
) -> Result<Option<String>, InfraError> {
    let mut namespace = "default";
    if let Some(controller) = &bundle.controller {
        let (ns, name) = controller
            .split_once('/')
            .unwrap_or(("default", controller));
        namespace = ns;
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
        let deployment = deployments
            .get_opt(name)
            .await
            .map_err(|e| kube_error(&format!("reading Deployment {controller}"), e))?;
        let Some(deployment) = deployment else {
            return Ok(Some(format!(
                "its controller's Deployment {controller} is missing"
            )));
        };
        let available = deployment
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Available");
        match available {
            Some(c) if c.status == "True" => {}
            Some(c) => {
                return Ok(Some(format!(
                    "its controller's Deployment {controller} is not available ({}: {})",
                    c.reason.unwrap_or_default(),
                    c.message.unwrap_or_default()
                )));
            }
            None => {
                return Ok(Some(format!(
                    "its controller's Deployment {controller} is not available yet"
                )));
            }
        }
    }
    if bundle.marker_kind != "CustomResourceDefinition"
        || bundle.marker_name != "leaderworkersets.leaderworkerset.x-k8s.io"
    {
        return Ok(None);
    }
    let gvk = GroupVersionKind::gvk("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet");
    let resource = kube::core::ApiResource::from_gvk_with_plural(&gvk, "leaderworkersets");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let probe: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "kinetic-webhook-probe", "namespace": namespace},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 0,
            "workerTemplate": {"spec": {"containers": [{"name": "probe", "image": "probe"}]}}}},
    }))
    .map_err(|e| InfraError::other(e.to_string()))?;
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match api.create(&params, &probe).await {
        // Refused as invalid: the webhooks ran.
        Err(kube::Error::Api(s)) if s.code == 422 => Ok(None),
        Err(kube::Error::Api(s)) if s.code >= 500 => {
            Ok(Some(format!("its webhook does not answer: {}", s.message)))
        }
        Err(e) => Err(kube_error("asking LeaderWorkerSet's webhook", e)),
        // Accepted (a dry run: nothing was stored; an API server that
        // ignored dryRun stored it, so it goes).
        Ok(_) => {
            let _ = api
                .delete("kinetic-webhook-probe", &kube::api::DeleteParams::default())
                .await;
            Ok(None)
        }
    }
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
    let jobs_role = role_rules(client, &spec.namespace, &spec.jobs_role.name).await?;
    let hosts_role = role_rules(client, &spec.namespace, &spec.hosts_role.name).await?;
    let hosts_role_bound = role_bound(client, &spec.namespace, &spec.hosts_role).await?;
    let lws = installed(client, &spec.lws).await?;
    Ok(ObservedKube {
        namespace,
        service_account,
        jobs_role,
        hosts_role,
        hosts_role_bound,
        lws_not_ready: if lws {
            not_serving(client, &spec.lws).await?
        } else {
            None
        },
        lws,
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

/// The rules of the Role `name` in `namespace`, `None` when it is missing.
async fn role_rules(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<Vec<RoleRule>>, InfraError> {
    let roles: Api<Role> = Api::namespaced(client.clone(), namespace);
    let role = roles
        .get_opt(name)
        .await
        .map_err(|e| kube_error(&format!("reading Role {namespace}/{name}"), e))?;
    Ok(role.map(|role| {
        role.rules
            .unwrap_or_default()
            .into_iter()
            .map(|r| RoleRule {
                api_groups: r.api_groups.unwrap_or_default(),
                resources: r.resources.unwrap_or_default(),
                verbs: r.verbs,
            })
            .collect()
    }))
}

/// Whether the RoleBinding named as `role` binds it to its
/// [`RoleSpec::bound_to`] service account (`true` for a Role bound to no
/// one by `up`).
async fn role_bound(
    client: &kube::Client,
    namespace: &str,
    role: &RoleSpec,
) -> Result<bool, InfraError> {
    let Some(account) = &role.bound_to else {
        return Ok(true);
    };
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), namespace);
    let binding = bindings
        .get_opt(&role.name)
        .await
        .map_err(|e| kube_error(&format!("reading RoleBinding {namespace}/{}", role.name), e))?;
    Ok(binding.is_some_and(|b| {
        b.role_ref.kind == "Role"
            && b.role_ref.name == role.name
            && b.subjects.unwrap_or_default().iter().any(|s| {
                s.kind == "ServiceAccount"
                    && s.name == *account
                    && s.namespace.as_deref().unwrap_or(namespace) == namespace
            })
    }))
}

/// Create the Role `role` in `namespace`, or replace the rules of the one
/// there; and, when it is bound to a service account, its RoleBinding
/// (made again when it binds something else: a RoleBinding's `roleRef`
/// cannot change).
pub(crate) async fn apply_role(
    client: &kube::Client,
    namespace: &str,
    role: &RoleSpec,
) -> Result<(), InfraError> {
    let roles: Api<Role> = Api::namespaced(client.clone(), namespace);
    let what = format!("creating Role {namespace}/{}", role.name);
    let object: Role = serde_json::from_value(role.to_json(namespace))
        .map_err(|e| InfraError::other(e.to_string()))?;
    match roles.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => roles
            .patch(
                &role.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"rules": role.to_json(namespace)["rules"]})),
            )
            .await
            .map(|_| ())
            .map_err(|e| kube_error(&what, e)),
        Err(e) => Err(kube_error(&what, e)),
    }?;
    let Some(binding) = role.binding_json(namespace) else {
        return Ok(());
    };
    if role_bound(client, namespace, role).await? {
        return Ok(());
    }
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), namespace);
    let what = format!("creating RoleBinding {namespace}/{}", role.name);
    let object: RoleBinding =
        serde_json::from_value(binding).map_err(|e| InfraError::other(e.to_string()))?;
    match bindings
        .delete(&role.name, &kube::api::DeleteParams::default())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(kube_error(&what, e)),
    }
    bindings
        .create(&PostParams::default(), &object)
        .await
        .map(|_| ())
        .map_err(|e| kube_error(&what, e))
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
