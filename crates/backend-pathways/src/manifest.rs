//! Prepared job → LeaderWorkerSet: one group (`replicas: 1`, or 0 while
//! queued in its node pool, see [`crate::admission`]) of as many
//! pods as the slice has hosts, leader and workers from one pod template
//! (the shared Kubernetes layer's), recreated together when one restarts.
//! Pure; the golden files under `tests/golden/` pin its JSON.

use k8s_openapi::api::core::v1::{EnvVar, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinetic_core::ports::PreparedJob;
use kinetic_kube::pod::{self, ManifestOptions, PodSettings, env_var};
pub use kinetic_kube::pod::{ANNOTATION_RUN_DEADLINE, LABEL_APP, LABEL_JOB_ID, LABEL_JOB_NAME};

use crate::admission::{ENV_SLICE_POOL, LABEL_SLICE_POOL, pool_of};
use crate::lws::{
    self, ENV_LEADER_ADDRESS, ENV_WORKER_INDEX, LeaderWorkerSet, LeaderWorkerSetSpec,
    LeaderWorkerTemplate, RECREATE_GROUP_ON_POD_RESTART,
};
use crate::release::{ENV_SLICE_NAME, end_program};

/// Value of the `app` label on Pathways jobs.
pub const APP_PATHWAYS: &str = "kinetic-pathways";

/// The variables every host gets besides the container's own: JAX's
/// multi-slice coordinator is the group's leader
/// (`MEGASCALE_COORDINATOR_ADDRESS=$(LWS_LEADER_ADDRESS)`), the job is one
/// slice (`MEGASCALE_NUM_SLICES=1`), and the TPU runtime's host index is
/// the pod's worker index (`TPU_WORKER_ID=$(LWS_WORKER_INDEX)`). The
/// `$(…)` references are expanded by the kubelet from the variables the
/// LeaderWorkerSet controller puts first in the container.
pub fn slice_env() -> Vec<EnvVar> {
    vec![
        env_var(
            "MEGASCALE_COORDINATOR_ADDRESS",
            &format!("$({ENV_LEADER_ADDRESS})"),
        ),
        env_var("MEGASCALE_NUM_SLICES", "1"),
        env_var("TPU_WORKER_ID", &format!("$({ENV_WORKER_INDEX})")),
    ]
}

/// The line the leader's host prints when its command ended, before the
/// exit code: `[kinetic] leader ended: exit code 0`.
pub const LEADER_ENDED: &str = "[kinetic] leader ended: exit code ";

/// The start of the line a worker prints when its command ended:
/// `[kinetic] host 2 finished; …` or `[kinetic] host 2 failed: exit code 1`.
pub const WORKER_ENDED: &str = "[kinetic] host ";

/// What follows a worker's index in [`WORKER_ENDED`] when its command
/// failed, before the exit code.
pub const WORKER_FAILED: &str = " failed: exit code ";

/// The shell script that runs a host's command, then keeps its container
/// running whatever the command did: the pods restart `Always` (the only
/// policy a StatefulSet allows), and a container that exits is restarted,
/// which the LeaderWorkerSet answers by recreating the whole group — the
/// job run again. So every host, once its command ended, prints a line
/// the backend reads in its log: the leader [`LEADER_ENDED`] and its exit
/// code, a worker that succeeded `[kinetic] host N finished; …`, a worker
/// that failed `[kinetic] host N failed: exit code C`; then it reports
/// its end on its LeaderWorkerSet (the program of
/// [`crate::release::end_program`], its first argument, run with the
/// mount root the runner's `--mount-root` names, `/` by default), which
/// ends the slice once its function ended, and holds. A client that polls
/// ends the group the same way when the hosts could not (and keeps the
/// leader's log).
///
/// The shell is the container's PID 1, to which the kernel delivers no
/// signal it has no handler for: holding in `exec sleep`, a host ignored
/// the SIGTERM of its pod's deletion and held its whole grace period. It
/// reports and holds in a `wait` under a SIGTERM trap instead, and exits
/// at once once its report is done: the host that ends the slice has its
/// own pod deleted by that end, and still admits the pool's next slice
/// (within the grace period; killed at once, it left a detached map's
/// next slices queued with nobody to admit them). While the command runs,
/// the shell runs it in the background under a trap (set once the
/// command's pid is known: set before it, a SIGTERM in between handed
/// nothing on and then waited for the command for ever) that hands
/// SIGTERM on and waits for it: the command's own
/// handling decides (the runner ends at once; a function that ignores
/// SIGTERM holds the grace period, as on a gke pod), where before the
/// signal was dropped.
pub const HOLD_WORKERS: &str = r#"end=$1; shift; "$@" & c=$!; trap 'kill -TERM $c 2>/dev/null; wait $c; exit 143' TERM; wait $c; code=$?; trap - TERM; i="${LWS_WORKER_INDEX:-0}"; if [ "$i" = 0 ]; then echo "[kinetic] leader ended: exit code $code" >&2; elif [ "$code" -eq 0 ]; then echo "[kinetic] host $i finished; waiting for the leader to end the slice" >&2; else echo "[kinetic] host $i failed: exit code $code" >&2; fi; root=/; prev=; for a in "$@"; do if [ "$prev" = --mount-root ]; then root=$a; fi; prev=$a; done; python3 -c "$end" "$root" "$code" "$i" & e=$!; trap 'wait $e 2>/dev/null; kill $! 2>/dev/null; exit 0' TERM; wait $e; sleep 2147483647 & wait"#;

/// `command` run under [`HOLD_WORKERS`], which reports the host's end
/// with `end_program`.
pub fn hold_workers(command: Vec<String>, end_program: &str) -> Vec<String> {
    let mut out = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        HOLD_WORKERS.to_owned(),
        "kinetic-host".to_owned(),
        end_program.to_owned(),
    ];
    out.extend(command);
    out
}

/// The pod template of a host: the shared layer's, with `extra_env` after
/// the container's own, its command under [`HOLD_WORKERS`].
fn host_template(
    job: &PreparedJob,
    options: &ManifestOptions,
    api_version: &str,
    extra_env: Vec<EnvVar>,
) -> PodTemplateSpec {
    let mut extra_env = extra_env;
    extra_env.push(env_var(ENV_SLICE_NAME, &job.record.k8s_name));
    let settings = PodSettings::always_restarting().with_env(extra_env);
    let mut template = pod::pod_template(job, options, APP_PATHWAYS, settings);
    if let Some(c) = template
        .spec
        .as_mut()
        .and_then(|s| s.containers.first_mut())
    {
        c.command = c
            .command
            .take()
            .map(|command| hold_workers(command, &end_program(api_version)));
    }
    template
}

/// The workers' pod template of a debug job, as Kinetic's: no debugger
/// (no `KINETIC_DEBUG`, breakpoint hook, debug port or address), and
/// `KINETIC_DEBUG_WAIT_LEADER=1` with the leader's wait for a client, so
/// that each worker's runner waits before its call until the leader's
/// debugger has a client (the leader writes `{job_id}/.leader_ready`):
/// the user sets breakpoints before any host runs the function.
fn debug_worker_template(
    job: &PreparedJob,
    options: &ManifestOptions,
    api_version: &str,
) -> PodTemplateSpec {
    let mut plain = job.clone();
    plain.record.debug = false;
    let mut env = slice_env();
    env.extend(
        kinetic_core::debug::worker_pod_env(kinetic_core::debug::DEFAULT_WAIT_TIMEOUT)
            .into_iter()
            .map(|(name, value)| env_var(name, &value)),
    );
    host_template(&plain, options, api_version, env)
}

/// The LeaderWorkerSet of a prepared job, at API version `api_version`
/// (`leaderworkerset.x-k8s.io/v1`): labels `app: kinetic-pathways` and
/// `job-id` (and the batch's), the spec URI, pending deadline and run
/// deadline as annotations, `replicas: 1` (0 for a multi-host TPU slice,
/// created queued in its pool: label `kinetic.dev/slice-pool`, variable
/// `KINETIC_SLICE_POOL`), `size` = the accelerator's hosts,
/// `restartPolicy: RecreateGroupOnPodRestart`, and one pod template for
/// leader and workers (a debug job's workers get their own, without the
/// debugger, waiting for the leader's).
///
/// The pods keep the default `restartPolicy` (`Always`) and have no
/// `activeDeadlineSeconds`: the StatefulSets the LeaderWorkerSet controller
/// makes from the template allow nothing else. So each host's command runs
/// under [`HOLD_WORKERS`], which tells its end in the log instead of
/// exiting, and the run deadline is an annotation
/// ([`ANNOTATION_RUN_DEADLINE`]) the backend enforces.
pub fn lws_manifest(
    job: &PreparedJob,
    options: &ManifestOptions,
    api_version: &str,
) -> LeaderWorkerSet {
    let r = &job.record;
    let hosts = job.accelerator.num_hosts().max(1);
    let size = i32::try_from(hosts).unwrap_or(i32::MAX);
    let pool = {
        let plain = host_template(job, options, api_version, Vec::new());
        plain
            .spec
            .and_then(|s| s.node_selector)
            .and_then(|selector| pool_of(&selector, hosts))
    };
    let mut env = slice_env();
    if let Some(pool) = &pool {
        env.push(env_var(ENV_SLICE_POOL, pool));
    }
    let leader_template = host_template(job, options, api_version, env);
    let worker_template = if job.record.debug {
        let mut template = debug_worker_template(job, options, api_version);
        if let (Some(pool), Some(c)) = (
            &pool,
            template
                .spec
                .as_mut()
                .and_then(|s| s.containers.first_mut()),
        ) {
            c.env
                .get_or_insert_with(Vec::new)
                .push(env_var(ENV_SLICE_POOL, pool));
        }
        template
    } else {
        leader_template.clone()
    };
    let mut annotations = pod::annotations(job, options);
    if let Some(run) = job.deadlines.run {
        annotations.insert(
            ANNOTATION_RUN_DEADLINE.to_owned(),
            run.as_secs().max(1).to_string(),
        );
    }
    LeaderWorkerSet {
        api_version: api_version.to_owned(),
        kind: lws::KIND.to_owned(),
        metadata: ObjectMeta {
            name: Some(r.k8s_name.clone()),
            namespace: Some(r.namespace.clone()),
            labels: Some({
                let mut labels = pod::labels(job, APP_PATHWAYS);
                if let Some(pool) = &pool {
                    labels.insert(LABEL_SLICE_POOL.to_owned(), pool.clone());
                }
                labels
            }),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: LeaderWorkerSetSpec {
            // A slice of a pool is created queued: admission gives it its
            // group (see `crate::admission`).
            replicas: Some(if pool.is_some() { 0 } else { 1 }),
            leader_worker_template: LeaderWorkerTemplate {
                leader_template: Some(leader_template),
                worker_template,
                size: Some(size),
                restart_policy: Some(RECREATE_GROUP_ON_POD_RESTART.to_owned()),
            },
            startup_policy: None,
        },
        status: None,
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::time::Duration;

    use super::HOLD_WORKERS;

    /// The signals `pid` catches (`SigCgt` in its `/proc` status).
    fn caught(pid: u32) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
            .unwrap_or(0)
    }

    /// Wait until `pid` catches SIGTERM (`false` after five seconds).
    fn catches_sigterm(pid: u32) -> bool {
        const SIGTERM_BIT: u64 = 1 << (15 - 1);
        (0..500).any(|_| {
            let yes = caught(pid) & SIGTERM_BIT != 0;
            if !yes {
                std::thread::sleep(Duration::from_millis(10));
            }
            yes
        })
    }

    /// Send `child` SIGTERM once it catches it, and wait for its end;
    /// fail (killing it) when it never catches it, as PID 1 it would
    /// ignore the signal. `what` names the host's phase.
    fn sigterm_once_caught(mut child: std::process::Child, what: &str) -> std::process::ExitStatus {
        let pid = child.id();
        if !catches_sigterm(pid) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the {what} host does not catch SIGTERM: as PID 1 it would ignore it");
        }
        let term = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(term.success());
        child.wait().unwrap()
    }

    /// While the host's command runs the wrapper, its container's PID 1,
    /// catches SIGTERM too and hands it to the command: a command that ends
    /// on SIGTERM (the runner does) ends the pod at once, instead of the
    /// signal being dropped and the pod holding its grace period.
    #[test]
    fn a_running_host_hands_sigterm_to_its_command() {
        let mut child = Command::new("sh")
            .args([
                "-c",
                HOLD_WORKERS,
                "kinetic-host",
                "pass",
                "sh",
                "-c",
                "trap 'echo command got TERM >&2; exit 143' TERM; echo started >&2; \
                 while :; do sleep 0.05; done",
            ])
            .env("LWS_WORKER_INDEX", "1")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        assert!(line.contains("started"), "{line}");
        let status = sigterm_once_caught(child, "running");
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
        assert!(rest.contains("command got TERM"), "{rest}");
        assert_eq!(status.code(), Some(143), "{status:?}");
    }

    /// As a container's PID 1 the wrapper gets its pod's SIGTERM only if it
    /// catches it: once holding, it does, and exits on it.
    #[test]
    fn a_holding_host_catches_sigterm_and_exits_on_it() {
        let mut child = Command::new("sh")
            .args(["-c", HOLD_WORKERS, "kinetic-host", "pass", "true"])
            .env("LWS_WORKER_INDEX", "1")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stderr.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.contains("host 1 finished"), "{line}");
        // The shell goes on to hold; give it a few scheduler turns.
        let status = sigterm_once_caught(child, "holding");
        assert_eq!(status.code(), Some(0), "{status:?}");
    }
}
