//! The fake project takes what it knows of its client from the
//! `ClientProfile` it is given: the variables of `cli_env`, the names of
//! its buckets and kubeconfig context, the default zone and namespace,
//! the files every image holds, and the GCS endpoint its pods get.

mod support;

use std::time::{Duration, Instant};

use kinetic_fake_gcp::{FAKE_K8S_URL, FakeGcp, FakeGcpConfig};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_project_is_named_and_described_as_the_client_says() {
    let cloud = FakeGcp::start(FakeGcpConfig::new(support::profile()).project("p"))
        .await
        .unwrap();
    let names = cloud.names();
    assert_eq!(names.jobs_bucket, "p-t-fake-jobs");
    assert_eq!(cloud.jobs_bucket(), "p-t-fake-jobs");
    assert_eq!(cloud.builds_bucket(), "p-t-fake-builds");
    assert_eq!(names.region, "europe-west4");
    assert!(cloud.gcs().buckets().contains(&"p-t-fake-jobs".to_owned()));
    assert!(
        cloud
            .kubeconfig()
            .contains("current-context: t_p_europe-west4-a_fake"),
        "{}",
        cloud.kubeconfig()
    );

    let kubeconfig = std::path::Path::new("/tmp/kubeconfig");
    let env: std::collections::BTreeMap<String, String> =
        cloud.cli_env(kubeconfig).into_iter().collect();
    let get = |k: &str| env.get(k).map(String::as_str);
    assert_eq!(get("KUBECONFIG"), Some("/tmp/kubeconfig"));
    assert_eq!(get("T_PROJECT"), Some("p"));
    assert_eq!(get("T_ZONE"), Some("europe-west4-a"));
    assert_eq!(get("T_NAMESPACE"), Some("jobs"));
    assert_eq!(get("T_STORE_URL"), Some("gs://p-t-fake-jobs"));
    assert_eq!(get("T_GCS_ENDPOINT"), Some(cloud.gcs().endpoint().as_str()));
    assert_eq!(get("T_IAM_ENDPOINT"), Some(cloud.apis().endpoint()));
    assert_eq!(get("T_ACCESS_TOKEN"), Some(FakeGcp::ACCESS_TOKEN));
    assert_eq!(get(FAKE_K8S_URL), Some(cloud.cluster().url()));
    assert!(
        env.keys()
            .all(|k| k == "KUBECONFIG" || k == FAKE_K8S_URL || k.starts_with("T_")),
        "only the client's variables: {env:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_have_the_clients_image_files_and_gcs_endpoint() {
    // An image no build makes, named with the host's interpreter: its
    // files are the client's.
    let cloud = FakeGcp::start(
        FakeGcpConfig::new(support::profile()).image("fake.registry.invalid/x:1", "python3"),
    )
    .await
    .unwrap();
    cloud
        .cluster()
        .insert(
            "pods",
            "jobs",
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "hello", "namespace": "jobs"},
                "spec": {"restartPolicy": "Never", "serviceAccountName": "t-jobs",
                         "containers": [{"name": "c", "image": "fake.registry.invalid/x:1",
                                         "command": ["python3", "/app/hello.py"]}]},
            }),
        )
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let phase = loop {
        let pods = cloud.cluster().objects("pods", "jobs");
        let phase = pods
            .iter()
            .find(|p| p["metadata"]["name"] == "hello")
            .and_then(|p| p["status"]["phase"].as_str().map(str::to_owned));
        if let Some(p) = phase.filter(|p| p == "Succeeded" || p == "Failed") {
            break p;
        }
        assert!(Instant::now() < deadline, "the pod never ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let client =
        kube::Client::try_from(kube::Config::new(cloud.cluster().url().parse().unwrap())).unwrap();
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, "jobs");
    let log = pods.logs("hello", &Default::default()).await.unwrap();
    assert_eq!(phase, "Succeeded", "{log}");
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        [cloud.gcs().endpoint().as_str(), "hello from the image"],
    );
}
