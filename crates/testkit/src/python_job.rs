//! Real jobs for the conformance suites: a tiny Python module packed into a
//! `context.zip` and a `spec.json`, written to a store exactly as the engine
//! writes them, so a backend that runs the real runner (local, GKE over the
//! fake cluster) executes real Python.

use std::io::Write;
use std::sync::Arc;

use bytes::Bytes;
use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_core::env::CapturedEnv;
use kinetic_core::ids::{JobId, display_name, k8s_name_for_backend};
use kinetic_core::ports::{Deadlines, ObjectPath, ObjectStore, PreparedJob, PutOptions};
use kinetic_core::protocol::{
    Artifact, ClusterInfo, PROTOCOL_VERSION, RunnerEntrypoint, RunnerPlan, RunnerSpec,
};
use kinetic_core::record::{JobRecord, UtcTimestamp};
use serde_json::{Map, Value, json};
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


def prints(n):
    for i in range(n):
        print("line %d" % i, flush=True)
    return n


def env_digest(name):
    return hashlib.sha256(os.environ[name].encode()).hexdigest()
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
    /// Prints `line 0` … `line {n-1}` and returns `n`.
    Prints(u32),
    /// Returns the SHA-256 (hex) of the environment variable's value, so a
    /// test can check a secret arrived without the secret being stored.
    EnvDigest(String),
}

impl ConformanceJob {
    fn call(&self) -> (&'static str, Vec<Value>) {
        match self {
            Self::Returns42 => ("returns_42", vec![]),
            Self::Raises => ("raises", vec![]),
            Self::Sleeps => ("sleeps", vec![]),
            Self::Prints(n) => ("prints", vec![json!(n)]),
            Self::EnvDigest(name) => ("env_digest", vec![json!(name)]),
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

/// Write a conformance job into `store` for `backend` and return it ready to submit.
pub async fn prepare_python_job(
    store: &Arc<dyn ObjectStore>,
    backend: &str,
    job: &ConformanceJob,
    env: CapturedEnv,
) -> PreparedJob {
    let job_id = JobId::new_random();
    let prefix = ObjectPath::parse(job_id.as_str()).expect("job ids are valid paths");
    let zip = context_zip();
    let sha = hex::encode(sha2::Sha256::digest(&zip));
    let context = prefix.child("context.zip").expect("path");
    store
        .put(&context, Bytes::from(zip), PutOptions::default())
        .await
        .expect("store the conformance context");
    let (function, args) = job.call();
    let spec = RunnerSpec {
        protocol: PROTOCOL_VERSION,
        job_id: job_id.to_string(),
        entrypoint: RunnerEntrypoint::Function {
            module: Some("kinetic_conformance".into()),
            path: None,
            function: function.into(),
        },
        args,
        kwargs: Map::new(),
        volumes: vec![],
        env_names: env.names().map(|n| n.as_str().to_owned()).collect(),
        output_dir: store.uri(&ObjectPath::parse(format!("outputs/{job_id}")).expect("path")),
        context: Artifact {
            uri: store.uri(&context),
            sha256: sha,
        },
        requirements: None,
        plan: RunnerPlan {
            package_root: "/conformance".into(),
            entry_rel: String::new(),
            client_cwd_rel: Some(String::new()),
            sys_path_rel: vec![String::new()],
        },
        result_uri: store.uri(&prefix.child("result.json").expect("path")),
        cluster: ClusterInfo {
            accelerator: "cpu".into(),
            num_nodes: 1,
            num_gpus_per_node: 0,
            node_ips: vec![],
        },
    };
    let spec_path = prefix.child("spec.json").expect("path");
    store
        .put(
            &spec_path,
            Bytes::from(serde_json::to_vec_pretty(&spec).expect("encode spec")),
            PutOptions::default(),
        )
        .await
        .expect("store the conformance spec");
    let record = JobRecord {
        accelerator: "cpu".into(),
        backend: backend.into(),
        bucket_name: "conformance".into(),
        cluster_name: "conformance".into(),
        created_at: UtcTimestamp::now(),
        debug: false,
        display_name: display_name(function, &job_id),
        entrypoint: Some(format!("kinetic_conformance:{function}")),
        func_name: function.into(),
        group_id: None,
        group_index: None,
        group_kind: None,
        image_uri: String::new(),
        job_id: job_id.clone(),
        k8s_name: k8s_name_for_backend(backend, &job_id),
        namespace: "default".into(),
        project: "conformance".into(),
        store_url: None,
        zone: "us-central1-a".into(),
    };
    store
        .put(
            &ObjectPath::parse(format!("{job_id}/handle.json")).expect("path"),
            Bytes::from(record.to_json()),
            PutOptions::default(),
        )
        .await
        .expect("store the conformance record");
    PreparedJob::new(
        record,
        AcceleratorSpec::parse("cpu").expect("cpu parses"),
        store.uri(&spec_path),
        env,
        Deadlines::default(),
    )
}
