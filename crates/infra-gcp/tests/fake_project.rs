//! The adapter against a new fake project: `up`'s plan carried out builds
//! everything (checked on the fakes' side), a second observation plans
//! nothing; a run stopped midway is finished by the next with nothing
//! created twice; `down` takes it away.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_core::retry::{Backoff, RetryPolicy};
use kinetic_fake_gcp::FakeGcp;
use kinetic_gcp_common::StaticToken;
use kinetic_infra_gcp::model::{self, Action, Desired, InfraTarget, PoolRequest, PoolSpec};
use kinetic_infra_gcp::{Endpoints, GcpInfra, GcpInfraConfig, InfraError, Observation, Progress};

/// Records what the adapter reports.
#[derive(Debug, Default)]
struct Recorded(Mutex<Vec<String>>);

impl Progress for Recorded {
    fn started(&self, action: &Action, index: usize, total: usize) {
        self.0
            .lock()
            .unwrap()
            .push(format!("start {}/{total} {}", index + 1, action.describe()));
    }
    fn waiting(&self, what: &str, status: &str, _elapsed: Duration) {
        self.0
            .lock()
            .unwrap()
            .push(format!("wait {what}: {status}"));
    }
    fn finished(&self, action: &Action, _elapsed: Duration) {
        self.0
            .lock()
            .unwrap()
            .push(format!("done {}", action.describe()));
    }
}

fn desired(cloud: &FakeGcp) -> Desired {
    let target = InfraTarget::new("fake-proj", "us-central1-a", "fake", "default").unwrap();
    let apis = cloud.apis().endpoint();
    Desired::new(&target).with_manifest_urls(
        Some(&format!("{apis}/manifests/kubernetes-sigs/lws/releases/download/v0.5.1/manifests.yaml")),
        Some(&format!("{apis}/manifests/GoogleCloudPlatform/container-engine-accelerators/master/nvidia-driver-installer/cos/daemonset-preloaded.yaml")),
    )
}

fn adapter(cloud: &FakeGcp, kubeconfig: &std::path::Path, timeout: Duration) -> GcpInfra {
    adapter_with(cloud, |c| {
        c.kubeconfig(kubeconfig).operation_timeout(timeout)
    })
}

fn adapter_with(cloud: &FakeGcp, edit: impl FnOnce(GcpInfraConfig) -> GcpInfraConfig) -> GcpInfra {
    let mut endpoints = Endpoints::all_at(cloud.apis().endpoint());
    endpoints.storage = cloud.gcs().endpoint();
    GcpInfra::new(
        desired(cloud),
        edit(GcpInfraConfig::default().endpoints(endpoints)),
        Arc::new(StaticToken::new(FakeGcp::ACCESS_TOKEN)),
    )
    .unwrap()
}

async fn new_project() -> FakeGcp {
    FakeGcp::start(
        kinetic_fake_gcp_server::fake_gcp_config()
            .project("fake-proj")
            .provisioned(false)
            .operation_time(Duration::from_millis(150)),
    )
    .await
    .unwrap()
}

fn l4_pool(d: &Desired) -> PoolSpec {
    PoolSpec::new(
        &d.target,
        &PoolRequest::new(AcceleratorSpec::parse("l4").unwrap()),
        "0a1b",
    )
    .unwrap()
}

async fn up(infra: &GcpInfra, progress: &Recorded) -> Result<model::Plan, InfraError> {
    let observed = infra.observe().await.complete()?;
    let plan = model::plan_up(infra.desired(), &observed, Some(&l4_pool(infra.desired())))?;
    infra.execute(&plan, progress).await?;
    Ok(plan)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_builds_a_new_project_and_down_takes_it_away() {
    let cloud = new_project().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kube/config");
    let infra = adapter(&cloud, &kubeconfig, Duration::from_secs(60));
    let progress = Recorded::default();
    let plan = up(&infra, &progress).await.unwrap();
    assert_eq!(plan.actions.len(), 19, "{:#?}", plan.actions);
    // The jobs' pods may end their slice (issue 24 point 9): the hosts
    // Role, bound to their service account.
    let bindings = cloud
        .cluster()
        .objects("rolebindings.rbac.authorization.k8s.io", "default");
    let hosts = bindings
        .iter()
        .find(|b| b["metadata"]["name"] == "kinetic-slice-hosts")
        .expect("the hosts RoleBinding");
    assert_eq!(hosts["roleRef"]["name"], "kinetic-slice-hosts", "{hosts}");
    assert_eq!(hosts["subjects"][0]["kind"], "ServiceAccount", "{hosts}");
    assert_eq!(hosts["subjects"][0]["name"], "kinetic", "{hosts}");
    let log = progress.0.lock().unwrap().clone();
    assert!(
        log.iter()
            .any(|l| l.starts_with("wait creating GKE cluster fake: RUNNING")),
        "{log:#?}"
    );

    // Every request says who sent it (issue 24 point 8).
    assert_eq!(
        cloud.apis().user_agents(),
        vec![kinetic_infra_gcp::USER_AGENT.to_owned()]
    );
    assert_eq!(cloud.cluster().calls().without_user_agent(), 0);
    assert_eq!(
        cloud.cluster().calls().user_agents(),
        vec![kinetic_infra_gcp::USER_AGENT.to_owned()]
    );

    // The fakes' side of it.
    let names = cloud.names().clone();
    assert!(cloud.apis().enabled().contains("container.googleapis.com"));
    let (labels, ttl) = cloud.gcs().bucket_rules(&names.jobs_bucket).unwrap();
    assert_eq!(
        (labels["goog-packaged-solution"].as_str(), ttl),
        ("kinetic", Some(30))
    );
    let nodes = "serviceAccount:kn-fake-nodes@fake-proj.iam.gserviceaccount.com";
    assert!(
        cloud
            .apis()
            .project_binding("roles/container.defaultNodeServiceAccount", nodes)
    );
    assert!(
        cloud
            .gcs()
            .bucket_binding(&names.builds_bucket, "roles/storage.objectAdmin", nodes)
    );
    assert!(cloud.apis().service_account_binding(
        "kn-fake-nodes@fake-proj.iam.gserviceaccount.com",
        "roles/iam.workloadIdentityUser",
        "serviceAccount:fake-proj.svc.id.goog[default/kinetic]",
    ));
    assert_eq!(
        cloud.apis().node_pools("fake"),
        vec![
            ("default-pool".to_owned(), "RUNNING".to_owned()),
            ("gpu-l4-0a1b".to_owned(), "RUNNING".to_owned()),
        ]
    );
    let ksa = cloud
        .cluster()
        .object("serviceaccounts", "default", "kinetic")
        .unwrap();
    assert_eq!(
        ksa["metadata"]["annotations"]["iam.gke.io/gcp-service-account"],
        "kn-fake-nodes@fake-proj.iam.gserviceaccount.com"
    );
    assert!(
        cloud
            .cluster()
            .object(
                "customresourcedefinitions.apiextensions.k8s.io",
                "",
                "leaderworkersets.leaderworkerset.x-k8s.io"
            )
            .is_some()
    );
    assert!(
        cloud
            .cluster()
            .object("deployments.apps", "lws-system", "lws-controller-manager")
            .is_some()
    );
    assert!(
        cloud
            .cluster()
            .object("daemonsets.apps", "kube-system", "nvidia-driver-installer")
            .is_some()
    );
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
    assert_eq!(
        kc.current_context.as_deref(),
        Some("gke_fake-proj_us-central1-a_fake")
    );

    // Nothing left to do, and status says so.
    let observed = infra.observe().await.complete().unwrap();
    let again =
        model::plan_up(infra.desired(), &observed, Some(&l4_pool(infra.desired()))).unwrap();
    assert!(again.is_empty(), "{:#?}", again.actions);
    let report = model::status(infra.desired(), &observed);
    assert!(report.complete(), "{:?}", report.fixes);
    let gpu = report
        .pools
        .iter()
        .find(|p| p.name == "gpu-l4-0a1b")
        .unwrap();
    assert_eq!(
        (gpu.accelerator.as_deref(), gpu.nodes_total),
        (Some("gpu:l4"), Some(0)),
        "scaled to zero"
    );
    assert_eq!(
        report.pools[0].nodes_ready,
        Some(1),
        "the default pool's node"
    );

    // Down, buckets and all.
    cloud
        .gcs()
        .put_object(&names.jobs_bucket, "job-1/spec.json", b"{}");
    let down = model::plan_down(infra.desired(), &observed, true);
    infra.execute(&down, &progress).await.unwrap();
    assert!(cloud.apis().clusters().is_empty());
    assert!(cloud.apis().repositories().is_empty());
    assert!(cloud.apis().service_accounts().is_empty());
    assert!(cloud.gcs().buckets().is_empty());
    assert!(
        !cloud
            .apis()
            .project_binding("roles/container.defaultNodeServiceAccount", nodes)
    );
    assert!(
        cloud.cluster().nodes().is_empty(),
        "the cluster's nodes went with it"
    );
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
    assert!(kc.contexts.is_empty());
    let observed = infra.observe().await.complete().unwrap();
    assert!(model::plan_down(infra.desired(), &observed, true).is_empty());
}

fn assert_nothing_twice(cloud: &FakeGcp) {
    let creations = cloud.apis().creations();
    let mut seen = std::collections::BTreeSet::new();
    for c in &creations {
        assert!(seen.insert(c), "{c} created twice: {creations:#?}");
    }
    let inserts = cloud.gcs().bucket_inserts();
    assert_eq!(inserts.len(), 2, "{inserts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_stopped_midway_is_finished_by_the_next() {
    let cloud = new_project().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("config");

    // The second service account cannot be made: the run stops there.
    cloud
        .apis()
        .fail("iam.projects.serviceAccounts.create", 403, 1, 1);
    let infra = adapter(&cloud, &kubeconfig, Duration::from_secs(60));
    let e = up(&infra, &Recorded::default()).await.unwrap_err();
    assert!(matches!(e, InfraError::PermissionDenied { .. }), "{e}");
    assert_eq!(cloud.apis().service_accounts().len(), 1);

    // Stopped while the cluster is being created (the operation outlives
    // the run, as when the process is killed).
    let impatient = adapter(&cloud, &kubeconfig, Duration::from_millis(60));
    let e = up(&impatient, &Recorded::default()).await.unwrap_err();
    assert!(matches!(e, InfraError::Timeout { .. }), "{e}");
    assert!(e.to_string().contains("run the command again"), "{e}");
    assert_eq!(
        cloud.apis().clusters(),
        vec![("fake".to_owned(), "PROVISIONING".to_owned())]
    );

    // The next run waits for that cluster instead of making another, and
    // finishes the rest.
    let progress = Recorded::default();
    let plan = up(&infra, &progress).await.unwrap();
    assert!(
        plan.actions.contains(&Action::WaitCluster),
        "{:#?}",
        plan.actions
    );
    assert!(!plan.actions.iter().any(|a| matches!(
        a,
        Action::CreateCluster { .. } | Action::CreateBucket { .. }
    )));
    let observed = infra.observe().await.complete().unwrap();
    assert!(
        model::plan_up(infra.desired(), &observed, None)
            .unwrap()
            .is_empty()
    );
    assert_nothing_twice(&cloud);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_be_read_is_named_and_iam_lag_is_waited_out() {
    let cloud = new_project().await;
    let dir = tempfile::tempdir().unwrap();
    let infra = adapter(&cloud, &dir.path().join("config"), Duration::from_secs(60));
    // IAM sees new accounts only after a while: the grants wait for it.
    cloud.apis().set_iam_propagation(Duration::from_millis(400));
    let progress = Recorded::default();
    up(&infra, &progress).await.unwrap();
    let log = progress.0.lock().unwrap().clone();
    assert!(
        log.iter().any(
            |l| l.starts_with("wait IAM to know the members granted on the project")
                && l.contains("does not exist")
        ),
        "{log:#?}"
    );

    cloud.gcs().deny("storage.buckets.get");
    let observation = infra.observe().await;
    let (what, e) = &observation.unreadable[0];
    assert!(what.starts_with("bucket gs://fake-proj-kn-fake-"), "{what}");
    assert!(e.to_string().contains("storage.buckets.get"), "{e}");
    assert!(observation.complete().is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_retried_exactly_up_to_its_budget() {
    let cloud = new_project().await;
    let dir = tempfile::tempdir().unwrap();
    let wait = Duration::from_millis(20);
    let infra = adapter_with(&cloud, |c| {
        c.kubeconfig(dir.path().join("config"))
            .retry(RetryPolicy::new(3, Backoff::new(wait, wait)))
    });
    const LIST: &str = "serviceusage.services.list";
    let calls = |call: &str| cloud.apis().calls().get(call).copied().unwrap_or(0);
    fn enabled_apis(o: &Observation) -> Option<&InfraError> {
        o.unreadable
            .iter()
            .find(|(what, _)| what == "the project's enabled APIs")
            .map(|(_, e)| e)
    }

    // Overloaded past the budget: three attempts, two waits, then an
    // error that can be retried later and says how often it was tried.
    cloud.apis().fail(LIST, 503, 0, 3);
    let started = std::time::Instant::now();
    let observation = infra.observe().await;
    assert_eq!(calls(LIST), 3, "exactly the budget");
    assert!(started.elapsed() >= wait * 2, "waited between attempts");
    let e = enabled_apis(&observation).expect("the APIs could not be read");
    assert!(matches!(e, InfraError::Unavailable { .. }), "{e}");
    assert!(e.is_retryable(), "{e}");
    assert!(e.to_string().contains("after 3 attempt(s)"), "{e}");
    assert!(e.to_string().contains("HTTP 503"), "{e}");

    // Within the budget: the third attempt answers.
    cloud.apis().fail(LIST, 429, 0, 2);
    let observation = infra.observe().await;
    assert_eq!(calls(LIST), 6);
    assert!(enabled_apis(&observation).is_none());

    // A refusal is final: one attempt.
    cloud.apis().fail(LIST, 403, 0, 1);
    let observation = infra.observe().await;
    assert_eq!(calls(LIST), 7);
    let e = enabled_apis(&observation).expect("refused");
    assert!(matches!(e, InfraError::PermissionDenied { .. }), "{e}");
    assert!(!e.to_string().contains("attempt"), "{e}");

    // A policy write that meets a concurrent change (its etag is stale)
    // is read, modified and written again, under the same budget.
    const SET_POLICY: &str = "cloudresourcemanager.projects.setIamPolicy";
    cloud.apis().fail(SET_POLICY, 409, 0, 2);
    up(&infra, &Recorded::default()).await.unwrap();
    assert_eq!(calls(SET_POLICY), 3);
    assert!(
        cloud.apis().project_binding(
            "roles/container.defaultNodeServiceAccount",
            "serviceAccount:kn-fake-nodes@fake-proj.iam.gserviceaccount.com"
        ),
        "the third write went through"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_waits_out_the_clusters_operation_in_progress() {
    let cloud = new_project().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("config");
    let infra = adapter(&cloud, &kubeconfig, Duration::from_secs(60));
    up(&infra, &Recorded::default()).await.unwrap();
    cloud.apis().set_operation_time(Duration::from_millis(600));
    let target = infra.desired().target.clone();
    let create = |suffix: &str| {
        let pool = PoolSpec::new(
            &target,
            &PoolRequest::new(AcceleratorSpec::parse("l4").unwrap()),
            suffix,
        )
        .unwrap();
        let mut plan = model::Plan::default();
        plan.actions.push(Action::CreatePool { pool });
        plan
    };
    let pools = || {
        cloud
            .apis()
            .node_pools("fake")
            .into_iter()
            .map(|(name, _)| name)
            .collect::<Vec<_>>()
    };

    // GKE refuses a second change while the first runs (400
    // FAILED_PRECONDITION): it is sent again until the cluster is free.
    let progress = Recorded::default();
    let (plan_a, plan_b) = (create("2c3d"), create("4e5f"));
    let (first, second) = tokio::join!(infra.execute(&plan_a, &progress), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        infra.execute(&plan_b, &progress).await
    });
    first.unwrap();
    second.unwrap();
    let log = progress.0.lock().unwrap().clone();
    assert!(
        log.iter().any(|l| l.starts_with(
            "wait the cluster to finish its operation in progress before creating node pool gpu-l4-4e5f: Cluster is running incompatible operation"
        )),
        "{log:#?}"
    );
    let names = pools();
    assert!(
        names.iter().any(|n| n == "gpu-l4-2c3d") && names.iter().any(|n| n == "gpu-l4-4e5f"),
        "{names:?}"
    );

    // Not free within the operation timeout: a timeout that says to run
    // the command again, and nothing made.
    let impatient = adapter(&cloud, &kubeconfig, Duration::from_millis(100));
    let (plan_a, plan_b) = (create("6a7b"), create("8c9d"));
    let (first, second) = tokio::join!(infra.execute(&plan_a, &progress), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        impatient.execute(&plan_b, &Recorded::default()).await
    });
    first.unwrap();
    let e = second.unwrap_err();
    assert!(matches!(e, InfraError::Timeout { .. }), "{e}");
    assert!(
        e.to_string().contains(
            "the cluster to finish its operation in progress before creating node pool gpu-l4-8c9d"
        ),
        "{e}"
    );
    assert!(!pools().iter().any(|n| n == "gpu-l4-8c9d"), "{:?}", pools());
}

/// An endpoint where nothing listens: a port bound, then let go.
fn closed_endpoint() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

/// A server on loopback that answers every request with HTTP 200 and
/// `body` (a proxy's page, another API behind the endpoint).
fn answering_200(body: &'static str) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://127.0.0.1:{port}")
}

fn enabled_apis_error(o: &Observation) -> Option<&InfraError> {
    o.unreadable
        .iter()
        .find(|(what, _)| what == "the project's enabled APIs")
        .map(|(_, e)| e)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_endpoint_fails_at_once_and_a_retry_is_said() {
    // Issue 25.10: a refused connection was tried 6 times (124 s in
    // `status`), silently; retries are for what they can fix, and said.
    let cloud = new_project().await;
    let dir = tempfile::tempdir().unwrap();
    let lines: Arc<Mutex<Vec<String>>> = Arc::default();
    let notice = {
        let lines = lines.clone();
        kinetic_infra_gcp::RetryNotice::new(move |l| lines.lock().unwrap().push(l.to_owned()))
    };
    let wait = Duration::from_millis(20);
    let closed = closed_endpoint();
    let infra = adapter_with(&cloud, |c| {
        let mut endpoints = c.endpoints.clone();
        endpoints.serviceusage = closed.clone();
        c.endpoints(endpoints)
            .kubeconfig(dir.path().join("config"))
            .retry(RetryPolicy::new(3, Backoff::new(wait, wait)))
            .on_retry(notice.clone())
    });
    let observation = infra.observe().await;
    let e = enabled_apis_error(&observation).expect("the APIs could not be read");
    let text = e.to_string();
    assert!(matches!(e, InfraError::Unavailable { .. }), "{e}");
    assert!(text.contains(&closed) && text.contains("refused"), "{text}");
    assert!(text.contains("not tried again"), "{text}");
    assert_eq!(*lines.lock().unwrap(), Vec::<String>::new(), "not retried");

    // What a retry can fix is retried, and each retry is said.
    let infra = adapter_with(&cloud, |c| {
        c.kubeconfig(dir.path().join("config"))
            .retry(RetryPolicy::new(3, Backoff::new(wait, wait)))
            .on_retry(notice)
    });
    cloud.apis().fail("serviceusage.services.list", 503, 0, 1);
    let observation = infra.observe().await;
    assert!(enabled_apis_error(&observation).is_none());
    let said = lines.lock().unwrap().clone();
    assert_eq!(said.len(), 1, "{said:#?}");
    assert!(
        said[0].contains("HTTP 503") && said[0].ends_with("trying again (attempt 2 of 3)"),
        "{said:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_endpoint_answering_something_else_is_not_a_cluster() {
    // Issue 25.10: a 200 with a body that is not a cluster was shown as
    // `cluster fake ()`, complete.
    let cloud = FakeGcp::start(kinetic_fake_gcp_server::fake_gcp_config().project("fake-proj"))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let other = answering_200(r#"{"kind": "storage#buckets", "items": []}"#);
    let infra = adapter_with(&cloud, |c| {
        let mut endpoints = c.endpoints.clone();
        endpoints.container = other.clone();
        c.endpoints(endpoints).kubeconfig(dir.path().join("config"))
    });
    let observation = infra.observe().await;
    assert!(observation.observed.cluster.is_none());
    let (_, e) = observation
        .unreadable
        .iter()
        .find(|(what, _)| what == "cluster fake")
        .expect("the cluster is unreadable");
    let text = e.to_string();
    assert!(
        text.contains("not the cluster") && text.contains("storage#buckets"),
        "{text}"
    );
    assert!(observation.complete().is_err());
}

/// A client of the fake cluster acting as whoever `token` names.
async fn client_as(cloud: &FakeGcp, token: &str) -> kube::Client {
    let yaml = cloud
        .cluster()
        .kubeconfig("default")
        .replace("token: fake-token", &format!("token: {token}"));
    let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// A LeaderWorkerSet as the pathways backend makes one (one group of 2).
fn leader_worker_set(name: &str) -> kube::api::DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2,
            "workerTemplate": {"spec": {"restartPolicy": "Always",
                "containers": [{"name": "job", "image": "python:3.12"}]}}}},
    }))
    .unwrap()
}

fn lws_api(client: kube::Client) -> kube::Api<kube::api::DynamicObject> {
    let gvk =
        kube::core::GroupVersionKind::gvk("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet");
    let resource = kube::core::ApiResource::from_gvk_with_plural(&gvk, "leaderworkersets");
    kube::Api::namespaced_with(client, "default", &resource)
}

/// Issue 24 point 5: `edit` (the built-in ClusterRole, which nothing
/// aggregates LeaderWorkerSets into) is refused pathways jobs; `up` makes
/// the Role that, bound beside it, lets a user run them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_and_the_jobs_role_are_what_a_pathways_user_needs() {
    let cloud = new_project().await;
    let dir = tempfile::tempdir().unwrap();
    let infra = adapter(&cloud, &dir.path().join("config"), Duration::from_secs(60));
    let progress = Recorded::default();
    up(&infra, &progress).await.unwrap();
    let log = progress.0.lock().unwrap().clone();
    assert!(
        log.iter()
            .any(|l| l.starts_with("done create Role default/kinetic-jobs")),
        "{log:#?}"
    );

    let cluster = cloud.cluster();
    cluster.add_user("dev", "dev-token");
    cluster.bind_role("dev", "edit", "default").unwrap();
    let api = lws_api(client_as(&cloud, "dev-token").await);
    let pp = kube::api::PostParams::default();
    match api.create(&pp, &leader_worker_set("job-a")).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 403, "{s:?}");
            assert!(
                s.message
                    .contains("cannot create resource \"leaderworkersets\""),
                "{s:?}"
            );
        }
        other => panic!("edit alone created a LeaderWorkerSet: {other:?}"),
    }

    // The binding the README gives: `kubectl create rolebinding … --role=kinetic-jobs`.
    cluster
        .insert(
            "rolebindings.rbac.authorization.k8s.io",
            "default",
            serde_json::json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "dev-kinetic-jobs", "namespace": "default"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kinetic-jobs"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "dev"}],
            }),
        )
        .unwrap();
    api.create(&pp, &leader_worker_set("job-a")).await.unwrap();
    api.get("job-a").await.unwrap();
    api.list(&kube::api::ListParams::default()).await.unwrap();
    api.delete("job-a", &kube::api::DeleteParams::default())
        .await
        .unwrap();

    // Nothing left to do: the Role is observed as made.
    let observed = infra.observe().await.complete().unwrap();
    let report = model::status(infra.desired(), &observed);
    assert!(
        report
            .checks
            .iter()
            .any(|c| c.what == "Role default/kinetic-jobs" && c.ok),
        "{:?}",
        report.checks
    );
}

/// Issue 24 point 4: LeaderWorkerSet is installed when its controller is
/// available and its webhook answers, not when its CRD exists. Right after
/// its manifests are applied the webhooks refuse (500) until the
/// controller manager is ready: `up` waits for that; a deleted controller
/// is something `up` has to do and `status` names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_waits_for_the_lws_controller_and_a_deleted_one_is_not_installed() {
    let cloud = new_project().await;
    let dir = tempfile::tempdir().unwrap();
    let infra = adapter(&cloud, &dir.path().join("config"), Duration::from_secs(60));
    let progress = Recorded::default();
    up(&infra, &progress).await.unwrap();
    let log = progress.0.lock().unwrap().clone();
    assert!(
        log.iter().any(|l| l.starts_with(
            "wait LeaderWorkerSet v0.5.1 (CRD and controller) to serve: its controller's Deployment lws-system/lws-controller-manager is not available (MinimumReplicasUnavailable"
        )),
        "{log:#?}"
    );
    // Done means a pathways job can be submitted at once.
    let api = lws_api(client_as(&cloud, "admin-token").await);
    let pp = kube::api::PostParams::default();
    api.create(&pp, &leader_worker_set("job-a")).await.unwrap();

    // The controller deleted: the CRD is there, LeaderWorkerSet is not.
    cloud
        .cluster()
        .remove_object("deployments.apps", "lws-system", "lws-controller-manager");
    match api.create(&pp, &leader_worker_set("job-b")).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (500, "InternalError"), "{s:?}");
            assert!(
                s.message.starts_with(
                    "Internal error occurred: failed calling webhook \"mleaderworkerset.kb.io\": failed to call webhook: Post \"https://lws-webhook-service.lws-system.svc:443/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset?timeout=10s\": no endpoints available for service \"lws-webhook-service\""
                ),
                "{s:?}"
            );
        }
        other => panic!("created without a controller: {other:?}"),
    }
    let observed = infra.observe().await.complete().unwrap();
    let check = model::status(infra.desired(), &observed)
        .checks
        .into_iter()
        .find(|c| c.what == "LeaderWorkerSet")
        .unwrap();
    assert!(!check.ok, "{check:?}");
    assert!(
        check
            .detail
            .contains("Deployment lws-system/lws-controller-manager is missing"),
        "{check:?}"
    );
    let plan = model::plan_up(infra.desired(), &observed, None).unwrap();
    assert!(
        matches!(plan.actions.as_slice(), [Action::InstallManifests { bundle }] if bundle.controller.is_some()),
        "{:#?}",
        plan.actions
    );
    infra.execute(&plan, &Recorded::default()).await.unwrap();
    api.create(&pp, &leader_worker_set("job-b")).await.unwrap();
    let observed = infra.observe().await.complete().unwrap();
    assert!(
        model::plan_up(infra.desired(), &observed, None)
            .unwrap()
            .is_empty()
    );
}

/// Issue 24 point 6: `pool add --accelerator cpu --spot` makes a Spot CPU
/// pool (the default pool is on-demand, so nothing else runs `cpu:spot`
/// jobs), which reads back as a Spot `cpu` pool at 0 nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_cpu_pool_is_added_and_scales_from_zero() {
    let cloud = new_project().await;
    let dir = tempfile::tempdir().unwrap();
    let infra = adapter(&cloud, &dir.path().join("config"), Duration::from_secs(60));
    let observed = infra.observe().await.complete().unwrap();
    let plan = model::plan_up(infra.desired(), &observed, None).unwrap();
    infra.execute(&plan, &Recorded::default()).await.unwrap();
    let pool = PoolSpec::new(
        &infra.desired().target,
        &PoolRequest::new(AcceleratorSpec::parse("cpu:spot").unwrap()),
        "5c5c",
    )
    .unwrap();
    let observed = infra.observe().await.complete().unwrap();
    let plan = model::plan_pool_add(infra.desired(), &observed, &pool).unwrap();
    infra.execute(&plan, &Recorded::default()).await.unwrap();
    assert!(
        cloud
            .apis()
            .node_pools("fake")
            .contains(&("cpu-spot-5c5c".to_owned(), "RUNNING".to_owned()))
    );
    let observed = infra.observe().await.complete().unwrap();
    let report = model::status(infra.desired(), &observed);
    let spot = report
        .pools
        .iter()
        .find(|p| p.name == "cpu-spot-5c5c")
        .unwrap();
    assert_eq!(
        (spot.accelerator.as_deref(), spot.spot, spot.nodes_total),
        (Some("cpu"), true, Some(0)),
        "{report:?}"
    );
}

/// A provisioned fake project's cluster is as `up` leaves it: the jobs
/// Role there and LeaderWorkerSet serving, nothing to do inside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provisioned_fake_project_needs_nothing() {
    let cloud = FakeGcp::start(kinetic_fake_gcp_server::fake_gcp_config().project("fake-proj"))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let infra = adapter(&cloud, &dir.path().join("config"), Duration::from_secs(60));
    let observed = infra.observe().await.complete().unwrap();
    let plan = model::plan_up(infra.desired(), &observed, None).unwrap();
    assert!(
        !plan.actions.iter().any(|a| matches!(
            a,
            Action::ApplyRole { .. } | Action::InstallManifests { .. }
        )),
        "{:#?}",
        plan.actions
    );
    let report = model::status(infra.desired(), &observed);
    for what in ["Role default/kinetic-jobs", "LeaderWorkerSet"] {
        let check = report.checks.iter().find(|c| c.what == what).unwrap();
        assert!(check.ok, "{check:?}");
    }
}
