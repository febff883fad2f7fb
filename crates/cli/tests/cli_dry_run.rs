//! `run --dry-run` and `map --dry-run`, through the real binary: they
//! print the plan (where it runs, the image, the uploads, the objects
//! written) and leave the store, the registry and the cluster as they were.

mod sandbox;

use sandbox::world::World;
use sandbox::{Sandbox, stderr, stdout};
use serde_json::Value;

const WORK_PY: &str = "def square(x):\n    return x * x\n";

/// Every file under `dir`, relative.
fn files(dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                found.push(path.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    found
}

#[test]
fn dry_run_on_the_local_backend_prints_the_plan_and_writes_nothing() {
    let sb = Sandbox::new(WORK_PY);
    let store = sb.path("store");
    let sb = sb.with_var("KINETIC_STORE_URL", &format!("file://{}", store.display()));
    sb.write("home/project/inputs.jsonl", "1\n2\n3\n");
    sb.write("home/project/data/a.txt", "some data\n");

    let o = sb.kinetic(&["run", "work:square", "--arg", "data:data", "--dry-run"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let plan = stdout(&o);
    for want in [
        "Plan (dry run: nothing was uploaded, built, written or submitted):",
        "runs on         the local backend (this machine), accelerator cpu",
        "image           none (this backend runs the job without a container image)",
        "uploads         data ",
        "; to upload)",
        &format!("project file://{}/contexts/", store.display()),
        "the job writes  file://",
        "/spec.json",
        "/handle.json",
    ] {
        assert!(plan.contains(want), "{want:?} missing from:\n{plan}");
    }

    let o = sb.kinetic(&[
        "map",
        "work:square",
        "--inputs",
        "inputs.jsonl",
        "--max-concurrent",
        "2",
        "--dry-run",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let plan: Value = serde_json::from_str(&stdout(&o)).expect("JSON");
    assert_eq!(plan["dry_run"], true);
    assert_eq!(plan["inputs"], 3);
    assert_eq!(plan["max_concurrent"], 2);
    assert_eq!(plan["plan"]["backend"], "local");
    let context = plan["plan"]["uploads"][0]["uri"].as_str().unwrap();
    assert!(context.contains("/_groups/grp-"), "{plan}");

    // The inputs' data is part of the plan, uploaded once for the batch.
    let o = sb.kinetic(&[
        "map",
        "work:square",
        "--input-data",
        "data",
        "data/a.txt",
        "--dry-run",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let plan = stdout(&o);
    for want in [
        "2 (one per input, at most 64 at once)",
        "data ",
        "data/a.txt ",
    ] {
        assert!(plan.contains(want), "{want:?} missing from:\n{plan}");
    }

    // Nothing in the store, no job on the backend.
    assert_eq!(files(&store), Vec::<String>::new());
    assert_eq!(files(&sb.path("local/jobs")), Vec::<String>::new());
    let o = sb.kinetic(&["jobs", "list"]);
    assert_eq!(stdout(&o), "no jobs\n", "{}", stderr(&o));
    let o = sb.kinetic(&["batch", "list", "--json"]);
    let listed: Value = serde_json::from_str(&stdout(&o)).expect("JSON");
    assert_eq!(listed["batches"], Value::Array(vec![]), "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_on_a_cluster_builds_uploads_and_submits_nothing() {
    let w = World::project(WORK_PY)
        .file("requirements.txt", "six==1.16.0\n")
        .file("inputs.jsonl", "1\n2\n")
        .start()
        .await;
    let cloud = w.cloud();
    let before = cloud.gcs().list_objects(cloud.jobs_bucket());
    let o = w
        .kinetic(&[
            "run",
            "work.py:square",
            "--arg",
            "7",
            "--backend",
            "gke",
            "--dry-run",
        ])
        .await;
    assert!(o.status.success(), "{}", stderr(&o));
    let plan = stdout(&o);
    for want in [
        "runs on         the gke backend: cluster fake in us-central1-a (project fake-project), namespace default, accelerator cpu",
        "image           bundled cpu image on python:",
        "1 requirement line(s) baked in (built at submit unless the registry has it)",
        &format!("project gs://{}/", cloud.jobs_bucket()),
    ] {
        assert!(plan.contains(want), "{want:?} missing from:\n{plan}");
    }
    let o = w
        .kinetic(&[
            "map",
            "work.py:square",
            "--inputs",
            "inputs.jsonl",
            "--backend",
            "gke",
            "--dry-run",
        ])
        .await;
    assert!(o.status.success(), "{}", stderr(&o));
    let plan = stdout(&o);
    for want in [
        "2 (one per input, at most 64 at once)",
        "/_groups/grp-",
        "each job writes",
    ] {
        assert!(plan.contains(want), "{want:?} missing from:\n{plan}");
    }

    assert_eq!(cloud.cloud_build().builds_created(), 0, "nothing built");
    assert_eq!(
        cloud.gcs().list_objects(cloud.jobs_bucket()),
        before,
        "nothing uploaded"
    );
    assert_eq!(cloud.gcs().list_objects(cloud.builds_bucket()), vec![]);
    assert!(w.cluster().objects("jobs.batch", "default").is_empty());
    assert_eq!(w.cluster().calls().count("create", "jobs.batch"), 0);
}
