//! A batch of 100,000 inputs on the in-memory fake backend and store:
//! what submitting, following and collecting it costs the client.
//!
//! `cargo bench --profile dev -p kinetic-engine --bench batch_100k` runs
//! each row in a child process of its own (this binary, run again with
//! `KINETIC_BENCH_ROW` set), so that each row's peak RSS (`VmHWM`) is its
//! own, and prints per row:
//!
//! - the time to submit every input (`map` until `wait_submitted`; no
//!   concurrency limit, as an Indexed Job's submission has none);
//! - the backend calls one status poll makes;
//! - the time to collect every value, with `as_completed` (each job's
//!   `result()`, values summed and dropped) or with `results()`;
//! - the process's peak RSS, and its RSS after the collection less its RSS
//!   before `map` and less the bytes the in-memory store holds then, per
//!   input: what the client (and the fake backend, which keeps one record
//!   per job) retains per input, an upper bound on the handle's own share;
//! - the manifest's size and how many times it was written.
//!
//! `KINETIC_BENCH_INPUTS` changes the number of inputs (default 100,000).
//! Goals (issue 27): submit ≤ 30 s, peak RSS ≤ 150 MB, ≤ 3 calls per poll.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;
use kinetic_core::env::EnvSnapshot;
use kinetic_core::ports::{
    GetOptions, ObjectMeta, ObjectPath, ObjectStore, PutOptions, StoreError,
};
use kinetic_core::record::JobRecord;
use kinetic_engine::{
    BatchConfig, BatchResultsOptions, Engine, EngineSettings, Entrypoint, JobSpec, ResultOptions,
};
use kinetic_testkit::{FakeBackend, MemoryStore, Outcome};
use serde_json::json;

/// A store that counts the manifest's writes and their bytes.
#[derive(Debug, Clone)]
struct ManifestCounting {
    inner: MemoryStore,
    writes: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
}

#[async_trait]
impl ObjectStore for ManifestCounting {
    fn uri(&self, path: &ObjectPath) -> String {
        self.inner.uri(path)
    }
    async fn put(&self, path: &ObjectPath, data: Bytes, o: PutOptions) -> Result<(), StoreError> {
        if path.as_str().ends_with("/manifest.json") {
            self.writes.fetch_add(1, Ordering::Relaxed);
            self.bytes.store(data.len() as u64, Ordering::Relaxed);
        }
        self.inner.put(path, data, o).await
    }
    async fn put_file(
        &self,
        path: &ObjectPath,
        file: &std::path::Path,
        o: PutOptions,
    ) -> Result<u64, StoreError> {
        self.inner.put_file(path, file, o).await
    }
    async fn get(&self, path: &ObjectPath, o: GetOptions) -> Result<Bytes, StoreError> {
        self.inner.get(path, o).await
    }
    async fn head(&self, path: &ObjectPath) -> Result<ObjectMeta, StoreError> {
        self.inner.head(path).await
    }
    async fn list(&self, prefix: Option<&ObjectPath>) -> Result<Vec<ObjectMeta>, StoreError> {
        self.inner.list(prefix).await
    }
    async fn delete(&self, path: &ObjectPath) -> Result<(), StoreError> {
        self.inner.delete(path).await
    }
    async fn delete_prefix(&self, prefix: &ObjectPath) -> Result<u64, StoreError> {
        self.inner.delete_prefix(prefix).await
    }
    async fn get_to_file(
        &self,
        path: &ObjectPath,
        file: &std::path::Path,
    ) -> Result<u64, StoreError> {
        self.inner.get_to_file(path, file).await
    }
}

/// `VmRSS` or `VmHWM` of this process, in MB.
fn status_mb(key: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// One row, in this process: prints one line of `key=value` fields.
async fn row(collect: &str, n: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let proj = dir.path().join("home/proj");
    std::fs::create_dir_all(&proj).expect("mkdir");
    std::fs::write(proj.join("pyproject.toml"), "[project]\nname = \"proj\"\n").expect("write");
    std::fs::write(proj.join("work.py"), "def square(x):\n    return x * x\n").expect("write");
    let memory = MemoryStore::new();
    let store = ManifestCounting {
        inner: memory.clone(),
        writes: Arc::default(),
        bytes: Arc::default(),
    };
    // Jobs end as soon as they are observed.
    let fake = FakeBackend::new("fake", Arc::new(memory.clone()));
    fake.script_with(|r: &JobRecord| r.group_index.map(|i| Outcome::Succeed(json!(i * i))));
    let mut env = EnvSnapshot::new();
    env.insert("HOME", dir.path().join("home").to_string_lossy());
    let engine = Engine::builder()
        .store(Arc::new(store.clone()))
        .backend(Arc::new(fake.clone()))
        .default_backend("fake")
        .env_snapshot(env)
        .settings(EngineSettings::default().with_home(dir.path().join("home")))
        .spawner(|driver| {
            tokio::spawn(driver);
        })
        .build()
        .expect("engine");
    let spec = JobSpec::new(Entrypoint::parse("work:square").expect("entry")).working_dir(&proj);

    let before = status_mb("VmRSS:");
    let started = Instant::now();
    let batch = engine
        .map(
            spec,
            (0..n).map(|i| json!(i)),
            BatchConfig::default()
                .max_concurrent(None)
                .poll_interval(Duration::from_millis(200)),
        )
        .await
        .expect("map");
    batch
        .wait_submitted(Some(Duration::from_secs(3600)))
        .await
        .expect("submitted");
    let submit_s = started.elapsed().as_secs_f64();
    let calls = fake.total_calls();
    // One poll (`status_counts`: no vector of 100,000 states in the
    // bench's own hands to inflate the peak).
    batch.status_counts().await.expect("counts");
    let per_poll = fake.total_calls() - calls;

    let started = Instant::now();
    let mut sum: u64 = 0;
    let mut count: u64 = 0;
    match collect {
        "as_completed" => {
            let mut ended = batch.as_completed(None);
            while let Some(job) = ended.next().await {
                let job = job.expect("as_completed");
                let value = job.result(ResultOptions::default()).await.expect("result");
                sum += value.as_u64().expect("a number");
                count += 1;
            }
        }
        _ => {
            let items = batch
                .results(BatchResultsOptions::default())
                .await
                .expect("results");
            for item in &items {
                sum += item.value().and_then(|v| v.as_u64()).expect("a number");
                count += 1;
            }
        }
    }
    let collect_s = started.elapsed().as_secs_f64();
    assert_eq!(count, n);
    assert_eq!(sum, (0..n).map(|i| i * i).sum::<u64>());
    let after = status_mb("VmRSS:");
    let store_mb = memory
        .snapshot()
        .values()
        .map(|b| b.len() as f64)
        .sum::<f64>()
        / 1_048_576.0;
    let retained = (after - before - store_mb) * 1_048_576.0 / n as f64;
    println!(
        "row={collect} inputs={n} submit_s={submit_s:.2} calls_per_poll={per_poll} collect_s={collect_s:.2} peak_rss_mb={:.1} rss_before_mb={before:.1} rss_after_mb={after:.1} store_mb={store_mb:.1} retained_b_per_input={retained:.0} manifest_writes={} manifest_kb={:.0}",
        status_mb("VmHWM:"),
        store.writes.load(Ordering::Relaxed),
        store.bytes.load(Ordering::Relaxed) as f64 / 1024.0,
    );
    drop(batch);
}

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .unwrap_or("?")
}

fn main() {
    let n: u64 = std::env::var("KINETIC_BENCH_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    if let Ok(which) = std::env::var("KINETIC_BENCH_ROW") {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(row(&which, n));
        return;
    }
    let me = std::env::current_exe().expect("the bench's own path");
    println!("{n} inputs (fake backend, in-memory store; each row in a process of its own):");
    for which in ["as_completed", "results"] {
        let out = Command::new(&me)
            .env("KINETIC_BENCH_ROW", which)
            .output()
            .expect("run a row");
        let text = String::from_utf8_lossy(&out.stdout);
        let Some(line) = text.lines().find(|l| l.starts_with("row=")) else {
            println!(
                "  {which}: the row failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            continue;
        };
        println!("  collected with {which}:");
        println!(
            "    submit wall                {:>8} s   (goal ≤ 30 s)",
            field(line, "submit_s")
        );
        println!(
            "    backend calls per poll     {:>8}     (goal ≤ 3)",
            field(line, "calls_per_poll")
        );
        println!(
            "    collect wall               {:>8} s",
            field(line, "collect_s")
        );
        println!(
            "    peak RSS                   {:>8} MB  (goal ≤ 150 MB; the in-memory store and fake backend included)",
            field(line, "peak_rss_mb")
        );
        println!(
            "    RSS before map / after     {:>8} / {} MB; the store holds {} MB",
            field(line, "rss_before_mb"),
            field(line, "rss_after_mb"),
            field(line, "store_mb")
        );
        println!(
            "    retained per input         {:>8} B   (RSS growth less the store's bytes: the handle and the fake backend)",
            field(line, "retained_b_per_input")
        );
        println!(
            "    manifest                   {:>8} writes, last {} kB",
            field(line, "manifest_writes"),
            field(line, "manifest_kb")
        );
    }
}
