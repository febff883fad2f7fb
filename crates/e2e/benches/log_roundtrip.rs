//! One log round trip on the fake cluster (run with `cargo bench -p
//! kinetic-e2e --bench log_roundtrip`): a job in a pod of the fake
//! Kubernetes prints a stamped line every 200 ms while the bench polls the
//! fake GCS bucket for the runner's copy (`{job_id}/logs/host-0/…`). It
//! prints the delay between each line being printed and the line being
//! readable from the bucket, and the bytes and objects the runner copied.
//!
//! `KINETIC_BENCH_LOG_LINES` changes how many lines the job prints (40).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kinetic_backend_gke::{GkeBackend, GkeOptions};
use kinetic_core::layout;
use kinetic_core::ports::ObjectStore;
use kinetic_engine::{Engine, EngineSettings, Entrypoint, JobSpec, ResultOptions};
use kinetic_fake_gcp::FakeGcs;
use kinetic_fake_gcp::k8s::FakeCluster;
use kinetic_store_gcs::{GcsOptions, GcsStore};
use serde_json::json;

const WORK_PY: &str = r#"
import time

def stamped(n):
    for i in range(n):
        print("line %d at %.6f" % (i, time.time()), flush=True)
        time.sleep(0.2)
    return n
"#;

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn write_project(root: &Path) {
    std::fs::create_dir_all(root).unwrap();
    std::fs::write(
        root.join("pyproject.toml"),
        "[project]\nname = \"proj\"\ndependencies = []\n",
    )
    .unwrap();
    std::fs::write(root.join("work.py"), WORK_PY).unwrap();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let lines: usize = std::env::var("KINETIC_BENCH_LOG_LINES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("home/proj");
    write_project(&project);
    let gcs = FakeGcs::with_buckets(&["kn-jobs"]).unwrap();
    let store: Arc<dyn ObjectStore> =
        Arc::new(GcsStore::open("gs://kn-jobs", &GcsOptions::emulator(&gcs.endpoint())).unwrap());
    let cluster = FakeCluster::start(
        kinetic_fake_gcp_server::fake_cluster_config()
            // The one image the jobs run, named with the host's interpreter.
            .image(kinetic_fake_gcp::k8s::FAKE_IMAGE, "python3")
            .env("KINETIC_GCS_ENDPOINT", &gcs.endpoint()),
    )
    .await
    .unwrap();
    let client = kube::Client::try_from(kube::Config::new(cluster.url().parse().unwrap())).unwrap();
    let backend = GkeBackend::new(
        client,
        GkeOptions::new("default").poll_interval(Duration::from_millis(50)),
    );
    let engine = Engine::builder()
        .store(store.clone())
        .backend(Arc::new(backend))
        .default_backend("gke")
        .image_builder(Arc::new(
            kinetic_core::ports::FixedImage::new(kinetic_fake_gcp::k8s::FAKE_IMAGE).unwrap(),
        ))
        .settings(EngineSettings::default().with_home(dir.path().join("home")))
        .build()
        .unwrap();
    let spec = JobSpec::new(Entrypoint::parse("work:stamped").unwrap())
        .working_dir(&project)
        .arg(json!(lines));
    let handle = engine.submit(spec).await.unwrap();
    let prefix = layout::log_chunks(handle.id(), 0);

    // Poll the bucket every 20 ms; note when each line first shows up.
    let mut seen: BTreeMap<usize, f64> = BTreeMap::new();
    let mut delays = Vec::new();
    let mut read: BTreeMap<String, u64> = BTreeMap::new();
    let deadline = now() + 120.0;
    while now() < deadline {
        let mut metas = store.list(Some(&prefix)).await.unwrap();
        metas.sort_by(|a, b| a.path.cmp(&b.path));
        let mut done = false;
        for meta in metas {
            let name = meta.path.as_str().to_owned();
            if read.contains_key(&name) {
                continue;
            }
            let bytes = store.get(&meta.path, Default::default()).await.unwrap();
            let at = now();
            read.insert(name.clone(), bytes.len() as u64);
            for line in String::from_utf8_lossy(&bytes).lines() {
                let Some(rest) = line.strip_prefix("line ") else {
                    continue;
                };
                let Some((i, stamp)) = rest.split_once(" at ") else {
                    continue;
                };
                let (Ok(i), Ok(stamp)) = (i.parse::<usize>(), stamp.parse::<f64>()) else {
                    continue;
                };
                if seen.insert(i, at).is_none() {
                    delays.push(at - stamp);
                }
            }
            done |= name.ends_with(layout::LOG_END_SUFFIX);
        }
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let value = handle
        .result(ResultOptions::default().timeout(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(value, json!(lines));
    assert_eq!(seen.len(), lines, "every line reached the bucket");
    delays.sort_by(f64::total_cmp);
    let bytes: u64 = read.values().sum();
    println!(
        "log round trip on the fake cluster (pod → runner → fake GCS → reader polling every 20 ms)"
    );
    println!(
        "  {lines} lines printed 200 ms apart; the runner copied {bytes} bytes in {} objects",
        read.len()
    );
    println!(
        "  delay from print to readable in the bucket: min {:.0} ms, p50 {:.0} ms, p90 {:.0} ms, max {:.0} ms",
        delays[0] * 1000.0,
        percentile(&delays, 0.5) * 1000.0,
        percentile(&delays, 0.9) * 1000.0,
        delays[delays.len() - 1] * 1000.0
    );
}
