//! Carrying out a plan, action by action, each through the API that owns
//! what it changes. Creating what already exists is success (another run,
//! or a run that stopped after the call, made it); a long-running
//! operation is followed to its end with a timeout, telling the caller
//! how it goes; GKE's "incompatible operation" (another change still
//! running on the cluster) and IAM's "does not exist" (a new account not
//! yet seen by IAM) are waited out.

use std::time::{Duration, Instant};

use crate::model::{Action, Binding, ManifestBundle, Plan, Resource};
use futures_util::StreamExt;
use kinetic_core::retry::{Backoff, Decision, GaveUp, RetryPolicy};
use kinetic_gcp_common::GoogleError;
use reqwest::Method;
use serde_json::{Value, json};

use crate::error::InfraError;
use crate::http::{
    ARTIFACT_REGISTRY, CONTAINER, IAM, RESOURCE_MANAGER, SERVICE_USAGE, STORAGE, Service,
};
use crate::kubeconfig;
use crate::{GcpInfra, Progress, kube, request};

/// How long-running work is polled by default: the first poll after
/// 250 ms, then waits growing by half up to 10 s.
pub(crate) fn default_poll() -> Backoff {
    Backoff::new(Duration::from_millis(250), Duration::from_secs(10)).with_multiplier(1.5)
}

/// Objects deleted at once when emptying a bucket.
const DELETE_CONCURRENCY: usize = 16;

/// Polls something until it is done, telling `progress`, within a
/// deadline, the waits between polls growing as `poll` says.
struct Waiter<'a> {
    what: String,
    progress: &'a dyn Progress,
    start: tokio::time::Instant,
    poll: Backoff,
    pause: Duration,
    timeout: Duration,
}

impl<'a> Waiter<'a> {
    fn new(
        what: impl Into<String>,
        progress: &'a dyn Progress,
        poll: Backoff,
        timeout: Duration,
    ) -> Self {
        Self {
            what: what.into(),
            progress,
            start: tokio::time::Instant::now(),
            poll,
            pause: poll.initial,
            timeout,
        }
    }

    /// Report `status`, then pause before the next poll; a timeout once
    /// the deadline has passed.
    async fn tick(&mut self, status: &str) -> Result<(), InfraError> {
        let elapsed = self.start.elapsed();
        if elapsed >= self.timeout {
            return Err(InfraError::Timeout {
                what: self.what.clone(),
                after: self.timeout,
            });
        }
        self.progress.waiting(&self.what, status, elapsed);
        tokio::time::sleep(self.pause.min(self.timeout - elapsed)).await;
        self.pause = self.poll.next(self.pause);
        Ok(())
    }
}

/// Every byte but the unreserved ones percent-encoded (an object name in a
/// URL path).
fn encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// GKE's answer while another operation changes the cluster (or it is
/// not running yet): 400 `FAILED_PRECONDITION`, worth waiting out.
fn incompatible(answer_error: &GoogleError) -> bool {
    answer_error.status == "FAILED_PRECONDITION"
}

/// How [`GcpInfra::wait_out`] ended without success.
#[derive(Debug)]
enum WaitedOut<E> {
    /// What was waited out was still there at the deadline.
    Timeout(InfraError),
    /// A failure not to wait out.
    Failed(E),
}

/// How one change sent to GKE did not go through.
#[derive(Debug)]
enum Busy {
    /// Another operation is changing the cluster: wait it out.
    Busy(GoogleError),
    /// Anything else, final.
    Failed(InfraError),
}

/// How one read-modify-write of an IAM policy did not go through.
#[derive(Debug)]
enum PolicyWrite {
    /// Someone wrote the policy in between: its etag changed (409 or 412).
    Conflict {
        service: Service,
        google: GoogleError,
    },
    /// IAM does not know a member yet (a new service account): its message.
    /// IAM's answer (400 `INVALID_ARGUMENT`) carries no reason to tell it
    /// by, only its wording.
    UnknownMember(String),
    /// Anything else, final.
    Failed(InfraError),
}

impl GcpInfra {
    /// Carry out `plan` in order, telling `progress`; stops at the first
    /// failure (running the command again finishes the job).
    ///
    /// # Errors
    /// The failing action's error.
    pub async fn execute(&self, plan: &Plan, progress: &dyn Progress) -> Result<(), InfraError> {
        let total = plan.actions.len();
        for (i, action) in plan.actions.iter().enumerate() {
            progress.started(action, i, total);
            let start = Instant::now();
            self.run(action, progress).await?;
            progress.finished(action, start.elapsed());
        }
        Ok(())
    }

    /// Run `attempt` again while its failure is one to wait out (`busy`
    /// gives the status to report for it), polling as the configuration
    /// says within the operation timeout: the retry mechanism of
    /// `kinetic_core::retry`, with a budget of time rather than attempts.
    /// A failure `busy` does not name comes back as it is; one still
    /// there at the deadline becomes a [`InfraError::Timeout`].
    async fn wait_out<T, E, Fut>(
        &self,
        what: &str,
        progress: &dyn Progress,
        mut busy: impl FnMut(&E) -> Option<String>,
        attempt: impl FnMut() -> Fut,
    ) -> Result<T, WaitedOut<E>>
    where
        Fut: std::future::Future<Output = Result<T, E>>,
    {
        let timeout = self.config.operation_timeout;
        let policy = RetryPolicy::new(u32::MAX, self.config.poll).with_max_elapsed(timeout);
        let start = tokio::time::Instant::now();
        kinetic_engine::retry::retry_if(
            &policy,
            |failure: &E| match busy(failure) {
                Some(status) => {
                    progress.waiting(what, &status, start.elapsed());
                    Decision::Retry
                }
                None => Decision::Stop,
            },
            attempt,
        )
        .await
        .map_err(|gave_up| match gave_up {
            GaveUp {
                exhausted: true, ..
            } => WaitedOut::Timeout(InfraError::Timeout {
                what: what.to_owned(),
                after: timeout,
            }),
            GaveUp { error, .. } => WaitedOut::Failed(error),
        })
    }

    fn waiter<'a>(&self, what: impl Into<String>, progress: &'a dyn Progress) -> Waiter<'a> {
        Waiter::new(
            what,
            progress,
            self.config.poll,
            self.config.operation_timeout,
        )
    }

    async fn run(&self, action: &Action, progress: &dyn Progress) -> Result<(), InfraError> {
        let e = &self.config.endpoints;
        let t = &self.desired.target;
        let p = &t.project;
        match action {
            Action::EnableApis { apis } => {
                let what = format!("enabling {}", apis.join(", "));
                let url = format!("{}/v1/projects/{p}/services:batchEnable", e.serviceusage);
                let body = request::batch_enable(apis);
                self.call_and_wait(
                    SERVICE_USAGE,
                    &e.serviceusage,
                    &what,
                    Method::POST,
                    &url,
                    Some(&body),
                    &[],
                    progress,
                )
                .await?;
                self.rest.enabled_apis();
                Ok(())
            }
            Action::CreateServiceAccount { account } => {
                let what = format!("creating service account {}", account.email);
                let url = format!("{}/v1/projects/{p}/serviceAccounts", e.iam);
                self.rest
                    .send(
                        IAM,
                        &what,
                        Method::POST,
                        &url,
                        Some(&request::service_account(account)),
                        &[409],
                    )
                    .await
                    .map(|_| ())
            }
            Action::CreateBucket { bucket } => {
                let what = format!("creating bucket gs://{}", bucket.name);
                let url = format!("{}/storage/v1/b?project={p}", e.storage);
                let answer = self
                    .rest
                    .send(
                        STORAGE,
                        &what,
                        Method::POST,
                        &url,
                        Some(&request::bucket(bucket)),
                        &[409],
                    )
                    .await?;
                if answer.status == 409 {
                    let error = answer.error();
                    if !error.message.contains("already own it") {
                        return Err(InfraError::InvalidInput {
                            message: format!(
                                "{what} failed: the name belongs to another project ({}); the bucket names come from the project and cluster: pick another cluster name (--cluster or KINETIC_CLUSTER)",
                                error.message
                            ),
                        });
                    }
                    // Ours already: make sure it has the rule and labels.
                    return self.patch_bucket(bucket).await;
                }
                Ok(())
            }
            Action::UpdateBucket { bucket } => self.patch_bucket(bucket).await,
            Action::CreateRepository { repository } => {
                let what = format!("creating Artifact Registry repository {}", repository.name);
                let url = format!(
                    "{}/v1/projects/{p}/locations/{}/repositories?repositoryId={}",
                    e.artifactregistry, repository.location, repository.name
                );
                let body = request::repository(repository);
                self.call_and_wait(
                    ARTIFACT_REGISTRY,
                    &e.artifactregistry,
                    &what,
                    Method::POST,
                    &url,
                    Some(&body),
                    &[409],
                    progress,
                )
                .await
            }
            Action::Grant { resource, bindings } => {
                self.modify_policy(resource, bindings, request::grant, progress)
                    .await
            }
            Action::Revoke { resource, bindings } => {
                self.modify_policy(resource, bindings, request::revoke, progress)
                    .await
            }
            Action::CreateCluster { cluster } => {
                let what = format!("creating GKE cluster {}", cluster.name);
                let url = format!(
                    "{}/v1/projects/{p}/locations/{}/clusters",
                    e.container, t.zone
                );
                let answer = self
                    .rest
                    .send(
                        CONTAINER,
                        &what,
                        Method::POST,
                        &url,
                        Some(&request::cluster(cluster)),
                        &[409],
                    )
                    .await?;
                if answer.status == 409 {
                    return self.wait_cluster(false, progress).await;
                }
                self.wait_container_op(answer.body, &what, progress).await
            }
            Action::UpdateCluster {
                workload_pool,
                gcs_fuse_csi,
            } => {
                for body in request::cluster_updates(workload_pool.as_deref(), *gcs_fuse_csi) {
                    let what = format!("updating cluster {}", t.cluster);
                    let url = self.cluster_url_path();
                    let op = self
                        .while_busy(&what, Method::PUT, &url, Some(&body), &[], progress)
                        .await?;
                    self.wait_container_op(op, &what, progress).await?;
                }
                Ok(())
            }
            Action::WaitCluster => self.wait_cluster(false, progress).await,
            Action::WaitClusterDeleted => self.wait_cluster(true, progress).await,
            Action::CreatePool { pool } => {
                let what = format!("creating node pool {}", pool.name);
                let url = format!("{}/nodePools", self.cluster_url_path());
                let body = request::node_pool(pool, &self.desired.cluster.labels);
                let op = self
                    .while_busy(&what, Method::POST, &url, Some(&body), &[409], progress)
                    .await?;
                if op.is_null() {
                    return self.wait_pool(&pool.name, progress).await;
                }
                self.wait_container_op(op, &what, progress).await
            }
            Action::WaitPool { name } => self.wait_pool(name, progress).await,
            Action::DeletePool { name } => {
                let what = format!("deleting node pool {name}");
                let url = format!("{}/nodePools/{name}", self.cluster_url_path());
                let op = self
                    .while_busy(&what, Method::DELETE, &url, None, &[404], progress)
                    .await?;
                if op.is_null() {
                    return Ok(());
                }
                self.wait_container_op(op, &what, progress).await
            }
            Action::ApplyServiceAccount {
                namespace,
                name,
                google_service_account,
            } => {
                let client = self.running_cluster_client().await?;
                kube::apply_service_account(&client, namespace, name, google_service_account).await
            }
            Action::ApplyRole { namespace, role } => {
                let client = self.running_cluster_client().await?;
                kube::apply_role(&client, namespace, role).await
            }
            Action::InstallManifests { bundle } => self.install(bundle, progress).await,
            Action::WriteKubeconfig { .. } => {
                let path = self.kubeconfig_path()?;
                let cluster = self
                    .cluster_json()
                    .await?
                    .ok_or_else(|| self.no_cluster())?;
                let doc = kubeconfig::merged(kubeconfig::read(&path)?, &self.access(&cluster));
                kubeconfig::write(&path, &doc)
            }
            Action::DeleteCluster { name } => {
                let what = format!("deleting GKE cluster {name}");
                let answer = self
                    .rest
                    .send(
                        CONTAINER,
                        &what,
                        Method::DELETE,
                        &self.cluster_url_path(),
                        None,
                        &[400, 404],
                    )
                    .await?;
                match answer.status {
                    404 => Ok(()),
                    400 => self.wait_cluster(true, progress).await,
                    _ => self.wait_container_op(answer.body, &what, progress).await,
                }
            }
            Action::DeleteRepository { name } => {
                let what = format!("deleting Artifact Registry repository {name}");
                let url = format!("{}/v1/{}", e.artifactregistry, t.repository_path());
                self.call_and_wait(
                    ARTIFACT_REGISTRY,
                    &e.artifactregistry,
                    &what,
                    Method::DELETE,
                    &url,
                    None,
                    &[404],
                    progress,
                )
                .await
            }
            Action::DeleteBucket { name } => self.delete_bucket(name, progress).await,
            Action::DeleteServiceAccount { email } => {
                let what = format!("deleting service account {email}");
                let url = format!("{}/v1/projects/{p}/serviceAccounts/{email}", e.iam);
                self.rest
                    .send(IAM, &what, Method::DELETE, &url, None, &[404])
                    .await
                    .map(|_| ())
            }
            Action::RemoveKubeconfig { context } => {
                let path = self.kubeconfig_path()?;
                let doc = kubeconfig::read(&path)?;
                if kubeconfig::state(&doc, context).0.is_some() {
                    kubeconfig::write(&path, &kubeconfig::removed(doc, context))?;
                }
                Ok(())
            }
        }
    }

    fn no_cluster(&self) -> InfraError {
        InfraError::InvalidInput {
            message: crate::model::InfraError::NoCluster {
                cluster: self.desired.target.cluster.clone(),
                zone: self.desired.target.zone.clone(),
            }
            .to_string(),
        }
    }

    pub(crate) fn kubeconfig_path(&self) -> Result<std::path::PathBuf, InfraError> {
        self.config
            .kubeconfig
            .clone()
            .ok_or_else(|| InfraError::Kubeconfig {
                message: "no kubeconfig to write the cluster's context to: set KUBECONFIG or HOME"
                    .into(),
            })
    }

    async fn running_cluster_client(&self) -> Result<::kube::Client, InfraError> {
        let cluster = self
            .cluster_json()
            .await?
            .ok_or_else(|| self.no_cluster())?;
        self.kube_client(&cluster).await
    }

    async fn patch_bucket(&self, bucket: &crate::model::BucketSpec) -> Result<(), InfraError> {
        let what = format!("setting the rule and labels of bucket gs://{}", bucket.name);
        let url = format!(
            "{}/storage/v1/b/{}",
            self.config.endpoints.storage, bucket.name
        );
        self.rest
            .send(
                STORAGE,
                &what,
                Method::PATCH,
                &url,
                Some(&request::bucket_patch(bucket)),
                &[],
            )
            .await
            .map(|_| ())
    }

    /// Send a change to GKE, waiting while another operation runs on the
    /// cluster. Returns the operation, or `null` for an accepted status in
    /// `accept` (409: it exists; 404: it is gone).
    async fn while_busy(
        &self,
        what: &str,
        method: Method,
        url: &str,
        body: Option<&Value>,
        accept: &[u16],
        progress: &dyn Progress,
    ) -> Result<Value, InfraError> {
        let mut accepted = vec![400];
        accepted.extend_from_slice(accept);
        let project = &self.desired.target.project;
        let answer = self
            .wait_out(
                &format!("the cluster to finish its operation in progress before {what}"),
                progress,
                |failure: &Busy| match failure {
                    Busy::Busy(error) => Some(error.message.clone()),
                    Busy::Failed(_) => None,
                },
                || async {
                    let answer = self
                        .rest
                        .send(CONTAINER, what, method.clone(), url, body, &accepted)
                        .await
                        .map_err(Busy::Failed)?;
                    if answer.status != 400 {
                        return Ok(answer);
                    }
                    let error = answer.error();
                    Err(if incompatible(&error) {
                        Busy::Busy(error)
                    } else {
                        Busy::Failed(crate::http::http_error(CONTAINER, project, what, &error, 1))
                    })
                },
            )
            .await
            .map_err(|e| match e {
                WaitedOut::Timeout(e) | WaitedOut::Failed(Busy::Failed(e)) => e,
                WaitedOut::Failed(Busy::Busy(error)) => {
                    crate::http::http_error(CONTAINER, project, what, &error, 1)
                }
            })?;
        Ok(if accept.contains(&answer.status) {
            Value::Null
        } else {
            answer.body
        })
    }

    /// Follow a Kubernetes Engine operation to its end.
    async fn wait_container_op(
        &self,
        op: Value,
        what: &str,
        progress: &dyn Progress,
    ) -> Result<(), InfraError> {
        let name = op["name"].as_str().unwrap_or_default().to_owned();
        let url = format!(
            "{}/v1/projects/{}/locations/{}/operations/{name}",
            self.config.endpoints.container, self.desired.target.project, self.desired.target.zone
        );
        let mut op = op;
        let mut waiter = self.waiter(what, progress);
        loop {
            if op["status"] == "DONE" {
                let error = op
                    .pointer("/error/message")
                    .or_else(|| op.get("statusMessage"));
                return match error.and_then(Value::as_str).filter(|m| !m.is_empty()) {
                    Some(message) => Err(InfraError::OperationFailed {
                        what: what.to_owned(),
                        message: message.to_owned(),
                    }),
                    None => Ok(()),
                };
            }
            waiter
                .tick(op["status"].as_str().unwrap_or("RUNNING"))
                .await?;
            op = self
                .rest
                .send(
                    CONTAINER,
                    &format!("following {what}"),
                    Method::GET,
                    &url,
                    None,
                    &[],
                )
                .await?
                .body;
        }
    }

    /// Send a call that starts a `google.longrunning.Operation` and follow
    /// it to its end; an answer in `done_already` (409: it exists; 404:
    /// it is gone) needs no operation.
    #[allow(clippy::too_many_arguments)]
    async fn call_and_wait(
        &self,
        service: Service,
        base: &str,
        what: &str,
        method: Method,
        url: &str,
        body: Option<&Value>,
        done_already: &[u16],
        progress: &dyn Progress,
    ) -> Result<(), InfraError> {
        let answer = self
            .rest
            .send(service, what, method, url, body, done_already)
            .await?;
        if done_already.contains(&answer.status) {
            return Ok(());
        }
        self.wait_lro(service, base, answer.body, what, progress)
            .await
    }

    /// Follow a `google.longrunning.Operation` (Service Usage, Artifact
    /// Registry) to its end.
    async fn wait_lro(
        &self,
        service: Service,
        base: &str,
        op: Value,
        what: &str,
        progress: &dyn Progress,
    ) -> Result<(), InfraError> {
        let url = format!("{base}/v1/{}", op["name"].as_str().unwrap_or_default());
        let mut op = op;
        let mut waiter = self.waiter(what, progress);
        loop {
            if op["done"] == true {
                return match op.pointer("/error/message").and_then(Value::as_str) {
                    Some(message) => Err(InfraError::OperationFailed {
                        what: what.to_owned(),
                        message: message.to_owned(),
                    }),
                    None => Ok(()),
                };
            }
            waiter.tick("running").await?;
            op = self
                .rest
                .send(
                    service,
                    &format!("following {what}"),
                    Method::GET,
                    &url,
                    None,
                    &[],
                )
                .await?
                .body;
        }
    }

    /// Wait until the cluster runs (or, with `gone`, no longer exists).
    async fn wait_cluster(&self, gone: bool, progress: &dyn Progress) -> Result<(), InfraError> {
        let t = &self.desired.target;
        let what = if gone {
            format!("cluster {} to be deleted", t.cluster)
        } else {
            format!("cluster {} to run", t.cluster)
        };
        let mut waiter = self.waiter(what.clone(), progress);
        loop {
            let status = match self.cluster_json().await? {
                None if gone => return Ok(()),
                None => return Err(self.no_cluster()),
                Some(c) => {
                    let status = c["status"].as_str().unwrap_or_default().to_owned();
                    match status.as_str() {
                        "RUNNING" if !gone => return Ok(()),
                        "ERROR" if !gone => {
                            return Err(InfraError::OperationFailed {
                                what: format!("cluster {}", t.cluster),
                                message: format!(
                                    "it is in state ERROR ({}); delete it with `kinetic down`, then run `kinetic up` again",
                                    c["statusMessage"].as_str().unwrap_or_default()
                                ),
                            });
                        }
                        _ => status,
                    }
                }
            };
            waiter.tick(&status).await?;
        }
    }

    /// Wait until the pool `name` runs, or is gone.
    async fn wait_pool(&self, name: &str, progress: &dyn Progress) -> Result<(), InfraError> {
        let url = format!("{}/nodePools/{name}", self.cluster_url_path());
        let mut waiter = self.waiter(format!("node pool {name}"), progress);
        loop {
            let Some(pool) = self
                .get_opt(CONTAINER, &format!("reading node pool {name}"), &url)
                .await?
            else {
                return Ok(());
            };
            let status = pool["status"].as_str().unwrap_or_default();
            match status {
                "RUNNING" | "RUNNING_WITH_ERROR" => return Ok(()),
                "ERROR" => {
                    return Err(InfraError::OperationFailed {
                        what: format!("node pool {name}"),
                        message: format!(
                            "it is in state ERROR ({}); remove it with `kinetic pool remove {name}` and add it again",
                            pool["statusMessage"].as_str().unwrap_or_default()
                        ),
                    });
                }
                _ => waiter.tick(status).await?,
            }
        }
    }

    /// Read, modify and write a resource's IAM policy: again, under the
    /// retry policy, when someone wrote it in between (its etag changed),
    /// and after a pause while IAM does not see a new member yet.
    async fn modify_policy(
        &self,
        resource: &Resource,
        bindings: &[Binding],
        change: fn(&Value, &[Binding]) -> Option<Value>,
        progress: &dyn Progress,
    ) -> Result<(), InfraError> {
        let what = format!("setting the IAM policy of {resource}");
        // Conflicts are retried under the retry policy's budget; a member
        // IAM does not know yet is waited out within the operation timeout.
        let write = || {
            kinetic_engine::retry::retry_if(
                &self.config.retry,
                |failure: &PolicyWrite| {
                    Decision::from(matches!(failure, PolicyWrite::Conflict { .. }))
                },
                || self.write_policy(resource, bindings, change, &what),
            )
        };
        let gave_up = match self
            .wait_out(
                &format!("IAM to know the members granted on {resource}"),
                progress,
                |failure: &GaveUp<PolicyWrite>| match &failure.error {
                    PolicyWrite::UnknownMember(message) => Some(message.clone()),
                    _ => None,
                },
                write,
            )
            .await
        {
            Ok(()) => return Ok(()),
            Err(WaitedOut::Timeout(e)) => return Err(e),
            Err(WaitedOut::Failed(gave_up)) => gave_up,
        };
        Err(match gave_up.error {
            PolicyWrite::Conflict { service, google } => crate::http::http_error(
                service,
                &self.desired.target.project,
                &what,
                &google,
                gave_up.attempts,
            ),
            PolicyWrite::Failed(e) => e,
            PolicyWrite::UnknownMember(message) => InfraError::InvalidInput {
                message: format!("{what} failed: {message}"),
            },
        })
    }

    /// One read-modify-write of `resource`'s IAM policy (nothing written
    /// when `change` finds nothing to change).
    async fn write_policy(
        &self,
        resource: &Resource,
        bindings: &[Binding],
        change: fn(&Value, &[Binding]) -> Option<Value>,
        what: &str,
    ) -> Result<(), PolicyWrite> {
        let e = &self.config.endpoints;
        let t = &self.desired.target;
        let policy = self
            .policy(resource)
            .await
            .map_err(PolicyWrite::Failed)?
            .ok_or_else(|| {
                PolicyWrite::Failed(InfraError::InvalidInput {
                    message: format!("{what} failed: {resource} does not exist"),
                })
            })?;
        let Some(new) = change(&policy, bindings) else {
            return Ok(());
        };
        let (service, method, url, body) = match resource {
            Resource::Project => (
                RESOURCE_MANAGER,
                Method::POST,
                format!(
                    "{}/v1/projects/{}:setIamPolicy",
                    e.resourcemanager, t.project
                ),
                json!({"policy": new}),
            ),
            Resource::Bucket(b) => (
                STORAGE,
                Method::PUT,
                format!("{}/storage/v1/b/{b}/iam", e.storage),
                new,
            ),
            Resource::Repository => (
                ARTIFACT_REGISTRY,
                Method::POST,
                format!(
                    "{}/v1/{}:setIamPolicy",
                    e.artifactregistry,
                    t.repository_path()
                ),
                json!({"policy": new}),
            ),
            Resource::ServiceAccount(email) => (
                IAM,
                Method::POST,
                format!(
                    "{}/v1/projects/{}/serviceAccounts/{email}:setIamPolicy",
                    e.iam, t.project
                ),
                json!({"policy": new}),
            ),
        };
        let answer = self
            .rest
            .send(service, what, method, &url, Some(&body), &[400, 409, 412])
            .await
            .map_err(PolicyWrite::Failed)?;
        let google = match answer.status {
            s if (200..300).contains(&s) => return Ok(()),
            _ => answer.error(),
        };
        Err(match google.code {
            409 | 412 => PolicyWrite::Conflict { service, google },
            400 if google.message.contains("does not exist") => {
                PolicyWrite::UnknownMember(google.message)
            }
            _ => PolicyWrite::Failed(crate::http::http_error(
                service, &t.project, what, &google, 1,
            )),
        })
    }

    async fn install(
        &self,
        bundle: &ManifestBundle,
        progress: &dyn Progress,
    ) -> Result<(), InfraError> {
        let what = format!("fetching {} from {}", bundle.name, bundle.url);
        let response = self
            .rest
            .http()
            .get(&bundle.url)
            .send()
            .await
            .map_err(|e| InfraError::Unavailable {
                message: format!("{what} failed: {e}"),
            })?;
        let status = response.status();
        let text = response.text().await.map_err(|e| InfraError::Unavailable {
            message: format!("{what} failed: {e}"),
        })?;
        if !status.is_success() {
            return Err(InfraError::Unavailable {
                message: format!("{what} failed: HTTP {status}"),
            });
        }
        let objects = kube::manifest_objects(&text, &bundle.url)?;
        let client = self.running_cluster_client().await?;
        kube::install(&client, &objects).await?;
        if !kube::installed(&client, bundle).await? {
            return Err(InfraError::InvalidInput {
                message: format!(
                    "{} from {} holds no {} {}: is it the right manifest?",
                    bundle.name, bundle.url, bundle.marker_kind, bundle.marker_name
                ),
            });
        }
        if bundle.controller.is_some() {
            let mut waiter = self.waiter(format!("{} to serve", bundle.name), progress);
            while let Some(why) = kube::not_serving(&client, bundle).await? {
                waiter.tick(&why).await?;
            }
        }
        Ok(())
    }

    /// Delete every object of a bucket, then the bucket.
    async fn delete_bucket(&self, name: &str, progress: &dyn Progress) -> Result<(), InfraError> {
        let storage = &self.config.endpoints.storage;
        let what = format!("deleting bucket gs://{name}");
        let mut waiter = self.waiter(
            format!("the objects of gs://{name} to be deleted"),
            progress,
        );
        let mut deleted = 0usize;
        loop {
            let list = format!("{storage}/storage/v1/b/{name}/o?maxResults=1000");
            let Some(page) = self
                .get_opt(STORAGE, &format!("listing gs://{name}"), &list)
                .await?
            else {
                return Ok(());
            };
            let objects: Vec<String> = page["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|o| o["name"].as_str().map(str::to_owned))
                .collect();
            if objects.is_empty() {
                let answer = self
                    .rest
                    .send(
                        STORAGE,
                        &what,
                        Method::DELETE,
                        &format!("{storage}/storage/v1/b/{name}"),
                        None,
                        &[404, 409],
                    )
                    .await?;
                if answer.status != 409 {
                    return Ok(());
                }
                // Objects arrived meanwhile: empty it again.
                continue;
            }
            let results: Vec<Result<(), InfraError>> = futures_util::stream::iter(objects)
                .map(|o| {
                    let url = format!("{storage}/storage/v1/b/{name}/o/{}", encode(&o));
                    let what = format!("deleting gs://{name}/{o}");
                    async move {
                        self.rest
                            .send(STORAGE, &what, Method::DELETE, &url, None, &[404])
                            .await
                            .map(|_| ())
                    }
                })
                .buffer_unordered(DELETE_CONCURRENCY)
                .collect()
                .await;
            deleted += results.len();
            results.into_iter().collect::<Result<Vec<()>, _>>()?;
            waiter.tick(&format!("{deleted} objects deleted")).await?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::encode;

    #[test]
    fn object_names_are_encoded_for_paths() {
        assert_eq!(encode("a/b c+d.json"), "a%2Fb%20c%2Bd.json");
        assert_eq!(encode("x~y_z-1"), "x~y_z-1");
    }
}
