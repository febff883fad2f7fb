//! What the fake Google APIs share: Google's error bodies and IAM
//! policies (read, modify, write with an etag).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

/// The canonical status name of an HTTP status.
pub(crate) fn google_status(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ALREADY_EXISTS",
        412 => "FAILED_PRECONDITION",
        429 => "RESOURCE_EXHAUSTED",
        500 => "INTERNAL",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "UNKNOWN",
    }
}

/// Google's error body, with an `ErrorInfo` reason when given.
pub(crate) fn google_error(status: u16, message: &str, reason: Option<&str>) -> Value {
    error_with(status, google_status(status), message, reason, &[])
}

/// Google's error body with an explicit canonical status and `ErrorInfo`
/// metadata (`permission`, `service`).
pub(crate) fn error_with(
    status: u16,
    canonical: &str,
    message: &str,
    reason: Option<&str>,
    metadata: &[(&str, &str)],
) -> Value {
    let details = match reason {
        Some(r) => {
            let meta: serde_json::Map<String, Value> = metadata
                .iter()
                .map(|(k, v)| ((*k).to_owned(), json!(v)))
                .collect();
            json!([{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": r,
                "domain": "googleapis.com",
                "metadata": meta,
            }])
        }
        None => json!([]),
    };
    json!({"error": {"code": status, "message": message, "status": canonical, "details": details}})
}

/// The Storage JSON API's error body (the older shape: `errors[]`).
pub(crate) fn storage_error(status: u16, reason: &str, message: &str) -> Value {
    json!({"error": {"code": status, "message": message,
                     "errors": [{"message": message, "domain": "global", "reason": reason}]}})
}

/// An IAM policy: unconditional bindings (role → members), bindings with
/// conditions kept as they came, and an etag that changes on every write.
#[derive(Debug, Clone, Default)]
pub(crate) struct Policy {
    bindings: BTreeMap<String, BTreeSet<String>>,
    conditional: Vec<Value>,
    version: u64,
}

/// Why a `setIamPolicy` was refused.
#[derive(Debug)]
pub(crate) enum PolicyError {
    /// The body is not a policy.
    Invalid(String),
    /// The etag is not the current one: someone wrote in between.
    Stale,
}

impl Policy {
    pub(crate) fn etag(&self) -> String {
        format!("BwY{:08}=", self.version)
    }

    /// Whether `member` holds `role`.
    pub(crate) fn has(&self, role: &str, member: &str) -> bool {
        self.bindings.get(role).is_some_and(|m| m.contains(member))
    }

    /// Remove a binding directly (a test taking something away).
    pub(crate) fn remove(&mut self, role: &str, member: &str) {
        if let Some(m) = self.bindings.get_mut(role) {
            m.remove(member);
        }
        self.bindings.retain(|_, m| !m.is_empty());
        self.version += 1;
    }

    /// The policy as `getIamPolicy` returns it.
    pub(crate) fn to_json(&self) -> Value {
        let mut bindings: Vec<Value> = self
            .bindings
            .iter()
            .map(|(role, members)| json!({"role": role, "members": members}))
            .collect();
        bindings.extend(self.conditional.iter().cloned());
        let mut v = json!({"version": if self.conditional.is_empty() { 1 } else { 3 }, "etag": self.etag()});
        if !bindings.is_empty() {
            v["bindings"] = json!(bindings);
        }
        v
    }

    /// Parse the bindings of a policy body (members of each role, in order).
    pub(crate) fn parse_bindings(
        policy: &Value,
    ) -> Result<Vec<(String, Vec<String>)>, PolicyError> {
        let mut out = Vec::new();
        for b in policy["bindings"].as_array().into_iter().flatten() {
            let role = b["role"]
                .as_str()
                .filter(|r| r.starts_with("roles/"))
                .ok_or_else(|| PolicyError::Invalid(format!("invalid role in binding {b}")))?;
            let members = b["members"]
                .as_array()
                .map(|m| {
                    m.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            out.push((role.to_owned(), members));
        }
        Ok(out)
    }

    /// `setIamPolicy`: replace the bindings, if the etag (when given) is
    /// the current one.
    pub(crate) fn set(&mut self, policy: &Value) -> Result<Value, PolicyError> {
        if let Some(etag) = policy["etag"].as_str()
            && etag != self.etag()
        {
            return Err(PolicyError::Stale);
        }
        let mut bindings: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut conditional = Vec::new();
        for b in policy["bindings"].as_array().into_iter().flatten() {
            if b.get("condition").is_some() {
                conditional.push(b.clone());
                continue;
            }
            Self::parse_bindings(&json!({"bindings": [b]}))?;
            let role = b["role"].as_str().unwrap_or_default().to_owned();
            for m in b["members"].as_array().into_iter().flatten() {
                if let Some(m) = m.as_str() {
                    bindings
                        .entry(role.clone())
                        .or_default()
                        .insert(m.to_owned());
                }
            }
        }
        bindings.retain(|_, m| !m.is_empty());
        self.bindings = bindings;
        self.conditional = conditional;
        self.version += 1;
        Ok(self.to_json())
    }
}
