//! The image's interpreter: a container's `python3` is its image's,
//! whether the container runs it as its command or through a shell (as a
//! slice's hosts run their command under `sh -c`), since a real image has
//! its `python3` on the container's `PATH`; an image the registry does not
//! hold is never run, on any interpreter.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kinetic_fake_gcp::k8s::{FakeCluster, FakeClusterConfig};
use kube::api::{Api, LogParams, PostParams};
use serde_json::json;

fn pod(name: &str, command: &[&str]) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "c", "image": "fake.registry.invalid/x:1",
            "command": command,
        }]},
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_images_python3_runs_directly_and_through_a_shell() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // The image's interpreter (`python3` and `python` in its `bin`): says
    // who it is, with its arguments.
    let bin = dir.path().join("image's env").join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in ["python3", "python"] {
        let python = bin.join(name);
        std::fs::write(&python, "#!/bin/sh\necho \"image python: $*\"\n").unwrap();
        std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let cluster = FakeCluster::start(
        FakeClusterConfig::default().image("fake.registry.invalid/x:1", bin.join("python3")),
    )
    .await
    .unwrap();
    let client = kube::Client::try_from(kube::Config::new(cluster.url().parse().unwrap())).unwrap();
    let api: Api<Pod> = Api::namespaced(client, "default");
    let pods = [
        ("direct", vec!["python3", "-c", "x"]),
        (
            "shell",
            vec!["sh", "-c", "python3 -c y \"$1\"", "sh", "one arg"],
        ),
        ("python", vec!["sh", "-c", "python -V"]),
    ];
    for (name, command) in &pods {
        api.create(&PostParams::default(), &pod(name, command))
            .await
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for (name, want) in [
        ("direct", "image python: -c x"),
        ("shell", "image python: -c y one arg"),
        ("python", "image python: -V"),
    ] {
        loop {
            let phase = api
                .get(name)
                .await
                .unwrap()
                .status
                .and_then(|s| s.phase)
                .unwrap_or_default();
            if phase == "Succeeded" || phase == "Failed" {
                assert_eq!(phase, "Succeeded", "{name}");
                break;
            }
            assert!(Instant::now() < deadline, "{name} never ended");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let log = api.logs(name, &LogParams::default()).await.unwrap();
        assert_eq!(log.trim(), want, "{name}");
    }
}

async fn wait_for(api: &Api<Pod>, name: &str, done: impl Fn(&Pod) -> bool) -> Pod {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pod = api.get(name).await.unwrap();
        if done(&pod) {
            return pod;
        }
        assert!(Instant::now() < deadline, "{name}: {:?}", pod.status);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A pod runs its own image's interpreter, and an image the registry does
/// not hold is never run on any other: it cannot be pulled. Both with the
/// registry a fake Cloud Build shares and with a cluster on its own, which
/// knows only the images named to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_runs_its_images_environment_and_an_unknown_image_is_err_image_pull() {
    use kinetic_fake_gcp::images::ImageEnvironments;
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let python = dir.path().join("python3");
    std::fs::write(&python, "#!/bin/sh\necho \"known image: $*\"\n").unwrap();
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let images = std::sync::Arc::new(ImageEnvironments::new(None));
    images.add_stand_in("fake.registry.invalid/x:1", &python);
    let shared = FakeClusterConfig::default().images(images);
    let alone = FakeClusterConfig::default().image("fake.registry.invalid/x:1", &python);
    for config in [shared, alone] {
        known_runs_and_unknown_is_not_pulled(config).await;
    }
}

async fn known_runs_and_unknown_is_not_pulled(config: FakeClusterConfig) {
    let cluster = FakeCluster::start(config).await.unwrap();
    let client = kube::Client::try_from(kube::Config::new(cluster.url().parse().unwrap())).unwrap();
    let api: Api<Pod> = Api::namespaced(client, "default");
    api.create(
        &PostParams::default(),
        &pod("known", &["python3", "-c", "x"]),
    )
    .await
    .unwrap();
    let mut unknown = pod("unknown", &["python3", "-c", "x"]);
    unknown.spec.as_mut().unwrap().containers[0].image =
        Some("fake.registry.invalid/never-built:1".into());
    api.create(&PostParams::default(), &unknown).await.unwrap();

    let known = wait_for(&api, "known", |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded")
    })
    .await;
    assert!(known.status.is_some());
    let log = api.logs("known", &LogParams::default()).await.unwrap();
    assert_eq!(log.trim(), "known image: -c x");

    let reason = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first())
            .and_then(|c| c.state.as_ref())
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.clone())
    };
    let pulled = wait_for(&api, "unknown", |p| reason(p).is_some()).await;
    assert_eq!(reason(&pulled).as_deref(), Some("ErrImagePull"));
    assert_eq!(
        pulled.status.and_then(|s| s.phase).as_deref(),
        Some("Pending")
    );
}
