//! A plugin backend: a place where jobs run that Kinetic for Rust does not
//! ship, here Rust functions in this process standing in for the Python
//! functions of a project (`tasks:square` runs the handler registered under
//! that name). It implements the `Backend` port on the job's `spec.json`
//! and `result.json`, as the runner protocol says, is registered in an
//! engine next to its store, runs a job through `Engine::run`, and then
//! proves itself with the testkit's `Backend` conformance suite.
//!
//! ```text
//! cargo run -p kinetic-testkit --example plugin_backend
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::future::BoxFuture;
use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_core::env::CapturedEnv;
use kinetic_core::ids::JobId;
use kinetic_core::layout;
use kinetic_core::ports::{
    Backend, BackendCapabilities, BackendError, ChangeFeed, CleanupWait, GetOptions, GroupQuery,
    GroupStatus, LogOptions, LogStream, ObjectStore, PreparedJob, PutOptions, tail_lines,
};
use kinetic_core::protocol::{RemoteError, RunnerEntrypoint, RunnerResult, RunnerSpec};
use kinetic_core::record::JobRecord;
use kinetic_core::status::{JobState, JobStatus, StatusReason};
use kinetic_engine::{Engine, Entrypoint, JobSpec, ResultOptions};
use kinetic_testkit::conformance::backend::BackendHarness;
use kinetic_testkit::{ConformanceJob, MemoryStore, conformance, prepare_python_job};
use serde_json::{Value, json};
use sha2::Digest;

/// The name the engine's registry knows the plugin by.
const NAME: &str = "inprocess";

/// A job's output, one line per entry, shared with its handler.
#[derive(Debug, Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn print(&self, line: impl Into<String>) {
        lock(&self.0).push(line.into());
    }

    fn lines(&self) -> Vec<String> {
        lock(&self.0).clone()
    }
}

/// What a handler gets: the job's arguments, its captured environment
/// (values only here, never in the store) and its log.
struct Call {
    args: Vec<Value>,
    env: BTreeMap<String, String>,
    log: Log,
}

/// An exception a handler raises: its type and message.
struct Raised {
    type_name: String,
    message: String,
}

type Handler = Arc<dyn Fn(Call) -> BoxFuture<'static, Result<Value, Raised>> + Send + Sync>;

/// One job the plugin holds.
struct Job {
    record: JobRecord,
    spec_uri: String,
    state: JobState,
    log: Log,
    task: tokio::task::AbortHandle,
}

/// Runs each job as the Rust handler registered under its entrypoint
/// (`module:function`), reading `spec.json` from the store and writing
/// `result.json` there, as a runner would.
#[derive(Clone)]
struct InProcessBackend {
    store: Arc<dyn ObjectStore>,
    handlers: BTreeMap<String, Handler>,
    jobs: Arc<Mutex<BTreeMap<JobId, Job>>>,
}

impl fmt::Debug for InProcessBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InProcessBackend")
            .field("handlers", &self.handlers.keys().collect::<Vec<_>>())
            .field("jobs", &lock(&self.jobs).len())
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl InProcessBackend {
    fn new(store: Arc<dyn ObjectStore>) -> Self {
        Self {
            store,
            handlers: BTreeMap::new(),
            jobs: Arc::default(),
        }
    }

    /// Run `handler` for jobs whose entrypoint is `entry` (`module:function`).
    fn handler<F, Fut>(mut self, entry: &str, handler: F) -> Self
    where
        F: Fn(Call) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, Raised>> + Send + 'static,
    {
        self.handlers.insert(
            entry.to_owned(),
            Arc::new(move |call| Box::pin(handler(call))),
        );
        self
    }

    fn not_found(job_id: &JobId) -> BackendError {
        BackendError::not_found(NAME, job_id.to_string())
    }

    /// The handler for a spec's entrypoint, or what this backend accepts.
    fn handler_for(&self, spec: &RunnerSpec) -> Result<Handler, BackendError> {
        let entry = match &spec.entrypoint {
            RunnerEntrypoint::Function {
                module: Some(module),
                function,
                ..
            } => format!("{module}:{function}"),
            other => format!("{other:?}"),
        };
        self.handlers.get(&entry).cloned().ok_or_else(|| {
            BackendError::unsupported(format!(
                "backend '{NAME}' has no handler for {entry}; it runs: {}",
                self.handlers.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })
    }

    /// The job's task: call the handler, write `result.json`, then end.
    async fn execute(self, job_id: JobId, handler: Handler, call: Call) {
        let outcome = handler(call).await;
        let (result, state) = match outcome {
            Ok(value) => (
                RunnerResult {
                    protocol: 1,
                    success: true,
                    value,
                    error: None,
                    host_index: 0,
                },
                JobState::new(JobStatus::Succeeded),
            ),
            Err(raised) => (
                RunnerResult {
                    protocol: 1,
                    success: false,
                    value: Value::Null,
                    error: Some(RemoteError {
                        traceback: Some(format!(
                            "Traceback (most recent call last):\n  (in-process handler)\n{}: {}\n",
                            raised.type_name, raised.message
                        )),
                        type_name: raised.type_name,
                        message: raised.message,
                        phase: Some("execute".into()),
                    }),
                    host_index: 0,
                },
                JobState::new(JobStatus::Failed).with_reason(StatusReason::ExitCode { code: 1 }),
            ),
        };
        // The result is in the store before the job is seen to end.
        let written = match serde_json::to_vec(&result) {
            Ok(bytes) => self
                .store
                .put(
                    &layout::result(&job_id),
                    Bytes::from(bytes),
                    PutOptions::default(),
                )
                .await
                .is_ok(),
            Err(_) => false,
        };
        let state = if written {
            state
        } else {
            JobState::new(JobStatus::Failed).with_reason(StatusReason::ExitCode { code: 1 })
        };
        if let Some(job) = lock(&self.jobs).get_mut(&job_id)
            && !job.state.status.is_terminal()
        {
            job.state = state;
        }
    }
}

#[async_trait]
impl Backend for InProcessBackend {
    fn name(&self) -> &str {
        NAME
    }

    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities::single_host()
    }

    /// Handlers run in this process: any single-host accelerator is
    /// accepted (none is used), as the capabilities say.
    async fn check(&self, accelerator: &AcceleratorSpec) -> Result<(), BackendError> {
        self.capabilities().check(NAME, accelerator)
    }

    async fn submit(&self, job: &PreparedJob) -> Result<(), BackendError> {
        let job_id = job.record.job_id.clone();
        if let Some(held) = lock(&self.jobs).get(&job_id) {
            return if held.spec_uri == job.spec_uri {
                Ok(())
            } else {
                Err(BackendError::AlreadyExists {
                    backend: NAME.into(),
                    job_id: job_id.to_string(),
                    message: format!("it runs {}, not {}", held.spec_uri, job.spec_uri),
                })
            };
        }
        let bytes = self
            .store
            .get(&layout::spec(&job_id), GetOptions::default())
            .await
            .map_err(|e| BackendError::from_store("reading the job's spec", e))?;
        let spec: RunnerSpec = serde_json::from_slice(&bytes).map_err(|e| {
            BackendError::invalid_input(format!("{}: not a runner spec: {e}", job.spec_uri))
                .with_source(e)
        })?;
        let handler = self.handler_for(&spec)?;
        let log = Log::default();
        let call = Call {
            args: spec.args,
            env: job
                .env
                .iter()
                .map(|(name, value)| (name.as_str().to_owned(), value.expose().to_owned()))
                .collect(),
            log: log.clone(),
        };
        let mut jobs = lock(&self.jobs);
        if jobs.contains_key(&job_id) {
            // Submitted by a concurrent call while the spec was read.
            return Ok(());
        }
        let task = tokio::spawn(self.clone().execute(job_id.clone(), handler, call));
        jobs.insert(
            job_id,
            Job {
                record: job.record.clone(),
                spec_uri: job.spec_uri.clone(),
                state: JobState::new(JobStatus::Running),
                log,
                task: task.abort_handle(),
            },
        );
        Ok(())
    }

    async fn status(&self, job: &JobRecord) -> Result<JobState, BackendError> {
        Ok(lock(&self.jobs)
            .get(&job.job_id)
            .map_or_else(|| JobState::new(JobStatus::NotFound), |j| j.state.clone()))
    }

    /// Unsupported: this backend runs a batch one job per input.
    async fn submit_batch(
        &self,
        _batch: &kinetic_core::ports::PreparedBatch,
    ) -> Result<(), BackendError> {
        Err(BackendCapabilities::undeclared(
            self.name(),
            "indexed_batches",
        ))
    }

    /// Unsupported, as `submit_batch`.
    async fn end_batch(
        &self,
        _query: &GroupQuery,
        _end: kinetic_core::ports::BatchEnd,
        _wait: CleanupWait,
    ) -> Result<(), BackendError> {
        Err(BackendCapabilities::undeclared(
            self.name(),
            "indexed_batches",
        ))
    }

    async fn group_status(&self, query: &GroupQuery) -> Result<GroupStatus, BackendError> {
        Ok(lock(&self.jobs)
            .iter()
            .filter(|(_, j)| {
                j.record.group_id.as_ref() == Some(&query.group_id)
                    && j.record.namespace == query.namespace
            })
            .map(|(id, j)| (id.clone(), j.state.clone()))
            .collect())
    }

    async fn logs(&self, job: &JobRecord, options: LogOptions) -> Result<String, BackendError> {
        let jobs = lock(&self.jobs);
        let held = jobs
            .get(&job.job_id)
            .ok_or_else(|| Self::not_found(&job.job_id))?;
        let text: String = held.log.lines().iter().map(|l| format!("{l}\n")).collect();
        Ok(match options.tail {
            Some(n) => tail_lines(&text, n),
            None => text,
        })
    }

    async fn follow_logs(&self, job: &JobRecord) -> Result<LogStream, BackendError> {
        let log = lock(&self.jobs)
            .get(&job.job_id)
            .map(|j| j.log.clone())
            .ok_or_else(|| Self::not_found(&job.job_id))?;
        let (jobs, job_id) = (self.jobs.clone(), job.job_id.clone());
        let stream = futures_util::stream::unfold(0usize, move |next| {
            let (log, jobs, job_id) = (log.clone(), jobs.clone(), job_id.clone());
            async move {
                loop {
                    // Read "ended" first: a line printed before the end is not lost.
                    let ended = lock(&jobs)
                        .get(&job_id)
                        .is_none_or(|j| j.state.status.is_terminal());
                    if let Some(line) = log.lines().get(next) {
                        return Some((Ok(line.clone()), next + 1));
                    }
                    if ended {
                        return None;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        });
        Ok(Box::pin(stream))
    }

    /// Stops at once (the task is aborted), well within any wait.
    async fn cancel(&self, job: &JobRecord, _wait: CleanupWait) -> Result<(), BackendError> {
        if let Some(held) = lock(&self.jobs).get_mut(&job.job_id)
            && !held.state.status.is_terminal()
        {
            held.task.abort();
            held.state = JobState::new(JobStatus::Failed).with_reason(StatusReason::Cancelled);
        }
        Ok(())
    }

    /// Deletes at once, well within any wait.
    async fn cleanup(&self, job: &JobRecord, _wait: CleanupWait) -> Result<(), BackendError> {
        if let Some(held) = lock(&self.jobs).remove(&job.job_id) {
            held.task.abort();
        }
        Ok(())
    }

    fn changes(&self) -> Option<ChangeFeed> {
        None
    }

    async fn list(&self) -> Result<Vec<JobId>, BackendError> {
        Ok(lock(&self.jobs).keys().cloned().collect())
    }

    async fn port_forward(
        &self,
        _job: &JobRecord,
        _port: u16,
    ) -> Result<kinetic_core::ports::PortStream, BackendError> {
        // In-process jobs listen on nothing.
        Err(BackendCapabilities::undeclared(self.name(), "port_forward"))
    }
}

fn arg_u64(call: &Call, index: usize) -> Result<u64, Raised> {
    call.args
        .get(index)
        .and_then(Value::as_u64)
        .ok_or_else(|| Raised {
            type_name: "TypeError".into(),
            message: format!("argument {index} must be a non-negative integer"),
        })
}

/// The plugin with a handler for `tasks:square` and for each function of
/// the conformance module, doing what the Python would.
fn plugin(store: Arc<dyn ObjectStore>) -> InProcessBackend {
    InProcessBackend::new(store)
        .handler("tasks:square", |call| async move {
            let x = arg_u64(&call, 0)?;
            call.log.print(format!("squaring {x}"));
            Ok(json!(x * x))
        })
        .handler("kinetic_conformance:returns_42", |_| async {
            Ok(json!(42))
        })
        .handler("kinetic_conformance:raises", |_| async {
            Err(Raised {
                type_name: "ValueError".into(),
                message: "conformance failure".into(),
            })
        })
        .handler("kinetic_conformance:ignores_stop", |call| async move {
            // A task here has no signal to ignore: it is stopped at once.
            call.log.print("ignoring SIGTERM");
            tokio::time::sleep(Duration::from_secs(600)).await;
            Ok(Value::Null)
        })
        .handler("kinetic_conformance:sleeps", |call| async move {
            call.log.print("sleeping");
            tokio::time::sleep(Duration::from_secs(600)).await;
            Ok(Value::Null)
        })
        .handler("kinetic_conformance:prints", |call| async move {
            let n = arg_u64(&call, 0)?;
            for i in 0..n {
                call.log.print(format!("line {i}"));
            }
            Ok(json!(n))
        })
        .handler("kinetic_conformance:env_digest", |call| async move {
            let name = call
                .args
                .first()
                .and_then(Value::as_str)
                .unwrap_or_default();
            let value = call.env.get(name).ok_or_else(|| Raised {
                type_name: "KeyError".into(),
                message: format!("'{name}'"),
            })?;
            Ok(json!(hex::encode(sha2::Sha256::digest(value.as_bytes()))))
        })
}

/// What the conformance suite needs: the plugin, its store, and jobs
/// written to the store as the engine writes them.
struct Harness {
    store: Arc<dyn ObjectStore>,
    backend: Arc<dyn Backend>,
}

#[async_trait]
impl BackendHarness for Harness {
    fn backend(&self) -> Arc<dyn Backend> {
        self.backend.clone()
    }

    fn store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }

    async fn prepare(&self, job: ConformanceJob, env: CapturedEnv) -> PreparedJob {
        prepare_python_job(&self.store, NAME, &job, env).await
    }

    /// Tasks are aborted at once: no stop outlasts a wait.
    fn stops_take_a_grace_period(&self) -> bool {
        false
    }
}

#[tokio::main]
pub(crate) async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store: Arc<dyn ObjectStore> = Arc::new(MemoryStore::new());
    let backend: Arc<dyn Backend> = Arc::new(plugin(store.clone()));

    // Registered in an engine, it runs a job of a project.
    let project = tempfile::tempdir()?;
    std::fs::write(
        project.path().join("tasks.py"),
        "def square(x):\n    return x * x\n",
    )?;
    let engine = Engine::builder()
        .store(store.clone())
        .backend(backend.clone())
        .default_backend(NAME)
        .build()?;
    let spec = JobSpec::new(Entrypoint::parse("tasks:square")?)
        .arg(json!(7))
        .working_dir(project.path());
    let value = engine.run(spec, ResultOptions::default()).await?;
    assert_eq!(value, json!(49));
    println!("tasks:square(7) on the '{NAME}' backend = {value}");

    // And it keeps every promise of the port.
    conformance::backend::run(&Harness { store, backend }).await;
    println!("the '{NAME}' backend passes the Backend conformance suite");
    Ok(())
}
