//! Batch speed and memory on the in-memory fake backend and store.
//!
//! `cargo bench -p kinetic-engine --bench batch` prints:
//!
//! - the RSS of this process holding a handle over 10,000 jobs (the
//!   in-memory store and fake backend, which hold every job's objects and
//!   state, included), and of a second handle attached to the same batch;
//! - the time to submit 1,000 inputs (no concurrency limit; and with the
//!   default limit of 64, where only polls free capacity);
//! - the backend calls one status poll of a 1,000-job batch makes.
//!
//! Targets: 1,000 inputs submitted in under 5 s; one backend call per
//! poll; under 100 MB RSS for a handle over 10,000 jobs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kinetic_core::env::EnvSnapshot;
use kinetic_core::record::JobRecord;
use kinetic_engine::{AttachOptions, BatchConfig, Engine, EngineSettings, Entrypoint, JobSpec};
use kinetic_testkit::{FakeBackend, MemoryStore, Outcome};
use serde_json::{Value, json};

struct World {
    dir: tempfile::TempDir,
    store: MemoryStore,
    fake: FakeBackend,
}

impl World {
    /// Jobs stay pending for `pending` (then end at once when observed).
    fn new(pending: Duration) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let proj = dir.path().join("home/proj");
        std::fs::create_dir_all(&proj).expect("mkdir");
        std::fs::write(proj.join("pyproject.toml"), "[project]\nname = \"proj\"\n").expect("write");
        std::fs::write(proj.join("work.py"), "def square(x):\n    return x * x\n").expect("write");
        let store = MemoryStore::new();
        let fake =
            FakeBackend::new("fake", Arc::new(store.clone())).with_timing(pending, Duration::ZERO);
        fake.script_with(|r: &JobRecord| r.group_index.map(|i| Outcome::Succeed(json!(i * i))));
        Self { dir, store, fake }
    }

    fn engine(&self) -> Engine {
        let mut env = EnvSnapshot::new();
        env.insert("HOME", self.dir.path().join("home").to_string_lossy());
        Engine::builder()
            .store(Arc::new(self.store.clone()))
            .backend(Arc::new(self.fake.clone()))
            .default_backend("fake")
            .env_snapshot(env)
            .settings(EngineSettings::default().with_home(self.dir.path().join("home")))
            .spawner(|driver| {
                tokio::spawn(driver);
            })
            .build()
            .expect("engine")
    }

    fn spec(&self) -> JobSpec {
        JobSpec::new(Entrypoint::parse("work:square").expect("entry"))
            .working_dir(self.dir.path().join("home/proj"))
    }
}

fn inputs(n: u64) -> Vec<Value> {
    (0..n).map(|i| json!(i)).collect()
}

/// Resident set size of this process, in MB (Linux `/proc`).
fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

async fn memory_10k() {
    let w = World::new(Duration::from_secs(3600));
    let engine = w.engine();
    let before = rss_mb();
    let started = Instant::now();
    let batch = engine
        .map(
            w.spec(),
            inputs(10_000),
            BatchConfig::default().max_concurrent(None),
        )
        .await
        .expect("map");
    batch
        .wait_submitted(Some(Duration::from_secs(600)))
        .await
        .expect("submitted");
    let submit_secs = started.elapsed().as_secs_f64();
    let counts = batch.status_counts().await.expect("counts");
    assert_eq!(counts.pending, 10_000);
    let with_handle = rss_mb();
    let started = Instant::now();
    let attached = engine
        .attach_batch(batch.group_id().as_str(), AttachOptions::default())
        .await
        .expect("attach");
    let attach_secs = started.elapsed().as_secs_f64();
    assert_eq!(attached.jobs().iter().flatten().count(), 10_000);
    let with_two = rss_mb();
    println!("10,000-job batch (fake backend, in-memory store):");
    println!(
        "  submitted in                          {submit_secs:>8.2} s ({:.0} inputs/s)",
        10_000.0 / submit_secs
    );
    println!("  process RSS before map                {before:>8.1} MB");
    println!(
        "  process RSS with the batch handle     {with_handle:>8.1} MB  (store + fake backend + handle; target < 100 MB)"
    );
    println!("  attach_batch over 10,000 children     {attach_secs:>8.2} s");
    println!(
        "  process RSS with a second, attached   {with_two:>8.1} MB  (+{:.1} MB for the attached handle)",
        with_two - with_handle
    );
}

async fn submit_1k(limit: Option<usize>, poll: Duration) -> f64 {
    let w = World::new(Duration::ZERO);
    let engine = w.engine();
    let started = Instant::now();
    let batch = engine
        .map(
            w.spec(),
            inputs(1_000),
            BatchConfig::default()
                .max_concurrent(limit)
                .poll_interval(poll),
        )
        .await
        .expect("map");
    batch
        .wait_submitted(Some(Duration::from_secs(600)))
        .await
        .expect("submitted");
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(w.fake.submits(), 1_000);
    secs
}

async fn calls_per_poll() -> (u64, u64, usize) {
    let w = World::new(Duration::from_secs(3600));
    let engine = w.engine();
    let batch = engine
        .map(
            w.spec(),
            inputs(1_000),
            BatchConfig::default().max_concurrent(None),
        )
        .await
        .expect("map");
    batch
        .wait_submitted(Some(Duration::from_secs(600)))
        .await
        .expect("submitted");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = w.fake.total_calls();
    let statuses = batch.statuses().await.expect("statuses");
    let one = w.fake.total_calls() - before;
    let before = w.fake.total_calls();
    for _ in 0..10 {
        batch.status_counts().await.expect("counts");
    }
    let ten = w.fake.total_calls() - before;
    (one, ten, statuses.len())
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        // First, while the heap is fresh.
        memory_10k().await;
        let unlimited = submit_1k(None, Duration::from_secs(1)).await;
        let limited = submit_1k(Some(64), Duration::from_millis(50)).await;
        let (one, ten, n) = calls_per_poll().await;
        println!("1,000 inputs (fake backend, in-memory store):");
        println!("  submitted, no concurrency limit       {unlimited:>8.2} s ({:.0} inputs/s; target < 5 s)", 1_000.0 / unlimited);
        println!("  submitted, max_concurrent 64, 50 ms polls {limited:>4.2} s (capacity freed only by polls)");
        println!("  backend calls for one status poll     {one:>8}    (over {n} jobs; target 1)");
        println!("  backend calls for ten status polls    {ten:>8}");
    });
}
