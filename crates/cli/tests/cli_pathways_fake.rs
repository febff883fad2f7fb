//! The real `kinetic` binary on a multi-host TPU slice of the fake cluster
//! (LeaderWorkerSet installed, four `v5litepod-16` hosts): the pathways
//! backend is chosen by the accelerator, every host runs the runner as a
//! pod process, the leader's value comes back, a worker's exception comes
//! back as reported by its host, and `kinetic map` maps over the slice.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

mod sandbox;

use sandbox::world::World;

/// `f` writes what its host saw to `{hosts}/host-{rank}.json` and returns
/// the rank; `g` counts its runs on each host and fails on host 2 only; `square` is for `map`.
fn work_py(hosts: &Path) -> String {
    format!(
        r#"
import json, os, socket

HOSTS = {hosts:?}


def f():
    rank = int(os.environ["KINETIC_NODE_RANK"])
    seen = {{
        "rank": rank,
        "tpu_worker_id": os.environ.get("TPU_WORKER_ID"),
        "num_nodes": os.environ["KINETIC_NUM_NODES"],
        "node_ips": os.environ["KINETIC_NODE_IPS"],
        "coordinator": os.environ.get("MEGASCALE_COORDINATOR_ADDRESS"),
    }}
    seen["coordinator_ip"] = socket.gethostbyname(seen["coordinator"])
    with open(os.path.join(HOSTS, "host-%d.json" % rank), "w") as out:
        json.dump(seen, out)
    return {{"leader_rank": rank}}


def g():
    rank = os.environ["KINETIC_NODE_RANK"]
    with open(os.path.join(HOSTS, "g-runs-%s" % rank), "a") as out:
        out.write("run\n")
    if rank == "2":
        raise ValueError("host 2 broke")
    return "fine"


def square(x):
    return x * x
"#,
        hosts = hosts.display().to_string()
    )
}

/// The slice, its project `work.py` (which writes to `hosts/` in the
/// sandbox) and a `pyproject.toml`.
async fn slice() -> World {
    let w = World::gke("").pyproject().pathways().start().await;
    let sb = w.sandbox();
    std::fs::create_dir_all(sb.path("hosts")).unwrap();
    sb.write("home/project/work.py", &work_py(&sb.path("hosts")));
    w
}

/// What host `rank` saw, as `f` wrote it.
fn host(w: &World, rank: u32) -> Value {
    let path = w.sandbox().path(&format!("hosts/host-{rank}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("host {rank} left no record at {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const LWS: &str = "leaderworkersets.leaderworkerset.x-k8s.io";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_host_slice_runs_on_pathways_and_returns_the_leaders_value() {
    let w = slice().await;
    let o = w
        .kinetic(&[
            "run",
            "work.py:f",
            "--accelerator",
            "v5litepod-16",
            "--json",
            "-v",
        ])
        .await;
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("backend: pathways"), "{err}");
    let out: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(out["value"], serde_json::json!({"leader_rank": 0}), "{out}");
    assert_eq!(w.cluster().calls().count("create", LWS), 1);
    let hosts: Vec<Value> = (0..4).map(|r| host(&w, r)).collect();
    for (rank, seen) in hosts.iter().enumerate() {
        assert_eq!(seen["rank"], rank, "{seen}");
        assert_eq!(seen["tpu_worker_id"], rank.to_string(), "{seen}");
        assert_eq!(seen["num_nodes"], "4", "{seen}");
        assert_eq!(seen["node_ips"], hosts[0]["node_ips"], "one host list");
        assert_eq!(seen["coordinator"], hosts[0]["coordinator"], "{seen}");
    }
    let ips: Vec<&str> = hosts[0]["node_ips"].as_str().unwrap().lines().collect();
    assert_eq!(ips.len(), 4, "{ips:?}");
    assert_eq!(
        hosts[0]["coordinator_ip"].as_str(),
        Some(ips[0]),
        "the leader coordinates"
    );
    assert!(
        w.cluster().objects(LWS, "default").is_empty(),
        "the LeaderWorkerSet is cleaned up after its value was collected"
    );
}

/// The slice's pods restart `Always` (a StatefulSet's must): a worker
/// that fails holds its container and tells its exit in its log, so its
/// failure still comes back as reported by its host, and no host's
/// container restarts, which would recreate the group and run the job
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workers_failure_under_restart_always_is_reported_once_by_its_host() {
    let w = slice().await;
    let o = w
        .kinetic(&["run", "work.py:g", "--accelerator", "v5litepod-16"])
        .await;
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("ValueError: host 2 broke"), "{err}");
    assert!(err.contains("reported by host 2 of 4"), "{err}");
    let sets = w.cluster().objects("statefulsets.apps", "default");
    assert!(
        !sets.is_empty(),
        "the leader and worker StatefulSets were made"
    );
    for set in &sets {
        assert_eq!(
            set["spec"]["template"]["spec"]["restartPolicy"], "Always",
            "{set}"
        );
        assert!(
            set["spec"]["template"]["spec"]
                .get("activeDeadlineSeconds")
                .is_none()
        );
    }
    let events = w.cluster().objects("events", "default");
    let recreated: Vec<&Value> = events
        .iter()
        .filter(|e| {
            matches!(
                e["reason"].as_str(),
                Some("RecreateGroupOnPodRestart" | "RecreateGroup" | "FailedCreate")
            )
        })
        .collect();
    assert!(recreated.is_empty(), "{recreated:?}");
    // No host ran g twice (nothing restarted it). Host 2 ran it; another
    // host may not have reached g before the slice was failed and scaled
    // down, as on a real cluster where a slow host is stopped with it.
    for rank in 0..4 {
        let path = w.sandbox().path(&format!("hosts/g-runs-{rank}"));
        match std::fs::read_to_string(&path) {
            Ok(runs) => assert_eq!(runs, "run\n", "host {rank} ran g once"),
            Err(e) if rank == 2 => panic!("host 2 never ran g ({}): {e}", path.display()),
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{}", path.display()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn map_runs_each_input_on_its_own_slice() {
    let w = slice().await;
    let inputs = w.sandbox().write("home/project/in.jsonl", "1\n2\n3\n");
    let o = w
        .kinetic(&[
            "map",
            "work:square",
            "--inputs",
            inputs.to_str().unwrap(),
            "--accelerator",
            "v5litepod-16",
            "--max-concurrent",
            "1",
            "--poll-interval",
            "0.05",
        ])
        .await;
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    let values: Vec<&str> = std::str::from_utf8(&o.stdout).unwrap().lines().collect();
    assert_eq!(values, ["1", "4", "9"], "{err}");
    assert_eq!(w.cluster().calls().count("create", LWS), 3);
}
