//! `kinetic doctor`: a preflight before a first job — credentials, APIs,
//! the cluster reachable through the kubeconfig context jobs use, the
//! service account and its Workload Identity binding, a pool for the
//! accelerator, bucket and registry access — one [`Check`] each, pass or
//! fail, with the fix. The adapter gathers the facts; this judges them.

use serde::Serialize;

use super::status::infra_checks;
use super::{Check, CheckState, Desired, Observed};
use kinetic_core::accelerators::AcceleratorSpec;

/// What the adapter found out besides [`Observed`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct DoctorFacts {
    /// Whether a token for the Google APIs could be had (`Ok`: where it
    /// came from; `Err`: why not).
    pub credentials: Option<Result<String, String>>,
    /// Whether the project can be read (`Ok`: its number or state).
    pub project: Option<Result<String, String>>,
    /// Pieces that could not be read, with the error (permission denied…).
    pub unreadable: Vec<(String, String)>,
    /// The cluster's API through the kubeconfig context jobs use: `Ok`
    /// with the server version, `Err` with the failure; `None` when there
    /// is no context to try.
    pub kube_api: Option<Result<String, String>>,
    /// Whether the caller may read and write each bucket's objects
    /// (bucket, `Err` naming the missing permissions).
    pub bucket_access: Vec<(String, Result<(), String>)>,
    /// Whether the caller may push and pull images in the repository.
    pub registry_access: Option<Result<(), String>>,
    /// The accelerator the user means to run on, if any.
    pub accelerator: Option<AcceleratorSpec>,
}

fn from_fact(what: &str, fact: Option<&Result<String, String>>, fix: &str) -> Option<Check> {
    fact.map(|r| match r {
        Ok(detail) => Check::pass(what, detail.clone()),
        Err(e) => Check::fail(what, e.clone(), fix),
    })
}

/// Every check, in the order a user fixes them: credentials and project,
/// then the infrastructure `up` provisions, then what jobs need at run
/// time.
pub fn doctor(desired: &Desired, observed: &Observed, facts: &DoctorFacts) -> Vec<Check> {
    let checks = all_checks(desired, observed, facts);
    // Without credentials or the project nothing else was read: what the
    // others would say is not known, and the one fix that unblocks them
    // is the blocker's.
    let blocker = checks
        .iter()
        .take(2)
        .find(|c| c.state == CheckState::Fail && is_gate(c, desired))
        .map(|c| c.what.clone());
    match blocker {
        None => checks,
        Some(blocker) => checks
            .into_iter()
            .map(|c| {
                // The blocker itself, and a gate that passed, stay as they are.
                let kept = (c.state == CheckState::Fail && c.what == blocker)
                    || (c.state == CheckState::Pass && is_gate(&c, desired));
                if kept {
                    c
                } else {
                    Check::not_run(c.what, &blocker)
                }
            })
            .collect(),
    }
}

/// The checks every other depends on: the credentials and the project.
fn is_gate(c: &Check, desired: &Desired) -> bool {
    c.what == CREDENTIALS || c.what == project_check(desired)
}

const CREDENTIALS: &str = "Google credentials";

fn project_check(desired: &Desired) -> String {
    format!("project {}", desired.target.project)
}

fn all_checks(desired: &Desired, observed: &Observed, facts: &DoctorFacts) -> Vec<Check> {
    let target = &desired.target;
    let mut checks = Vec::new();
    checks.extend(from_fact(
        CREDENTIALS,
        facts.credentials.as_ref(),
        "gcloud auth application-default login (or set GOOGLE_APPLICATION_CREDENTIALS to a service-account key)",
    ));
    checks.extend(from_fact(
        &project_check(desired),
        facts.project.as_ref(),
        "check the project id (--project, KINETIC_PROJECT or the profile) and that your account can see it",
    ));
    for (what, error) in &facts.unreadable {
        checks.push(Check::fail(
            format!("reading {what}"),
            error.clone(),
            "grant your account read access (roles/viewer on the project), then run kinetic doctor again",
        ));
    }
    checks.extend(infra_checks(desired, observed));
    if let Some(r) = &facts.kube_api {
        let what = format!(
            "cluster API through kubeconfig context {}",
            desired.kube.context
        );
        checks.push(match r {
            Ok(version) => Check::pass(what, format!("reachable (Kubernetes {version})")),
            Err(e) => Check::fail(
                what,
                e.clone(),
                format!(
                    "kinetic up (rewrites the context), or: gcloud container clusters get-credentials {} --zone {} --project {}",
                    target.cluster, target.zone, target.project
                ),
            ),
        });
    }
    for (bucket, access) in &facts.bucket_access {
        let what = format!("access to gs://{bucket}");
        checks.push(match access {
            Ok(()) => Check::pass(what, "objects can be read and written"),
            Err(e) => Check::fail(
                what,
                e.clone(),
                format!(
                    "grant your account roles/storage.objectAdmin on gs://{bucket} (gcloud storage buckets add-iam-policy-binding gs://{bucket} --member=user:YOU --role=roles/storage.objectAdmin)"
                ),
            ),
        });
    }
    if let Some(access) = &facts.registry_access {
        let what = format!("access to {}", target.names.registry_prefix);
        checks.push(match access {
            Ok(()) => Check::pass(what, "images can be read and pushed"),
            Err(e) => Check::fail(
                what,
                e.clone(),
                "grant your account roles/artifactregistry.writer on the repository",
            ),
        });
    }
    let pools = observed.cluster.iter().flat_map(|c| &c.pools);
    match &facts.accelerator {
        Some(AcceleratorSpec::Cpu { .. }) | None if observed.cluster.is_some() => {
            let names: Vec<String> = pools
                .filter(|p| p.accelerator.is_some())
                .map(|p| {
                    format!(
                        "{} ({})",
                        p.name,
                        p.accelerator
                            .as_ref()
                            .map(ToString::to_string)
                            .unwrap_or_default()
                    )
                })
                .collect();
            checks.push(Check::pass(
                "node pools",
                if names.is_empty() {
                    "CPU jobs run on the default pool; no accelerator pool yet".to_owned()
                } else {
                    format!(
                        "CPU jobs run on the default pool; accelerator pools: {}",
                        names.join(", ")
                    )
                },
            ));
        }
        Some(accel) if !matches!(accel, AcceleratorSpec::Cpu { .. }) => {
            let what = format!("node pool for {accel}");
            let found = pools
                .into_iter()
                .find(|p| p.accelerator.as_ref() == Some(accel));
            let add = format!(
                "kinetic pool add --accelerator {}{}",
                super::accelerator_label(accel),
                if accel.spot() { " --spot" } else { "" }
            );
            checks.push(match found {
                Some(p) if p.status.is_usable() => Check::pass(
                    what,
                    format!(
                        "{} ({}, {} nodes now)",
                        p.name,
                        p.status,
                        p.nodes
                            .map_or("?".to_owned(), |(_, total)| total.to_string())
                    ),
                ),
                Some(p) => Check::fail(what, format!("{} is {}", p.name, p.status), add),
                None => Check::fail(what, "no pool has this accelerator", add),
            });
        }
        _ => {}
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::InfraTarget;

    #[test]
    fn facts_become_checks_with_fixes() {
        let t = InfraTarget::new("my-proj", "us-central1-a", "c1", "default").unwrap();
        let d = Desired::new(&t);
        let facts = DoctorFacts {
            credentials: Some(Err("no credentials found".into())),
            accelerator: Some(AcceleratorSpec::parse("l4").unwrap()),
            ..DoctorFacts::default()
        };
        let checks = doctor(&d, &Observed::default(), &facts);
        assert!(!checks[0].ok);
        assert!(
            checks[0]
                .fix
                .as_deref()
                .unwrap()
                .contains("application-default login")
        );
        // Without credentials nothing else was read: the rest is not run.
        assert!(
            checks[1..].iter().all(|c| c.state == CheckState::NotRun
                && c.detail == "not run: needs Google credentials"),
            "{checks:?}"
        );
        let facts = DoctorFacts {
            credentials: Some(Ok("a token".into())),
            project: Some(Ok("ACTIVE".into())),
            accelerator: Some(AcceleratorSpec::parse("l4").unwrap()),
            ..DoctorFacts::default()
        };
        let checks = doctor(&d, &Observed::default(), &facts);
        assert!(
            checks
                .iter()
                .any(|c| c.what.starts_with("GKE cluster c1") && !c.ok)
        );
        let pool = checks
            .iter()
            .find(|c| c.what == "node pool for gpu:l4")
            .unwrap();
        assert_eq!(
            pool.fix.as_deref(),
            Some("kinetic pool add --accelerator gpu-l4")
        );
        assert!(checks.iter().all(|c| c.ok || c.fix.is_some()));
    }
}
