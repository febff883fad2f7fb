//! Benchmarks of the GCS store against `kinetic-fake-gcp`'s fake server over
//! loopback. Prints figures; asserts nothing.
//!
//! `cargo bench -p kinetic-store-gcs --bench gcs`
//!
//! 1. Streaming: upload and download one large file (2 GiB by default,
//!    `KINETIC_BENCH_BIG_MIB`), with the peak RSS of this process
//!    (`VmHWM`, reset before each phase through `/proc/self/clear_refs`).
//!    The fake server runs in a child process (this binary again), so its
//!    copy of the object is not counted.
//! 2. Many small files: 20,000 files of 50 KiB, about 1 GB
//!    (`KINETIC_BENCH_FILES`, `KINETIC_BENCH_FILE_KIB`): uploaded straight
//!    through the store, 16 at a time (the engine's bound); then submitted
//!    as a job's data through the engine twice: a cache miss (hash, upload,
//!    marker) and a cache hit (hash, one HEAD).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use kinetic_core::env::EnvSnapshot;
use kinetic_core::ports::{ObjectPath, ObjectStore, PutOptions};
use kinetic_engine::{Arg, Data, Engine, EngineSettings, Entrypoint, JobSpec};
use kinetic_fake_gcp::FakeGcs;
use kinetic_store_gcs::{GcsOptions, GcsStore};
use kinetic_testkit::FakeBackend;

const SERVE_VAR: &str = "KINETIC_BENCH_FAKE_GCS_SERVE";
const BUCKET: &str = "bench-bucket";
const MIB: u64 = 1024 * 1024;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Child mode: serve a fake GCS until stdin closes.
fn serve() {
    let gcs = FakeGcs::with_buckets(&[BUCKET]).expect("start the fake GCS server");
    println!("{}", gcs.endpoint());
    std::io::stdout().flush().ok();
    let mut line = String::new();
    while std::io::stdin()
        .read_line(&mut line)
        .map(|n| n > 0)
        .unwrap_or(false)
    {
        line.clear();
    }
}

struct Server {
    child: Child,
    endpoint: String,
}

impl Server {
    fn spawn() -> Self {
        let mut child = Command::new(std::env::current_exe().expect("current exe"))
            .env(SERVE_VAR, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn the fake GCS server");
        let stdout = child.stdout.take().expect("stdout");
        let mut endpoint = String::new();
        BufReader::new(stdout)
            .read_line(&mut endpoint)
            .expect("endpoint");
        Self {
            child,
            endpoint: endpoint.trim().to_owned(),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// `VmHWM` (peak RSS) and `VmRSS` of this process, in MiB.
fn memory() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// Reset the peak RSS to the current RSS (Linux ≥ 4.0).
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn mb_per_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64()
}

fn path(s: &str) -> ObjectPath {
    ObjectPath::parse(s).expect("path")
}

async fn big_file(store: &GcsStore, dir: &Path) {
    let size = env_u64("KINETIC_BENCH_BIG_MIB", 2048) * MIB;
    let src = dir.join("big.bin");
    {
        // Sparse: the bytes come from the kernel, not from this process.
        let f = std::fs::File::create(&src).expect("create");
        f.set_len(size).expect("set_len");
    }
    let object = path("bench/big.bin");
    println!("\n## one large file: {} MiB", size / MIB);
    let (hwm, rss) = memory();
    println!("baseline: peak RSS {hwm:.1} MiB, RSS {rss:.1} MiB");

    reset_peak();
    let started = Instant::now();
    let n = store
        .put_file(&object, &src, PutOptions::default())
        .await
        .expect("upload");
    let took = started.elapsed();
    assert_eq!(n, size);
    let (hwm, _) = memory();
    println!(
        "upload (multipart, 10 MiB parts, 4 in flight): {:.2} s, {:.0} MB/s, peak RSS {hwm:.1} MiB",
        took.as_secs_f64(),
        mb_per_s(size, took)
    );

    reset_peak();
    let dest = dir.join("big.back");
    let started = Instant::now();
    let n = store.get_to_file(&object, &dest).await.expect("download");
    let took = started.elapsed();
    assert_eq!(n, size);
    let (hwm, _) = memory();
    println!(
        "download (streamed to a file): {:.2} s, {:.0} MB/s, peak RSS {hwm:.1} MiB",
        took.as_secs_f64(),
        mb_per_s(size, took)
    );
    store.delete(&object).await.expect("delete");
    let _ = std::fs::remove_file(&src);
    let _ = std::fs::remove_file(&dest);
}

fn make_files(root: &Path, files: u64, size: usize) -> u64 {
    let mut total = 0;
    let mut buf = vec![0u8; size];
    for i in 0..files {
        let sub = root.join(format!("d{:03}", i / 200));
        if i % 200 == 0 {
            std::fs::create_dir_all(&sub).expect("mkdir");
        }
        // Distinct content per file.
        buf[..8].copy_from_slice(&i.to_le_bytes());
        for (j, b) in buf[8..].iter_mut().enumerate() {
            *b = (j as u64 ^ i) as u8;
        }
        std::fs::write(sub.join(format!("f{i:05}.bin")), &buf).expect("write");
        total += size as u64;
    }
    total
}

async fn small_files(store: Arc<dyn ObjectStore>, dir: &Path) {
    let files = env_u64("KINETIC_BENCH_FILES", 20_000);
    let size = env_u64("KINETIC_BENCH_FILE_KIB", 50) as usize * 1024;
    let project = dir.join("proj");
    let data = project.join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(
        project.join("pyproject.toml"),
        "[project]\nname = \"bench\"\ndependencies = []\n",
    )
    .expect("write");
    std::fs::write(project.join("work.py"), "def f(d):\n    return d\n").expect("write");
    let made = Instant::now();
    let total = make_files(&data, files, size);
    println!(
        "\n## {files} files of {} KiB ({:.2} GB), written locally in {:.1} s",
        size / 1024,
        total as f64 / 1e9,
        made.elapsed().as_secs_f64()
    );

    // Straight through the store, 16 uploads in flight.
    let mut list = Vec::new();
    for d in std::fs::read_dir(&data).expect("read_dir").flatten() {
        for f in std::fs::read_dir(d.path()).expect("read_dir").flatten() {
            list.push(f.path());
        }
    }
    reset_peak();
    let started = Instant::now();
    let uploaded: u64 = futures_util::stream::iter(list.into_iter().map(|local| {
        let store = store.clone();
        async move {
            let rel = local
                .strip_prefix(dir)
                .expect("under dir")
                .to_string_lossy()
                .into_owned();
            store
                .put_file(
                    &path(&format!("bench/raw/{rel}")),
                    &local,
                    PutOptions::default(),
                )
                .await
                .expect("put_file")
        }
    }))
    .buffer_unordered(16)
    .fold(0u64, |acc, n| async move { acc + n })
    .await;
    let took = started.elapsed();
    println!(
        "store.put_file x{files}, 16 in flight: {:.2} s, {:.0} MB/s, {:.0} files/s, peak RSS {:.1} MiB",
        took.as_secs_f64(),
        mb_per_s(uploaded, took),
        files as f64 / took.as_secs_f64(),
        memory().0
    );

    // Through the engine: hash, then upload the data cache entry.
    let mut env = EnvSnapshot::new();
    env.insert("HOME", dir.to_string_lossy());
    let engine = Engine::builder()
        .store(store.clone())
        .backend(Arc::new(FakeBackend::new("local", store.clone())))
        .env_snapshot(env)
        .settings(EngineSettings::default().with_home(dir))
        .build()
        .expect("engine");
    let spec = || {
        JobSpec::new(Entrypoint::parse("work:f").expect("entry"))
            .working_dir(&project)
            .arg(Arg::Data(Data::new("data", &project).expect("data")))
    };
    let started = Instant::now();
    let hash = kinetic_core::hashing::content_hash(&data).expect("hash");
    let hashing = started.elapsed();
    println!(
        "content hash alone: {:.2} s ({:.0} MB/s) -> {hash}",
        hashing.as_secs_f64(),
        mb_per_s(total, hashing)
    );
    reset_peak();
    let started = Instant::now();
    engine.submit(spec()).await.expect("submit");
    let took = started.elapsed();
    let upload = took.saturating_sub(hashing);
    println!(
        "first submit (cache miss: hash + upload + marker): {:.2} s; without hashing {:.2} s = {:.0} MB/s, {:.0} files/s; peak RSS {:.1} MiB",
        took.as_secs_f64(),
        upload.as_secs_f64(),
        mb_per_s(total, upload),
        files as f64 / upload.as_secs_f64().max(1e-9),
        memory().0
    );
    reset_peak();
    let started = Instant::now();
    engine.submit(spec()).await.expect("submit");
    let took = started.elapsed();
    println!(
        "second submit (cache hit: hash + one HEAD, nothing uploaded): {:.2} s, {:.0} files/s; peak RSS {:.1} MiB",
        took.as_secs_f64(),
        files as f64 / took.as_secs_f64(),
        memory().0
    );
}

fn main() {
    if std::env::var_os(SERVE_VAR).is_some() {
        serve();
        return;
    }
    let server = Server::spawn();
    let tmp_root: PathBuf = std::env::var_os("KINETIC_BENCH_TMP")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(tmp_root).expect("tempdir");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!("fake GCS server (child process) at {}", server.endpoint);
    runtime.block_on(async {
        let store = GcsStore::open(
            &format!("gs://{BUCKET}"),
            &GcsOptions::emulator(&server.endpoint),
        )
        .expect("store");
        big_file(&store, dir.path()).await;
        small_files(Arc::new(store), dir.path()).await;
    });
}
