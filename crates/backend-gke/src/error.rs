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
pub(crate) struct Context<'a> {
    pub(crate) verb: &'a str,
    pub(crate) resource: &'a str,
    pub(crate) name: Option<&'a str>,
    pub(crate) namespace: &'a str,
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
pub(crate) fn map(err: kube::Error, cx: Context<'_>) -> BackendError {
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
                403 => BackendError::permission_denied(format!(
                    "cannot {verb} {what} in namespace '{namespace}': {text} (check with: kubectl auth can-i {verb} {resource} -n {namespace})"
                )),
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

/// True when a 404's details say the missing object is a namespace.
fn names_a_namespace(status: &Status) -> bool {
    status
        .details
        .as_ref()
        .is_some_and(|d| d.kind == "namespaces")
}

/// The HTTP code of an API error, if it is one.
pub(crate) fn code(err: &kube::Error) -> Option<u16> {
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
/// use kinetic_backend_gke::api_status;
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
