//! [`KubeBackend`]: the `Backend` port over a `kube::Client`, for any
//! [`Workload`] kind (a batch/v1 Job, a LeaderWorkerSet), one file per
//! concern:
//!
//! - [`options`]: the settings, [`KubeOptions`].
//! - `submit`: idempotent create of the object and its Secret, the checks
//!   before it (FUSE data, the service account, the kind's own).
//! - `status`: a job's state and a batch's (one labelled LIST per poll),
//!   the events and probe logs it reads, the attempts and final states it
//!   records.
//! - `finalise`: cancel, and the final state written on the object.
//! - `logs`: the log pods' logs across restarts, the log kept when the
//!   pods go with the job; `follow`: following them.
//! - `cleanup`: foreground deletion and the wait for it.
//! - `list` and `port_forward`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_core::batch::BlockMarker;
use kinetic_core::ids::JobId;
use kinetic_core::ports::{
    Backend, BackendCapabilities, BackendError, CleanupWait, GroupQuery, GroupStatus, LogOptions,
    LogStream, PreparedJob,
};
use kinetic_core::record::JobRecord;
use kinetic_core::status::JobState;
use kube::api::{Api, ListParams};

use crate::client::LazyClient;
use crate::error::{self, Context};
use crate::status::sort_oldest_first;
use crate::workload::{Workload, WorkloadTraits};

mod batch;
mod cleanup;
mod finalise;
mod follow;
mod list;
mod logs;
pub mod options;
mod port_forward;
mod status;
mod submit;

pub use cleanup::MAX_DELETION_POLL;
pub use logs::log_map_name;
pub use options::KubeOptions;

/// A Kubernetes backend: one workload object of kind `W` (and, when env
/// was captured, one Secret it owns) per job.
pub struct KubeBackend<W: Workload> {
    client: LazyClient,
    workload: Arc<W>,
    /// What differs between kinds, read from the workload once.
    traits: WorkloadTraits,
    options: KubeOptions,
    /// Namespaces whose service account was found.
    accounts_seen: std::sync::Mutex<BTreeSet<String>>,
    /// The final markers of blocks whose index ended: listed once, kept
    /// until the batch is cancelled or cleaned up through this backend.
    final_blocks: std::sync::Mutex<FinalBlocks>,
}

/// The markers of blocks whose index ended, by the batch (its group id and
/// its object's uid) and the block: final, so listed once.
type FinalBlocks = BTreeMap<(String, String, usize), Vec<BlockMarker>>;

impl<W: Workload> Debug for KubeBackend<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeBackend")
            .field("kind", &self.traits.kind)
            .field("client", &self.client)
            .field("options", &self.options)
            .finish()
    }
}

impl<W: Workload + Default> KubeBackend<W> {
    /// A backend over `client`.
    pub fn new(client: kube::Client, options: KubeOptions) -> Self {
        Self::with_workload(LazyClient::given(client), W::default(), options)
    }

    /// A backend that reads its cluster from a kubeconfig when first used:
    /// `path` (else `KUBECONFIG`, else `~/.kube/config`) and `context`
    /// (else the current one). Building it does no IO.
    pub fn from_kubeconfig(
        path: Option<PathBuf>,
        context: Option<String>,
        options: KubeOptions,
    ) -> Self {
        Self::with_workload(
            LazyClient::from_kubeconfig(path, context),
            W::default(),
            options,
        )
    }
}

impl<W: Workload> KubeBackend<W> {
    /// A backend of `workload` objects over `client`.
    pub fn with_workload(client: LazyClient, workload: W, options: KubeOptions) -> Self {
        Self {
            client,
            traits: workload.traits(),
            workload: Arc::new(workload),
            options,
            accounts_seen: std::sync::Mutex::default(),
            final_blocks: std::sync::Mutex::default(),
        }
    }

    /// The options.
    pub fn options(&self) -> &KubeOptions {
        &self.options
    }

    /// The workload kind.
    pub fn workload(&self) -> &W {
        &self.workload
    }

    /// What differs between the workload kind and others.
    pub fn traits(&self) -> &WorkloadTraits {
        &self.traits
    }

    fn name(&self) -> &'static str {
        self.traits.backend
    }

    async fn objects(&self, namespace: &str) -> Result<Api<W::Object>, BackendError> {
        self.workload
            .api(&self.client.get().await?, namespace)
            .await
    }

    async fn pods(&self, namespace: &str) -> Result<Api<Pod>, BackendError> {
        Ok(Api::namespaced(self.client.get().await?, namespace))
    }

    fn cx<'a>(&self, verb: &'a str, name: Option<&'a str>, namespace: &'a str) -> Context<'a> {
        Context {
            verb,
            resource: self.traits.plural,
            name,
            namespace,
        }
    }

    /// The object of a job, `None` when it does not exist.
    async fn get_object(&self, record: &Named) -> Result<Option<W::Object>, BackendError> {
        let api = self.objects(&record.namespace).await?;
        match api.get(&record.k8s_name).await {
            Ok(o) => Ok(Some(o)),
            Err(e) if error::code(&e) == Some(404) => Ok(None),
            Err(e) => Err(error::map(
                e,
                self.cx("get", Some(&record.k8s_name), &record.namespace),
            )),
        }
    }

    async fn list_pods(&self, namespace: &str, selector: &str) -> Result<Vec<Pod>, BackendError> {
        let api = self.pods(namespace).await?;
        let mut pods = api
            .list(&ListParams::default().labels(selector))
            .await
            .map(|l| l.items)
            .map_err(|e| {
                error::map(
                    e,
                    Context {
                        verb: "list",
                        resource: "pods",
                        name: None,
                        namespace,
                    },
                )
            })?;
        sort_oldest_first(&mut pods);
        Ok(pods)
    }
}

/// What names a job's objects: its namespace, object name and id.
#[derive(Debug, Clone)]
struct Named {
    namespace: String,
    k8s_name: String,
    job_id: String,
}

impl Named {
    fn of(record: &JobRecord) -> Self {
        Self {
            namespace: record.namespace.clone(),
            k8s_name: record.k8s_name.clone(),
            job_id: record.job_id.to_string(),
        }
    }
}

fn not_found(backend: &str, record: &Named) -> BackendError {
    BackendError::not_found(backend.to_owned(), record.job_id.to_string())
}

/// `call`, given at most `wait.timeout`: past it, `what` (the stop, the
/// deletion) of the job was not confirmed ([`BackendError::NotConfirmed`]);
/// the cluster goes on with it.
async fn within(
    record: &JobRecord,
    what: &str,
    wait: CleanupWait,
    call: impl std::future::Future<Output = Result<(), BackendError>>,
) -> Result<(), BackendError> {
    match tokio::time::timeout(wait.timeout, call).await {
        Ok(answer) => answer,
        Err(_) => Err(BackendError::not_confirmed(
            record.job_id.as_str(),
            what,
            wait.timeout,
        )),
    }
}

#[async_trait]
impl<W: Workload> Backend for KubeBackend<W> {
    fn name(&self) -> &str {
        self.traits.backend
    }

    /// The kind's; batches in blocks where it takes indexed batches and
    /// the backend has the jobs' store to read their markers from.
    fn capabilities(&self) -> BackendCapabilities {
        let caps = self.traits.capabilities.clone();
        let blocks = caps.indexed_batches && self.options.store.is_some();
        caps.with_batch_blocks(blocks)
    }

    /// The kind's batch object ([`Workload::build_batch`]) and its
    /// Secret; `Unsupported` for a kind without one.
    async fn submit_batch(
        &self,
        batch: &kinetic_core::ports::PreparedBatch,
    ) -> Result<(), BackendError> {
        self.submit_batch_object(batch).await
    }

    async fn end_batch(
        &self,
        query: &GroupQuery,
        end: kinetic_core::ports::BatchEnd,
        wait: CleanupWait,
    ) -> Result<(), BackendError> {
        self.end_batch_object(query, end, wait).await
    }

    async fn group_status(&self, query: &GroupQuery) -> Result<GroupStatus, BackendError> {
        KubeBackend::group_status(self, &query.namespace, &query.group_id).await
    }

    /// What the capabilities declare.
    async fn check(&self, accelerator: &AcceleratorSpec) -> Result<(), BackendError> {
        self.capabilities().check(self.name(), accelerator)
    }

    async fn submit(&self, job: &PreparedJob) -> Result<(), BackendError> {
        self.submit_job(job).await
    }

    async fn status(&self, record: &JobRecord) -> Result<JobState, BackendError> {
        self.job_status(record).await
    }

    async fn logs(&self, record: &JobRecord, options: LogOptions) -> Result<String, BackendError> {
        self.job_logs(record, options).await
    }

    async fn follow_logs(&self, record: &JobRecord) -> Result<LogStream, BackendError> {
        self.follow(record).await
    }

    async fn cancel(&self, record: &JobRecord, wait: CleanupWait) -> Result<(), BackendError> {
        let what = format!("the stop of {} {}", self.traits.kind, record.k8s_name);
        within(record, &what, wait, self.cancel_job(record)).await
    }

    async fn cleanup(&self, record: &JobRecord, wait: CleanupWait) -> Result<(), BackendError> {
        let what = format!(
            "the deletion of {} {} in namespace {}",
            self.traits.kind, record.k8s_name, record.namespace
        );
        within(record, &what, wait, self.cleanup_job(record, wait)).await
    }

    fn changes(&self) -> Option<kinetic_core::ports::ChangeFeed> {
        // Workloads on a cluster are polled.
        None
    }

    async fn list(&self) -> Result<Vec<JobId>, BackendError> {
        self.list_jobs().await
    }

    async fn port_forward(
        &self,
        job: &JobRecord,
        port: u16,
    ) -> Result<kinetic_core::ports::PortStream, BackendError> {
        self.forward_port(job, port).await
    }
}
