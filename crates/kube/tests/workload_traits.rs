//! The backend acts on each [`WorkloadTraits`] value: a workload kind
//! over a recording API server, whose requests show the events read, the
//! log pods chosen, the end patch written, the kept log and the state read
//! before a cancel.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use http_body_util::BodyExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kinetic_core::ids::JobId;
use kinetic_core::ports::{
    Backend, BackendCapabilities, BackendError, CleanupWait, LogOptions, PreparedJob,
};
use kinetic_core::record::{JobRecord, UtcTimestamp};
use kinetic_core::status::{JobState, JobStatus, StatusReason};
use kinetic_kube::pod::{ANNOTATION_FINAL_STATE, ManifestOptions, owner_reference};
use kinetic_kube::{Keeps, KubeBackend, KubeOptions, LazyClient, Workload, WorkloadTraits};
use kube::api::Api;
use serde_json::{Value, json};

/// A kind whose every difference is set away from the defaults (or to
/// them, by `plain`), over batch/v1 Jobs; its state is `Failed` (exit
/// code 3) while it has no pod.
#[derive(Debug, Clone)]
struct Widget {
    traits: WorkloadTraits,
}

impl Widget {
    fn plain() -> Self {
        Self {
            traits: WorkloadTraits::new(
                "widgets",
                "Widget",
                "jobs",
                "kinetic-widget",
                BackendCapabilities::single_host(),
            ),
        }
    }

    fn set() -> Self {
        Self {
            traits: Self::plain()
                .traits
                .event_kinds(&["StatefulSet", "Widget"])
                .log_pod_label("role", "leader")
                .saves_logs(true)
                .ends_in_pods(true)
                .keeps(Keeps::EveryEnd)
                .end_patch(json!({"spec": {"parallelism": 0}})),
        }
    }
}

#[async_trait]
impl Workload for Widget {
    type Object = Job;

    fn traits(&self) -> WorkloadTraits {
        self.traits.clone()
    }

    async fn api(&self, client: &kube::Client, namespace: &str) -> Result<Api<Job>, BackendError> {
        Ok(Api::namespaced(client.clone(), namespace))
    }

    fn build(&self, _job: &PreparedJob, _options: &ManifestOptions) -> Job {
        Job::default()
    }

    fn owner(&self, created: &Job) -> OwnerReference {
        owner_reference(
            "batch/v1",
            "Job",
            created.metadata.name.as_deref().unwrap_or_default(),
            created.metadata.uid.as_deref().unwrap_or_default(),
        )
    }

    fn needs_pods(&self, _job: &Job) -> bool {
        true
    }

    fn state(&self, _job: &Job, pods: &[Pod], _events: &[Event], _now: SystemTime) -> JobState {
        if pods.is_empty() {
            JobState::new(JobStatus::Failed).with_reason(StatusReason::ExitCode { code: 3 })
        } else {
            JobState::new(JobStatus::Running)
        }
    }

    fn is_finished(&self, _job: &Job) -> bool {
        false
    }
}

/// A request the API server saw: method, path and query (decoded), body.
#[derive(Debug, Clone)]
struct Seen {
    line: String,
    body: Value,
}

type Log = Arc<Mutex<Vec<Seen>>>;

fn answer(method: &http::Method, path: &str) -> (u16, Value) {
    let list = |kind: &str| json!({"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "1"}, "items": []});
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "kinetic-w", "namespace": "default", "uid": "u1", "resourceVersion": "7"},
    });
    if path.ends_with("/pods") {
        (200, list("PodList"))
    } else if path.ends_with("/events") {
        (200, list("EventList"))
    } else if path.contains("/configmaps") && method == http::Method::POST {
        (
            201,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kinetic-w-log"}}),
        )
    } else if path.contains("/configmaps/") {
        let status = json!({"apiVersion": "v1", "kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"});
        (404, status)
    } else if path.contains("/jobs/kinetic-w") {
        (200, job)
    } else {
        (500, json!({"kind": "Status", "code": 500, "message": path}))
    }
}

fn backend(workload: Widget) -> (KubeBackend<Widget>, Log) {
    let log: Log = Arc::default();
    let seen = log.clone();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let seen = seen.clone();
        async move {
            let method = req.method().clone();
            let uri = req.uri().clone();
            let bytes = req.into_body().collect().await?.to_bytes();
            let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let query: Vec<String> = form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let query = query.join("&");
            let line = format!("{method} {}?{query}", uri.path());
            seen.lock().expect("log").push(Seen { line, body });
            let (code, answer) = answer(&method, uri.path());
            let response = http::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(answer.to_string().into_bytes()))?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(response)
        }
    });
    let client = kube::Client::new(service, "default");
    let options = KubeOptions::new("default").poll_interval(Duration::from_millis(20));
    (
        KubeBackend::with_workload(LazyClient::given(client), workload, options),
        log,
    )
}

fn record() -> JobRecord {
    let job_id = JobId::new_random();
    JobRecord {
        accelerator: "cpu".into(),
        backend: "widgets".into(),
        bucket_name: "b".into(),
        cluster_name: "c".into(),
        created_at: UtcTimestamp::now(),
        debug: false,
        display_name: "w".into(),
        entrypoint: None,
        func_name: "f".into(),
        group_id: None,
        group_index: None,
        group_kind: None,
        image_uri: "img".into(),
        job_id,
        k8s_name: "kinetic-w".into(),
        namespace: "default".into(),
        project: "p".into(),
        store_url: None,
        zone: "z".into(),
    }
}

/// The final state a patch writes.
fn final_state(patch: &Value) -> JobState {
    let text = patch["metadata"]["annotations"][ANNOTATION_FINAL_STATE]
        .as_str()
        .expect("a final state");
    serde_json::from_str(text).expect("a job state")
}

fn lines(log: &Log) -> Vec<String> {
    log.lock()
        .expect("log")
        .iter()
        .map(|s| s.line.clone())
        .collect()
}

fn patches(log: &Log) -> Vec<Value> {
    log.lock()
        .expect("log")
        .iter()
        .filter(|s| s.line.starts_with("PATCH "))
        .map(|s| s.body.clone())
        .collect()
}

#[tokio::test]
async fn a_podless_object_reads_the_events_of_each_event_kind() {
    let (backend, log) = backend(Widget::set());
    backend.status(&record()).await.expect("status");
    let events: Vec<String> = lines(&log)
        .into_iter()
        .filter(|l| l.contains("/events?"))
        .collect();
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(events[0].contains("fieldSelector=involvedObject.kind=StatefulSet"));
    assert!(events[1].contains("fieldSelector=involvedObject.kind=Widget"));

    let (backend, log) = backend_plain();
    backend.status(&record()).await.expect("status");
    let events: Vec<String> = lines(&log)
        .into_iter()
        .filter(|l| l.contains("/events?"))
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0].contains("fieldSelector=involvedObject.kind=Widget"));
}

fn backend_plain() -> (KubeBackend<Widget>, Log) {
    backend(Widget::plain())
}

#[tokio::test]
async fn a_kept_end_is_written_with_the_end_patch_and_the_log_kept() {
    let (backend, log) = backend(Widget::set());
    let state = backend.status(&record()).await.expect("status");
    assert_eq!(state.status, JobStatus::Failed);
    let patches = patches(&log);
    assert_eq!(patches.len(), 1, "{:?}", lines(&log));
    assert_eq!(patches[0]["spec"], json!({"parallelism": 0}));
    assert_eq!(patches[0]["metadata"]["resourceVersion"], "7");
    assert_eq!(final_state(&patches[0]), state);
    // The log was kept, from the log pods (the leader), before the end.
    let seen = lines(&log);
    let kept = seen
        .iter()
        .position(|l| l.starts_with("POST /api/v1/namespaces/default/configmaps"))
        .expect("the log kept");
    let patched = seen
        .iter()
        .position(|l| l.starts_with("PATCH "))
        .expect("patched");
    assert!(kept < patched, "{seen:?}");
    assert!(
        seen.iter()
            .any(|l| l.contains("/pods?")
                && l.contains("labelSelector=job-name=kinetic-w,role=leader")),
        "{seen:?}"
    );
}

#[tokio::test]
async fn the_default_traits_keep_no_exit_code_and_keep_no_log() {
    let (backend, log) = backend_plain();
    let state = backend.status(&record()).await.expect("status");
    assert_eq!(state.status, JobStatus::Failed);
    assert!(patches(&log).is_empty(), "{:?}", lines(&log));
    assert!(!lines(&log).iter().any(|l| l.contains("/configmaps")));
}

#[tokio::test]
async fn logs_read_the_kept_log_then_the_log_pods_by_their_labels() {
    let (backend, log) = backend(Widget::set());
    let text = backend
        .logs(&record(), LogOptions::default())
        .await
        .expect("logs");
    assert_eq!(text, "");
    let seen = lines(&log);
    assert!(
        seen[0].starts_with("GET /api/v1/namespaces/default/configmaps/kinetic-w-log"),
        "{seen:?}"
    );
    assert!(
        seen[1].contains("labelSelector=job-name=kinetic-w,role=leader"),
        "{seen:?}"
    );

    let (backend, log) = backend_plain();
    backend
        .logs(&record(), LogOptions::default())
        .await
        .expect("logs");
    let seen = lines(&log);
    assert!(!seen.iter().any(|l| l.contains("/configmaps")), "{seen:?}");
    assert!(
        seen[0].ends_with("labelSelector=job-name=kinetic-w"),
        "{seen:?}"
    );
}

#[tokio::test]
async fn a_cancel_reads_the_state_first_when_the_end_is_in_the_pods() {
    let wait = CleanupWait::default();
    // The pods tell the job ended (failed): the end is written as it was,
    // not as cancelled.
    let (backend, log) = backend(Widget::set());
    backend.cancel(&record(), wait).await.expect("cancel");
    let written = patches(&log);
    assert_eq!(written.len(), 1, "{:?}", lines(&log));
    assert_eq!(
        final_state(&written[0]).reason,
        Some(StatusReason::ExitCode { code: 3 })
    );

    // Without: cancelled at once, with the kind's end patch (none).
    let (backend, log) = backend_plain();
    backend.cancel(&record(), wait).await.expect("cancel");
    let seen = lines(&log);
    assert!(!seen.iter().any(|l| l.contains("/pods?")), "{seen:?}");
    let written = patches(&log);
    assert_eq!(written.len(), 1, "{seen:?}");
    assert_eq!(
        final_state(&written[0]).reason,
        Some(StatusReason::Cancelled)
    );
    assert!(written[0].get("spec").is_none());
}
