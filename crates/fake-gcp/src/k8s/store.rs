//! The fake API server's object store: every resource as JSON, one global
//! `resourceVersion`, a bounded history of changes for watches, and the
//! API server's own rules (409 on duplicates and stale updates, merge
//! patches, `stringData` folded into `data`).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::SystemTime;

use serde_json::{Map, Value, json};
use tokio::sync::{Notify, broadcast};

use super::b64;
use super::selector::{FieldSelector, LabelSelector};

/// How many changes a watch can replay from.
const HISTORY: usize = 50_000;

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

impl ChangeKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change, as a watch delivers it.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    pub(crate) rv: u64,
    pub(crate) resource: String,
    pub(crate) namespace: String,
    pub(crate) kind: ChangeKind,
    pub(crate) object: Value,
}

/// An API error, rendered as a `Status` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// The `reason` field (`NotFound`, `AlreadyExists`, `Conflict`, …).
    pub reason: String,
    /// The message.
    pub message: String,
    /// The `details` field (`name`, `group`, `kind`…), when the API server
    /// gives one (boxed: errors travel in `Result`s and stay small).
    pub details: Option<Box<Value>>,
}

impl ApiError {
    /// An error with this code, reason and message.
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.to_owned(),
            message: message.into(),
            details: None,
        }
    }

    /// The same error with these `details`.
    #[must_use]
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    pub(crate) fn not_found(resource: &str, name: &str) -> Self {
        let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
        Self::new(404, "NotFound", format!("{resource} \"{name}\" not found"))
            .with_details(json!({"name": name, "group": group, "kind": plural}))
    }

    /// The API server's 422 for an object that fails field validation:
    /// `{Kind}.{group} "{name}" is invalid: {field}: {message}` (a list in
    /// brackets for several), with each cause as `{reason, message, field}`
    /// in `details`. `causes` are `(reason, field, message)`.
    pub(crate) fn invalid(
        kind: &str,
        group: &str,
        name: &str,
        causes: &[(&str, String, String)],
    ) -> Self {
        let listed: Vec<String> = causes
            .iter()
            .map(|(_, field, message)| format!("{field}: {message}"))
            .collect();
        let message = if listed.len() == 1 {
            listed[0].clone()
        } else {
            format!("[{}]", listed.join(", "))
        };
        Self::new(
            422,
            "Invalid",
            format!("{kind}.{group} \"{name}\" is invalid: {message}"),
        )
        .with_details(json!({
            "name": name,
            "group": group,
            "kind": kind,
            "causes": causes
                .iter()
                .map(|(reason, field, message)| json!({"reason": reason, "message": message, "field": field}))
                .collect::<Vec<_>>(),
        }))
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// The `Status` document.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = (**details).clone();
        }
        status
    }
}

type Key = (String, String, String);

#[derive(Debug, Default)]
struct Inner {
    rv: u64,
    objects: BTreeMap<Key, Value>,
    history: VecDeque<Change>,
    /// Changes with a resourceVersion at or below this were dropped.
    floor: u64,
}

/// Which write admission sees: a create or an update through the API (a
/// pod a controller makes is a create too). Merge patches go through
/// [`Admission::patched`] instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Write {
    /// `POST`, or a controller making an object.
    Create,
    /// `PUT`.
    Update,
}

/// When an admission hook runs: every mutating hook first, in the order
/// they were given, then every validating one (the API server's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Defaults and changes (LimitRanger defaults, webhooks).
    Mutating,
    /// Checks only, on the object every mutating hook left.
    Validating,
}

/// An admission hook on an object alone (a merge patch's result).
pub(crate) type AdmitPatched = fn(&mut Value) -> Result<(), ApiError>;

/// An admission hook the store runs on writes to one resource: it changes
/// the object in place or refuses it with the error the client sees. The
/// store is built with its hooks ([`Store::with_admission`]) and knows
/// nothing of the controllers that provide them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Admission {
    /// The resource it admits (`pods`, `statefulsets.apps`…).
    pub(crate) resource: &'static str,
    /// Its place in the order.
    pub(crate) phase: Phase,
    /// The writes it sees.
    pub(crate) writes: &'static [Write],
    /// The hook: the store, the namespace, the object.
    pub(crate) admit: fn(&Store, &str, &mut Value) -> Result<(), ApiError>,
    /// The hook for an object as a merge patch left it, if it sees patches;
    /// it runs while the store is locked, so it gets no store.
    pub(crate) patched: Option<AdmitPatched>,
}

/// The objects of the fake cluster.
#[derive(Debug)]
pub(crate) struct Store {
    inner: Mutex<Inner>,
    admission: Vec<Admission>,
    tx: broadcast::Sender<Change>,
    /// Woken on every change (the controller waits on it).
    pub(crate) changed: Notify,
}

/// Current time as the API server writes it.
pub(crate) fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// Parse a timestamp the store wrote.
pub(crate) fn parse_time(text: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339(text).ok()
}

fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// RFC 7386 JSON merge patch.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Value::Object(t) = target {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// Fold a Secret's `stringData` into base64 `data`, as the API server does.
fn normalise(resource: &str, object: &mut Value) {
    if resource != "secrets" {
        return;
    }
    let Some(obj) = object.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(string_data)) = obj.remove("stringData") {
        let data = obj
            .entry("data")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(data) = data {
            for (k, v) in string_data {
                let text = v.as_str().unwrap_or_default().to_owned();
                data.insert(k, Value::String(b64::encode(text.as_bytes())));
            }
        }
    }
}

impl Store {
    /// A store without admission hooks.
    #[cfg(test)]
    pub(crate) fn new() -> Self {
        Self::with_admission(Vec::new())
    }

    /// A store that runs `admission` on the writes they see.
    pub(crate) fn with_admission(admission: Vec<Admission>) -> Self {
        let (tx, _) = broadcast::channel(HISTORY);
        Self {
            inner: Mutex::new(Inner::default()),
            admission,
            tx,
            changed: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn record(&self, inner: &mut Inner, change: Change) {
        inner.history.push_back(change.clone());
        while inner.history.len() > HISTORY {
            if let Some(old) = inner.history.pop_front() {
                inner.floor = old.rv;
            }
        }
        let _ = self.tx.send(change);
        self.changed.notify_waiters();
    }

    /// Run the admission hooks of `resource` that see `write` on `object`
    /// (in namespace `namespace`): mutating ones, then validating ones; the
    /// first refusal is the answer.
    pub(crate) fn admit(
        &self,
        write: Write,
        resource: &str,
        namespace: &str,
        object: &mut Value,
    ) -> Result<(), ApiError> {
        for phase in [Phase::Mutating, Phase::Validating] {
            for hook in self
                .admission
                .iter()
                .filter(|h| h.phase == phase && h.resource == resource && h.writes.contains(&write))
            {
                (hook.admit)(self, namespace, object)?;
            }
        }
        Ok(())
    }

    /// The current resourceVersion.
    pub(crate) fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// Create an object; 409 when the name is taken.
    pub(crate) fn create(
        &self,
        resource: &str,
        namespace: &str,
        mut object: Value,
    ) -> Result<Value, ApiError> {
        if !object.is_object() {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        }
        normalise(resource, &mut object);
        let mut inner = self.lock();
        let meta = object
            .as_object_mut()
            .map(|o| o.entry("metadata").or_insert_with(|| json!({})))
            .and_then(Value::as_object_mut)
            .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
        let name = match meta.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n.to_owned(),
            _ => match meta.get("generateName").and_then(Value::as_str) {
                Some(prefix) => format!("{prefix}{}", &new_uid()[..5]),
                None => {
                    return Err(ApiError::new(
                        422,
                        "Invalid",
                        format!(
                            "{resource}: metadata.name: Required value: name or generateName is required"
                        ),
                    ));
                }
            },
        };
        let key = (resource.to_owned(), namespace.to_owned(), name.clone());
        if inner.objects.contains_key(&key) {
            return Err(ApiError::new(
                409,
                "AlreadyExists",
                format!("{resource} \"{name}\" already exists"),
            ));
        }
        inner.rv += 1;
        let rv = inner.rv;
        meta.insert("name".into(), Value::String(name));
        if namespace.is_empty() {
            // Cluster-scoped objects have no namespace.
            meta.remove("namespace");
        } else {
            meta.insert("namespace".into(), Value::String(namespace.to_owned()));
        }
        meta.insert("uid".into(), Value::String(new_uid()));
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        meta.insert("creationTimestamp".into(), Value::String(now_rfc3339()));
        meta.insert("generation".into(), json!(1));
        meta.remove("deletionTimestamp");
        inner.objects.insert(key, object.clone());
        self.record(
            &mut inner,
            Change {
                rv,
                resource: resource.to_owned(),
                namespace: namespace.to_owned(),
                kind: ChangeKind::Added,
                object: object.clone(),
            },
        );
        Ok(object)
    }

    /// One object.
    pub(crate) fn get(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        self.lock()
            .objects
            .get(&(resource.to_owned(), namespace.to_owned(), name.to_owned()))
            .cloned()
            .ok_or_else(|| ApiError::not_found(resource, name))
    }

    /// Objects of a resource (in one namespace, or all), filtered; with the
    /// resourceVersion of the snapshot.
    pub(crate) fn list(
        &self,
        resource: &str,
        namespace: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
    ) -> (Vec<Value>, u64) {
        let inner = self.lock();
        let items = inner
            .objects
            .iter()
            .filter(|((r, ns, _), _)| r == resource && namespace.is_none_or(|n| n == ns))
            .map(|(_, v)| v)
            .filter(|v| labels.matches(v) && fields.matches(v))
            .cloned()
            .collect();
        (items, inner.rv)
    }

    /// Every object of a resource, across namespaces.
    pub(crate) fn all(&self, resource: &str) -> Vec<Value> {
        self.lock()
            .objects
            .iter()
            .filter(|((r, _, _), _)| r == resource)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Copies of the objects of `resource` that `keep` picks, looked at in
    /// place: a controller pass that needs only some of the pods (those
    /// not yet ended, say) does not copy the thousands a finished batch
    /// leaves.
    pub(crate) fn all_where(&self, resource: &str, keep: impl Fn(&Value) -> bool) -> Vec<Value> {
        self.lock()
            .objects
            .iter()
            .filter(|((r, _, _), v)| r == resource && keep(v))
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// The uids of every object of `resource`.
    pub(crate) fn uids(&self, resource: &str) -> std::collections::BTreeSet<String> {
        self.lock()
            .objects
            .iter()
            .filter(|((r, _, _), _)| r == resource)
            .filter_map(|(_, v)| v.pointer("/metadata/uid").and_then(Value::as_str))
            .map(str::to_owned)
            .collect()
    }

    /// Replace an object (PUT); 409 when the body's resourceVersion is stale.
    pub(crate) fn update(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        mut object: Value,
    ) -> Result<Value, ApiError> {
        normalise(resource, &mut object);
        self.write(resource, namespace, name, |current| {
            let given = object
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_owned);
            check_rv(resource, name, current, given.as_deref())?;
            let keep = current.get("metadata").cloned().unwrap_or(json!({}));
            let mut next = object.clone();
            for field in [
                "uid",
                "creationTimestamp",
                "namespace",
                "name",
                "deletionTimestamp",
                "generation",
            ] {
                if let Some(v) = keep.get(field) {
                    next["metadata"][field] = v.clone();
                }
            }
            *current = next;
            Ok(())
        })
    }

    /// Apply a JSON merge patch; 409 when it names a stale resourceVersion.
    pub(crate) fn patch(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Value, ApiError> {
        self.write(resource, namespace, name, |current| {
            let given = patch
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str);
            check_rv(resource, name, current, given)?;
            let keep = current.get("metadata").cloned().unwrap_or(json!({}));
            merge_patch(current, patch);
            for field in ["uid", "creationTimestamp", "namespace", "name"] {
                if let Some(v) = keep.get(field) {
                    current["metadata"][field] = v.clone();
                }
            }
            normalise(resource, current);
            for hook in self.admission.iter().filter(|h| h.resource == resource) {
                if let Some(patched) = hook.patched {
                    patched(current)?;
                }
            }
            Ok(())
        })
    }

    /// Change an object in place (controller and kubelet); no event when
    /// nothing changed. `None` when the object is gone.
    pub(crate) fn modify(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        f: impl FnOnce(&mut Value),
    ) -> Option<Value> {
        self.write(resource, namespace, name, |v| {
            f(v);
            Ok(())
        })
        .ok()
    }

    fn write(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        f: impl FnOnce(&mut Value) -> Result<(), ApiError>,
    ) -> Result<Value, ApiError> {
        let mut inner = self.lock();
        let key = (resource.to_owned(), namespace.to_owned(), name.to_owned());
        let current = inner
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(resource, name))?;
        let mut next = current.clone();
        f(&mut next)?;
        if let Some(rv) = current.pointer("/metadata/resourceVersion") {
            next["metadata"]["resourceVersion"] = rv.clone();
        }
        if next == current {
            return Ok(current);
        }
        inner.rv += 1;
        let rv = inner.rv;
        next["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        inner.objects.insert(key, next.clone());
        self.record(
            &mut inner,
            Change {
                rv,
                resource: resource.to_owned(),
                namespace: namespace.to_owned(),
                kind: ChangeKind::Modified,
                object: next.clone(),
            },
        );
        Ok(next)
    }

    /// Remove every object (each removal emits `DELETED`).
    pub(crate) fn clear(&self) {
        let keys: Vec<Key> = self.lock().objects.keys().cloned().collect();
        for (resource, namespace, name) in keys {
            self.remove(&resource, &namespace, &name);
        }
    }

    /// Remove an object for good (emits `DELETED`).
    pub(crate) fn remove(&self, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        let mut inner = self.lock();
        let key = (resource.to_owned(), namespace.to_owned(), name.to_owned());
        let mut object = inner.objects.remove(&key)?;
        inner.rv += 1;
        let rv = inner.rv;
        object["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        self.record(
            &mut inner,
            Change {
                rv,
                resource: resource.to_owned(),
                namespace: namespace.to_owned(),
                kind: ChangeKind::Deleted,
                object: object.clone(),
            },
        );
        Some(object)
    }

    /// The changes after `rv` and a receiver for the ones to come; 410 when
    /// `rv` is older than the kept history.
    pub(crate) fn watch_from(
        &self,
        rv: u64,
    ) -> Result<(Vec<Change>, broadcast::Receiver<Change>), ApiError> {
        let inner = self.lock();
        if rv < inner.floor {
            return Err(ApiError::new(
                410,
                "Expired",
                format!("too old resource version: {rv} ({})", inner.floor),
            ));
        }
        let past = inner
            .history
            .iter()
            .filter(|c| c.rv > rv)
            .cloned()
            .collect();
        Ok((past, self.tx.subscribe()))
    }
}

fn check_rv(
    resource: &str,
    name: &str,
    current: &Value,
    given: Option<&str>,
) -> Result<(), ApiError> {
    let Some(given) = given.filter(|g| !g.is_empty()) else {
        return Ok(());
    };
    let have = current
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if given != have {
        return Err(ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {resource} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(object: &mut Value, step: &str) {
        let steps = object["steps"].as_array().cloned().unwrap_or_default();
        let mut steps = steps;
        steps.push(json!(step));
        object["steps"] = Value::Array(steps);
    }

    fn check(_: &Store, _: &str, pod: &mut Value) -> Result<(), ApiError> {
        mark(pod, "check");
        match pod.pointer("/metadata/name").and_then(Value::as_str) {
            Some("refused") => Err(ApiError::bad_request("refused by the check")),
            _ => Ok(()),
        }
    }

    const CHECK: Admission = Admission {
        resource: "pods",
        phase: Phase::Validating,
        writes: &[Write::Create],
        admit: check,
        patched: None,
    };
    const FIRST: Admission = Admission {
        resource: "pods",
        phase: Phase::Mutating,
        writes: &[Write::Create],
        admit: |_, _, pod| {
            mark(pod, "first");
            Ok(())
        },
        patched: None,
    };
    const SECOND: Admission = Admission {
        resource: "pods",
        phase: Phase::Mutating,
        writes: &[Write::Create, Write::Update],
        admit: |_, _, pod| {
            mark(pod, "second");
            Ok(())
        },
        patched: Some(|pod| {
            mark(pod, "patched");
            Ok(())
        }),
    };

    #[test]
    fn admission_runs_the_hooks_of_the_resource_and_write_in_the_api_servers_order() {
        // Registered out of order: mutating hooks still run first.
        let s = Store::with_admission(vec![CHECK, FIRST, SECOND]);
        let mut pod = json!({"metadata": {"name": "p"}});
        s.admit(Write::Create, "pods", "ns", &mut pod).unwrap();
        assert_eq!(pod["steps"], json!(["first", "second", "check"]));
        let mut pod = json!({"metadata": {"name": "p"}});
        s.admit(Write::Update, "pods", "ns", &mut pod).unwrap();
        assert_eq!(pod["steps"], json!(["second"]));
        let mut job = json!({"metadata": {"name": "p"}});
        s.admit(Write::Create, "jobs.batch", "ns", &mut job)
            .unwrap();
        assert_eq!(job.get("steps"), None);
        let mut refused = json!({"metadata": {"name": "refused"}});
        let e = s
            .admit(Write::Create, "pods", "ns", &mut refused)
            .unwrap_err();
        assert_eq!(e.message, "refused by the check");

        s.create("pods", "ns", json!({"metadata": {"name": "p"}}))
            .unwrap();
        let patched = s
            .patch(
                "pods",
                "ns",
                "p",
                &json!({"metadata": {"labels": {"a": "1"}}}),
            )
            .unwrap();
        assert_eq!(patched["steps"], json!(["patched"]));
    }

    #[test]
    fn create_get_conflict_and_merge_patch() {
        let s = Store::new();
        let obj = s
            .create(
                "jobs.batch",
                "ns",
                json!({"metadata": {"name": "a", "labels": {"x": "1"}}}),
            )
            .unwrap();
        assert_eq!(obj["metadata"]["resourceVersion"], "1");
        let dup = s
            .create("jobs.batch", "ns", json!({"metadata": {"name": "a"}}))
            .unwrap_err();
        assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));
        let patched = s
            .patch(
                "jobs.batch",
                "ns",
                "a",
                &json!({"metadata": {"labels": {"x": null, "y": "2"}}}),
            )
            .unwrap();
        assert_eq!(patched["metadata"]["labels"], json!({"y": "2"}));
        let stale = s
            .patch(
                "jobs.batch",
                "ns",
                "a",
                &json!({"metadata": {"resourceVersion": "1", "labels": {"z": "3"}}}),
            )
            .unwrap_err();
        assert_eq!(stale.code, 409);
        assert_eq!(s.get("jobs.batch", "ns", "b").unwrap_err().code, 404);
        let (past, _rx) = s.watch_from(1).unwrap();
        assert_eq!(past.len(), 1);
        assert_eq!(past[0].kind, ChangeKind::Modified);
    }

    #[test]
    fn secrets_keep_base64_data() {
        let s = Store::new();
        let obj = s
            .create(
                "secrets",
                "ns",
                json!({"metadata": {"name": "s"}, "stringData": {"K": "value"}}),
            )
            .unwrap();
        assert_eq!(obj["data"]["K"], b64::encode(b"value"));
        assert!(obj.get("stringData").is_none());
    }
}
