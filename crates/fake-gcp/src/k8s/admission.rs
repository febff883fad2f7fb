//! The admission plugins a pod meets on its way into the store, in the API
//! server's order: `LimitRanger` (defaults from the namespace's
//! LimitRanges), `ServiceAccount` (the pod's service account must exist),
//! then the validating ones: `LimitRanger` (min and max per container),
//! `PodSecurity` (the namespace's `pod-security.kubernetes.io/enforce`
//! level) and `ResourceQuota` (the namespace's quotas, last). A refusal is
//! a 403 `Status` whose message is the plugin's own:
//!
//! - `pods "job-" is forbidden: error looking up service account ns/sa: serviceaccount "sa" not found`
//! - `pods "job-" is forbidden: maximum nvidia.com/gpu usage per Container is 0, but limit is 1`
//! - `pods "job-" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (…), …`
//! - `pods "job-" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2`
//!
//! The Job controller records such a refusal as a `FailedCreate` event on
//! the Job and creates no pod.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::meta::{ns_of, str_at};
use super::store::{Admission, ApiError, Phase, Store, Write};

/// A resource quantity in thousandths (`500m` → 500, `2` → 2000,
/// `1Gi` → 1073741824000), as far as this fake needs them.
pub(crate) fn milli(quantity: &str) -> Option<i128> {
    let q = quantity.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let scale: i128 = match suffix {
        "" => 1000,
        "m" => 1,
        "k" => 1000 * 1000,
        "M" => 1000 * 1_000_000,
        "G" => 1000 * 1_000_000_000,
        "T" => 1000 * 1_000_000_000_000,
        "Ki" => 1000 * 1024,
        "Mi" => 1000 * 1024 * 1024,
        "Gi" => 1000 * 1024 * 1024 * 1024,
        "Ti" => 1000 * 1024 * 1024 * 1024 * 1024,
        _ => return None,
    };
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    let whole: i128 = if whole.is_empty() || whole == "+" {
        0
    } else {
        whole.parse().ok()?
    };
    let mut value = whole * scale;
    if !frac.is_empty() {
        let digits = frac.len().min(12);
        let f: i128 = frac[..digits].parse().ok()?;
        value += f * scale / 10i128.pow(u32::try_from(digits).ok()?);
    }
    Some(value)
}

/// A quantity in thousandths, written back: `2`, `500m`, `1Gi`.
pub(crate) fn format_milli(value: i128) -> String {
    if value % 1000 != 0 {
        return format!("{value}m");
    }
    let units = value / 1000;
    for (suffix, size) in [
        ("Ti", 1i128 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ] {
        if units != 0 && units % size == 0 && units >= size {
            return format!("{}{suffix}", units / size);
        }
    }
    units.to_string()
}

fn forbidden(name: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        403,
        "Forbidden",
        format!("pods {name:?} is forbidden: {why}"),
    )
    .with_details(json!({"name": name, "kind": "pods"}))
}

/// The name a refusal names: the pod's name, else its `generateName`.
fn pod_name(pod: &Value) -> String {
    str_at(pod, "/metadata/name")
        .or_else(|| str_at(pod, "/metadata/generateName"))
        .unwrap_or("")
        .to_owned()
}

fn containers(pod: &Value) -> Vec<Value> {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn resource_list(container: &Value, which: &str) -> BTreeMap<String, String> {
    container
        .pointer(&format!("/resources/{which}"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let text = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), text)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The built-in plugins that change a pod created in a namespace:
/// `LimitRanger`'s defaults, then `ServiceAccount` (the default account, and
/// it must exist).
pub(crate) const POD_DEFAULTS: Admission = Admission {
    resource: "pods",
    phase: Phase::Mutating,
    writes: &[Write::Create],
    admit: default_pod,
    patched: None,
};

/// The built-in plugins that check a pod once every mutating hook ran:
/// `LimitRanger` (min and max), `PodSecurity`, then `ResourceQuota`.
pub(crate) const POD_CHECKS: Admission = Admission {
    resource: "pods",
    phase: Phase::Validating,
    writes: &[Write::Create],
    admit: check_pod,
    patched: None,
};

fn limit_ranges(store: &Store, ns: &str) -> Vec<Value> {
    store
        .all("limitranges")
        .into_iter()
        .filter(|l| ns_of(l) == ns)
        .collect()
}

fn default_pod(store: &Store, ns: &str, pod: &mut Value) -> Result<(), ApiError> {
    let name = pod_name(pod);
    apply_limit_defaults(&limit_ranges(store, ns), pod);
    // ServiceAccount (mutating): the default account, and it must exist.
    if str_at(pod, "/spec/serviceAccountName").is_none_or(str::is_empty) {
        pod["spec"]["serviceAccountName"] = json!("default");
    }
    let account = str_at(pod, "/spec/serviceAccountName")
        .unwrap_or("default")
        .to_owned();
    if store.get("serviceaccounts", ns, &account).is_err() {
        return Err(forbidden(
            &name,
            format!(
                "error looking up service account {ns}/{account}: serviceaccount {account:?} not found"
            ),
        ));
    }
    Ok(())
}

fn check_pod(store: &Store, ns: &str, pod: &mut Value) -> Result<(), ApiError> {
    let name = pod_name(pod);
    let errors = limit_violations(&limit_ranges(store, ns), pod);
    match errors.as_slice() {
        [] => {}
        [one] => return Err(forbidden(&name, one)),
        many => return Err(forbidden(&name, format!("[{}]", many.join(", ")))),
    }
    if let Some(why) = pod_security(store, ns, pod) {
        return Err(forbidden(&name, why));
    }
    check_quota(store, ns, pod).map_err(|why| forbidden(&name, why))
}

/// The `Container` items of the LimitRanges.
fn container_limits(ranges: &[Value]) -> Vec<Value> {
    ranges
        .iter()
        .flat_map(|r| {
            r.pointer("/spec/limits")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .filter(|item| item.get("type").and_then(Value::as_str) == Some("Container"))
        .collect()
}

fn quantities(item: &Value, key: &str) -> BTreeMap<String, String> {
    item.get(key)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// LimitRanger's defaults: a container without a limit (request) for a
/// resource gets the range's `default` (`defaultRequest`); as the API
/// server defaults a LimitRange, `default` is `max` when unset, and
/// `defaultRequest` is `default`.
fn apply_limit_defaults(ranges: &[Value], pod: &mut Value) {
    for item in container_limits(ranges) {
        let mut default = quantities(&item, "max");
        default.extend(quantities(&item, "default"));
        let mut default_request = default.clone();
        default_request.extend(quantities(&item, "defaultRequest"));
        let Some(Value::Array(cs)) = pod.pointer_mut("/spec/containers") else {
            continue;
        };
        for c in cs.iter_mut() {
            for (which, values) in [("limits", &default), ("requests", &default_request)] {
                for (resource, quantity) in values {
                    // Resource names hold a `/` (`nvidia.com/gpu`): no JSON pointer.
                    let set = c
                        .get("resources")
                        .and_then(|r| r.get(which))
                        .and_then(|m| m.get(resource))
                        .is_some();
                    if !set {
                        if !c["resources"].is_object() {
                            c["resources"] = json!({});
                        }
                        if !c["resources"][which].is_object() {
                            c["resources"][which] = json!({});
                        }
                        c["resources"][which][resource] = json!(quantity);
                    }
                }
            }
        }
    }
}

/// LimitRanger's validation: each container's requests and limits within
/// the ranges' `min` and `max`.
fn limit_violations(ranges: &[Value], pod: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    for item in container_limits(ranges) {
        for c in containers(pod) {
            let requests = resource_list(&c, "requests");
            let limits = resource_list(&c, "limits");
            for (resource, min) in quantities(&item, "min") {
                let enforced = milli(&min).unwrap_or(0);
                let request = requests.get(&resource);
                let limit = limits.get(&resource);
                let error = match (request, limit) {
                    (None, _) => Some(format!(
                        "minimum {resource} usage per Container is {min}.  No request is specified"
                    )),
                    (Some(r), _) if milli(r).unwrap_or(0) < enforced => Some(format!(
                        "minimum {resource} usage per Container is {min}, but request is {r}"
                    )),
                    (_, Some(l)) if milli(l).unwrap_or(0) < enforced => Some(format!(
                        "minimum {resource} usage per Container is {min}, but limit is {l}"
                    )),
                    _ => None,
                };
                errors.extend(error);
            }
            for (resource, max) in quantities(&item, "max") {
                let enforced = milli(&max).unwrap_or(0);
                let request = requests.get(&resource);
                let limit = limits.get(&resource);
                let error = match (limit, request) {
                    (None, _) => Some(format!(
                        "maximum {resource} usage per Container is {max}.  No limit is specified"
                    )),
                    (Some(l), _) if milli(l).unwrap_or(0) > enforced => Some(format!(
                        "maximum {resource} usage per Container is {max}, but limit is {l}"
                    )),
                    (_, Some(r)) if milli(r).unwrap_or(0) > enforced => Some(format!(
                        "maximum {resource} usage per Container is {max}, but request is {r}"
                    )),
                    _ => None,
                };
                errors.extend(error);
            }
        }
    }
    errors
}

/// PodSecurity's verdict under the namespace's enforced level: the
/// `violates PodSecurity "level:version": …` text, or `None`.
fn pod_security(store: &Store, ns: &str, pod: &Value) -> Option<String> {
    let namespace = store.get("namespaces", "", ns).ok()?;
    let labels = namespace.pointer("/metadata/labels")?;
    let level = labels
        .get("pod-security.kubernetes.io/enforce")
        .and_then(Value::as_str)?;
    let version = labels
        .get("pod-security.kubernetes.io/enforce-version")
        .and_then(Value::as_str)
        .unwrap_or("latest");
    let mut violations = baseline_violations(pod);
    if level == "restricted" {
        violations.extend(restricted_violations(pod));
    } else if level != "baseline" {
        return None;
    }
    (!violations.is_empty()).then(|| {
        format!(
            "violates PodSecurity \"{level}:{version}\": {}",
            violations.join(", ")
        )
    })
}

fn container_names(pod: &Value) -> Vec<String> {
    containers(pod)
        .iter()
        .map(|c| str_at(c, "/name").unwrap_or("").to_owned())
        .collect()
}

fn quoted(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    let noun = if names.len() == 1 {
        "container"
    } else {
        "containers"
    };
    format!("{noun} {}", quoted.join(", "))
}

/// The baseline level's checks this fake knows: privileged containers,
/// host namespaces and hostPath volumes.
fn baseline_violations(pod: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let privileged: Vec<String> = containers(pod)
        .iter()
        .filter(|c| {
            c.pointer("/securityContext/privileged")
                .and_then(Value::as_bool)
                == Some(true)
        })
        .map(|c| str_at(c, "/name").unwrap_or("").to_owned())
        .collect();
    if !privileged.is_empty() {
        out.push(format!(
            "privileged ({} must not set securityContext.privileged=true)",
            quoted(&privileged)
        ));
    }
    let host: Vec<&str> = ["hostNetwork", "hostPID", "hostIPC"]
        .into_iter()
        .filter(|k| pod.pointer(&format!("/spec/{k}")).and_then(Value::as_bool) == Some(true))
        .collect();
    if !host.is_empty() {
        let set: Vec<String> = host.iter().map(|k| format!("{k}=true")).collect();
        out.push(format!("host namespaces ({})", set.join(", ")));
    }
    let host_paths: Vec<String> = pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("hostPath").is_some())
        .map(|v| format!("{:?}", str_at(v, "/name").unwrap_or("")))
        .collect();
    if !host_paths.is_empty() {
        out.push(format!(
            "hostPath volumes (volume {})",
            host_paths.join(", ")
        ));
    }
    out
}

/// The restricted level's checks on top of baseline's.
fn restricted_violations(pod: &Value) -> Vec<String> {
    let names = container_names(pod);
    let pod_sc = pod.pointer("/spec/securityContext");
    let set_on =
        |c: &Value, pointer: &str| c.pointer(&format!("/securityContext{pointer}")).cloned();
    let cs = containers(pod);
    let failing = |pred: &dyn Fn(&Value) -> bool| -> Vec<String> {
        cs.iter()
            .filter(|c| !pred(c))
            .map(|c| str_at(c, "/name").unwrap_or("").to_owned())
            .collect()
    };
    let mut out = Vec::new();
    let escalation = failing(&|c| {
        set_on(c, "/allowPrivilegeEscalation").and_then(|v| v.as_bool()) == Some(false)
    });
    if !escalation.is_empty() {
        out.push(format!(
            "allowPrivilegeEscalation != false ({} must set securityContext.allowPrivilegeEscalation=false)",
            quoted(&escalation)
        ));
    }
    let capabilities = failing(&|c| {
        set_on(c, "/capabilities/drop")
            .and_then(|v| v.as_array().cloned())
            .is_some_and(|drop| drop.iter().any(|d| d == "ALL"))
    });
    if !capabilities.is_empty() {
        out.push(format!(
            "unrestricted capabilities ({} must set securityContext.capabilities.drop=[\"ALL\"])",
            quoted(&capabilities)
        ));
    }
    let pod_non_root = pod_sc
        .and_then(|s| s.get("runAsNonRoot"))
        .and_then(Value::as_bool)
        == Some(true);
    let non_root = failing(&|c| {
        set_on(c, "/runAsNonRoot")
            .and_then(|v| v.as_bool())
            .unwrap_or(pod_non_root)
    });
    if !non_root.is_empty() {
        let subject = if non_root.len() == names.len() {
            format!("pod or {}", quoted(&non_root))
        } else {
            quoted(&non_root)
        };
        out.push(format!(
            "runAsNonRoot != true ({subject} must set securityContext.runAsNonRoot=true)"
        ));
    }
    let allowed_profile = |v: Option<Value>| {
        v.and_then(|p| p.as_str().map(str::to_owned))
            .is_some_and(|t| t == "RuntimeDefault" || t == "Localhost")
    };
    let pod_seccomp = allowed_profile(
        pod_sc
            .and_then(|s| s.pointer("/seccompProfile/type"))
            .cloned(),
    );
    let seccomp = failing(&|c| {
        let own = set_on(c, "/seccompProfile/type");
        if own.is_some() {
            allowed_profile(own)
        } else {
            pod_seccomp
        }
    });
    if !seccomp.is_empty() {
        let subject = if seccomp.len() == names.len() {
            format!("pod or {}", quoted(&seccomp))
        } else {
            quoted(&seccomp)
        };
        out.push(format!(
            "seccompProfile ({subject} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
        ));
    }
    out
}

/// What a pod counts for in a quota: `pods`, `count/pods`, and its
/// containers' requests (`requests.X`, and `cpu`/`memory` for the
/// requests of those) and limits (`limits.X`).
fn pod_usage(pod: &Value) -> BTreeMap<String, i128> {
    let mut usage = BTreeMap::new();
    usage.insert("pods".to_owned(), 1000);
    usage.insert("count/pods".to_owned(), 1000);
    for c in containers(pod) {
        for (which, prefix) in [("requests", "requests."), ("limits", "limits.")] {
            for (resource, q) in resource_list(&c, which) {
                let v = milli(&q).unwrap_or(0);
                *usage.entry(format!("{prefix}{resource}")).or_insert(0) += v;
                if which == "requests" && (resource == "cpu" || resource == "memory") {
                    *usage.entry(resource.clone()).or_insert(0) += v;
                }
            }
        }
    }
    usage
}

fn pretty(values: &BTreeMap<String, i128>) -> String {
    values
        .iter()
        .map(|(k, v)| format!("{k}={}", format_milli(*v)))
        .collect::<Vec<_>>()
        .join(",")
}

/// ResourceQuota: every quota of the namespace holds with this pod added
/// to the pods already there (those that have not ended).
fn check_quota(store: &Store, ns: &str, pod: &Value) -> Result<(), String> {
    let quotas: Vec<Value> = store
        .all("resourcequotas")
        .into_iter()
        .filter(|q| ns_of(q) == ns)
        .collect();
    if quotas.is_empty() {
        return Ok(());
    }
    let mut used: BTreeMap<String, i128> = BTreeMap::new();
    for p in store.all("pods").into_iter().filter(|p| ns_of(p) == ns) {
        let ended = matches!(str_at(&p, "/status/phase"), Some("Succeeded" | "Failed"));
        if ended {
            continue;
        }
        for (k, v) in pod_usage(&p) {
            *used.entry(k).or_insert(0) += v;
        }
    }
    let requested = pod_usage(pod);
    for quota in quotas {
        let name = str_at(&quota, "/metadata/name").unwrap_or("").to_owned();
        let hard: BTreeMap<String, i128> =
            quantities(quota.get("spec").unwrap_or(&Value::Null), "hard")
                .into_iter()
                .filter_map(|(k, v)| milli(&v).map(|m| (k, m)))
                .collect();
        // Quota on compute resources needs every container to state them.
        let mut missing: Vec<String> = Vec::new();
        for resource in [
            "limits.cpu",
            "limits.memory",
            "requests.cpu",
            "requests.memory",
            "cpu",
            "memory",
        ] {
            if !hard.contains_key(resource) {
                continue;
            }
            let (which, base) = match resource.split_once('.') {
                Some((w, b)) => (w, b),
                None => ("requests", resource),
            };
            let lacking: Vec<String> = containers(pod)
                .iter()
                .filter(|c| !resource_list(c, which).contains_key(base))
                .map(|c| str_at(c, "/name").unwrap_or("").to_owned())
                .collect();
            if !lacking.is_empty() {
                missing.push(format!("{resource} for: {}", lacking.join(",")));
            }
        }
        if !missing.is_empty() {
            missing.sort();
            return Err(format!(
                "failed quota: {name}: must specify {}",
                missing.join("; ")
            ));
        }
        let mut exceeded = BTreeMap::new();
        for (resource, limit) in &hard {
            let Some(want) = requested.get(resource).filter(|v| **v > 0) else {
                continue;
            };
            let have = used.get(resource).copied().unwrap_or(0);
            if have + want > *limit {
                exceeded.insert(resource.clone(), (*want, have, *limit));
            }
        }
        if !exceeded.is_empty() {
            let part = |f: fn(&(i128, i128, i128)) -> i128| {
                pretty(&exceeded.iter().map(|(k, v)| (k.clone(), f(v))).collect())
            };
            return Err(format!(
                "exceeded quota: {name}, requested: {}, used: {}, limited: {}",
                part(|v| v.0),
                part(|v| v.1),
                part(|v| v.2)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(extra: Value) -> Value {
        let mut p = json!({"metadata": {"generateName": "job-"},
            "spec": {"serviceAccountName": "kinetic",
                     "containers": [{"name": "kinetic-worker", "image": "i"}]}});
        super::super::store::merge_patch(&mut p, &extra);
        p
    }

    fn admit_pod(s: &Store, ns: &str, pod: &mut Value) -> Result<(), ApiError> {
        s.admit(Write::Create, "pods", ns, pod)
    }

    fn store() -> Store {
        let s = Store::with_admission(vec![POD_DEFAULTS, POD_CHECKS]);
        s.create("namespaces", "", json!({"metadata": {"name": "ns"}}))
            .unwrap();
        s.create(
            "serviceaccounts",
            "ns",
            json!({"metadata": {"name": "kinetic"}}),
        )
        .unwrap();
        s
    }

    #[test]
    fn quantities() {
        assert_eq!(milli("500m"), Some(500));
        assert_eq!(milli("2"), Some(2000));
        assert_eq!(milli("1.5"), Some(1500));
        assert_eq!(milli("1Gi"), Some(1000 * 1024 * 1024 * 1024));
        assert_eq!(format_milli(1500), "1500m");
        assert_eq!(format_milli(2000), "2");
        assert_eq!(format_milli(1000 * (1 << 30)), "1Gi");
        assert_eq!(milli("lots"), None);
    }

    #[test]
    fn a_missing_service_account_is_refused_with_the_api_servers_message() {
        let s = store();
        let mut p = pod(json!({"spec": {"serviceAccountName": "nobody"}}));
        let e = admit_pod(&s, "ns", &mut p).unwrap_err();
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "pods \"job-\" is forbidden: error looking up service account ns/nobody: serviceaccount \"nobody\" not found"
        );
        assert!(admit_pod(&s, "ns", &mut pod(json!({}))).is_ok());
    }

    #[test]
    fn limit_ranges_default_and_bound_containers() {
        let s = store();
        s.create(
            "limitranges",
            "ns",
            json!({"metadata": {"name": "no-gpus"},
                   "spec": {"limits": [{"type": "Container", "max": {"nvidia.com/gpu": "0"}}]}}),
        )
        .unwrap();
        let mut p = pod(json!({}));
        admit_pod(&s, "ns", &mut p).unwrap();
        assert_eq!(
            p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
            "0"
        );
        let mut gpu = pod(json!({}));
        gpu["spec"]["containers"][0]["resources"] =
            json!({"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}});
        let e = admit_pod(&s, "ns", &mut gpu).unwrap_err();
        assert_eq!(
            e.message,
            "pods \"job-\" is forbidden: maximum nvidia.com/gpu usage per Container is 0, but limit is 1"
        );
    }

    #[test]
    fn restricted_pod_security_names_each_missing_setting() {
        let s = store();
        s.patch(
            "namespaces",
            "",
            "ns",
            &json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}),
        )
        .unwrap();
        let e = admit_pod(&s, "ns", &mut pod(json!({}))).unwrap_err();
        assert!(
            e.message.starts_with(
                "pods \"job-\" is forbidden: violates PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false (container \"kinetic-worker\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities"
            ),
            "{}",
            e.message
        );
        assert!(
            e.message
                .contains("seccompProfile (pod or container \"kinetic-worker\"")
        );
    }

    #[test]
    fn quotas_count_the_pods_already_there() {
        let s = store();
        s.create(
            "resourcequotas",
            "ns",
            json!({"metadata": {"name": "two-pods"}, "spec": {"hard": {"pods": "1"}}}),
        )
        .unwrap();
        let mut first = pod(json!({"metadata": {"name": "a"}}));
        admit_pod(&s, "ns", &mut first).unwrap();
        s.create("pods", "ns", first).unwrap();
        let e = admit_pod(&s, "ns", &mut pod(json!({}))).unwrap_err();
        assert_eq!(
            e.message,
            "pods \"job-\" is forbidden: exceeded quota: two-pods, requested: pods=1, used: pods=1, limited: pods=1"
        );
        s.create(
            "resourcequotas",
            "ns",
            json!({"metadata": {"name": "compute"}, "spec": {"hard": {"limits.cpu": "4"}}}),
        )
        .unwrap();
        s.remove("resourcequotas", "ns", "two-pods");
        let e = admit_pod(&s, "ns", &mut pod(json!({}))).unwrap_err();
        assert_eq!(
            e.message,
            "pods \"job-\" is forbidden: failed quota: compute: must specify limits.cpu for: kinetic-worker"
        );
    }
}
