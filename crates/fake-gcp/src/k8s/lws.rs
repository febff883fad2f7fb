//! LeaderWorkerSet (`leaderworkerset.x-k8s.io`), as its controller manager
//! (controllers and webhooks) behaves once its manifests are applied:
//!
//! - **LeaderWorkerSet webhook**: defaults `restartPolicy`
//!   (`RecreateGroupOnPodRestart`; the deprecated `Default` becomes
//!   `None`), the rollout strategy and the network config, and refuses a
//!   size or replicas below their bounds.
//! - **The CRD's schema** (checked by the API server after the webhooks,
//!   even while the controller is down): `restartPolicy` is one of its
//!   enum, `Default`, `RecreateGroupOnPodRestart`, `None` in v0.5.1
//!   (v0.9.0 adds `RecreateGroupAfterStart`); another value gets the 422
//!   `Invalid` Status with a `FieldValueNotSupported` cause.
//! - **Pod webhook**: a pod labelled `leaderworkerset.sigs.k8s.io/name`
//!   gets its group index and group key (leaders) or worker index (workers)
//!   from its name, and the `LWS_LEADER_ADDRESS`, `LWS_GROUP_SIZE` and
//!   `LWS_WORKER_INDEX` variables first in each container's environment.
//! - **LeaderWorkerSet controller**: a headless Service `{lws}` (the pods'
//!   subdomain, publishing pods that are not ready yet) and a leader
//!   StatefulSet `{lws}` (one pod per group, `{lws}-{group}`), both owned
//!   by the LeaderWorkerSet; its status
//!   (`replicas`, `readyReplicas`, `Available`/`Progressing`). A leader
//!   StatefulSet the API server refuses (a pod template with
//!   `restartPolicy: Never`, say) is told as a `FailedCreate` Warning on
//!   the LeaderWorkerSet and tried again on the next pass: no pods.
//! - **Pod controller**: for each leader pod a worker StatefulSet named as
//!   the pod, owned by it, with `size - 1` workers `{lws}-{group}-{index}`
//!   (index from 1); with `RecreateGroupOnPodRestart`, a pod of the group
//!   whose container restarted, or that is being deleted, has its leader
//!   deleted in the foreground, which takes the group's workers with it,
//!   and the leader StatefulSet makes the group again; told by a Normal
//!   event on the LeaderWorkerSet, `Worker pod X failed, deleted leader pod
//!   Y to recreate group G`, whose reason is the release's:
//!   `RecreateGroupOnPodRestart` in v0.5.1, `RecreateGroup` from v0.9.0.
//!
//! The release is the controller manager's image tag
//! (`registry.k8s.io/lws/lws:v0.5.1`, what `kinetic up` installs;
//! [`super::FakeCluster::set_leader_worker_set_release`] runs another).
//!
//! Everything is served only while the CustomResourceDefinition
//! `leaderworkersets.leaderworkerset.x-k8s.io` exists; deleting it deletes
//! every LeaderWorkerSet.
//!
//! The controllers and webhooks live in one process, the Deployment
//! `lws-system/lws-controller-manager`, as in the v0.5.1 release: nothing
//! is reconciled while that Deployment is missing or not `Available`, and
//! while the webhook configurations its manifests register
//! (`lws-mutating-webhook-configuration`, `failurePolicy: Fail`) point at
//! a Service without ready endpoints, the API server refuses every create
//! or update the webhooks match — LeaderWorkerSets, and pods labelled
//! `leaderworkerset.sigs.k8s.io/name` (the release's object selector) —
//! with the 500 `InternalError` a failed webhook call gives.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::deletion::delete;
use super::events;
use super::meta::{deleting, name_of, ns_of, owner_uids, phase, pod_ready, str_at, uid_of};
use super::statefulset;
use super::store::{Admission, ApiError, Phase, Store, Write};

/// The stored resource.
pub(crate) const RESOURCE: &str = "leaderworkersets.leaderworkerset.x-k8s.io";
/// Its CustomResourceDefinition.
pub(crate) const CRD: &str = "leaderworkersets.leaderworkerset.x-k8s.io";

pub(crate) const NAME_LABEL: &str = "leaderworkerset.sigs.k8s.io/name";
pub(crate) const GROUP_INDEX_LABEL: &str = "leaderworkerset.sigs.k8s.io/group-index";
pub(crate) const WORKER_INDEX_LABEL: &str = "leaderworkerset.sigs.k8s.io/worker-index";
pub(crate) const GROUP_KEY_LABEL: &str = "leaderworkerset.sigs.k8s.io/group-key";
pub(crate) const REVISION_LABEL: &str = "leaderworkerset.sigs.k8s.io/template-revision-hash";
pub(crate) const SIZE_ANNOTATION: &str = "leaderworkerset.sigs.k8s.io/size";
pub(crate) const REPLICAS_ANNOTATION: &str = "leaderworkerset.sigs.k8s.io/replicas";
pub(crate) const LEADER_NAME_ANNOTATION: &str = "leaderworkerset.sigs.k8s.io/leader-name";

/// The controller manager's namespace and Deployment.
pub(crate) const CONTROLLER_NAMESPACE: &str = "lws-system";
/// Its Deployment.
pub(crate) const CONTROLLER: &str = "lws-controller-manager";
/// The Service the webhooks are called through.
pub(crate) const WEBHOOK_SERVICE: &str = "lws-webhook-service";
/// The mutating webhook configuration its manifests register.
pub(crate) const MUTATING_WEBHOOKS: &str = "lws-mutating-webhook-configuration";
const MUTATING_RESOURCE: &str = "mutatingwebhookconfigurations.admissionregistration.k8s.io";

/// Whether the controller manager's Deployment is `Available`.
pub(crate) fn controller_available(store: &Store) -> bool {
    store
        .get(
            super::deployment::RESOURCE,
            CONTROLLER_NAMESPACE,
            CONTROLLER,
        )
        .is_ok_and(|d| !deleting(&d) && super::deployment::available(&d))
}

/// The API server calling the webhook `webhook` at `path`: registered and
/// its Service without ready endpoints, the call fails and so does the
/// request (`failurePolicy: Fail`), with the API server's message.
pub(crate) fn call_webhook(store: &Store, webhook: &str, path: &str) -> Result<(), ApiError> {
    let registered = store.get(MUTATING_RESOURCE, "", MUTATING_WEBHOOKS).is_ok();
    if !registered || controller_available(store) {
        return Ok(());
    }
    let cause = format!(
        "failed calling webhook \"{webhook}\": failed to call webhook: Post \"https://{WEBHOOK_SERVICE}.{CONTROLLER_NAMESPACE}.svc:443{path}?timeout=10s\": no endpoints available for service \"{WEBHOOK_SERVICE}\""
    );
    Err(ApiError::new(
        500,
        "InternalError",
        format!("Internal error occurred: {cause}"),
    )
    .with_details(json!({"causes": [{"message": cause}]})))
}

/// The LeaderWorkerSet mutating webhook's call.
pub(crate) fn call_set_webhook(store: &Store) -> Result<(), ApiError> {
    call_webhook(
        store,
        "mleaderworkerset.kb.io",
        "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset",
    )
}

/// Whether the LeaderWorkerSet CRD (and so its controller manager) is installed.
pub(crate) fn installed(store: &Store) -> bool {
    store
        .get("customresourcedefinitions.apiextensions.k8s.io", "", CRD)
        .is_ok_and(|c| !deleting(&c))
}

/// The CustomResourceDefinition of LeaderWorkerSet (`v1`, namespaced,
/// with the `status` subresource), as its release manifests define it.
pub(crate) fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD},
        "spec": {
            "group": "leaderworkerset.x-k8s.io",
            "names": {"kind": "LeaderWorkerSet", "listKind": "LeaderWorkerSetList",
                      "plural": "leaderworkersets", "shortNames": ["lws"], "singular": "leaderworkerset"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": schema(RESTART_POLICIES_V0_5)},
                          "subresources": {"status": {}}}],
        },
    })
}

/// The values the v0.5.1 CRD's schema allows in
/// `spec.leaderWorkerTemplate.restartPolicy`
/// (`+kubebuilder:validation:Enum={Default,RecreateGroupOnPodRestart,None}`).
pub(crate) const RESTART_POLICIES_V0_5: &[&str] = &["Default", "RecreateGroupOnPodRestart", "None"];
/// The same from v0.9.0, which adds `RecreateGroupAfterStart`.
pub(crate) const RESTART_POLICIES_V0_9: &[&str] = &[
    "Default",
    "RecreateGroupOnPodRestart",
    "RecreateGroupAfterStart",
    "None",
];

/// The CRD's `openAPIV3Schema`, as far as the fake checks it: the
/// `restartPolicy` enum (`policies`); everything else preserved.
pub(crate) fn schema(policies: &[&str]) -> Value {
    json!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "properties": {"spec": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"leaderWorkerTemplate": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"restartPolicy": {"type": "string", "enum": policies}},
            }},
        }},
    })
}

const RESTART_POLICY_SCHEMA: &str = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/leaderWorkerTemplate/properties/restartPolicy/enum";

/// The LeaderWorkerSet release the controller manager runs: the tag of its
/// Deployment's image (`registry.k8s.io/lws/lws:v0.5.1`), as
/// `(major, minor, patch)`; v0.5.1 (what `kinetic up` installs) when it
/// cannot be read.
pub(crate) fn release(store: &Store) -> (u32, u32, u32) {
    const DEFAULT: (u32, u32, u32) = (0, 5, 1);
    let Ok(manager) = store.get(
        super::deployment::RESOURCE,
        CONTROLLER_NAMESPACE,
        CONTROLLER,
    ) else {
        return DEFAULT;
    };
    let Some(tag) = str_at(&manager, "/spec/template/spec/containers/0/image")
        .and_then(|i| i.rsplit_once(':'))
        .map(|(_, tag)| tag.trim_start_matches('v').to_owned())
    else {
        return DEFAULT;
    };
    let mut parts = tag.split(['.', '-']).map(|p| p.parse::<u32>().ok());
    match (parts.next(), parts.next(), parts.next()) {
        (Some(Some(a)), Some(Some(b)), Some(Some(c))) => (a, b, c),
        _ => DEFAULT,
    }
}

/// The reason of the event the pod controller records when it recreates
/// a group: `RecreateGroupOnPodRestart` up to v0.8, `RecreateGroup` from
/// v0.9.0 on.
pub(crate) fn recreate_event_reason(release: (u32, u32, u32)) -> &'static str {
    if release >= (0, 9, 0) {
        "RecreateGroup"
    } else {
        "RecreateGroupOnPodRestart"
    }
}

/// The API server's check of a LeaderWorkerSet against its CRD's schema
/// (after the mutating webhooks, as the API server orders them): a
/// `restartPolicy` outside the schema's enum is refused with the 422
/// `Invalid` Status (`FieldValueNotSupported`) a structural schema gives.
pub(crate) const SCHEMA: Admission = Admission {
    resource: RESOURCE,
    phase: Phase::Validating,
    writes: &[Write::Create, Write::Update],
    admit: validate_schema,
    patched: None,
};

fn validate_schema(store: &Store, _ns: &str, lws: &mut Value) -> Result<(), ApiError> {
    let Ok(crd) = store.get("customresourcedefinitions.apiextensions.k8s.io", "", CRD) else {
        return Ok(());
    };
    let Some(allowed) = crd.pointer(RESTART_POLICY_SCHEMA).and_then(Value::as_array) else {
        return Ok(());
    };
    let Some(policy) = lws.pointer("/spec/leaderWorkerTemplate/restartPolicy") else {
        return Ok(());
    };
    if allowed.contains(policy) {
        return Ok(());
    }
    let shown: Vec<String> = allowed.iter().map(Value::to_string).collect();
    let message = format!(
        "Unsupported value: {policy}: supported values: {}",
        shown.join(", ")
    );
    Err(ApiError::invalid(
        "LeaderWorkerSet",
        "leaderworkerset.x-k8s.io",
        name_of(lws),
        &[(
            "FieldValueNotSupported",
            "spec.leaderWorkerTemplate.restartPolicy".to_owned(),
            message,
        )],
    ))
}

fn hash_hex(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    hex[..40].to_owned()
}

fn int_at(v: &Value, pointer: &str) -> Option<i64> {
    v.pointer(pointer).and_then(Value::as_i64)
}

/// The LeaderWorkerSet mutating webhook, as the store runs it on a
/// LeaderWorkerSet created or updated through the API.
pub(crate) const SET_WEBHOOK: Admission = Admission {
    resource: RESOURCE,
    phase: Phase::Mutating,
    writes: &[Write::Create, Write::Update],
    admit: admit_through_webhook,
    patched: None,
};

/// The LeaderWorkerSet pod webhook, as the store runs it on a pod created
/// once LeaderWorkerSet is installed.
pub(crate) const POD_WEBHOOK: Admission = Admission {
    resource: "pods",
    phase: Phase::Mutating,
    writes: &[Write::Create],
    admit: default_pod_if_installed,
    patched: None,
};

fn admit_through_webhook(store: &Store, _ns: &str, lws: &mut Value) -> Result<(), ApiError> {
    call_set_webhook(store)?;
    admit(lws)
}

fn default_pod_if_installed(store: &Store, ns: &str, pod: &mut Value) -> Result<(), ApiError> {
    if installed(store) {
        default_pod(store, ns, pod)?;
    }
    Ok(())
}

/// The LeaderWorkerSet webhook on create and update: defaults, then
/// validation (`Invalid`, 422, with the field's path).
pub(crate) fn admit(lws: &mut Value) -> Result<(), ApiError> {
    let name = name_of(lws).to_owned();
    let spec = &mut lws["spec"];
    if !spec.is_object() {
        *spec = json!({});
    }
    if spec.get("replicas").is_none() {
        spec["replicas"] = json!(1);
    }
    let template = &mut spec["leaderWorkerTemplate"];
    if !template.is_object() {
        *template = json!({});
    }
    if template.get("size").is_none() {
        template["size"] = json!(1);
    }
    match template.get("restartPolicy").and_then(Value::as_str) {
        None | Some("") => template["restartPolicy"] = json!("RecreateGroupOnPodRestart"),
        Some("Default") => template["restartPolicy"] = json!("None"),
        _ => {}
    }
    if spec.pointer("/rolloutStrategy/type").is_none() {
        spec["rolloutStrategy"] = json!({"type": "RollingUpdate"});
    }
    if spec
        .pointer("/rolloutStrategy/rollingUpdateConfiguration")
        .is_none()
    {
        spec["rolloutStrategy"]["rollingUpdateConfiguration"] =
            json!({"maxUnavailable": 1, "maxSurge": 0, "partition": 0});
    }
    if spec.pointer("/networkConfig/subdomainPolicy").is_none() {
        spec["networkConfig"] = json!({"subdomainPolicy": "Shared"});
    }
    if spec.get("startupPolicy").is_none() {
        spec["startupPolicy"] = json!("LeaderCreated");
    }
    let mut errors = Vec::new();
    if int_at(spec, "/replicas").is_none_or(|r| r < 0) {
        errors.push(format!(
            "spec.replicas: Invalid value: {}: replicas must be equal or greater than 0",
            spec["replicas"]
        ));
    }
    let size = int_at(spec, "/leaderWorkerTemplate/size");
    if size.is_none_or(|s| s < 1) {
        errors.push(format!(
            "spec.leaderWorkerTemplate.size: Invalid value: {}: size must be equal or greater than 1",
            spec["leaderWorkerTemplate"]["size"]
        ));
    }
    if spec
        .pointer("/leaderWorkerTemplate/workerTemplate/spec/containers")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        errors.push(
            "spec.leaderWorkerTemplate.workerTemplate.spec.containers: Required value".to_owned(),
        );
    }
    if errors.is_empty() {
        return Ok(());
    }
    Err(ApiError::new(
        422,
        "Invalid",
        format!(
            "LeaderWorkerSet.leaderworkerset.x-k8s.io \"{name}\" is invalid: {}",
            errors.join(", ")
        ),
    ))
}

/// `{parent}-{ordinal}` split as the StatefulSet names its pods.
fn parent_and_ordinal(name: &str) -> Option<(&str, i64)> {
    let (parent, n) = name.rsplit_once('-')?;
    Some((parent, n.parse().ok()?))
}

fn label<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.pointer("/metadata/labels")
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
}

fn annotation<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.pointer("/metadata/annotations")
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
}

fn is_leader(pod: &Value) -> bool {
    label(pod, WORKER_INDEX_LABEL) == Some("0")
}

/// The pod webhook: labels and environment of a pod of a LeaderWorkerSet
/// (other pods are left alone).
pub(crate) fn default_pod(store: &Store, ns: &str, pod: &mut Value) -> Result<(), ApiError> {
    if label(pod, NAME_LABEL).is_none() {
        return Ok(());
    }
    call_webhook(store, "mpod.kb.io", "/mutate--v1-pod")?;
    let name = name_of(pod).to_owned();
    let refuse = |m: String| {
        ApiError::new(
            400,
            "BadRequest",
            format!("admission webhook \"mpod.kb.io\" denied the request: {m}"),
        )
    };
    let size = annotation(pod, SIZE_ANNOTATION)
        .ok_or_else(|| {
            refuse(format!(
                "size annotation is unexpectedly missing for pod {name}"
            ))
        })?
        .to_owned();
    let (_, ordinal) = parent_and_ordinal(&name)
        .ok_or_else(|| refuse(format!("parsing pod ordinal for pod {name}")))?;
    if is_leader(pod) {
        if label(pod, GROUP_INDEX_LABEL).is_none() {
            pod["metadata"]["labels"][GROUP_INDEX_LABEL] = json!(ordinal.to_string());
        }
        if label(pod, GROUP_KEY_LABEL).is_none() {
            pod["metadata"]["labels"][GROUP_KEY_LABEL] = json!(hash_hex(&format!("{ns}/{name}")));
        }
    } else {
        pod["metadata"]["labels"][WORKER_INDEX_LABEL] = json!(ordinal.to_string());
    }
    let lws = label(pod, NAME_LABEL).unwrap_or_default().to_owned();
    let group = label(pod, GROUP_INDEX_LABEL)
        .ok_or_else(|| {
            refuse(format!(
                "Failure constructing environment variables, no group index label found for pod {ns}/{name}"
            ))
        })?
        .to_owned();
    let worker = label(pod, WORKER_INDEX_LABEL).unwrap_or("0").to_owned();
    let subdomain = str_at(pod, "/spec/subdomain").unwrap_or_default();
    let first = [
        (
            "LWS_LEADER_ADDRESS",
            format!("{lws}-{group}.{subdomain}.{ns}"),
        ),
        ("LWS_GROUP_SIZE", size),
        ("LWS_WORKER_INDEX", worker),
    ];
    for list in ["containers", "initContainers"] {
        let Some(Value::Array(containers)) = pod.pointer_mut(&format!("/spec/{list}")) else {
            continue;
        };
        for c in containers {
            let mut env: Vec<Value> = first
                .iter()
                .map(|(k, v)| json!({"name": k, "value": v}))
                .collect();
            for e in c.get("env").and_then(Value::as_array).into_iter().flatten() {
                let n = e.get("name").and_then(Value::as_str).unwrap_or_default();
                if !first.iter().any(|(k, _)| *k == n) {
                    env.push(e.clone());
                }
            }
            c["env"] = Value::Array(env);
        }
    }
    Ok(())
}

/// One pass of the LeaderWorkerSet and pod controllers.
pub(crate) fn reconcile(store: &Store) {
    if !installed(store) {
        // Deleting a CRD deletes its objects (and so, through their
        // owners, what they made).
        for lws in store.all(RESOURCE) {
            let _ = delete(store, RESOURCE, ns_of(&lws), name_of(&lws), "Background");
        }
        return;
    }
    if !controller_available(store) {
        return;
    }
    let sets = store.all(RESOURCE);
    if sets.is_empty() {
        return;
    }
    let pods = store.all("pods");
    for lws in sets {
        if deleting(&lws) {
            continue;
        }
        let mine: Vec<&Value> = pods
            .iter()
            .filter(|p| ns_of(p) == ns_of(&lws) && label(p, NAME_LABEL) == Some(name_of(&lws)))
            .collect();
        if recreate_groups(store, &lws, &mine) {
            continue;
        }
        ensure_headless_service(store, &lws);
        ensure_leader_set(store, &lws);
        for leader in mine.iter().filter(|p| is_leader(p) && !deleting(p)) {
            ensure_worker_set(store, &lws, leader);
        }
        update_status(store, &lws, &mine);
    }
}

fn revision(lws: &Value) -> String {
    let template = lws
        .pointer("/spec/leaderWorkerTemplate")
        .cloned()
        .unwrap_or(json!({}));
    hash_hex(&template.to_string())[..10].to_owned()
}

fn owner(kind: &str, api_version: &str, object: &Value) -> Value {
    json!([{"apiVersion": api_version, "kind": kind, "name": name_of(object), "uid": uid_of(object),
            "controller": true, "blockOwnerDeletion": true}])
}

fn size_of(lws: &Value) -> i64 {
    int_at(lws, "/spec/leaderWorkerTemplate/size").unwrap_or(1)
}

/// The map at `pointer` in `v` (labels, annotations; empty when absent)
/// with `entries` set in it.
fn merged(v: &Value, pointer: &str, entries: &[(&str, &str)]) -> Value {
    let mut map = v.pointer(pointer).cloned().unwrap_or(json!({}));
    if !map.is_object() {
        map = json!({});
    }
    for (k, value) in entries {
        map[*k] = json!(value);
    }
    map
}

/// `template` with `labels` and `annotations` set in its metadata.
fn pod_template(
    mut template: Value,
    labels: &[(&str, &str)],
    annotations: &[(&str, &str)],
) -> Value {
    template["metadata"]["labels"] = merged(&template, "/metadata/labels", labels);
    template["metadata"]["annotations"] = merged(&template, "/metadata/annotations", annotations);
    template
}

/// The headless Service `{lws}` that gives the set's pods their DNS names
/// (the StatefulSets name it as their `serviceName`, so it is the pods'
/// subdomain): `clusterIP: None`, selecting the set's pods, publishing
/// pods that are not ready yet, owned by the LeaderWorkerSet, as the
/// controller makes it for the default subdomain policy (`Shared`).
fn ensure_headless_service(store: &Store, lws: &Value) {
    let (ns, name) = (ns_of(lws), name_of(lws));
    if store.get("services", ns, name).is_ok() {
        return;
    }
    let api_version = str_at(lws, "/apiVersion").unwrap_or("leaderworkerset.x-k8s.io/v1");
    let service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns,
                     "ownerReferences": owner("LeaderWorkerSet", api_version, lws)},
        "spec": {"clusterIP": "None", "selector": {NAME_LABEL: name},
                 "publishNotReadyAddresses": true},
    });
    let _ = store.create("services", ns, service);
}

fn ensure_leader_set(store: &Store, lws: &Value) {
    let (ns, name) = (ns_of(lws), name_of(lws));
    let replicas = int_at(lws, "/spec/replicas").unwrap_or(1);
    if let Ok(existing) = store.get(statefulset::RESOURCE, ns, name) {
        if int_at(&existing, "/spec/replicas") != Some(replicas) {
            store.modify(statefulset::RESOURCE, ns, name, |s| {
                s["spec"]["replicas"] = json!(replicas);
            });
        }
        return;
    }
    if backing_off(store, lws) {
        return;
    }
    let template = lws
        .pointer("/spec/leaderWorkerTemplate/leaderTemplate")
        .or_else(|| lws.pointer("/spec/leaderWorkerTemplate/workerTemplate"))
        .cloned()
        .unwrap_or(json!({}));
    let rev = revision(lws);
    let size = size_of(lws).to_string();
    let template = pod_template(
        template,
        &[
            (WORKER_INDEX_LABEL, "0"),
            (NAME_LABEL, name),
            (REVISION_LABEL, &rev),
        ],
        &[(SIZE_ANNOTATION, &size)],
    );
    let set_labels = merged(
        lws,
        "/metadata/labels",
        &[(NAME_LABEL, name), (REVISION_LABEL, &rev)],
    );
    let set_annotations = merged(
        lws,
        "/metadata/annotations",
        &[(REPLICAS_ANNOTATION, &replicas.to_string())],
    );
    let api_version = str_at(lws, "/apiVersion").unwrap_or("leaderworkerset.x-k8s.io/v1");
    let set = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "labels": set_labels, "annotations": set_annotations,
                     "ownerReferences": owner("LeaderWorkerSet", api_version, lws)},
        "spec": {"serviceName": name, "replicas": replicas, "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": {NAME_LABEL: name, WORKER_INDEX_LABEL: "0"}},
                 "template": template},
    });
    match create_set(store, ns, set) {
        Ok(_) => {
            let message = format!("Created leader statefulset {name}");
            record(store, lws, "Normal", "GroupsProgressing", &message);
        }
        Err(e) if e.code == 409 => {}
        // As the controller tells it: the event names the set, not the
        // error (which goes to its log), and the next pass tries again.
        Err(_) => {
            let message = format!("Failed to create leader statefulset {name}");
            record(store, lws, "Warning", "FailedCreate", &message);
        }
    }
}

/// Whether the controller's work queue still holds this set back after
/// its last failed creation: controller-runtime requeues a failed
/// reconcile with an exponential backoff (5 ms doubling, at most 1000 s),
/// counted here by the `FailedCreate` events told so far.
fn backing_off(store: &Store, lws: &Value) -> bool {
    let Some(event) = events::latest(store, lws, "FailedCreate") else {
        return false;
    };
    let count = event.get("count").and_then(Value::as_u64).unwrap_or(1);
    let backoff = std::time::Duration::from_millis(5)
        .saturating_mul(1 << count.min(20))
        .min(std::time::Duration::from_secs(1000));
    str_at(&event, "/lastTimestamp")
        .and_then(super::store::parse_time)
        .is_some_and(|last| std::time::SystemTime::now() < last + backoff)
}

/// A StatefulSet created as a controller creates it: through the API
/// server's admission.
fn create_set(store: &Store, ns: &str, mut set: Value) -> Result<Value, ApiError> {
    statefulset::admit(&mut set)?;
    store.create(statefulset::RESOURCE, ns, set)
}

fn ensure_worker_set(store: &Store, lws: &Value, leader: &Value) {
    let size = size_of(lws);
    if size <= 1 {
        return;
    }
    if str_at(lws, "/spec/startupPolicy") == Some("LeaderReady") && !pod_ready(leader) {
        return;
    }
    let (ns, name) = (ns_of(leader), name_of(leader));
    if store.get(statefulset::RESOURCE, ns, name).is_ok() {
        return;
    }
    let lws_name = name_of(lws);
    let group = label(leader, GROUP_INDEX_LABEL).unwrap_or("0");
    let key = label(leader, GROUP_KEY_LABEL).unwrap_or_default();
    let rev = label(leader, REVISION_LABEL).unwrap_or_default();
    let labels = [
        (GROUP_INDEX_LABEL, group),
        (NAME_LABEL, lws_name),
        (GROUP_KEY_LABEL, key),
        (REVISION_LABEL, rev),
    ];
    let template = lws
        .pointer("/spec/leaderWorkerTemplate/workerTemplate")
        .cloned()
        .unwrap_or(json!({}));
    let size_text = size.to_string();
    let template = pod_template(
        template,
        &labels,
        &[
            (SIZE_ANNOTATION, &size_text),
            (LEADER_NAME_ANNOTATION, name),
        ],
    );
    let set = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "labels": merged(lws, "/metadata/labels", &labels),
                     "annotations": merged(lws, "/metadata/annotations", &[]),
                     "ownerReferences": owner("Pod", "v1", leader)},
        "spec": {"serviceName": lws_name, "replicas": size - 1, "podManagementPolicy": "Parallel",
                 "ordinals": {"start": 1},
                 "selector": {"matchLabels": {GROUP_INDEX_LABEL: group, NAME_LABEL: lws_name, GROUP_KEY_LABEL: key}},
                 "template": template},
    });
    match create_set(store, ns, set) {
        Ok(_) => {
            let message = format!("Created worker statefulset for leader pod {name}");
            record(store, lws, "Normal", "GroupsProgressing", &message);
        }
        Err(e) if e.code == 409 => {}
        Err(e) => {
            let message = format!(
                "Failed to create worker statefulset for leader pod {name}: {}",
                e.message
            );
            record(store, lws, "Warning", "FailedCreate", &message);
        }
    }
}

/// A container of `pod` restarted while it is Pending or Running.
fn container_restarted(pod: &Value) -> bool {
    matches!(phase(pod), "Running" | "Pending")
        && ["initContainerStatuses", "containerStatuses"]
            .iter()
            .any(|k| {
                pod.pointer(&format!("/status/{k}"))
                    .and_then(Value::as_array)
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c.get("restartCount").and_then(Value::as_i64).unwrap_or(0) > 0)
                    })
            })
}

/// The restart policy: a pod that restarted or is being deleted takes its
/// group with it (its leader deleted in the foreground). Whether a group
/// was recreated on this pass.
fn recreate_groups(store: &Store, lws: &Value, pods: &[&Value]) -> bool {
    let policy = str_at(lws, "/spec/leaderWorkerTemplate/restartPolicy").unwrap_or_default();
    let release = release(store);
    let recreates = policy == "RecreateGroupOnPodRestart"
        || (policy == "RecreateGroupAfterStart" && release >= (0, 9, 0));
    if !recreates {
        return false;
    }
    let mut recreated = false;
    for pod in pods {
        if !container_restarted(pod) && !deleting(pod) {
            continue;
        }
        if policy == "RecreateGroupAfterStart" && group_pending(pods, pod) {
            continue;
        }
        let leader = if is_leader(pod) {
            (*pod).clone()
        } else {
            let Some((leader_name, _)) = parent_and_ordinal(name_of(pod)) else {
                continue;
            };
            let Ok(leader) = store.get("pods", ns_of(pod), leader_name) else {
                continue;
            };
            // A worker of an earlier incarnation of the group does not count.
            let current = store
                .all(statefulset::RESOURCE)
                .into_iter()
                .filter(|s| owner_uids(pod).iter().any(|u| u == uid_of(s)))
                .any(|s| owner_uids(&s).iter().any(|u| u == uid_of(&leader)));
            if label(&leader, REVISION_LABEL) != label(pod, REVISION_LABEL) || !current {
                continue;
            }
            leader
        };
        if deleting(&leader) {
            continue;
        }
        if delete(
            store,
            "pods",
            ns_of(&leader),
            name_of(&leader),
            "Foreground",
        )
        .is_ok()
        {
            recreated = true;
            let message = format!(
                "Worker pod {} failed, deleted leader pod {} to recreate group {}",
                name_of(pod),
                name_of(&leader),
                label(&leader, GROUP_INDEX_LABEL).unwrap_or_default()
            );
            record(
                store,
                lws,
                "Normal",
                recreate_event_reason(release),
                &message,
            );
        }
    }
    recreated
}

fn group_pending(pods: &[&Value], pod: &Value) -> bool {
    let group = label(pod, GROUP_INDEX_LABEL);
    pods.iter()
        .any(|p| label(p, GROUP_INDEX_LABEL) == group && phase(p) == "Pending")
}

fn update_status(store: &Store, lws: &Value, pods: &[&Value]) {
    let (ns, name) = (ns_of(lws), name_of(lws));
    let size = size_of(lws);
    let replicas = int_at(lws, "/spec/replicas").unwrap_or(1);
    let leader_set = store.get(statefulset::RESOURCE, ns, name).ok();
    let groups = leader_set
        .as_ref()
        .and_then(|s| int_at(s, "/status/replicas"))
        .unwrap_or(0);
    let mut ready = 0;
    for leader in pods.iter().filter(|p| is_leader(p)) {
        let workers_ready = size <= 1
            || store
                .get(statefulset::RESOURCE, ns, name_of(leader))
                .is_ok_and(|s| {
                    int_at(&s, "/status/readyReplicas") == Some(size - 1)
                        && int_at(&s, "/spec/replicas") == Some(size - 1)
                });
        if workers_ready && !deleting(leader) && phase(leader) == "Running" && pod_ready(leader) {
            ready += 1;
        }
    }
    let (kind, reason, message) = if ready == replicas {
        ("Available", "AllGroupsReady", "All replicas are ready")
    } else {
        (
            "Progressing",
            "GroupsProgressing",
            "Replicas are progressing",
        )
    };
    let generation = lws
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(1));
    let current = lws
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("status").and_then(Value::as_str) == Some("True"))
        })
        .and_then(|c| c.get("type"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let changed = current.as_deref() != Some(kind);
    let now = super::store::now_rfc3339();
    store.modify(RESOURCE, ns, name, |l| {
        l["status"]["replicas"] = json!(groups);
        l["status"]["readyReplicas"] = json!(ready);
        l["status"]["updatedReplicas"] = json!(groups);
        l["status"]["observedGeneration"] = generation.clone();
        l["status"]["hpaPodSelector"] =
            json!(format!("{NAME_LABEL}={name},{WORKER_INDEX_LABEL}=0"));
        if !changed {
            return;
        }
        let mut conditions: Vec<Value> = l
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for c in &mut conditions {
            if c.get("status").and_then(Value::as_str) == Some("True")
                && matches!(
                    c.get("type").and_then(Value::as_str),
                    Some("Available" | "Progressing")
                )
            {
                c["status"] = json!("False");
                c["lastTransitionTime"] = json!(now);
            }
        }
        let fresh = json!({"type": kind, "status": "True", "lastTransitionTime": now,
                           "observedGeneration": generation, "reason": reason, "message": message});
        match conditions
            .iter_mut()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
        {
            Some(c) => *c = fresh,
            None => conditions.push(fresh),
        }
        l["status"]["conditions"] = Value::Array(conditions);
    });
    if changed {
        let text = format!("{message}, with {ready} groups ready of total {replicas} groups");
        record(store, lws, "Normal", reason, &text);
    }
}

fn record(store: &Store, lws: &Value, kind: &str, reason: &str, message: &str) {
    events::record(
        store,
        lws,
        events::Event {
            kind,
            reason,
            message,
            component: "lws",
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_webhooks_fail_until_the_controller_is_available() {
        let store = Store::new();
        // Not registered: nothing is called.
        assert!(call_set_webhook(&store).is_ok());
        store
            .create(
                MUTATING_RESOURCE,
                "",
                json!({"metadata": {"name": MUTATING_WEBHOOKS}, "webhooks": []}),
            )
            .unwrap();
        let mut manager = json!({"metadata": {"name": CONTROLLER, "namespace": CONTROLLER_NAMESPACE},
                                 "spec": {"replicas": 1}});
        manager["status"] = super::super::deployment::status(1, 0);
        store
            .create(
                super::super::deployment::RESOURCE,
                CONTROLLER_NAMESPACE,
                manager,
            )
            .unwrap();
        let e = call_set_webhook(&store).unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (500, "InternalError"));
        assert!(
            e.message
                .ends_with("no endpoints available for service \"lws-webhook-service\""),
            "{}",
            e.message
        );
        let mut labelled = pod("lws-0", json!({NAME_LABEL: "lws"}));
        let e = default_pod(&store, "ns", &mut labelled).unwrap_err();
        assert!(e.message.contains("\"mpod.kb.io\""), "{}", e.message);
        let mut other = pod("other", json!({}));
        assert!(
            default_pod(&store, "ns", &mut other).is_ok(),
            "not selected"
        );
        store.modify(
            super::super::deployment::RESOURCE,
            CONTROLLER_NAMESPACE,
            CONTROLLER,
            |d| d["status"] = super::super::deployment::status(1, 1),
        );
        assert!(controller_available(&store));
        assert!(call_set_webhook(&store).is_ok());
    }

    fn pod(name: &str, labels: Value) -> Value {
        json!({"metadata": {"name": name, "labels": labels,
                            "annotations": {SIZE_ANNOTATION: "4"}},
               "spec": {"subdomain": "set", "containers": [{"name": "c",
                   "env": [{"name": "A", "value": "1"}, {"name": "LWS_GROUP_SIZE", "value": "stale"}]}]}})
    }

    #[test]
    fn the_pod_webhook_labels_a_leader_and_puts_the_variables_first() {
        let mut leader = pod("set-0", json!({NAME_LABEL: "set", WORKER_INDEX_LABEL: "0"}));
        default_pod(&Store::new(), "ns", &mut leader).unwrap();
        assert_eq!(leader["metadata"]["labels"][GROUP_INDEX_LABEL], "0");
        let key = leader["metadata"]["labels"][GROUP_KEY_LABEL]
            .as_str()
            .unwrap();
        assert_eq!(key.len(), 40);
        let env: Vec<(&str, &str)> = leader["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["name"].as_str().unwrap(), e["value"].as_str().unwrap()))
            .collect();
        assert_eq!(
            env,
            [
                ("LWS_LEADER_ADDRESS", "set-0.set.ns"),
                ("LWS_GROUP_SIZE", "4"),
                ("LWS_WORKER_INDEX", "0"),
                ("A", "1"),
            ]
        );
    }

    #[test]
    fn the_pod_webhook_gives_a_worker_its_index_from_its_name() {
        let mut worker = pod(
            "set-0-3",
            json!({NAME_LABEL: "set", GROUP_INDEX_LABEL: "0"}),
        );
        default_pod(&Store::new(), "ns", &mut worker).unwrap();
        assert_eq!(worker["metadata"]["labels"][WORKER_INDEX_LABEL], "3");
        assert_eq!(worker["spec"]["containers"][0]["env"][2]["value"], "3");
        // Pods of no LeaderWorkerSet are left alone; one without its size is refused.
        let mut other = json!({"metadata": {"name": "x"}});
        default_pod(&Store::new(), "ns", &mut other).unwrap();
        assert_eq!(other, json!({"metadata": {"name": "x"}}));
        let mut sizeless = json!({"metadata": {"name": "set-0", "labels": {NAME_LABEL: "set"}}});
        let err = default_pod(&Store::new(), "ns", &mut sizeless).unwrap_err();
        assert!(
            err.message
                .contains("size annotation is unexpectedly missing"),
            "{}",
            err.message
        );
    }

    #[test]
    fn the_set_webhook_defaults_and_validates() {
        let mut set = json!({"metadata": {"name": "s"}, "spec": {"leaderWorkerTemplate": {
            "restartPolicy": "Default", "workerTemplate": {"spec": {"containers": [{"name": "c"}]}}}}});
        admit(&mut set).unwrap();
        assert_eq!(set["spec"]["replicas"], 1);
        assert_eq!(set["spec"]["leaderWorkerTemplate"]["size"], 1);
        assert_eq!(set["spec"]["leaderWorkerTemplate"]["restartPolicy"], "None");
        assert_eq!(
            set["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"],
            json!({"maxUnavailable": 1, "maxSurge": 0, "partition": 0})
        );
        let mut bad = json!({"metadata": {"name": "b"}, "spec": {"replicas": -1,
            "leaderWorkerTemplate": {"restartPolicy": "Sometimes"}}});
        let err = admit(&mut bad).unwrap_err();
        assert_eq!(err.code, 422);
        for field in [
            "spec.replicas",
            "workerTemplate.spec.containers: Required value",
        ] {
            assert!(err.message.contains(field), "{field} in {}", err.message);
        }
        // The restart policy is the CRD schema's to check, not the webhook's.
        assert!(!err.message.contains("restartPolicy"), "{}", err.message);
    }

    fn store_with_crd() -> Store {
        let store = Store::new();
        store
            .create("customresourcedefinitions.apiextensions.k8s.io", "", crd())
            .unwrap();
        store
    }

    fn with_policy(policy: &str) -> Value {
        json!({"metadata": {"name": "s"}, "spec": {"leaderWorkerTemplate": {"restartPolicy": policy}}})
    }

    #[test]
    fn the_crd_schema_allows_the_v0_5_1_restart_policies_only() {
        let store = store_with_crd();
        for ok in ["Default", "RecreateGroupOnPodRestart", "None"] {
            validate_schema(&store, "ns", &mut with_policy(ok)).unwrap();
        }
        for bad in [
            "RecreateGroupAfterStart",
            "Sometimes",
            "recreategrouponpodrestart",
        ] {
            let e = validate_schema(&store, "ns", &mut with_policy(bad)).unwrap_err();
            assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
            assert_eq!(
                e.message,
                format!(
                    "LeaderWorkerSet.leaderworkerset.x-k8s.io \"s\" is invalid: spec.leaderWorkerTemplate.restartPolicy: Unsupported value: \"{bad}\": supported values: \"Default\", \"RecreateGroupOnPodRestart\", \"None\""
                )
            );
            let cause = &e.to_status()["details"]["causes"][0];
            assert_eq!(cause["reason"], "FieldValueNotSupported");
            assert_eq!(cause["field"], "spec.leaderWorkerTemplate.restartPolicy");
        }
        // The served manifests' CRD says the same.
        let yaml = include_str!("../apis/lws-manifests.yaml");
        assert!(yaml.contains("enum:\n                    - Default\n                    - RecreateGroupOnPodRestart\n                    - None\n"));
    }

    #[test]
    fn the_release_is_the_controller_image_tag() {
        let store = Store::new();
        assert_eq!(release(&store), (0, 5, 1), "what kinetic up installs");
        let manager = |tag: &str| {
            json!({"metadata": {"name": CONTROLLER, "namespace": CONTROLLER_NAMESPACE},
            "spec": {"template": {"spec": {"containers": [{"name": "manager", "image": format!("registry.k8s.io/lws/lws:{tag}")}]}}}})
        };
        store
            .create(
                super::super::deployment::RESOURCE,
                CONTROLLER_NAMESPACE,
                manager("v0.9.0"),
            )
            .unwrap();
        assert_eq!(release(&store), (0, 9, 0));
        assert_eq!(recreate_event_reason(release(&store)), "RecreateGroup");
        assert_eq!(
            recreate_event_reason((0, 5, 1)),
            "RecreateGroupOnPodRestart"
        );
        assert_eq!(
            recreate_event_reason((0, 8, 9)),
            "RecreateGroupOnPodRestart"
        );
    }

    #[test]
    fn a_restart_counts_only_while_the_pod_runs_or_waits() {
        let restarted = |phase: &str| json!({"status": {"phase": phase, "containerStatuses": [{"restartCount": 1}]}});
        assert!(container_restarted(&restarted("Running")));
        assert!(container_restarted(&restarted("Pending")));
        assert!(!container_restarted(&restarted("Failed")));
        assert!(!container_restarted(
            &json!({"status": {"phase": "Running", "containerStatuses": [{"restartCount": 0}]}})
        ));
    }
}
