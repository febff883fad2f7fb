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
        JobState::new(JobStatus::Failed).with_reason(StatusReason::ExitCode { code: 1 })
    );
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
