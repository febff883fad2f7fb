//! Container restarts as the kubelet does them: `restartPolicy: Always`
//! starts an exited container again (its `restartCount` up, the exit in
//! `lastState`, the earlier run's output as the `previous` log), `Never`
//! leaves the pod in its terminal phase.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kinetic_fake_gcp::k8s::{FakeCluster, FakeClusterConfig};
use kube::api::{Api, LogParams, PostParams};
use serde_json::json;

fn pod(name: &str, policy: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"restartPolicy": policy, "containers": [{
            "name": "c", "image": "fake.registry.invalid/x:1",
            "command": ["python3", "-c", "import os; print('run', flush=True); raise SystemExit(3)"],
        }]},
    }))
    .unwrap()
}

async fn wait_for(api: &Api<Pod>, name: &str, what: &str, check: impl Fn(&Pod) -> bool) -> Pod {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(p) = api.get(name).await
            && check(&p)
        {
            return p;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_restarts_the_container_and_never_does_not() {
    let cluster = FakeCluster::start(
        FakeClusterConfig::default().image("fake.registry.invalid/x:1", "python3"),
    )
    .await
    .unwrap();
    let client = kube::Client::try_from(kube::Config::new(cluster.url().parse().unwrap())).unwrap();
    let api: Api<Pod> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &pod("again", "Always"))
        .await
        .unwrap();
    api.create(&PostParams::default(), &pod("once", "Never"))
        .await
        .unwrap();
    let restarted = wait_for(&api, "again", "a second restart", |p| {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|s| s.first())
            .is_some_and(|c| c.restart_count >= 2)
    })
    .await;
    let status = restarted.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Running"));
    let container = &status.container_statuses.unwrap()[0];
    let last = container
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("the last exit");
    assert_eq!((last.exit_code, last.reason.as_deref()), (3, Some("Error")));
    let previous = api
        .logs(
            "again",
            &LogParams {
                previous: true,
                ..LogParams::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(previous.trim(), "run");
    let events = cluster.objects("events", "default");
    assert!(
        events
            .iter()
            .any(|e| e["reason"] == "BackOff" && e["involvedObject"]["name"] == "again"),
        "{events:?}"
    );

    let once = wait_for(&api, "once", "the end", |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed")
    })
    .await;
    let container = &once.status.unwrap().container_statuses.unwrap()[0];
    assert_eq!(container.restart_count, 0);
}
