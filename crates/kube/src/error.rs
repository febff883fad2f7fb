//! kube errors → the port's kinds, by the API status code (never the
//! message text), keeping the `kube::Error` — and with it the API `Status`
//! (code, reason, message, details) — as the port error's source.

use std::error::Error as _;

use kinetic_core::ports::BackendError;
use kube::core::Status;

/// What was being done, for messages: `verb` on `resource` (a plural such
/// as `jobs`, `pods`, `secrets`, `pods/log`), on the object `name` when the
/// call names one, in `namespace`.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The API verb (`get`, `list`, `create`, `patch`, `delete`).
    pub verb: &'a str,
    /// The resource, plural (`jobs`, `pods/log`, `leaderworkersets`).
    pub resource: &'a str,
    /// The object's name, when the call names one.
    pub name: Option<&'a str>,
    /// The namespace.
    pub namespace: &'a str,
}

impl Context<'_> {
    fn what(&self) -> String {
        match self.name {
            Some(name) => format!("{} {name}", self.resource),
            None => self.resource.to_owned(),
        }
    }
}

/// Map a kube error. 404 and 409 are usually handled by the caller first.
pub fn map(err: kube::Error, cx: Context<'_>) -> BackendError {
    let Context {
        verb,
        resource,
        namespace,
        ..
    } = cx;
    let what = cx.what();
    let kind = match &err {
        kube::Error::Api(status) => {
            let code = status.code;
            let text = if status.message.is_empty() {
                status.reason.clone()
            } else {
                status.message.clone()
            };
            match code {
                401 => BackendError::permission_denied(format!(
                    "cannot {verb} {what} in namespace '{namespace}': the cluster refused the credentials: {text} (refresh them; for GKE run `gcloud container clusters get-credentials CLUSTER`)"
                )),
                403 => {
                    let needed = Permission::missing(&text).unwrap_or_else(|| Permission {
                        verb: verb.to_owned(),
                        resource: resource.to_owned(),
                        group: String::new(),
                    });
                    BackendError::permission_denied(format!(
                        "cannot {verb} {what} in namespace '{namespace}': {text} (missing permission: {needed} in namespace '{namespace}'; check with: {})",
                        needed.can_i(namespace)
                    ))
                }
                404 if verb == "create" || names_a_namespace(status) => {
                    BackendError::invalid_input(format!(
                        "cannot {verb} {what}: namespace '{namespace}' not found ({text}); create it with: kubectl create namespace {namespace}"
                    ))
                }
                400 | 404 | 422 => BackendError::invalid_input(format!(
                    "cannot {verb} {what} in namespace '{namespace}': {text}"
                )),
                408 | 429 | 500..=599 => BackendError::unavailable(format!(
                    "Kubernetes API error {code} while trying to {verb} {what}: {text}"
                )),
                _ => BackendError::other(format!(
                    "Kubernetes API error {code} ({}) while trying to {verb} {what}: {text}",
                    status.reason
                )),
            }
        }
        kube::Error::HyperError(e) => BackendError::unavailable(format!(
            "cannot reach the Kubernetes API to {verb} {what}: {e}"
        )),
        kube::Error::Service(e) => BackendError::unavailable(format!(
            "cannot reach the Kubernetes API to {verb} {what}: {e}"
        )),
        other => BackendError::other(format!(
            "Kubernetes client error while trying to {verb} {what}: {other}"
        )),
    };
    kind.with_source(err)
}

/// A permission as RBAC grants it: `verb` on `resource` (with its
/// subresource after a `/`, as `jobs/finalizers`) in API `group`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permission {
    /// The verb (`create`, `update`…).
    pub verb: String,
    /// The resource, with its subresource after a `/`.
    pub resource: String,
    /// The API group, empty for the core group.
    pub group: String,
}

impl Permission {
    /// The permission a 403's message says is missing: the authorizer's
    /// `… cannot VERB resource "R" in API group "G" …`, or the
    /// `OwnerReferencesPermissionEnforcement` plugin's refusal to set
    /// `blockOwnerDeletion`, which needs `update` on the owner's
    /// finalizers (the owners this backend sets are Jobs).
    pub fn missing(message: &str) -> Option<Self> {
        if message.contains("cannot set blockOwnerDeletion") {
            return Some(Self {
                verb: "update".into(),
                resource: "jobs/finalizers".into(),
                group: "batch".into(),
            });
        }
        let (_, rest) = message.split_once(" cannot ")?;
        let (verb, rest) = rest.split_once(" resource \"")?;
        let (resource, rest) = rest.split_once('"')?;
        let group = rest
            .strip_prefix(" in API group \"")
            .and_then(|g| g.split_once('"'))
            .map_or("", |(g, _)| g);
        Some(Self {
            verb: verb.to_owned(),
            resource: resource.to_owned(),
            group: group.to_owned(),
        })
    }

    /// The `kubectl auth can-i` command that checks it in `namespace`.
    pub fn can_i(&self, namespace: &str) -> String {
        let (resource, sub) = match self.resource.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (self.resource.as_str(), None),
        };
        let mut out = format!("kubectl auth can-i {} {resource}", self.verb);
        if !self.group.is_empty() {
            out.push('.');
            out.push_str(&self.group);
        }
        if let Some(sub) = sub {
            out.push_str(&format!(" --subresource={sub}"));
        }
        out.push_str(&format!(" -n {namespace}"));
        out
    }
}

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(
            f,
            "'{}' on '{}' (API group {group})",
            self.verb, self.resource
        )
    }
}

/// True when a 404's details say the missing object is a namespace.
fn names_a_namespace(status: &Status) -> bool {
    status
        .details
        .as_ref()
        .is_some_and(|d| d.kind == "namespaces")
}

/// The HTTP code of an API error, if it is one.
pub fn code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// The Kubernetes API `Status` behind a backend error, where the error
/// came from an API answer: its code, reason (`Forbidden`, `Conflict`…),
/// message and details, as the API server sent them. A program can name
/// the exact permission a 403 lacks from it.
///
/// ```
/// use kinetic_kube::api_status;
/// use kinetic_core::ports::BackendError;
/// assert!(api_status(&BackendError::unavailable("no answer")).is_none());
/// ```
pub fn api_status(err: &BackendError) -> Option<&Status> {
    let mut cause = err.source();
    while let Some(e) = cause {
        if let Some(kube::Error::Api(status)) = e.downcast_ref::<kube::Error>() {
            return Some(status);
        }
        if let Some(status) = e.downcast_ref::<Status>() {
            return Some(status);
        }
        cause = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("boom", reason)
                .with_code(code)
                .boxed(),
        )
    }

    fn cx(verb: &'static str) -> Context<'static> {
        Context {
            verb,
            resource: "jobs",
            name: Some("kinetic-job-1"),
            namespace: "ns",
        }
    }

    #[test]
    fn codes_map_to_what_the_caller_does_next() {
        assert!(matches!(
            map(api(403, "Forbidden"), cx("create")),
            BackendError::PermissionDenied { .. }
        ));
        let e = map(api(503, "ServiceUnavailable"), cx("create"));
        assert!(e.is_retryable() && !e.is_retried(), "{e:?}");
        assert!(map(api(429, "TooManyRequests"), cx("create")).is_retryable());
        let e = map(api(404, "NotFound"), cx("create"));
        assert!(e.to_string().contains("kubectl create namespace ns"), "{e}");
        let e = map(api(404, "NotFound"), cx("get"));
        assert!(!e.to_string().contains("kubectl create namespace"), "{e}");
        assert!(!map(api(422, "Invalid"), cx("create")).is_retryable());
        assert!(matches!(
            map(api(409, "Conflict"), cx("patch")),
            BackendError::Other { .. }
        ));
    }

    #[test]
    fn a_403_names_the_exact_permission_missing() {
        let rbac = kube::Error::Api(
            kube::core::Status::failure(
                r#"secrets is forbidden: User "dev" cannot create resource "secrets" in API group "" in the namespace "ns""#,
                "Forbidden",
            )
            .with_code(403)
            .boxed(),
        );
        let e = map(rbac, cx("create")).to_string();
        assert!(
            e.contains("missing permission: 'create' on 'secrets' (API group core)"),
            "{e}"
        );
        assert!(e.contains("kubectl auth can-i create secrets -n ns"), "{e}");
        let owner = kube::Error::Api(
            kube::core::Status::failure(
                r#"secrets "j-env" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: , <nil>"#,
                "Forbidden",
            )
            .with_code(403)
            .boxed(),
        );
        let e = map(owner, cx("create")).to_string();
        assert!(
            e.contains("kubectl auth can-i update jobs.batch --subresource=finalizers -n ns"),
            "{e}"
        );
    }

    #[test]
    fn the_api_status_is_kept() {
        let e = map(api(403, "Forbidden"), cx("create"));
        let status = api_status(&e).expect("the Status");
        assert_eq!(status.code, 403);
        assert_eq!(status.reason, "Forbidden");
        assert_eq!(status.message, "boom");
        assert!(
            e.to_string()
                .contains("kubectl auth can-i create jobs -n ns"),
            "{e}"
        );
    }
}
