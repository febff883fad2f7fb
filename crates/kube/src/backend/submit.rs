//! Submit: the checks before anything is created (FUSE data, the
//! service account, the kind's own), then the object, then its Secret.

use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinetic_core::ports::{BackendError, PreparedJob};
use kube::Resource;
use kube::api::{Api, DeleteParams, PostParams};

use super::KubeBackend;
use crate::error::{self, Context};
use crate::pod::{self, ANNOTATION_SPEC_URI};
use crate::workload::{KindCall, Workload};

impl<W: Workload> KubeBackend<W> {
    /// [`Backend::submit`](kinetic_core::ports::Backend::submit): the
    /// checks, then the object (an existing one of the same spec is the
    /// job's: submit is idempotent), then its Secret.
    pub(super) async fn submit_job(&self, job: &PreparedJob) -> Result<(), BackendError> {
        let r = &job.record;
        check_fuse_mounts(self.name(), job)?;
        self.workload.check_job(job)?;
        let api = self.objects(&r.namespace).await?;
        self.check_service_account(&r.namespace).await?;
        let manifest = self.workload.build(job, &self.options.manifest);
        let created = match api.create(&PostParams::default(), &manifest).await {
            Ok(created) => created,
            Err(e) if error::code(&e) == Some(409) => {
                let existing = api
                    .get(&r.k8s_name)
                    .await
                    .map_err(|e| error::map(e, self.cx("get", Some(&r.k8s_name), &r.namespace)))?;
                if let Some(other) = other_spec(existing.meta(), &job.spec_uri) {
                    return Err(BackendError::AlreadyExists {
                        backend: self.name().to_owned(),
                        job_id: r.job_id.to_string(),
                        message: format!(
                            "{} {} in namespace {} runs spec {other}, not {}",
                            self.traits.kind, r.k8s_name, r.namespace, job.spec_uri
                        ),
                    });
                }
                existing
            }
            Err(e) if error::code(&e) == Some(404) => {
                let client = self.client.get().await?;
                return Err(
                    match self
                        .workload
                        .explain_not_found(&client, &r.namespace, KindCall::Create)
                        .await
                    {
                        Some(explained) => explained.with_source(e),
                        None => error::map(e, self.cx("create", None, &r.namespace)),
                    },
                );
            }
            Err(e) => return Err(error::map(e, self.cx("create", None, &r.namespace))),
        };
        let owner = self.workload.owner(&created);
        if let Some(secret) = pod::env_secret(job, self.traits.app, owner) {
            let secrets: Api<Secret> = Api::namespaced(self.client.get().await?, &r.namespace);
            match secrets.create(&PostParams::default(), &secret).await {
                Ok(_) => {}
                Err(e) if error::code(&e) == Some(409) => {}
                Err(e) => {
                    // Without its Secret no pod can start: take the object back.
                    let _ = api.delete(&r.k8s_name, &DeleteParams::background()).await;
                    return Err(error::map(
                        e,
                        Context {
                            verb: "create",
                            resource: "secrets",
                            name: None,
                            namespace: &r.namespace,
                        },
                    ));
                }
            }
        }
        // Admission (a queued slice) is tried again at each poll: a
        // failure here only delays it.
        if let Err(e) = self
            .workload
            .settle(&self.client.get().await?, &r.namespace, &created)
            .await
        {
            tracing::warn!(job_id = %r.job_id, "could not admit the job yet: {e}");
        }
        tracing::debug!(job_id = %r.job_id, name = %r.k8s_name, namespace = %r.namespace, kind = self.traits.kind, "submitted");
        Ok(())
    }

    /// Check that the service account the job's pods run as exists in
    /// `namespace` (once per namespace): without it the controller cannot
    /// create the pods and the job would only wait. A caller that may not
    /// read service accounts is not stopped here.
    pub(super) async fn check_service_account(&self, namespace: &str) -> Result<(), BackendError> {
        let seen = |ns: &str| {
            self.accounts_seen
                .lock()
                .map(|s| s.contains(ns))
                .unwrap_or(false)
        };
        if seen(namespace) {
            return Ok(());
        }
        let account = &self.options.manifest.service_account;
        let api: Api<ServiceAccount> = Api::namespaced(self.client.get().await?, namespace);
        match api.get(account).await {
            Ok(_) => {
                if let Ok(mut s) = self.accounts_seen.lock() {
                    s.insert(namespace.to_owned());
                }
                Ok(())
            }
            Err(e) if error::code(&e) == Some(404) => Err(BackendError::invalid_input(format!(
                "the service account '{account}' does not exist in namespace '{namespace}': the job's pods run as it, so the cluster would refuse to create them; create it with `kinetic up` (or `kubectl create serviceaccount {account} -n {namespace}`)"
            ))
            .with_source(e)),
            Err(e) if error::code(&e) == Some(403) => Ok(()),
            Err(e) => Err(error::map(
                e,
                Context {
                    verb: "get",
                    resource: "serviceaccounts",
                    name: Some(account),
                    namespace,
                },
            )),
        }
    }
}

/// Refuses FUSE data the GCS FUSE CSI driver cannot mount: anything but a
/// `gs://` URI (data in a `file://` store, which no pod can see).
fn check_fuse_mounts(backend: &str, job: &PreparedJob) -> Result<(), BackendError> {
    match job.fuse_mounts.iter().find(|m| !m.uri.starts_with("gs://")) {
        None => Ok(()),
        Some(m) => Err(BackendError::unsupported(format!(
            "the {backend} backend mounts FUSE data through the GCS FUSE CSI driver, which reads gs:// buckets only; {} (for {}) is not in one: use a gs:// jobs bucket",
            m.uri, m.mount_path
        ))),
    }
}

/// The spec an existing object of the job runs when it is not `spec_uri`
/// (none recorded reads as the empty spec); `None` when it is the same.
pub(super) fn other_spec(meta: &ObjectMeta, spec_uri: &str) -> Option<String> {
    let spec = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_SPEC_URI))
        .cloned()
        .unwrap_or_default();
    (spec != spec_uri).then_some(spec)
}
