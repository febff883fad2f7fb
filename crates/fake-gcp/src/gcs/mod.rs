//! A fake Google Cloud Storage server speaking the XML API, in-process on
//! `127.0.0.1`: the test double for every GCS path (the Rust client through
//! `object_store`, and the in-pod runner over plain HTTP).
//!
//! It serves what those clients send, with GCS's answers:
//!
//! | request | XML API call |
//! |---|---|
//! | `PUT /{bucket}/{object}` | upload (`x-goog-if-generation-match: 0` = create only → 412) |
//! | `PUT … x-goog-copy-source: {bucket}/{object}` | copy |
//! | `GET`/`HEAD /{bucket}/{object}` | download, with `Range` (206, 416) |
//! | `DELETE /{bucket}/{object}` | delete (404 when missing) |
//! | `GET /{bucket}?list-type=2` | list: `prefix`, `delimiter`, `continuation-token`, `start-after`, `max-keys` |
//! | `POST …?uploads`, `PUT …?partNumber&uploadId`, `POST …?uploadId`, `DELETE …?uploadId` | multipart: initiate, part, complete, abort |
//!
//! and, like `storage.googleapis.com`, the JSON API's bucket calls on the
//! same buckets: `POST /storage/v1/b?project=` (insert: location, labels,
//! lifecycle rules, uniform access; 409 when the name is taken), `GET`,
//! `PATCH`, `DELETE /storage/v1/b/{bucket}` (409 while it holds objects),
//! its IAM policy (`/iam`, with etags; `/iam/testPermissions`), and
//! listing and deleting objects (`/o`, `/o/{object}`); a permission can be
//! denied ([`FakeGcs::deny`]) for 403s naming it.
//!
//! Errors carry GCS's XML body (`<Error><Code>NoSuchKey</Code>…`); faults
//! ([`GcsFault`]) answer a chosen status (404, 412, 429, 503…) to chosen
//! requests. Multipart parts below GCS's 5 MiB minimum (but the last) are
//! refused with 400 `EntityTooSmall`, as GCS does. Objects live in memory (as the chunks they arrived in: a
//! multipart object is never copied into one buffer). No authentication is
//! checked: point clients at [`FakeGcs::endpoint`] with auth disabled.
//!
//! The server runs on a small runtime of its own, so it works from plain
//! `#[test]`s, from any tokio runtime, and outlives none: dropping the
//! [`FakeGcs`] stops it.
//!
//! ```
//! use kinetic_fake_gcp::{FakeGcs, GcsFault, GcsOp};
//!
//! let gcs = FakeGcs::start().unwrap();
//! gcs.create_bucket("proj-kn-c-jobs");
//! gcs.put_object("proj-kn-c-jobs", "job-1/spec.json", b"{}");
//! assert!(gcs.endpoint().starts_with("http://127.0.0.1:"));
//! assert_eq!(gcs.list_objects("proj-kn-c-jobs"), vec![("job-1/spec.json".to_owned(), 2)]);
//! gcs.inject(GcsFault::status(503).on(GcsOp::Put).under("default/data-cache/").after(2));
//! ```

mod json;
mod server;
mod state;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;

use state::State;

/// The kinds of XML API request the fake serves (for faults and counting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GcsOp {
    /// `PUT` of a whole object.
    Put,
    /// `GET` of an object (whole or ranged).
    Get,
    /// `HEAD` of an object.
    Head,
    /// `DELETE` of an object.
    Delete,
    /// `GET /{bucket}?list-type=2`.
    List,
    /// `PUT` with `x-goog-copy-source`.
    Copy,
    /// `POST …?uploads`.
    InitiateMultipart,
    /// `PUT …?partNumber=N&uploadId=X`.
    UploadPart,
    /// `POST …?uploadId=X`.
    CompleteMultipart,
    /// `DELETE …?uploadId=X`.
    AbortMultipart,
}

impl GcsOp {
    /// True for the calls that write object data (put, copy, multipart).
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Self::Put
                | Self::Copy
                | Self::InitiateMultipart
                | Self::UploadPart
                | Self::CompleteMultipart
        )
    }
}

/// One request the fake answered (or refused with a fault).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcsRequest {
    /// What it was.
    pub op: GcsOp,
    /// The bucket.
    pub bucket: String,
    /// The object name (for a list: the `prefix`).
    pub name: String,
}

/// A scripted failure: answer `status` (with GCS's XML error body) to the
/// matching requests. Built with [`GcsFault::status`] and narrowed with the
/// other methods; by default it fires once, on the next request of any kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcsFault {
    status: u16,
    op: Option<GcsOp>,
    writes_only: bool,
    bucket: Option<String>,
    prefix: Option<String>,
    skip: usize,
    times: usize,
}

impl GcsFault {
    /// Answer `status` (404 NoSuchKey, 412 PreconditionFailed, 429 SlowDown,
    /// 503 ServiceUnavailable, …) once, to the next request.
    pub fn status(status: u16) -> Self {
        Self {
            status,
            op: None,
            writes_only: false,
            bucket: None,
            prefix: None,
            skip: 0,
            times: 1,
        }
    }

    /// Only requests of this kind.
    pub fn on(mut self, op: GcsOp) -> Self {
        self.op = Some(op);
        self
    }

    /// Only requests that write object data ([`GcsOp::is_write`]).
    pub fn on_writes(mut self) -> Self {
        self.writes_only = true;
        self
    }

    /// Only requests for this bucket.
    pub fn in_bucket(mut self, bucket: &str) -> Self {
        self.bucket = Some(bucket.to_owned());
        self
    }

    /// Only objects whose name starts with `prefix` (for lists: whose
    /// `prefix` parameter does).
    pub fn under(mut self, prefix: &str) -> Self {
        self.prefix = Some(prefix.to_owned());
        self
    }

    /// Let `n` matching requests through before failing.
    pub fn after(mut self, n: usize) -> Self {
        self.skip = n;
        self
    }

    /// Fail `n` matching requests (default 1).
    pub fn times(mut self, n: usize) -> Self {
        self.times = n;
        self
    }

    /// Fail every matching request from now on.
    pub fn always(mut self) -> Self {
        self.times = usize::MAX;
        self
    }

    fn matches(&self, r: &GcsRequest) -> bool {
        self.op.is_none_or(|op| op == r.op)
            && (!self.writes_only || r.op.is_write())
            && self.bucket.as_ref().is_none_or(|b| *b == r.bucket)
            && self
                .prefix
                .as_ref()
                .is_none_or(|p| r.name.starts_with(p.as_str()))
    }
}

/// The running fake server. Cheap to share by reference; drop it to stop it.
#[derive(Debug)]
pub struct FakeGcs {
    state: Arc<Mutex<State>>,
    addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl FakeGcs {
    /// Start a server on `127.0.0.1` on a free port, with no bucket.
    pub fn start() -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("fake-gcs")
            .enable_all()
            .build()?;
        let state = Arc::new(Mutex::new(State::new()));
        let app = server::router(state.clone());
        runtime.spawn(async move {
            match tokio::net::TcpListener::from_std(listener) {
                Ok(listener) => {
                    if let Err(e) = axum::serve(listener, app).await {
                        eprintln!("fake GCS server stopped: {e}");
                    }
                }
                Err(e) => eprintln!("fake GCS server could not listen: {e}"),
            }
        });
        Ok(Self {
            state,
            addr,
            runtime: Some(runtime),
        })
    }

    /// Start a server with these buckets already created.
    pub fn with_buckets(buckets: &[&str]) -> std::io::Result<Self> {
        let fake = Self::start()?;
        for b in buckets {
            fake.create_bucket(b);
        }
        Ok(fake)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The base URL clients use: `http://127.0.0.1:{port}` (the
    /// `gcs_base_url` of `object_store`, the runner's `KINETIC_GCS_ENDPOINT`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// In-process access to the buckets, for the other fakes of this crate.
    pub(crate) fn shared(&self) -> GcsBuckets {
        GcsBuckets(self.state.clone())
    }

    /// The socket address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Create a bucket (no-op when it exists). Requests for a bucket that
    /// was never created answer 404 `NoSuchBucket`.
    pub fn create_bucket(&self, bucket: &str) {
        self.lock().create_bucket(bucket);
    }

    /// Create a bucket owned by `project` in `location` (no-op when it
    /// exists), as the JSON API would.
    pub fn create_bucket_in(&self, bucket: &str, project: &str, location: &str) {
        let mut state = self.lock();
        if state.bucket_meta(bucket).is_none() {
            state.insert_bucket(bucket, state::BucketMeta::new(Some(project), location));
        }
    }

    /// Remove a bucket and its objects (a test taking it away).
    pub fn remove_bucket(&self, bucket: &str) {
        self.lock().remove_bucket(bucket);
    }

    /// The buckets, sorted.
    pub fn buckets(&self) -> Vec<String> {
        self.lock().bucket_names()
    }

    /// The JSON API's answers fail with 403 for `permission`
    /// (`storage.buckets.create`, `storage.buckets.getIamPolicy`, …).
    pub fn deny(&self, permission: &str) {
        self.lock().json_denied.insert(permission.to_owned());
    }

    /// Grant `permission` again.
    pub fn allow(&self, permission: &str) {
        self.lock().json_denied.remove(permission);
    }

    /// The buckets created through the JSON API's `insert`, in order.
    pub fn bucket_inserts(&self) -> Vec<String> {
        self.lock().bucket_inserts.clone()
    }

    /// Every JSON API call so far, as `"{verb} {bucket}"` (`insert b`,
    /// `get b`, `patch b`, `delete b`, `setIamPolicy b`).
    pub fn json_calls(&self) -> Vec<String> {
        self.lock().json_calls.clone()
    }

    /// A bucket's labels and the age of its `Delete` lifecycle rule.
    pub fn bucket_rules(&self, bucket: &str) -> Option<(BTreeMap<String, String>, Option<u64>)> {
        let state = self.lock();
        let meta = state.bucket_meta(bucket)?;
        let age = meta.lifecycle.as_ref().and_then(|l| {
            l["rule"].as_array()?.iter().find_map(|r| {
                (r.pointer("/action/type")? == "Delete")
                    .then(|| r.pointer("/condition/age")?.as_u64())
                    .flatten()
            })
        });
        Some((meta.labels.clone(), age))
    }

    /// Whether `member` holds `role` on `bucket`.
    pub fn bucket_binding(&self, bucket: &str, role: &str, member: &str) -> bool {
        self.lock()
            .bucket_meta(bucket)
            .is_some_and(|m| m.policy.has(role, member))
    }

    /// Remove a binding from a bucket's policy (a test taking it away).
    pub fn remove_bucket_binding(&self, bucket: &str, role: &str, member: &str) {
        if let Some(m) = self.lock().bucket_meta_mut(bucket) {
            m.policy.remove(role, member);
        }
    }

    /// Store an object directly (test setup), creating its bucket if needed.
    pub fn put_object(&self, bucket: &str, name: &str, data: &[u8]) {
        let mut state = self.lock();
        state.create_bucket(bucket);
        let _ = state.put(
            bucket,
            name,
            vec![Bytes::copy_from_slice(data)],
            "application/octet-stream".into(),
            None,
        );
    }

    /// The bytes of an object, if it exists.
    pub fn object(&self, bucket: &str, name: &str) -> Option<Vec<u8>> {
        self.lock().object(bucket, name).map(|o| o.bytes())
    }

    /// The content type recorded with an object.
    pub fn content_type(&self, bucket: &str, name: &str) -> Option<String> {
        self.lock()
            .object(bucket, name)
            .map(|o| o.content_type.clone())
    }

    /// Every object of a bucket as (name, size), sorted by name.
    pub fn list_objects(&self, bucket: &str) -> Vec<(String, u64)> {
        self.lock().objects(bucket)
    }

    /// Multipart uploads initiated and neither completed nor aborted.
    pub fn pending_multipart_uploads(&self) -> usize {
        self.lock().pending_uploads()
    }

    /// Arm a fault; faults are checked in the order they were armed.
    pub fn inject(&self, fault: GcsFault) {
        self.lock().inject(fault);
    }

    /// Disarm every fault.
    pub fn clear_faults(&self) {
        self.lock().clear_faults();
    }

    /// Wait this long before answering every request from now on.
    pub fn set_latency(&self, latency: Duration) {
        self.lock().latency = latency;
    }

    /// Answer lists in pages of at most `n` entries (default 1000, as GCS),
    /// to exercise continuation tokens.
    pub fn set_page_size(&self, n: usize) {
        self.lock().page_size = n.max(1);
    }

    /// Every request answered so far, oldest first.
    pub fn requests(&self) -> Vec<GcsRequest> {
        self.lock().requests()
    }

    /// How many requests of this kind were answered so far.
    pub fn count(&self, op: GcsOp) -> usize {
        self.lock().count(op)
    }

    /// Forget the request log (and reset [`FakeGcs::max_in_flight`]).
    pub fn clear_requests(&self) {
        let mut state = self.lock();
        state.clear_requests();
        state.max_in_flight = state.in_flight;
    }

    /// The most requests the server was answering at the same time (a
    /// request counts from its arrival until its answer starts), to check
    /// that a client works in parallel and within its bound.
    pub fn max_in_flight(&self) -> usize {
        self.lock().max_in_flight
    }
}

/// In-process access to a fake GCS server's buckets, for the other fakes of
/// this crate: the fake Cloud Build reads its sources and writes its logs
/// here, as the real one does in GCS. Reads and writes are not logged as
/// requests and no fault applies to them (they are not client requests).
#[derive(Debug, Clone)]
pub(crate) struct GcsBuckets(Arc<Mutex<State>>);

impl GcsBuckets {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An object's bytes, or GCS's error (`NoSuchBucket`, `NoSuchKey`).
    pub(crate) fn read(&self, bucket: &str, name: &str) -> Result<Vec<u8>, String> {
        self.lock()
            .get(bucket, name)
            .map(|o| o.bytes())
            .map_err(|f| format!("{} {}: {}", f.status, f.code, f.message))
    }

    /// Store an object in an existing bucket, or GCS's error.
    pub(crate) fn write(
        &self,
        bucket: &str,
        name: &str,
        data: Vec<u8>,
        content_type: &str,
    ) -> Result<(), String> {
        self.lock()
            .put(
                bucket,
                name,
                vec![Bytes::from(data)],
                content_type.to_owned(),
                None,
            )
            .map(|_| ())
            .map_err(|f| format!("{} {}: {}", f.status, f.code, f.message))
    }
}

impl Drop for FakeGcs {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            // Never blocks, so dropping the fake inside an async test is fine.
            rt.shutdown_background();
        }
    }
}
