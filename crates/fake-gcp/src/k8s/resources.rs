//! The built-in resources the API server serves (plural, kind, API
//! version, scope): its REST mapper, read by the routes and by RBAC.

/// Known resources: plural (with group) → (kind, apiVersion, namespaced).
pub(crate) const RESOURCES: &[(&str, &str, &str, bool)] = &[
    ("pods", "Pod", "v1", true),
    ("secrets", "Secret", "v1", true),
    ("events", "Event", "v1", true),
    ("configmaps", "ConfigMap", "v1", true),
    ("serviceaccounts", "ServiceAccount", "v1", true),
    ("limitranges", "LimitRange", "v1", true),
    ("resourcequotas", "ResourceQuota", "v1", true),
    ("services", "Service", "v1", true),
    ("namespaces", "Namespace", "v1", false),
    ("nodes", "Node", "v1", false),
    ("jobs.batch", "Job", "batch/v1", true),
    ("deployments.apps", "Deployment", "apps/v1", true),
    ("daemonsets.apps", "DaemonSet", "apps/v1", true),
    (
        "roles.rbac.authorization.k8s.io",
        "Role",
        "rbac.authorization.k8s.io/v1",
        true,
    ),
    (
        "rolebindings.rbac.authorization.k8s.io",
        "RoleBinding",
        "rbac.authorization.k8s.io/v1",
        true,
    ),
    (
        "clusterroles.rbac.authorization.k8s.io",
        "ClusterRole",
        "rbac.authorization.k8s.io/v1",
        false,
    ),
    (
        "clusterrolebindings.rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        "rbac.authorization.k8s.io/v1",
        false,
    ),
    (
        "customresourcedefinitions.apiextensions.k8s.io",
        "CustomResourceDefinition",
        "apiextensions.k8s.io/v1",
        false,
    ),
    (
        "mutatingwebhookconfigurations.admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
        "admissionregistration.k8s.io/v1",
        false,
    ),
    (
        "validatingwebhookconfigurations.admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        "admissionregistration.k8s.io/v1",
        false,
    ),
    ("statefulsets.apps", "StatefulSet", "apps/v1", true),
    (
        "selfsubjectaccessreviews.authorization.k8s.io",
        "SelfSubjectAccessReview",
        "authorization.k8s.io/v1",
        false,
    ),
];

/// The plural of `kind` in API group `group` (`Job` in `batch` → `jobs`),
/// as the API server's REST mapper finds it.
pub(crate) fn plural_of_kind(group: &str, kind: &str) -> Option<String> {
    RESOURCES
        .iter()
        .find(|(_, k, av, _)| *k == kind && av.split_once('/').map_or("", |(g, _)| g) == group)
        .map(|(r, _, _, _)| r.split('.').next().unwrap_or(r).to_owned())
}
