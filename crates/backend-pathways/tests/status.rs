//! LeaderWorkerSet + pods → state: every rule, from JSON objects as the
//! API server returns them.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Event, Pod};
use kinetic_backend_pathways::lws::LeaderWorkerSet;
use kinetic_backend_pathways::status::{leader_end, lws_state, slice_end, worker_index};
use kinetic_core::status::{JobState, JobStatus, StatusReason};
use serde_json::{Value, json};

const CREATED: &str = "2026-03-25T10:00:00Z";
const NAME: &str = "keras-pathways-job-1";

fn at(secs: u64) -> SystemTime {
    humantime::parse_rfc3339(CREATED).unwrap() + Duration::from_secs(secs)
}

fn lws(annotations: Value) -> LeaderWorkerSet {
    serde_json::from_value(json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": NAME, "namespace": "ns", "uid": "u1",
                     "creationTimestamp": CREATED, "annotations": annotations},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 4, "workerTemplate": {}}}
    }))
    .unwrap()
}

fn deadline() -> LeaderWorkerSet {
    lws(json!({"kinetic.dev/pending-deadline-seconds": "60"}))
}

fn pod(index: u32, status: Value) -> Pod {
    let name = if index == 0 {
        format!("{NAME}-0")
    } else {
        format!("{NAME}-0-{index}")
    };
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": CREATED,
                     "labels": {"job-name": NAME,
                                "leaderworkerset.sigs.k8s.io/worker-index": index.to_string()}},
        "spec": {"containers": [{"name": "kinetic-worker"}],
                 "nodeSelector": {"cloud.google.com/gke-tpu-topology": "4x4"}},
        "status": status
    }))
    .unwrap()
}

fn running() -> Value {
    json!({"phase": "Running"})
}

fn state(lws: &LeaderWorkerSet, pods: &[Pod]) -> JobState {
    lws_state(lws, pods, &[], at(10))
}

#[test]
fn the_worker_index_comes_from_the_label_or_the_name() {
    assert_eq!(worker_index(&pod(3, running()), NAME), Some(3));
    let mut p = pod(2, running());
    p.metadata.labels = None;
    assert_eq!(worker_index(&p, NAME), Some(2));
    p.metadata.name = Some(format!("{NAME}-0"));
    assert_eq!(worker_index(&p, NAME), Some(0));
    p.metadata.name = Some("other-0".into());
    assert_eq!(worker_index(&p, NAME), None);
}

#[test]
fn the_leader_succeeding_is_the_job_succeeding() {
    let l = deadline();
    let mut pods: Vec<Pod> = (1..4).map(|i| pod(i, running())).collect();
    pods.push(pod(0, json!({"phase": "Succeeded"})));
    assert_eq!(state(&l, &pods).status, JobStatus::Succeeded);
    pods[3] = pod(0, running());
    assert_eq!(state(&l, &pods).status, JobStatus::Running);
}

#[test]
fn one_failed_host_fails_the_slice_reporting_the_lowest_index() {
    let l = deadline();
    let exit = |code: i32| {
        json!({"phase": "Failed", "containerStatuses": [{"name": "kinetic-worker", "image": "i",
            "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": code}}}]})
    };
    let pods = [
        pod(0, json!({"phase": "Succeeded"})),
        pod(3, exit(7)),
        pod(2, exit(1)),
        pod(1, running()),
    ];
    assert_eq!(
        state(&l, &pods),
        JobState::new(JobStatus::Failed).with_reason(lost(
            2,
            "failed: exit code 1; its StatefulSet deletes the pod and makes it again"
        ))
    );
}

/// The reason naming host `host` of the slice [`NAME`].
fn lost(host: u32, cause: &str) -> StatusReason {
    StatusReason::HostLost {
        host,
        pod: if host == 0 {
            format!("{NAME}-0")
        } else {
            format!("{NAME}-0-{host}")
        },
        cause: cause.to_owned(),
    }
}

#[test]
fn a_preempted_host_fails_the_whole_slice_as_preempted() {
    let l = deadline();
    let preempted = json!({"phase": "Running", "conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet",
         "message": "Pod was terminated in response to imminent node shutdown."}]});
    let pods = [
        pod(0, running()),
        pod(1, running()),
        pod(2, preempted),
        pod(3, running()),
    ];
    assert_eq!(
        state(&l, &pods),
        JobState::new(JobStatus::Failed).with_reason(StatusReason::Preempted)
    );
}

#[test]
fn a_pending_host_holds_the_slice_and_fails_it_after_the_pending_deadline() {
    let l = deadline();
    let unschedulable = json!({"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."}]});
    let pods = [
        pod(0, running()),
        pod(1, running()),
        pod(2, unschedulable),
        pod(3, running()),
    ];
    let s = state(&l, &pods);
    assert_eq!(s.status, JobStatus::Pending);
    assert!(
        matches!(&s.reason, Some(StatusReason::Unschedulable { message }) if message.contains("kinetic pool add")),
        "{s:?}"
    );
    let late = lws_state(&l, &pods, &[], at(120));
    assert!(
        matches!(
            late.reason,
            Some(StatusReason::PendingDeadlineExceeded { .. })
        ),
        "{late:?}"
    );
    assert_eq!(late.status, JobStatus::Failed);
}

#[test]
fn a_refused_pod_is_told_by_the_leader_statefulsets_events() {
    let l = deadline();
    let event: Event = serde_json::from_value(json!({
        "metadata": {"name": "e1", "namespace": "ns"},
        "involvedObject": {"kind": "StatefulSet", "name": NAME, "namespace": "ns"},
        "reason": "FailedCreate", "type": "Warning", "lastTimestamp": CREATED,
        "message": "create Pod keras-pathways-job-1-0 in StatefulSet keras-pathways-job-1 failed error: pods \"keras-pathways-job-1-0\" is forbidden: exceeded quota"
    }))
    .unwrap();
    let s = lws_state(&l, &[], std::slice::from_ref(&event), at(10));
    assert!(
        matches!(&s.reason, Some(StatusReason::PodCreationFailed { message }) if message.contains("exceeded quota")),
        "{s:?}"
    );
    assert_eq!(state(&l, &[]), JobState::new(JobStatus::Pending));
    let late = lws_state(&l, &[], &[event], at(120));
    assert_eq!(late.status, JobStatus::Failed);
}

#[test]
fn a_final_state_written_by_the_backend_wins() {
    let cancelled = JobState::new(JobStatus::Failed).with_reason(StatusReason::Cancelled);
    let l = lws(json!({"kinetic.dev/final-state": serde_json::to_string(&cancelled).unwrap()}));
    assert_eq!(state(&l, &[pod(0, running())]), cancelled);
}

#[test]
fn the_leaders_log_tells_its_end() {
    assert_eq!(leader_end("line\n"), None);
    assert_eq!(
        leader_end("x\n[kinetic] leader ended: exit code 0\n"),
        Some(JobState::new(JobStatus::Succeeded))
    );
    assert_eq!(
        leader_end("[kinetic] leader ended: exit code 3\n"),
        Some(JobState::new(JobStatus::Failed).with_reason(StatusReason::ExitCode { code: 3 }))
    );
    assert_eq!(leader_end("[kinetic] leader ended: exit code x\n"), None);
}

#[test]
fn a_slice_ends_when_the_leader_and_every_worker_did() {
    let leader_ok = "[kinetic] leader ended: exit code 0\n".to_owned();
    let done =
        |i: u32| format!("[kinetic] host {i} finished; waiting for the leader to end the slice\n");
    let ok = Some(JobState::new(JobStatus::Succeeded));
    assert_eq!(slice_end(std::slice::from_ref(&leader_ok), 4), ok);
    assert_eq!(
        slice_end(&[leader_ok.clone(), done(1), done(2), done(3)], 4),
        ok
    );
    assert_eq!(
        slice_end(&[leader_ok.clone(), done(1), "busy\n".into(), done(3)], 4),
        None
    );
    assert_eq!(
        slice_end(&[leader_ok.clone(), done(1), done(3)], 4),
        None,
        "a host missing"
    );
    let failed = "[kinetic] leader ended: exit code 1\n".to_owned();
    assert_eq!(
        slice_end(&[failed, "busy\n".into()], 2),
        Some(JobState::new(JobStatus::Failed).with_reason(StatusReason::ExitCode { code: 1 }))
    );
    assert_eq!(slice_end(&["running\n".to_owned()], 4), None);
}

#[test]
fn a_failed_worker_held_by_the_wrapper_fails_the_slice_first_in_host_order() {
    let leader_ok = "[kinetic] leader ended: exit code 0\n".to_owned();
    let busy = "training\n".to_owned();
    let failed = |i: u32, c: i32| format!("out\n[kinetic] host {i} failed: exit code {c}\n");
    let code =
        |code| Some(JobState::new(JobStatus::Failed).with_reason(StatusReason::ExitCode { code }));
    // The leader still running: a worker's failure ends the slice at once.
    assert_eq!(
        slice_end(&[busy.clone(), busy.clone(), failed(2, 7), failed(3, 9)], 4),
        code(7)
    );
    assert_eq!(
        slice_end(
            &[leader_ok.clone(), failed(1, 2), busy.clone(), busy.clone()],
            4
        ),
        code(2)
    );
    // The leader failing is host 0: first in order.
    let leader_failed = "[kinetic] leader ended: exit code 5\n".to_owned();
    assert_eq!(slice_end(&[leader_failed, failed(1, 2)], 2), code(5));
    assert_eq!(
        slice_end(
            &[
                busy.clone(),
                "[kinetic] host 1 failed: exit code x\n".into()
            ],
            2
        ),
        None
    );
}

#[test]
fn a_container_restarted_outside_the_wrapper_fails_the_job_with_its_reason() {
    let l = deadline();
    let restarted = |reason: &str, code: i32| {
        json!({"phase": "Running", "containerStatuses": [{
            "name": "kinetic-worker", "image": "i", "imageID": "", "ready": true,
            "restartCount": 1, "state": {"running": {"startedAt": CREATED}},
            "lastState": {"terminated": {"exitCode": code, "reason": reason}}}]})
    };
    let mut pods: Vec<Pod> = (0..4).map(|i| pod(i, running())).collect();
    pods[2] = pod(2, restarted("OOMKilled", 137));
    let then = "its container restarted, so the LeaderWorkerSet controller recreates the slice";
    assert_eq!(
        state(&l, &pods),
        JobState::new(JobStatus::Failed).with_reason(lost(
            2,
            &format!("failed: exit code 137 (OOMKilled); {then}")
        ))
    );
    pods[2] = pod(2, restarted("Error", 143));
    assert_eq!(
        state(&l, &pods),
        JobState::new(JobStatus::Failed)
            .with_reason(lost(2, &format!("failed: exit code 143; {then}")))
    );
    assert_eq!(
        state(&l, &pods).to_string(),
        format!("FAILED (worker 2 (pod {NAME}-0-2) failed: exit code 143; {then})")
    );
}

fn event(kind: &str, name: &str, reason: &str, message: &str) -> Event {
    serde_json::from_value(json!({
        "metadata": {"name": format!("e-{reason}"), "namespace": "ns"},
        "involvedObject": {"kind": kind, "name": name, "namespace": "ns"},
        "reason": reason, "type": "Normal", "lastTimestamp": "2026-03-25T10:00:05Z",
        "message": message
    }))
    .unwrap()
}

/// Missed between polls: the LeaderWorkerSet controller recreated the
/// group, told under v0.5.1's name and v0.9's; the new pods run.
#[test]
fn a_group_recreated_between_polls_is_told_by_either_event_name() {
    let l = deadline();
    let fresh: Vec<Pod> = (0..4).map(|i| pod(i, running())).collect();
    for name in ["RecreateGroupOnPodRestart", "RecreateGroup"] {
        let e = event(
            "LeaderWorkerSet",
            NAME,
            name,
            &format!(
                "Worker pod {NAME}-0-2 failed, deleted leader pod {NAME}-0 to recreate group 0"
            ),
        );
        assert_eq!(
            lws_state(&l, &fresh, &[e], at(10)),
            JobState::new(JobStatus::Failed).with_reason(lost(
                2,
                &format!("failed; the LeaderWorkerSet controller recreated the slice ({name})")
            )),
        );
    }
    // Another set's event says nothing of this one.
    let other = event(
        "LeaderWorkerSet",
        "other",
        "RecreateGroupOnPodRestart",
        "Worker pod other-0-2 failed, deleted leader pod other-0 to recreate group 0",
    );
    assert_eq!(
        lws_state(&l, &fresh, &[other], at(10)).status,
        JobStatus::Running
    );
}

/// Kubernetes 1.32's StatefulSet controller deletes a failed pod and makes
/// it again telling only `SuccessfulDelete`: a pod of the slice deleted
/// while the job runs is a host lost; what a poll saw of it is the cause.
#[test]
fn a_silent_statefulset_delete_is_a_lost_host() {
    let seen = json!({format!("{NAME}-0-3"): {"uid": "old", "ended": "evicted: low on memory"}});
    let l = lws(json!({"kinetic.dev/hosts": seen.to_string()}));
    let mut fresh: Vec<Pod> = (0..4).map(|i| pod(i, running())).collect();
    fresh[3] = pod(3, json!({"phase": "Pending"}));
    fresh[3].metadata.uid = Some("new".to_owned());
    assert_eq!(
        state(&l, &fresh).status,
        JobStatus::Failed,
        "the new UID tells it"
    );
    let e = event(
        "StatefulSet",
        &format!("{NAME}-0"),
        "SuccessfulDelete",
        &format!("delete Pod {NAME}-0-3 in StatefulSet {NAME}-0 successful"),
    );
    let plain = lws(json!({}));
    assert_eq!(
        state(&plain, &fresh).status,
        JobStatus::Pending,
        "nothing tells it"
    );
    assert_eq!(
        lws_state(&plain, &fresh, std::slice::from_ref(&e), at(10)),
        JobState::new(JobStatus::Failed).with_reason(lost(
            3,
            "failed; its StatefulSet deleted the pod and made it again"
        ))
    );
    assert_eq!(
        lws_state(&l, &fresh, &[e], at(10)).reason,
        Some(lost(
            3,
            "failed: evicted: low on memory; its StatefulSet deleted the pod and made it again"
        ))
    );
}

/// A pod under another UID than the one recorded was made again: its
/// host was lost, even with no event left.
#[test]
fn a_pod_under_a_new_uid_is_a_lost_host() {
    let with_uid = |i: u32, uid: &str| {
        let mut p = pod(i, running());
        p.metadata.uid = Some(uid.to_owned());
        p
    };
    let first: Vec<Pod> = (0..4).map(|i| with_uid(i, &format!("a{i}"))).collect();
    let seen = kinetic_backend_pathways::hosts::observe(Default::default(), &first);
    let l = lws(json!({"kinetic.dev/hosts": serde_json::to_string(&seen).unwrap()}));
    assert_eq!(
        state(&l, &first).status,
        JobState::new(JobStatus::Running).status
    );
    let mut later = first.clone();
    later[1] = with_uid(1, "b1");
    assert_eq!(
        state(&l, &later).reason,
        Some(lost(
            1,
            "failed; its pod was replaced by another (a new UID)"
        ))
    );
}

/// The controller turns `Available` `False` once a group that was ready
/// is not: the host not ready is the one lost.
#[test]
fn available_turned_false_names_the_host_not_ready() {
    let available_false = json!({"conditions": [
        {"type": "Available", "status": "False", "reason": "AllGroupsReady", "message": "",
         "lastTransitionTime": "2026-03-25T10:00:05Z"},
        {"type": "Progressing", "status": "True", "reason": "GroupsProgressing", "message": "",
         "lastTransitionTime": "2026-03-25T10:00:05Z"}]});
    // A slice admitted from zero replicas (queued for its pool) has
    // `Available` False before its hosts start, as when it lost one: no read
    // saw it whole and ready, so it is only pending.
    let mut admitted = deadline();
    admitted.status = Some(serde_json::from_value(available_false.clone()).unwrap());
    let starting: Vec<Pod> = (0..4)
        .map(|i| pod(i, json!({"phase": "Pending"})))
        .collect();
    assert_eq!(state(&admitted, &starting).status, JobStatus::Pending);
    // A read saw every host running and ready (the record on the set).
    let hosts: serde_json::Map<String, Value> = (0..4)
        .map(|i| {
            let name = if i == 0 {
                format!("{NAME}-0")
            } else {
                format!("{NAME}-0-{i}")
            };
            (name, json!({"uid": format!("u{i}"), "ready": true}))
        })
        .collect();
    let mut l = lws(json!({"kinetic.dev/pending-deadline-seconds": "60",
                           "kinetic.dev/hosts": Value::Object(hosts).to_string()}));
    l.status = Some(
        serde_json::from_value(json!({"conditions": [
            {"type": "Available", "status": "False", "reason": "AllGroupsReady", "message": "",
             "lastTransitionTime": "2026-03-25T10:00:05Z"},
            {"type": "Progressing", "status": "True", "reason": "GroupsProgressing", "message": "",
             "lastTransitionTime": "2026-03-25T10:00:05Z"}]}))
        .unwrap(),
    );
    let ready = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
    let mut pods: Vec<Pod> = (0..4).map(|i| pod(i, ready.clone())).collect();
    assert_eq!(
        state(&l, &pods).status,
        JobStatus::Running,
        "every host ready"
    );
    pods[2] = pod(2, json!({"phase": "Pending"}));
    assert_eq!(
        state(&l, &pods).reason,
        Some(lost(
            2,
            "is not ready; the slice had every host ready, then lost one (the LeaderWorkerSet's Available condition is False)"
        ))
    );
}

#[test]
fn a_slice_running_past_its_run_deadline_fails_as_deadline_exceeded() {
    let l = lws(json!({"kinetic.dev/run-deadline-seconds": "60"}));
    let started = json!({"phase": "Running", "startTime": "2026-03-25T10:00:30Z"});
    let pods: Vec<Pod> = (0..4).map(|i| pod(i, started.clone())).collect();
    assert_eq!(lws_state(&l, &pods, &[], at(80)).status, JobStatus::Running);
    assert_eq!(
        lws_state(&l, &pods, &[], at(91)),
        JobState::new(JobStatus::Failed).with_reason(StatusReason::DeadlineExceeded)
    );
    // Pending hosts have not started the slice's clock.
    let pending: Vec<Pod> = (0..4)
        .map(|i| pod(i, json!({"phase": "Pending"})))
        .collect();
    assert_eq!(
        lws_state(&l, &pending, &[], at(500)).status,
        JobStatus::Pending
    );
}

#[test]
fn a_statefulset_the_api_server_refused_is_a_clear_pending_reason() {
    let l = deadline();
    let event: Event = serde_json::from_value(json!({
        "metadata": {"name": "e3", "namespace": "ns"},
        "involvedObject": {"kind": "LeaderWorkerSet", "name": NAME, "namespace": "ns", "uid": "u1"},
        "reason": "FailedCreate", "type": "Warning", "lastTimestamp": CREATED,
        "message": format!("Failed to create leader statefulset {NAME}")
    }))
    .unwrap();
    let s = lws_state(&l, &[], std::slice::from_ref(&event), at(10));
    assert_eq!(s.status, JobStatus::Pending);
    assert!(
        matches!(&s.reason, Some(StatusReason::PodCreationFailed { message })
            if message.contains("cannot create the leader StatefulSet")
                && message.contains(&format!("Failed to create leader statefulset {NAME}"))),
        "{s:?}"
    );
    let mut other = event.clone();
    other.involved_object.uid = Some("an-older-set".into());
    assert_eq!(
        lws_state(&l, &[], &[other], at(10)),
        JobState::new(JobStatus::Pending)
    );
    assert_eq!(
        lws_state(&l, &[], &[event], at(120)).status,
        JobStatus::Failed
    );
}

/// Issue 24 point 6: a slice's host the scheduler cannot place says what
/// the cluster autoscaler wrote on it: the TPU pool adding the slice's
/// nodes (which pool, 0 → 4, how long GKE takes for a TPU slice), or no
/// pool for it (the exact `kinetic pool add` line).
#[test]
fn a_pending_host_says_whether_its_pool_is_scaling_up() {
    let l = deadline();
    let mut host = pod(
        0,
        json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable",
            "message": "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."}]}),
    );
    host.spec.as_mut().unwrap().node_selector = Some(
        [
            (
                "cloud.google.com/gke-tpu-accelerator",
                "tpu-v5-lite-podslice",
            ),
            ("cloud.google.com/gke-tpu-topology", "4x4"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    );
    let event = |reason: &str, message: &str| -> Event {
        serde_json::from_value(json!({
            "metadata": {"name": format!("{NAME}-0.{reason}"), "namespace": "ns"},
            "involvedObject": {"kind": "Pod", "name": format!("{NAME}-0"), "namespace": "ns"},
            "reason": reason, "message": message, "type": "Normal",
            "source": {"component": "cluster-autoscaler"},
            "firstTimestamp": CREATED, "lastTimestamp": CREATED, "count": 1,
        }))
        .unwrap()
    };
    let reason = |events: &[Event]| {
        let s = lws_state(&l, std::slice::from_ref(&host), events, at(10));
        assert_eq!(s.status, JobStatus::Pending, "{s:?}");
        match s.reason {
            Some(StatusReason::Unschedulable { message }) => message,
            other => panic!("{other:?}"),
        }
    };
    let growing = reason(&[event(
        "TriggeredScaleUp",
        "pod triggered scale-up: [{https://www.googleapis.com/compute/v1/projects/p/zones/z/instanceGroups/gke-fake-tpu-v5litepod-16-0a0b-12345678-grp 0->4 (max: 4)}]",
    )]);
    assert!(
        growing.contains(
            "node pool tpu-v5litepod-16-0a0b is adding 4 nodes (0 → 4, at most 4); GKE takes about 5 to 10 minutes for a TPU slice"
        ),
        "{growing}"
    );
    let refused = reason(&[event(
        "NotTriggerScaleUp",
        "pod didn't trigger scale-up: 1 node(s) didn't match Pod's node affinity/selector",
    )]);
    assert!(
        refused.contains("add one with `kinetic pool add --accelerator v5litepod-16`"),
        "{refused}"
    );
}
