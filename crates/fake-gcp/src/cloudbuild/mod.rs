//! A fake of Cloud Build and Artifact Registry: a stateful HTTP server on
//! 127.0.0.1 that speaks the REST calls an image builder makes.
//!
//! - `POST /v1/projects/{p}/locations/{l}/builds` (and `/v1/projects/{p}/builds`)
//!   creates a build and answers with its long-running operation; the
//!   context tarball is read from its bucket when the fake can see it — a
//!   store attached under the bucket's name ([`FakeCloudBuild::attach_bucket`])
//!   or any bucket of a fake GCS server ([`FakeCloudBuild::attach_gcs`]) —
//!   and a missing source fails the build, as Cloud Build's fetch step would.
//! - `GET /v1/projects/{p}/locations/{l}/builds/{id}` advances the build
//!   one poll along its [`BuildSchedule`]: `QUEUED` for `queued_polls`
//!   polls, `WORKING` for `working_polls`, then `SUCCESS` or `FAILURE`. A
//!   successful build's images appear in the registry; a finished build's
//!   log is written to `{logsBucket}/log-{id}.txt` when the fake sees that
//!   bucket.
//! - `GET /v1/projects/{p}/locations/{l}/repositories/{r}/packages/{pkg}/tags/{t}`
//!   is Artifact Registry's `GetTag`: the tag, or 404.
//!
//! Errors can be injected per route ([`FakeCloudBuild::fail_next`]) with
//! Google's error body; a bearer token can be required.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use kinetic_fake_gcp::cloudbuild::{BuildSchedule, FakeCloudBuild};
//!
//! let fake = FakeCloudBuild::start().await.unwrap();
//! fake.set_schedule(BuildSchedule::success().with_polls(1, 2));
//! assert!(fake.endpoint().starts_with("http://127.0.0.1:"));
//! assert!(fake.tags().is_empty());
//! # });
//! ```

mod server;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::gcs::{FakeGcs, GcsBuckets};
pub(crate) use crate::google::google_error;
use crate::images::ImageEnvironments;

/// A bucket the fake Cloud Build reads build sources from and writes build
/// logs to, in process ([`FakeCloudBuild::attach_bucket`]): any object
/// store, adapted. Errors are messages the build's log carries.
pub trait BuildBucket: std::fmt::Debug + Send + Sync {
    /// The bytes of `object`.
    fn read<'a>(&'a self, object: &'a str) -> BoxFuture<'a, Result<Vec<u8>, String>>;
    /// Write `text` to `object` as `text/plain`.
    fn write_text<'a>(&'a self, object: &'a str, text: String)
    -> BoxFuture<'a, Result<(), String>>;
}

/// How a build ends.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildOutcome {
    /// `SUCCESS`; its images are pushed to the fake registry.
    Success,
    /// A failure status (`FAILURE`, `INTERNAL_ERROR`, `TIMEOUT`,
    /// `CANCELLED`…) with Cloud Build's detail and the build's log.
    Failure {
        /// The final status.
        status: String,
        /// The status detail.
        detail: String,
        /// The log text written to the logs bucket.
        log: String,
    },
    /// Stays `WORKING` forever (for timeouts).
    Never,
}

/// The life of a build, counted in polls (`GET` of the build).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildSchedule {
    /// Polls that still see `QUEUED`.
    pub queued_polls: u32,
    /// Polls that then see `WORKING`.
    pub working_polls: u32,
    /// What the next poll sees.
    pub outcome: BuildOutcome,
}

impl Default for BuildSchedule {
    fn default() -> Self {
        Self::success()
    }
}

impl BuildSchedule {
    /// A build that succeeds on its second poll (one `QUEUED`, then `SUCCESS`).
    pub fn success() -> Self {
        Self {
            queued_polls: 1,
            working_polls: 0,
            outcome: BuildOutcome::Success,
        }
    }

    /// A build that ends `FAILURE` with this detail and log.
    pub fn failure(detail: &str, log: &str) -> Self {
        Self {
            queued_polls: 1,
            working_polls: 0,
            outcome: BuildOutcome::Failure {
                status: "FAILURE".into(),
                detail: detail.into(),
                log: log.into(),
            },
        }
    }

    /// A build that never ends.
    pub fn never_finishes() -> Self {
        Self {
            queued_polls: 0,
            working_polls: 0,
            outcome: BuildOutcome::Never,
        }
    }

    /// The same outcome after `queued` polls in `QUEUED` and `working` in `WORKING`.
    pub fn with_polls(mut self, queued: u32, working: u32) -> Self {
        self.queued_polls = queued;
        self.working_polls = working;
        self
    }

    fn status_after(&self, polls: u32) -> &str {
        if polls <= self.queued_polls {
            "QUEUED"
        } else if polls <= self.queued_polls.saturating_add(self.working_polls) {
            "WORKING"
        } else {
            match &self.outcome {
                BuildOutcome::Success => "SUCCESS",
                BuildOutcome::Failure { status, .. } => status,
                BuildOutcome::Never => "WORKING",
            }
        }
    }
}

/// Which calls an injected error hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FakeRoute {
    /// Cloud Build `CreateBuild`.
    CreateBuild,
    /// Cloud Build `GetBuild`.
    GetBuild,
    /// Artifact Registry `GetTag`.
    GetTag,
    /// Any call.
    Any,
}

/// A build the fake holds.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FakeBuild {
    /// Its id.
    pub id: String,
    /// Project it was created in.
    pub project: String,
    /// Location it was created in.
    pub location: String,
    /// The request body as sent.
    pub request: Value,
    /// Its current status.
    pub status: String,
    /// Polls so far.
    pub polls: u32,
    /// The files of its context tarball (when the fake sees its bucket).
    pub files: BTreeMap<String, String>,
}

impl FakeBuild {
    /// The images the request asks Cloud Build to push, or those the steps
    /// push themselves (`docker push IMAGE`).
    pub fn images(&self) -> Vec<String> {
        let mut images: Vec<String> = self.request["images"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        for step in self.request["steps"].as_array().into_iter().flatten() {
            let args: Vec<&str> = step["args"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if let ["push", image] = args.as_slice() {
                images.push((*image).to_owned());
            }
        }
        images
    }

    /// The `Dockerfile` of its context, when known.
    pub fn dockerfile(&self) -> Option<&str> {
        self.files.get("Dockerfile").map(String::as_str)
    }
}

/// An error to hand out.
#[derive(Debug, Clone)]
struct Injected {
    route: FakeRoute,
    status: u16,
    body: Value,
    remaining: u32,
}

/// An image environment being made for a build: `None` while running,
/// then its log or the failure's log.
pub(crate) type EnvBuild = Arc<Mutex<Option<Result<String, String>>>>;

#[derive(Debug, Default)]
struct State {
    token: Option<String>,
    schedule: BuildSchedule,
    next_schedules: VecDeque<BuildSchedule>,
    builds: Vec<FakeBuild>,
    schedules: HashMap<String, BuildSchedule>,
    tags: BTreeSet<String>,
    pushed: BTreeSet<String>,
    buckets: HashMap<String, Arc<dyn BuildBucket>>,
    gcs: Option<GcsBuckets>,
    injected: Vec<Injected>,
    requests: HashMap<&'static str, usize>,
    /// The environments of the registry's images, when builds make them.
    images: Option<Arc<ImageEnvironments>>,
    /// Environment builds under way or done, by build id: `None` while
    /// running, then the log or the failure's log.
    env_builds: HashMap<String, EnvBuild>,
}

/// Where a build's bucket is: a store attached under its name, or a fake
/// GCS server's.
#[derive(Debug, Clone)]
enum Bucket {
    Store(Arc<dyn BuildBucket>),
    Gcs(GcsBuckets),
}

impl Bucket {
    /// The bucket `name` as the fake sees it, if it sees one.
    fn find(state: &State, name: &str) -> Option<Self> {
        match state.buckets.get(name) {
            Some(store) => Some(Self::Store(store.clone())),
            None => state.gcs.clone().map(Self::Gcs),
        }
    }

    async fn read(&self, bucket: &str, object: &str) -> Result<Vec<u8>, String> {
        match self {
            Self::Store(store) => store.read(object).await,
            Self::Gcs(gcs) => gcs.read(bucket, object),
        }
    }

    async fn write_text(&self, bucket: &str, object: &str, text: String) -> Result<(), String> {
        match self {
            Self::Store(store) => store.write_text(object, text).await,
            Self::Gcs(gcs) => gcs.write(bucket, object, text.into_bytes(), "text/plain"),
        }
    }
}

/// The fake server. Dropping it stops the server.
#[derive(Debug)]
pub struct FakeCloudBuild {
    state: Arc<Mutex<State>>,
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeCloudBuild {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// The Artifact Registry tag resource of an image in a `*-docker.pkg.dev`
/// repository (`us-docker.pkg.dev/p/repo/base:tag` →
/// `projects/p/locations/us/repositories/repo/packages/base/tags/tag`), or
/// `None` for any other image.
pub fn tag_resource_for_image(image: &str) -> Option<String> {
    let (host, rest) = image.split_once('/')?;
    let location = host.strip_suffix("-docker.pkg.dev")?;
    let (project, rest) = rest.split_once('/')?;
    let (repository, package_and_tag) = rest.split_once('/')?;
    let (package, tag) = package_and_tag.rsplit_once(':')?;
    if package.contains('@') || tag.contains('/') {
        return None;
    }
    Some(format!(
        "projects/{project}/locations/{location}/repositories/{repository}/packages/{package}/tags/{tag}"
    ))
}

impl FakeCloudBuild {
    /// Start a fake on 127.0.0.1 on a free port.
    pub async fn start() -> std::io::Result<Self> {
        let state = Arc::new(Mutex::new(State::default()));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let app = server::router(state.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { state, addr, task })
    }

    /// The fake's routes over its state, for another server to serve as
    /// well (one endpoint for every Google API of a fake project).
    pub(crate) fn routes(&self) -> axum::Router {
        server::routes().with_state(self.state.clone())
    }

    /// `http://127.0.0.1:{port}`: the endpoint of both APIs.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Require `Authorization: Bearer {token}` on every call (401 otherwise).
    pub fn require_token(&self, token: &str) {
        lock(&self.state).token = Some(token.to_owned());
    }

    /// The schedule of every build created from now on.
    pub fn set_schedule(&self, schedule: BuildSchedule) {
        lock(&self.state).schedule = schedule;
    }

    /// The schedule of the next build only (queued: each call serves one build).
    pub fn schedule_next(&self, schedule: BuildSchedule) {
        lock(&self.state).next_schedules.push_back(schedule);
    }

    /// The next `times` calls of `route` fail with `status` and a Google
    /// error body.
    pub fn fail_next(&self, route: FakeRoute, status: u16, times: u32) {
        let message = format!("injected {status} error");
        self.fail_next_with(route, status, &message, None, times);
    }

    /// Like [`FakeCloudBuild::fail_next`], with Google's `message` and an
    /// `ErrorInfo` `reason` (such as `SERVICE_DISABLED`).
    pub fn fail_next_with(
        &self,
        route: FakeRoute,
        status: u16,
        message: &str,
        reason: Option<&str>,
        times: u32,
    ) {
        lock(&self.state).injected.push(Injected {
            route,
            status,
            body: google_error(status, message, reason),
            remaining: times,
        });
    }

    /// Serve the bucket `bucket` from `store`: build sources are read from
    /// it and build logs written to it.
    pub fn attach_bucket(&self, bucket: &str, store: Arc<dyn BuildBucket>) {
        lock(&self.state).buckets.insert(bucket.to_owned(), store);
    }

    /// See every bucket of `gcs` that is not attached as a store: build
    /// sources are read from it and build logs written to it, in process.
    /// A build whose source bucket or object is missing there fails its
    /// fetch step.
    pub fn attach_gcs(&self, gcs: &FakeGcs) {
        lock(&self.state).gcs = Some(gcs.shared());
    }

    /// Make each built image's environment ([`ImageEnvironments::build`])
    /// before the build succeeds; a failed install fails the build with
    /// pip's output in its log.
    pub fn attach_images(&self, images: Arc<ImageEnvironments>) {
        lock(&self.state).images = Some(images);
    }

    /// Put an image in the registry, as if pushed earlier. Returns false
    /// for an image outside a `*-docker.pkg.dev` repository.
    pub fn add_image(&self, image: &str) -> bool {
        match tag_resource_for_image(image) {
            Some(resource) => {
                lock(&self.state).tags.insert(resource);
                true
            }
            None => false,
        }
    }

    /// True when the image was pushed (to the registry or elsewhere).
    pub fn has_image(&self, image: &str) -> bool {
        let state = lock(&self.state);
        state.pushed.contains(image)
            || tag_resource_for_image(image).is_some_and(|r| state.tags.contains(&r))
    }

    /// Every tag resource in the registry.
    pub fn tags(&self) -> Vec<String> {
        lock(&self.state).tags.iter().cloned().collect()
    }

    /// Every build, oldest first.
    pub fn builds(&self) -> Vec<FakeBuild> {
        lock(&self.state).builds.clone()
    }

    /// Builds created so far.
    pub fn builds_created(&self) -> usize {
        lock(&self.state).builds.len()
    }

    /// Calls of `route` received so far (injected failures included).
    pub fn requests(&self, route: FakeRoute) -> usize {
        let state = lock(&self.state);
        match route {
            FakeRoute::Any => state.requests.values().sum(),
            other => state
                .requests
                .get(server::route_name(other))
                .copied()
                .unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_resources_of_registry_images() {
        assert_eq!(
            tag_resource_for_image("europe-docker.pkg.dev/p/kn-c/base:tpu-0123456789ab").as_deref(),
            Some(
                "projects/p/locations/europe/repositories/kn-c/packages/base/tags/tpu-0123456789ab"
            )
        );
        assert_eq!(tag_resource_for_image("kinetic/base-cpu:0.1.0"), None);
        assert_eq!(tag_resource_for_image("us-docker.pkg.dev/p/r/base"), None);
    }

    #[test]
    fn schedules_count_polls() {
        let s = BuildSchedule::success().with_polls(1, 2);
        let seen: Vec<&str> = (1..=4).map(|n| s.status_after(n)).collect();
        assert_eq!(seen, ["QUEUED", "WORKING", "WORKING", "SUCCESS"]);
        let f = BuildSchedule::failure("step 0 failed", "log").with_polls(0, 0);
        assert_eq!(f.status_after(1), "FAILURE");
        assert_eq!(
            BuildSchedule::never_finishes().status_after(1000),
            "WORKING"
        );
    }
}
