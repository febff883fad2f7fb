//! Google's JSON error body, parsed once for every REST adapter.
//!
//! Two shapes exist: the current one (`status` and typed `details`, with
//! `google.rpc.ErrorInfo` naming a `reason` and metadata such as the
//! missing `permission` or the disabled `service`), and the older one the
//! Storage JSON API still sends (`errors[]` with a `reason` each, no
//! `status`). [`GoogleError::parse`] reads both; a body that is not JSON
//! keeps its first 300 characters as the message.

use std::collections::BTreeMap;

use serde_json::Value;

/// A parsed error body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GoogleError {
    /// The HTTP code the body states (0 when absent).
    pub code: u16,
    /// The human message.
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
    /// Parse an error body of either shape.
    pub fn parse(body: &[u8]) -> Self {
        let Ok(value) = serde_json::from_slice::<Value>(body) else {
            let text = String::from_utf8_lossy(body);
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

    /// True when the API is not enabled in the project (`SERVICE_DISABLED`).
    pub fn service_disabled(&self) -> bool {
        self.has_reason("SERVICE_DISABLED")
            || self.message.contains("has not been used in project")
            || self.message.contains("API is disabled")
    }

    /// True when `reason` is among the reasons.
    pub fn has_reason(&self, reason: &str) -> bool {
        self.reasons.iter().any(|r| r == reason)
    }

    /// One `ErrorInfo` metadata value (`permission`, `service`).
    pub fn metadata(&self, key: &str) -> Option<&str> {
        self.info.get(key).map(String::as_str)
    }

    /// `HTTP {code} {STATUS}: {message}`, for error messages.
    pub fn said(&self, http_status: u16) -> String {
        let mut s = format!("HTTP {http_status}");
        if !self.status.is_empty() {
            s.push(' ');
            s.push_str(&self.status);
        }
        if !self.message.is_empty() {
            s.push_str(": ");
            s.push_str(&self.message);
        }
        s
    }
}

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
            e.said(403),
            "HTTP 403 PERMISSION_DENIED: Permission 'iam.serviceAccounts.create' denied"
        );

        let e = GoogleError::parse(
            br#"{"error":{"code":409,"message":"The bucket you tried to delete is not empty.",
                "errors":[{"domain":"global","reason":"conflict","message":"The bucket you tried to delete is not empty."}]}}"#,
        );
        assert_eq!(e.code, 409);
        assert!(e.has_reason("conflict"));
        assert_eq!(
            e.said(409),
            "HTTP 409: The bucket you tried to delete is not empty."
        );

        let e = GoogleError::parse(b"<html>bad gateway</html>");
        assert_eq!(e.message, "<html>bad gateway</html>");
        assert_eq!(e.code, 0);
    }
}
