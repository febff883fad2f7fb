//! The fake Job controller applies a Job's `podFailurePolicy` as the real
//! one does, seen through a real `kube::Client`: a disrupted pod matched
//! by an `Ignore` rule is replaced and not counted, once it is terminal;
//! a `FailJob` rule fails the Job with reason `PodFailurePolicy`; the API
//! server refuses an invalid policy with its 422 causes.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kinetic_fake_gcp::k8s::{FakeCluster, FakeClusterConfig, PodScript};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

fn client(cluster: &FakeCluster) -> kube::Client {
    kube::Client::try_from(kube::Config::new(cluster.url().parse().unwrap())).unwrap()
}

fn job(name: &str, script: &str, backoff: i32, rules: Value) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": backoff,
            "podFailurePolicy": {"rules": rules},
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "img", "command": ["sh", "-c", script]}],
            }},
        },
    }))
    .unwrap()
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

fn disrupted(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "DisruptionTarget" && c.status == "True")
        })
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ignored_disruption_is_replaced_once_terminal_and_not_counted() {
    let cluster = FakeCluster::start(FakeClusterConfig::default().image("img", "python3"))
        .await
        .unwrap();
    let client = client(&cluster);
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    cluster.script_next(PodScript::Preempted {
        after: Duration::from_millis(200),
    });
    let rules = json!([{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]);
    jobs.create(&PostParams::default(), &job("spot", "exit 0", 0, rules))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut saw_announced = false;
    let done = loop {
        let listed = pods
            .list(&ListParams::default().labels("job-name=spot"))
            .await
            .unwrap()
            .items;
        // While the disrupted pod still runs (its grace period), nothing
        // replaces it: the policy judges terminal pods only.
        if listed.iter().any(|p| disrupted(p) && phase(p) == "Running") {
            saw_announced = true;
            assert_eq!(listed.len(), 1, "replaced before it was terminal");
        }
        let j = jobs.get("spot").await.unwrap();
        if condition(&j, "Complete").is_some() || condition(&j, "Failed").is_some() {
            break j;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still running: {:?}",
            j.status
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(saw_announced, "the disruption was announced first");
    assert!(condition(&done, "Complete").is_some(), "{:?}", done.status);
    let status = done.status.unwrap();
    assert_eq!(status.failed, Some(0), "the ignored pod is not counted");
    assert_eq!(status.succeeded, Some(1));
    let listed = pods
        .list(&ListParams::default().labels("job-name=spot"))
        .await
        .unwrap()
        .items;
    assert_eq!(listed.len(), 2, "the preempted pod and its replacement");
    assert_eq!(
        listed
            .iter()
            .filter(|p| disrupted(p) && phase(p) == "Failed")
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fail_job_rule_fails_the_job_at_once_with_its_reason() {
    let cluster = FakeCluster::start(FakeClusterConfig::default().image("img", "python3"))
        .await
        .unwrap();
    let client = client(&cluster);
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let rules = json!([
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}},
    ]);
    // backoffLimit 6 would allow retries: the rule fails the Job first.
    jobs.create(&PostParams::default(), &job("bad", "exit 3", 6, rules))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let done = loop {
        let j = jobs.get("bad").await.unwrap();
        if condition(&j, "Failed").is_some() {
            break j;
        }
        assert!(tokio::time::Instant::now() < deadline, "{:?}", j.status);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let listed = pods
        .list(&ListParams::default().labels("job-name=bad"))
        .await
        .unwrap()
        .items;
    assert_eq!(listed.len(), 1, "no retry after a FailJob match");
    let pod = listed[0].metadata.name.clone().unwrap();
    let target = condition(&done, "FailureTarget").expect("FailureTarget first");
    let failed = condition(&done, "Failed").unwrap();
    let message = format!(
        "Container c for pod default/{pod} failed with exit code 3 matching FailJob rule at index 1"
    );
    for c in [target, failed] {
        assert_eq!(c.reason.as_deref(), Some("PodFailurePolicy"));
        assert_eq!(c.message.as_deref(), Some(message.as_str()));
    }
    assert_eq!(done.status.unwrap().failed, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_policy_is_refused_with_the_servers_causes() {
    let cluster = FakeCluster::start(FakeClusterConfig::default().image("img", "python3"))
        .await
        .unwrap();
    let jobs: Api<Job> = Api::namespaced(client(&cluster), "default");
    let mut j = job(
        "invalid",
        "exit 0",
        0,
        json!([{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [0]}}]),
    );
    j.spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .restart_policy = Some("OnFailure".into());
    let err = jobs.create(&PostParams::default(), &j).await.unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("not an API error: {err}")
    };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        status.message,
        "Job.batch \"invalid\" is invalid: [spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In operator, spec.template.spec.restartPolicy: Invalid value: \"OnFailure\": only \"Never\" is supported when podFailurePolicy is specified]"
    );
    assert!(
        jobs.get_opt("invalid").await.unwrap().is_none(),
        "nothing was created"
    );
}
