//! Events, as the components' event recorders write them: a core/v1 Event
//! about an involved object, from a source component; an event identical
//! to one already recorded (same object, type, reason, message and source)
//! is aggregated into it (`count` up, `lastTimestamp` now), as client-go's
//! correlator does. Events are listed by `involvedObject.*` field
//! selectors like any other.

use serde_json::{Value, json};

use super::meta::{name_of, ns_of, str_at, uid_of};
use super::store::{Store, now_rfc3339};

/// One event to record.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Event<'a> {
    /// `Normal` or `Warning`.
    pub(crate) kind: &'a str,
    /// `FailedCreate`, `Scheduled`…
    pub(crate) reason: &'a str,
    /// The text.
    pub(crate) message: &'a str,
    /// The recording component (`job-controller`, `kubelet`…).
    pub(crate) component: &'a str,
}

/// Record `event` about `object` (a Pod, a Job…): a new Event, or the
/// identical one counted again. Returns the event's `count`.
pub(crate) fn record(store: &Store, object: &Value, event: Event<'_>) -> u64 {
    let ns = ns_of(object);
    let uid = uid_of(object);
    // Only the same event is copied, not the thousands a batch's pods
    // leave.
    let same = store
        .all_where("events", |e| {
            ns_of(e) == ns
                && str_at(e, "/involvedObject/uid") == Some(uid)
                && str_at(e, "/reason") == Some(event.reason)
                && str_at(e, "/message") == Some(event.message)
                && str_at(e, "/type") == Some(event.kind)
                && str_at(e, "/source/component") == Some(event.component)
        })
        .into_iter()
        .next();
    let now = now_rfc3339();
    if let Some(existing) = same {
        let count = existing.get("count").and_then(Value::as_u64).unwrap_or(1) + 1;
        store.modify("events", ns, name_of(&existing), |e| {
            e["count"] = json!(count);
            e["lastTimestamp"] = json!(now);
        });
        return count;
    }
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("v1");
    let _ = store.create(
        "events",
        ns,
        json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": format!("{}.", name_of(object))},
            "involvedObject": {"kind": kind, "name": name_of(object), "namespace": ns,
                               "uid": uid, "apiVersion": api_version},
            "reason": event.reason,
            "message": event.message,
            "type": event.kind,
            "source": {"component": event.component},
            "reportingComponent": event.component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }),
    );
    1
}

/// The newest event of `reason` about `object`, if any.
pub(crate) fn latest(store: &Store, object: &Value, reason: &str) -> Option<Value> {
    let uid = uid_of(object);
    store
        .all_where("events", |e| {
            ns_of(e) == ns_of(object)
                && str_at(e, "/involvedObject/uid") == Some(uid)
                && str_at(e, "/reason") == Some(reason)
        })
        .into_iter()
        .max_by_key(|e| {
            e.pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .and_then(|rv| rv.parse::<u64>().ok())
                .unwrap_or(0)
        })
}
