//! The variables a job reads about itself, under Kinetic's names and
//! SkyPilot's, through the real `kinetic` binary on every backend: the
//! local one, a GKE Job on the fake cluster and a four-host Pathways slice
//! of it. Each host records what it saw; the test checks every value:
//! its rank, its hosts' IP addresses in rank order (each the address of
//! that host's pod, the same list on every host), the number of hosts, the
//! GPUs it holds, a task id that a retry keeps, and the configured
//! cluster's name, cloud, region and zone.

use std::net::IpAddr;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;

mod sandbox;

use sandbox::Sandbox;
use sandbox::world::{PYPROJECT, World};

/// `seen` records this host's variables in `{out}/host-{rank}-attempt-{n}.json`
/// and, asked to, fails its first attempt.
const WORK_PY: &str = r#"
import json
import os

NAMES = ["NODE_RANK", "NODE_IPS", "NUM_NODES", "NUM_GPUS_PER_NODE", "TASK_ID", "CLUSTER_INFO"]


def seen(out, fail_first=False):
    env = {prefix + name: os.environ.get(prefix + name)
           for prefix in ("KINETIC_", "SKYPILOT_") for name in NAMES}
    env["KINETIC_ATTEMPT"] = os.environ.get("KINETIC_ATTEMPT")
    env["HOSTNAME"] = os.environ.get("HOSTNAME")
    path = os.path.join(out, "host-%s-attempt-%s.json" % (env["KINETIC_NODE_RANK"], env["KINETIC_ATTEMPT"]))
    with open(path, "w") as f:
        json.dump(env, f)
    if fail_first and env["KINETIC_ATTEMPT"] == "1":
        raise RuntimeError("the first attempt fails")
    return env["KINETIC_NODE_RANK"]
"#;

/// The cluster the gke and pathways jobs are configured for.
const ZONE: &str = "europe-west4-b";
const CLUSTER: &str = "vars-cluster";

/// The settings that name it (no project: the kubeconfig's current context
/// stays the fake cluster's).
const CLUSTER_ENV: [(&str, &str); 2] = [("KINETIC_ZONE", ZONE), ("KINETIC_CLUSTER", CLUSTER)];

/// What the job's `KINETIC_CLUSTER_INFO` must say of its cluster.
struct Cluster {
    name: &'static str,
    cloud: &'static str,
    region: Option<&'static str>,
    zone: Option<&'static str>,
}

const CONFIGURED: Cluster = Cluster {
    name: CLUSTER,
    cloud: "GCP",
    region: Some("europe-west4"),
    zone: Some(ZONE),
};

/// What host `rank` recorded on attempt `attempt`.
fn record(out: &Path, rank: u32, attempt: u32) -> Value {
    let path = out.join(format!("host-{rank}-attempt-{attempt}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("no record at {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Check every variable of every host of one run (`hosts[rank]`), job
/// `job_id` on `cluster`; the hosts' addresses, which every host must see
/// the same, are returned.
fn check_hosts(hosts: &[Value], job_id: &str, cluster: &Cluster) -> Vec<IpAddr> {
    let n = hosts.len();
    let text = |v: &Value, name: &str| -> String {
        v[name]
            .as_str()
            .unwrap_or_else(|| panic!("{name} unset: {v}"))
            .to_owned()
    };
    let ips_text = text(&hosts[0], "KINETIC_NODE_IPS");
    let ips: Vec<IpAddr> = ips_text
        .lines()
        .map(|l| {
            l.parse()
                .unwrap_or_else(|e| panic!("{l:?} is no IP address ({e}): {ips_text:?}"))
        })
        .collect();
    assert_eq!(ips.len(), n, "one address per host: {ips_text:?}");
    for (rank, v) in hosts.iter().enumerate() {
        for prefix in ["KINETIC_", "SKYPILOT_"] {
            let var = |name: &str| text(v, &format!("{prefix}{name}"));
            assert_eq!(var("NODE_RANK"), rank.to_string(), "{v}");
            assert_eq!(var("NODE_IPS"), ips_text, "the same hosts everywhere: {v}");
            assert_eq!(var("NUM_NODES"), n.to_string(), "{v}");
            assert_eq!(var("NUM_GPUS_PER_NODE"), "0", "{v}");
            assert_eq!(var("TASK_ID"), job_id, "{v}");
            let info: Value = serde_json::from_str(&var("CLUSTER_INFO")).unwrap();
            assert_eq!(info["cluster_name"], cluster.name, "{info}");
            assert_eq!(info["cloud"], cluster.cloud, "{info}");
            assert_eq!(info["region"].as_str(), cluster.region, "{info}");
            assert_eq!(info["zone"].as_str(), cluster.zone, "{info}");
            assert_eq!(info["task_id"], job_id, "{info}");
            assert_eq!(info["node_rank"], rank, "{info}");
            assert_eq!(info["num_nodes"], n, "{info}");
            assert_eq!(info["num_gpus_per_node"], 0, "{info}");
            let listed: Vec<String> = ips.iter().map(ToString::to_string).collect();
            assert_eq!(info["node_ips"], serde_json::json!(listed), "{info}");
        }
    }
    ips
}

/// The IP address (`status.podIP`) of each pod of the fake cluster, by name.
fn pod_ips(w: &World) -> std::collections::BTreeMap<String, IpAddr> {
    w.cluster()
        .objects("pods", "default")
        .iter()
        .filter_map(|p| {
            Some((
                p["metadata"]["name"].as_str()?.to_owned(),
                p["status"]["podIP"].as_str()?.parse().ok()?,
            ))
        })
        .collect()
}

/// `kinetic ARGS` (with the configured cluster's settings) against `w`,
/// and the address of every pod seen while it ran (a slice's pods may be
/// gone by the time the command returns).
async fn run_watching_pods(
    w: &World,
    args: &[&str],
) -> (Output, std::collections::BTreeMap<String, IpAddr>) {
    let run = w.kinetic_env(args, &CLUSTER_ENV);
    tokio::pin!(run);
    let mut pods = std::collections::BTreeMap::new();
    loop {
        pods.extend(pod_ips(w));
        tokio::select! {
            o = &mut run => {
                pods.extend(pod_ips(w));
                return (o, pods);
            }
            () = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
    }
}

fn run_ok(o: &Output) -> Value {
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "stdout: {out}\nstderr: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn quoted(path: &Path) -> String {
    serde_json::to_string(&path.display().to_string()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_job_sees_this_host_and_keeps_its_task_id_on_a_retry() {
    let sb = Sandbox::new(WORK_PY);
    sb.write("home/project/pyproject.toml", PYPROJECT);
    let out = sb.path("seen");
    std::fs::create_dir_all(&out).unwrap();
    let store = format!("file://{}", sb.path("store").display());
    let o = sb
        .kinetic_async_env(
            &[
                "run",
                "work.py:seen",
                "--arg",
                &quoted(&out),
                "--arg",
                "true",
                "--backend",
                "local",
                "--retries",
                "1",
                "--json",
            ],
            &[
                ("KINETIC_STORE_URL", &store),
                CLUSTER_ENV[0],
                CLUSTER_ENV[1],
            ],
        )
        .await;
    let v = run_ok(&o);
    let job_id = v["job_id"].as_str().unwrap();
    let local = Cluster {
        name: "local",
        cloud: "local",
        region: None,
        zone: None,
    };
    for attempt in [1, 2] {
        let ips = check_hosts(&[record(&out, 0, attempt)], job_id, &local);
        assert_eq!(ips, ["127.0.0.1".parse::<IpAddr>().unwrap()]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gke_job_sees_its_pods_address_and_keeps_its_task_id_on_a_retry() {
    let w = World::gke(WORK_PY)
        .pyproject()
        .kill_grace(Duration::from_millis(300))
        .start()
        .await;
    let out = w.sandbox().path("seen");
    std::fs::create_dir_all(&out).unwrap();
    let (o, pods) = run_watching_pods(
        &w,
        &[
            "run",
            "work.py:seen",
            "--arg",
            &quoted(&out),
            "--arg",
            "true",
            "--backend",
            "gke",
            "--retries",
            "1",
            "--json",
        ],
    )
    .await;
    let v = run_ok(&o);
    let job_id = v["job_id"].as_str().unwrap();
    assert_eq!(pods.len(), 2, "the failed pod and its retry: {pods:?}");
    let mut seen = Vec::new();
    for attempt in [1, 2] {
        let host = record(&out, 0, attempt);
        let ips = check_hosts(std::slice::from_ref(&host), job_id, &CONFIGURED);
        let pod = host["HOSTNAME"].as_str().unwrap();
        let own = pods
            .get(pod)
            .unwrap_or_else(|| panic!("pod {pod} never seen: {pods:?}"));
        assert_eq!(&ips[0], own, "the address of {pod}, its own");
        seen.push(ips[0]);
    }
    assert_ne!(seen[0], seen[1], "each attempt's pod has its own address");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_host_of_a_pathways_slice_sees_the_hosts_addresses_in_rank_order() {
    let w = World::gke(WORK_PY).pyproject().pathways().start().await;
    let out = w.sandbox().path("seen");
    std::fs::create_dir_all(&out).unwrap();
    let (o, pods) = run_watching_pods(
        &w,
        &[
            "run",
            "work.py:seen",
            "--arg",
            &quoted(&out),
            "--accelerator",
            "v5litepod-16",
            "--json",
        ],
    )
    .await;
    let v = run_ok(&o);
    let job_id = v["job_id"].as_str().unwrap();
    let hosts: Vec<Value> = (0..4).map(|rank| record(&out, rank, 1)).collect();
    let ips = check_hosts(&hosts, job_id, &CONFIGURED);
    for (rank, host) in hosts.iter().enumerate() {
        let pod = host["HOSTNAME"].as_str().unwrap();
        let own = pods
            .get(pod)
            .unwrap_or_else(|| panic!("pod {pod} never seen: {pods:?}"));
        assert_eq!(&ips[rank], own, "host {rank} is pod {pod}");
    }
    let distinct: std::collections::BTreeSet<&IpAddr> = ips.iter().collect();
    assert_eq!(distinct.len(), 4, "{ips:?}");
}

const GPUS_PY: &str = r#"
import json
import os


def gpus():
    return [os.environ.get(name) for name in
            ("KINETIC_NUM_GPUS_PER_NODE", "SKYPILOT_NUM_GPUS_PER_NODE", "CUDA_VISIBLE_DEVICES")] + [
        json.loads(os.environ["KINETIC_CLUSTER_INFO"])["num_gpus_per_node"]]
"#;

/// A local job holds the devices it was given: on a host whose stand-in
/// `nvidia-smi` lists four GPUs, a two-GPU job counts its two, a CPU job none.
#[test]
fn a_local_job_counts_the_gpus_it_was_given() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new(GPUS_PY);
    let list: String = (0..4)
        .map(|i| format!("GPU {i}: NVIDIA A100 (UUID: GPU-{i:08x}-0000-0000-0000-000000000000)\n"))
        .collect();
    let smi = sb.write(
        "bin/nvidia-smi",
        &format!("#!/bin/sh\ncat <<'EOF'\n{list}EOF\n"),
    );
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        sb.path("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let sb = sb.with_var("PATH", &path);
    for (accelerator, expected) in [
        ("a100x2", serde_json::json!(["2", "2", "0,1", 2])),
        ("cpu", serde_json::json!(["0", "0", "", 0])),
    ] {
        let o = sb.kinetic(&[
            "--json",
            "run",
            "--backend",
            "local",
            "work:gpus",
            "--accelerator",
            accelerator,
        ]);
        assert_eq!(run_ok(&o)["value"], expected, "{accelerator}");
    }
}
