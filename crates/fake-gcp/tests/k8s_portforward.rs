//! `pods/{name}/portforward` through a real `kube::Client` (`Api::portforward`,
//! the WebSocket `v4.channel.k8s.io` protocol): bytes reach the pod's port
//! at the pod's IP and come back; nothing listening is an error on the
//! port's error channel; a pod that is not running or does not exist is
//! refused with the real server's status.

use k8s_openapi::api::core::v1::Pod;
use kinetic_fake_gcp::k8s::{FakeCluster, FakeClusterConfig};
use kube::api::Api;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn pod(name: &str, phase: &str, ip: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "ns"},
           "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "i"}]},
           "status": {"phase": phase, "podIP": ip}})
}

async fn cluster() -> (FakeCluster, Api<Pod>) {
    let cluster = FakeCluster::start(FakeClusterConfig::default().controller(false))
        .await
        .unwrap();
    let client = kube::Client::try_from(kube::Config::new(cluster.url().parse().unwrap())).unwrap();
    (cluster, Api::namespaced(client, "ns"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_go_to_the_pods_port_at_its_ip_and_back() {
    let (cluster, pods) = cluster().await;
    // The pod's own loopback address, not 127.0.0.1: a server there is
    // reached only if the fake dials the pod's IP.
    let listener = tokio::net::TcpListener::bind("127.3.4.5:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 4];
        conn.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
        conn.write_all(b"pong from the pod").await.unwrap();
    });
    cluster
        .insert("pods", "ns", pod("p1", "Running", "127.3.4.5"))
        .unwrap();
    let mut forwarder = pods.portforward("p1", &[port]).await.unwrap();
    let mut stream = forwarder.take_stream(port).unwrap();
    stream.write_all(b"ping").await.unwrap();
    let mut answer = Vec::new();
    // The pod closes after answering: the connection closes too.
    stream.read_to_end(&mut answer).await.unwrap();
    assert_eq!(answer, b"pong from the pod");
    // Done with the port: the forwarder ends, its error channel without an error.
    drop(stream);
    let error = forwarder.take_error(port).unwrap().await;
    assert_eq!(error, None, "no error on the error channel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_listening_is_reported_on_the_error_channel() {
    let (cluster, pods) = cluster().await;
    let port = {
        let l = std::net::TcpListener::bind("127.3.4.6:0").unwrap();
        l.local_addr().unwrap().port()
    };
    cluster
        .insert("pods", "ns", pod("p2", "Running", "127.3.4.6"))
        .unwrap();
    let mut forwarder = pods.portforward("p2", &[port]).await.unwrap();
    let error = forwarder
        .take_error(port)
        .unwrap()
        .await
        .expect("an error message");
    assert!(
        error.starts_with(&format!("error forwarding port {port} to pod ns/p2")),
        "{error}"
    );
    assert!(error.contains("127.3.4.6"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_that_cannot_be_forwarded_are_refused_as_the_real_server_does() {
    let (cluster, pods) = cluster().await;
    let status = |e: kube::Error| match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("expected an API status, got {other:?}"),
    };
    let (code, message) = status(pods.portforward("nope", &[5678]).await.err().unwrap());
    assert_eq!(code, 404, "{message}");
    assert!(message.contains("pods \"nope\" not found"), "{message}");
    cluster
        .insert("pods", "ns", pod("done", "Succeeded", "127.3.4.7"))
        .unwrap();
    let (code, message) = status(pods.portforward("done", &[5678]).await.err().unwrap());
    assert_eq!(
        (code, message.as_str()),
        (500, "unable to upgrade connection: pod does not exist")
    );
    let mut pending = pod("pending", "Pending", "");
    pending["spec"]["nodeName"] = json!(null);
    cluster.insert("pods", "ns", pending).unwrap();
    let (code, message) = status(pods.portforward("pending", &[5678]).await.err().unwrap());
    assert_eq!(
        (code, message.as_str()),
        (400, "pod pending does not have a host assigned")
    );
}
