//! A batch/v1 Job's `podFailurePolicy`, as the API server validates it
//! (`pkg/apis/batch/validation`: `validatePodFailurePolicy`, the
//! template's `restartPolicy`) and the Job controller applies it
//! (`pkg/controller/job/pod_failure_policy.go`: `matchPodFailurePolicy`).
//!
//! - Validation happens on create, with a 422 `Invalid` Status listing
//!   each cause with its field path, in the server's words. A pattern's
//!   `status` defaults to `True` first, as `SetDefaults_Job` does.
//! - Matching looks at a pod once it is terminal (`Failed`): the rules in
//!   order, the first that matches decides. `onExitCodes` looks at the
//!   terminated app containers, then the init containers, skipping exit
//!   code 0; `onPodConditions` at the pod's conditions (type and status).
//!   `Ignore`: the failure is not counted against `backoffLimit`;
//!   `Count`: it is; `FailJob`: it is, and the Job fails at once with
//!   reason `PodFailurePolicy` and the rule's message; `FailIndex`: it
//!   is, and the pod's index fails at once (an Indexed Job with
//!   `backoffLimitPerIndex`, the only kind the server lets have the rule).
//! - The same admission checks the completion mode fields as
//!   `ValidateJobSpec` does: `backoffLimitPerIndex` and `maxFailedIndexes`
//!   only in Indexed mode and non-negative, `maxFailedIndexes` only with
//!   `backoffLimitPerIndex` and at most `completions`, `completions`
//!   required in Indexed mode, and the 100,000 and 10,000 limits.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::meta::name_of;
use super::store::{Admission, ApiError, Phase, Write};

/// Most rules in a policy.
const MAX_RULES: usize = 20;
/// Most patterns in a rule's `onPodConditions`.
const MAX_PATTERNS: usize = 20;
/// Most values in a rule's `onExitCodes`.
const MAX_VALUES: usize = 255;

const ACTIONS: &[&str] = &["Count", "FailIndex", "FailJob", "Ignore"];
const OPERATORS: &[&str] = &["In", "NotIn"];
const STATUSES: &[&str] = &["False", "True", "Unknown"];

/// One field error: its reason (`FieldValueInvalid`), field path and
/// message body, as `field.Error` gives them.
type Cause = (&'static str, String, String);

fn quoted(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| format!("\"{v}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

fn required(field: String, detail: &str) -> Cause {
    (
        "FieldValueRequired",
        field,
        format!("Required value: {detail}"),
    )
}

fn not_supported(field: String, value: &Value, supported: &[&str]) -> Cause {
    (
        "FieldValueNotSupported",
        field,
        format!(
            "Unsupported value: {}: supported values: {}",
            go_value(value),
            quoted(supported)
        ),
    )
}

fn invalid(field: String, value: Option<String>, detail: &str) -> Cause {
    let body = match value {
        Some(v) => format!("Invalid value: {v}: {detail}"),
        None => format!("Invalid value: {detail}"),
    };
    ("FieldValueInvalid", field, body)
}

fn too_many(field: String, have: usize, most: usize) -> Cause {
    (
        "FieldValueTooMany",
        field,
        format!("Too many: {have}: must have at most {most} items"),
    )
}

/// A value as Go's field errors print it: strings quoted, numbers bare.
fn go_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("\"{s}\""),
        other => other.to_string(),
    }
}

fn int32_list(values: &[i64]) -> String {
    let inner: Vec<String> = values.iter().map(i64::to_string).collect();
    format!("[]int32{{{}}}", inner.join(", "))
}

/// A qualified name's name part (no prefix handling beyond one `/`).
fn qualified_name_errors(name: &str) -> Option<&'static str> {
    let part = name.rsplit_once('/').map_or(name, |(_, n)| n);
    if part.is_empty() {
        return Some("name part must be non-empty");
    }
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let edges = part.starts_with(|c: char| c.is_ascii_alphanumeric())
        && part.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !part.chars().all(ok_char) || !edges {
        return Some(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        );
    }
    None
}

/// [`admit_job`] as the store runs it: on a Job created through the API.
pub(crate) const JOB_ADMISSION: Admission = Admission {
    resource: "jobs.batch",
    phase: Phase::Mutating,
    writes: &[Write::Create],
    admit: |_, _, job| admit_job(job),
    patched: None,
};

/// Default what the server defaults (a pattern's `status`: `True`), then
/// validate the Job's template `restartPolicy` and `podFailurePolicy`.
pub(crate) fn admit_job(job: &mut Value) -> Result<(), ApiError> {
    if let Some(Value::Array(rules)) = job.pointer_mut("/spec/podFailurePolicy/rules") {
        for rule in rules {
            if let Some(Value::Array(patterns)) = rule.get_mut("onPodConditions") {
                for p in patterns {
                    if p.get("status").is_none_or(|s| s.is_null() || s == "") {
                        p["status"] = json!("True");
                    }
                }
            }
        }
    }
    let causes = validate(job);
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid("Job", "batch", name_of(job), &causes))
}

fn validate(job: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = job.get("spec").cloned().unwrap_or(json!({}));
    validate_indexed(&spec, &mut causes);
    let policy = spec.get("podFailurePolicy").filter(|p| !p.is_null());
    if let Some(policy) = policy {
        validate_policy(&spec, policy, &mut causes);
    }
    let restart_field = "spec.template.spec.restartPolicy".to_owned();
    match spec
        .pointer("/template/spec/restartPolicy")
        .and_then(Value::as_str)
    {
        None | Some("" | "Always") => causes.push(required(
            restart_field,
            "valid values: \"OnFailure\", \"Never\"",
        )),
        Some("OnFailure") if policy.is_some() => causes.push(invalid(
            restart_field,
            Some("\"OnFailure\"".into()),
            "only \"Never\" is supported when podFailurePolicy is specified",
        )),
        Some("OnFailure" | "Never") => {}
        Some(other) => causes.push(not_supported(
            restart_field,
            &json!(other),
            &["OnFailure", "Never"],
        )),
    }
    causes
}

/// Most `parallelism` and `maxFailedIndexes` of an Indexed Job.
const MAX_INDEXED: i64 = 100_000;
/// Above this many completions, `backoffLimitPerIndex` asks for
/// `maxFailedIndexes` and bounds it and `parallelism` to
/// [`LIMIT_HIGH_COMPLETIONS`].
const COMPLETIONS_SOFT_LIMIT: i64 = 100_000;
const LIMIT_HIGH_COMPLETIONS: i64 = 10_000;

/// The completion mode fields of `ValidateJobSpec`, in its order:
/// non-negative counts, `maxFailedIndexes` only with
/// `backoffLimitPerIndex`, `completionMode` one of the two, an Indexed Job
/// with `completions` and within the limits, `backoffLimitPerIndex` and
/// `maxFailedIndexes` only in Indexed mode.
fn validate_indexed(spec: &Value, causes: &mut Vec<Cause>) {
    let int = |key: &str| spec.get(key).and_then(Value::as_i64);
    let nonnegative = |key: &str, causes: &mut Vec<Cause>| {
        if let Some(v) = int(key).filter(|v| *v < 0) {
            causes.push(invalid(
                format!("spec.{key}"),
                Some(v.to_string()),
                "must be greater than or equal to 0",
            ));
        }
    };
    for key in ["parallelism", "completions", "backoffLimitPerIndex"] {
        nonnegative(key, causes);
    }
    let per_index = int("backoffLimitPerIndex");
    let max_failed = int("maxFailedIndexes");
    if max_failed.is_some() {
        nonnegative("maxFailedIndexes", causes);
        if per_index.is_none() {
            causes.push(required(
                "spec.backoffLimitPerIndex".to_owned(),
                "when maxFailedIndexes is specified",
            ));
        }
    }
    let mode = spec.get("completionMode").filter(|m| !m.is_null());
    let indexed = mode.and_then(Value::as_str) == Some("Indexed");
    if let Some(m) = mode
        && !matches!(m.as_str(), Some("NonIndexed" | "Indexed"))
    {
        causes.push(not_supported(
            "spec.completionMode".to_owned(),
            m,
            &["NonIndexed", "Indexed"],
        ));
    }
    if indexed {
        let completions = int("completions");
        if completions.is_none() {
            causes.push(required(
                "spec.completions".to_owned(),
                "when completion mode is Indexed",
            ));
        }
        if let Some(p) = int("parallelism").filter(|p| *p > MAX_INDEXED) {
            causes.push(invalid(
                "spec.parallelism".to_owned(),
                Some(p.to_string()),
                &format!(
                    "must be less than or equal to {MAX_INDEXED} when completion mode is Indexed"
                ),
            ));
        }
        if let (Some(c), Some(m)) = (completions, max_failed)
            && m > c
        {
            causes.push(invalid(
                "spec.maxFailedIndexes".to_owned(),
                Some(m.to_string()),
                "must be less than or equal to completions",
            ));
        }
        if let Some(m) = max_failed.filter(|m| *m > MAX_INDEXED) {
            causes.push(invalid(
                "spec.maxFailedIndexes".to_owned(),
                Some(m.to_string()),
                &format!("must be less than or equal to {MAX_INDEXED}"),
            ));
        }
        if completions.is_some_and(|c| c > COMPLETIONS_SOFT_LIMIT) && per_index.is_some() {
            let high = format!(
                "must be less than or equal to {LIMIT_HIGH_COMPLETIONS} when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
            );
            if max_failed.is_none() {
                causes.push(required(
                    "spec.maxFailedIndexes".to_owned(),
                    &format!(
                        "must be specified when completions is above {COMPLETIONS_SOFT_LIMIT}"
                    ),
                ));
            }
            if let Some(p) = int("parallelism").filter(|p| *p > LIMIT_HIGH_COMPLETIONS) {
                causes.push(invalid(
                    "spec.parallelism".to_owned(),
                    Some(p.to_string()),
                    &high,
                ));
            }
            if let Some(m) = max_failed.filter(|m| *m > LIMIT_HIGH_COMPLETIONS) {
                causes.push(invalid(
                    "spec.maxFailedIndexes".to_owned(),
                    Some(m.to_string()),
                    &high,
                ));
            }
        }
    } else {
        for (key, v) in [
            ("backoffLimitPerIndex", per_index),
            ("maxFailedIndexes", max_failed),
        ] {
            if let Some(v) = v {
                causes.push(invalid(
                    format!("spec.{key}"),
                    Some(v.to_string()),
                    "requires indexed completion mode",
                ));
            }
        }
    }
}

fn validate_policy(spec: &Value, policy: &Value, causes: &mut Vec<Cause>) {
    let rules = policy
        .get("rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let rules_path = "spec.podFailurePolicy.rules";
    if rules.len() > MAX_RULES {
        causes.push(too_many(rules_path.to_owned(), rules.len(), MAX_RULES));
    }
    let mut containers = BTreeSet::new();
    for list in ["containers", "initContainers"] {
        for c in spec
            .pointer(&format!("/template/spec/{list}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(n) = c.get("name").and_then(Value::as_str) {
                containers.insert(n.to_owned());
            }
        }
    }
    for (i, rule) in rules.iter().enumerate() {
        let path = format!("{rules_path}[{i}]");
        let action = rule.get("action").and_then(Value::as_str).unwrap_or("");
        match action {
            "" => causes.push(required(
                format!("{path}.action"),
                &format!("valid values: {}", quoted(ACTIONS)),
            )),
            "FailIndex" if spec.get("backoffLimitPerIndex").is_none_or(Value::is_null) => {
                causes.push(invalid(
                    format!("{path}.action"),
                    Some("\"FailIndex\"".into()),
                    "requires the backoffLimitPerIndex to be set",
                ));
            }
            a if !ACTIONS.contains(&a) => {
                causes.push(not_supported(format!("{path}.action"), &json!(a), ACTIONS));
            }
            _ => {}
        }
        let exit_codes = rule.get("onExitCodes").filter(|v| !v.is_null());
        let conditions = rule
            .get("onPodConditions")
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty());
        if let Some(req) = exit_codes {
            validate_exit_codes(req, &format!("{path}.onExitCodes"), &containers, causes);
        }
        if let Some(patterns) = conditions {
            validate_patterns(patterns, &format!("{path}.onPodConditions"), causes);
        }
        match (exit_codes.is_some(), conditions.is_some()) {
            (true, true) => causes.push(invalid(
                path,
                None,
                "specifying both OnExitCodes and OnPodConditions is not supported",
            )),
            (false, false) => causes.push(invalid(
                path,
                None,
                "specifying one of OnExitCodes and OnPodConditions is required",
            )),
            _ => {}
        }
    }
}

fn validate_patterns(patterns: &[Value], path: &str, causes: &mut Vec<Cause>) {
    if patterns.len() > MAX_PATTERNS {
        causes.push(too_many(path.to_owned(), patterns.len(), MAX_PATTERNS));
    }
    for (j, p) in patterns.iter().enumerate() {
        let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
        if let Some(why) = qualified_name_errors(kind) {
            causes.push(invalid(
                format!("{path}[{j}].type"),
                Some(format!("\"{kind}\"")),
                why,
            ));
        }
        let status = p.get("status").and_then(Value::as_str).unwrap_or("");
        if status.is_empty() {
            causes.push(required(
                format!("{path}[{j}].status"),
                &format!("valid values: {}", quoted(STATUSES)),
            ));
        } else if !STATUSES.contains(&status) {
            causes.push(not_supported(
                format!("{path}[{j}].status"),
                &json!(status),
                STATUSES,
            ));
        }
    }
}

fn validate_exit_codes(
    req: &Value,
    path: &str,
    containers: &BTreeSet<String>,
    causes: &mut Vec<Cause>,
) {
    let operator = req.get("operator").and_then(Value::as_str).unwrap_or("");
    if operator.is_empty() {
        causes.push(required(
            format!("{path}.operator"),
            &format!("valid values: {}", quoted(OPERATORS)),
        ));
    } else if !OPERATORS.contains(&operator) {
        causes.push(not_supported(
            format!("{path}.operator"),
            &json!(operator),
            OPERATORS,
        ));
    }
    if let Some(name) = req.get("containerName").and_then(Value::as_str)
        && !containers.contains(name)
    {
        causes.push(invalid(
            format!("{path}.containerName"),
            Some(format!("\"{name}\"")),
            "must be one of the container or initContainer names in the pod template",
        ));
    }
    let given = req.get("values").and_then(Value::as_array);
    let values: Vec<i64> = given
        .into_iter()
        .flatten()
        .filter_map(Value::as_i64)
        .collect();
    let values_path = format!("{path}.values");
    if values.is_empty() {
        // Go prints a missing list as nil, an empty one as `{}`.
        let shown = if given.is_some() {
            "[]int32{}"
        } else {
            "[]int32(nil)"
        };
        causes.push(invalid(
            values_path.clone(),
            Some(shown.into()),
            "at least one value is required",
        ));
    } else if values.len() > MAX_VALUES {
        causes.push(too_many(values_path.clone(), values.len(), MAX_VALUES));
    }
    let mut seen = BTreeSet::new();
    for (j, v) in values.iter().enumerate() {
        if operator == "In" && *v == 0 {
            causes.push(invalid(
                format!("{values_path}[{j}]"),
                Some("0".into()),
                "must not be 0 for the In operator",
            ));
        }
        if !seen.insert(*v) {
            causes.push((
                "FieldValueDuplicate",
                format!("{values_path}[{j}]"),
                format!("Duplicate value: {v}"),
            ));
        }
    }
    if values.windows(2).any(|w| w[0] > w[1]) {
        causes.push(invalid(
            values_path,
            Some(int32_list(&values)),
            "must be ordered",
        ));
    }
}

/// What the policy does with a failed pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Not counted against `backoffLimit`; a replacement is created.
    Ignore,
    /// Counted (also when no rule matches).
    Count,
    /// Counted, and the Job fails with this message.
    FailJob(String),
    /// Counted, and the pod's index fails at once (an Indexed Job with
    /// `backoffLimitPerIndex`: the API server refuses the action without).
    FailIndex,
}

/// The first of the Job's rules that matches the terminal failed `pod`
/// decides; no policy or no match counts the failure.
pub(crate) fn match_pod(job: &Value, pod: &Value) -> Action {
    let Some(rules) = job
        .pointer("/spec/podFailurePolicy/rules")
        .and_then(Value::as_array)
    else {
        return Action::Count;
    };
    let ns = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = name_of(pod);
    for (index, rule) in rules.iter().enumerate() {
        let action = rule.get("action").and_then(Value::as_str).unwrap_or("");
        let matched = if let Some(req) = rule.get("onExitCodes").filter(|v| !v.is_null()) {
            exit_code_match(pod, req).map(|(container, code)| {
                format!(
                    "Container {container} for pod {ns}/{name} failed with exit code {code} matching {action} rule at index {index}"
                )
            })
        } else if let Some(patterns) = rule.get("onPodConditions").and_then(Value::as_array) {
            condition_match(pod, patterns).map(|kind| {
                format!(
                    "Pod {ns}/{name} has condition {kind} matching {action} rule at index {index}"
                )
            })
        } else {
            None
        };
        let Some(message) = matched else { continue };
        match action {
            "Ignore" => return Action::Ignore,
            "Count" => return Action::Count,
            "FailJob" => return Action::FailJob(message),
            "FailIndex" => return Action::FailIndex,
            // An action this controller does not know: skip the rule.
            _ => continue,
        }
    }
    Action::Count
}

/// The first terminated container (app, then init) with a non-zero exit
/// code the requirement matches: its name and code.
fn exit_code_match(pod: &Value, req: &Value) -> Option<(String, i64)> {
    let operator = req.get("operator").and_then(Value::as_str)?;
    let values: Vec<i64> = req
        .get("values")
        .and_then(Value::as_array)?
        .iter()
        .filter_map(Value::as_i64)
        .collect();
    let only = req.get("containerName").and_then(Value::as_str);
    for list in ["containerStatuses", "initContainerStatuses"] {
        for c in pod
            .pointer(&format!("/status/{list}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(code) = c
                .pointer("/state/terminated/exitCode")
                .and_then(Value::as_i64)
            else {
                continue;
            };
            let cname = c.get("name").and_then(Value::as_str).unwrap_or_default();
            if code == 0 || only.is_some_and(|o| o != cname) {
                continue;
            }
            let listed = values.contains(&code);
            let hit = match operator {
                "In" => listed,
                "NotIn" => !listed,
                _ => false,
            };
            if hit {
                return Some((cname.to_owned(), code));
            }
        }
    }
    None
}

/// The type of the first pod condition one of `patterns` matches.
fn condition_match(pod: &Value, patterns: &[Value]) -> Option<String> {
    for c in pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for p in patterns {
            if c.get("type") == p.get("type") && c.get("status") == p.get("status") {
                return c.get("type").and_then(Value::as_str).map(str::to_owned);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(policy: Value) -> Value {
        json!({
            "metadata": {"name": "j", "namespace": "default"},
            "spec": {
                "backoffLimit": 0,
                "podFailurePolicy": policy,
                "template": {"spec": {"restartPolicy": "Never",
                                      "containers": [{"name": "kinetic-worker"}]}},
            },
        })
    }

    fn refused(mut j: Value) -> ApiError {
        admit_job(&mut j).expect_err("refused")
    }

    fn failed_pod(code: i64, conditions: Value) -> Value {
        json!({
            "metadata": {"name": "j-abc", "namespace": "default"},
            "status": {
                "phase": "Failed",
                "conditions": conditions,
                "containerStatuses": [{"name": "kinetic-worker",
                                       "state": {"terminated": {"exitCode": code}}}],
            },
        })
    }

    fn disruption() -> Value {
        json!([{"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}])
    }

    #[test]
    fn a_valid_policy_is_admitted_and_pattern_status_defaults_to_true() {
        let mut j = job(json!({"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1, 42]}},
            {"action": "Count", "onExitCodes": {"containerName": "kinetic-worker", "operator": "NotIn", "values": [0]}},
        ]}));
        admit_job(&mut j).unwrap();
        assert_eq!(
            j["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"],
            "True"
        );
    }

    #[test]
    fn a_policy_needs_restart_policy_never() {
        let mut j = job(
            json!({"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}),
        );
        j["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure");
        let e = refused(j);
        assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
        assert_eq!(
            e.message,
            "Job.batch \"j\" is invalid: spec.template.spec.restartPolicy: Invalid value: \"OnFailure\": only \"Never\" is supported when podFailurePolicy is specified"
        );
        // Any Job needs OnFailure or Never.
        let mut plain = job(Value::Null);
        plain["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
        assert!(
            refused(plain).message.ends_with(
                "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
            )
        );
    }

    #[test]
    fn rule_shapes_are_checked_with_the_servers_words() {
        let e = refused(job(json!({"rules": [
            {"action": "Ignore"},
            {"action": "Count", "onExitCodes": {"operator": "In", "values": [1]},
             "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "Retry", "onExitCodes": {"operator": "Between", "values": [1]}},
        ]})));
        let causes = e.details.as_ref().unwrap()["causes"]
            .as_array()
            .unwrap()
            .clone();
        let said: Vec<String> = causes
            .iter()
            .map(|c| {
                format!(
                    "{}: {}",
                    c["field"].as_str().unwrap(),
                    c["message"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(
            said,
            [
                "spec.podFailurePolicy.rules[0]: Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
                "spec.podFailurePolicy.rules[1]: Invalid value: specifying both OnExitCodes and OnPodConditions is not supported",
                "spec.podFailurePolicy.rules[2].action: Unsupported value: \"Retry\": supported values: \"Count\", \"FailIndex\", \"FailJob\", \"Ignore\"",
                "spec.podFailurePolicy.rules[2].onExitCodes.operator: Unsupported value: \"Between\": supported values: \"In\", \"NotIn\"",
            ]
        );
        assert!(
            e.message.starts_with("Job.batch \"j\" is invalid: ["),
            "{}",
            e.message
        );
    }

    #[test]
    fn exit_code_values_are_checked() {
        let e = refused(job(json!({"rules": [
            {"action": "FailJob", "onExitCodes": {"containerName": "other", "operator": "In", "values": [0, 3, 3, 2]}},
            {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": []}},
        ]})));
        for want in [
            "spec.podFailurePolicy.rules[0].onExitCodes.containerName: Invalid value: \"other\": must be one of the container or initContainer names in the pod template",
            "spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In operator",
            "spec.podFailurePolicy.rules[0].onExitCodes.values[2]: Duplicate value: 3",
            "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: []int32{0, 3, 3, 2}: must be ordered",
            "spec.podFailurePolicy.rules[1].onExitCodes.values: Invalid value: []int32{}: at least one value is required",
        ] {
            assert!(e.message.contains(want), "{want}\nnot in {}", e.message);
        }
    }

    #[test]
    fn fail_index_is_refused_on_a_job_without_a_per_index_limit() {
        let e = refused(job(json!({"rules": [
            {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}},
        ]})));
        assert!(e.message.ends_with(
            "spec.podFailurePolicy.rules[0].action: Invalid value: \"FailIndex\": requires the backoffLimitPerIndex to be set"
        ), "{}", e.message);
        let e = refused(job(json!({"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "", "status": "Maybe"}]},
        ]})));
        assert!(
            e.message.contains(
                "onPodConditions[0].type: Invalid value: \"\": name part must be non-empty"
            ),
            "{}",
            e.message
        );
        assert!(e.message.contains("onPodConditions[0].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\""), "{}", e.message);
    }

    #[test]
    fn indexed_limits_are_checked_in_the_servers_order_and_words() {
        let mut j = job(Value::Null);
        j["spec"]["completionMode"] = json!("Indexed");
        j["spec"]["completions"] = json!(200_000);
        j["spec"]["parallelism"] = json!(100_001);
        j["spec"]["backoffLimitPerIndex"] = json!(1);
        let e = refused(j.clone());
        assert_eq!(
            e.message,
            "Job.batch \"j\" is invalid: [spec.parallelism: Invalid value: 100001: must be less than or equal to 100000 when completion mode is Indexed, spec.maxFailedIndexes: Required value: must be specified when completions is above 100000, spec.parallelism: Invalid value: 100001: must be less than or equal to 10000 when completions are above 100000 and used with backoff limit per index]"
        );
        j["spec"]["parallelism"] = json!(10_000);
        j["spec"]["maxFailedIndexes"] = json!(10_001);
        assert_eq!(
            refused(j.clone()).message,
            "Job.batch \"j\" is invalid: spec.maxFailedIndexes: Invalid value: 10001: must be less than or equal to 10000 when completions are above 100000 and used with backoff limit per index"
        );
        j["spec"]["maxFailedIndexes"] = json!(10_000);
        admit_job(&mut j).expect("within every limit");
        // A NonIndexed Job takes neither per-index field.
        let mut plain = job(Value::Null);
        plain["spec"]["maxFailedIndexes"] = json!(-1);
        assert_eq!(
            refused(plain).message,
            "Job.batch \"j\" is invalid: [spec.maxFailedIndexes: Invalid value: -1: must be greater than or equal to 0, spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified, spec.maxFailedIndexes: Invalid value: -1: requires indexed completion mode]"
        );
    }

    #[test]
    fn a_fail_index_rule_fails_the_index() {
        let mut j = job(json!({"rules": [
            {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [42]}},
        ]}));
        j["spec"]["backoffLimitPerIndex"] = json!(1);
        assert_eq!(match_pod(&j, &failed_pod(42, json!([]))), Action::FailIndex);
        assert_eq!(match_pod(&j, &failed_pod(1, json!([]))), Action::Count);
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let j = job(json!({"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [137]}},
            {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [42]}},
        ]}));
        // A disrupted pod that exited 137: the first rule wins.
        assert_eq!(
            match_pod(&j, &failed_pod(137, disruption())),
            Action::Ignore
        );
        // Not disrupted, 137: the job fails, in the controller's words.
        assert_eq!(
            match_pod(&j, &failed_pod(137, json!([]))),
            Action::FailJob(
                "Container kinetic-worker for pod default/j-abc failed with exit code 137 matching FailJob rule at index 1".into()
            )
        );
        assert_eq!(match_pod(&j, &failed_pod(1, json!([]))), Action::Count);
        // 42 matches nothing: counted by default.
        assert_eq!(match_pod(&j, &failed_pod(42, json!([]))), Action::Count);
        // No policy: counted.
        assert_eq!(
            match_pod(&job(Value::Null), &failed_pod(1, disruption())),
            Action::Count
        );
    }

    #[test]
    fn exit_code_zero_and_condition_status_never_match() {
        let j = job(json!({"rules": [
            {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [1]}},
            {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "False"}]},
        ]}));
        assert_eq!(match_pod(&j, &failed_pod(0, disruption())), Action::Count);
        assert_eq!(
            match_pod(
                &j,
                &failed_pod(0, json!([{"type": "DisruptionTarget", "status": "False"}]))
            ),
            Action::FailJob(
                "Pod default/j-abc has condition DisruptionTarget matching FailJob rule at index 1"
                    .into()
            )
        );
    }
}
