//! Who is calling and what they may do, as the API server decides it:
//! bearer tokens name users; every resource request is described as the
//! API server's `RequestInfo` does (verb, API group, resource,
//! subresource, namespace, name) and authorised by RBAC over the stored
//! Roles, ClusterRoles and their bindings; a refusal is a 403 `Status`
//! with the API server's message. The built-in ClusterRoles `cluster-admin`,
//! `admin`, `edit` and `view` are seeded with the rules their aggregation
//! gives them, for the resources this fake serves.
//!
//! A request without a token, or with one no user was registered for,
//! acts as the cluster's administrator (group `system:masters`), as a
//! kubeconfig made by `gcloud` does for a project owner; tests register
//! other users with [`super::FakeCluster::add_user`].
//!
//! The `OwnerReferencesPermissionEnforcement` admission plugin is here too,
//! since it asks the authorizer: setting `ownerReferences` needs `delete`
//! on the object, and setting `blockOwnerDeletion: true` needs `update` on
//! the owner's `finalizers` subresource.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::{Value, json};

use super::store::{ApiError, Store};

/// The group whose members every request is allowed.
const MASTERS: &str = "system:masters";

/// A caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct User {
    pub(crate) name: String,
    pub(crate) groups: Vec<String>,
}

impl User {
    /// The administrator: what unknown tokens act as.
    pub(crate) fn admin() -> Self {
        Self {
            name: "kubernetes-admin".to_owned(),
            groups: vec![MASTERS.to_owned(), "system:authenticated".to_owned()],
        }
    }

    /// The controllers of the control plane (Job controller, garbage
    /// collector…), which are allowed everything they do.
    pub(crate) fn is_admin(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }
}

/// Registered bearer tokens.
#[derive(Debug, Default)]
pub(crate) struct Users {
    by_token: Mutex<BTreeMap<String, User>>,
    revoked: Mutex<std::collections::BTreeSet<String>>,
}

impl Users {
    pub(crate) fn add(&self, name: &str, token: &str) {
        self.by_token
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                token.to_owned(),
                User {
                    name: name.to_owned(),
                    groups: vec!["system:authenticated".to_owned()],
                },
            );
    }

    /// Register the token of a pod's service account `name` in
    /// `namespace`: it acts as `system:serviceaccount:{namespace}:{name}`,
    /// in the groups the API server gives service accounts.
    pub(crate) fn add_service_account(&self, token: &str, namespace: &str, name: &str) {
        let mut users = self.by_token.lock().unwrap_or_else(|p| p.into_inner());
        users.insert(
            token.to_owned(),
            User {
                name: format!("system:serviceaccount:{namespace}:{name}"),
                groups: vec![
                    "system:serviceaccounts".to_owned(),
                    format!("system:serviceaccounts:{namespace}"),
                    "system:authenticated".to_owned(),
                ],
            },
        );
    }

    /// A token no longer valid (bound to a pod that is gone): requests
    /// bearing it are refused as unauthenticated (401).
    pub(crate) fn revoke(&self, token: &str) {
        let mut users = self.by_token.lock().unwrap_or_else(|p| p.into_inner());
        if users.remove(token).is_some() {
            self.revoked
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(token.to_owned());
        }
    }

    /// Whether an `Authorization` header value bears a revoked token.
    pub(crate) fn is_revoked(&self, authorization: Option<&str>) -> bool {
        authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .is_some_and(|t| {
                self.revoked
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .contains(t)
            })
    }

    /// The user a `Authorization` header value names.
    pub(crate) fn of_header(&self, authorization: Option<&str>) -> User {
        let token = authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim);
        token
            .and_then(|t| {
                self.by_token
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(t)
                    .cloned()
            })
            .unwrap_or_else(User::admin)
    }
}

/// What a resource request asks for, as the API server's `RequestInfo`
/// describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestInfo {
    pub(crate) verb: String,
    pub(crate) group: String,
    /// The plural (`jobs`, `pods`).
    pub(crate) resource: String,
    pub(crate) subresource: Option<String>,
    /// Empty for cluster-scoped resources.
    pub(crate) namespace: String,
    pub(crate) name: Option<String>,
}

impl RequestInfo {
    /// Describe `method path?query`; `None` for requests that are not
    /// about a resource (discovery, `/version`).
    pub(crate) fn parse(method: &str, path: &str, query: Option<&str>) -> Option<Self> {
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, rest) = match parts.as_slice() {
            ["api", _version, rest @ ..] => (String::new(), rest),
            ["apis", group, _version, rest @ ..] => ((*group).to_owned(), rest),
            _ => return None,
        };
        let (namespace, resource, name, subresource) = match rest {
            [] => return None,
            ["namespaces", ns, plural, tail @ ..] => {
                let name = tail.first().map(|s| (*s).to_owned());
                let sub = tail.get(1).map(|s| (*s).to_owned());
                ((*ns).to_owned(), (*plural).to_owned(), name, sub)
            }
            ["namespaces", ns] => (
                (*ns).to_owned(),
                "namespaces".to_owned(),
                Some((*ns).to_owned()),
                None,
            ),
            [plural, tail @ ..] => {
                let name = tail.first().map(|s| (*s).to_owned());
                let sub = tail.get(1).map(|s| (*s).to_owned());
                (String::new(), (*plural).to_owned(), name, sub)
            }
        };
        let watching = query.is_some_and(|q| {
            q.split('&')
                .any(|kv| kv == "watch=true" || kv == "watch=1" || kv == "watch")
        });
        let verb = match (method, name.is_some()) {
            ("GET", true) => "get",
            ("GET", false) if watching => "watch",
            ("GET", false) => "list",
            ("POST", _) => "create",
            ("PUT", _) => "update",
            ("PATCH", _) => "patch",
            ("DELETE", true) => "delete",
            ("DELETE", false) => "deletecollection",
            _ => return None,
        };
        Some(Self {
            verb: verb.to_owned(),
            group,
            resource,
            subresource,
            namespace,
            name,
        })
    }

    /// `{resource}[/{subresource}]`, as RBAC rules and messages name it.
    fn resource_path(&self) -> String {
        match &self.subresource {
            Some(sub) => format!("{}/{sub}", self.resource),
            None => self.resource.clone(),
        }
    }

    /// `jobs.batch`, `pods`: the qualified resource of `Status` messages.
    fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

/// One RBAC rule.
fn rule_allows(rule: &Value, info: &RequestInfo) -> bool {
    let list = |key: &str| -> Vec<String> {
        rule.get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let has = |key: &str, want: &str| list(key).iter().any(|v| v == "*" || v == want);
    if !has("verbs", &info.verb) || !has("apiGroups", &info.group) {
        return false;
    }
    let path = info.resource_path();
    let resources = list("resources");
    let resource_ok = resources.iter().any(|r| {
        r == "*"
            || *r == path
            || info
                .subresource
                .as_ref()
                .is_some_and(|sub| *r == format!("*/{sub}"))
    });
    if !resource_ok {
        return false;
    }
    let names = list("resourceNames");
    names.is_empty() || info.name.as_ref().is_some_and(|n| names.contains(n))
}

fn subject_matches(subject: &Value, user: &User) -> bool {
    let kind = subject.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = subject.get("name").and_then(Value::as_str).unwrap_or("");
    match kind {
        "User" => name == user.name,
        "Group" => user.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let ns = subject
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            user.name == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

fn binds(binding: &Value, user: &User) -> bool {
    binding
        .get("subjects")
        .and_then(Value::as_array)
        .is_some_and(|s| s.iter().any(|subject| subject_matches(subject, user)))
}

fn role_rules(store: &Store, role_ref: &Value, namespace: &str) -> Vec<Value> {
    let kind = role_ref.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = role_ref.get("name").and_then(Value::as_str).unwrap_or("");
    let role = match kind {
        "ClusterRole" => store.get("clusterroles.rbac.authorization.k8s.io", "", name),
        "Role" => store.get("roles.rbac.authorization.k8s.io", namespace, name),
        _ => return Vec::new(),
    };
    role.ok()
        .and_then(|r| r.get("rules").and_then(Value::as_array).cloned())
        .unwrap_or_default()
}

/// Whether RBAC allows `user` what `info` asks.
pub(crate) fn allowed(store: &Store, user: &User, info: &RequestInfo) -> bool {
    if user.is_admin() {
        return true;
    }
    let cluster_bindings = store.all("clusterrolebindings.rbac.authorization.k8s.io");
    let mut rules: Vec<Value> = cluster_bindings
        .iter()
        .filter(|b| binds(b, user))
        .flat_map(|b| role_rules(store, b.get("roleRef").unwrap_or(&Value::Null), ""))
        .collect();
    if !info.namespace.is_empty() {
        rules.extend(
            store
                .all("rolebindings.rbac.authorization.k8s.io")
                .iter()
                .filter(|b| super::meta::ns_of(b) == info.namespace && binds(b, user))
                .flat_map(|b| {
                    role_rules(
                        store,
                        b.get("roleRef").unwrap_or(&Value::Null),
                        &info.namespace,
                    )
                }),
        );
    }
    rules.iter().any(|r| rule_allows(r, info))
}

/// The 403 the API server answers when RBAC refuses `info` to `user`.
pub(crate) fn forbidden(user: &User, info: &RequestInfo) -> ApiError {
    let scope = if info.namespace.is_empty() {
        "at the cluster scope".to_owned()
    } else {
        format!("in the namespace {:?}", info.namespace)
    };
    let why = format!(
        "User {:?} cannot {} resource {:?} in API group {:?} {scope}",
        user.name,
        info.verb,
        info.resource_path(),
        info.group
    );
    forbidden_status(info, why)
}

/// A 403 `Status` about the object of `info`, with `why` after
/// `… is forbidden: `, and the details the API server gives (name, group,
/// kind = the resource).
pub(crate) fn forbidden_status(info: &RequestInfo, why: String) -> ApiError {
    let message = match &info.name {
        Some(name) => format!("{} {name:?} is forbidden: {why}", info.qualified()),
        None => format!("{} is forbidden: {why}", info.qualified()),
    };
    let mut details = json!({"group": info.group, "kind": info.resource});
    if let Some(name) = &info.name {
        details["name"] = json!(name);
    }
    ApiError::new(403, "Forbidden", message).with_details(details)
}

/// The `OwnerReferencesPermissionEnforcement` admission plugin, for a
/// create or update of `object` (replacing `old`, if any) by `user`.
pub(crate) fn check_owner_references(
    store: &Store,
    user: &User,
    info: &RequestInfo,
    object: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let refs = |v: Option<&Value>| -> Vec<Value> {
        v.and_then(|o| o.pointer("/metadata/ownerReferences"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let new_refs = refs(Some(object));
    let old_refs = refs(old);
    if new_refs == old_refs || (old.is_none() && new_refs.is_empty()) {
        return Ok(());
    }
    let mut named = info.clone();
    if named.name.is_none() {
        named.name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(str::to_owned);
    }
    let delete = RequestInfo {
        verb: "delete".to_owned(),
        ..named.clone()
    };
    if !allowed(store, user, &delete) {
        return Err(forbidden_status(
            &named,
            "cannot set an ownerRef on a resource you can't delete: , <nil>".to_owned(),
        ));
    }
    let blocking = |r: &Value| r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true);
    for r in new_refs.iter().filter(|r| blocking(r)) {
        let uid = r.get("uid").and_then(Value::as_str);
        let was_blocking = old_refs
            .iter()
            .any(|o| o.get("uid").and_then(Value::as_str) == uid && blocking(o));
        if was_blocking {
            continue;
        }
        let api_version = r.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let kind = r.get("kind").and_then(Value::as_str).unwrap_or("");
        let group = api_version
            .split_once('/')
            .map_or("", |(g, _)| g)
            .to_owned();
        let Some(resource) = super::resources::plural_of_kind(&group, kind) else {
            return Err(forbidden_status(
                &named,
                format!(
                    "cannot set blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion {api_version} Kind {kind}: , no matches for kind {kind:?} in version {api_version:?}"
                ),
            ));
        };
        let finalizers = RequestInfo {
            verb: "update".to_owned(),
            group,
            resource,
            subresource: Some("finalizers".to_owned()),
            namespace: info.namespace.clone(),
            name: r.get("name").and_then(Value::as_str).map(str::to_owned),
        };
        if !allowed(store, user, &finalizers) {
            return Err(forbidden_status(
                &named,
                "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: , <nil>".to_owned(),
            ));
        }
    }
    Ok(())
}

/// A `SelfSubjectAccessReview` answered for `user`: the review with its
/// `status` (`allowed`, and a `reason` when RBAC allows it).
pub(crate) fn self_subject_access_review(store: &Store, user: &User, review: &Value) -> Value {
    let attrs = review
        .pointer("/spec/resourceAttributes")
        .cloned()
        .unwrap_or(json!({}));
    let text = |k: &str| {
        attrs
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let optional = |k: &str| Some(text(k)).filter(|s| !s.is_empty());
    let info = RequestInfo {
        verb: text("verb"),
        group: text("group"),
        resource: text("resource"),
        subresource: optional("subresource"),
        namespace: text("namespace"),
        name: optional("name"),
    };
    let allowed = allowed(store, user, &info);
    let mut out = review.clone();
    out["apiVersion"] = json!("authorization.k8s.io/v1");
    out["kind"] = json!("SelfSubjectAccessReview");
    out["status"] = if allowed {
        json!({"allowed": true, "reason": "allowed by RBAC"})
    } else {
        json!({"allowed": false})
    };
    out
}

/// Read, write and read-write verbs, as the bootstrap policy names them.
const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources})
}

fn read_write() -> Vec<&'static str> {
    READ.iter().chain(WRITE).copied().collect()
}

/// The rules of `view`, for the resources this fake serves.
fn view_rules() -> Vec<Value> {
    vec![
        rule(
            READ,
            &[""],
            &[
                "pods",
                "serviceaccounts",
                "services",
                "configmaps",
                "limitranges",
                "resourcequotas",
                "events",
                "pods/status",
                "pods/log",
                "namespaces",
                "namespaces/status",
                "resourcequotas/status",
            ],
        ),
        rule(
            READ,
            &["apps"],
            &[
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/status",
            ],
        ),
        rule(READ, &["batch"], &["jobs", "jobs/status"]),
    ]
}

/// The rules `edit` adds to `view`.
fn edit_rules() -> Vec<Value> {
    let mut rules = view_rules();
    rules.extend([
        rule(
            READ,
            &[""],
            &[
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
                "secrets",
            ],
        ),
        rule(&["impersonate"], &[""], &["serviceaccounts"]),
        rule(&["create"], &[""], &["pods/eviction"]),
        rule(
            WRITE,
            &[""],
            &[
                "pods",
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
            ],
        ),
        rule(
            WRITE,
            &[""],
            &["serviceaccounts", "services", "configmaps", "secrets"],
        ),
        rule(WRITE, &["apps"], &["daemonsets", "deployments"]),
        rule(WRITE, &["batch"], &["jobs", "cronjobs"]),
    ]);
    rules
}

/// The rules `admin` adds to `edit`.
fn admin_rules() -> Vec<Value> {
    let mut rules = edit_rules();
    rules.push(rule(
        &read_write(),
        &["rbac.authorization.k8s.io"],
        &["roles", "rolebindings"],
    ));
    rules.push(rule(
        &["create"],
        &["authorization.k8s.io"],
        &["localsubjectaccessreviews"],
    ));
    rules
}

/// The built-in ClusterRoles, as a cluster bootstraps them (aggregated
/// rules filled in), and the rule every authenticated user has to ask
/// what they may do.
pub(crate) fn seed_roles(store: &Store) {
    let role = |name: &str, rules: Vec<Value>| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
               "rules": rules})
    };
    let roles = [
        role("cluster-admin", vec![rule(&["*"], &["*"], &["*"])]),
        role("admin", admin_rules()),
        role("edit", edit_rules()),
        role("view", view_rules()),
        role(
            "system:basic-user",
            vec![rule(
                &["create"],
                &["authorization.k8s.io"],
                &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
            )],
        ),
    ];
    for r in roles {
        let _ = store.create("clusterroles.rbac.authorization.k8s.io", "", r);
    }
    let _ = store.create(
        "clusterrolebindings.rbac.authorization.k8s.io",
        "",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "system:basic-user"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:basic-user"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}]}),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: &str, path: &str) -> RequestInfo {
        RequestInfo::parse(method, path, None).unwrap()
    }

    #[test]
    fn request_info_follows_the_api_servers() {
        let i = info("POST", "/apis/batch/v1/namespaces/ns/jobs");
        assert_eq!(
            (i.verb.as_str(), i.group.as_str(), i.resource.as_str()),
            ("create", "batch", "jobs")
        );
        assert_eq!(i.namespace, "ns");
        let i = info("GET", "/api/v1/namespaces/ns/pods/p-1/log");
        assert_eq!(
            (i.verb.as_str(), i.resource_path().as_str()),
            ("get", "pods/log")
        );
        let i =
            RequestInfo::parse("GET", "/api/v1/namespaces/ns/pods", Some("watch=true")).unwrap();
        assert_eq!(i.verb, "watch");
        let i = info("GET", "/api/v1/nodes");
        assert_eq!((i.verb.as_str(), i.namespace.as_str()), ("list", ""));
        assert!(RequestInfo::parse("GET", "/apis", None).is_none());
        assert!(RequestInfo::parse("GET", "/version", None).is_none());
    }

    #[test]
    fn edit_may_create_jobs_and_secrets_but_not_set_job_finalizers() {
        let store = Store::new();
        seed_roles(&store);
        store
            .create(
                "rolebindings.rbac.authorization.k8s.io",
                "ns",
                json!({"metadata": {"name": "dev-edit"},
                       "roleRef": {"kind": "ClusterRole", "name": "edit"},
                       "subjects": [{"kind": "User", "name": "dev"}]}),
            )
            .unwrap();
        let dev = User {
            name: "dev".into(),
            groups: vec!["system:authenticated".into()],
        };
        for (verb, group, resource, sub, want) in [
            ("create", "batch", "jobs", None, true),
            ("create", "", "secrets", None, true),
            ("delete", "", "secrets", None, true),
            ("update", "batch", "jobs", Some("finalizers"), false),
            ("list", "", "events", None, true),
            ("create", "", "resourcequotas", None, false),
        ] {
            let i = RequestInfo {
                verb: verb.into(),
                group: group.into(),
                resource: resource.into(),
                subresource: sub.map(str::to_owned),
                namespace: "ns".into(),
                name: None,
            };
            assert_eq!(allowed(&store, &dev, &i), want, "{i:?}");
        }
        let elsewhere = RequestInfo {
            namespace: "other".into(),
            ..info("POST", "/apis/batch/v1/namespaces/other/jobs")
        };
        assert!(!allowed(&store, &dev, &elsewhere));
        let e = forbidden(&dev, &elsewhere);
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "jobs.batch is forbidden: User \"dev\" cannot create resource \"jobs\" in API group \"batch\" in the namespace \"other\""
        );
    }
}
