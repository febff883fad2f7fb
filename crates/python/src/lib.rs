//! `kinetic._native`: the Rust half of the `kinetic` Python module.
//!
//! A thin layer over `kinetic_core`'s engine, built by `kinetic_wiring`
//! exactly as the command line builds it: settings are resolved by
//! `kinetic_core::settings` (argument > `KINETIC_*` > profile > default),
//! jobs are specified as JSON documents the Python half writes, and every
//! blocking call runs on one shared tokio runtime with the GIL released,
//! waking every 100 ms on the calling thread to deliver status changes and
//! log lines to Python callbacks and to let Ctrl-C interrupt the wait.
//! The Python half (`python/kinetic/`) holds what is Python's own: naming
//! the function, pickling values, rebuilding exceptions, the public classes.

use std::future::Future;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_core::advice::FrontEnd;
use kinetic_core::config::ProfileStore;
use kinetic_core::env::{EnvEntry, EnvSnapshot};
use kinetic_core::ports::{CleanupWait, ImageMode};
use kinetic_core::settings::{self, Settings, SettingsArgs, SettingsInput};
use kinetic_engine::{
    Arg, AttachOptions, BatchConfig, BatchError, BatchHandle, BatchResultsOptions, ChildError,
    CleanupOptions, Data, Engine, EngineError, Entrypoint, JobHandle, JobSpec, ProgressEvent,
    ResultOptions, SubmitOptions,
};
use kinetic_wiring::debug::{DebugForward as WiringForward, DebugForwardError};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyLookupError, PyRuntimeError, PyTimeoutError, PyValueError};
use pyo3::prelude::*;
use serde_json::Value;

create_exception!(
    _native,
    RemoteJobError,
    PyException,
    "A job's own error: args are (job_id, type, message, traceback, phase)."
);
create_exception!(
    _native,
    BatchFailed,
    PyException,
    "A batch with failed inputs: args are (group_id, failures, partial_results)."
);

/// Marks a data argument in the JSON documents the Python half writes:
/// `{"__kinetic_data__": {"path": ..., "fuse": bool, "hf_trust_remote_code": bool}}`.
const DATA_KEY: &str = "__kinetic_data__";

static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();

fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let rt = kinetic_wiring::runtime().map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    Ok(RUNTIME.get_or_init(|| rt))
}

/// What the engine reports while a call waits, delivered on the calling thread.
enum Event {
    /// A new state: the status and its reason, if any.
    Status(String, Option<String>),
    Log(String),
}

/// Python callbacks for the events of one wait.
struct Listener {
    events: Option<Receiver<Event>>,
    on_status: Option<Py<PyAny>>,
    on_log: Option<Py<PyAny>>,
}

impl Listener {
    fn none() -> Self {
        Self {
            events: None,
            on_status: None,
            on_log: None,
        }
    }

    fn deliver(&self, py: Python<'_>) -> PyResult<()> {
        let Some(events) = &self.events else {
            return Ok(());
        };
        while let Ok(event) = events.try_recv() {
            match (event, &self.on_status, &self.on_log) {
                (Event::Status(status, reason), Some(cb), _) => cb.call1(py, (status, reason))?,
                (Event::Log(line), _, Some(cb)) => cb.call1(py, (line,))?,
                _ => continue,
            };
        }
        Ok(())
    }
}

/// Run `fut` on the shared runtime and wait for it with the GIL released,
/// delivering `listener`'s events and checking for signals every 100 ms. A
/// signal (Ctrl-C) abandons the wait, not the work the engine started
/// elsewhere: a job keeps running.
fn block<T: Send + 'static>(
    py: Python<'_>,
    fut: impl Future<Output = T> + Send + 'static,
    listener: &Listener,
) -> PyResult<T> {
    let rt = runtime()?;
    let (tx, rx) = mpsc::channel();
    let task = rt.spawn(async move {
        let _ = tx.send(fut.await);
    });
    let mut rx = rx;
    loop {
        let (back, got) = py.detach(move || {
            let got = rx.recv_timeout(Duration::from_millis(100));
            (rx, got)
        });
        rx = back;
        match got {
            Ok(value) => {
                listener.deliver(py)?;
                return Ok(value);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                return Err(PyRuntimeError::new_err(
                    "the engine's task ended without an answer (it panicked)",
                ));
            }
        }
        if let Err(e) = py.check_signals().and_then(|()| listener.deliver(py)) {
            task.abort();
            return Err(e);
        }
    }
}

fn engine_error(e: &EngineError) -> PyErr {
    match e {
        EngineError::Remote {
            job_id,
            error,
            host,
        } => RemoteJobError::new_err((
            job_id.clone(),
            error.type_name.clone(),
            error.message.clone(),
            error.traceback.clone(),
            error.phase.clone(),
            host.as_ref().map(|h| format!("Job {job_id}: {h}.")),
        )),
        EngineError::Timeout { .. } => PyTimeoutError::new_err(e.to_string()),
        EngineError::InvalidInput { .. } | EngineError::Project { .. } => {
            PyValueError::new_err(e.message_for(FrontEnd::Python))
        }
        EngineError::NotFound { .. } => PyLookupError::new_err(e.to_string()),
        _ => PyRuntimeError::new_err(e.to_string()),
    }
}

fn child_error(e: &ChildError) -> PyErr {
    match e {
        ChildError::Job { error, .. } => engine_error(error),
        // The text names the input and the attempts; the type follows the cause.
        ChildError::Submission { error, .. } => match error.as_ref() {
            EngineError::InvalidInput { .. } | EngineError::Project { .. } => {
                PyValueError::new_err(e.message_for(FrontEnd::Python))
            }
            _ => PyRuntimeError::new_err(e.message_for(FrontEnd::Python)),
        },
        _ => PyRuntimeError::new_err(e.to_string()),
    }
}

fn batch_error(py: Python<'_>, e: BatchError) -> PyErr {
    match e {
        BatchError::Failed(failure) => {
            let built = (|| -> PyResult<PyErr> {
                let failures: Vec<(usize, Job, Py<PyAny>)> = failure
                    .failures
                    .iter()
                    .map(|f| {
                        (
                            f.index,
                            Job {
                                inner: f.job.clone(),
                            },
                            child_error(&f.error).into_value(py).into_any(),
                        )
                    })
                    .collect();
                let submissions: Vec<(usize, Py<PyAny>)> = failure
                    .submission_failures
                    .iter()
                    .map(|(i, err)| (*i, child_error(err).into_value(py).into_any()))
                    .collect();
                let partial: Vec<Option<String>> = failure
                    .partial_results
                    .iter()
                    .map(|v| v.as_ref().map(Value::to_string))
                    .collect();
                let message = e_text(&failure);
                let exc = py.get_type::<BatchFailed>().call1((
                    failure.group_id.to_string(),
                    failures,
                    partial,
                    submissions,
                    message,
                ))?;
                Ok(PyErr::from_value(exc))
            })();
            built.unwrap_or_else(|err| err)
        }
        BatchError::Timeout { .. } => PyTimeoutError::new_err(e.to_string()),
        BatchError::InvalidInput { .. } => PyValueError::new_err(e.to_string()),
        BatchError::GroupNotFound { .. } => PyLookupError::new_err(e.to_string()),
        BatchError::Engine(inner) => engine_error(&inner),
        other => PyRuntimeError::new_err(other.to_string()),
    }
}

fn e_text(failure: &kinetic_engine::BatchFailure) -> String {
    format!(
        "batch {}: {} of {} input(s) failed",
        failure.group_id,
        failure.failed_count(),
        failure.total
    )
}

fn secs(value: Option<f64>, name: &str) -> PyResult<Option<Duration>> {
    value
        .map(|s| {
            Duration::try_from_secs_f64(s).map_err(|_| {
                PyValueError::new_err(format!(
                    "{name}={s}: expected a number of seconds, zero or more"
                ))
            })
        })
        .transpose()
}

/// The wait of a cancel or cleanup (Kinetic's `cleanup_timeout` and
/// `cleanup_poll_interval`); the backend's default for what is not given.
fn cleanup_wait(timeout: Option<f64>, poll_interval: Option<f64>) -> PyResult<CleanupWait> {
    let default = CleanupWait::default();
    let timeout = secs(timeout, "cleanup_timeout")?.unwrap_or(default.timeout);
    let poll = match secs(poll_interval, "cleanup_poll_interval")? {
        Some(p) if p.is_zero() => {
            return Err(bad(
                "cleanup_poll_interval=0: expected a number of seconds above zero",
            ));
        }
        Some(p) => p,
        None => default.poll_interval,
    };
    Ok(CleanupWait::new(timeout, poll))
}

/// The backend's sentence when `e` is a stop or deletion it did not
/// confirm within the call's wait (it goes on without the caller).
fn not_confirmed(e: &EngineError) -> Option<String> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(b) = c.downcast_ref::<kinetic_core::ports::BackendError>()
            && b.is_not_confirmed()
        {
            return Some(b.to_string());
        }
        cause = c.source();
    }
    None
}

/// A `UserWarning` from `kinetic`.
fn warn(py: Python<'_>, message: &str) -> PyResult<()> {
    let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
    let text = std::ffi::CString::new(format!("kinetic: {message}"))
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    PyErr::warn(py, &category, &text, 2)
}

/// `answer` of a cancel or cleanup: a stop or deletion not confirmed in
/// time is a warning (Kinetic's: it only warns), any other error raised.
fn warn_unconfirmed(py: Python<'_>, answer: Result<(), EngineError>) -> PyResult<()> {
    match answer {
        Ok(()) => Ok(()),
        Err(e) => match not_confirmed(&e) {
            Some(message) => warn(py, &message),
            None => Err(engine_error(&e)),
        },
    }
}

fn bad(message: impl Into<String>) -> PyErr {
    PyValueError::new_err(message.into())
}

/// The engine and what building job specs needs from the settings.
#[pyclass(frozen, module = "kinetic._native")]
struct Client {
    engine: Engine,
    /// The backend chosen for this client's jobs (`None`: the engine's
    /// own rule, as for a multi-host slice).
    backend: Option<String>,
    base_image_repo: String,
    cwd: PathBuf,
    home: Option<PathBuf>,
}

fn resolve_settings(
    args: &SettingsArgs,
    env: &EnvSnapshot,
    cwd: &std::path::Path,
) -> PyResult<Settings> {
    let path = settings::profiles_file(env)
        .map_err(|e| bad(e.to_string()))?
        .value;
    let profiles = ProfileStore::load(&path).map_err(|e| bad(e.to_string()))?;
    let settings =
        Settings::resolve(args, &SettingsInput::new(env, &profiles, cwd)).map_err(|e| {
            if e.is_invalid_input() {
                bad(e.to_string())
            } else {
                PyRuntimeError::new_err(e.to_string())
            }
        })?;
    for warning in &settings.warnings {
        eprintln!("kinetic: warning: {warning}");
    }
    Ok(settings)
}

#[pymethods]
impl Client {
    /// An engine for the given target; each `None` falls back to its
    /// `KINETIC_*` variable, the active profile, then the default. The
    /// backend is chosen as the CLI chooses it: `backend` (or
    /// `KINETIC_BACKEND`) when given, else the configured cluster for an
    /// `accelerator` the local host cannot serve, else `local`; the engine
    /// uses the store that backend's jobs can reach.
    #[new]
    #[pyo3(signature = (project=None, zone=None, cluster=None, namespace=None, base_image_repo=None, local_python=None, backend=None, accelerator=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        project: Option<String>,
        zone: Option<String>,
        cluster: Option<String>,
        namespace: Option<String>,
        base_image_repo: Option<String>,
        local_python: Option<PathBuf>,
        backend: Option<String>,
        accelerator: Option<String>,
    ) -> PyResult<Self> {
        let env = EnvSnapshot::from_process();
        let cwd = std::env::current_dir().map_err(|e| {
            PyRuntimeError::new_err(format!("cannot read the current directory: {e}"))
        })?;
        let mut args = SettingsArgs::new();
        if let Some(v) = project {
            args = args.project(v);
        }
        if let Some(v) = zone {
            args = args.zone(v);
        }
        if let Some(v) = cluster {
            args = args.cluster(v);
        }
        if let Some(v) = namespace {
            args = args.namespace(v);
        }
        if let Some(v) = base_image_repo {
            args = args.base_image_repo(v);
        }
        if let Some(v) = backend {
            args = args.backend(v);
        }
        let settings = resolve_settings(&args, &env, &cwd)?;
        let accelerator = accelerator.as_deref().unwrap_or("cpu");
        let accelerator = AcceleratorSpec::parse(accelerator)
            .map_err(|e| bad(format!("accelerator={accelerator:?}: {e}")))?;
        let backend = settings.choose_backend(&accelerator).map(|c| c.name);
        let home = settings::home(&env);
        let _entered = runtime()?.enter();
        let mut options = kinetic_wiring::EngineOptions::default();
        if let Some(python) = local_python {
            options = options.local_python(python);
        }
        if let Some(b) = &backend {
            options = options.backend(b.clone());
        }
        let engine = kinetic_wiring::engine_with(&settings, env, &options).map_err(|e| {
            if e.is_usage() {
                bad(e.message_for(FrontEnd::Python))
            } else {
                PyRuntimeError::new_err(e.to_string())
            }
        })?;
        Ok(Self {
            engine,
            backend,
            base_image_repo: settings.base_image_repo.value.clone(),
            home,
            cwd,
        })
    }

    /// Submit the job a JSON spec describes; the handle once accepted.
    fn submit(&self, py: Python<'_>, spec: &str) -> PyResult<Job> {
        let spec = self.spec(spec)?;
        let engine = self.engine.clone();
        // The engine's warnings (a setting the backend cannot honour, a
        // captured credential) reach the user as the settings' do.
        let warnings = SubmitOptions::with_progress(Arc::new(|e: &ProgressEvent| {
            if let ProgressEvent::Warning(warning) = e {
                eprintln!("kinetic: warning: {warning}");
            }
        }));
        let handle = block(
            py,
            async move { engine.submit_with(spec, warnings).await },
            &Listener::none(),
        )?
        .map_err(|e| engine_error(&e))?;
        Ok(Job { inner: handle })
    }

    /// The handle of a job by id, from its stored record.
    fn attach(&self, py: Python<'_>, job_id: String) -> PyResult<Job> {
        let engine = self.engine.clone();
        let handle = block(
            py,
            async move { engine.attach(&job_id).await },
            &Listener::none(),
        )?
        .map_err(|e| engine_error(&e))?;
        Ok(Job { inner: handle })
    }

    /// A handle from a record's JSON (`Job.record_json`).
    fn handle_from_json(&self, record: &str) -> PyResult<Job> {
        let handle = self
            .engine
            .handle_from_json(record)
            .map_err(|e| engine_error(&e))?;
        Ok(Job { inner: handle })
    }

    /// Every job of the namespace the backends still hold, newest first,
    /// and what was left out, said for warnings: each job whose record
    /// cannot be read, and each backend that cannot list its jobs.
    fn list_jobs(&self, py: Python<'_>) -> PyResult<(Vec<Job>, Vec<String>)> {
        let engine = self.engine.clone();
        let listing = block(
            py,
            async move { engine.list_jobs_each().await },
            &Listener::none(),
        )?
        .map_err(|e| engine_error(&e))?;
        let mut skipped: Vec<String> = listing
            .unlisted
            .iter()
            .map(|(backend, e)| format!("the {backend} backend's jobs are not listed: {e}"))
            .collect();
        skipped.extend(listing.unreadable.iter().map(ToString::to_string));
        let jobs = listing
            .records
            .iter()
            .map(|r| self.handle_from_json(&r.to_json()))
            .collect::<PyResult<_>>()?;
        Ok((jobs, skipped))
    }

    /// Map the spec's function over JSON `inputs` (a JSON array) with the
    /// JSON `options` (`max_concurrent`, `retries`, `fail_fast`,
    /// `cancel_running_on_fail`, `name`, `tags`, `input_mode`).
    fn map(&self, py: Python<'_>, spec: &str, inputs: &str, options: &str) -> PyResult<Batch> {
        let spec = self.spec(spec)?;
        let inputs: Vec<Value> =
            serde_json::from_str(inputs).map_err(|e| bad(format!("inputs: {e}")))?;
        let inputs: Vec<Arg> = inputs
            .iter()
            .map(|v| self.arg(v))
            .collect::<PyResult<_>>()?;
        let config = batch_config(options)?;
        let engine = self.engine.clone();
        let handle = block(
            py,
            async move { engine.map(spec, inputs, config).await },
            &Listener::none(),
        )?
        .map_err(|e| batch_error(py, e))?;
        Ok(Batch { inner: handle })
    }

    /// A batch over jobs submitted already: input `i` is the job whose
    /// record JSON is `records[i]` (`None`: never submitted).
    #[pyo3(signature = (group_id, name, tags, records))]
    fn batch_of(
        &self,
        group_id: &str,
        name: Option<String>,
        tags: std::collections::BTreeMap<String, String>,
        records: Vec<Option<String>>,
    ) -> PyResult<Batch> {
        let jobs = records
            .iter()
            .enumerate()
            .map(|(i, r)| {
                r.as_deref()
                    .map(|json| {
                        self.engine
                            .handle_from_json(json)
                            .map_err(|e| bad(format!("jobs[{i}]: {e}")))
                    })
                    .transpose()
            })
            .collect::<PyResult<Vec<_>>>()?;
        let handle = self
            .engine
            .batch_of(group_id, name, tags, jobs)
            .map_err(|e| bad(e.to_string()))?;
        Ok(Batch { inner: handle })
    }

    /// The handle of a batch by group id, from its manifest.
    #[pyo3(signature = (group_id, poll_interval=10.0, poll_timeout=None))]
    fn attach_batch(
        &self,
        py: Python<'_>,
        group_id: String,
        poll_interval: f64,
        poll_timeout: Option<f64>,
    ) -> PyResult<Batch> {
        let interval = secs(Some(poll_interval), "poll_interval")?.unwrap_or_default();
        let timeout = secs(poll_timeout, "poll_timeout")?;
        let options = AttachOptions::default().manifest_polling(interval, timeout);
        let engine = self.engine.clone();
        let handle = block(
            py,
            async move { engine.attach_batch(&group_id, options).await },
            &Listener::none(),
        )?
        .map_err(|e| batch_error(py, e))?;
        Ok(Batch { inner: handle })
    }
}

impl Client {
    /// A [`JobSpec`] from the JSON document the Python half writes.
    fn spec(&self, text: &str) -> PyResult<JobSpec> {
        let doc: Value = serde_json::from_str(text).map_err(|e| bad(format!("job spec: {e}")))?;
        let field = |name: &str| doc.get(name).filter(|v| !v.is_null());
        let text_of = |name: &str| field(name).and_then(Value::as_str);
        let entry = field("entry").ok_or_else(|| bad("job spec: no entry"))?;
        let function = entry
            .get("function")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("job spec: entry.function"))?
            .to_owned();
        let entrypoint = if let Some(path) = entry.get("path").and_then(Value::as_str) {
            Entrypoint::File {
                path: PathBuf::from(path),
                function,
            }
        } else {
            let module = entry
                .get("module")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("job spec: entry.module or entry.path"))?;
            Entrypoint::Module {
                module: module.to_owned(),
                function,
            }
        };
        let mut spec = JobSpec::new(entrypoint);
        if let Some(dir) = text_of("working_dir") {
            spec = spec.working_dir(dir);
        }
        for arg in field("args")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            spec = spec.arg(self.arg(arg)?);
        }
        for pair in field("kwargs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let (Some(name), Some(value)) = (pair.get(0).and_then(Value::as_str), pair.get(1))
            else {
                return Err(bad("job spec: kwargs must be [name, value] pairs"));
            };
            spec = spec.kwarg(name, self.arg(value)?);
        }
        if let Some(a) = text_of("accelerator") {
            spec = spec.accelerator(a);
        }
        if let Some(b) = text_of("backend").or(self.backend.as_deref()) {
            spec = spec.backend(b);
        }
        for pattern in field("env").and_then(Value::as_array).into_iter().flatten() {
            let pattern = pattern
                .as_str()
                .ok_or_else(|| bad("capture_env_vars: expected a list of strings"))?;
            let entry = EnvEntry::parse_required(pattern)
                .map_err(|e| bad(format!("capture_env_vars: {e}")))?;
            spec = spec.env(entry);
        }
        for pair in field("volumes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let (Some(mount), Some(value)) = (pair.get(0).and_then(Value::as_str), pair.get(1))
            else {
                return Err(bad(
                    "volumes: expected a dict of mount path to kinetic.Data",
                ));
            };
            let Some(data) = value.get(DATA_KEY) else {
                return Err(bad(format!(
                    "volumes['{mount}']: expected a kinetic.Data object"
                )));
            };
            spec = spec.volume(mount, self.data(data)?);
        }
        match field("output_dir") {
            None => {}
            Some(Value::String(dir)) if !dir.is_empty() => spec = spec.output_dir(dir),
            Some(other) => {
                return Err(bad(format!(
                    "@kinetic.run(output_dir={other}): expected a directory path or URI \
                     (a non-empty string), or None for the jobs bucket's outputs/{{job_id}}"
                )));
            }
        }
        spec.image = match text_of("container_image") {
            None | Some("bundled") => ImageMode::Bundled,
            Some("prebuilt") => ImageMode::Prebuilt {
                repo: self.base_image_repo.clone(),
            },
            Some(uri) => ImageMode::Custom {
                uri: uri.to_owned(),
            },
        };
        if let Some(version) = text_of("python_values") {
            spec = spec.python_values(version);
        }
        spec = spec.budgets(budget_request(&doc)?);
        match field("debug") {
            None => {}
            Some(Value::Bool(debug)) => spec = spec.debug(*debug),
            Some(other) => {
                return Err(bad(format!(
                    "@kinetic.run(debug={other}): expected True or False"
                )));
            }
        }
        Ok(spec)
    }

    fn arg(&self, value: &Value) -> PyResult<Arg> {
        Ok(match value {
            Value::Object(map) => match map.get(DATA_KEY) {
                Some(data) if map.len() == 1 => Arg::Data(self.data(data)?),
                _ => Arg::Object(
                    map.iter()
                        .map(|(k, v)| Ok((k.clone(), self.arg(v)?)))
                        .collect::<PyResult<_>>()?,
                ),
            },
            Value::Array(items) => {
                Arg::List(items.iter().map(|v| self.arg(v)).collect::<PyResult<_>>()?)
            }
            other => Arg::Json(other.clone()),
        })
    }

    fn data(&self, doc: &Value) -> PyResult<Data> {
        let path = doc
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("kinetic.Data: no path"))?;
        let fuse = doc.get("fuse").and_then(Value::as_bool) == Some(true);
        let trust = doc.get("hf_trust_remote_code").and_then(Value::as_bool) == Some(true);
        Data::with_home(path, &self.cwd, self.home.as_deref())
            .and_then(|data| data.trust_remote_code(trust))
            .and_then(|data| data.fuse(fuse))
            .map_err(|e| bad(e.to_string()))
    }
}

fn batch_config(text: &str) -> PyResult<BatchConfig> {
    let doc: Value = serde_json::from_str(text).map_err(|e| bad(format!("map options: {e}")))?;
    let mut config = BatchConfig::default();
    // A whole number, as the command line's --max-concurrent and --retries
    // take (the engine then refuses a max_concurrent of 0); None is the
    // default.
    let count = |name: &str, what: &str| -> PyResult<Option<u64>> {
        match doc.get(name).filter(|v| !v.is_null()) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| bad(format!("run_async_map({name}={v}): expected {what}"))),
        }
    };
    if let Some(n) = count(
        "max_concurrent",
        "a positive whole number of inputs in flight at once, or None for no limit",
    )? {
        let n = usize::try_from(n).map_err(|_| bad("max_concurrent: too large"))?;
        config = config.max_concurrent(Some(n));
    }
    if let Some(n) = count(
        "retries",
        "a whole number (0 or more) of extra attempts per failed input",
    )? {
        let n = u32::try_from(n).map_err(|_| bad("retries: too large"))?;
        config = config.retries(n);
    }
    let fail_fast = doc.get("fail_fast").and_then(Value::as_bool) == Some(true);
    let cancel = doc.get("cancel_running_on_fail").and_then(Value::as_bool) == Some(true);
    config = config.fail_fast(fail_fast, cancel);
    if let Some(name) = doc.get("name").and_then(Value::as_str) {
        config = config.name(name);
    }
    if let Some(tags) = doc.get("tags").and_then(Value::as_object) {
        for (k, v) in tags {
            let v = v
                .as_str()
                .ok_or_else(|| bad(format!("tags['{k}']: expected a string")))?;
            config = config.tag(k, v);
        }
    }
    if let Some(mode) = doc.get("input_mode").and_then(Value::as_str) {
        config = config.input_mode(mode.parse().map_err(|e| bad(format!("input_mode: {e}")))?);
    }
    match doc.get("isolation") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => {
            config = config.isolation(
                text.parse()
                    .map_err(|e| bad(format!("run_async_map: {e}")))?,
            );
        }
        Some(v) => {
            return Err(bad(format!(
                "run_async_map(isolation={v}): expected 'workers' or 'process'"
            )));
        }
    }
    if let Some(d) = secs(
        doc.get("poll_interval").and_then(Value::as_f64),
        "poll_interval",
    )? {
        config = config.poll_interval(d);
    }
    Ok(config)
}

/// One submitted job.
#[pyclass(frozen, module = "kinetic._native")]
struct Job {
    inner: JobHandle,
}

fn listener(on_status: Option<Py<PyAny>>, on_log: Option<Py<PyAny>>) -> (Listener, Sender<Event>) {
    let (tx, rx) = mpsc::channel();
    (
        Listener {
            events: Some(rx),
            on_status,
            on_log,
        },
        tx,
    )
}

#[pymethods]
impl Job {
    /// The job's id.
    #[getter]
    fn job_id(&self) -> String {
        self.inner.id().to_string()
    }

    /// The job's durable record (`handle.json`), as JSON.
    fn record_json(&self) -> String {
        self.inner.to_json()
    }

    /// The status now: `(status, reason or None)`.
    fn status(&self, py: Python<'_>) -> PyResult<(String, Option<String>)> {
        let job = self.inner.clone();
        let state = block(py, async move { job.status().await }, &Listener::none())?
            .map_err(|e| engine_error(&e))?;
        Ok((
            state.status.as_str().to_owned(),
            state.reason.map(|r| r.to_string()),
        ))
    }

    /// The job's attempts as JSON (`[{"number", "host", …}]`): as the
    /// backend sees them now, else as the store kept them.
    fn attempts(&self, py: Python<'_>) -> PyResult<String> {
        let job = self.inner.clone();
        let attempts = block(
            py,
            async move {
                let state = job.status().await?;
                let kept = job.attempts().await?;
                Ok::<_, kinetic_engine::EngineError>(if state.attempts.len() >= kept.len() {
                    state.attempts
                } else {
                    kept
                })
            },
            &Listener::none(),
        )?
        .map_err(|e| engine_error(&e))?;
        serde_json::to_string(&attempts).map_err(|e| bad(format!("attempts: {e}")))
    }

    /// The logs so far.
    fn logs(&self, py: Python<'_>) -> PyResult<String> {
        let job = self.inner.clone();
        block(py, async move { job.logs().await }, &Listener::none())?.map_err(|e| engine_error(&e))
    }

    /// Follow the logs until the job ends, each chunk given to `on_log`.
    fn follow_logs(&self, py: Python<'_>, on_log: Py<PyAny>) -> PyResult<()> {
        let (listener, tx) = listener(None, Some(on_log));
        let job = self.inner.clone();
        block(
            py,
            async move {
                let mut stream = job.follow_logs().await?;
                while let Some(chunk) = stream.next().await {
                    let chunk = chunk.map_err(EngineError::from)?;
                    let _ = tx.send(Event::Log(chunk));
                }
                Ok::<(), EngineError>(())
            },
            &listener,
        )?
        .map_err(|e| engine_error(&e))
    }

    /// The last `n` lines of the logs.
    fn tail(&self, py: Python<'_>, n: usize) -> PyResult<String> {
        let job = self.inner.clone();
        block(py, async move { job.tail(n).await }, &Listener::none())?
            .map_err(|e| engine_error(&e))
    }

    /// Wait for the result: its JSON text, or the job's error raised.
    /// `cleanup=None` is the engine's default: clean up, except a debug job.
    /// The cleanup after the value waits for the deletion as long as
    /// `cleanup_timeout` and `cleanup_poll_interval` say; a deletion not
    /// confirmed in time (or any cleanup failure) is a warning, as in
    /// Kinetic: the value came back.
    #[pyo3(signature = (timeout=None, cleanup=None, on_status=None, on_log=None,
                        cleanup_timeout=None, cleanup_poll_interval=None))]
    #[allow(clippy::too_many_arguments)]
    fn result(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        cleanup: Option<bool>,
        on_status: Option<Py<PyAny>>,
        on_log: Option<Py<PyAny>>,
        cleanup_timeout: Option<f64>,
        cleanup_poll_interval: Option<f64>,
    ) -> PyResult<String> {
        let wait = cleanup_wait(cleanup_timeout, cleanup_poll_interval)?;
        let stream = on_log.is_some();
        let (listener, tx) = listener(on_status, on_log);
        let mut options = ResultOptions::default();
        if let Some(cleanup) = cleanup {
            options = options.cleanup(cleanup);
        }
        // Cleaned up below, with the wait asked for, so that a deletion not
        // confirmed in time reaches the caller as a warning.
        let cleans_up = self.inner.cleans_up(&options);
        options = options.cleanup(false);
        if let Some(t) = secs(timeout, "timeout")? {
            options = options.timeout(t);
        }
        let status_tx = Mutex::new(tx.clone());
        options = options.on_status_change(Arc::new(move |state| {
            if let Ok(tx) = status_tx.lock() {
                let _ = tx.send(Event::Status(
                    state.status.as_str().to_owned(),
                    state.reason.as_ref().map(ToString::to_string),
                ));
            }
        }));
        if stream {
            let log_tx = Mutex::new(tx);
            options = options.stream_logs(Arc::new(move |line: &str| {
                if let Ok(tx) = log_tx.lock() {
                    let _ = tx.send(Event::Log(line.to_owned()));
                }
            }));
        }
        let job = self.inner.clone();
        let value = block(py, async move { job.result(options).await }, &listener)?
            .map_err(|e| engine_error(&e))?;
        if cleans_up {
            let job = self.inner.clone();
            let options = CleanupOptions {
                backend: true,
                store: false,
                wait,
            };
            let cleaned = block(
                py,
                async move { job.cleanup(options).await },
                &Listener::none(),
            )?;
            if let Err(e) = cleaned {
                let message = not_confirmed(&e).unwrap_or_else(|| {
                    format!(
                        "the cleanup of job {} after its result failed: {e}",
                        self.inner.id()
                    )
                });
                warn(py, &message)?;
            }
        }
        Ok(value.to_string())
    }

    /// Wait (at most `timeout` seconds) until the debug job's debugger
    /// listens, then forward `127.0.0.1:local_port` (0: any free port) to
    /// it on the shared runtime until the job ends or the forward is
    /// closed. `working_dir` is the launch configuration's local root.
    #[pyo3(signature = (local_port, working_dir=None, timeout=None))]
    fn debug_attach(
        &self,
        py: Python<'_>,
        local_port: u16,
        working_dir: Option<String>,
        timeout: Option<f64>,
    ) -> PyResult<DebugForward> {
        let timeout =
            secs(timeout, "timeout")?.unwrap_or(kinetic_core::debug::DEFAULT_READY_TIMEOUT);
        let job = self.inner.clone();
        let forward = block(
            py,
            async move { WiringForward::bind(job, local_port, timeout).await },
            &Listener::none(),
        )?
        .map_err(|e| match e {
            DebugForwardError::Bind { port, source } => PyRuntimeError::new_err(format!(
                "debug_attach(local_port={port}): cannot listen on localhost:{port}: {source}; \
                 the port may already be in use (choose another local_port, or 0 for any free port)"
            )),
            DebugForwardError::Engine(e) => engine_error(&e),
            other => PyRuntimeError::new_err(other.to_string()),
        })?;
        let local_port = forward.local_addr().port();
        let launch = forward
            .launch_configuration(working_dir.as_deref())
            .to_string();
        let task = runtime()?.spawn(forward.serve());
        Ok(DebugForward {
            local_port,
            launch,
            task: Mutex::new(Some(task)),
        })
    }

    /// Cancel the job (its backend object is deleted), waiting for the
    /// stop as `cleanup_timeout` and `cleanup_poll_interval` say; a stop
    /// not confirmed in time is a warning (the job still stops).
    #[pyo3(signature = (cleanup_timeout=None, cleanup_poll_interval=None))]
    fn cancel(
        &self,
        py: Python<'_>,
        cleanup_timeout: Option<f64>,
        cleanup_poll_interval: Option<f64>,
    ) -> PyResult<()> {
        let wait = cleanup_wait(cleanup_timeout, cleanup_poll_interval)?;
        let job = self.inner.clone();
        let answer = block(
            py,
            async move { job.cancel_within(wait).await },
            &Listener::none(),
        )?;
        warn_unconfirmed(py, answer)
    }

    /// Delete the backend object (`k8s`) and/or the stored artifacts
    /// (`gcs`), waiting for the deletion as `cleanup_timeout` and
    /// `cleanup_poll_interval` say; a deletion not confirmed in time is a
    /// warning (it goes on; the stored artifacts are then kept).
    #[pyo3(signature = (k8s=true, gcs=true, cleanup_timeout=None, cleanup_poll_interval=None))]
    fn cleanup(
        &self,
        py: Python<'_>,
        k8s: bool,
        gcs: bool,
        cleanup_timeout: Option<f64>,
        cleanup_poll_interval: Option<f64>,
    ) -> PyResult<()> {
        let wait = cleanup_wait(cleanup_timeout, cleanup_poll_interval)?;
        let job = self.inner.clone();
        let options = CleanupOptions {
            backend: k8s,
            store: gcs,
            wait,
        };
        let answer = block(
            py,
            async move { job.cleanup(options).await },
            &Listener::none(),
        )?;
        warn_unconfirmed(py, answer)
    }
}

/// A local port forwarded to a debug job's debugger, served on the shared
/// runtime until the job ends or [`DebugForward::close`] (dropping it does
/// not stop the forward, as a port-forward process outlives its handle).
#[pyclass(frozen, module = "kinetic._native")]
struct DebugForward {
    local_port: u16,
    /// The VS Code launch configuration, as JSON.
    launch: String,
    task: Mutex<Option<Forwarding>>,
}

/// The task serving a [`DebugForward`]; gives the job's final status.
type Forwarding = tokio::task::JoinHandle<Result<kinetic_core::status::JobStatus, EngineError>>;

#[pymethods]
impl DebugForward {
    /// The local port debuggers connect to.
    #[getter]
    fn local_port(&self) -> u16 {
        self.local_port
    }

    /// The VS Code launch configuration attaching through this forward (JSON).
    fn launch_json(&self) -> String {
        self.launch.clone()
    }

    /// Whether connections are still forwarded (not closed, job not ended).
    fn is_forwarding(&self) -> bool {
        self.task
            .lock()
            .is_ok_and(|t| t.as_ref().is_some_and(|t| !t.is_finished()))
    }

    /// Stop forwarding: once this returns the local port is released (a
    /// debugger already connected keeps its connection); the job keeps
    /// running.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let Some(task) = self.task.lock().ok().and_then(|mut t| t.take()) else {
            return Ok(());
        };
        task.abort();
        // The listener is dropped with the task: wait for that.
        block(
            py,
            async move {
                let _ = task.await;
            },
            &Listener::none(),
        )
    }
}

/// A batch of jobs.
#[pyclass(frozen, module = "kinetic._native")]
struct Batch {
    inner: BatchHandle,
}

type Completed = BoxStream<'static, Result<JobHandle, BatchError>>;

/// The jobs of a batch as they end.
#[pyclass(frozen, module = "kinetic._native")]
struct Completions {
    stream: Mutex<Option<Completed>>,
}

#[pymethods]
impl Completions {
    /// The next job to end, or `None` once every input is settled.
    fn next(&self, py: Python<'_>) -> PyResult<Option<Job>> {
        let stream = self
            .stream
            .lock()
            .map_err(|_| PyRuntimeError::new_err("completion stream poisoned"))?
            .take();
        let Some(mut stream) = stream else {
            return Ok(None);
        };
        let (stream, item) = block(
            py,
            async move {
                let item = stream.next().await;
                (stream, item)
            },
            &Listener::none(),
        )?;
        if let Ok(mut slot) = self.stream.lock() {
            *slot = Some(stream);
        }
        match item {
            None => Ok(None),
            Some(Ok(job)) => Ok(Some(Job { inner: job })),
            Some(Err(e)) => Err(batch_error(py, e)),
        }
    }
}

/// One collected input: `(index, job_id, value JSON or None, error or None)`.
type Item = (usize, Option<String>, Option<String>, Option<Py<PyAny>>);

#[pymethods]
impl Batch {
    /// The batch's group id.
    #[getter]
    fn group_id(&self) -> String {
        self.inner.group_id().to_string()
    }

    /// The batch's name.
    #[getter]
    fn name(&self) -> Option<String> {
        self.inner.name().map(str::to_owned)
    }

    /// The batch's tags.
    #[getter]
    fn tags(&self) -> std::collections::BTreeMap<String, String> {
        self.inner.tags().clone()
    }

    /// How many inputs.
    #[getter]
    fn total(&self) -> usize {
        self.inner.total()
    }

    /// Each input's job, `None` where not (yet) submitted.
    fn jobs(&self) -> Vec<Option<Job>> {
        self.inner
            .jobs()
            .into_iter()
            .map(|j| j.map(|inner| Job { inner }))
            .collect()
    }

    /// `(index, status)` of each submitted job.
    fn statuses(&self, py: Python<'_>) -> PyResult<Vec<(usize, String)>> {
        let batch = self.inner.clone();
        let states = block(py, async move { batch.statuses().await }, &Listener::none())?
            .map_err(|e| batch_error(py, e))?;
        Ok(states
            .into_iter()
            .map(|(i, s)| (i, s.status.as_str().to_owned()))
            .collect())
    }

    /// The counts of inputs by where they are, as JSON.
    fn status_counts(&self, py: Python<'_>) -> PyResult<String> {
        let batch = self.inner.clone();
        let counts = block(
            py,
            async move { batch.status_counts().await },
            &Listener::none(),
        )?
        .map_err(|e| batch_error(py, e))?;
        serde_json::to_string(&counts).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }

    /// Wait until every input is settled.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let timeout = secs(timeout, "timeout")?;
        let batch = self.inner.clone();
        block(
            py,
            async move { batch.wait(timeout).await },
            &Listener::none(),
        )?
        .map_err(|e| batch_error(py, e))
    }

    /// The jobs as they end, their states polled every `poll_interval`
    /// seconds (the batch's own interval when `None`).
    #[pyo3(signature = (timeout=None, poll_interval=None))]
    fn as_completed(
        &self,
        timeout: Option<f64>,
        poll_interval: Option<f64>,
    ) -> PyResult<Completions> {
        let timeout = secs(timeout, "timeout")?;
        let stream = match secs(poll_interval, "poll_interval")? {
            Some(interval) if interval.is_zero() => {
                return Err(bad(
                    "poll_interval=0: expected a number of seconds above zero",
                ));
            }
            Some(interval) => self.inner.as_completed_every(timeout, interval),
            None => self.inner.as_completed(timeout),
        };
        Ok(Completions {
            stream: Mutex::new(Some(stream)),
        })
    }

    /// Every input's outcome.
    #[pyo3(signature = (timeout=None, ordered=true, cleanup=true, return_exceptions=false))]
    fn results(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        ordered: bool,
        cleanup: bool,
        return_exceptions: bool,
    ) -> PyResult<Vec<Item>> {
        let mut options = BatchResultsOptions::default()
            .ordered(ordered)
            .cleanup(cleanup)
            .return_exceptions(return_exceptions);
        if let Some(t) = secs(timeout, "timeout")? {
            options = options.timeout(t);
        }
        let batch = self.inner.clone();
        let items = block(
            py,
            async move { batch.results(options).await },
            &Listener::none(),
        )?
        .map_err(|e| batch_error(py, e))?;
        Ok(items
            .into_iter()
            .map(|item| {
                let job_id = item.job_id.as_ref().map(ToString::to_string);
                match item.outcome {
                    Ok(v) => (item.index, job_id, Some(v.to_string()), None),
                    Err(e) => (
                        item.index,
                        job_id,
                        None,
                        Some(child_error(&e).into_value(py).into_any()),
                    ),
                }
            })
            .collect())
    }

    /// The jobs that failed.
    fn failures(&self, py: Python<'_>) -> PyResult<Vec<Job>> {
        let batch = self.inner.clone();
        let jobs = block(py, async move { batch.failures().await }, &Listener::none())?
            .map_err(|e| batch_error(py, e))?;
        Ok(jobs.into_iter().map(|inner| Job { inner }).collect())
    }

    /// `(index, error)` of each input whose submission failed.
    fn submission_failures(&self, py: Python<'_>) -> Vec<(usize, Py<PyAny>)> {
        self.inner
            .submission_failures()
            .iter()
            .map(|(i, e)| (*i, child_error(e).into_value(py).into_any()))
            .collect()
    }

    /// The inputs no job is known for and none is being submitted for by
    /// this handle (the process that submitted the batch stopped, or has
    /// not named them in the manifest yet), in input order.
    fn never_submitted(&self) -> Vec<usize> {
        self.inner.never_submitted()
    }

    /// Submit the inputs never submitted, with the spec and options the
    /// batch's manifest recorded; the submissions go on in the background.
    fn resume(&self, py: Python<'_>) -> PyResult<()> {
        let batch = self.inner.clone();
        block(
            py,
            async move { batch.resume_recorded().await },
            &Listener::none(),
        )?
        .map_err(|e| batch_error(py, e))
    }

    /// Cancel every job not yet ended.
    fn cancel(&self, py: Python<'_>) -> PyResult<()> {
        let batch = self.inner.clone();
        block(py, async move { batch.cancel().await }, &Listener::none())?
            .map_err(|e| batch_error(py, e))
    }

    /// Clean up every job (`k8s`: backend objects; `gcs`: stored artifacts
    /// and the manifest).
    #[pyo3(signature = (k8s=true, gcs=true))]
    fn cleanup(&self, py: Python<'_>, k8s: bool, gcs: bool) -> PyResult<()> {
        let options = CleanupOptions {
            backend: k8s,
            store: gcs,
            ..CleanupOptions::default()
        };
        let batch = self.inner.clone();
        block(
            py,
            async move { batch.cleanup(options).await },
            &Listener::none(),
        )?
        .map_err(|e| batch_error(py, e))
    }
}

/// The Python version pickled values are exchanged with (`3.11`).
#[pyfunction]
fn python_minor(py: Python<'_>) -> String {
    let v = py.version_info();
    format!("{}.{}", v.major, v.minor)
}

/// The content hash of a local file or directory (the data cache's key),
/// computed as the engine computes it.
#[pyfunction]
fn content_hash(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    let report = py
        .detach(move || {
            kinetic_core::hashing::content_hash_with(
                &path,
                &kinetic_core::hashing::HashOptions::default(),
            )
        })
        .map_err(|e| bad(e.to_string()))?;
    Ok(report.hash.to_hex())
}

/// Check a `kinetic.Data` path when it is made, by the rule the engine
/// (and so the command line) applies: a local path that exists (`~` and a
/// relative path resolved against `HOME` and the working directory), a
/// `gs://bucket/path` URI or a well-formed `hf://` dataset. A `ValueError`
/// naming the path and what is accepted otherwise. Returns what the user
/// should be warned about, if anything (a `gs://` URI without a trailing
/// slash whose last segment has no `.`: a single object, maybe meant as a
/// directory).
#[pyfunction]
fn check_data(path: &str) -> PyResult<Option<String>> {
    let cwd = std::env::current_dir()
        .map_err(|e| bad(format!("kinetic.Data({path:?}): no working directory: {e}")))?;
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    Data::with_home(path, &cwd, home.as_deref())
        .map(|data| data.warning())
        .map_err(|e| bad(format!("kinetic.Data: {e}")))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The package's version (the wheel's metadata carries the same one).
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<Client>()?;
    m.add_class::<Job>()?;
    m.add_class::<Batch>()?;
    m.add_class::<Completions>()?;
    m.add_class::<DebugForward>()?;
    m.add_function(wrap_pyfunction!(python_minor, m)?)?;
    m.add_function(wrap_pyfunction!(content_hash, m)?)?;
    m.add_function(wrap_pyfunction!(check_data, m)?)?;
    m.add("RemoteJobError", m.py().get_type::<RemoteJobError>())?;
    m.add("BatchFailed", m.py().get_type::<BatchFailed>())?;
    Ok(())
}

/// The failure budgets (`retries`, `restarts`) of a job spec document.
fn budget_request(doc: &Value) -> PyResult<kinetic_core::budget::BudgetRequest> {
    let budget = |name: &'static str| -> PyResult<Option<u32>> {
        match doc.get(name).filter(|v| !v.is_null()) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(|n| kinetic_core::budget::parse_budget(name, &n.to_string()))
                .unwrap_or_else(|| kinetic_core::budget::parse_budget(name, &v.to_string()))
                .map(Some)
                .map_err(|e| bad(format!("{name}: {e}"))),
        }
    };
    Ok(kinetic_core::budget::BudgetRequest {
        retries: budget("retries")?,
        restarts: budget("restarts")?,
    })
}
