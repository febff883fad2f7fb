//! Engine benchmarks (run with `cargo bench -p kinetic-e2e --bench engine`).
//!
//! 1. Client-side overhead of `submit` for a 5 MB project with the fake
//!    backend and the in-memory store: everything the engine does before
//!    the backend runs anything (spec checks, env capture, package root,
//!    packing and uploading the context, spec and record). Target: p50 under
//!    50 ms after the first upload.
//! 2. Wall time of a trivial Python job on the local backend, from `submit`
//!    to the returned value (python3 start-up, runner phases, result).
//! 3. Re-submit of an unchanged 50 MB project to a store on disk, without
//!    the context cache (packed and uploaded every time, as before) and
//!    with it (nothing packed or uploaded again). Target: nothing re-packed
//!    or re-uploaded that the store already holds.
//!
//! `KINETIC_BENCH_SUBMITS`, `KINETIC_BENCH_LOCAL_JOBS` and
//! `KINETIC_BENCH_RESUBMITS` change the sample sizes.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kinetic_backend_local::{LocalBackend, LocalOptions};
use kinetic_core::env::EnvSnapshot;
use kinetic_core::layout;
use kinetic_core::ports::ObjectStore;
use kinetic_engine::layers::FaultyStore;
use kinetic_engine::{Engine, EngineSettings, Entrypoint, JobSpec, ResultOptions};
use kinetic_store_gcs::GcsStore;
use kinetic_testkit::{FakeBackend, MemoryStore};
use serde_json::json;

fn env_count(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A project of about `bytes` of Python-like source in 100 files.
fn make_project(root: &Path, bytes: usize) {
    std::fs::create_dir_all(root.join("pkg")).unwrap();
    std::fs::write(
        root.join("pyproject.toml"),
        "[project]\nname = \"bench\"\ndependencies = []\n",
    )
    .unwrap();
    std::fs::write(root.join("work.py"), "def square(x):\n    return x * x\n").unwrap();
    let per_file = bytes / 100;
    for i in 0..100 {
        let mut text = String::with_capacity(per_file + 100);
        let mut n = 0;
        while text.len() < per_file {
            let _ = writeln!(
                text,
                "def function_{i}_{n}(value, scale={n}):\n    \"\"\"Scale a value ({n}).\"\"\"\n    return [value * scale + k for k in range({n} % 17)]\n"
            );
            n += 1;
        }
        std::fs::write(root.join("pkg").join(format!("module_{i:03}.py")), text).unwrap();
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("home/project");
    make_project(&project, 5 * 1024 * 1024);
    let mut env = EnvSnapshot::new();
    env.insert("HOME", dir.path().join("home").to_string_lossy());

    // 1. Submit overhead, fake backend + in-memory store.
    let store = MemoryStore::new();
    let backend = FakeBackend::new("fake", Arc::new(store.clone()));
    let engine = Engine::builder()
        .store(Arc::new(store.clone()))
        .backend(Arc::new(backend))
        .default_backend("fake")
        .env_snapshot(env.clone())
        .settings(EngineSettings::default().with_home(dir.path().join("home")))
        .build()
        .unwrap();
    let spec = || {
        JobSpec::new(Entrypoint::parse("work:square").unwrap())
            .arg(json!(7))
            .working_dir(project.clone())
    };
    let submits = env_count("KINETIC_BENCH_SUBMITS", 40);
    let mut first = Duration::ZERO;
    let mut times = Vec::with_capacity(submits);
    rt.block_on(async {
        for i in 0..=submits {
            let start = Instant::now();
            engine.submit(spec()).await.unwrap();
            let took = start.elapsed();
            if i == 0 {
                first = took;
            } else {
                times.push(took);
            }
        }
    });
    times.sort();
    let context_bytes: u64 = store
        .snapshot()
        .iter()
        .find(|(p, _)| layout::is_shared_context(p))
        .map_or(0, |(_, b)| b.len() as u64);
    println!("submit overhead, 5 MB project (100 files), fake backend + in-memory store");
    println!("  first submit        {}", ms(first));
    println!(
        "  next {submits} submits     p50 {}   p90 {}   max {}",
        ms(percentile(&times, 0.5)),
        ms(percentile(&times, 0.9)),
        ms(*times.last().unwrap())
    );
    println!("  context.zip         {:.2} MB", context_bytes as f64 / 1e6);

    // 2. A trivial job on the local backend.
    let jobs = env_count("KINETIC_BENCH_LOCAL_JOBS", 10);
    let store: Arc<dyn ObjectStore> =
        Arc::new(GcsStore::local_dir(&dir.path().join("store")).unwrap());
    let local =
        LocalBackend::new(LocalOptions::new(dir.path().join("local")), store.clone()).unwrap();
    let engine = Engine::builder()
        .store(store)
        .backend(Arc::new(local))
        .env_snapshot(env.clone())
        .settings(EngineSettings::default().with_home(dir.path().join("home")))
        .build()
        .unwrap();
    let small = dir.path().join("home/small");
    std::fs::create_dir_all(&small).unwrap();
    std::fs::write(
        small.join("pyproject.toml"),
        "[project]\nname = \"small\"\n",
    )
    .unwrap();
    std::fs::write(small.join("work.py"), "def square(x):\n    return x * x\n").unwrap();
    let mut walls = Vec::with_capacity(jobs);
    rt.block_on(async {
        for _ in 0..jobs {
            let start = Instant::now();
            let spec = JobSpec::new(Entrypoint::parse("work:square").unwrap())
                .arg(json!(7))
                .working_dir(small.clone());
            let v = engine.run(spec, ResultOptions::default()).await.unwrap();
            assert_eq!(v, json!(49));
            walls.push(start.elapsed());
        }
    });
    walls.sort();
    println!("trivial Python job on the local backend (submit → value, {jobs} runs)");
    println!(
        "  wall time           p50 {}   min {}   max {}",
        ms(percentile(&walls, 0.5)),
        ms(walls[0]),
        ms(*walls.last().unwrap())
    );

    // 3. Re-submit of an unchanged 50 MB project.
    let big = dir.path().join("home/big");
    make_project(&big, 50 * 1024 * 1024);
    let resubmits = env_count("KINETIC_BENCH_RESUBMITS", 10);
    println!("re-submit of an unchanged 50 MB project (100 files), fake backend + store on disk");
    for cached in [false, true] {
        let store = FaultyStore::new(Arc::new(
            GcsStore::local_dir(&dir.path().join(format!("store-{cached}"))).unwrap(),
        ));
        let mut settings = EngineSettings::default().with_home(dir.path().join("home"));
        if cached {
            settings.context_cache = Some(dir.path().join("context-cache"));
        }
        let engine = Engine::builder()
            .store(Arc::new(store.clone()))
            .backend(Arc::new(FakeBackend::new("fake", Arc::new(store.clone()))))
            .default_backend("fake")
            .env_snapshot(env.clone())
            .settings(settings)
            .build()
            .unwrap();
        let spec = || {
            JobSpec::new(Entrypoint::parse("work:square").unwrap())
                .arg(json!(7))
                .working_dir(big.clone())
        };
        let mut times = Vec::with_capacity(resubmits);
        rt.block_on(async {
            engine.submit(spec()).await.unwrap();
            let before = store.faults().calls("put_file");
            for _ in 0..resubmits {
                let start = Instant::now();
                engine.submit(spec()).await.unwrap();
                times.push(start.elapsed());
            }
            let uploads = store.faults().calls("put_file") - before;
            times.sort();
            println!(
                "  {:<19} p50 {}   max {}   context uploads in {resubmits} re-submits: {uploads}",
                if cached {
                    "context cache"
                } else {
                    "no context cache"
                },
                ms(percentile(&times, 0.5)),
                ms(*times.last().unwrap()),
            );
        });
    }
}
