//! The fake kubelet: each Pod is placed by the [scheduler]
//! (or left unschedulable with its message), then either runs its container
//! command through the [process runtime](super::runtime) — the image's
//! runner path mapped to the real runner, the environment from the pod spec
//! and its Secrets — or follows a scripted outcome. Pod status, conditions
//! and events are written as the real kubelet writes them; each container
//! start is recorded in the [log server](super::logs)'s book. GCS FUSE CSI
//! volumes are mounted as the [driver](super::gcsfuse) mounts them (and
//! not at all without its sidecar annotation).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use super::PodScript;
use super::b64;
use super::dns;
use super::events;
use super::gcsfuse;
use super::logs::{LogBook, container_name};
use super::meta::{name_of, ns_of, str_at, uid_of};
use super::runtime::{self, ExitCell, ProcessSpec, exit_code, kill_group, record_exit};
use super::scheduler;
use super::service_account::InClusterApi;
use super::store::{Store, now_rfc3339};
use crate::images::{ImageEnvironment, ImageEnvironments};

/// Settings of the kubelet.
#[derive(Debug, Clone)]
pub(crate) struct KubeletConfig {
    /// The host interpreter of the node's helpers (the GCS FUSE mounter);
    /// never a container's.
    pub(crate) driver_python: PathBuf,
    pub(crate) path_map: BTreeMap<String, PathBuf>,
    pub(crate) extra_env: BTreeMap<String, String>,
    pub(crate) missing_image_marker: String,
    pub(crate) kill_grace: Duration,
    pub(crate) root: PathBuf,
    /// The fake registry's images: a pod runs its image's environment,
    /// and an image the registry lacks cannot be pulled.
    pub(crate) images: Arc<ImageEnvironments>,
    /// The API server as pods reach it (variables and token volume).
    pub(crate) api: InClusterApi,
}

#[derive(Debug, Clone, PartialEq)]
enum Decision {
    /// Scripted: never scheduled, with this message.
    Unschedulable(String),
    /// No node fits yet (the scheduler's message); tried again every pass.
    Waiting(String),
    /// Scheduled; runs as the script says.
    Script(PodScript),
    /// Ended by the kubelet itself (a hard eviction): nothing more to do.
    Ended,
}

/// What the kubelet keeps of one pod.
#[derive(Debug)]
struct PodRuntime {
    uid: String,
    namespace: String,
    name: String,
    decision: Decision,
    /// The script for when the pod is scheduled.
    script: Option<PodScript>,
    node: String,
    since: Instant,
    dir: PathBuf,
    pgid: Option<i32>,
    exit: ExitCell,
    killing: bool,
    events: Vec<&'static str>,
    /// Container restarts so far (`restartPolicy: Always`, or `OnFailure`
    /// after a failure).
    restarts: u32,
    /// When the exited container is started again.
    restart_at: Option<Instant>,
}

#[derive(Debug, Default)]
struct Scripts {
    by_job: BTreeMap<String, PodScript>,
    next: VecDeque<PodScript>,
}

/// The kubelet of every fake node.
#[derive(Debug)]
pub(crate) struct Kubelet {
    config: KubeletConfig,
    scripts: Mutex<Scripts>,
    pods: Mutex<BTreeMap<String, PodRuntime>>,
    logs: Arc<LogBook>,
    /// Nodes whose kubelet no longer confirms deletions (unreachable): a
    /// pod deleted there stays terminating, its containers as they were.
    unconfirmed: Mutex<BTreeSet<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether the pod ended (`Succeeded` or `Failed`).
fn ended(pod: &Value) -> bool {
    matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    )
}

fn container(pod: &Value) -> Value {
    pod.pointer("/spec/containers/0")
        .cloned()
        .unwrap_or(json!({}))
}

fn image_of(pod: &Value) -> String {
    container(pod)
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn cond(kind: &str, status: bool, reason: Option<&str>, message: Option<&str>) -> Value {
    let mut c = json!({"type": kind, "status": if status { "True" } else { "False" },
                       "lastProbeTime": null, "lastTransitionTime": now_rfc3339()});
    if let Some(r) = reason {
        c["reason"] = json!(r);
    }
    if let Some(m) = message {
        c["message"] = json!(m);
    }
    c
}

impl Kubelet {
    /// A kubelet recording container starts in `logs`.
    pub(crate) fn new(config: KubeletConfig, logs: Arc<LogBook>) -> Self {
        Self {
            config,
            scripts: Mutex::default(),
            pods: Mutex::default(),
            logs,
            unconfirmed: Mutex::default(),
        }
    }

    /// The kubelet of `node` stops (`true`) or goes back to (`false`)
    /// confirming the deletion of its pods.
    pub(crate) fn confirm_deletions(&self, node: &str, confirm: bool) {
        let mut nodes = lock(&self.unconfirmed);
        if confirm {
            nodes.remove(node);
        } else {
            nodes.insert(node.to_owned());
        }
    }

    pub(crate) fn script_job(&self, job_id: &str, script: PodScript) {
        lock(&self.scripts).by_job.insert(job_id.to_owned(), script);
    }

    pub(crate) fn script_next(&self, script: PodScript) {
        lock(&self.scripts).next.push_back(script);
    }

    /// Kill every process still running (the cluster is going away).
    pub(crate) fn kill_all(&self) {
        for rt in lock(&self.pods).values() {
            if let (Some(pgid), None) = (rt.pgid, exit_code(&rt.exit)) {
                kill_group(pgid, Signal::SIGKILL);
            }
        }
    }

    /// The pod's script (per job, else the next queued one), taken once.
    fn script_of(&self, pod: &Value) -> Option<PodScript> {
        let job_id = pod
            .pointer("/metadata/labels/job-id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let mut s = lock(&self.scripts);
        s.by_job
            .get(&job_id)
            .cloned()
            .or_else(|| s.next.pop_front())
    }

    /// What a scheduled pod does: its script, else run; an image marked
    /// missing or that the registry does not hold is never pulled.
    fn run_decision(&self, pod: &Value, script: Option<PodScript>) -> Decision {
        if let Some(s) = script {
            return Decision::Script(s);
        }
        if !self.config.missing_image_marker.is_empty()
            && image_of(pod).contains(&self.config.missing_image_marker)
        {
            return Decision::Script(PodScript::ImagePullError);
        }
        if self.config.images.get(&image_of(pod)).is_none() {
            return Decision::Script(PodScript::ImagePullError);
        }
        Decision::Script(PodScript::Run)
    }

    /// Evict pod `ns/name` as the kubelet's eviction manager does under node
    /// pressure (a hard eviction, no grace): its containers are killed and
    /// it ends `Failed`, reason `Evicted` with `message`, with a
    /// `DisruptionTarget` condition (`TerminationByKubelet`), whatever its
    /// `restartPolicy`: a pod evicted so is not restarted. `false` when the
    /// kubelet does not run the pod (not scheduled, already ended).
    pub(crate) fn evict_now(&self, store: &Store, ns: &str, name: &str, message: &str) -> bool {
        let Ok(pod) = store.get("pods", ns, name) else {
            return false;
        };
        let mut rts = lock(&self.pods);
        let Some(rt) = rts.get_mut(uid_of(&pod)) else {
            return false;
        };
        if !matches!(rt.decision, Decision::Script(_)) {
            return false;
        }
        rt.decision = Decision::Ended;
        if let Some(pgid) = rt.pgid {
            kill_group(pgid, Signal::SIGKILL);
        }
        record_exit(&rt.exit, 137);
        let (cname, image) = (container_name(&pod), image_of(&pod));
        store.modify("pods", ns, name, |p| {
            terminated(p, &cname, &image, 137, "ContainerStatusUnknown");
            p["status"]["reason"] = json!("Evicted");
            p["status"]["message"] = json!(message);
            mark_disrupted(p, Some("TerminationByKubelet"), Some(message));
        });
        true
    }

    /// Bring every pod one step closer to what its decision says.
    pub(crate) fn reconcile(&self, store: &Store) {
        let live = store.uids("pods");
        // A pod that ended has nothing left for the kubelet to do unless
        // it is being deleted.
        let pods = store.all_where("pods", |p| {
            p.pointer("/metadata/deletionTimestamp").is_some() || !ended(p)
        });
        {
            // Forget pods that are gone.
            let mut rts = lock(&self.pods);
            let gone: Vec<String> = rts.keys().filter(|u| !live.contains(*u)).cloned().collect();
            for uid in gone {
                if let Some(rt) = rts.remove(&uid) {
                    if let (Some(pgid), None) = (rt.pgid, exit_code(&rt.exit)) {
                        kill_group(pgid, Signal::SIGKILL);
                    }
                    self.logs.forget(&uid);
                    self.config.api.forget(&uid);
                    let _ = std::fs::remove_dir_all(&rt.dir);
                }
            }
        }
        for pod in pods {
            self.step(store, &pod);
        }
        // The cluster's DNS answers the addresses pods have now; a pod that
        // looks a name up before its record is there asks again, as on a
        // real cluster.
        let _ = dns::publish(store, &self.config.root);
    }

    fn step(&self, store: &Store, pod: &Value) {
        let uid = uid_of(pod).to_owned();
        let (ns, name) = (ns_of(pod).to_owned(), name_of(pod).to_owned());
        if pod.pointer("/metadata/deletionTimestamp").is_some() {
            let node = str_at(pod, "/spec/nodeName").unwrap_or_default();
            if lock(&self.unconfirmed).contains(node) {
                return;
            }
            self.terminate(store, &uid, &ns, &name);
            return;
        }
        let phase = pod
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("Pending")
            .to_owned();
        if matches!(phase.as_str(), "Succeeded" | "Failed") {
            return;
        }
        let mut rts = lock(&self.pods);
        let rt = rts.entry(uid.clone()).or_insert_with(|| {
            let script = self.script_of(pod);
            let decision = match &script {
                Some(PodScript::Unschedulable { message }) => {
                    Decision::Unschedulable(message.clone())
                }
                _ => Decision::Waiting(String::new()),
            };
            PodRuntime {
                uid: uid.clone(),
                namespace: ns.clone(),
                name: name.clone(),
                decision,
                script,
                node: String::new(),
                since: Instant::now(),
                dir: self.config.root.join(&uid),
                pgid: None,
                exit: Arc::default(),
                killing: false,
                events: Vec::new(),
                restarts: 0,
                restart_at: None,
            }
        });
        if let Decision::Waiting(_) = rt.decision {
            // The scheduler tries again: nodes come and go (autoscaling).
            // What ended holds no node's resources (see `scheduler::usage`).
            let pods = store.all_where("pods", |p| !ended(p));
            match scheduler::place(&store.all("nodes"), pod, &scheduler::usage(&pods)) {
                Ok(node) => {
                    rt.node = node;
                    rt.since = Instant::now();
                    rt.decision = self.run_decision(pod, rt.script.take());
                }
                Err(message) => rt.decision = Decision::Waiting(message),
            }
        }
        let elapsed = rt.since.elapsed();
        let cname = container_name(pod);
        let image = image_of(pod);
        match rt.decision.clone() {
            Decision::Unschedulable(message) | Decision::Waiting(message) => {
                let marked = pod
                    .pointer("/status/conditions/0/message")
                    .and_then(Value::as_str)
                    == Some(message.as_str());
                if marked {
                    return;
                }
                store.modify("pods", &ns, &name, |p| {
                    p["status"]["phase"] = json!("Pending");
                    p["status"]["conditions"] = json!([cond(
                        "PodScheduled",
                        false,
                        Some("Unschedulable"),
                        Some(&message)
                    )]);
                });
                once_event(store, rt, pod, "FailedScheduling", "Warning", &message);
            }
            Decision::Ended => {}
            Decision::Script(script) => {
                if pod.pointer("/spec/nodeName").is_none() {
                    let node = rt.node.clone();
                    store.modify("pods", &ns, &name, |p| {
                        p["spec"]["nodeName"] = json!(node);
                        p["status"]["hostIP"] = json!("127.0.0.1");
                        p["status"]["conditions"] = json!([cond("PodScheduled", true, None, None)]);
                    });
                    let msg = format!("Successfully assigned {ns}/{name} to {}", rt.node);
                    once_event(store, rt, pod, "Scheduled", "Normal", &msg);
                }
                self.advance(store, rt, pod, &script, elapsed, &cname, &image);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn advance(
        &self,
        store: &Store,
        rt: &mut PodRuntime,
        pod: &Value,
        script: &PodScript,
        elapsed: Duration,
        cname: &str,
        image: &str,
    ) {
        let (ns, name) = (rt.namespace.clone(), rt.name.clone());
        let waiting = |reason: &str, message: &str| {
            json!([{"name": cname, "image": image, "imageID": "", "ready": false, "restartCount": 0,
                    "started": false, "state": {"waiting": {"reason": reason, "message": message}}}])
        };
        match script {
            PodScript::ImagePullError => {
                let message = format!(
                    "rpc error: code = NotFound desc = failed to pull and unpack image \"{image}\": not found"
                );
                let (reason, message) = if elapsed < Duration::from_millis(500) {
                    ("ErrImagePull", message)
                } else {
                    (
                        "ImagePullBackOff",
                        format!("Back-off pulling image \"{image}\""),
                    )
                };
                let statuses = waiting(reason, &message);
                store.modify("pods", &ns, &name, |p| {
                    p["status"]["phase"] = json!("Pending");
                    p["status"]["containerStatuses"] = statuses;
                });
                let text = format!("Failed to pull image \"{image}\": not found");
                once_event(store, rt, pod, "Failed", "Warning", &text);
            }
            PodScript::SlowStart(delay) if elapsed < *delay => {
                let statuses = waiting("ContainerCreating", "");
                store.modify("pods", &ns, &name, |p| {
                    p["status"]["phase"] = json!("Pending");
                    p["status"]["containerStatuses"] = statuses;
                });
            }
            PodScript::Run | PodScript::SlowStart(_) | PodScript::Unschedulable { .. } => {
                self.run_process(store, rt, pod, cname, image)
            }
            PodScript::OomKilled { after }
            | PodScript::Preempted { after }
            | PodScript::Evicted { after, .. }
            | PodScript::Exit { after, .. } => {
                if self.logs.starts(&rt.uid) == 0 {
                    let _ = std::fs::create_dir_all(&rt.dir);
                    let log = rt.dir.join(format!("{cname}-0.log"));
                    let _ = std::fs::write(&log, "");
                    self.logs.started(&rt.uid, log, rt.exit.clone(), false);
                }
                if elapsed < *after {
                    set_running(store, &ns, &name, cname, image);
                    return;
                }
                let (exit, reason, pod_reason, pod_message, disruption) = match script {
                    PodScript::OomKilled { .. } => (137, "OOMKilled", None, None, None),
                    PodScript::Preempted { .. } => (
                        137,
                        "Error",
                        Some("Terminated"),
                        Some("Pod was terminated in response to imminent node shutdown."),
                        Some("TerminationByKubelet"),
                    ),
                    PodScript::Evicted { message, .. } => (
                        137,
                        "Error",
                        Some("Evicted"),
                        Some(message.as_str()),
                        Some("TerminationByKubelet"),
                    ),
                    PodScript::Exit { code, .. } => (*code, "Error", None, None, None),
                    _ => (137, "Error", None, None, None),
                };
                // A disruption is announced before the containers are
                // stopped: the pod keeps running, marked with its
                // `DisruptionTarget` condition, for its grace period.
                if disruption.is_some() && elapsed < *after + self.config.kill_grace {
                    set_running(store, &ns, &name, cname, image);
                    store.modify("pods", &ns, &name, |p| {
                        mark_disrupted(p, disruption, pod_message)
                    });
                    return;
                }
                record_exit(&rt.exit, 137);
                let exit_reason = if exit == 0 { "Completed" } else { reason };
                store.modify("pods", &ns, &name, |p| {
                    terminated(p, cname, image, exit, exit_reason);
                    if let Some(r) = pod_reason {
                        p["status"]["reason"] = json!(r);
                    }
                    if let Some(m) = pod_message {
                        p["status"]["message"] = json!(m);
                    }
                    mark_disrupted(p, disruption, pod_message);
                });
            }
        }
    }

    fn run_process(
        &self,
        store: &Store,
        rt: &mut PodRuntime,
        pod: &Value,
        cname: &str,
        image: &str,
    ) {
        let (ns, name) = (rt.namespace.clone(), rt.name.clone());
        if rt.restart_at.is_some_and(|at| Instant::now() >= at) {
            // The back-off is over: the container starts again.
            rt.restarts += 1;
            rt.restart_at = None;
            rt.pgid = None;
            rt.exit = ExitCell::default();
        }
        let first = self.logs.starts(&rt.uid) == 0;
        if rt.pgid.is_none() && rt.restart_at.is_none() && (first || rt.restarts > 0) {
            match self.spawn(store, rt, pod) {
                Ok(()) => {
                    let msg = format!("Started container {cname}");
                    once_event(store, rt, pod, "Started", "Normal", &msg);
                }
                Err(SpawnError::Config(message)) => {
                    let statuses = json!([{"name": cname, "image": image, "imageID": "", "ready": false,
                        "restartCount": 0, "started": false,
                        "state": {"waiting": {"reason": "CreateContainerConfigError", "message": message}}}]);
                    store.modify("pods", &ns, &name, |p| {
                        p["status"]["phase"] = json!("Pending");
                        p["status"]["containerStatuses"] = statuses;
                    });
                    return;
                }
                Err(SpawnError::Mount(message)) => {
                    once_event(store, rt, pod, "FailedMount", "Warning", &message);
                    let statuses = json!([{"name": cname, "image": image, "imageID": "", "ready": false,
                        "restartCount": 0, "started": false,
                        "state": {"waiting": {"reason": "ContainerCreating"}}}]);
                    store.modify("pods", &ns, &name, |p| {
                        p["status"]["phase"] = json!("Pending");
                        p["status"]["containerStatuses"] = statuses;
                    });
                    return;
                }
                Err(SpawnError::Start(message)) => {
                    let statuses = json!([{"name": cname, "image": image, "imageID": "", "ready": false,
                        "restartCount": 0, "started": false,
                        "state": {"waiting": {"reason": "RunContainerError", "message": message}}}]);
                    store.modify("pods", &ns, &name, |p| {
                        p["status"]["containerStatuses"] = statuses;
                    });
                    return;
                }
            }
        }
        match exit_code(&rt.exit) {
            None if rt.restarts > 0 => set_restarted(store, &ns, &name, cname, rt.restarts),
            None => set_running(store, &ns, &name, cname, image),
            Some(_) if rt.restart_at.is_some() => {}
            Some(code) if restarts_after(pod, code) => {
                // The kubelet's back-off (10 s doubling to 5 min), scaled
                // down: the first restart at once, then 1 s doubling to 10 s.
                // `restartCount` goes up when the container starts again.
                let backoff = match rt.restarts {
                    0 => Duration::ZERO,
                    n => Duration::from_secs(1u64 << (n - 1).min(3)).min(Duration::from_secs(10)),
                };
                rt.restart_at = Some(Instant::now() + backoff);
                let reason = if code == 0 { "Completed" } else { "Error" };
                let restarts = rt.restarts;
                let uid = rt.uid.clone();
                store.modify("pods", &ns, &name, |p| {
                    crash_loop(p, cname, image, code, reason, restarts, &uid)
                });
                let msg = format!(
                    "Back-off restarting failed container {cname} in pod {name}_{ns}({uid})"
                );
                events::record(
                    store,
                    pod,
                    events::Event {
                        kind: "Warning",
                        reason: "BackOff",
                        message: &msg,
                        component: "kubelet",
                    },
                );
            }
            Some(code) => {
                let reason = if code == 0 { "Completed" } else { "Error" };
                store.modify("pods", &ns, &name, |p| {
                    terminated(p, cname, image, code, reason)
                });
            }
        }
    }

    fn spawn(&self, store: &Store, rt: &mut PodRuntime, pod: &Value) -> Result<(), SpawnError> {
        let c = container(pod);
        let fuse_mounts = gcsfuse::mounts(pod, &c);
        if let Some(why) = gcsfuse::mount_failure(pod, &fuse_mounts) {
            return Err(SpawnError::Mount(why));
        }
        let ns = rt.namespace.clone();
        // Environment: the API server's address, envFrom, then env (env
        // wins), as the kubelet does.
        let mut env: BTreeMap<String, String> = self.config.extra_env.clone();
        env.extend(self.config.api.env());
        for from in c
            .get("envFrom")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(secret) = from.pointer("/secretRef/name").and_then(Value::as_str) {
                let optional =
                    from.pointer("/secretRef/optional").and_then(Value::as_bool) == Some(true);
                match store.get("secrets", &ns, secret) {
                    Ok(s) => {
                        for (k, v) in s
                            .get("data")
                            .and_then(Value::as_object)
                            .into_iter()
                            .flatten()
                        {
                            let bytes = v.as_str().and_then(b64::decode).unwrap_or_default();
                            env.insert(k.clone(), String::from_utf8_lossy(&bytes).into_owned());
                        }
                    }
                    Err(_) if optional => {}
                    Err(_) => {
                        return Err(SpawnError::Config(format!("secret \"{secret}\" not found")));
                    }
                }
            }
        }
        for e in c.get("env").and_then(Value::as_array).into_iter().flatten() {
            let Some(key) = e.get("name").and_then(Value::as_str) else {
                continue;
            };
            if let Some(v) = e.get("value").and_then(Value::as_str) {
                let v = expand(v, &env);
                env.insert(key.to_owned(), v);
            } else if let Some(field) = e
                .pointer("/valueFrom/fieldRef/fieldPath")
                .and_then(Value::as_str)
            {
                let v = match field {
                    "metadata.name" => rt.name.clone(),
                    "metadata.namespace" => ns.clone(),
                    "status.podIP" => pod_ip(&ns, &rt.name),
                    "status.hostIP" => "127.0.0.1".to_owned(),
                    other => downward_map_field(pod, other).unwrap_or_default(),
                };
                env.insert(key.to_owned(), v);
            } else if let Some(sel) = e.pointer("/valueFrom/secretKeyRef") {
                let secret = sel.get("name").and_then(Value::as_str).unwrap_or_default();
                let k = sel.get("key").and_then(Value::as_str).unwrap_or_default();
                let value = store.get("secrets", &ns, secret).ok().and_then(|s| {
                    s.pointer(&format!("/data/{k}"))
                        .and_then(Value::as_str)
                        .and_then(b64::decode)
                });
                match value {
                    Some(b) => {
                        env.insert(key.to_owned(), String::from_utf8_lossy(&b).into_owned());
                    }
                    None => {
                        return Err(SpawnError::Config(format!(
                            "couldn't find key {k} in Secret {ns}/{secret}"
                        )));
                    }
                }
            }
        }
        // The cluster's names resolve in the container's Python (see `dns`).
        let python_path =
            dns::python_path(&self.config.root, env.get("PYTHONPATH").map(String::as_str));
        let mut argv: Vec<String> = Vec::new();
        for field in ["command", "args"] {
            for a in c.get(field).and_then(Value::as_array).into_iter().flatten() {
                argv.push(expand(a.as_str().unwrap_or_default(), &env));
            }
        }
        if argv.is_empty() {
            return Err(SpawnError::Start(
                "the fake kubelet needs a container command (images have no entrypoint here)"
                    .into(),
            ));
        }
        // The image's environment (its `python3`, the files it adds).
        let image = self.config.images.get(&image_of(pod)).ok_or_else(|| {
            SpawnError::Start(format!("the image {} is not pulled", image_of(pod)))
        })?;
        let mut mapped_runner = false;
        let mut argv: Vec<String> = argv
            .into_iter()
            .map(|a| {
                let host = image
                    .file(&a)
                    .or_else(|| self.image_runner_stand_in(&image, &a));
                match host {
                    Some(host) => {
                        mapped_runner = true;
                        host.to_string_lossy().into_owned()
                    }
                    None => a,
                }
            })
            .collect();
        if argv[0] == "python3" || argv[0] == "python" {
            argv[0] = image.python.to_string_lossy().into_owned();
        }
        for (k, v) in &image.env {
            env.entry(k.clone()).or_insert_with(|| v.clone());
        }
        let dir = rt.dir.clone();
        for sub in ["work", "mounts", "home"] {
            std::fs::create_dir_all(dir.join(sub))
                .map_err(|e| SpawnError::Start(format!("{}: {e}", dir.display())))?;
        }
        self.config
            .api
            .mount_token(store, &ns, &rt.uid, pod, &dir.join("mounts"))
            .map_err(|e| {
                SpawnError::Mount(format!(
                    "MountVolume.SetUp failed for volume \"kube-api-access\": {e}"
                ))
            })?;
        if mapped_runner {
            argv.extend([
                "--workdir".to_owned(),
                dir.join("work").to_string_lossy().into_owned(),
                "--mount-root".to_owned(),
                dir.join("mounts").to_string_lossy().into_owned(),
            ]);
        }
        if !fuse_mounts.is_empty() {
            let endpoint = env
                .get("KINETIC_GCS_ENDPOINT")
                .cloned()
                .ok_or_else(|| {
                    SpawnError::Mount(
                        "MountVolume.SetUp failed: the fake GCS FUSE driver needs the fake GCS server (KINETIC_GCS_ENDPOINT in the cluster's env)".into(),
                    )
                })?;
            argv = gcsfuse::wrap(
                argv,
                &fuse_mounts,
                &endpoint,
                &self.config.driver_python,
                &dir,
                &dir.join("mounts"),
            )
            .map_err(SpawnError::Start)?;
        }
        let log = dir.join(format!(
            "{}-{}.log",
            container_name(pod),
            self.logs.starts(&rt.uid)
        ));
        dns::publish(store, &self.config.root)
            .map_err(|e| SpawnError::Start(format!("the cluster's DNS records: {e}")))?;
        env.insert("PYTHONPATH".to_owned(), python_path);
        let spec = ProcessSpec {
            argv: &argv,
            env: &env,
            home: dir.join("home"),
            hostname: str_at(pod, "/spec/hostname")
                .filter(|h| !h.is_empty())
                .unwrap_or(&rt.name),
            cwd: c
                .get("workingDir")
                .and_then(Value::as_str)
                .map_or_else(|| dir.join("work"), PathBuf::from),
            log: &log,
            bin: Some(&image.bin),
        };
        rt.pgid = runtime::start(&spec, rt.exit.clone()).map_err(SpawnError::Start)?;
        self.logs.started(&rt.uid, log, rt.exit.clone(), true);
        Ok(())
    }

    /// A stand-in image (named by a test, no build made it) holds no files
    /// of its own: its runner is the cluster's (the mapped paths).
    fn image_runner_stand_in(&self, image: &ImageEnvironment, arg: &str) -> Option<PathBuf> {
        if image.root.is_some() {
            return None;
        }
        self.config.path_map.get(arg).cloned()
    }

    /// A pod being deleted: stop its process (TERM, then KILL after the
    /// grace period), then remove it (a finalizer keeps it, in a terminal
    /// phase, until removed: see [`super::deletion::remove_pod`]).
    fn terminate(&self, store: &Store, uid: &str, ns: &str, name: &str) {
        let mut rts = lock(&self.pods);
        let running = rts
            .get(uid)
            .and_then(|rt| rt.pgid.filter(|_| exit_code(&rt.exit).is_none()));
        match (running, rts.get_mut(uid)) {
            (Some(pgid), Some(rt)) => {
                if !rt.killing {
                    rt.killing = true;
                    runtime::stop(pgid, self.config.kill_grace, rt.exit.clone());
                }
            }
            _ => {
                let code = rts.remove(uid).and_then(|rt| {
                    self.logs.forget(uid);
                    self.config.api.forget(uid);
                    let _ = std::fs::remove_dir_all(&rt.dir);
                    rt.pgid.and(exit_code(&rt.exit))
                });
                drop(rts);
                // The kubelet ends a deleted pod's phase (since 1.27):
                // what a finalizer keeps visible has its container's end.
                if let Some(code) = code
                    && let Ok(pod) = store.get("pods", ns, name)
                    && !matches!(str_at(&pod, "/status/phase"), Some("Succeeded" | "Failed"))
                {
                    let (cname, image) = (container_name(&pod), image_of(&pod));
                    let reason = if code == 0 { "Completed" } else { "Error" };
                    store.modify("pods", ns, name, |p| {
                        // The disruption that deleted it stays told.
                        let disrupted: Vec<Value> = p
                            .pointer("/status/conditions")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .filter(|c| c["type"] == "DisruptionTarget")
                            .cloned()
                            .collect();
                        terminated(p, &cname, &image, code, reason);
                        if let Some(Value::Array(cs)) = p.pointer_mut("/status/conditions") {
                            cs.extend(disrupted);
                        }
                    });
                }
                super::deletion::remove_pod(store, ns, name);
            }
        }
    }
}

/// `$(NAME)` references in `text` replaced by the variables defined so far,
/// as the kubelet expands env values, commands and arguments: `$$` is a
/// literal `$`, and a reference to an undefined name is kept as written.
fn expand(text: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(end) = inner.find(')')
        {
            let name = &inner[..end];
            match env.get(name) {
                Some(v) => out.push_str(v),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[derive(Debug)]
enum SpawnError {
    Config(String),
    Start(String),
    /// A volume cannot be mounted (the `FailedMount` event's message).
    Mount(String),
}

fn once_event(
    store: &Store,
    rt: &mut PodRuntime,
    pod: &Value,
    reason: &'static str,
    kind: &str,
    message: &str,
) {
    if rt.events.contains(&reason) {
        return;
    }
    rt.events.push(reason);
    let component = if reason == "FailedScheduling" {
        "default-scheduler"
    } else {
        "kubelet"
    };
    events::record(
        store,
        pod,
        events::Event {
            kind,
            reason,
            message,
            component,
        },
    );
}

/// A scheduled pod's conditions: ready, or not ready for `not_ready`'s
/// reason (`ContainersNotReady`, `PodCompleted`).
fn pod_conditions(not_ready: Option<&str>) -> Value {
    let ready = not_ready.is_none();
    json!([
        cond("PodScheduled", true, None, None),
        cond("Initialized", true, None, None),
        cond("ContainersReady", ready, not_ready, None),
        cond("Ready", ready, not_ready, None),
    ])
}

/// Give pod `p` its `DisruptionTarget` condition with reason `disruption`
/// (none: no disruption), once.
fn mark_disrupted(p: &mut Value, disruption: Option<&str>, message: Option<&str>) {
    if let Some(d) = disruption
        && let Some(Value::Array(cs)) = p.pointer_mut("/status/conditions")
        && !cs.iter().any(|c| c["type"] == "DisruptionTarget")
    {
        cs.push(cond("DisruptionTarget", true, Some(d), message));
    }
}

/// The pod's IP: pods are processes of this host, each with its own
/// loopback address (`127.x.y.z`, never `127.0.0.1`, derived from the
/// pod's namespace and name), so that pods listening on the same port do
/// not collide, as pods with their own network namespaces do not.
pub(crate) fn pod_ip(ns: &str, name: &str) -> String {
    use sha2::Digest;
    let h = sha2::Sha256::digest(format!("{ns}/{name}").as_bytes());
    format!("127.{}.{}.{}", 1 + h[0] % 254, h[1], 1 + h[2] % 254)
}

fn set_running(store: &Store, ns: &str, name: &str, cname: &str, image: &str) {
    store.modify("pods", ns, name, |p| {
        if p.pointer("/status/phase").and_then(Value::as_str) == Some("Running") {
            return;
        }
        let now = now_rfc3339();
        p["status"]["phase"] = json!("Running");
        p["status"]["podIP"] = json!(pod_ip(ns, name));
        p["status"]["podIPs"] = json!([{"ip": pod_ip(ns, name)}]);
        p["status"]["startTime"] = json!(now);
        p["status"]["containerStatuses"] = json!([{"name": cname, "image": image, "imageID": "",
            "ready": true, "restartCount": 0, "started": true, "state": {"running": {"startedAt": now}}}]);
        p["status"]["conditions"] = pod_conditions(None);
    });
}

/// Whether the container, having exited with `code`, is started again:
/// `restartPolicy: Always` (the default of a StatefulSet's pods), or
/// `OnFailure` after a failure.
fn restarts_after(pod: &Value, code: i32) -> bool {
    match pod.pointer("/spec/restartPolicy").and_then(Value::as_str) {
        Some("Always") => true,
        Some("OnFailure") => code != 0,
        _ => false,
    }
}

/// The container exited and waits to be started again: the pod stays
/// `Running`, not ready, the exit in `lastState`.
fn crash_loop(
    p: &mut Value,
    cname: &str,
    image: &str,
    code: i32,
    reason: &str,
    restarts: u32,
    uid: &str,
) {
    let now = now_rfc3339();
    let started = p
        .pointer("/status/containerStatuses/0/state/running/startedAt")
        .cloned()
        .unwrap_or_else(|| json!(now));
    let name = p.pointer("/metadata/name").cloned().unwrap_or_default();
    let ns = p
        .pointer("/metadata/namespace")
        .cloned()
        .unwrap_or_default();
    let message = format!(
        "back-off restarting failed container={cname} pod={}_{}({uid})",
        name.as_str().unwrap_or_default(),
        ns.as_str().unwrap_or_default()
    );
    p["status"]["phase"] = json!("Running");
    p["status"]["containerStatuses"] = json!([{"name": cname, "image": image, "imageID": "",
        "ready": false, "restartCount": restarts, "started": false,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": message}},
        "lastState": {"terminated": {"exitCode": code, "reason": reason, "startedAt": started, "finishedAt": now}}}]);
    p["status"]["conditions"] = pod_conditions(Some("ContainersNotReady"));
}

/// A restarted container runs again (its `restartCount` and `lastState` kept).
fn set_restarted(store: &Store, ns: &str, name: &str, cname: &str, restarts: u32) {
    store.modify("pods", ns, name, |p| {
        let status = p.pointer_mut("/status/containerStatuses/0");
        let Some(status) = status else { return };
        if status.pointer("/state/running").is_some() {
            return;
        }
        status["name"] = json!(cname);
        status["restartCount"] = json!(restarts);
        status["ready"] = json!(true);
        status["started"] = json!(true);
        status["state"] = json!({"running": {"startedAt": now_rfc3339()}});
        p["status"]["conditions"] = pod_conditions(None);
    });
}

fn terminated(p: &mut Value, cname: &str, image: &str, code: i32, reason: &str) {
    let now = now_rfc3339();
    let started = p
        .pointer("/status/containerStatuses/0/state/running/startedAt")
        .cloned()
        .unwrap_or_else(|| json!(now));
    p["status"]["phase"] = json!(if code == 0 { "Succeeded" } else { "Failed" });
    p["status"]["containerStatuses"] = json!([{"name": cname, "image": image, "imageID": "",
        "ready": false, "restartCount": 0, "started": false,
        "state": {"terminated": {"exitCode": code, "reason": reason, "startedAt": started, "finishedAt": now}}}]);
    p["status"]["conditions"] = pod_conditions(Some("PodCompleted"));
}

/// A downward API `fieldRef` into the pod's labels or annotations
/// (`metadata.labels['KEY']`, `metadata.annotations['KEY']`): the value,
/// or `None` (an empty value) when the key is absent or the path is
/// another one.
fn downward_map_field(pod: &Value, path: &str) -> Option<String> {
    let (map, rest) = path
        .strip_prefix("metadata.labels['")
        .map(|r| ("labels", r))
        .or_else(|| {
            path.strip_prefix("metadata.annotations['")
                .map(|r| ("annotations", r))
        })?;
    let key = rest.strip_suffix("']")?;
    pod.pointer("/metadata")?
        .get(map)?
        .get(key)?
        .as_str()
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_expand_as_the_kubelet_expands_them() {
        let env: BTreeMap<String, String> = [("A", "1"), ("LWS_WORKER_INDEX", "3")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        assert_eq!(expand("$(LWS_WORKER_INDEX)", &env), "3");
        assert_eq!(expand("x$(A)y$(A)", &env), "x1y1");
        assert_eq!(expand("$(MISSING)", &env), "$(MISSING)");
        assert_eq!(expand("$$(A)", &env), "$(A)");
        assert_eq!(expand("$A and $(A", &env), "$A and $(A");
        assert_eq!(expand("cost: 5$", &env), "cost: 5$");
    }

    #[test]
    fn restart_policies() {
        let with = |p: &str| json!({"spec": {"restartPolicy": p}});
        assert!(restarts_after(&with("Always"), 0));
        assert!(restarts_after(&with("OnFailure"), 1));
        assert!(!restarts_after(&with("OnFailure"), 0));
        assert!(!restarts_after(&with("Never"), 1));
        assert!(!restarts_after(&json!({}), 1));
    }
}
