//! Reading an object's metadata (name, namespace, uid), shared by the API
//! server, the controller and the kubelet.

use serde_json::Value;

/// The string at a JSON pointer, if there is one.
pub(crate) fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// `metadata.name` (empty when absent).
pub(crate) fn name_of(v: &Value) -> &str {
    str_at(v, "/metadata/name").unwrap_or_default()
}

/// `metadata.namespace` (empty when absent).
pub(crate) fn ns_of(v: &Value) -> &str {
    str_at(v, "/metadata/namespace").unwrap_or_default()
}

/// `metadata.uid` (empty when absent).
pub(crate) fn uid_of(v: &Value) -> &str {
    str_at(v, "/metadata/uid").unwrap_or_default()
}
