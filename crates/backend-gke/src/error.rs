//! kube errors → the port's error kinds.

use kinetic_core::ports::BackendError;

/// What was being done, for messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context<'a> {
    pub(crate) verb: &'a str,
    pub(crate) what: &'a str,
    pub(crate) namespace: &'a str,
}

/// Map a kube error. 404 and 409 are usually handled by the caller first;
/// here they become `NotFound`-ish `InvalidInput` and `Other`.
pub(crate) fn map(err: kube::Error, cx: Context<'_>) -> BackendError {
    let Context {
        verb,
        what,
        namespace,
    } = cx;
    match err {
        kube::Error::Api(status) => {
            let code = status.code;
            let text = if status.message.is_empty() {
                status.reason.clone()
            } else {
                status.message.clone()
            };
            match code {
                401 | 403 => BackendError::PermissionDenied {
                    message: format!(
                        "cannot {verb} {what} in namespace '{namespace}': {text} (check with: kubectl auth can-i {verb} {} -n {namespace})",
                        what.split_whitespace().next().unwrap_or(what)
                    ),
                },
                404 if what.starts_with("jobs") || what.starts_with("secrets") => {
                    BackendError::InvalidInput {
                        message: format!(
                            "cannot {verb} {what}: namespace '{namespace}' not found ({text}); create it with: kubectl create namespace {namespace}"
                        ),
                    }
                }
                400 | 404 | 422 => BackendError::InvalidInput {
                    message: format!("cannot {verb} {what} in namespace '{namespace}': {text}"),
                },
                408 | 429 | 500..=599 => BackendError::Unavailable {
                    message: format!(
                        "Kubernetes API error {code} while trying to {verb} {what}: {text}"
                    ),
                },
                _ => BackendError::Other {
                    message: format!(
                        "Kubernetes API error {code} ({}) while trying to {verb} {what}: {text}",
                        status.reason
                    ),
                },
            }
        }
        kube::Error::HyperError(e) => BackendError::Unavailable {
            message: format!("cannot reach the Kubernetes API to {verb} {what}: {e}"),
        },
        kube::Error::Service(e) => BackendError::Unavailable {
            message: format!("cannot reach the Kubernetes API to {verb} {what}: {e}"),
        },
        other => BackendError::Other {
            message: format!("Kubernetes client error while trying to {verb} {what}: {other}"),
        },
    }
}

/// The HTTP code of an API error, if it is one.
pub(crate) fn code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
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

    #[test]
    fn codes_map_to_what_the_caller_does_next() {
        let cx = Context {
            verb: "create",
            what: "jobs kinetic-job-1",
            namespace: "ns",
        };
        assert!(matches!(
            map(api(403, "Forbidden"), cx),
            BackendError::PermissionDenied { .. }
        ));
        let e = map(api(503, "ServiceUnavailable"), cx);
        assert!(e.is_retryable(), "{e:?}");
        assert!(map(api(429, "TooManyRequests"), cx).is_retryable());
        let e = map(api(404, "NotFound"), cx);
        assert!(e.to_string().contains("kubectl create namespace ns"), "{e}");
        assert!(!map(api(422, "Invalid"), cx).is_retryable());
    }
}
