//! Debug jobs through the real binary on a multi-host TPU slice of the
//! fake cluster (LeaderWorkerSet installed, four `v5litepod-16` hosts):
//! the pathways backend runs debugpy on the leader (host 0), `kinetic jobs
//! debug` forwards a local port through the API server's
//! `pods/portforward` to the leader's pod, a DAP client attaches and
//! continues, and the leader's value comes back. The other hosts wait for
//! the leader's debugger to have a client before they run the function.
//!
//! The jobs' fixed image is a stand-in named explicitly to the cluster:
//! the interpreter of the venv `scripts/test.sh` builds
//! (`target/python-venv`, which has debugpy from PyPI).

mod dap;
mod sandbox;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sandbox::world::World;
use sandbox::{stderr, stdout, wait_within};
use serde_json::Value;

const LWS: &str = "leaderworkersets.leaderworkerset.x-k8s.io";

/// `square` records, on each host, when it ran (`{stamps}/ran-{rank}`),
/// then squares.
fn work_py(stamps: &Path) -> String {
    format!(
        r#"
import os, time

STAMPS = {stamps:?}


def square(x):
    rank = os.environ["KINETIC_NODE_RANK"]
    with open(os.path.join(STAMPS, "ran-%s" % rank), "w") as out:
        out.write(repr(time.time()))
    y = x * x
    return y
"#,
        stamps = stamps.display().to_string()
    )
}

/// When each host ran the function (seconds since the epoch), by rank.
fn ran(stamps: &Path) -> Vec<(u32, f64)> {
    (0..4)
        .filter_map(|rank| {
            let text = std::fs::read_to_string(stamps.join(format!("ran-{rank}"))).ok()?;
            Some((rank, text.trim().parse().unwrap()))
        })
        .collect()
}

fn env_value(container: &Value, name: &str) -> Option<String> {
    container["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_str().map(str::to_owned))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debugger_attaches_to_the_leader_of_a_slice_and_the_workers_wait_for_it() {
    let stamps_dir = tempfile::tempdir().unwrap();
    let stamps = stamps_dir.path().canonicalize().unwrap();
    let w = World::gke(&work_py(&stamps))
        .pathways()
        .python(dap::venv_bin().join("python3"))
        .start()
        .await;
    let o = w
        .kinetic(&[
            "run",
            "--detach",
            "--debug",
            "work:square",
            "--arg",
            "7",
            "--accelerator",
            "v5litepod-16",
            "-v",
        ])
        .await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("backend: pathways"), "{}", stderr(&o));
    let job = stdout(&o).trim().to_owned();

    let mut debug = w
        .sandbox()
        .command(&["jobs", "debug", &job, "--port", "0"], &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = debug.stdout.take().unwrap();
    let launch =
        tokio::task::spawn_blocking(move || std::panic::catch_unwind(|| dap::read_launch(out)))
            .await
            .unwrap();
    let Ok(launch) = launch else {
        let o = wait_within(debug, sandbox::COMMAND_LIMIT);
        let logs = w.kinetic(&["jobs", "logs", &job]).await;
        panic!(
            "`kinetic jobs debug` printed no launch configuration: {}\nthe job's logs: {}{}",
            stderr(&o),
            stdout(&logs),
            stderr(&logs)
        );
    };
    let config = &launch["configurations"][0];
    assert_eq!(config["type"], "debugpy", "{launch}");
    let port = u16::try_from(config["connect"]["port"].as_u64().unwrap()).unwrap();

    // The leader listens and waits for a client; the workers, which reach
    // the function as soon as the leader would, wait for it too.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        ran(&stamps),
        [],
        "a host ran the function before the debugger attached"
    );
    let attached = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let stopped = tokio::task::spawn_blocking(move || {
        dap::attach_and_continue(("127.0.0.1", port), Duration::from_secs(60))
    })
    .await
    .unwrap();
    assert!(stopped.is_some(), "the leader stopped before the call");
    let o = tokio::task::spawn_blocking(move || wait_within(debug, sandbox::COMMAND_LIMIT))
        .await
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("ended (SUCCEEDED)"), "{}", stderr(&o));

    let o = w.kinetic(&["jobs", "result", &job]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "49");
    let runs = ran(&stamps);
    assert_eq!(
        runs.iter().map(|(rank, _)| *rank).collect::<Vec<_>>(),
        [0, 1, 2, 3],
        "every host ran the function once released"
    );
    for (rank, at) in runs {
        assert!(
            at >= attached,
            "host {rank} ran the function at {at}, before the debugger attached at {attached}"
        );
    }

    // Kept, with the debugger on the leader and the workers told to wait.
    let name = format!("keras-pathways-{job}");
    let set = w
        .cluster()
        .object(LWS, "default", &name)
        .unwrap_or_else(|| panic!("the debug slice {name} was cleaned up"));
    let template = &set["spec"]["leaderWorkerTemplate"];
    let leader = &template["leaderTemplate"]["spec"]["containers"][0];
    let worker = &template["workerTemplate"]["spec"]["containers"][0];
    assert_eq!(leader["ports"][0]["name"], "debugpy", "{leader}");
    assert_eq!(env_value(leader, "KINETIC_DEBUG").as_deref(), Some("1"));
    assert_eq!(
        env_value(worker, "KINETIC_DEBUG_WAIT_LEADER").as_deref(),
        Some("1")
    );
    assert_eq!(env_value(worker, "KINETIC_DEBUG"), None);
    let logs = w.kinetic(&["jobs", "logs", &job]).await;
    assert!(
        stdout(&logs).contains("debugger attached"),
        "{}",
        stdout(&logs)
    );
}
