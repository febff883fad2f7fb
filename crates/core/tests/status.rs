//! Job status strings and typed reasons.

use std::time::Duration;

use kinetic_core::status::{JobState, JobStatus, StatusReason};
use serde_json::json;

#[test]
fn wire_strings_are_kinetics() {
    let cases = [
        (JobStatus::Pending, "PENDING", false),
        (JobStatus::Running, "RUNNING", false),
        (JobStatus::Succeeded, "SUCCEEDED", true),
        (JobStatus::Failed, "FAILED", true),
        (JobStatus::NotFound, "NOT_FOUND", true),
    ];
    for (status, text, terminal) in cases {
        assert_eq!(status.as_str(), text);
        assert_eq!(status.to_string(), text);
        assert_eq!(serde_json::to_value(status).expect("json"), json!(text));
        assert_eq!(
            serde_json::from_value::<JobStatus>(json!(text)).expect("de"),
            status
        );
        assert_eq!(text.parse::<JobStatus>(), Ok(status));
        assert_eq!(status.is_terminal(), terminal, "{text}");
    }
    assert_eq!(JobStatus::ALL.len(), cases.len());
}

#[test]
fn other_strings_are_refused() {
    for bad in ["pending", "NotFound", "NOT FOUND", "", "CANCELLED"] {
        let err = bad.parse::<JobStatus>().expect_err("must fail");
        let msg = err.to_string();
        assert!(msg.contains(&format!("'{bad}'")), "{msg}");
        assert!(msg.contains("NOT_FOUND"), "{msg}");
        assert!(serde_json::from_value::<JobStatus>(json!(bad)).is_err());
    }
}

fn all_reasons() -> Vec<StatusReason> {
    vec![
        StatusReason::Unschedulable {
            message: "0/3 nodes are available".into(),
        },
        StatusReason::ImagePullError {
            image: "us-docker.pkg.dev/p/kn-c/base:tpu-abc".into(),
            reason: "ImagePullBackOff".into(),
            message: "not found".into(),
        },
        StatusReason::ContainerConfigError {
            reason: "CreateContainerConfigError".into(),
            message: "secret \"kinetic-job-1\" not found".into(),
        },
        StatusReason::PodCreationFailed {
            message: "Error creating: pods \"j-\" is forbidden: exceeded quota: q".into(),
        },
        StatusReason::OomKilled,
        StatusReason::Preempted,
        StatusReason::Evicted {
            message: "node pressure".into(),
        },
        StatusReason::DeadlineExceeded,
        StatusReason::PendingDeadlineExceeded {
            waited: Duration::from_secs(630),
            cause: Some(Box::new(StatusReason::WaitingForResources)),
        },
        StatusReason::PendingDeadlineExceeded {
            waited: Duration::from_millis(1500),
            cause: None,
        },
        StatusReason::ContainerCreating,
        StatusReason::WaitingForResources,
        StatusReason::WaitingForGpus {
            wanted: 1,
            total: 2,
            held: 2,
            held_by: vec!["job-0000aaaa".into(), "job-0000bbbb".into()],
        },
        StatusReason::WaitingForGpus {
            wanted: 2,
            total: 4,
            held: 0,
            held_by: Vec::new(),
        },
        StatusReason::ExitCode { code: 137 },
        StatusReason::Cancelled,
        StatusReason::BackendError {
            message: "connection refused".into(),
        },
        StatusReason::HostLost {
            host: 2,
            pod: "kinetic-x-0-2".into(),
            cause: "failed: exit code 1".into(),
        },
    ]
}

#[test]
fn a_lost_host_is_named_with_its_pod_and_what_happened() {
    let lost = |host| StatusReason::HostLost {
        host,
        pod: format!("kinetic-x-0-{host}"),
        cause: "failed: exit code 1; the slice was recreated".into(),
    };
    assert_eq!(
        lost(2).to_string(),
        "worker 2 (pod kinetic-x-0-2) failed: exit code 1; the slice was recreated"
    );
    assert!(
        lost(0)
            .to_string()
            .starts_with("leader (pod kinetic-x-0-0) failed")
    );
    assert_eq!(
        serde_json::to_value(lost(2)).unwrap(),
        json!({"kind": "host_lost", "host": 2, "pod": "kinetic-x-0-2",
               "cause": "failed: exit code 1; the slice was recreated"})
    );
    assert!(!lost(2).is_blocking());
}

#[test]
fn reasons_round_trip_through_json() {
    for reason in all_reasons() {
        let v = serde_json::to_value(&reason).expect("json");
        assert!(v.get("kind").is_some(), "{v}");
        let back: StatusReason = serde_json::from_value(v.clone()).expect("de");
        assert_eq!(back, reason, "{v}");
    }
}

#[test]
fn reason_json_shape() {
    assert_eq!(
        serde_json::to_value(StatusReason::ExitCode { code: 1 }).expect("json"),
        json!({"kind": "exit_code", "code": 1})
    );
    assert_eq!(
        serde_json::to_value(StatusReason::OomKilled).expect("json"),
        json!({"kind": "oom_killed"})
    );
    assert_eq!(
        serde_json::to_value(StatusReason::PendingDeadlineExceeded {
            waited: Duration::from_secs(630),
            cause: Some(Box::new(StatusReason::Unschedulable {
                message: "m".into()
            })),
        })
        .expect("json"),
        json!({
            "kind": "pending_deadline_exceeded",
            "waited": "10m 30s",
            "cause": {"kind": "unschedulable", "message": "m"}
        })
    );
    let bad = json!({"kind": "pending_deadline_exceeded", "waited": "soon"});
    let err = serde_json::from_value::<StatusReason>(bad).expect_err("must fail");
    assert!(err.to_string().contains("'soon'"), "{err}");
}

#[test]
fn a_job_waiting_for_gpus_says_how_many_and_who_holds_them() {
    let reason = StatusReason::WaitingForGpus {
        wanted: 1,
        total: 2,
        held: 2,
        held_by: vec!["job-0000aaaa".into(), "job-0000bbbb".into()],
    };
    assert_eq!(
        reason.to_string(),
        "waiting for 1 GPU of 2 (2 held by job-0000aaaa, job-0000bbbb)"
    );
    assert_eq!(
        serde_json::to_value(&reason).expect("json"),
        json!({"kind": "waiting_for_gpus", "wanted": 1, "total": 2, "held": 2,
               "held_by": ["job-0000aaaa", "job-0000bbbb"]})
    );
    let behind = StatusReason::WaitingForGpus {
        wanted: 2,
        total: 4,
        held: 0,
        held_by: Vec::new(),
    };
    assert_eq!(
        behind.to_string(),
        "waiting for 2 GPUs of 4 (queued behind other GPU jobs)"
    );
}

#[test]
fn blocking_reasons() {
    for reason in all_reasons() {
        let expected = match &reason {
            StatusReason::Unschedulable { .. }
            | StatusReason::ImagePullError { .. }
            | StatusReason::ContainerConfigError { .. }
            | StatusReason::PodCreationFailed { .. } => true,
            StatusReason::PendingDeadlineExceeded { cause, .. } => {
                cause.as_deref().is_some_and(StatusReason::is_blocking)
            }
            _ => false,
        };
        assert_eq!(reason.is_blocking(), expected, "{reason:?}");
    }
    let wrapped = StatusReason::PendingDeadlineExceeded {
        waited: Duration::from_secs(1),
        cause: Some(Box::new(StatusReason::Unschedulable {
            message: "m".into(),
        })),
    };
    assert!(wrapped.is_blocking());
}

#[test]
fn displays_are_human_and_carry_the_details() {
    let cases = [
        (
            StatusReason::ImagePullError {
                image: "img:1".into(),
                reason: "ErrImagePull".into(),
                message: "manifest unknown".into(),
            },
            &["img:1", "ErrImagePull", "manifest unknown"][..],
        ),
        (
            StatusReason::Unschedulable {
                message: "Insufficient google.com/tpu".into(),
            },
            &["scheduled", "Insufficient google.com/tpu"][..],
        ),
        (StatusReason::ExitCode { code: 3 }, &["3"][..]),
        (StatusReason::OomKilled, &["memory"][..]),
        (
            StatusReason::PendingDeadlineExceeded {
                waited: Duration::from_secs(600),
                cause: Some(Box::new(StatusReason::WaitingForResources)),
            },
            &["10m", "waiting for resources"][..],
        ),
    ];
    for (reason, parts) in cases {
        let text = reason.to_string();
        for part in parts {
            assert!(text.contains(part), "{text:?} lacks {part:?}");
        }
    }
    for reason in all_reasons() {
        assert!(!reason.to_string().is_empty());
        assert!(!reason.to_string().contains('\n'));
    }
}

#[test]
fn job_state() {
    let plain = JobState::new(JobStatus::Running);
    assert_eq!(
        serde_json::to_value(&plain).expect("json"),
        json!({"status": "RUNNING"})
    );
    assert_eq!(plain.to_string(), "RUNNING");
    assert_eq!(JobState::from(JobStatus::Running), plain);

    let stuck = JobState::new(JobStatus::Pending).with_reason(StatusReason::ImagePullError {
        image: "i".into(),
        reason: "InvalidImageName".into(),
        message: "bad".into(),
    });
    assert!(stuck.is_blocked());
    assert!(stuck.to_string().starts_with("PENDING ("));
    let v = serde_json::to_value(&stuck).expect("json");
    assert_eq!(v["status"], "PENDING");
    assert_eq!(v["reason"]["kind"], "image_pull_error");
    assert_eq!(serde_json::from_value::<JobState>(v).expect("de"), stuck);

    let failed = JobState::new(JobStatus::Failed).with_reason(StatusReason::Unschedulable {
        message: "m".into(),
    });
    assert!(!failed.is_blocked(), "terminal states are never blocked");
    let creating = JobState::new(JobStatus::Pending).with_reason(StatusReason::ContainerCreating);
    assert!(!creating.is_blocked());
    let back: JobState = serde_json::from_value(json!({"status": "FAILED"})).expect("de");
    assert_eq!(back, JobState::new(JobStatus::Failed));
}
