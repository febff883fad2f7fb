//! The facts `kinetic doctor` judges beyond what [`GcpInfra::observe`]
//! reads: the credentials, the project, the cluster through the
//! kubeconfig context jobs use, and the caller's own access to the buckets
//! and the registry.

use crate::model::DoctorFacts;
use kinetic_core::accelerators::AcceleratorSpec;
use reqwest::Method;
use serde_json::{Value, json};

use crate::http::{ARTIFACT_REGISTRY, RESOURCE_MANAGER, STORAGE};
use crate::{GcpInfra, Observation, kube};

/// What a job needs of a bucket: its objects read and written.
const BUCKET_PERMISSIONS: &[&str] = &[
    "storage.objects.create",
    "storage.objects.delete",
    "storage.objects.get",
    "storage.objects.list",
];

/// What building and running images needs of the repository.
const REGISTRY_PERMISSIONS: &[&str] = &[
    "artifactregistry.repositories.downloadArtifacts",
    "artifactregistry.repositories.uploadArtifacts",
];

fn missing(asked: &[&str], granted: &Value) -> Result<(), String> {
    let held: Vec<&str> = granted["permissions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let lacking: Vec<&str> = asked
        .iter()
        .copied()
        .filter(|p| !held.contains(p))
        .collect();
    if lacking.is_empty() {
        Ok(())
    } else {
        Err(format!("your account lacks {}", lacking.join(", ")))
    }
}

impl GcpInfra {
    /// What `kinetic doctor` judges, for a job on `accelerator`: the
    /// credentials first, and only when a token was issued, the cloud
    /// ([`GcpInfra::observe`]) and the other facts. Without a token
    /// nothing else is asked: every call would look for credentials again
    /// (the metadata server included) and fail the same way, and the
    /// checks that depend on them are not run.
    pub async fn doctor_observe(
        &self,
        accelerator: Option<AcceleratorSpec>,
    ) -> (Observation, DoctorFacts) {
        if let Err(e) = self.rest.token().await {
            let facts = DoctorFacts {
                credentials: Some(Err(e.to_string())),
                accelerator,
                ..DoctorFacts::default()
            };
            let observation = Observation {
                observed: crate::model::Observed::default(),
                unreadable: Vec::new(),
            };
            return (observation, facts);
        }
        let observation = self.observe().await;
        let facts = self.doctor_facts(&observation, accelerator).await;
        (observation, facts)
    }

    /// Gather what `kinetic doctor` checks besides `observation`, for a
    /// job on `accelerator`.
    pub async fn doctor_facts(
        &self,
        observation: &Observation,
        accelerator: Option<AcceleratorSpec>,
    ) -> DoctorFacts {
        let e = &self.config.endpoints;
        let t = &self.desired.target;
        let mut facts = DoctorFacts::default();
        let credentials = self.rest.token().await;
        facts.credentials = Some(
            credentials
                .as_ref()
                .map(|_| "a token for the Google APIs was issued".to_owned())
                .map_err(ToString::to_string),
        );
        if credentials.is_ok() {
            let url = format!("{}/v1/projects/{}", e.resourcemanager, t.project);
            facts.project = Some(
                self.rest
                    .send(
                        RESOURCE_MANAGER,
                        &format!("reading project {}", t.project),
                        Method::GET,
                        &url,
                        None,
                        &[],
                    )
                    .await
                    .map(|a| {
                        format!(
                            "{}, number {}",
                            a.body["lifecycleState"].as_str().unwrap_or("ACTIVE"),
                            a.body["projectNumber"].as_str().unwrap_or("?")
                        )
                    })
                    .map_err(|e| e.to_string()),
            );
        }
        facts.unreadable = observation
            .unreadable
            .iter()
            .map(|(what, e)| (what.clone(), e.to_string()))
            .collect();
        let o = &observation.observed;
        if o.kubeconfig
            .as_ref()
            .is_some_and(|k| k.context_server.is_some())
        {
            facts.kube_api = Some(self.kubeconfig_version().await);
        }
        for bucket in o.buckets.keys() {
            let permissions: String = BUCKET_PERMISSIONS
                .iter()
                .map(|p| format!("&permissions={p}"))
                .collect();
            let url = format!(
                "{}/storage/v1/b/{bucket}/iam/testPermissions?{}",
                e.storage,
                &permissions[1..]
            );
            let access = self
                .rest
                .send(
                    STORAGE,
                    &format!("testing access to gs://{bucket}"),
                    Method::GET,
                    &url,
                    None,
                    &[],
                )
                .await
                .map_err(|e| e.to_string())
                .and_then(|a| missing(BUCKET_PERMISSIONS, &a.body));
            facts.bucket_access.push((bucket.clone(), access));
        }
        if o.repository {
            let url = format!(
                "{}/v1/{}:testIamPermissions",
                e.artifactregistry,
                t.repository_path()
            );
            let body = json!({"permissions": REGISTRY_PERMISSIONS});
            facts.registry_access = Some(
                self.rest
                    .send(
                        ARTIFACT_REGISTRY,
                        "testing access to the image repository",
                        Method::POST,
                        &url,
                        Some(&body),
                        &[],
                    )
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|a| missing(REGISTRY_PERMISSIONS, &a.body)),
            );
        }
        facts.accelerator = accelerator;
        facts
    }

    /// The cluster's version through the kubeconfig context jobs use (its
    /// credential plugin included).
    async fn kubeconfig_version(&self) -> Result<String, String> {
        let path = self.kubeconfig_path().map_err(|e| e.to_string())?;
        let kc = ::kube::config::Kubeconfig::read_from(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let options = ::kube::config::KubeConfigOptions {
            context: Some(self.desired.kube.context.clone()),
            ..Default::default()
        };
        let config = ::kube::Config::from_custom_kubeconfig(kc, &options)
            .await
            .map_err(|e| format!("the context cannot be used: {e}"))?;
        let client = ::kube::Client::try_from(config).map_err(|e| e.to_string())?;
        kube::version(&client).await.map_err(|e| e.to_string())
    }
}
