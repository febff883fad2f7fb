//! The real `kinetic` binary against a new fake project (every fake in
//! this test process, on loopback, pointed at as `kinetic-fake-gcp`
//! points the CLI): `up`, `pool add --accelerator l4`, a job on l4 whose
//! pod lands on the pool's node, `status`, `down --yes`; an `up` killed
//! midway and run again, with nothing created twice; `doctor` naming each
//! missing piece in turn; the profile `up` saves and makes active.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use kinetic_core::settings::vars;
use kinetic_fake_gcp::FakeGcp;
use serde_json::Value;

mod sandbox;

use sandbox::Sandbox;
use sandbox::world::{PROJECT_FLAGS, World};

const WORK_PY: &str = "def square(x):\n    print('squaring', x, flush=True)\n    return x * x\n";

/// A sandbox that names no project, zone, cluster or namespace, so that
/// they come from the active profile (or flags); its store is the bare
/// `gs://`, the jobs bucket of whatever cluster that names.
fn without_target(sb: &Sandbox) -> Sandbox {
    sb.without(&[
        vars::PROJECT,
        vars::ZONE,
        vars::CLUSTER,
        vars::NAMESPACE,
        vars::STORE_URL,
    ])
    .with_var(vars::STORE_URL, "gs://")
}

async fn run(sb: &Sandbox, args: &[&str]) -> Output {
    sb.kinetic_async(args, &[]).await
}

async fn ok(sb: &Sandbox, args: &[&str]) -> (String, String) {
    let o = run(sb, args).await;
    let (out, err) = texts(&o);
    assert!(
        o.status.success(),
        "kinetic {args:?} failed\nstdout: {out}\nstderr: {err}"
    );
    (out, err)
}

async fn json(sb: &Sandbox, args: &[&str]) -> (Option<i32>, Value) {
    let o = run(sb, args).await;
    let (out, err) = texts(&o);
    let v = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{args:?}: {e}\nstdout: {out}\nstderr: {err}"));
    (o.status.code(), v)
}

fn texts(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A new project (`kinetic up` builds it), whose operations take
/// `operation_time`, and a sandbox pointed at it.
async fn new_project(operation_time: Duration) -> World {
    World::project(WORK_PY)
        .new_project(operation_time)
        .start()
        .await
}

fn assert_nothing_created_twice(cloud: &FakeGcp) {
    let creations = cloud.apis().creations();
    let mut seen = BTreeSet::new();
    for c in &creations {
        assert!(seen.insert(c), "{c} created twice: {creations:#?}");
    }
    let inserts = cloud.gcs().bucket_inserts();
    assert_eq!(
        inserts.iter().collect::<BTreeSet<_>>().len(),
        inserts.len(),
        "{inserts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_pool_add_a_job_on_l4_status_and_down() {
    let w = new_project(Duration::from_millis(100)).await;
    let (cloud, c) = (w.cloud(), w.sandbox());

    // The plan alone changes nothing.
    let (out, _) = ok(c, &["up", "--dry-run"]).await;
    assert!(
        out.starts_with("Plan for cluster fake in us-central1-a (project fake-project):"),
        "{out}"
    );
    assert!(
        out.contains("create GKE cluster fake in us-central1-a"),
        "{out}"
    );
    assert!(cloud.apis().creations().is_empty());
    // Without a terminal to ask on, it needs --yes.
    let o = run(c, &["up"]).await;
    assert_eq!(o.status.code(), Some(2), "{:?}", texts(&o));
    assert!(texts(&o).1.contains("pass --yes"), "{:?}", texts(&o));

    let (out, err) = ok(c, &["up", "--yes"]).await;
    assert!(out.ends_with("Done.\n"), "{out}");
    assert!(err.contains("[1/17] enable APIs"), "{err}");
    assert!(
        err.contains("waiting for creating GKE cluster fake"),
        "{err}"
    );
    assert_eq!(
        cloud.apis().clusters(),
        vec![("fake".to_owned(), "RUNNING".to_owned())]
    );
    let (out, _) = ok(c, &["up", "--yes"]).await;
    assert!(out.contains("nothing to do"), "idempotent: {out}");

    let (out, _) = ok(c, &["pool", "add", "--accelerator", "l4", "--yes"]).await;
    assert!(out.contains("create node pool gpu-l4-"), "{out}");
    assert!(
        out.contains("install the NVIDIA driver installer DaemonSet"),
        "{out}"
    );
    let pool = l4_pool(cloud);
    let (out, _) = ok(c, &["pool", "add", "--accelerator", "l4", "--yes"]).await;
    assert!(
        out.contains(&format!(
            "node pool {pool} (0–10 nodes) already serves gpu:l4"
        )),
        "{out}"
    );

    // A job on l4: its pod waits for a node, the autoscaler adds one to
    // the pool, the pod runs there and returns its value.
    square_on_l4(c).await;
    assert_ran_on_pool(cloud, &pool);

    let (code, status) = json(c, &["status", "--json"]).await;
    assert_eq!(code, Some(0), "{status}");
    assert_eq!(status["complete"], true, "{status:#}");
    let pools = status["status"]["pools"].as_array().unwrap();
    let gpu = pools.iter().find(|p| p["name"] == pool.as_str()).unwrap();
    assert_eq!(
        (
            gpu["accelerator"].as_str(),
            gpu["nodes_total"].as_u64(),
            gpu["spot"].as_bool()
        ),
        (Some("gpu:l4"), Some(1), Some(false))
    );
    let (out, _) = ok(c, &["status"]).await;
    assert!(out.contains("Everything is in place."), "{out}");
    assert!(out.contains(&pool) && out.contains("gpu:l4"), "{out}");
    let (out, _) = ok(c, &["pool", "list"]).await;
    assert!(out.starts_with("POOL"), "{out}");
    let (out, _) = ok(c, &["doctor", "--accelerator", "l4"]).await;
    assert!(out.contains("checks passed"), "{out}");

    let (out, _) = ok(c, &["down", "--yes"]).await;
    assert!(
        out.contains("delete GKE cluster fake with its node pools"),
        "{out}"
    );
    assert!(out.contains("is kept with its objects"), "{out}");
    assert!(cloud.apis().clusters().is_empty());
    assert_eq!(cloud.gcs().buckets().len(), 2, "the buckets stay");
    let (code, status) = json(c, &["status", "--json"]).await;
    assert_eq!(code, Some(0));
    assert_eq!(status["status"]["cluster"], Value::Null);
    assert_eq!(status["status"]["fixes"][0], "kinetic up");
    let (out, _) = ok(c, &["down", "--delete-buckets", "--yes"]).await;
    assert!(
        out.contains("delete bucket gs://fake-project-kn-fake-jobs"),
        "{out}"
    );
    assert!(cloud.gcs().buckets().is_empty());
    assert_nothing_created_twice(cloud);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_up_killed_midway_is_finished_by_the_next() {
    let w = new_project(Duration::from_secs(3)).await;
    let (cloud, c) = (w.cloud(), w.sandbox());
    let mut child = c
        .command(&["up", "--yes"], &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while cloud.apis().clusters().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the cluster never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        cloud.apis().clusters(),
        vec![("fake".to_owned(), "PROVISIONING".to_owned())]
    );

    let (out, _) = ok(c, &["up", "--yes"]).await;
    assert!(
        out.contains("wait for the cluster's operation in progress to finish"),
        "{out}"
    );
    assert!(!out.contains("create GKE cluster"), "{out}");
    assert_eq!(
        cloud.apis().clusters(),
        vec![("fake".to_owned(), "RUNNING".to_owned())]
    );
    let (out, _) = ok(c, &["up", "--dry-run"]).await;
    assert!(out.contains("nothing to do"), "{out}");
    assert_nothing_created_twice(cloud);
}

/// `doctor --json`'s failing checks, by what they check.
async fn failing(c: &Sandbox) -> Vec<(String, String, String)> {
    let (code, v) = json(c, &["doctor", "--accelerator", "l4", "--json"]).await;
    let failing: Vec<(String, String, String)> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["ok"] == false)
        .map(|c| {
            (
                c["what"].as_str().unwrap().to_owned(),
                c["detail"].as_str().unwrap().to_owned(),
                c["fix"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(code, Some(if failing.is_empty() { 0 } else { 1 }), "{v:#}");
    failing
}

async fn assert_named(c: &Sandbox, what: &str, detail: &str, fix: &str) {
    let failing = failing(c).await;
    assert!(
        failing
            .iter()
            .any(|(w, d, f)| w.starts_with(what) && d.contains(detail) && f.contains(fix)),
        "doctor does not name {what:?} ({detail:?}, fix {fix:?}): {failing:#?}"
    );
}

fn edit_kubeconfig(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{text}");
    std::fs::write(path, text.replace(from, to)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_every_missing_piece() {
    let w = new_project(Duration::from_millis(50)).await;
    let (cloud, c) = (w.cloud(), w.sandbox());
    assert_named(
        c,
        "API container.googleapis.com",
        "not enabled",
        "kinetic up",
    )
    .await;
    ok(c, &["up", "--accelerator", "l4", "--yes"]).await;
    assert!(failing(c).await.is_empty(), "all pass after up");
    let names = cloud.names().clone();
    let context = names.kube_context.clone();

    // Each piece taken away in turn is named, with its fix.
    edit_kubeconfig(
        &w.kubeconfig(),
        &format!("current-context: {context}"),
        "current-context: elsewhere",
    );
    assert_named(
        c,
        &format!("kubeconfig context {context}"),
        "not the current context",
        "kubectl config use-context",
    )
    .await;
    let server = cloud.cluster().url().to_owned();
    edit_kubeconfig(
        &w.kubeconfig(),
        &format!("server: {server}"),
        "server: http://127.0.0.1:9",
    );
    assert_named(
        c,
        &format!("kubeconfig context {context}"),
        "points at http://127.0.0.1:9",
        "kinetic up",
    )
    .await;
    assert_named(
        c,
        "cluster API through kubeconfig context",
        "cannot reach",
        "get-credentials",
    )
    .await;

    let nodes_sa = names.node_service_account.clone();
    cloud.apis().remove_service_account_binding(
        &nodes_sa,
        "roles/iam.workloadIdentityUser",
        "serviceAccount:fake-project.svc.id.goog[default/kinetic]",
    );
    assert_named(
        c,
        "Workload Identity binding",
        "roles/iam.workloadIdentityUser",
        "kinetic up",
    )
    .await;
    cloud
        .cluster()
        .remove_object("serviceaccounts", "default", "kinetic");
    assert_named(
        c,
        "Kubernetes service account default/kinetic",
        "missing",
        "kinetic up",
    )
    .await;
    // Issue 24 point 4: the CRD alone is not LeaderWorkerSet installed.
    cloud
        .cluster()
        .remove_object("deployments.apps", "lws-system", "lws-controller-manager");
    assert_named(
        c,
        "LeaderWorkerSet",
        "Deployment lws-system/lws-controller-manager is missing",
        "kinetic up",
    )
    .await;
    cloud.cluster().remove_object(
        "customresourcedefinitions.apiextensions.k8s.io",
        "",
        "leaderworkersets.leaderworkerset.x-k8s.io",
    );
    assert_named(c, "LeaderWorkerSet", "CRD is missing", "kinetic up").await;
    cloud
        .cluster()
        .remove_object("daemonsets.apps", "kube-system", "nvidia-driver-installer");
    assert_named(c, "NVIDIA driver installer", "missing", "kinetic up").await;
    let pool = l4_pool(cloud);
    cloud.apis().remove_node_pool("fake", &pool);
    assert_named(
        c,
        "node pool for gpu:l4",
        "no pool has this accelerator",
        "kinetic pool add --accelerator gpu-l4",
    )
    .await;
    cloud.gcs().deny("storage.objects.create");
    assert_named(
        c,
        &format!("access to gs://{}", names.jobs_bucket),
        "storage.objects.create",
        "roles/storage.objectAdmin",
    )
    .await;
    cloud.gcs().remove_bucket(&names.builds_bucket);
    assert_named(
        c,
        &format!("bucket gs://{}", names.builds_bucket),
        "missing",
        "kinetic up",
    )
    .await;
    cloud.apis().remove_repository(&format!(
        "projects/fake-project/locations/us/repositories/{}",
        names.ar_repository
    ));
    assert_named(
        c,
        &format!("Artifact Registry repository {}", names.ar_repository),
        "missing",
        "kinetic up",
    )
    .await;
    cloud
        .apis()
        .remove_service_account(&names.build_service_account);
    assert_named(
        c,
        &format!("service account {}", names.build_service_account),
        "missing",
        "kinetic up",
    )
    .await;
    cloud.apis().disable("cloudbuild.googleapis.com");
    assert_named(
        c,
        "API cloudbuild.googleapis.com",
        "not enabled",
        "gcloud services enable cloudbuild.googleapis.com",
    )
    .await;
    ok(c, &["down", "--yes"]).await;
    assert_named(
        c,
        "GKE cluster fake in us-central1-a",
        "missing",
        "kinetic up",
    )
    .await;

    // Bad credentials: the project cannot be read.
    let bad = w
        .another_sandbox(WORK_PY)
        .with_var("KINETIC_ACCESS_TOKEN", "expired");
    assert_named(
        &bad,
        "project fake-project",
        "refused the credentials",
        "check the project id",
    )
    .await;
}

/// `kinetic run work.py:square --arg 7` on GKE with an L4 GPU: 49.
async fn square_on_l4(c: &Sandbox) {
    let (out, err) = ok(
        c,
        &[
            "run",
            "work.py:square",
            "--arg",
            "7",
            "--backend",
            "gke",
            "--accelerator",
            "l4",
            "--json",
        ],
    )
    .await;
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["value"], 49, "{err}");
}

/// The name of the pool serving `gpu:l4` in cluster `fake`.
fn l4_pool(cloud: &FakeGcp) -> String {
    cloud
        .apis()
        .node_pools("fake")
        .into_iter()
        .find(|(n, _)| n.starts_with("gpu-l4-"))
        .expect("a pool of L4 GPUs")
        .0
}

/// Assert a pod was scheduled on a node of `pool`.
fn assert_ran_on_pool(cloud: &FakeGcp, pool: &str) {
    let scheduled: Vec<String> = cloud
        .cluster()
        .objects("events", "default")
        .into_iter()
        .filter(|e| e["reason"] == "Scheduled")
        .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        scheduled
            .iter()
            .any(|m| m.contains(&format!("gke-fake-{pool}-"))),
        "the pod went to the pool's node: {scheduled:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_saves_the_clusters_profile_and_the_next_job_reaches_it() {
    let w = new_project(Duration::from_millis(50)).await;
    let cloud = w.cloud();
    let c = &without_target(w.sandbox());
    let target = PROJECT_FLAGS;
    let with_target = |args: &[&'static str]| -> Vec<&'static str> {
        args.iter().chain(target.iter()).copied().collect()
    };
    // Another tool's file: an active profile, and one named like the
    // cluster with a key this version does not know.
    let before = r#"{
  "current": "dev",
  "profiles": {
    "dev": {
      "cluster": "c",
      "namespace": "default",
      "project": "other",
      "zone": "europe-west4-a"
    },
    "fake": {
      "cluster": "old",
      "project": "fake-project",
      "state_backend": "gs://fake-project-kinetic-state",
      "zone": "us-east1-b"
    }
  }
}
"#;
    std::fs::write(c.path("profiles.json"), before).unwrap();
    let profiles = || std::fs::read_to_string(c.path("profiles.json")).unwrap();

    // Refused before anything is read or changed.
    let o = run(c, &["up", "--profile-name", "has/slash", "--yes"]).await;
    assert_eq!(o.status.code(), Some(2), "{:?}", texts(&o));
    assert!(
        texts(&o).1.contains("Invalid profile name 'has/slash'"),
        "{:?}",
        texts(&o)
    );
    let o = run(c, &["up", "--profile-name", "x", "--no-profile", "--yes"]).await;
    assert_eq!(o.status.code(), Some(2), "{:?}", texts(&o));
    assert!(
        cloud.apis().calls().is_empty(),
        "{:?}",
        cloud.apis().calls()
    );
    // A plan alone saves nothing.
    ok(c, &with_target(&["up", "--dry-run"])).await;
    assert_eq!(profiles(), before);

    // Built: the profile named after the cluster is updated in place and
    // made active, in Kinetic's format to the byte.
    let (out, _) = ok(c, &with_target(&["up", "--accelerator", "l4", "--yes"])).await;
    assert!(
        out.contains(
            "Profile 'fake' saved and made active (project fake-project, zone us-central1-a, cluster fake, namespace default).\nDone.\n"
        ),
        "{out}"
    );
    assert_eq!(
        profiles(),
        r#"{
  "current": "fake",
  "profiles": {
    "dev": {
      "cluster": "c",
      "namespace": "default",
      "project": "other",
      "zone": "europe-west4-a"
    },
    "fake": {
      "cluster": "fake",
      "namespace": "default",
      "project": "fake-project",
      "state_backend": "gs://fake-project-kinetic-state",
      "zone": "us-central1-a"
    }
  }
}
"#
    );
    let (code, list) = json(c, &["profile", "list", "--json"]).await;
    assert_eq!((code, &list["active"]), (Some(0), &Value::from("fake")));

    // The next job names nothing but its accelerator: the project, zone,
    // cluster and namespace (so the bucket, the registry and the
    // kubeconfig context) come from the profile, and the job runs on the
    // pool `up` added.
    square_on_l4(c).await;
    assert_ran_on_pool(cloud, &l4_pool(cloud));

    // Nothing left to build: the profile is still saved, under the name
    // asked for, and --json says so.
    let (code, v) = json(c, &["up", "--yes", "--profile-name", "team_a", "--json"]).await;
    assert_eq!(code, Some(0), "{v:#}");
    assert_eq!(v["applied"], false, "{v:#}");
    assert_eq!(
        v["profile"],
        serde_json::json!({
            "name": "team_a", "project": "fake-project", "zone": "us-central1-a",
            "cluster": "fake", "namespace": "default", "active": true,
        })
    );
    let file: Value = serde_json::from_str(&profiles()).unwrap();
    assert_eq!(file["current"], "team_a");
    assert_eq!(file["profiles"]["team_a"]["cluster"], "fake");
    assert_eq!(file["profiles"]["fake"]["cluster"], "fake");

    // --no-profile: the file is not touched.
    let saved = profiles();
    let (code, v) = json(c, &["up", "--yes", "--no-profile", "--json"]).await;
    assert_eq!((code, &v["profile"]), (Some(0), &Value::Null), "{v:#}");
    assert_eq!(profiles(), saved);
    let (out, _) = ok(c, &["up", "--dry-run"]).await;
    assert!(!out.contains("Profile"), "{out}");
    assert_eq!(profiles(), saved);
}

/// A metadata server that refuses every token request, counting them.
fn refusing_metadata_server() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let asked = std::sync::Arc::new(AtomicUsize::new(0));
    let count = asked.clone();
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
            count.fetch_add(1, Ordering::SeqCst);
            let _ = stream.write_all(
                b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    (host, asked)
}

#[test]
fn what_can_be_checked_is_checked_before_the_network() {
    // Issue 25.10: `pool remove ../../x` and `up --dry-run` without
    // credentials went looking for a token once per API call (28-37 s)
    // before saying anything.
    let (host, asked) = refusing_metadata_server();
    let sb = Sandbox::new(WORK_PY).with_env(vec![
        ("GCE_METADATA_HOST".into(), host.clone()),
        ("GCE_METADATA_IP".into(), host),
    ]);
    let target = [
        "--project",
        "my-proj-1",
        "--zone",
        "us-central1-a",
        "--cluster",
        "c1",
    ];
    let remove: Vec<&str> = ["pool", "remove", "../../x"]
        .into_iter()
        .chain(target)
        .collect();
    let o = sb.kinetic(&remove);
    let (_, err) = texts(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("node pool name '../../x' is not accepted"),
        "{err}"
    );
    assert_eq!(
        asked.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "no token asked for"
    );

    let up: Vec<&str> = ["up", "--dry-run"].into_iter().chain(target).collect();
    let o = sb.kinetic(&up);
    let (_, err) = texts(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot get a Google access token"), "{err}");
    let tries = asked.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        (1..=2).contains(&tries),
        "credentials looked for once (host, then IP), not per call: {tries}"
    );
}

const SLOW_PY: &str =
    "import time\n\ndef nap(seconds):\n    time.sleep(seconds)\n    return seconds\n";

/// Issue 29 point 5: with `up` half done, then after `down`, commands say
/// what the cluster is (being created, deleted) instead of sending the
/// user to `gcloud … get-credentials`; `jobs list` lists what the kept
/// bucket holds; `down`'s plan names the jobs still running; the
/// profile naming the deleted cluster is marked; `status` never prints an
/// endpoint without a host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_up_half_done_and_after_down_commands_say_what_the_cluster_is() {
    let w = World::project(WORK_PY)
        .file("slow.py", SLOW_PY)
        .new_project(Duration::from_secs(3))
        .start()
        .await;
    let (cloud, c) = (w.cloud(), w.sandbox());

    // `up` stopped while the cluster is being created.
    let mut child = c
        .command(&["up", "--yes"], &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while cloud.apis().clusters().is_empty() {
        assert!(start.elapsed() < Duration::from_secs(60), "no cluster");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let (out, _) = texts(&run(c, &["status"]).await);
    assert!(
        out.contains("none yet (the cluster is PROVISIONING)"),
        "{out}"
    );
    assert!(
        !out.lines().any(|l| l.trim_end().ends_with("https://")),
        "{out}"
    );
    let (code, v) = json(c, &["status", "--json"]).await;
    assert_eq!(
        (code, &v["status"]["endpoint"]),
        (Some(0), &Value::Null),
        "{v:#}"
    );
    let (out, err) = ok(c, &["jobs", "list"]).await;
    assert_eq!(out, "no jobs\n");
    assert!(
        err.contains(
            "cluster fake in us-central1-a (project fake-project) is still being created (PROVISIONING): `kinetic up` finishes it"
        ),
        "{err}"
    );
    assert!(!err.contains("get-credentials"), "{err}");

    // Finished, a job left running, then `down`.
    cloud.apis().set_operation_time(Duration::from_millis(50));
    ok(c, &["up", "--yes"]).await;
    let (out, _) = ok(
        c,
        &[
            "run",
            "slow.py:nap",
            "--arg",
            "600",
            "--backend",
            "gke",
            "--detach",
        ],
    )
    .await;
    let job = out.trim().to_owned();
    assert!(job.starts_with("job-"), "{out}");
    let (out, _) = ok(c, &["down", "--dry-run"]).await;
    assert!(
        out.contains(&format!(
            "1 job(s) still running on the cluster stop with it: {job}"
        )),
        "{out}"
    );
    let (out, err) = ok(c, &["down", "--yes"]).await;
    assert!(out.ends_with("Done.\n"), "{out}");
    assert!(
        err.contains("Profile(s) 'fake' name the deleted cluster: marked so"),
        "{err}"
    );

    // The profile says so.
    let (out, _) = ok(c, &["profile", "list"]).await;
    assert!(out.contains("fake (deleted)"), "{out}");
    assert!(
        out.contains("Active profile: fake (its cluster was deleted by `kinetic down` at "),
        "{out}"
    );
    let (code, v) = json(c, &["profile", "show", "--json"]).await;
    assert_eq!(code, Some(0));
    assert!(v["cluster_deleted_at"].is_string(), "{v:#}");
    let (out, _) = ok(c, &["status"]).await;
    assert!(out.contains("deleted by `kinetic down` at "), "{out}");

    // The job's record, kept in the bucket, is listed; the cluster named gone.
    let (out, err) = ok(c, &["jobs", "list"]).await;
    let row = out
        .lines()
        .find(|l| l.starts_with(&job))
        .unwrap_or_else(|| {
            panic!("{job} is not listed\nstdout: {out}\nstderr: {err}");
        });
    assert!(row.contains("UNKNOWN") && row.contains("gke"), "{out}");
    assert!(
        err.contains(
            "cluster fake in us-central1-a (project fake-project) was deleted by `kinetic down` at "
        ),
        "{err}"
    );
    assert!(
        err.contains("its 1 job(s) below are read from the store"),
        "{err}"
    );
    assert!(!err.contains("get-credentials"), "{err}");
    let (code, v) = json(c, &["jobs", "list", "--json"]).await;
    assert_eq!(code, Some(0));
    assert_eq!(v[0]["job_id"], job.as_str(), "{v:#}");
    assert_eq!(v[0]["status"], "UNKNOWN", "{v:#}");

    // A job's status: the cluster was deleted, not missing credentials.
    let o = run(c, &["jobs", "status", &job]).await;
    let (_, err) = texts(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("was deleted by `kinetic down` at ")
            && err.contains("`kinetic up` makes it again"),
        "{err}"
    );
    assert!(!err.contains("get-credentials"), "{err}");

    // A new job on it: the same.
    let o = run(
        c,
        &["run", "work.py:square", "--arg", "2", "--backend", "gke"],
    )
    .await;
    let (_, err) = texts(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("was deleted by `kinetic down` at "), "{err}");
    assert!(!err.contains("get-credentials"), "{err}");

    // `up` makes it again and clears the mark.
    ok(c, &["up", "--yes"]).await;
    let (out, _) = ok(c, &["profile", "list"]).await;
    assert!(!out.contains("deleted"), "{out}");
}

/// Issue 29 point 6: `pool add` on a cluster `kinetic up` did not make
/// (no kn-…-nodes account) runs the new pool's nodes as the cluster's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_add_on_a_cluster_up_did_not_make_runs_as_its_nodes_account() {
    let w = new_project(Duration::from_millis(50)).await;
    let (cloud, c) = (w.cloud(), w.sandbox());
    cloud
        .apis()
        .enable(&["container.googleapis.com", "iam.googleapis.com"]);
    cloud.apis().add_cluster("us-central1-a", "fake");
    let names = cloud.names().clone();
    assert!(
        !cloud
            .apis()
            .service_accounts()
            .contains(&names.node_service_account)
    );
    let (out, err) = ok(c, &["pool", "add", "--accelerator", "l4", "--yes"]).await;
    assert!(
        out.contains(&format!(
            "service account {} does not exist (`kinetic up` did not make this cluster): the pool's nodes run as default, as those of node pool default-pool do; `kinetic up` adopts the cluster",
            names.node_service_account
        )),
        "{out}\n{err}"
    );
    let pool = l4_pool(cloud);
    let cluster = cloud.apis().cluster_json("fake").unwrap();
    let added = cluster["nodePools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == pool.as_str())
        .unwrap();
    assert_eq!(added["config"]["serviceAccount"], "default", "{added:#}");
}

/// Issue 29 point 11: `jobs list` lists the local backend's jobs and the
/// cluster's together, each from its own store, with a BACKEND column; a
/// backend that cannot be read is named and the others still listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_list_lists_every_backends_jobs_together() {
    let w = World::project(WORK_PY).start().await;
    // Local jobs keep their records in the local store, gke jobs in the
    // cluster's bucket.
    let c = &w.sandbox().without(&[vars::STORE_URL]);
    let id = |v: &Value| v["job_id"].as_str().unwrap().to_owned();
    let (code, v) = json(
        c,
        &[
            "run",
            "work.py:square",
            "--arg",
            "3",
            "--no-cleanup",
            "--json",
        ],
    )
    .await;
    assert_eq!((code, &v["value"]), (Some(0), &Value::from(9)), "{v:#}");
    let local = id(&v);
    let (code, v) = json(
        c,
        &[
            "run",
            "work.py:square",
            "--arg",
            "4",
            "--backend",
            "gke",
            "--no-cleanup",
            "--json",
        ],
    )
    .await;
    assert_eq!((code, &v["value"]), (Some(0), &Value::from(16)), "{v:#}");
    let gke = id(&v);

    let (out, err) = ok(c, &["jobs", "list"]).await;
    assert!(out.lines().next().unwrap().contains("BACKEND"), "{out}");
    for (job, backend) in [(&local, "local"), (&gke, "gke")] {
        let row = out
            .lines()
            .find(|l| l.starts_with(job.as_str()))
            .unwrap_or_else(|| panic!("{job} not listed\nstdout: {out}\nstderr: {err}"));
        assert!(row.contains("SUCCEEDED") && row.contains(backend), "{out}");
    }
    let (code, v) = json(c, &["jobs", "list", "--json"]).await;
    assert_eq!(code, Some(0));
    let backend_of = |v: &Value, job: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|e| e["job_id"] == job)
            .map(|e| e["backend"].clone())
    };
    assert_eq!(backend_of(&v, &local), Some(Value::from("local")), "{v:#}");
    assert_eq!(backend_of(&v, &gke), Some(Value::from("gke")), "{v:#}");

    // The cluster cannot be reached: named, and the local job still listed.
    edit_kubeconfig(
        &w.kubeconfig(),
        &format!("server: {}", w.cloud().cluster().url()),
        "server: http://127.0.0.1:9",
    );
    let (out, err) = ok(c, &["jobs", "list"]).await;
    assert!(out.contains(&local), "{out}");
    assert!(err.contains("the gke backend's jobs"), "{err}");
}

#[test]
fn doctor_without_a_token_asks_nothing_else() {
    // The credentials gate the rest: without a token `doctor` asked for
    // one again for every API call it made (each one failing the same way).
    let (host, asked) = refusing_metadata_server();
    let sb = Sandbox::new(WORK_PY).with_env(vec![
        ("GCE_METADATA_HOST".into(), host.clone()),
        ("GCE_METADATA_IP".into(), host),
    ]);
    let o = sb.kinetic(&[
        "doctor",
        "--project",
        "my-proj-1",
        "--zone",
        "us-central1-a",
        "--cluster",
        "c1",
    ]);
    let (out, err) = texts(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(out.starts_with("FAIL Google credentials: "), "{out}");
    assert!(
        out.lines()
            .skip(2)
            .filter(|l| !l.trim().is_empty() && !l.starts_with(' '))
            .take_while(|l| !l.contains("checks failed"))
            .all(|l| l.ends_with(": not run: needs Google credentials")),
        "{out}"
    );
    let tries = asked.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        (1..=2).contains(&tries),
        "credentials looked for once (host, then IP), not per call: {tries}"
    );
}
