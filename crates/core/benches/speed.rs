//! The content-hash and `context.zip` rows of the speed table, each set
//! against its floor measured in the same run.
//!
//! `cargo bench -p kinetic-core --bench speed` — the data sets are made in a
//! temp dir (`TMPDIR`) and deleted afterwards: 20,000 files of 4–100 KiB,
//! one 2 GiB file, and a 209 MB project of which 20 % is random bytes and
//! the rest Python source (the `.py` files of `python3`'s standard library,
//! cycled; `KINETIC_BENCH_SOURCE=synthetic` uses generated word salad
//! instead). `KINETIC_BENCH_SCALE=0.05` for a quick run;
//! `KINETIC_BENCH_RUNS=N` repetitions (default 5; floor and ours alternate
//! and the best run of each is kept, since other load only slows a run
//! down); `KINETIC_BENCH_ROWS=cold,warm,big,zip` to measure some rows only.
//! Needs `python3`; `openssl` and `fincore` (util-linux) are used for
//! reference figures and the eviction check when present.
//!
//! | row | floor, measured in the same run | target |
//! |---|---|---|
//! | hash the 20,000 files, page cache cold | 16 threads reading the same files whole, cold | ≥ 0.88 × (900 of 1,019 MB/s) |
//! | the same, warm | SHA-256 on every core over the same number of bytes, from memory | ≥ 0.76 × (3,000 of 3,967 MB/s) |
//! | hash the 2 GiB file, warm | SHA-256 on one core over as many bytes, from memory | ≥ 0.95 × |
//! | `context.zip` of the 209 MB project | Python `zipfile` (`ZIP_DEFLATED`, level 6) on the same tree | size ≤ 1.00 ×, ≥ 150 MB/s |
//!
//! "Cold" is made without privileges: every file is `fsync`ed and then
//! dropped with `posix_fadvise(POSIX_FADV_DONTNEED)`; `fincore` confirms
//! that none of it stays cached, and the floor read cold and warm shows the
//! difference. Inodes and directory entries stay cached.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use common::{
    cached_bytes, evict, list_files, load_average, openssl_sha256_bytes_per_sec, plain_read,
    process_cpu_seconds, read_and_hash, runs, scale,
};
use kinetic_core::hashing::{HashOptions, content_hash_with};
use kinetic_core::packaging::{PackOptions, pack};
use sha2::{Digest, Sha256};

/// Reads in flight of the cold-read floor.
const FLOOR_INFLIGHT: usize = 16;

struct Line {
    work: String,
    ours: String,
    floor: String,
    ratio: f64,
    target: &'static str,
    met: bool,
    /// Cores our best run got (CPU time / wall time).
    cores: f64,
}

/// The best (shortest) of several timed runs, with the CPU time it used.
#[derive(Clone, Copy)]
struct Best {
    secs: f64,
    cpu: f64,
}

impl Best {
    fn new() -> Self {
        Self {
            secs: f64::INFINITY,
            cpu: 0.0,
        }
    }

    /// Runs `f`, keeps the run if it is the fastest so far.
    fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let cpu = process_cpu_seconds().unwrap_or(0.0);
        let t = Instant::now();
        let r = f();
        let secs = t.elapsed().as_secs_f64();
        if secs < self.secs {
            self.secs = secs;
            self.cpu = process_cpu_seconds().unwrap_or(0.0) - cpu;
        }
        r
    }

    fn mb_s(&self, bytes: u64) -> f64 {
        bytes as f64 / self.secs / 1e6
    }

    fn cores(&self) -> f64 {
        self.cpu / self.secs
    }
}

impl Line {
    /// A row comparing our MB/s over `bytes` with the floor's.
    fn speed(
        work: String,
        bytes: u64,
        ours: &Best,
        floor: &Best,
        floor_is: String,
        target: (&'static str, f64),
    ) -> Self {
        let ratio = ours.mb_s(bytes) / floor.mb_s(bytes);
        Self {
            work,
            ours: format!("{:.0} MB/s", ours.mb_s(bytes)),
            floor: format!("{:.0} MB/s ({floor_is})", floor.mb_s(bytes)),
            ratio,
            target: target.0,
            met: ratio >= target.1,
            cores: ours.cores(),
        }
    }
}

/// Whether `row` is among those `KINETIC_BENCH_ROWS` asks for (all when unset).
fn wanted(row: &str) -> bool {
    std::env::var("KINETIC_BENCH_ROWS")
        .map(|rows| rows.split(',').any(|r| r.trim() == row))
        .unwrap_or(true)
}

/// SHA-256 of `bytes` bytes in total on `threads` threads, from a small
/// buffer in cache: what the hash would cost with free reads.
fn sha_only(threads: usize, bytes: u64) -> [u8; 32] {
    let block = vec![0x5au8; 16 << 10];
    let share = bytes / threads as u64;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut hasher = Sha256::new();
                    let mut left = share;
                    while left > 0 {
                        let n = left.min(block.len() as u64) as usize;
                        hasher.update(&block[..n]);
                        left -= n as u64;
                    }
                    <[u8; 32]>::from(hasher.finalize())
                })
            })
            .collect();
        let mut out = [0u8; 32];
        for handle in handles {
            let digest = handle.join().expect("sha thread");
            out.iter_mut().zip(digest).for_each(|(o, d)| *o ^= d);
        }
        out
    })
}

fn main() {
    let scale = scale();
    let runs = runs();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "scale {scale}, best of {runs} runs, {cores} cores; load average before: {}",
        load_average()
    );
    if let Some(ssl) = openssl_sha256_bytes_per_sec(3) {
        println!(
            "openssl speed -evp sha256 -bytes 16384, one core: {:.1} MB/s (reference)",
            ssl / 1e6
        );
    }
    let dir = tempfile::tempdir().expect("tempdir");

    let mut lines = Vec::new();
    if wanted("cold") || wanted("warm") {
        many_files_rows(dir.path(), scale, runs, cores, &mut lines);
    }
    if wanted("big") {
        big_file_row(dir.path(), scale, runs, &mut lines);
    }
    if wanted("zip") {
        archive_row(dir.path(), scale, runs, &mut lines);
    }

    println!();
    println!(
        "{:<38} {:>24} {:>40} {:>6} {:>21} {:>4} {:>5}",
        "work", "ours", "floor (same run)", "ratio", "target", "met", "cores"
    );
    for l in &lines {
        println!(
            "{:<38} {:>24} {:>40} {:>6.4} {:>21} {:>4} {:>5.2}",
            l.work,
            l.ours,
            l.floor,
            l.ratio,
            l.target,
            if l.met { "yes" } else { "NO" },
            l.cores
        );
    }
    println!("(cores: CPU time / wall time of our best run, all threads)");
    println!("load average after: {}", load_average());
}

/// The 20,000 small files, cold then warm.
fn many_files_rows(dir: &Path, scale: f64, runs: usize, cores: usize, lines: &mut Vec<Line>) {
    let root = dir.join("many");
    let count = ((20_000.0 * scale) as usize).max(50);
    let bytes = common::write_many_files(&root, count, 11);
    let files = list_files(&root);
    println!("{count} files of 4-100 KiB: {:.1} MB", bytes as f64 / 1e6);
    let options = HashOptions::default();
    let reference = content_hash_with(&root, &options.clone().threads(1)).expect("hash");
    assert_eq!(reference.bytes, bytes);

    if wanted("cold") {
        let mut warm_floor = Best::new();
        warm_floor.time(|| plain_read(&files, FLOOR_INFLIGHT));
        evict(&files);
        match cached_bytes(&files) {
            Some(left) => println!(
                "eviction check: {left} of {bytes} bytes still cached after fsync + POSIX_FADV_DONTNEED (fincore)"
            ),
            None => println!("eviction check: fincore not available"),
        }
        let (mut floor, mut ours) = (Best::new(), Best::new());
        let mut read_ahead = 0;
        for _ in 0..runs {
            evict(&files);
            assert_eq!(floor.time(|| plain_read(&files, FLOOR_INFLIGHT)), bytes);
            evict(&files);
            let report = ours.time(|| content_hash_with(&root, &options).expect("hash"));
            assert_eq!(report.hash, reference.hash, "cold hash differs");
            read_ahead = report.read_ahead;
        }
        println!(
            "floor read ({FLOOR_INFLIGHT} in flight): {:.0} MB/s warm, {:.0} MB/s cold; cold hash read {read_ahead} of {count} files ahead",
            warm_floor.mb_s(bytes),
            floor.mb_s(bytes)
        );
        lines.push(Line::speed(
            format!("hash {count} files of 4-100 KiB, cold"),
            bytes,
            &ours,
            &floor,
            format!("{FLOOR_INFLIGHT} reads"),
            (">= 0.88", 0.88),
        ));
    }

    if wanted("warm") {
        let _ = content_hash_with(&root, &options).expect("hash");
        let (mut floor, mut ours) = (Best::new(), Best::new());
        let mut reading = Best::new();
        let mut bare = Best::new();
        let mut read_ahead = Vec::new();
        for _ in 0..runs {
            floor.time(|| sha_only(cores, bytes));
            let report = ours.time(|| content_hash_with(&root, &options).expect("hash"));
            assert_eq!(report.hash, reference.hash, "warm hash differs");
            read_ahead.push(report.read_ahead);
            assert_eq!(reading.time(|| plain_read(&files, cores)), bytes);
            assert_eq!(bare.time(|| read_and_hash(&files, cores)), bytes);
        }
        // Files read ahead in a warm run mean the kernel dropped some of
        // them meanwhile (proactive reclaim in a VM, say).
        println!("warm runs: files read ahead per run {read_ahead:?}");
        // Where the time goes: reading the files (open, copy out of the
        // page cache, close) on every core, without hashing, costs this
        // much; a hash that only added the two would reach the predicted
        // ratio.
        let predicted = 1.0 / (1.0 + reading.secs / floor.secs);
        println!(
            "warm: reading alone ({cores} threads, open + read + close, no hash) {:.0} MB/s = {:.0} % of the SHA-256 time; reading + hashing predict {predicted:.3} of the floor",
            reading.mb_s(bytes),
            100.0 * reading.secs / floor.secs
        );
        // The least any hash by `read` can do: a bare loop reading and
        // hashing the files on every core, without the walk, the order or
        // the folding the content hash needs.
        println!(
            "warm: bare read + SHA-256 loop ({cores} threads, no walk, no order) {:.0} MB/s = {:.3} of the floor; ours = {:.3}x the bare loop",
            bare.mb_s(bytes),
            floor.secs / bare.secs,
            bare.secs / ours.secs
        );
        lines.push(Line::speed(
            format!("hash {count} files of 4-100 KiB, warm"),
            bytes,
            &ours,
            &floor,
            format!("SHA-256, {cores} cores"),
            (">= 0.76", 0.76),
        ));
    }
    std::fs::remove_dir_all(&root).expect("clean up");
}

/// One 2 GiB file, warm.
fn big_file_row(dir: &Path, scale: f64, runs: usize, lines: &mut Vec<Line>) {
    let path = dir.join("big.bin");
    let len = ((2u64 << 30) as f64 * scale) as u64;
    common::write_random_file(&path, len, 7);
    let options = HashOptions::default();
    let _ = content_hash_with(&path, &options).expect("hash");
    let (mut floor, mut ours) = (Best::new(), Best::new());
    for _ in 0..runs {
        floor.time(|| sha_only(1, len));
        let report = ours.time(|| content_hash_with(&path, &options).expect("hash"));
        assert_eq!(report.bytes, len);
    }
    lines.push(Line::speed(
        format!(
            "hash one {:.2} GiB file, warm",
            len as f64 / (1u64 << 30) as f64
        ),
        len,
        &ours,
        &floor,
        "SHA-256, 1 core".to_owned(),
        (">= 0.95", 0.95),
    ));
    std::fs::remove_file(&path).expect("clean up");
}

/// `context.zip` of the 209 MB project against Python's `zipfile`.
fn archive_row(dir: &Path, scale: f64, runs: usize, lines: &mut Vec<Line>) {
    let tree = dir.join("proj");
    let source = common::Source::from_env();
    let (bytes, random) = common::write_mixed_tree(&tree, (209e6 * scale) as u64, 0.2, &source, 3);
    println!(
        "project: {:.1} MB, {:.0} % random, source from {}",
        bytes as f64 / 1e6,
        100.0 * random as f64 / bytes as f64,
        source.describe()
    );
    let py_zip = dir.join("python.zip");
    let mut python = Best::new();
    python.time(|| python_pack(&tree, &py_zip));
    let py_size = std::fs::metadata(&py_zip).expect("python.zip").len();
    let out = dir.join("context.zip");
    let options = PackOptions::default();
    let _ = pack(&tree, &out, &options).expect("pack");
    let mut ours = Best::new();
    let mut last = None;
    for _ in 0..runs {
        let report = ours.time(|| pack(&tree, &out, &options).expect("pack"));
        assert_eq!(report.bytes_in, bytes);
        last = Some(report);
    }
    let report = last.expect("at least one run");
    println!(
        "context.zip: {} entries, {} stored, {:.1} MB; Python's: {:.1} MB in {:.1} s",
        report.entries,
        report.stored,
        report.bytes_out as f64 / 1e6,
        py_size as f64 / 1e6,
        python.secs
    );
    let speed = ours.mb_s(bytes);
    let ratio = report.bytes_out as f64 / py_size as f64;
    lines.push(Line {
        work: format!(
            "context.zip of {:.0} MB ({:.0} % random)",
            bytes as f64 / 1e6,
            100.0 * random as f64 / bytes as f64
        ),
        ours: format!("{:.2} MB at {speed:.0} MB/s", report.bytes_out as f64 / 1e6),
        floor: format!(
            "{:.2} MB (Python, {:.0} MB/s)",
            py_size as f64 / 1e6,
            python.mb_s(bytes)
        ),
        ratio,
        target: "<= 1.00, >= 150 MB/s",
        met: ratio <= 1.0 && speed >= 150.0,
        cores: ours.cores(),
    });
}

/// Kinetic's archive of `root`: Python's `zipfile`, `ZIP_DEFLATED`, default
/// level, through the reference script of the packaging tests.
fn python_pack(root: &Path, out: &Path) {
    let script: PathBuf =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/zip_reference.py");
    let status = Command::new("python3")
        .arg(script)
        .arg("pack")
        .arg(root)
        .arg(out)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run python3");
    assert!(status.success(), "python3 zip_reference.py pack failed");
}
