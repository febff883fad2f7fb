//! Real jobs for the conformance suites: a tiny Python module packed into a
//! `context.zip` and a `spec.json`, planned by the engine's own planning
//! step ([`kinetic_core::plan`]) and written to a store as the engine
//! writes them, so a backend that runs the real runner (local, GKE over the
//! fake cluster) executes real Python.

use std::io::Write;
use std::sync::Arc;

use bytes::Bytes;
use kinetic_core::env::CapturedEnv;
use kinetic_core::ids::JobId;
use kinetic_core::plan::{
    self, ContextFacts, JobFacts, ObjectUpload, ProjectFacts, SubmissionFacts, UploadSource,
};
use kinetic_core::ports::{ObjectPath, ObjectStore, PreparedJob, PutOptions};
use kinetic_core::protocol::{RunnerEntrypoint, RunnerPlan};
use kinetic_core::record::UtcTimestamp;
use kinetic_engine::{EngineSettings, Entrypoint, JobSpec};
use serde_json::{Value, json};
use sha2::Digest;

/// The module every conformance job imports.
pub const CONFORMANCE_MODULE: &str = r#"
import hashlib
import os
import sys
import time


def returns_42():
    return 42


def raises():
    raise ValueError("conformance failure")


def sleeps(seconds=600):
    print("sleeping", flush=True)
    time.sleep(seconds)


def ignores_stop(seconds=600):
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ignoring SIGTERM", flush=True)
    time.sleep(seconds)


def prints(n):
    for i in range(n):
        print("line %d" % i, flush=True)
    return n


def flaky(value, dies_until=0):
    """Kills its process (os._exit(3)) on attempts up to `dies_until`,
    then returns the value and its attempt."""
    attempt = int(os.environ["KINETIC_ATTEMPT"])
    print("input %s attempt %d" % (value, attempt), flush=True)
    if attempt <= dies_until:
        os._exit(3)
    return {"value": value, "attempt": attempt}


def env_digest(name):
    return hashlib.sha256(os.environ[name].encode()).hexdigest()


def topology(directory, fail_on=None):
    import json
    info = json.loads(os.environ["KINETIC_CLUSTER_INFO"])
    rank = info["node_rank"]
    with open(os.path.join(directory, "host-%d.json" % rank), "w") as f:
        json.dump(info, f)
    if fail_on is not None and rank in fail_on:
        raise ValueError("host %d failed" % rank)
    return info
"#;

/// What a conformance job does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConformanceJob {
    /// Returns 42.
    Returns42,
    /// Raises `ValueError("conformance failure")`.
    Raises,
    /// Prints `sleeping` and sleeps for ten minutes (for cancel).
    Sleeps,
    /// Ignores SIGTERM, prints `ignoring SIGTERM` and sleeps for ten
    /// minutes: its stop takes the backend's whole grace period (for a
    /// cancel or cleanup that waits less).
    IgnoresStop,
    /// Prints `line 0` … `line {n-1}` and returns `n`.
    Prints(u32),
    /// Returns the SHA-256 (hex) of the environment variable's value, so a
    /// test can check a secret arrived without the secret being stored.
    EnvDigest(String),
    /// Each host writes its `KINETIC_CLUSTER_INFO` to `{dir}/host-{rank}.json`
    /// (the fake cluster's pods are local processes), then the hosts in
    /// `fail_on` raise `ValueError("host N failed")`; the others return
    /// the cluster info.
    Topology {
        /// Where each host writes what it saw.
        dir: String,
        /// The hosts that fail.
        fail_on: Vec<u32>,
    },
}

impl ConformanceJob {
    fn call(&self) -> (&'static str, Vec<Value>) {
        match self {
            Self::Returns42 => ("returns_42", vec![]),
            Self::Raises => ("raises", vec![]),
            Self::Sleeps => ("sleeps", vec![]),
            Self::IgnoresStop => ("ignores_stop", vec![]),
            Self::Prints(n) => ("prints", vec![json!(n)]),
            Self::EnvDigest(name) => ("env_digest", vec![json!(name)]),
            Self::Topology { dir, fail_on } => ("topology", vec![json!(dir), json!(fail_on)]),
        }
    }
}

fn context_zip() -> Vec<u8> {
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut zip = zip::ZipWriter::new(&mut buf);
        let options = zip::write::SimpleFileOptions::default().unix_permissions(0o644);
        zip.start_file("kinetic_conformance.py", options)
            .and_then(|()| {
                zip.write_all(CONFORMANCE_MODULE.as_bytes())
                    .map_err(Into::into)
            })
            .and_then(|()| zip.finish().map(|_| ()))
            .expect("writing a zip to memory cannot fail");
    }
    buf.into_inner()
}

/// The package root conformance jobs claim to come from.
const CONFORMANCE_ROOT: &str = "/conformance";

async fn put(store: &Arc<dyn ObjectStore>, upload: &ObjectUpload) {
    let UploadSource::Bytes(bytes) = &upload.source else {
        panic!(
            "conformance jobs upload bytes only, not {:?}",
            upload.source
        );
    };
    let mut options = PutOptions::default();
    if let Some(content_type) = upload.content_type {
        options = options.with_content_type(content_type);
    }
    store
        .put(&upload.key, bytes.clone(), options)
        .await
        .unwrap_or_else(|e| panic!("store the conformance job's {}: {e}", upload.key));
}

/// Write a conformance job into `store` for `backend` and return it ready to submit.
pub async fn prepare_python_job(
    store: &Arc<dyn ObjectStore>,
    backend: &str,
    job: &ConformanceJob,
    env: CapturedEnv,
) -> PreparedJob {
    prepare_python_job_on(store, backend, job, env, None).await
}

/// [`prepare_python_job`] on `accelerator` (`v5litepod-16` for a job on
/// 4 hosts; `None`: CPU).
pub async fn prepare_python_job_on(
    store: &Arc<dyn ObjectStore>,
    backend: &str,
    job: &ConformanceJob,
    env: CapturedEnv,
    accelerator: Option<&str>,
) -> PreparedJob {
    let job_id = JobId::new_random();
    let zip = context_zip();
    let sha: [u8; 32] = sha2::Sha256::digest(&zip).into();
    let (function, args) = job.call();
    let mut spec = JobSpec::new(Entrypoint::Module {
        module: "kinetic_conformance".into(),
        function: function.into(),
    });
    for arg in args {
        spec = spec.arg(arg);
    }
    if let Some(accelerator) = accelerator {
        spec = spec.accelerator(accelerator);
    }
    let mut settings = EngineSettings::for_cluster(
        "conformance",
        kinetic_core::config::DEFAULT_ZONE,
        "conformance",
        kinetic_core::config::DEFAULT_NAMESPACE,
    );
    settings.bucket_name = "conformance".into();
    let uri_of = |p: &ObjectPath| store.uri(p);
    let context = ContextFacts::new(
        sha,
        zip.len() as u64,
        1,
        UploadSource::Bytes(Bytes::from(zip)),
    );
    let project = ProjectFacts {
        plan: RunnerPlan {
            package_root: CONFORMANCE_ROOT.into(),
            entry_rel: String::new(),
            client_cwd_rel: Some(String::new()),
            sys_path_rel: vec![String::new()],
        },
        entrypoint: RunnerEntrypoint::Function {
            module: Some("kinetic_conformance".into()),
            path: None,
            function: function.into(),
        },
    };
    let (accelerator_text, accelerator) =
        plan::accelerator(&spec, &settings).expect("the accelerator parses");
    let facts = JobFacts::new(
        job_id,
        backend,
        &accelerator_text,
        &accelerator,
        UtcTimestamp::now(),
    )
    .with_env(env);
    let planned = plan::submission(
        &spec,
        &settings,
        SubmissionFacts::new(context, project, facts),
        &uri_of,
    )
    .expect("plan the conformance job");
    for upload in [
        &planned.shared.context,
        &planned.job.spec,
        &planned.job.record_upload,
    ] {
        put(store, upload).await;
    }
    planned.job.prepared
}

/// A batch for [`Backend::submit_batch`](kinetic_core::ports::Backend::submit_batch)
/// written into `store` as the engine writes one: the shared context and a
/// template child (`prints`, which returns its argument), the calls
/// (input `i` is `prints(values[i])`; two inputs per chunk for up to 10
/// inputs, so that the runner reads more than one chunk, else 1,000) and the batch spec
/// (`_groups/{group_id}/batch.json`), for `backend`, at most
/// `parallelism` inputs at once, no retries.
pub async fn prepare_python_batch(
    store: &Arc<dyn ObjectStore>,
    backend: &str,
    values: &[i64],
    parallelism: usize,
    retries: u32,
) -> kinetic_core::ports::PreparedBatch {
    let calls = values.iter().map(|v| vec![json!(v)]).collect();
    prepare_python_batch_of(
        store,
        backend,
        "prints",
        calls,
        parallelism,
        retries,
        CapturedEnv::default(),
    )
    .await
}

/// [`prepare_python_batch`] of any function of [`CONFORMANCE_MODULE`]:
/// input `i` calls `function(*calls[i])`, with the captured `env`.
pub async fn prepare_python_batch_of(
    store: &Arc<dyn ObjectStore>,
    backend: &str,
    function: &str,
    calls: Vec<Vec<Value>>,
    parallelism: usize,
    retries: u32,
    env: CapturedEnv,
) -> kinetic_core::ports::PreparedBatch {
    let shape = BatchShape {
        parallelism,
        retries,
        block_size: 1,
    };
    prepare_batch(store, backend, function, calls, shape, env).await
}

/// How a prepared batch runs: at most `parallelism` inputs at once, each
/// retried `retries` times, `block_size` inputs per index.
struct BatchShape {
    parallelism: usize,
    retries: u32,
    block_size: usize,
}

/// The batch of [`prepare_python_batch_of`], its spec in blocks when
/// `shape.block_size` is above 1, written once.
async fn prepare_batch(
    store: &Arc<dyn ObjectStore>,
    backend: &str,
    function: &str,
    calls: Vec<Vec<Value>>,
    shape: BatchShape,
    env: CapturedEnv,
) -> kinetic_core::ports::PreparedBatch {
    use kinetic_core::batch::{IndexedBatchSpec, call_line, encode_call_chunks};
    use kinetic_core::ids::GroupId;
    use kinetic_core::layout;
    use kinetic_core::ports::{GetOptions, PreparedBatch};
    use kinetic_core::protocol::RunnerSpec;
    let mut job = prepare_python_job(store, backend, &ConformanceJob::Prints(0), env).await;
    let template_id = job.record.job_id.clone();
    let bytes = store
        .get(&layout::spec(&template_id), GetOptions::default())
        .await
        .expect("the template child's spec.json");
    let mut child: RunnerSpec = serde_json::from_slice(&bytes).expect("a spec.json");
    if let kinetic_core::protocol::RunnerEntrypoint::Function { function: f, .. } =
        &mut child.entrypoint
    {
        *f = function.to_owned();
    }
    let group = GroupId::new_random();
    job.record.group_id = Some(group.clone());
    job.record.group_kind = Some("map".into());
    let job_folder = store.uri(&layout::job_prefix(&template_id));
    let inputs = calls.len();
    // Small batches in chunks of two inputs, so that the runner reads more
    // than one chunk; large ones as the engine writes them.
    let chunk_size = if inputs <= 10 {
        2
    } else {
        kinetic_core::batch::DEFAULT_CHUNK_SIZE
    };
    let spec = IndexedBatchSpec::new(
        group.clone(),
        inputs,
        chunk_size,
        store.uri(&layout::group_calls(&group)),
        |id| job_folder.replace(template_id.as_str(), id),
        &child,
        &job.record,
    );
    let spec = if shape.block_size > 1 {
        spec.with_blocks(
            shape.block_size,
            shape.retries,
            false,
            store.uri(&layout::group_blocks(&group)),
            store.uri(&layout::group_stop(&group)),
        )
    } else {
        spec
    };
    let lines = calls
        .into_iter()
        .map(|args| call_line(args, serde_json::Map::new()));
    for (n, chunk) in encode_call_chunks(lines, chunk_size)
        .into_iter()
        .enumerate()
    {
        store
            .put(
                &layout::group_calls_chunk(&group, n),
                Bytes::from(chunk),
                PutOptions::default(),
            )
            .await
            .expect("store a chunk of calls");
    }
    let spec_path = layout::group_batch_spec(&group);
    store
        .put(
            &spec_path,
            Bytes::from(spec.to_json().to_string()),
            PutOptions::default(),
        )
        .await
        .expect("store the batch spec");
    job.spec_uri = store.uri(&spec_path);
    PreparedBatch::new(
        group.clone(),
        job,
        store.uri(&layout::group_calls(&group)),
        inputs,
        shape.parallelism,
        shape.retries,
    )
    .expect("a valid batch")
    .with_block_size(shape.block_size)
}

/// [`prepare_python_batch_of`] in blocks of `block_size` inputs per index
/// (the batch spec's block fields and [`PreparedBatch::block_size`]): each
/// block's pod runs its inputs one after the other, retrying each
/// `retries` times itself, and writes its markers under
/// `_groups/{group_id}/blocks`.
///
/// [`PreparedBatch::block_size`]: kinetic_core::ports::PreparedBatch::block_size
pub async fn prepare_python_batch_in_blocks(
    store: &Arc<dyn ObjectStore>,
    backend: &str,
    function: &str,
    calls: Vec<Vec<Value>>,
    parallelism: usize,
    retries: u32,
    block_size: usize,
) -> kinetic_core::ports::PreparedBatch {
    let shape = BatchShape {
        parallelism,
        retries,
        block_size,
    };
    prepare_batch(
        store,
        backend,
        function,
        calls,
        shape,
        CapturedEnv::default(),
    )
    .await
}
