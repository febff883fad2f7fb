//! A pod calling the cluster's API server as a real pod does: the
//! address in `KUBERNETES_SERVICE_HOST`/`PORT`, its service account's
//! token in the projected volume (under the pod's mount root here), the
//! rights RBAC gives the account, and a token refused once its pod is
//! gone.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kinetic_fake_gcp::k8s::{FakeCluster, FakeClusterConfig};
use kube::api::{Api, DeleteParams, LogParams, PostParams};
use serde_json::json;

/// Reads its token, then asks for ConfigMap `x` every 100 ms, printing
/// each new answer (`403 message`, `404 …`).
const CALLER: &str = r#"
import json, os, time, urllib.error, urllib.request
d = os.path.join(os.getcwd(), "..", "mounts", "var/run/secrets/kubernetes.io/serviceaccount")
if not os.path.exists(os.path.join(d, "token")):
    print("no token", flush=True)
    time.sleep(3600)
token = open(os.path.join(d, "token")).read()
print("namespace", open(os.path.join(d, "namespace")).read(), flush=True)
print("token", token, flush=True)
url = "http://%s:%s/api/v1/namespaces/default/configmaps/x" % (
    os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"])
last = None
while True:
    try:
        urllib.request.urlopen(urllib.request.Request(url, headers={"Authorization": "Bearer " + token}))
        code, message = 200, ""
    except urllib.error.HTTPError as e:
        code, message = e.code, json.load(e).get("message", "")
    if code != last:
        print(code, message, flush=True)
        last = code
    time.sleep(0.1)
"#;

fn pod(name: &str, automount: Option<bool>) -> Pod {
    let mut spec = json!({
        "serviceAccountName": "kinetic",
        "containers": [{"name": "c", "image": "fake.registry.invalid/x:1",
                        "command": ["python3", "-c", CALLER]}],
    });
    if let Some(a) = automount {
        spec["automountServiceAccountToken"] = json!(a);
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

async fn log_with(api: &Api<Pod>, name: &str, want: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = api
            .logs(name, &LogParams::default())
            .await
            .unwrap_or_default();
        if log.contains(want) {
            return log;
        }
        assert!(
            Instant::now() < deadline,
            "pod {name} never logged {want:?}: {log}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_token_acts_as_its_service_account_until_the_pod_is_gone() {
    let cluster = FakeCluster::start(
        FakeClusterConfig::default().image("fake.registry.invalid/x:1", "python3"),
    )
    .await
    .unwrap();
    let client = kube::Client::try_from(kube::Config::new(cluster.url().parse().unwrap())).unwrap();
    let api: Api<Pod> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &pod("caller", None))
        .await
        .unwrap();
    api.create(&PostParams::default(), &pod("tokenless", Some(false)))
        .await
        .unwrap();

    // Without a binding, the account may not read ConfigMaps.
    let log = log_with(&api, "caller", "403 ").await;
    assert!(log.contains("namespace default"), "{log}");
    assert!(
        log.contains(
            r#"configmaps "x" is forbidden: User "system:serviceaccount:default:kinetic" cannot get resource "configmaps" in API group "" in the namespace "default""#
        ),
        "{log}"
    );
    // Bound to a Role that allows it, it may: the ConfigMap is missing.
    cluster
        .insert(
            "roles.rbac.authorization.k8s.io",
            "default",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "read-maps"},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
        )
        .unwrap();
    cluster
        .insert(
            "rolebindings.rbac.authorization.k8s.io",
            "default",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "read-maps"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-maps"},
                   "subjects": [{"kind": "ServiceAccount", "name": "kinetic", "namespace": "default"}]}),
        )
        .unwrap();
    let log = log_with(&api, "caller", "404 ").await;
    assert!(log.contains(r#"configmaps "x" not found"#), "{log}");

    // A pod that opts out gets no token.
    log_with(&api, "tokenless", "no token").await;

    // The token is bound to its pod: once the pod is gone, it is refused.
    let token = log
        .lines()
        .find_map(|l| l.strip_prefix("token "))
        .expect("the token")
        .trim()
        .to_owned();
    let http = reqwest::Client::new();
    let url = format!("{}/api/v1/namespaces/default/configmaps/x", cluster.url());
    let asked = http.get(&url).bearer_auth(&token).send().await.unwrap();
    assert_eq!(asked.status().as_u16(), 404);
    api.delete("caller", &DeleteParams::default())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while api.get_opt("caller").await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "the pod was never deleted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let asked = http.get(&url).bearer_auth(&token).send().await.unwrap();
    assert_eq!(asked.status().as_u16(), 401);
}
