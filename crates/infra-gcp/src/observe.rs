//! Reading the infrastructure back: each piece `kinetic up` provisions,
//! through the API that owns it. An API that is not enabled owns nothing
//! yet, so its pieces are absent without a call; a piece that cannot be
//! read is reported with the error, next to everything that could.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{
    KubeconfigState, Observed, ObservedBucket, ObservedCluster, ObservedPool, Resource,
    ResourceStatus, accelerator_of_pool, cluster_url,
};
use reqwest::Method;
use serde_json::{Value, json};

use crate::error::InfraError;
use crate::http::{
    ARTIFACT_REGISTRY, CONTAINER, IAM, RESOURCE_MANAGER, SERVICE_USAGE, STORAGE, Service,
};
use crate::kubeconfig::{self, ClusterAccess};
use crate::{GcpInfra, kube};

/// What [`GcpInfra::observe`] found, and what it could not read.
#[derive(Debug)]
#[non_exhaustive]
pub struct Observation {
    /// Everything that could be read.
    pub observed: Observed,
    /// What could not be read (`"bucket gs://…"`), with why.
    pub unreadable: Vec<(String, InfraError)>,
}

impl Observation {
    /// The observed infrastructure, if every piece could be read.
    ///
    /// # Errors
    /// The first piece that could not be read, with its error.
    pub fn complete(self) -> Result<Observed, InfraError> {
        match self.unreadable.into_iter().next() {
            None => Ok(self.observed),
            Some((_, e)) => Err(e),
        }
    }
}

/// The bindings of a policy body: role → members (unconditional only).
pub(crate) fn bindings(policy: &Value) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for b in policy["bindings"].as_array().into_iter().flatten() {
        if b.get("condition").is_some() {
            continue;
        }
        if let Some(role) = b["role"].as_str() {
            out.entry(role.to_owned()).or_default().extend(
                b["members"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_owned),
            );
        }
    }
    out
}

/// The age of a bucket's `Delete` rule whose only condition is an age.
pub(crate) fn ttl_days(bucket: &Value) -> Option<u32> {
    bucket
        .pointer("/lifecycle/rule")?
        .as_array()?
        .iter()
        .find_map(|r| {
            let condition = r["condition"].as_object()?;
            (r.pointer("/action/type")? == "Delete" && condition.len() == 1)
                .then(|| condition.get("age")?.as_u64())
                .flatten()
                .and_then(|a| u32::try_from(a).ok())
        })
}

fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
        .collect()
}

/// A node pool as GKE returns it.
pub(crate) fn pool_of(p: &Value) -> ObservedPool {
    let config = &p["config"];
    let machine_type = config["machineType"].as_str().unwrap_or_default();
    let gpu = config["accelerators"].get(0).and_then(|a| {
        let kind = a["acceleratorType"].as_str()?;
        let count = a["acceleratorCount"]
            .as_str()
            .and_then(|c| c.parse().ok())
            .or_else(|| {
                a["acceleratorCount"]
                    .as_u64()
                    .and_then(|c| u32::try_from(c).ok())
            })?;
        Some((kind, count))
    });
    let spot = config["spot"].as_bool().unwrap_or(false)
        || config["preemptible"].as_bool().unwrap_or(false);
    let accelerator = accelerator_of_pool(
        &string_map(&config["labels"]),
        machine_type,
        gpu,
        p.pointer("/placementPolicy/tpuTopology")
            .and_then(Value::as_str),
        spot,
    );
    let mut pool = ObservedPool::new(
        p["name"].as_str().unwrap_or_default(),
        machine_type,
        accelerator,
    );
    pool.service_account = config["serviceAccount"].as_str().map(str::to_owned);
    pool.status = ResourceStatus::parse(p["status"].as_str().unwrap_or_default());
    pool.status_message = p["statusMessage"].as_str().unwrap_or_default().to_owned();
    pool.spot = spot;
    pool.reservation = (config.pointer("/reservationAffinity/consumeReservationType")
        == Some(&json!("SPECIFIC_RESERVATION")))
    .then(|| {
        config
            .pointer("/reservationAffinity/values/0")
            .and_then(Value::as_str)
            .map(str::to_owned)
    })
    .flatten();
    pool.autoscaling = (p.pointer("/autoscaling/enabled") == Some(&json!(true))).then(|| {
        let n = |k: &str| {
            p.pointer(&format!("/autoscaling/{k}"))
                .and_then(Value::as_u64)
                .and_then(|v| u32::try_from(v).ok())
                .unwrap_or(0)
        };
        (n("minNodeCount"), n("maxNodeCount"))
    });
    pool
}

/// Why `body` is not the description of cluster `name` as GKE gives it
/// (an object naming the cluster, with its status).
pub(crate) fn check_cluster(body: &Value, name: &str) -> Result<(), String> {
    let shown = || {
        let text = body.to_string();
        match text.char_indices().nth(120) {
            Some((at, _)) => format!("{}…", &text[..at]),
            None => text,
        }
    };
    match (body["name"].as_str(), body["status"].as_str()) {
        (Some(found), Some(_)) if found == name => Ok(()),
        (Some(found), Some(_)) => Err(format!("it describes cluster {found:?}")),
        _ => Err(format!(
            "no \"name\" and \"status\" in the body: {}",
            shown()
        )),
    }
}

/// A cluster as GKE returns it.
pub(crate) fn cluster_of(c: &Value) -> ObservedCluster {
    let pools = c["nodePools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(pool_of)
        .collect();
    let mut cluster = ObservedCluster::new(
        c["endpoint"].as_str().unwrap_or_default(),
        c.pointer("/workloadIdentityConfig/workloadPool")
            .and_then(Value::as_str),
        c.pointer("/addonsConfig/gcsFuseCsiDriverConfig/enabled") == Some(&json!(true)),
        pools,
    );
    cluster.status = ResourceStatus::parse(c["status"].as_str().unwrap_or_default());
    cluster.status_message = c["statusMessage"].as_str().unwrap_or_default().to_owned();
    cluster
}

impl GcpInfra {
    pub(crate) fn cluster_url_path(&self) -> String {
        format!(
            "{}/v1/{}",
            self.config.endpoints.container,
            self.desired.target.cluster_path()
        )
    }

    /// GET a resource: its body, or `None` on 404.
    pub(crate) async fn get_opt(
        &self,
        service: Service,
        what: &str,
        url: &str,
    ) -> Result<Option<Value>, InfraError> {
        let answer = self
            .rest
            .send(service, what, Method::GET, url, None, &[404])
            .await?;
        Ok((answer.status != 404).then_some(answer.body))
    }

    /// The cluster, as GKE returns it (`None`: it does not exist).
    /// An answer that is not this cluster (a proxy's page, another API
    /// behind the endpoint) is an error, never an empty cluster.
    pub(crate) async fn cluster_json(&self) -> Result<Option<Value>, InfraError> {
        let name = &self.desired.target.cluster;
        let what = format!("reading cluster {name}");
        let url = self.cluster_url_path();
        let found = self.get_opt(CONTAINER, &what, &url).await?;
        if let Some(body) = &found {
            check_cluster(body, name).map_err(|why| {
                InfraError::other(format!(
                    "{what} failed: {url} answered with something that is not the cluster ({why}): is the Kubernetes Engine endpoint right?"
                ))
            })?;
        }
        Ok(found)
    }

    /// The cluster as GKE describes it now (`None`: it does not exist),
    /// with one call: what a command whose cluster cannot be reached says
    /// of it (provisioning, deleted, never made).
    ///
    /// # Errors
    /// The Kubernetes Engine API's error (credentials, permission,
    /// unavailable), or an answer that is not the cluster.
    pub async fn cluster(&self) -> Result<Option<ObservedCluster>, InfraError> {
        Ok(self.cluster_json().await?.as_ref().map(cluster_of))
    }

    /// How to reach the cluster GKE described.
    pub(crate) fn access(&self, cluster: &Value) -> ClusterAccess {
        ClusterAccess {
            context: self.desired.kube.context.clone(),
            server: cluster_url(cluster["endpoint"].as_str().unwrap_or_default()),
            ca_data: cluster
                .pointer("/masterAuth/clusterCaCertificate")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }
    }

    /// A client of the running cluster GKE described.
    pub(crate) async fn kube_client(&self, cluster: &Value) -> Result<::kube::Client, InfraError> {
        let token = self.rest.token().await?;
        kube::client(&self.access(cluster), &token).await
    }

    pub(crate) async fn enabled_apis(&self) -> Result<BTreeSet<String>, InfraError> {
        let project = &self.desired.target.project;
        let mut apis = BTreeSet::new();
        let mut token: Option<String> = None;
        loop {
            let mut url = format!(
                "{}/v1/projects/{project}/services?filter=state:ENABLED&pageSize=200",
                self.config.endpoints.serviceusage
            );
            if let Some(t) = &token {
                url.push_str(&format!("&pageToken={t}"));
            }
            let answer = self
                .rest
                .send(
                    SERVICE_USAGE,
                    "listing the project's enabled APIs",
                    Method::GET,
                    &url,
                    None,
                    &[],
                )
                .await?;
            for s in answer.body["services"].as_array().into_iter().flatten() {
                if let Some(name) = s.pointer("/config/name").and_then(Value::as_str) {
                    apis.insert(name.to_owned());
                }
            }
            match answer.body["nextPageToken"]
                .as_str()
                .filter(|t| !t.is_empty())
            {
                Some(t) => token = Some(t.to_owned()),
                None => return Ok(apis),
            }
        }
    }

    /// The IAM policy of `resource` (`None` when the resource is gone).
    pub(crate) async fn policy(&self, resource: &Resource) -> Result<Option<Value>, InfraError> {
        let e = &self.config.endpoints;
        let t = &self.desired.target;
        let what = format!("reading the IAM policy of {resource}");
        let (service, method, url, body) = match resource {
            Resource::Project => (
                RESOURCE_MANAGER,
                Method::POST,
                format!(
                    "{}/v1/projects/{}:getIamPolicy",
                    e.resourcemanager, t.project
                ),
                Some(json!({"options": {"requestedPolicyVersion": 3}})),
            ),
            Resource::Bucket(b) => (
                STORAGE,
                Method::GET,
                format!(
                    "{}/storage/v1/b/{b}/iam?optionsRequestedPolicyVersion=3",
                    e.storage
                ),
                None,
            ),
            Resource::Repository => (
                ARTIFACT_REGISTRY,
                Method::GET,
                format!(
                    "{}/v1/{}:getIamPolicy",
                    e.artifactregistry,
                    t.repository_path()
                ),
                None,
            ),
            Resource::ServiceAccount(email) => (
                IAM,
                Method::POST,
                format!(
                    "{}/v1/projects/{}/serviceAccounts/{email}:getIamPolicy",
                    e.iam, t.project
                ),
                Some(json!({})),
            ),
        };
        let answer = self
            .rest
            .send(service, &what, method, &url, body.as_ref(), &[404])
            .await?;
        Ok((answer.status != 404).then_some(answer.body))
    }

    /// Read everything `up` provisions, as far as it can be read.
    pub async fn observe(&self) -> Observation {
        let mut o = Observed::default();
        let mut unreadable: Vec<(String, InfraError)> = Vec::new();
        let d = &self.desired;
        let e = &self.config.endpoints;
        let t = &d.target;
        let apis_known = match self.enabled_apis().await {
            Ok(apis) => {
                o.apis = apis;
                true
            }
            Err(err) => {
                unreadable.push(("the project's enabled APIs".into(), err));
                false
            }
        };
        let on = |api: &str| !apis_known || o.apis.contains(api);
        let (iam_on, ar_on, crm_on, gke_on) = (
            on(IAM.name),
            on(ARTIFACT_REGISTRY.name),
            on(RESOURCE_MANAGER.name),
            on(CONTAINER.name),
        );
        let mut policies: Vec<Resource> = Vec::new();
        if iam_on {
            for sa in &d.service_accounts {
                let url = format!(
                    "{}/v1/projects/{}/serviceAccounts/{}",
                    e.iam, t.project, sa.email
                );
                match self
                    .get_opt(IAM, &format!("reading service account {}", sa.email), &url)
                    .await
                {
                    Ok(Some(_)) => {
                        o.service_accounts.insert(sa.email.clone());
                        policies.push(Resource::ServiceAccount(sa.email.clone()));
                    }
                    Ok(None) => {}
                    Err(err) => unreadable.push((format!("service account {}", sa.email), err)),
                }
            }
        }
        for b in &d.buckets {
            let url = format!("{}/storage/v1/b/{}", e.storage, b.name);
            match self
                .get_opt(STORAGE, &format!("reading bucket gs://{}", b.name), &url)
                .await
            {
                Ok(Some(json)) => {
                    o.buckets.insert(
                        b.name.clone(),
                        ObservedBucket::new(
                            &json["location"].as_str().unwrap_or_default().to_lowercase(),
                            ttl_days(&json),
                            string_map(&json["labels"]),
                        ),
                    );
                    policies.push(Resource::Bucket(b.name.clone()));
                }
                Ok(None) => {}
                Err(err) => unreadable.push((format!("bucket gs://{}", b.name), err)),
            }
        }
        if ar_on {
            let url = format!("{}/v1/{}", e.artifactregistry, t.repository_path());
            match self
                .get_opt(ARTIFACT_REGISTRY, "reading the image repository", &url)
                .await
            {
                Ok(found) => {
                    o.repository = found.is_some();
                    if o.repository {
                        policies.push(Resource::Repository);
                    }
                }
                Err(err) => unreadable.push(("the image repository".into(), err)),
            }
        }
        if crm_on {
            policies.push(Resource::Project);
        }
        for resource in policies {
            match self.policy(&resource).await {
                Ok(Some(p)) => {
                    o.policies.insert(resource, bindings(&p));
                }
                Ok(None) => {}
                Err(err) => unreadable.push((format!("the IAM policy of {resource}"), err)),
            }
        }
        let mut cluster_json = None;
        if gke_on {
            match self.cluster_json().await {
                Ok(c) => cluster_json = c,
                Err(err) => unreadable.push((format!("cluster {}", t.cluster), err)),
            }
        }
        if let Some(json) = &cluster_json {
            let mut cluster = cluster_of(json);
            if cluster.status.is_usable() && !cluster.endpoint.is_empty() {
                let inside = async {
                    let client = self.kube_client(json).await?;
                    let kube = kube::observe(&client, &d.kube).await?;
                    let nodes = kube::nodes_by_pool(&client).await?;
                    Ok::<_, InfraError>((kube, nodes))
                };
                match inside.await {
                    Ok((kube, nodes)) => {
                        for p in &mut cluster.pools {
                            p.nodes = Some(nodes.get(&p.name).copied().unwrap_or((0, 0)));
                        }
                        o.kube = Some(kube);
                    }
                    Err(err) => unreadable.push(("the cluster's API server".into(), err)),
                }
            }
            o.cluster = Some(cluster);
        }
        if let Some(path) = &self.config.kubeconfig {
            match kubeconfig::read(path) {
                Ok(doc) => {
                    let (server, current) = kubeconfig::state(&doc, &d.kube.context);
                    o.kubeconfig = Some(KubeconfigState::new(
                        &path.display().to_string(),
                        server.as_deref(),
                        current.as_deref(),
                    ));
                }
                Err(err) => unreadable.push((format!("the kubeconfig {}", path.display()), err)),
            }
        }
        Observation {
            observed: o,
            unreadable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gke_answers_read_back() {
        let c = cluster_of(&json!({
        "status": "RUNNING", "endpoint": "34.1.2.3",
        "workloadIdentityConfig": {"workloadPool": "p.svc.id.goog"},
        "addonsConfig": {"gcsFuseCsiDriverConfig": {"enabled": true}},
        "nodePools": [
            {"name": "default-pool", "status": "RUNNING", "config": {"machineType": "e2-standard-4"}},
            {"name": "gpu-l4-1a2b", "status": "PROVISIONING",
             "autoscaling": {"enabled": true, "minNodeCount": 0, "maxNodeCount": 10},
             "config": {"machineType": "g2-standard-4", "spot": true,
                        "accelerators": [{"acceleratorType": "nvidia-l4", "acceleratorCount": "1"}]}},
            {"name": "tpu-v5litepod-0000", "status": "RUNNING",
             "placementPolicy": {"type": "COMPACT", "tpuTopology": "4x4"},
             "config": {"machineType": "ct5lp-hightpu-4t",
                        "reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION", "values": ["r1"]}}},
        ]}));
        assert_eq!(c.status, ResourceStatus::Running);
        assert!(c.gcs_fuse_csi);
        assert_eq!(c.pools[0].accelerator, None);
        let gpu = &c.pools[1];
        assert_eq!(gpu.accelerator.as_ref().unwrap().to_string(), "gpu:l4:spot");
        assert_eq!(
            (gpu.status.clone(), gpu.autoscaling),
            (ResourceStatus::Provisioning, Some((0, 10)))
        );
        let tpu = &c.pools[2];
        assert_eq!(
            tpu.accelerator.as_ref().unwrap().to_string(),
            "tpu:v5litepod-16"
        );
        assert_eq!(tpu.reservation.as_deref(), Some("r1"));

        assert_eq!(
            ttl_days(
                &json!({"lifecycle": {"rule": [{"action": {"type": "Delete"}, "condition": {"age": 30}}]}})
            ),
            Some(30)
        );
        assert_eq!(
            ttl_days(
                &json!({"lifecycle": {"rule": [{"action": {"type": "Delete"}, "condition": {"age": 30, "isLive": false}}]}})
            ),
            None
        );
        assert_eq!(ttl_days(&json!({})), None);
        let b = bindings(
            &json!({"bindings": [{"role": "roles/a", "members": ["m1", "m2"]},
                                              {"role": "roles/b", "members": ["m"], "condition": {}}]}),
        );
        assert_eq!(b.len(), 1);
        assert_eq!(b["roles/a"].len(), 2);
    }
}
