//! A fake Kubernetes cluster in the test process: an API server on
//! 127.0.0.1 that a real `kube::Client` (or `kubectl`) talks to, with a
//! fake control plane and kubelet behind it.
//!
//! - **API server**: Jobs, Pods (with `log`, `follow`, `tailLines`,
//!   `previous`), Secrets, Events and any custom resource (LeaderWorkerSet
//!   included) under `/api/v1/…` and `/apis/{group}/{version}/…`; label
//!   and field selectors; one global `resourceVersion`; `watch=true`
//!   streams newline-delimited watch events (replayed from a version, 410
//!   when it is too old); 404/409/410 answers carry `Status` bodies; merge
//!   patches with optimistic concurrency; deletion in the foreground, in
//!   the background, or orphaning, with a garbage collector for
//!   `ownerReferences`. Every call is counted ([`ApiCalls`]) and can be
//!   made to fail ([`FakeCluster::faults`]).
//! - **Job controller**: a Job gets a Pod from its template; the Pod's end
//!   completes or fails the Job (`backoffLimit`), `activeDeadlineSeconds`
//!   fails it with `DeadlineExceeded`, `suspend` stops its pods, and
//!   `ttlSecondsAfterFinished` removes it. Its `status.failed` and
//!   `status.succeeded` only grow: each pod carries the
//!   `batch.kubernetes.io/job-tracking` finalizer until its end is counted,
//!   so a pod deleted afterwards (PodGC, an eviction, a user) is counted
//!   once, never taken back.
//! - **Indexed Jobs** (`completionMode: Indexed`, as Kubernetes 1.32's Job
//!   controller runs them): pods `{job}-{index}-xxxxx` with hostname
//!   `{job}-{index}`, the index as annotation and label
//!   `batch.kubernetes.io/job-completion-index` and as
//!   `JOB_COMPLETION_INDEX` (downward API, in every container); at most
//!   `parallelism` active, the lowest pending indexes first, each index
//!   succeeding once; `status.completedIndexes` and `status.failedIndexes`
//!   as interval strings (`"1,3-5,7"`), growing only. With
//!   `backoffLimitPerIndex` failures count per index (the replacement's
//!   `batch.kubernetes.io/job-index-failure-count` and
//!   `…-ignored-failure-count`), an index past its limit or matched by a
//!   `FailIndex` rule fails, and the Job fails with `FailedIndexes` once
//!   every index is done, or `MaxFailedIndexesExceeded` at once. The API
//!   server refuses what `ValidateJobSpec` refuses (per-index fields
//!   without Indexed mode, `maxFailedIndexes` without
//!   `backoffLimitPerIndex`, Indexed without `completions`, the limits).
//!   Not modelled: the per-index back-off delay before a retry (a failed
//!   index is retried at once), `successPolicy`, and
//!   `podReplacementPolicy: TerminatingOrFailed` (a terminating pod's
//!   index is replaced once the pod is terminal, as under `Failed`).
//! - **Nodes and scheduler**: nodes are Node objects (labels, taints,
//!   allocatable extended resources); a Pod goes to a ready node whose
//!   taints it tolerates, whose labels match its node selector and whose
//!   free GPUs or TPU chips cover its requests; otherwise it stays Pending
//!   with kube-scheduler's message (`1 node(s) had untolerated taint
//!   {nvidia.com/gpu: present}`, `1 Insufficient nvidia.com/gpu`), and is
//!   tried again as nodes come and go.
//! - **Autoscaler**: [`NodeGroup`]s (the node pools of the fake GKE) grow
//!   when a pending pod would fit one of their nodes and shrink when a node
//!   stays idle, within their bounds; it writes cluster-autoscaler's
//!   `TriggeredScaleUp` (`pod triggered scale-up: [{GROUP 0->1 (max: 3)}]`)
//!   and `NotTriggerScaleUp` (`pod didn't trigger scale-up: 1 node(s)
//!   didn't match Pod's node affinity/selector`) on the pod.
//! - **StatefulSets** (parallel pod management, `ordinals.start`, pods in
//!   a terminal phase deleted and made again silently, as Kubernetes 1.32
//!   does: only `SuccessfulDelete`/`SuccessfulCreate`) and
//!   **LeaderWorkerSet** v0.5.1 once its CustomResourceDefinition is
//!   installed ([`FakeCluster::install_leader_worker_set`] or its
//!   manifests): its webhooks, its CRD's `restartPolicy` enum, a leader
//!   StatefulSet per set and a worker StatefulSet per group, `LWS_*`
//!   variables, group recreation on a pod restart (event
//!   `RecreateGroupOnPodRestart`; `RecreateGroup` under v0.9.0, see
//!   [`FakeCluster::set_leader_worker_set_release`]), status conditions. A group of an API served through a CRD is discovered and
//!   served only while the CRD exists (`404 page not found` otherwise).
//! - **Container restarts**: `restartPolicy: Always` (and `OnFailure` after
//!   a failure) starts an exited container again with a back-off,
//!   counting `restartCount`; `$(VAR)` references in env values, commands
//!   and arguments are expanded as the kubelet does.
//! - Cluster-scoped objects (Namespaces, Nodes, CRDs, cluster roles,
//!   webhook configurations) and Deployments and DaemonSets are stored and
//!   discoverable, so published manifests can be applied.
//! - **Kubelet**: an image whose name holds the configured marker (default
//!   `does-not-exist`) fails to pull; otherwise the container command runs
//!   through the **process runtime** as a local process in its own process
//!   group, with the paths of [`FakeClusterConfig::image_file`] and
//!   [`FakeClusterConfig::map_path`] mapped to host files, the
//!   environment from the pod spec and its Secrets (`envFrom`) plus
//!   [`FakeClusterConfig::env`]; [`PodScript`]s script other outcomes per
//!   job. A deleted pod's main process gets SIGTERM only if it catches it,
//!   as a container's PID 1 does (the kernel drops a signal with its
//!   default action sent to a PID namespace's init): one without a handler
//!   holds the grace period until SIGKILL; the pod then ends in a terminal
//!   phase. The **log server** serves each container's output as the pod's
//!   log. Each pod has its own loopback address (`status.podIP`, and the
//!   downward API's `status.podIP`).
//! - **In-cluster API access**: every container gets
//!   `KUBERNETES_SERVICE_HOST`/`PORT` (this API server), and, unless
//!   `automountServiceAccountToken` is `false`, its service account's token
//!   and namespace in the projected volume at
//!   `/var/run/secrets/kubernetes.io/serviceaccount` (under the pod's mount
//!   root, the runner's `--mount-root`; no `ca.crt`, the server being plain
//!   HTTP): the token acts as `system:serviceaccount:{ns}:{name}` under
//!   RBAC, and is refused (401) once its pod is gone.
//! - **Cluster DNS**: a pod with a hostname and a subdomain that a
//!   headless Service selects is `{hostname}.{subdomain}.{namespace}.svc.cluster.local`
//!   to the Python of every container (the records in a hosts file, read
//!   by a `sitecustomize` module first on the container's `PYTHONPATH`).
//!
//! Modules: `api` (routes) over `store` (objects, versions, watches, and
//! the admission hooks it is built with: the built-in pod plugins of
//! `admission`, the Job checks of `pod_failure_policy`, the StatefulSet
//! checks and LeaderWorkerSet webhooks); `deletion`, `controller` (garbage
//! collector, Job controller), `statefulset`, `lws`, `deployment` and
//! `kubelet` (pod lifecycle, using `scheduler`, `runtime` and `logs`) all
//! work on the store only, driven by one control loop here; the store
//! imports none of them.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use kinetic_fake_gcp::k8s::{FakeCluster, FakeClusterConfig};
//! let cluster = FakeCluster::start(FakeClusterConfig::default()).await?;
//! println!("API server at {}", cluster.url());
//! # Ok(()) }
//! ```

mod admission;
mod api;
mod auth;
mod autoscaler;
mod b64;
mod controller;
mod deletion;
mod deployment;
mod dns;
mod events;
mod faults;
mod gcsfuse;
mod indexes;
mod kubelet;
mod logs;
mod lws;
mod meta;
mod pod_failure_policy;
mod portforward;
mod resources;
mod runtime;
mod scheduler;
mod selector;
mod service_account;
mod statefulset;
mod store;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

pub use api::ApiCalls;
pub use autoscaler::NodeGroup;
pub use faults::ApiFaults;
pub use store::ApiError;

/// An image name a client can be pointed at when no build makes its
/// image: a cluster runs its pods only once told which interpreter the
/// image holds (`FakeClusterConfig::default().image(FAKE_IMAGE, python)`);
/// otherwise, as any image the registry lacks, it cannot be pulled.
pub const FAKE_IMAGE: &str = "fake.registry.invalid/kinetic/runner:latest";

/// The default marker of images that do not exist.
pub const MISSING_IMAGE_MARKER: &str = "does-not-exist";

/// A node of the fake cluster: labels for node selectors, taints, and a
/// capacity of extended resources (`nvidia.com/gpu`, `google.com/tpu`).
/// It is stored as a Node object ([`FakeNode::to_json`]), which the
/// scheduler reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeNode {
    /// Node name.
    pub name: String,
    /// Node labels.
    pub labels: BTreeMap<String, String>,
    /// Extended resources it offers in all (shared by its pods).
    pub capacity: BTreeMap<String, u64>,
    /// Taints: (key, value, effect).
    pub taints: Vec<(String, String, String)>,
}

impl FakeNode {
    /// A CPU-only node.
    pub fn cpu(name: &str) -> Self {
        let mut labels = BTreeMap::new();
        labels.insert("kubernetes.io/hostname".to_owned(), name.to_owned());
        Self {
            name: name.to_owned(),
            labels,
            capacity: BTreeMap::new(),
            taints: Vec::new(),
        }
    }

    /// The same node with a taint (`NoSchedule`, `NoExecute`, `PreferNoSchedule`).
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.taints
            .push((key.to_owned(), value.to_owned(), effect.to_owned()));
        self
    }

    /// The same node under another name (its hostname label follows).
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_owned();
        self.labels
            .insert("kubernetes.io/hostname".to_owned(), name.to_owned());
        self
    }

    /// The Node object, ready, as a kubelet registers it.
    pub fn to_json(&self) -> Value {
        let resources: serde_json::Map<String, Value> = [
            ("cpu".to_owned(), Value::String("4".into())),
            ("memory".to_owned(), Value::String("16Gi".into())),
            ("pods".to_owned(), Value::String("110".into())),
        ]
        .into_iter()
        .chain(
            self.capacity
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.to_string()))),
        )
        .collect();
        let taints: Vec<Value> = self
            .taints
            .iter()
            .map(|(k, v, e)| serde_json::json!({"key": k, "value": v, "effect": e}))
            .collect();
        let now = store::now_rfc3339();
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": self.labels},
            "spec": {"taints": taints},
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "message": "kubelet is posting ready status",
                                "lastHeartbeatTime": now, "lastTransitionTime": now}],
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                              {"type": "Hostname", "address": self.name}],
            },
        })
    }

    /// The same node with a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_owned(), value.to_owned());
        self
    }

    /// The same node offering `count` of an extended resource.
    pub fn capacity(mut self, resource: &str, count: u64) -> Self {
        self.capacity.insert(resource.to_owned(), count);
        self
    }
}

/// A scripted outcome for a job's pod, instead of running its command.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PodScript {
    /// Run the container command (the default).
    Run,
    /// Stay Pending, unschedulable, with this scheduler message.
    Unschedulable {
        /// The scheduler's message.
        message: String,
    },
    /// The image cannot be pulled (`ErrImagePull`, then `ImagePullBackOff`).
    ImagePullError,
    /// Run for `after`, then be killed for memory (`OOMKilled`, exit 137).
    OomKilled {
        /// How long it runs first.
        after: Duration,
    },
    /// Run for `after`, then lose the node (a `DisruptionTarget` condition).
    Preempted {
        /// How long it runs first.
        after: Duration,
    },
    /// Run for `after`, then be evicted with `message`.
    Evicted {
        /// How long it runs first.
        after: Duration,
        /// The eviction message.
        message: String,
    },
    /// Stay `ContainerCreating` this long, then run the command.
    SlowStart(Duration),
    /// Run for `after`, then exit with `code` without running anything.
    Exit {
        /// The exit code.
        code: i32,
        /// How long it runs first.
        after: Duration,
    },
}

/// Settings of a [`FakeCluster`].
#[derive(Debug, Clone)]
pub struct FakeClusterConfig {
    driver_python: PathBuf,
    stand_ins: Vec<(String, PathBuf)>,
    env: BTreeMap<String, String>,
    nodes: Vec<FakeNode>,
    path_map: BTreeMap<String, PathBuf>,
    image_files: Vec<(String, String)>,
    missing_image_marker: String,
    kill_grace: Duration,
    tick: Duration,
    controller: bool,
    port: u16,
    scale_up_delay: Duration,
    scale_down_after: Duration,
    deployment_start: Duration,
    service_accounts: Vec<(String, String)>,
    images: Option<Arc<crate::images::ImageEnvironments>>,
}

impl Default for FakeClusterConfig {
    fn default() -> Self {
        Self {
            driver_python: PathBuf::from("python3"),
            stand_ins: Vec::new(),
            env: BTreeMap::new(),
            nodes: vec![FakeNode::cpu("fake-node-0")],
            path_map: BTreeMap::new(),
            image_files: Vec::new(),
            missing_image_marker: MISSING_IMAGE_MARKER.to_owned(),
            kill_grace: Duration::from_secs(2),
            tick: Duration::from_millis(20),
            controller: true,
            port: 0,
            scale_up_delay: Duration::from_millis(300),
            scale_down_after: Duration::from_secs(600),
            deployment_start: Duration::from_millis(300),
            service_accounts: vec![("default".to_owned(), "kinetic".to_owned())],
            images: None,
        }
    }
}

impl FakeClusterConfig {
    /// The host interpreter the node's own helpers run on (the fake GCS
    /// FUSE driver's mounter; default `python3`). Never a container's: a
    /// container's `python3` is its image's.
    pub fn driver_python(mut self, python: impl Into<PathBuf>) -> Self {
        self.driver_python = python.into();
        self
    }

    /// The fake registry's images (shared with a fake Cloud Build that
    /// builds into them): a pod runs its image's environment (its
    /// `python3`, the files it adds). An image the registry does not hold
    /// cannot be pulled (`ErrImagePull`), whether or not this is set: a
    /// cluster without it holds only the images named with
    /// [`FakeClusterConfig::image`].
    pub fn images(mut self, images: Arc<crate::images::ImageEnvironments>) -> Self {
        self.images = Some(images);
        self
    }

    /// Say explicitly that `image` (one no build makes) runs on `python`
    /// ([`crate::images::ImageEnvironments::add_stand_in`]): its pods'
    /// `python3` is `python`, and its files are the cluster's
    /// ([`FakeClusterConfig::image_file`]). A bare name is looked up on
    /// `PATH`.
    pub fn image(mut self, image: &str, python: impl Into<PathBuf>) -> Self {
        self.stand_ins.push((image.to_owned(), python.into()));
        self
    }

    /// An environment variable every pod process gets (e.g.
    /// `KINETIC_GCS_ENDPOINT`, pointing the runner at a fake GCS server).
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.insert(name.to_owned(), value.to_owned());
        self
    }

    /// Replace the nodes (default: one CPU node, `fake-node-0`).
    pub fn nodes(mut self, nodes: Vec<FakeNode>) -> Self {
        self.nodes = nodes;
        self
    }

    /// A file every image holds at `image_path` (a client's runner, say):
    /// the cluster writes `contents` to a host file and maps the path to
    /// it in container commands, as [`FakeClusterConfig::map_path`] does
    /// (a path mapped there wins).
    pub fn image_file(mut self, image_path: &str, contents: &str) -> Self {
        self.image_files
            .push((image_path.to_owned(), contents.to_owned()));
        self
    }

    /// Map a path inside images to a host path in container commands.
    pub fn map_path(mut self, image_path: &str, host_path: impl Into<PathBuf>) -> Self {
        self.path_map
            .insert(image_path.to_owned(), host_path.into());
        self
    }

    /// Images whose name contains `marker` fail to pull (`""`: none do).
    pub fn missing_image_marker(mut self, marker: &str) -> Self {
        self.missing_image_marker = marker.to_owned();
        self
    }

    /// How long a deleted pod's process has between SIGTERM and SIGKILL.
    pub fn kill_grace(mut self, grace: Duration) -> Self {
        self.kill_grace = grace;
        self
    }

    /// Run the controller, scheduler and kubelet (default true); without
    /// them the cluster is a plain object store (for benchmarks).
    pub fn controller(mut self, run: bool) -> Self {
        self.controller = run;
        self
    }

    /// How long after it is made a Deployment has its pods ready and is
    /// `Available` (default 300 ms): LeaderWorkerSet's controller manager
    /// and webhooks answer only then.
    pub fn deployment_start(mut self, start: Duration) -> Self {
        self.deployment_start = start;
        self
    }

    /// How long the autoscaler takes to add nodes for a pending pod
    /// (default 300 ms; GKE takes minutes).
    pub fn scale_up_delay(mut self, delay: Duration) -> Self {
        self.scale_up_delay = delay;
        self
    }

    /// How long a node of a node group stays idle before the autoscaler
    /// removes it (default 10 minutes, as GKE's `OPTIMIZE_UTILIZATION`).
    pub fn scale_down_after(mut self, after: Duration) -> Self {
        self.scale_down_after = after;
        self
    }

    /// Listen on this loopback port (default 0: any free one).
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// The service accounts the cluster starts with, as `(namespace,
    /// name)`, besides each namespace's `default` (which the cluster makes
    /// itself). Default: `kinetic` in `default`, as `kinetic up` leaves a
    /// cluster; pods whose service account is missing are refused.
    pub fn service_accounts(mut self, accounts: &[(&str, &str)]) -> Self {
        self.service_accounts = accounts
            .iter()
            .map(|(ns, name)| ((*ns).to_owned(), (*name).to_owned()))
            .collect();
        self
    }
}

/// A running fake cluster. Dropping it stops the server and kills every
/// pod process.
#[derive(Debug)]
pub struct FakeCluster {
    url: String,
    store: Arc<store::Store>,
    logs: Arc<logs::LogBook>,
    kubelet: Arc<kubelet::Kubelet>,
    autoscaler: Arc<autoscaler::Autoscaler>,
    calls: Arc<ApiCalls>,
    users: Arc<auth::Users>,
    faults: Arc<ApiFaults>,
    server: tokio::task::JoinHandle<()>,
    controller: Option<tokio::task::JoinHandle<()>>,
    images: Arc<crate::images::ImageEnvironments>,
    _dir: tempfile::TempDir,
}

impl FakeCluster {
    /// Start the API server on 127.0.0.1 and, unless disabled, the
    /// controller and kubelet. Needs a tokio runtime.
    pub async fn start(config: FakeClusterConfig) -> std::io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("kinetic-fake-k8s-")
            .tempdir()?;
        let mut path_map = config.path_map.clone();
        for (i, (image_path, contents)) in config.image_files.iter().enumerate() {
            let name = Path::new(image_path).file_name().ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("image file {image_path:?}: expected a path that names a file"),
                )
            })?;
            let folder = dir.path().join("image-files").join(i.to_string());
            std::fs::create_dir_all(&folder)?;
            let host = folder.join(name);
            std::fs::write(&host, contents)?;
            path_map.entry(image_path.clone()).or_insert(host);
        }
        let pods_root = dir.path().join("pods");
        std::fs::create_dir_all(&pods_root)?;
        // The admission hooks, in the API server's order: the built-in
        // defaults, then the webhooks, then the built-in checks.
        let store = Arc::new(store::Store::with_admission(vec![
            pod_failure_policy::JOB_ADMISSION,
            statefulset::ADMISSION,
            lws::SET_WEBHOOK,
            lws::SCHEMA,
            admission::POD_DEFAULTS,
            lws::POD_WEBHOOK,
            admission::POD_CHECKS,
        ]));
        let logs = Arc::new(logs::LogBook::default());
        let users = Arc::new(auth::Users::default());
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", config.port)).await?;
        let api_address = listener.local_addr()?;
        let images = config
            .images
            .clone()
            .unwrap_or_else(|| Arc::new(crate::images::ImageEnvironments::new(None)));
        for (image, python) in &config.stand_ins {
            images.add_stand_in(image, python);
        }
        let kubelet = Arc::new(kubelet::Kubelet::new(
            kubelet::KubeletConfig {
                driver_python: config.driver_python.clone(),
                path_map,
                extra_env: config.env.clone(),
                missing_image_marker: config.missing_image_marker.clone(),
                kill_grace: config.kill_grace,
                root: pods_root,
                images: images.clone(),
                api: service_account::InClusterApi {
                    host: api_address.ip().to_string(),
                    port: api_address.port(),
                    users: users.clone(),
                },
            },
            logs.clone(),
        ));
        seed(&store);
        for (ns, name) in &config.service_accounts {
            create_service_account(&store, ns, name);
        }
        for node in &config.nodes {
            store
                .create("nodes", "", node.to_json())
                .map_err(|e| std::io::Error::other(e.message))?;
        }
        let autoscaler = Arc::new(autoscaler::Autoscaler::new(autoscaler::AutoscalerTiming {
            scale_up_delay: config.scale_up_delay,
            scale_down_after: config.scale_down_after,
        }));
        let calls = Arc::new(ApiCalls::default());
        let faults = Arc::new(ApiFaults::default());
        let url = format!("http://{api_address}");
        let app = api::router(Arc::new(api::ApiState {
            store: store.clone(),
            users: users.clone(),
            logs: logs.clone(),
            calls: calls.clone(),
            faults: faults.clone(),
        }));
        let server = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!("fake Kubernetes API server stopped: {e}");
            }
        });
        let deployments = Arc::new(deployment::Deployments::new(config.deployment_start));
        let controller = config.controller.then(|| {
            tokio::spawn(control_loop(
                store.clone(),
                kubelet.clone(),
                autoscaler.clone(),
                deployments,
                config.tick,
            ))
        });
        Ok(Self {
            url,
            store,
            logs,
            kubelet,
            autoscaler,
            calls,
            users,
            faults,
            server,
            controller,
            images,
            _dir: dir,
        })
    }

    /// The images this cluster's kubelet can pull: name one more with
    /// [`crate::images::ImageEnvironments::add_stand_in`] (an image a
    /// test's own builder pushed, say).
    pub fn images(&self) -> &Arc<crate::images::ImageEnvironments> {
        &self.images
    }

    /// The API server's URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A kubeconfig (YAML) whose current context points at this cluster,
    /// with `namespace` as the default namespace.
    pub fn kubeconfig(&self, namespace: &str) -> String {
        self.kubeconfig_named("kinetic-fake", namespace)
    }

    /// A kubeconfig whose current context, cluster and user are named
    /// `name` (GKE's `gke_{project}_{zone}_{cluster}`, say).
    pub fn kubeconfig_named(&self, name: &str, namespace: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {url}\ncontexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n    namespace: {namespace}\ncurrent-context: {name}\nusers:\n- name: {name}\n  user:\n    token: fake-token\n",
            url = self.url
        )
    }

    /// Write [`FakeCluster::kubeconfig`] to `path`.
    pub fn write_kubeconfig(&self, path: &Path, namespace: &str) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig(namespace))
    }

    /// A kubeconfig (YAML) whose contexts are `contexts`, each `(name,
    /// server URL)`, with `current` as the current one; every context uses
    /// the token `fake-token` and `namespace`.
    pub fn kubeconfig_with_contexts(
        contexts: &[(&str, &str)],
        current: &str,
        namespace: &str,
    ) -> String {
        let mut clusters = String::new();
        let mut ctxs = String::new();
        let mut users = String::new();
        for (name, url) in contexts {
            clusters.push_str(&format!("- name: {name}\n  cluster:\n    server: {url}\n"));
            ctxs.push_str(&format!(
                "- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n    namespace: {namespace}\n"
            ));
            users.push_str(&format!("- name: {name}\n  user:\n    token: fake-token\n"));
        }
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n{clusters}contexts:\n{ctxs}current-context: {current}\nusers:\n{users}"
        )
    }

    /// What the container of pod `name` in `namespace` wrote so far in
    /// its current start (its log, as `kubectl logs` shows it), if the
    /// pod exists and started.
    pub fn pod_log(&self, namespace: &str, name: &str) -> Option<String> {
        let pod = self.store.get("pods", namespace, name).ok()?;
        self.logs.current(meta::uid_of(&pod))
    }

    /// Register a user: requests with the bearer `token` act as `name`
    /// (group `system:authenticated`), allowed what RBAC bindings give
    /// them. Other tokens act as the cluster's administrator.
    pub fn add_user(&self, name: &str, token: &str) {
        self.users.add(name, token);
    }

    /// Bind `user` to the ClusterRole `role` (`edit`, `view`, `admin`…) in
    /// `namespace`, as `kubectl create rolebinding` does.
    pub fn bind_role(&self, user: &str, role: &str, namespace: &str) -> Result<Value, ApiError> {
        self.store.create(
            "rolebindings.rbac.authorization.k8s.io",
            namespace,
            serde_json::json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": format!("{user}-{role}")},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
            }),
        )
    }

    /// Pods of the job `job_id` (label `job-id`) follow `script`.
    pub fn script_job(&self, job_id: &str, script: PodScript) {
        self.kubelet.script_job(job_id, script);
    }

    /// The next pod without a per-job script follows `script`.
    pub fn script_next(&self, script: PodScript) {
        self.kubelet.script_next(script);
    }

    /// The kubelet of node `node` stops confirming its pods' deletions
    /// (`confirm` false), as an unreachable node's does: a deleted pod
    /// there stays terminating, and whatever waits for it (a foreground
    /// deletion of its owner) waits; `true` makes it confirm again.
    pub fn confirm_deletions(&self, node: &str, confirm: bool) {
        self.kubelet.confirm_deletions(node, confirm);
    }

    /// The API calls made so far.
    pub fn calls(&self) -> &ApiCalls {
        &self.calls
    }

    /// Scripted API failures; the operation names are the verbs `get`,
    /// `list`, `watch`, `create`, `update`, `patch`, `delete` and `log`.
    pub fn faults(&self) -> &ApiFaults {
        &self.faults
    }

    /// Install LeaderWorkerSet (its CustomResourceDefinition, with its
    /// controller and webhooks), as applying its release manifests does;
    /// until then its API group is not served.
    ///
    /// The controller manager is there and ready at once (as long after
    /// an install as its pods take to start).
    pub fn install_leader_worker_set(&self) -> Result<Value, ApiError> {
        create_namespace(&self.store, lws::CONTROLLER_NAMESPACE);
        let mut manager = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": lws::CONTROLLER, "namespace": lws::CONTROLLER_NAMESPACE,
                         "labels": {"control-plane": "controller-manager"}},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "manager", "image": "registry.k8s.io/lws/lws:v0.5.1"}]}}},
        });
        manager["status"] = deployment::status(1, 1);
        let _ = self
            .store
            .create(deployment::RESOURCE, lws::CONTROLLER_NAMESPACE, manager);
        self.store.create(
            "customresourcedefinitions.apiextensions.k8s.io",
            "",
            lws::crd(),
        )
    }

    /// Run LeaderWorkerSet release `version` (`v0.9.0`) instead, as
    /// applying that release's manifests over the installed one does: the
    /// controller manager's image tag, which the fake's controller behaves
    /// by (from v0.9.0 a recreated group is told as `RecreateGroup`, not
    /// `RecreateGroupOnPodRestart`, and `RecreateGroupAfterStart` is a
    /// policy), and the CRD's `restartPolicy` enum.
    pub fn set_leader_worker_set_release(&self, version: &str) {
        let image = format!("registry.k8s.io/lws/lws:{version}");
        self.store.modify(
            deployment::RESOURCE,
            lws::CONTROLLER_NAMESPACE,
            lws::CONTROLLER,
            |d| {
                d["spec"]["template"]["spec"]["containers"] =
                    serde_json::json!([{"name": "manager", "image": image}])
            },
        );
        let policies = if lws::release(&self.store) >= (0, 9, 0) {
            lws::RESTART_POLICIES_V0_9
        } else {
            lws::RESTART_POLICIES_V0_5
        };
        self.store.modify(
            "customresourcedefinitions.apiextensions.k8s.io",
            "",
            lws::CRD,
            |c| c["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = lws::schema(policies),
        );
    }

    /// Every object of `resource` (`jobs.batch`, `pods`, `secrets`,
    /// `events`, `leaderworkersets.leaderworkerset.x-k8s.io`) in `namespace`.
    pub fn objects(&self, resource: &str, namespace: &str) -> Vec<Value> {
        self.store
            .all(resource)
            .into_iter()
            .filter(|o| meta::ns_of(o) == namespace)
            .collect()
    }

    /// One object, if it exists.
    pub fn object(&self, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        self.store.get(resource, namespace, name).ok()
    }

    /// Store an object directly, as the API server would on create
    /// (for setting up large states quickly, e.g. in benchmarks).
    pub fn insert(
        &self,
        resource: &str,
        namespace: &str,
        object: Value,
    ) -> Result<Value, ApiError> {
        self.store.create(resource, namespace, object)
    }

    /// Remove an object directly (a test taking it away); `namespace` is
    /// empty for cluster-scoped objects.
    pub fn remove_object(&self, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        self.store.remove(resource, namespace, name)
    }

    /// Merge-patch an object directly (e.g. to set a Job's status).
    pub fn patch(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Value, ApiError> {
        self.store.patch(resource, namespace, name, patch)
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.store.resource_version()
    }

    /// Register a node (as its kubelet would).
    pub fn add_node(&self, node: &FakeNode) -> Result<Value, ApiError> {
        self.store.create("nodes", "", node.to_json())
    }

    /// Delete the Node `name`, as GKE does when it reclaims a Spot VM or
    /// removes a node: its pods are orphaned, and the pod garbage
    /// collector force-deletes them (see the controller's `gcOrphaned`).
    pub fn delete_node(&self, name: &str) -> Option<Value> {
        self.store.remove("nodes", "", name)
    }

    /// Evict pod `name` as the Eviction API does (`POST
    /// pods/{name}/eviction`, which this API server serves too), as
    /// `kubectl drain` or the cluster autoscaler do.
    pub fn evict(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        deletion::evict(&self.store, namespace, name)
    }

    /// The kubelet running pod `name` evicts it under node pressure (a
    /// hard eviction): its containers killed at once, the pod `Failed` with
    /// reason `Evicted` and `message`, marked `DisruptionTarget`; what
    /// owns the pod sees it ended (a StatefulSet deletes and makes it
    /// again). `false` when no kubelet runs it.
    pub fn evict_by_kubelet(&self, namespace: &str, name: &str, message: &str) -> bool {
        self.kubelet
            .evict_now(&self.store, namespace, name, message)
    }

    /// Every Node object.
    pub fn nodes(&self) -> Vec<Value> {
        self.store.all("nodes")
    }

    /// Let the autoscaler size `group` between its bounds, starting with
    /// `initial` nodes (as GKE does for a new node pool).
    pub fn set_node_group(&self, group: NodeGroup, initial: u32) {
        self.autoscaler.add_nodes(&self.store, &group, initial);
        self.autoscaler.set_group(group);
    }

    /// Remove the node group `name` and its nodes (its pool was deleted).
    pub fn remove_node_group(&self, name: &str) {
        self.autoscaler.remove_group(&self.store, name);
    }

    /// Forget everything: every object, node and node group goes, every
    /// pod process is killed; the cluster is as new, without nodes (its
    /// control plane was deleted and made again).
    pub fn reset(&self) {
        self.autoscaler.clear();
        self.kubelet.kill_all();
        self.store.clear();
        seed(&self.store);
    }
}

/// Where kube-scheduler, as this fake models it, would put `pod` among
/// `nodes` (Node objects, none of them running anything yet): the node's
/// name, or the `FailedScheduling` message.
pub fn schedule(nodes: &[Value], pod: &Value) -> Result<String, String> {
    scheduler::place(nodes, pod, &BTreeMap::new())
}

/// The namespaces every cluster starts with.
const NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// A namespace, as the API server makes it (labelled with its name), unless it exists.
fn create_namespace(store: &store::Store, name: &str) {
    let _ = store.create(
        "namespaces",
        "",
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name,
                               "labels": {"kubernetes.io/metadata.name": name}},
                           "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
    );
}

fn seed(store: &store::Store) {
    for ns in NAMESPACES {
        create_namespace(store, ns);
    }
    auth::seed_roles(store);
    controller::default_service_accounts(store);
}

/// A service account (and its namespace, if missing), as `kinetic up`
/// leaves them.
fn create_service_account(store: &store::Store, namespace: &str, name: &str) {
    create_namespace(store, namespace);
    let _ = store.create(
        "serviceaccounts",
        namespace,
        serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}),
    );
}

/// The control plane, the kubelet and the autoscaler, until the task is
/// aborted: after every change (or every `tick`), one pass of the garbage
/// collector and the Job controller, of the kubelet over every pod, then
/// of the autoscaler.
async fn control_loop(
    store: Arc<store::Store>,
    kubelet: Arc<kubelet::Kubelet>,
    autoscaler: Arc<autoscaler::Autoscaler>,
    deployments: Arc<deployment::Deployments>,
    tick: Duration,
) {
    loop {
        let changed = store.changed.notified();
        deployments.reconcile(&store);
        controller::reconcile_cluster(&store);
        lws::reconcile(&store);
        statefulset::reconcile(&store);
        controller::reconcile_jobs(&store);
        kubelet.reconcile(&store);
        autoscaler.reconcile(&store);
        tokio::select! {
            () = changed => tokio::time::sleep(Duration::from_millis(2)).await,
            () = tokio::time::sleep(tick) => {}
        }
    }
}

impl Drop for FakeCluster {
    fn drop(&mut self) {
        if let Some(c) = &self.controller {
            c.abort();
        }
        self.server.abort();
        self.kubelet.kill_all();
    }
}
