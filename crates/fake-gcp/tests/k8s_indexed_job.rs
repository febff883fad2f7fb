//! The fake Job controller runs an Indexed Job (`completionMode: Indexed`)
//! as Kubernetes 1.32's does, seen through a real `kube::Client`: each pod
//! carries its completion index (annotation, label, `JOB_COMPLETION_INDEX`
//! through the downward API, hostname and name), at most `parallelism`
//! run, the lowest pending indexes first; `status.completedIndexes` and
//! `status.failedIndexes` are the compressed interval strings; with
//! `backoffLimitPerIndex` failures count per index (the replacement's
//! `job-index-failure-count`), a `FailIndex` rule fails the index at once,
//! and the Job fails with `FailedIndexes` or `MaxFailedIndexesExceeded`;
//! the API server refuses what its validation refuses, with its 422.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kinetic_fake_gcp::k8s::{FakeCluster, FakeClusterConfig};
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};
use serde_json::{Value, json};

const IMAGE: &str = "fake.registry.invalid/x:1";
const INDEX: &str = "batch.kubernetes.io/job-completion-index";
const FAILURES: &str = "batch.kubernetes.io/job-index-failure-count";
const IGNORED: &str = "batch.kubernetes.io/job-index-ignored-failure-count";

async fn cluster() -> (FakeCluster, Api<Job>, Api<Pod>) {
    let cluster = FakeCluster::start(FakeClusterConfig::default().image(IMAGE, "python3"))
        .await
        .unwrap();
    let client = kube::Client::try_from(kube::Config::new(cluster.url().parse().unwrap())).unwrap();
    let jobs = Api::namespaced(client.clone(), "default");
    let pods = Api::namespaced(client, "default");
    (cluster, jobs, pods)
}

/// An Indexed Job running `script` in `sh -c`, with `extra` merged into
/// its spec.
fn job(name: &str, completions: i32, parallelism: i32, script: &str, extra: Value) -> Job {
    let mut j = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completionMode": "Indexed",
            "completions": completions,
            "parallelism": parallelism,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": IMAGE, "command": ["sh", "-c", script]}],
            }},
        },
    });
    if let Value::Object(more) = extra {
        for (k, v) in more {
            j["spec"][k] = v;
        }
    }
    serde_json::from_value(j).unwrap()
}

fn condition<'a>(
    job: &'a Job,
    kind: &str,
) -> Option<&'a k8s_openapi::api::batch::v1::JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind && c.status == "True")
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn index(pod: &Pod) -> usize {
    annotation(pod, INDEX).unwrap().parse().unwrap()
}

async fn listed(pods: &Api<Pod>, job: &str) -> Vec<Pod> {
    pods.list(&ListParams::default().labels(&format!("job-name={job}")))
        .await
        .unwrap()
        .items
}

/// Poll the Job until `done` says so (30 s at most).
async fn wait_job(jobs: &Api<Job>, name: &str, done: impl Fn(&Job) -> bool) -> Job {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let j = jobs.get(name).await.unwrap();
        if done(&j) {
            return j;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still waiting: {:?}",
            j.status
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn finished(j: &Job) -> bool {
    condition(j, "Complete").is_some() || condition(j, "Failed").is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexed_pods_carry_their_index_and_at_most_parallelism_run() {
    let (_cluster, jobs, pods) = cluster().await;
    let script = "echo \"index=$JOB_COMPLETION_INDEX host=$HOSTNAME\"; sleep 0.3";
    jobs.create(&PostParams::default(), &job("idx", 5, 2, script, json!({})))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut first: Option<Vec<usize>> = None;
    let done = loop {
        let now = listed(&pods, "idx").await;
        let running: Vec<&Pod> = now
            .iter()
            .filter(|p| !matches!(phase(p), "Succeeded" | "Failed"))
            .collect();
        assert!(
            running.len() <= 2,
            "more than parallelism: {}",
            running.len()
        );
        if first.is_none() && !now.is_empty() {
            let mut ix: Vec<usize> = now.iter().map(index).collect();
            ix.sort();
            first = Some(ix);
        }
        let j = jobs.get("idx").await.unwrap();
        let active = j.status.as_ref().and_then(|s| s.active).unwrap_or(0);
        assert!(active <= 2, "status.active {active}");
        if finished(&j) {
            break j;
        }
        assert!(tokio::time::Instant::now() < deadline, "{:?}", j.status);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(first, Some(vec![0, 1]), "the lowest indexes start first");
    assert!(condition(&done, "SuccessCriteriaMet").is_some());
    assert_eq!(
        condition(&done, "Complete").unwrap().reason.as_deref(),
        Some("CompletionsReached")
    );
    let status = done.status.unwrap();
    assert_eq!(status.completed_indexes.as_deref(), Some("0-4"));
    assert_eq!(
        (status.succeeded, status.failed, status.active),
        (Some(5), Some(0), Some(0))
    );
    let all = listed(&pods, "idx").await;
    let mut by_index: BTreeMap<usize, &Pod> = BTreeMap::new();
    for p in &all {
        assert!(by_index.insert(index(p), p).is_none(), "an index ran twice");
    }
    assert_eq!(
        by_index.keys().copied().collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4]
    );
    for (i, p) in by_index {
        let name = p.metadata.name.clone().unwrap();
        let prefix = format!("idx-{i}-");
        assert!(
            name.starts_with(&prefix) && name.len() == prefix.len() + 5,
            "{name}"
        );
        let labels = p.metadata.labels.as_ref().unwrap();
        assert_eq!(
            labels.get(INDEX).map(String::as_str),
            Some(i.to_string().as_str())
        );
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some(format!("idx-{i}").as_str()));
        let env = spec.containers[0].env.as_ref().unwrap();
        let var = env
            .iter()
            .find(|e| e.name == "JOB_COMPLETION_INDEX")
            .unwrap();
        assert_eq!(
            var.value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .map(|f| f.field_path.as_str()),
            Some("metadata.labels['batch.kubernetes.io/job-completion-index']")
        );
        assert_eq!(
            annotation(p, FAILURES),
            None,
            "no per-index limit, no count"
        );
        let log = pods.logs(&name, &LogParams::default()).await.unwrap();
        assert_eq!(log.trim(), format!("index={i} host=idx-{i}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completed_indexes_are_compressed_and_deleting_pods_takes_nothing_back() {
    let (_cluster, jobs, pods) = cluster().await;
    let script = "case $JOB_COMPLETION_INDEX in 1|3|4|5|7) exit 0;; *) sleep 60;; esac";
    jobs.create(
        &PostParams::default(),
        &job("gaps", 8, 8, script, json!({})),
    )
    .await
    .unwrap();
    let shaped = |j: &Job| {
        j.status.as_ref().is_some_and(|s| {
            s.completed_indexes.as_deref() == Some("1,3-5,7") && s.ready == Some(3)
        })
    };
    let j = wait_job(&jobs, "gaps", shaped).await;
    let s = j.status.unwrap();
    assert_eq!(
        (s.succeeded, s.active, s.failed),
        (Some(5), Some(3), Some(0))
    );
    // PodGC, an eviction or a user deletes the pods that succeeded: their
    // indexes stay succeeded and nothing replaces them.
    for p in listed(&pods, "gaps").await {
        if phase(&p) == "Succeeded" {
            pods.delete(
                p.metadata.name.as_deref().unwrap(),
                &DeleteParams::default(),
            )
            .await
            .unwrap();
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while listed(&pods, "gaps").await.len() != 3 {
        assert!(tokio::time::Instant::now() < deadline, "not deleted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let left = listed(&pods, "gaps").await;
    let mut ix: Vec<usize> = left.iter().map(index).collect();
    ix.sort();
    assert_eq!(ix, vec![0, 2, 6], "no succeeded index runs again");
    let s = jobs.get("gaps").await.unwrap().status.unwrap();
    assert_eq!(s.completed_indexes.as_deref(), Some("1,3-5,7"));
    assert_eq!((s.succeeded, s.active), (Some(5), Some(3)));
    assert!(s.conditions.unwrap_or_default().is_empty(), "still running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_over_its_backoff_limit_fails_and_the_job_fails_with_failed_indexes() {
    let (_cluster, jobs, pods) = cluster().await;
    let script = "[ \"$JOB_COMPLETION_INDEX\" != 1 ]";
    let spec = json!({"backoffLimitPerIndex": 1});
    jobs.create(&PostParams::default(), &job("perix", 3, 3, script, spec))
        .await
        .unwrap();
    let done = wait_job(&jobs, "perix", |j| condition(j, "Failed").is_some()).await;
    for c in [
        condition(&done, "FailureTarget").unwrap(),
        condition(&done, "Failed").unwrap(),
    ] {
        assert_eq!(c.reason.as_deref(), Some("FailedIndexes"));
        assert_eq!(c.message.as_deref(), Some("Job has failed indexes"));
    }
    let s = done.status.unwrap();
    assert_eq!(s.completed_indexes.as_deref(), Some("0,2"));
    assert_eq!(s.failed_indexes.as_deref(), Some("1"));
    assert_eq!((s.succeeded, s.failed), (Some(2), Some(2)));
    let all = listed(&pods, "perix").await;
    let mut counts: Vec<(usize, String)> = all
        .iter()
        .map(|p| (index(p), annotation(p, FAILURES).unwrap().to_owned()))
        .collect();
    counts.sort();
    // Index 1 ran twice (backoffLimitPerIndex 1): its replacement carries
    // the failure of the first.
    assert_eq!(
        counts,
        [(0, "0"), (1, "0"), (1, "1"), (2, "0")].map(|(i, c)| (i, c.to_owned()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_failed_indexes_than_allowed_fail_the_job_at_once() {
    let (_cluster, jobs, pods) = cluster().await;
    // One at a time: indexes 0 and 1 fail, the rest would succeed.
    let script = "[ \"$JOB_COMPLETION_INDEX\" -ge 2 ]";
    let spec = json!({"backoffLimitPerIndex": 0, "maxFailedIndexes": 1});
    jobs.create(&PostParams::default(), &job("maxf", 5, 1, script, spec))
        .await
        .unwrap();
    let done = wait_job(&jobs, "maxf", |j| condition(j, "Failed").is_some()).await;
    let failed = condition(&done, "Failed").unwrap();
    assert_eq!(failed.reason.as_deref(), Some("MaxFailedIndexesExceeded"));
    assert_eq!(
        failed.message.as_deref(),
        Some("Job has exceeded the specified maximal number of failed indexes")
    );
    let s = done.status.unwrap();
    assert_eq!(s.failed_indexes.as_deref(), Some("0,1"));
    assert_eq!((s.succeeded, s.failed), (Some(0), Some(2)));
    assert_eq!(s.completed_indexes, None);
    let mut ix: Vec<usize> = listed(&pods, "maxf").await.iter().map(index).collect();
    ix.sort();
    assert_eq!(ix, vec![0, 1], "no index after the second failure started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fail_index_rule_fails_its_index_without_retries() {
    let (_cluster, jobs, pods) = cluster().await;
    let script = "[ \"$JOB_COMPLETION_INDEX\" = 0 ] && exit 42; exit 0";
    let spec = json!({
        "backoffLimitPerIndex": 3,
        "podFailurePolicy": {"rules": [
            {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [42]}},
        ]},
    });
    jobs.create(&PostParams::default(), &job("failix", 2, 2, script, spec))
        .await
        .unwrap();
    let done = wait_job(&jobs, "failix", |j| condition(j, "Failed").is_some()).await;
    assert_eq!(
        condition(&done, "Failed").unwrap().reason.as_deref(),
        Some("FailedIndexes")
    );
    let s = done.status.unwrap();
    assert_eq!(s.failed_indexes.as_deref(), Some("0"));
    assert_eq!(s.completed_indexes.as_deref(), Some("1"));
    assert_eq!((s.succeeded, s.failed), (Some(1), Some(1)));
    assert_eq!(
        listed(&pods, "failix").await.len(),
        2,
        "index 0 not retried"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ignored_failure_is_retried_and_counted_apart_on_the_replacement() {
    let (_cluster, jobs, pods) = cluster().await;
    // The replacement reads its index's ignored failures through the
    // downward API and succeeds; the first try exits 3 (ignored).
    let mut j = job(
        "ign",
        1,
        1,
        "[ -n \"$IGNORED\" ] || exit 3",
        json!({
            "backoffLimitPerIndex": 0,
            "podFailurePolicy": {"rules": [
                {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}},
            ]},
        }),
    );
    let c = &mut j
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0];
    c.env = Some(vec![
        serde_json::from_value(json!({
            "name": "IGNORED",
            "valueFrom": {"fieldRef": {"fieldPath": format!("metadata.annotations['{IGNORED}']")}},
        }))
        .unwrap(),
    ]);
    jobs.create(&PostParams::default(), &j).await.unwrap();
    let done = wait_job(&jobs, "ign", finished).await;
    assert!(condition(&done, "Complete").is_some(), "{:?}", done.status);
    let s = done.status.unwrap();
    assert_eq!((s.succeeded, s.failed), (Some(1), Some(0)));
    assert_eq!(s.failed_indexes.as_deref(), Some(""));
    let mut all = listed(&pods, "ign").await;
    all.sort_by_key(|p| annotation(p, IGNORED).map(str::to_owned));
    let seen: Vec<(&str, Option<&str>, Option<&str>)> = all
        .iter()
        .map(|p| (phase(p), annotation(p, FAILURES), annotation(p, IGNORED)))
        .collect();
    assert_eq!(
        seen,
        vec![
            ("Failed", Some("0"), None),
            ("Succeeded", Some("0"), Some("1"))
        ]
    );
}

async fn refused(jobs: &Api<Job>, j: Job) -> String {
    let name = j.metadata.name.clone().unwrap();
    let err = jobs.create(&PostParams::default(), &j).await.unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("not an API error: {err}")
    };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert!(jobs.get_opt(&name).await.unwrap().is_none(), "created");
    status.message
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_refuses_what_its_validation_refuses() {
    let (_cluster, jobs, _pods) = cluster().await;
    let mut nonindexed = job("v1", 2, 1, "true", json!({"backoffLimitPerIndex": 1}));
    nonindexed.spec.as_mut().unwrap().completion_mode = Some("NonIndexed".into());
    assert_eq!(
        refused(&jobs, nonindexed).await,
        "Job.batch \"v1\" is invalid: spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode"
    );
    let mut no_completions = job("v2", 2, 1, "true", json!({"maxFailedIndexes": 1}));
    no_completions.spec.as_mut().unwrap().completions = None;
    assert_eq!(
        refused(&jobs, no_completions).await,
        "Job.batch \"v2\" is invalid: [spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified, spec.completions: Required value: when completion mode is Indexed]"
    );
    let fail_index = job(
        "v3",
        2,
        1,
        "true",
        json!({"podFailurePolicy": {"rules": [
            {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}},
        ]}}),
    );
    assert_eq!(
        refused(&jobs, fail_index).await,
        "Job.batch \"v3\" is invalid: spec.podFailurePolicy.rules[0].action: Invalid value: \"FailIndex\": requires the backoffLimitPerIndex to be set"
    );
    let too_many = job(
        "v4",
        2,
        1,
        "true",
        json!({"backoffLimitPerIndex": 0, "maxFailedIndexes": 3}),
    );
    assert_eq!(
        refused(&jobs, too_many).await,
        "Job.batch \"v4\" is invalid: spec.maxFailedIndexes: Invalid value: 3: must be less than or equal to completions"
    );
    let mut odd = job("v5", 2, 1, "true", json!({}));
    odd.spec.as_mut().unwrap().completion_mode = Some("Sometimes".into());
    assert_eq!(
        refused(&jobs, odd).await,
        "Job.batch \"v5\" is invalid: spec.completionMode: Unsupported value: \"Sometimes\": supported values: \"NonIndexed\", \"Indexed\""
    );
    let negative = job("v6", 2, 1, "true", json!({"backoffLimitPerIndex": -1}));
    assert_eq!(
        refused(&jobs, negative).await,
        "Job.batch \"v6\" is invalid: spec.backoffLimitPerIndex: Invalid value: -1: must be greater than or equal to 0"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_keeps_its_failure_count_when_its_failed_pod_is_deleted_before_its_retry() {
    use k8s_openapi::api::core::v1::ResourceQuota;
    let (cluster, jobs, pods) = cluster().await;
    let client = kube::Client::try_from(kube::Config::new(cluster.url().parse().unwrap())).unwrap();
    let quotas: Api<ResourceQuota> = Api::namespaced(client, "default");
    let blocker: Pod = serde_json::from_value(json!({
        "metadata": {"name": "blocker"},
        "spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": IMAGE, "command": ["sleep", "60"]},
        ]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &blocker).await.unwrap();
    let spec = json!({"backoffLimitPerIndex": 2});
    jobs.create(
        &PostParams::default(),
        &job("keep", 1, 1, "sleep 1; exit 1", spec),
    )
    .await
    .unwrap();
    let first = loop {
        let now = listed(&pods, "keep").await;
        if let Some(p) = now.into_iter().find(|p| phase(p) == "Running") {
            break p;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let first_name = first.metadata.name.clone().unwrap();
    // From now on the namespace has room for one pod, the blocker's: the
    // retry of index 0 is refused until the blocker goes.
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "one"}, "spec": {"hard": {"pods": "1"}},
    }))
    .unwrap();
    quotas.create(&PostParams::default(), &quota).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while phase(&pods.get(&first_name).await.unwrap()) != "Failed" {
        assert!(tokio::time::Instant::now() < deadline, "never failed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(listed(&pods, "keep").await.len(), 1, "retried over quota");
    let s = jobs.get("keep").await.unwrap().status.unwrap();
    assert_eq!(s.failed, Some(0), "counted once its retry exists");
    // A user (or PodGC) deletes the failed pod before its retry: it stays,
    // held by the tracking finalizer, and its count is not lost.
    pods.delete(&first_name, &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let held = pods.get(&first_name).await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    pods.delete("blocker", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let retry = loop {
        let now = listed(&pods, "keep").await;
        if let Some(p) = now
            .into_iter()
            .find(|p| p.metadata.name.as_deref() != Some(&first_name))
        {
            break p;
        }
        assert!(tokio::time::Instant::now() < deadline, "never retried");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(index(&retry), 0);
    assert_eq!(annotation(&retry, FAILURES), Some("1"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let s = jobs.get("keep").await.unwrap().status.unwrap();
        let gone = pods.get_opt(&first_name).await.unwrap().is_none();
        if s.failed == Some(1) && gone {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{s:?} gone={gone}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_indexed_job_keeps_its_completed_indexes_and_resumes_the_rest() {
    let (_cluster, jobs, pods) = cluster().await;
    let script = "[ \"$JOB_COMPLETION_INDEX\" = 0 ] || [ -e /tmp/never ] || sleep 60";
    jobs.create(
        &PostParams::default(),
        &job("susp", 3, 3, script, json!({})),
    )
    .await
    .unwrap();
    wait_job(&jobs, "susp", |j| {
        j.status
            .as_ref()
            .is_some_and(|s| s.completed_indexes.as_deref() == Some("0") && s.active == Some(2))
    })
    .await;
    let patch = json!({"spec": {"suspend": true}});
    jobs.patch(
        "susp",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .unwrap();
    let j = wait_job(&jobs, "susp", |j| condition(j, "Suspended").is_some()).await;
    let s = j.status.unwrap();
    assert_eq!(s.completed_indexes.as_deref(), Some("0"));
    assert_eq!((s.succeeded, s.active), (Some(1), Some(0)));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while listed(&pods, "susp")
        .await
        .iter()
        .any(|p| !matches!(phase(p), "Succeeded" | "Failed"))
    {
        assert!(tokio::time::Instant::now() < deadline, "pods still run");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let patch = json!({"spec": {"suspend": false}});
    jobs.patch(
        "susp",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .unwrap();
    // Resumed: only indexes 1 and 2 start again.
    let j = wait_job(&jobs, "susp", |j| {
        j.status.as_ref().is_some_and(|s| s.active == Some(2))
    })
    .await;
    assert_eq!(j.status.unwrap().completed_indexes.as_deref(), Some("0"));
    let fresh: Vec<usize> = listed(&pods, "susp")
        .await
        .iter()
        .filter(|p| !matches!(phase(p), "Succeeded" | "Failed"))
        .map(index)
        .collect();
    let mut fresh = fresh;
    fresh.sort();
    assert_eq!(fresh, vec![1, 2]);
}
