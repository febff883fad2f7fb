//! The fake control-plane APIs and the JSON API of the fake GCS answer as
//! Google's do: disabled APIs, missing permissions, duplicates, operations
//! that take time, incompatible operations, IAM's eventual consistency and
//! etags, buckets that are not empty.

use std::time::Duration;

mod support;

use kinetic_fake_gcp::{FakeGcp, FakeGcpConfig};
use reqwest::Method;
use serde_json::{Value, json};

struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut r = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(FakeGcp::ACCESS_TOKEN);
        if let Some(b) = body {
            r = r.json(&b);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }
}

async fn done(c: &Client, path: &str) -> Value {
    for _ in 0..200 {
        let (_, op) = c.call(Method::GET, path, None).await;
        if op["status"] == "DONE" || op["done"] == true {
            return op;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("operation {path} never finished")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_project_answers_as_google_does() {
    let cloud = FakeGcp::start(
        FakeGcpConfig::new(support::profile())
            .project("fake")
            .provisioned(false)
            .operation_time(Duration::from_millis(100)),
    )
    .await
    .unwrap();
    let c = Client {
        http: reqwest::Client::new(),
        base: cloud.apis().endpoint().to_owned(),
    };
    let clusters = "/v1/projects/fake/locations/us-central1-a/clusters";

    // No token: 401.
    let r = c
        .http
        .get(format!("{}{clusters}/fake", c.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);

    // Kubernetes Engine is not enabled yet.
    let (s, e) = c.call(Method::GET, &format!("{clusters}/fake"), None).await;
    assert_eq!(s, 403);
    assert_eq!(e["error"]["status"], "PERMISSION_DENIED");
    assert_eq!(e["error"]["details"][0]["reason"], "SERVICE_DISABLED");
    assert_eq!(
        e["error"]["details"][0]["metadata"]["service"],
        "container.googleapis.com"
    );

    // Enable it: a long-running operation.
    let (s, op) = c
        .call(
            Method::POST,
            "/v1/projects/fake/services:batchEnable",
            Some(json!({"serviceIds": ["container.googleapis.com", "iam.googleapis.com"]})),
        )
        .await;
    assert_eq!(s, 200, "{op}");
    assert_eq!(op["done"], false);
    let name = op["name"].as_str().unwrap().to_owned();
    assert!(name.starts_with("operations/"), "{name}");
    done(&c, &format!("/v1/{name}")).await;
    let (_, list) = c
        .call(
            Method::GET,
            "/v1/projects/fake/services?filter=state:ENABLED",
            None,
        )
        .await;
    let enabled: Vec<&str> = list["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["config"]["name"].as_str().unwrap())
        .collect();
    assert!(enabled.contains(&"container.googleapis.com"), "{enabled:?}");

    let (s, e) = c.call(Method::GET, &format!("{clusters}/fake"), None).await;
    assert_eq!((s, e["error"]["status"].as_str()), (404, Some("NOT_FOUND")));

    // A denied permission is named.
    cloud.apis().deny("iam.serviceAccounts.create");
    let (s, e) = c
        .call(
            Method::POST,
            "/v1/projects/fake/serviceAccounts",
            Some(json!({"accountId": "kn-fake-nodes"})),
        )
        .await;
    assert_eq!(s, 403);
    assert_eq!(e["error"]["details"][0]["reason"], "IAM_PERMISSION_DENIED");
    assert_eq!(
        e["error"]["details"][0]["metadata"]["permission"],
        "iam.serviceAccounts.create"
    );
    cloud.apis().allow("iam.serviceAccounts.create");
    let (s, sa) = c
        .call(
            Method::POST,
            "/v1/projects/fake/serviceAccounts",
            Some(json!({"accountId": "kn-fake-nodes"})),
        )
        .await;
    assert_eq!(s, 200, "{sa}");
    let email = sa["email"].as_str().unwrap().to_owned();
    assert_eq!(email, "kn-fake-nodes@fake.iam.gserviceaccount.com");
    let (s, e) = c
        .call(
            Method::POST,
            "/v1/projects/fake/serviceAccounts",
            Some(json!({"accountId": "kn-fake-nodes"})),
        )
        .await;
    assert_eq!(
        (s, e["error"]["status"].as_str()),
        (409, Some("ALREADY_EXISTS"))
    );

    // The project's policy: etag, and members that must exist.
    let (_, policy) = c
        .call(
            Method::POST,
            "/v1/projects/fake:getIamPolicy",
            Some(json!({})),
        )
        .await;
    let etag = policy["etag"].as_str().unwrap().to_owned();
    let grant = |member: &str, etag: &str| json!({"policy": {"etag": etag, "bindings": [{"role": "roles/logging.logWriter", "members": [member]}]}});
    let (s, e) = c
        .call(
            Method::POST,
            "/v1/projects/fake:setIamPolicy",
            Some(grant(
                "serviceAccount:nobody@fake.iam.gserviceaccount.com",
                &etag,
            )),
        )
        .await;
    assert_eq!(s, 400, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not exist"),
        "{e}"
    );
    let (s, _) = c
        .call(
            Method::POST,
            "/v1/projects/fake:setIamPolicy",
            Some(grant(&format!("serviceAccount:{email}"), &etag)),
        )
        .await;
    assert_eq!(s, 200);
    let (s, e) = c
        .call(
            Method::POST,
            "/v1/projects/fake:setIamPolicy",
            Some(grant(&format!("serviceAccount:{email}"), &etag)),
        )
        .await;
    assert_eq!(
        (s, e["error"]["status"].as_str()),
        (409, Some("ABORTED")),
        "a stale etag"
    );
    assert!(cloud.apis().project_binding(
        "roles/logging.logWriter",
        &format!("serviceAccount:{email}")
    ));

    // Workload Identity needs the cluster's pool.
    let wi = json!({"policy": {"bindings": [{"role": "roles/iam.workloadIdentityUser",
                    "members": ["serviceAccount:fake.svc.id.goog[default/kinetic]"]}]}});
    let (s, e) = c
        .call(
            Method::POST,
            &format!("/v1/projects/fake/serviceAccounts/{email}:setIamPolicy"),
            Some(wi.clone()),
        )
        .await;
    assert_eq!(s, 400);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Identity Pool does not exist"),
        "{e}"
    );

    // A cluster: PROVISIONING, then RUNNING with its nodes in the fake cluster.
    let cluster = json!({"cluster": {"name": "fake",
        "workloadIdentityConfig": {"workloadPool": "fake.svc.id.goog"},
        "nodePools": [{"name": "default-pool", "initialNodeCount": 1,
                       "config": {"machineType": "e2-standard-4", "serviceAccount": email}}]}});
    let (s, op) = c.call(Method::POST, clusters, Some(cluster.clone())).await;
    assert_eq!(s, 200, "{op}");
    assert_eq!(
        (op["operationType"].as_str(), op["status"].as_str()),
        (Some("CREATE_CLUSTER"), Some("RUNNING"))
    );
    let (s, e) = c.call(Method::POST, clusters, Some(cluster)).await;
    assert_eq!(
        (s, e["error"]["status"].as_str()),
        (409, Some("ALREADY_EXISTS"))
    );
    let op_path = format!(
        "/v1/projects/fake/locations/us-central1-a/operations/{}",
        op["name"].as_str().unwrap()
    );
    let pool = json!({"nodePool": {"name": "gpu-l4-0000", "initialNodeCount": 0,
        "autoscaling": {"enabled": true, "minNodeCount": 0, "maxNodeCount": 10},
        "config": {"machineType": "g2-standard-4", "accelerators": [{"acceleratorType": "nvidia-l4", "acceleratorCount": "1"}]}}});
    let (s, e) = c
        .call(
            Method::POST,
            &format!("{clusters}/fake/nodePools"),
            Some(pool.clone()),
        )
        .await;
    assert_eq!(s, 400, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("incompatible operation"),
        "{e}"
    );
    done(&c, &op_path).await;
    let (_, got) = c.call(Method::GET, &format!("{clusters}/fake"), None).await;
    assert_eq!(got["status"], "RUNNING");
    assert_eq!(got["endpoint"], cloud.cluster().url());
    assert_eq!(cloud.cluster().nodes().len(), 1, "the default pool's node");
    let (s, _) = c
        .call(
            Method::POST,
            &format!("/v1/projects/fake/serviceAccounts/{email}:setIamPolicy"),
            Some(wi),
        )
        .await;
    assert_eq!(s, 200, "the identity pool exists now");

    let (s, op) = c
        .call(
            Method::POST,
            &format!("{clusters}/fake/nodePools"),
            Some(pool),
        )
        .await;
    assert_eq!(s, 200, "{op}");
    let op_path = format!(
        "/v1/projects/fake/locations/us-central1-a/operations/{}",
        op["name"].as_str().unwrap()
    );
    done(&c, &op_path).await;
    let (_, p) = c
        .call(
            Method::GET,
            &format!("{clusters}/fake/nodePools/gpu-l4-0000"),
            None,
        )
        .await;
    assert_eq!(p["status"], "RUNNING");

    // A failing operation leaves what it made in ERROR.
    cloud.apis().fail_next_operation(
        "CREATE_NODE_POOL",
        "Quota 'NVIDIA_L4_GPUS' exceeded. Limit: 0.0 in region us-central1.",
    );
    let bad = json!({"nodePool": {"name": "gpu-l4-0001", "initialNodeCount": 1,
        "config": {"machineType": "g2-standard-4", "accelerators": [{"acceleratorType": "nvidia-l4", "acceleratorCount": "1"}]}}});
    let (_, op) = c
        .call(
            Method::POST,
            &format!("{clusters}/fake/nodePools"),
            Some(bad),
        )
        .await;
    let op = done(
        &c,
        &format!(
            "/v1/projects/fake/locations/us-central1-a/operations/{}",
            op["name"].as_str().unwrap()
        ),
    )
    .await;
    assert!(
        op["error"]["message"].as_str().unwrap().contains("Quota"),
        "{op}"
    );
    let (_, p) = c
        .call(
            Method::GET,
            &format!("{clusters}/fake/nodePools/gpu-l4-0001"),
            None,
        )
        .await;
    assert_eq!(p["status"], "ERROR");

    let creations = cloud.apis().creations();
    assert!(
        creations.contains(&"cluster fake".to_owned()),
        "{creations:?}"
    );
    assert!(
        creations.contains(&"nodePool fake/gpu-l4-0000".to_owned()),
        "{creations:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buckets_through_the_json_api() {
    let cloud = FakeGcp::start(
        FakeGcpConfig::new(support::profile())
            .project("fake")
            .provisioned(false),
    )
    .await
    .unwrap();
    let c = Client {
        http: reqwest::Client::new(),
        base: cloud.gcs().endpoint(),
    };
    let body = json!({"name": "fake-kn-fake-jobs", "location": "us-central1",
        "labels": {"goog-packaged-solution": "kinetic"},
        "iamConfiguration": {"uniformBucketLevelAccess": {"enabled": true}},
        "lifecycle": {"rule": [{"action": {"type": "Delete"}, "condition": {"age": 30}}]}});
    let (s, b) = c
        .call(
            Method::POST,
            "/storage/v1/b?project=fake",
            Some(body.clone()),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["location"], "US-CENTRAL1");
    assert_eq!(b["lifecycle"]["rule"][0]["condition"]["age"], 30);
    let (s, e) = c
        .call(
            Method::POST,
            "/storage/v1/b?project=fake",
            Some(body.clone()),
        )
        .await;
    assert_eq!(s, 409);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("you already own it"),
        "{e}"
    );
    let (s, e) = c
        .call(Method::POST, "/storage/v1/b?project=other", Some(body))
        .await;
    assert_eq!(s, 409);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not available"),
        "{e}"
    );
    assert_eq!(
        cloud.gcs().bucket_rules("fake-kn-fake-jobs").unwrap().1,
        Some(30)
    );

    // The XML API sees the same bucket.
    cloud
        .gcs()
        .put_object("fake-kn-fake-jobs", "a/b.json", b"{}");
    let (s, e) = c
        .call(Method::DELETE, "/storage/v1/b/fake-kn-fake-jobs", None)
        .await;
    assert_eq!(s, 409);
    assert_eq!(
        e["error"]["message"],
        "The bucket you tried to delete is not empty."
    );
    let (_, list) = c
        .call(Method::GET, "/storage/v1/b/fake-kn-fake-jobs/o", None)
        .await;
    assert_eq!(list["items"][0]["name"], "a/b.json");
    let (s, _) = c
        .call(
            Method::DELETE,
            "/storage/v1/b/fake-kn-fake-jobs/o/a%2Fb.json",
            None,
        )
        .await;
    assert_eq!(s, 204);

    let (_, policy) = c
        .call(Method::GET, "/storage/v1/b/fake-kn-fake-jobs/iam", None)
        .await;
    let set = json!({"etag": policy["etag"], "bindings": [{"role": "roles/storage.objectAdmin", "members": ["serviceAccount:a@fake.iam.gserviceaccount.com"]}]});
    let (s, _) = c
        .call(
            Method::PUT,
            "/storage/v1/b/fake-kn-fake-jobs/iam",
            Some(set.clone()),
        )
        .await;
    assert_eq!(s, 200);
    let (s, _) = c
        .call(
            Method::PUT,
            "/storage/v1/b/fake-kn-fake-jobs/iam",
            Some(set),
        )
        .await;
    assert_eq!(s, 412, "a stale etag");

    cloud.gcs().deny("storage.buckets.delete");
    let (s, e) = c
        .call(Method::DELETE, "/storage/v1/b/fake-kn-fake-jobs", None)
        .await;
    assert_eq!(s, 403);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("storage.buckets.delete"),
        "{e}"
    );
    cloud.gcs().allow("storage.buckets.delete");
    let (s, _) = c
        .call(Method::DELETE, "/storage/v1/b/fake-kn-fake-jobs", None)
        .await;
    assert_eq!(s, 204);
    let (s, _) = c
        .call(Method::GET, "/storage/v1/b/fake-kn-fake-jobs", None)
        .await;
    assert_eq!(s, 404);
    assert_eq!(
        cloud.gcs().bucket_inserts(),
        vec!["fake-kn-fake-jobs".to_owned()]
    );
}
