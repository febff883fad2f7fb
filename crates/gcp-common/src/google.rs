//! Google's error bodies, parsed once for every adapter.
//!
//! Three shapes exist: the current JSON one (`status` and typed `details`,
//! with `google.rpc.ErrorInfo` naming a `reason` and metadata such as the
//! missing `permission` or the disabled `service`), the older JSON one the
//! Storage JSON API still sends (`errors[]` with a `reason` each, no
//! `status`), and the Cloud Storage XML API's
//! (`<Error><Code>NoSuchKey</Code><Message>…</Message></Error>`, its
//! `Code` read as a reason). [`GoogleError::parse`] reads all three; any
//! other body keeps its first 300 characters as the message.
//!
//! Callers decide from the fields (`status`, `reasons`, `info`), never
//! from the message, which Google words as it likes.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde_json::Value;

/// `ErrorInfo` reason of a call to an API the project has not enabled.
pub const SERVICE_DISABLED: &str = "SERVICE_DISABLED";

/// The older shape's reason for the same (`errors[].reason`).
const ACCESS_NOT_CONFIGURED: &str = "accessNotConfigured";

/// An error answer of a Google API. Adapters keep it as the source of
/// the errors they make from an answer, so that a program can read the
/// code, the canonical status (`PERMISSION_DENIED`…), the reasons
/// (`SERVICE_DISABLED`…) and their metadata.
///
/// It displays as `HTTP {code} {STATUS}: {message}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GoogleError {
    /// The HTTP status code: the answer's ([`GoogleError::from_answer`]),
    /// or the one the body states ([`GoogleError::parse`]; 0 when absent).
    pub code: u16,
    /// The human message (or the start of a body that is not Google's JSON).
    pub message: String,
    /// The canonical status (`PERMISSION_DENIED`, `ALREADY_EXISTS`,
    /// `FAILED_PRECONDITION`…); empty in the older shape.
    pub status: String,
    /// Every `reason` found: `ErrorInfo` details and the older `errors[]`.
    pub reasons: Vec<String>,
    /// The `ErrorInfo` metadata (`permission`, `service`, `resource`…).
    pub info: BTreeMap<String, String>,
}

impl GoogleError {
    /// Parse an error body of any shape, taking the code it states (the
    /// XML shape states none).
    pub fn parse(body: &[u8]) -> Self {
        let Ok(value) = serde_json::from_slice::<Value>(body) else {
            let text = String::from_utf8_lossy(body);
            if let Some(xml) = XmlError::parse(&text) {
                return Self {
                    message: xml.message,
                    reasons: vec![xml.code],
                    ..Self::default()
                };
            }
            return Self {
                message: text.chars().take(300).collect::<String>().trim().to_owned(),
                ..Self::default()
            };
        };
        let error = &value["error"];
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let mut reasons = Vec::new();
        let mut info = BTreeMap::new();
        for detail in error["details"].as_array().into_iter().flatten() {
            if let Some(r) = detail["reason"].as_str() {
                reasons.push(r.to_owned());
            }
            for (k, v) in detail["metadata"].as_object().into_iter().flatten() {
                if let Some(v) = v.as_str() {
                    info.insert(k.clone(), v.to_owned());
                }
            }
        }
        for e in error["errors"].as_array().into_iter().flatten() {
            if let Some(r) = e["reason"].as_str() {
                reasons.push(r.to_owned());
            }
        }
        Self {
            code: error["code"]
                .as_u64()
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or(0),
            message: match error {
                Value::String(s) => s.clone(),
                _ => text(&error["message"]),
            },
            status: text(&error["status"]),
            reasons,
            info,
        }
    }

    /// Parse the body of an answer with HTTP status `http_status`, which
    /// is the code whatever the body states.
    pub fn from_answer(http_status: u16, body: &[u8]) -> Self {
        Self {
            code: http_status,
            ..Self::parse(body)
        }
    }

    /// True when the API is not enabled in the project: the reason
    /// `SERVICE_DISABLED` (or `accessNotConfigured` in the older shape).
    pub fn service_disabled(&self) -> bool {
        self.has_reason(SERVICE_DISABLED) || self.has_reason(ACCESS_NOT_CONFIGURED)
    }

    /// True when `reason` is among the reasons.
    pub fn has_reason(&self, reason: &str) -> bool {
        self.reasons.iter().any(|r| r == reason)
    }

    /// One `ErrorInfo` metadata value (`permission`, `service`).
    pub fn metadata(&self, key: &str) -> Option<&str> {
        self.info.get(key).map(String::as_str)
    }
}

/// The Cloud Storage XML API's error body.
#[derive(Debug, Deserialize)]
#[serde(rename = "Error")]
struct XmlError {
    #[serde(rename = "Code")]
    code: String,
    #[serde(rename = "Message", default)]
    message: String,
}

impl XmlError {
    /// The body's `Code` and `Message`, when it is such a body.
    fn parse(text: &str) -> Option<Self> {
        if !text.trim_start().starts_with('<') {
            return None;
        }
        quick_xml::de::from_str::<Self>(text)
            .ok()
            .filter(|e| !e.code.trim().is_empty())
    }
}

impl fmt::Display for GoogleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let code = (self.code != 0).then(|| format!("HTTP {}", self.code));
        let status = (!self.status.is_empty()).then(|| self.status.clone());
        let head = [code, status].into_iter().flatten().collect::<Vec<_>>();
        match (head.is_empty(), self.message.is_empty()) {
            (false, false) => write!(f, "{}: {}", head.join(" "), self.message),
            (false, true) => f.write_str(&head.join(" ")),
            (true, false) => f.write_str(&self.message),
            (true, true) => f.write_str("an error answer without details"),
        }
    }
}

impl std::error::Error for GoogleError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_shapes_and_plain_text() {
        let e = GoogleError::parse(
            br#"{"error":{"code":403,"message":"Permission 'iam.serviceAccounts.create' denied","status":"PERMISSION_DENIED",
                "details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"IAM_PERMISSION_DENIED",
                            "metadata":{"permission":"iam.serviceAccounts.create"}}]}}"#,
        );
        assert_eq!(e.code, 403);
        assert_eq!(e.status, "PERMISSION_DENIED");
        assert!(e.has_reason("IAM_PERMISSION_DENIED"));
        assert_eq!(e.metadata("permission"), Some("iam.serviceAccounts.create"));
        assert!(!e.service_disabled());
        assert_eq!(
            e.to_string(),
            "HTTP 403 PERMISSION_DENIED: Permission 'iam.serviceAccounts.create' denied"
        );

        let e = GoogleError::parse(
            br#"{"error":{"code":409,"message":"The bucket you tried to delete is not empty.",
                "errors":[{"domain":"global","reason":"conflict","message":"The bucket you tried to delete is not empty."}]}}"#,
        );
        assert_eq!(e.code, 409);
        assert!(e.has_reason("conflict"));
        assert_eq!(
            e.to_string(),
            "HTTP 409: The bucket you tried to delete is not empty."
        );

        let e = GoogleError::from_answer(
            404,
            b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist: b/a&amp;b</Message><Details>No such object: b/a&amp;b</Details></Error>",
        );
        assert_eq!(e.reasons, ["NoSuchKey"]);
        assert!(e.has_reason("NoSuchKey"));
        assert_eq!(e.message, "The specified key does not exist: b/a&b");
        assert_eq!(
            e.to_string(),
            "HTTP 404: The specified key does not exist: b/a&b"
        );

        let e = GoogleError::parse(b"<html>bad gateway</html>");
        assert_eq!(e.message, "<html>bad gateway</html>");
        assert_eq!(e.code, 0);
        assert_eq!(e.to_string(), "<html>bad gateway</html>");
        let e = GoogleError::from_answer(502, b"<html>bad gateway</html>");
        assert_eq!(e.to_string(), "HTTP 502: <html>bad gateway</html>");
    }

    #[test]
    fn the_answers_status_is_the_code() {
        let e = GoogleError::from_answer(
            401,
            br#"{"error":{"message":"bad token","status":"UNAUTHENTICATED"}}"#,
        );
        assert_eq!((e.code, e.status.as_str()), (401, "UNAUTHENTICATED"));
        assert_eq!(e.to_string(), "HTTP 401 UNAUTHENTICATED: bad token");
        assert_eq!(
            GoogleError::from_answer(503, b"").to_string(),
            "HTTP 503",
            "an empty body"
        );
    }

    #[test]
    fn a_disabled_api_is_known_by_its_reason_never_its_wording() {
        // Both shapes' reasons.
        let current = GoogleError::parse(
            br#"{"error":{"code":403,"status":"PERMISSION_DENIED","message":"Cloud Build API has not been used in project 1 before or it is disabled.",
                "details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"SERVICE_DISABLED","metadata":{"service":"cloudbuild.googleapis.com"}}]}}"#,
        );
        assert!(current.service_disabled());
        assert_eq!(
            current.metadata("service"),
            Some("cloudbuild.googleapis.com")
        );
        let older = GoogleError::parse(
            br#"{"error":{"code":403,"message":"Access Not Configured.",
                "errors":[{"domain":"usageLimits","reason":"accessNotConfigured","message":"Access Not Configured."}]}}"#,
        );
        assert!(older.service_disabled());
        // The words alone say nothing.
        let worded = GoogleError::parse(
            br#"{"error":{"code":403,"status":"PERMISSION_DENIED","message":"Cloud Build API has not been used in project 1 before or it is disabled."}}"#,
        );
        assert!(!worded.service_disabled());
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Any body parses without panicking, and what it states comes back.
        #[test]
        fn any_body_parses(body in proptest::collection::vec(any::<u8>(), 0..400)) {
            let e = GoogleError::from_answer(500, &body);
            prop_assert_eq!(e.code, 500);
            prop_assert!(e.message.chars().count() <= 300 || serde_json::from_slice::<Value>(&body).is_ok());
        }

        #[test]
        fn stated_fields_are_read(
            code in 100u16..600,
            status in "[A-Z_]{0,20}",
            message in "[ -~]{0,80}",
            reasons in proptest::collection::vec("[A-Za-z_]{1,20}", 0..4),
        ) {
            let details: Vec<Value> = reasons
                .iter()
                .map(|r| serde_json::json!({"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": r}))
                .collect();
            let body = serde_json::json!({"error": {"code": code, "status": status, "message": message, "details": details}});
            let e = GoogleError::parse(&serde_json::to_vec(&body).unwrap());
            prop_assert_eq!(e.code, code);
            prop_assert_eq!(&e.status, &status);
            prop_assert_eq!(&e.message, &message);
            prop_assert_eq!(&e.reasons, &reasons);
            prop_assert_eq!(
                e.service_disabled(),
                reasons.iter().any(|r| r == SERVICE_DISABLED || r == ACCESS_NOT_CONFIGURED)
            );
        }
    }
}
