//! The runner's index mode computes child job ids in Python
//! (`runner/kinetic_runner/indexed.py`); both read the vectors in
//! `runner/tests/child_job_ids.json`, which this test checks against
//! `child_job_id` (and writes afresh with `KINETIC_BLESS=1`), so the two
//! implementations can never drift apart.

use kinetic_core::batch::{MAX_DETERMINISTIC_ATTEMPT, MAX_DETERMINISTIC_INDEX, child_job_id};
use kinetic_core::ids::GroupId;

const VECTORS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../runner/tests/child_job_ids.json"
);

fn vectors() -> serde_json::Value {
    let groups = [
        "grp-00000000",
        "grp-0a1b2c3d",
        "grp-ffffffff",
        "grp-7e3a91c4",
    ];
    let positions = [
        (0, 1),
        (1, 1),
        (2, 1),
        (41, 3),
        (999, 2),
        (65_535, 1),
        (65_536, 1),
        (99_999, 4),
        (MAX_DETERMINISTIC_INDEX - 1, 1),
        (0, MAX_DETERMINISTIC_ATTEMPT),
        (12_345, 17),
    ];
    let mut out = Vec::new();
    for g in groups {
        let group: GroupId = g.parse().expect("a group id");
        for (index, attempt) in positions {
            out.push(serde_json::json!({
                "group_id": g,
                "index": index,
                "attempt": attempt,
                "job_id": child_job_id(&group, index, attempt).to_string(),
            }));
        }
    }
    serde_json::Value::Array(out)
}

#[test]
fn the_runners_child_id_vectors_are_the_rust_ids() {
    let want = vectors();
    if std::env::var_os("KINETIC_BLESS").is_some() {
        let text = serde_json::to_string_pretty(&want).expect("json") + "\n";
        std::fs::write(VECTORS, text).expect("write the vectors");
    }
    let stored: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(VECTORS).expect("runner/tests/child_job_ids.json"),
    )
    .expect("the vectors are JSON");
    assert_eq!(
        stored, want,
        "runner/tests/child_job_ids.json differs from child_job_id: rerun with KINETIC_BLESS=1 and check the runner's test"
    );
}
