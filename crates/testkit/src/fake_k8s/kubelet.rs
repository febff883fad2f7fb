//! The fake scheduler and kubelet: each Pod is placed on a fake node (or
//! left unschedulable with the scheduler's message), then either runs its
//! container command as a local process — the image's runner path mapped
//! to the real runner, the environment from the pod spec and its Secrets —
//! or follows a scripted outcome.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use futures_util::Stream;
use serde_json::{Value, json};

use super::b64;
use super::controller::{name_of, ns_of, uid_of};
use super::store::{ApiError, Store, now_rfc3339};
use super::{FakeNode, PodScript};

/// The container's log is kept per start, in files under the pod's directory.
#[derive(Debug)]
pub(crate) struct LogRequest {
    pub(crate) namespace: String,
    pub(crate) pod: String,
    pub(crate) container: Option<String>,
    pub(crate) previous: bool,
    pub(crate) follow: bool,
    pub(crate) tail: Option<usize>,
}

/// Settings of the kubelet.
#[derive(Debug, Clone)]
pub(crate) struct KubeletConfig {
    pub(crate) python: PathBuf,
    pub(crate) path_map: BTreeMap<String, PathBuf>,
    pub(crate) extra_env: BTreeMap<String, String>,
    pub(crate) nodes: Vec<FakeNode>,
    pub(crate) missing_image_marker: String,
    pub(crate) kill_grace: Duration,
    pub(crate) root: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
enum Decision {
    Unschedulable(String),
    Script(PodScript),
}

/// What became of a container's process.
type ExitCell = Arc<Mutex<Option<i32>>>;

#[derive(Debug)]
struct Runtime {
    namespace: String,
    name: String,
    decision: Decision,
    node: String,
    since: Instant,
    dir: PathBuf,
    logs: Vec<PathBuf>,
    pgid: Option<i32>,
    exit: ExitCell,
    killing: bool,
    events: Vec<&'static str>,
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
    pods: Mutex<BTreeMap<String, Runtime>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn container(pod: &Value) -> Value {
    pod.pointer("/spec/containers/0")
        .cloned()
        .unwrap_or(json!({}))
}

fn container_name(pod: &Value) -> String {
    container(pod)
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("main")
        .to_owned()
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

/// Signal a whole process group.
fn kill_group(pgid: i32, signal: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), signal);
}

impl Kubelet {
    pub(crate) fn new(config: KubeletConfig) -> Self {
        Self {
            config,
            scripts: Mutex::default(),
            pods: Mutex::default(),
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
            if let (Some(pgid), None) = (rt.pgid, *lock(&rt.exit)) {
                kill_group(pgid, nix::sys::signal::Signal::SIGKILL);
            }
        }
    }

    /// Where the scheduler would put `pod`, or its message when nowhere.
    fn schedule(&self, pod: &Value) -> Result<String, String> {
        let selector: BTreeMap<String, String> = pod
            .pointer("/spec/nodeSelector")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default();
        let mut wanted: BTreeMap<String, u64> = BTreeMap::new();
        for c in pod
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for kind in ["limits", "requests"] {
                if let Some(Value::Object(m)) = c.pointer(&format!("/resources/{kind}")) {
                    for (k, v) in m {
                        if k.contains('/') {
                            let n = v
                                .as_str()
                                .and_then(|s| s.parse().ok())
                                .or_else(|| v.as_u64())
                                .unwrap_or(0);
                            let e = wanted.entry(k.clone()).or_default();
                            *e = (*e).max(n);
                        }
                    }
                }
            }
        }
        let total = self.config.nodes.len();
        let mut mismatch = 0;
        let mut insufficient: BTreeMap<String, usize> = BTreeMap::new();
        for node in &self.config.nodes {
            if !selector.iter().all(|(k, v)| node.labels.get(k) == Some(v)) {
                mismatch += 1;
                continue;
            }
            let short: Vec<&String> = wanted
                .iter()
                .filter(|(k, n)| node.capacity.get(*k).copied().unwrap_or(0) < **n)
                .map(|(k, _)| k)
                .collect();
            if short.is_empty() {
                return Ok(node.name.clone());
            }
            for k in short {
                *insufficient.entry(k.clone()).or_default() += 1;
            }
        }
        let mut parts = Vec::new();
        if mismatch > 0 {
            parts.push(format!(
                "{mismatch} node(s) didn't match Pod's node affinity/selector"
            ));
        }
        for (k, n) in insufficient {
            parts.push(format!("{n} Insufficient {k}"));
        }
        Err(format!(
            "0/{total} nodes are available: {}. preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling.",
            parts.join(", ")
        ))
    }

    fn decide(&self, pod: &Value) -> Decision {
        let job_id = pod
            .pointer("/metadata/labels/job-id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let scripted = {
            let mut s = lock(&self.scripts);
            s.by_job
                .get(&job_id)
                .cloned()
                .or_else(|| s.next.pop_front())
        };
        if let Some(PodScript::Unschedulable { message }) = &scripted {
            return Decision::Unschedulable(message.clone());
        }
        if let Err(message) = self.schedule(pod) {
            return Decision::Unschedulable(message);
        }
        if let Some(s) = scripted {
            return Decision::Script(s);
        }
        if !self.config.missing_image_marker.is_empty()
            && image_of(pod).contains(&self.config.missing_image_marker)
        {
            return Decision::Script(PodScript::ImagePullError);
        }
        Decision::Script(PodScript::Run)
    }

    /// Bring every pod one step closer to what its decision says.
    pub(crate) fn reconcile(&self, store: &Store) {
        let pods = store.all("pods");
        let live: std::collections::BTreeSet<String> =
            pods.iter().map(|p| uid_of(p).to_owned()).collect();
        {
            // Forget pods that are gone.
            let mut rts = lock(&self.pods);
            let gone: Vec<String> = rts.keys().filter(|u| !live.contains(*u)).cloned().collect();
            for uid in gone {
                if let Some(rt) = rts.remove(&uid) {
                    if let (Some(pgid), None) = (rt.pgid, *lock(&rt.exit)) {
                        kill_group(pgid, nix::sys::signal::Signal::SIGKILL);
                    }
                    let _ = std::fs::remove_dir_all(&rt.dir);
                }
            }
        }
        for pod in pods {
            self.step(store, &pod);
        }
    }

    fn step(&self, store: &Store, pod: &Value) {
        let uid = uid_of(pod).to_owned();
        let (ns, name) = (ns_of(pod).to_owned(), name_of(pod).to_owned());
        if pod.pointer("/metadata/deletionTimestamp").is_some() {
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
            let decision = self.decide(pod);
            let node = match &decision {
                Decision::Unschedulable(_) => String::new(),
                Decision::Script(_) => self.schedule(pod).unwrap_or_else(|_| {
                    self.config
                        .nodes
                        .first()
                        .map_or_else(|| "fake-node-0".to_owned(), |n| n.name.clone())
                }),
            };
            Runtime {
                namespace: ns.clone(),
                name: name.clone(),
                decision,
                node,
                since: Instant::now(),
                dir: self.config.root.join(&uid),
                logs: Vec::new(),
                pgid: None,
                exit: Arc::default(),
                killing: false,
                events: Vec::new(),
            }
        });
        let elapsed = rt.since.elapsed();
        let cname = container_name(pod);
        let image = image_of(pod);
        match rt.decision.clone() {
            Decision::Unschedulable(message) => {
                let marked = pod
                    .pointer("/status/conditions/0/reason")
                    .and_then(Value::as_str)
                    == Some("Unschedulable");
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
        rt: &mut Runtime,
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
                if rt.logs.is_empty() {
                    let _ = std::fs::create_dir_all(&rt.dir);
                    let log = rt.dir.join(format!("{cname}-0.log"));
                    let _ = std::fs::write(&log, "");
                    rt.logs.push(log);
                }
                if elapsed < *after {
                    set_running(store, &ns, &name, cname, image);
                    return;
                }
                *lock(&rt.exit) = Some(137);
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
                let exit_reason = if exit == 0 { "Completed" } else { reason };
                store.modify("pods", &ns, &name, |p| {
                    terminated(p, cname, image, exit, exit_reason);
                    if let Some(r) = pod_reason {
                        p["status"]["reason"] = json!(r);
                    }
                    if let Some(m) = pod_message {
                        p["status"]["message"] = json!(m);
                    }
                    if let Some(d) = disruption
                        && let Some(Value::Array(cs)) = p.pointer_mut("/status/conditions")
                    {
                        cs.push(cond("DisruptionTarget", true, Some(d), pod_message));
                    }
                });
            }
        }
    }

    fn run_process(&self, store: &Store, rt: &mut Runtime, pod: &Value, cname: &str, image: &str) {
        let (ns, name) = (rt.namespace.clone(), rt.name.clone());
        if rt.pgid.is_none() && rt.logs.is_empty() {
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
        let exit = *lock(&rt.exit);
        match exit {
            None => set_running(store, &ns, &name, cname, image),
            Some(code) => {
                let reason = if code == 0 { "Completed" } else { "Error" };
                store.modify("pods", &ns, &name, |p| {
                    terminated(p, cname, image, code, reason)
                });
            }
        }
    }

    fn spawn(&self, store: &Store, rt: &mut Runtime, pod: &Value) -> Result<(), SpawnError> {
        let c = container(pod);
        let ns = rt.namespace.clone();
        // Environment: envFrom first, then env (env wins), as the kubelet does.
        let mut env: BTreeMap<String, String> = self.config.extra_env.clone();
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
                env.insert(key.to_owned(), v.to_owned());
            } else if let Some(field) = e
                .pointer("/valueFrom/fieldRef/fieldPath")
                .and_then(Value::as_str)
            {
                let v = match field {
                    "metadata.name" => rt.name.clone(),
                    "metadata.namespace" => ns.clone(),
                    "status.podIP" | "status.hostIP" => "127.0.0.1".to_owned(),
                    _ => String::new(),
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
        let mut argv: Vec<String> = Vec::new();
        for field in ["command", "args"] {
            for a in c.get(field).and_then(Value::as_array).into_iter().flatten() {
                argv.push(a.as_str().unwrap_or_default().to_owned());
            }
        }
        if argv.is_empty() {
            return Err(SpawnError::Start(
                "the fake kubelet needs a container command (images have no entrypoint here)"
                    .into(),
            ));
        }
        let mut mapped_runner = false;
        let mut argv: Vec<String> = argv
            .into_iter()
            .map(|a| match self.config.path_map.get(&a) {
                Some(host) => {
                    mapped_runner = true;
                    host.to_string_lossy().into_owned()
                }
                None => a,
            })
            .collect();
        if argv[0] == "python3" || argv[0] == "python" {
            argv[0] = self.config.python.to_string_lossy().into_owned();
        }
        let dir = rt.dir.clone();
        for sub in ["work", "mounts", "home"] {
            std::fs::create_dir_all(dir.join(sub))
                .map_err(|e| SpawnError::Start(format!("{}: {e}", dir.display())))?;
        }
        if mapped_runner {
            argv.extend([
                "--workdir".to_owned(),
                dir.join("work").to_string_lossy().into_owned(),
                "--mount-root".to_owned(),
                dir.join("mounts").to_string_lossy().into_owned(),
            ]);
        }
        let log_path = dir.join(format!("{}-{}.log", container_name(pod), rt.logs.len()));
        let log = std::fs::File::create(&log_path)
            .map_err(|e| SpawnError::Start(format!("{}: {e}", log_path.display())))?;
        let log2 = log
            .try_clone()
            .map_err(|e| SpawnError::Start(e.to_string()))?;
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .env_clear()
            .env(
                "PATH",
                std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
            )
            .env("HOME", dir.join("home"))
            .env("HOSTNAME", &rt.name)
            .env("LANG", "C.UTF-8")
            .envs(&env)
            .current_dir(
                c.get("workingDir")
                    .and_then(Value::as_str)
                    .map_or_else(|| dir.join("work"), PathBuf::from),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log2))
            .process_group(0)
            .kill_on_drop(false);
        let mut child = cmd
            .spawn()
            .map_err(|e| SpawnError::Start(format!("cannot start {:?}: {e}", argv[0])))?;
        rt.pgid = child.id().and_then(|id| i32::try_from(id).ok());
        rt.logs.push(log_path);
        let exit = rt.exit.clone();
        tokio::spawn(async move {
            let code = match child.wait().await {
                Ok(status) => status.code().unwrap_or_else(|| {
                    use std::os::unix::process::ExitStatusExt;
                    128 + status.signal().unwrap_or(9)
                }),
                Err(_) => 255,
            };
            *lock(&exit) = Some(code);
        });
        Ok(())
    }

    /// A pod being deleted: stop its process (TERM, then KILL after the
    /// grace period), then remove it.
    fn terminate(&self, store: &Store, uid: &str, ns: &str, name: &str) {
        let mut rts = lock(&self.pods);
        let running = rts
            .get(uid)
            .and_then(|rt| rt.pgid.filter(|_| lock(&rt.exit).is_none()));
        match (running, rts.get_mut(uid)) {
            (Some(pgid), Some(rt)) => {
                if !rt.killing {
                    rt.killing = true;
                    kill_group(pgid, nix::sys::signal::Signal::SIGTERM);
                    let grace = self.config.kill_grace;
                    let exit = rt.exit.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(grace).await;
                        if lock(&exit).is_none() {
                            kill_group(pgid, nix::sys::signal::Signal::SIGKILL);
                        }
                    });
                }
            }
            _ => {
                if let Some(rt) = rts.remove(uid) {
                    let _ = std::fs::remove_dir_all(&rt.dir);
                }
                drop(rts);
                store.remove("pods", ns, name);
            }
        }
    }

    /// The log of a pod's container, whole or followed.
    pub(crate) fn logs(
        &self,
        store: &Arc<Store>,
        req: LogRequest,
    ) -> Result<impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static, ApiError> {
        let pod = store.get("pods", &req.namespace, &req.pod)?;
        let cname = req
            .container
            .clone()
            .unwrap_or_else(|| container_name(&pod));
        let rts = lock(&self.pods);
        let rt = rts.get(uid_of(&pod));
        let files = rt.map(|r| r.logs.clone()).unwrap_or_default();
        let path = if req.previous {
            files
                .len()
                .checked_sub(2)
                .and_then(|i| files.get(i))
                .cloned()
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "previous terminated container \"{cname}\" in pod \"{}\" not found",
                        req.pod
                    ))
                })?
        } else {
            files.last().cloned().ok_or_else(|| {
                let reason = pod
                    .pointer("/status/containerStatuses/0/state/waiting/reason")
                    .and_then(Value::as_str)
                    .unwrap_or("ContainerCreating");
                ApiError::bad_request(format!(
                    "container \"{cname}\" in pod \"{}\" is waiting to start: {reason}",
                    req.pod
                ))
            })?
        };
        let exit = rt.map(|r| r.exit.clone()).unwrap_or_default();
        let ended = req.previous || rt.is_some_and(|r| r.pgid.is_none());
        drop(rts);
        Ok(follow_file(
            path,
            req.tail,
            req.follow && !ended,
            exit,
            store.clone(),
            (req.namespace, req.pod),
        ))
    }
}

#[derive(Debug)]
enum SpawnError {
    Config(String),
    Start(String),
}

fn once_event(
    store: &Store,
    rt: &mut Runtime,
    pod: &Value,
    reason: &'static str,
    kind: &str,
    message: &str,
) {
    if rt.events.contains(&reason) {
        return;
    }
    rt.events.push(reason);
    let now = now_rfc3339();
    let ev = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": format!("{}.", name_of(pod))},
        "involvedObject": {"kind": "Pod", "name": name_of(pod), "namespace": ns_of(pod),
                           "uid": uid_of(pod), "apiVersion": "v1"},
        "reason": reason,
        "message": message,
        "type": kind,
        "source": {"component": if reason == "FailedScheduling" { "default-scheduler" } else { "kubelet" }},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    });
    let _ = store.create("events", ns_of(pod), ev);
}

fn set_running(store: &Store, ns: &str, name: &str, cname: &str, image: &str) {
    store.modify("pods", ns, name, |p| {
        if p.pointer("/status/phase").and_then(Value::as_str) == Some("Running") {
            return;
        }
        let now = now_rfc3339();
        p["status"]["phase"] = json!("Running");
        p["status"]["podIP"] = json!("127.0.0.1");
        p["status"]["startTime"] = json!(now);
        p["status"]["containerStatuses"] = json!([{"name": cname, "image": image, "imageID": "",
            "ready": true, "restartCount": 0, "started": true, "state": {"running": {"startedAt": now}}}]);
        p["status"]["conditions"] = json!([
            cond("PodScheduled", true, None, None),
            cond("Initialized", true, None, None),
            cond("ContainersReady", true, None, None),
            cond("Ready", true, None, None),
        ]);
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
    p["status"]["conditions"] = json!([
        cond("PodScheduled", true, None, None),
        cond("Initialized", true, None, None),
        cond("ContainersReady", false, Some("PodCompleted"), None),
        cond("Ready", false, Some("PodCompleted"), None),
    ]);
}

fn tail_text(text: &[u8], n: usize) -> Vec<u8> {
    if n == 0 {
        return Vec::new();
    }
    let trimmed = text.strip_suffix(b"\n").unwrap_or(text);
    let mut count = 0;
    for (i, b) in trimmed.iter().enumerate().rev() {
        if *b == b'\n' {
            count += 1;
            if count == n {
                return text[i + 1..].to_vec();
            }
        }
    }
    text.to_vec()
}

/// Stream a log file: what is there (or its tail), then, when following,
/// what is appended until the process ended or the pod went away.
fn follow_file(
    path: PathBuf,
    tail: Option<usize>,
    follow: bool,
    exit: ExitCell,
    store: Arc<Store>,
    pod: (String, String),
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    struct State {
        path: PathBuf,
        offset: u64,
        first: bool,
        done: bool,
    }
    let start = State {
        path,
        offset: 0,
        first: true,
        done: false,
    };
    futures_util::stream::unfold(start, move |mut st| {
        let exit = exit.clone();
        let store = store.clone();
        let pod = pod.clone();
        async move {
            if st.done {
                return None;
            }
            loop {
                let ended = lock(&exit).is_some() || store.get("pods", &pod.0, &pod.1).is_err();
                let chunk = read_from(&st.path, st.offset);
                if st.first {
                    st.first = false;
                    st.offset += chunk.len() as u64;
                    let body = match tail {
                        Some(n) => tail_text(&chunk, n),
                        None => chunk,
                    };
                    if !follow {
                        st.done = true;
                    }
                    return Some((Ok(Bytes::from(body)), st));
                }
                if !chunk.is_empty() {
                    st.offset += chunk.len() as u64;
                    return Some((Ok(Bytes::from(chunk)), st));
                }
                if ended {
                    // One last read after the end was seen: nothing is lost.
                    let rest = read_from(&st.path, st.offset);
                    st.done = true;
                    return if rest.is_empty() {
                        None
                    } else {
                        st.offset += rest.len() as u64;
                        Some((Ok(Bytes::from(rest)), st))
                    };
                }
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
        }
    })
}

fn read_from(path: &Path, offset: u64) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    if f.seek(SeekFrom::Start(offset)).is_err() {
        return Vec::new();
    }
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    buf
}

#[cfg(test)]
mod tests {
    use super::tail_text;

    #[test]
    fn tail_keeps_last_lines() {
        assert_eq!(tail_text(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(tail_text(b"a\nb", 5), b"a\nb");
        assert_eq!(tail_text(b"a\n", 0), b"");
    }
}
