//! Helpers of the speed bench: data sets in a temp dir, page-cache eviction
//! and its check, the cold-read floor, CPU time and the openssl figure.

#![allow(missing_docs)]

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::Command;

/// Size scale from `KINETIC_BENCH_SCALE` (default 1.0): `0.05` makes a quick
/// run with data sets twenty times smaller.
pub(crate) fn scale() -> f64 {
    std::env::var("KINETIC_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(1.0)
}

/// Repetitions per measurement from `KINETIC_BENCH_RUNS` (default 5); the
/// best run is reported, since other load on the machine only slows runs.
pub(crate) fn runs() -> usize {
    std::env::var("KINETIC_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(5)
}

/// A small fast PRNG (xorshift64*), so data sets are reproducible.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    pub(crate) fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// Writes `len` pseudo-random bytes to `path` and flushes them to disk, so
/// write-back does not compete with the measurement.
pub(crate) fn write_random_file(path: &Path, len: u64, seed: u64) {
    let mut rng = Rng::new(seed);
    let mut file = fs::File::create(path).expect("create");
    let mut buf = vec![0u8; 4 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        rng.fill(&mut buf[..n]);
        file.write_all(&buf[..n]).expect("write");
        left -= n as u64;
    }
    file.sync_all().expect("sync");
}

/// `count` files of 4–100 KiB of random bytes, 200 per subdirectory.
/// Returns the total size.
pub(crate) fn write_many_files(root: &Path, count: usize, seed: u64) -> u64 {
    let mut rng = Rng::new(seed);
    let mut buf = vec![0u8; 100 << 10];
    let mut total = 0u64;
    for i in 0..count {
        let dir = root.join(format!("d{:03}", i / 200));
        if i % 200 == 0 {
            fs::create_dir_all(&dir).expect("mkdir");
        }
        let len = (4 << 10) + rng.below((96 << 10) + 1) as usize;
        rng.fill(&mut buf[..len]);
        fs::write(dir.join(format!("f{i:05}.bin")), &buf[..len]).expect("write");
        total += len as u64;
    }
    total
}

const WORDS: &[&str] = &[
    "def",
    "return",
    "self",
    "import",
    "from",
    "class",
    "if",
    "else",
    "for",
    "in",
    "None",
    "True",
    "False",
    "np",
    "jax",
    "keras",
    "model",
    "batch",
    "loss",
    "grad",
    "params",
    "config",
    "data",
    "train",
    "step",
    "logits",
    "labels",
    "optimizer",
    "update",
    "state",
    "x",
    "y",
    "i",
    "len",
    "range",
    "dict",
    "list",
    "print",
    "assert",
    "lambda",
    "yield",
    "with",
    "as",
    "try",
    "except",
    "raise",
    "value",
    "key",
    "shape",
    "dtype",
    "float32",
    "mean",
    "sum",
    "axis",
];

/// One Python-looking source file of about `target` bytes.
pub(crate) fn python_like_source(rng: &mut Rng, target: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(target + 128);
    while out.len() < target {
        let indent = rng.below(4) as usize * 4;
        out.extend(std::iter::repeat_n(b' ', indent));
        match rng.below(6) {
            0 => {
                let name = WORDS[rng.below(WORDS.len() as u64) as usize];
                out.extend_from_slice(
                    format!("def {name}_{}(self, x, y=None):\n", rng.below(500)).as_bytes(),
                );
            }
            1 => {
                out.extend_from_slice(b"# ");
                for _ in 0..(3 + rng.below(8)) {
                    out.extend_from_slice(WORDS[rng.below(WORDS.len() as u64) as usize].as_bytes());
                    out.push(b' ');
                }
                out.push(b'\n');
            }
            _ => {
                let n = 2 + rng.below(9);
                for j in 0..n {
                    out.extend_from_slice(WORDS[rng.below(WORDS.len() as u64) as usize].as_bytes());
                    if rng.below(5) == 0 {
                        out.extend_from_slice(format!("_{}", rng.below(100)).as_bytes());
                    }
                    out.extend_from_slice(match (j + 1 == n, rng.below(4)) {
                        (true, _) => b"\n",
                        (false, 0) => b" = ",
                        (false, 1) => b".",
                        (false, 2) => b"(",
                        _ => b" ",
                    });
                }
            }
        }
    }
    out
}

/// openssl's single-core SHA-256 speed on 16 KiB blocks, in bytes/s.
pub(crate) fn openssl_sha256_bytes_per_sec(seconds: u32) -> Option<f64> {
    let output = Command::new("openssl")
        .args(["speed", "-evp", "sha256", "-bytes", "16384", "-seconds"])
        .arg(seconds.to_string())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    // The result line: "sha256    1920442.01k" (thousands of bytes per second).
    let line = text
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with("sha256"))?;
    let figure = line.split_whitespace().last()?;
    let kilo = figure.strip_suffix('k')?.parse::<f64>().ok()?;
    Some(kilo * 1000.0)
}

/// CPU time (user + system, all threads) this process has used, in
/// seconds, from `/proc/self/stat`; `None` where that is not available.
pub(crate) fn process_cpu_seconds() -> Option<f64> {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    let ticks = *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
            .unwrap_or(100.0)
    });
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / ticks)
}

/// Where the source part of [`write_mixed_tree`] comes from.
pub(crate) enum Source {
    /// The `.py` files of the standard library of `python3` (real code).
    PythonStdlib(Vec<std::path::PathBuf>),
    /// [`python_like_source`]: words drawn uniformly from a small list, a
    /// worst case for deflate's matching (no phrase ever repeats).
    Synthetic,
}

impl Source {
    /// `KINETIC_BENCH_SOURCE=synthetic` picks the generator; otherwise the
    /// standard library of `python3`, or the generator when it has none.
    pub(crate) fn from_env() -> Self {
        if std::env::var("KINETIC_BENCH_SOURCE").is_ok_and(|s| s == "synthetic") {
            return Self::Synthetic;
        }
        let stdlib = Command::new("python3")
            .args([
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['stdlib'])",
            ])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
        let mut files = Vec::new();
        if let Some(dir) = stdlib {
            collect_py(Path::new(&dir), &mut files);
        }
        files.sort();
        if files.is_empty() {
            println!("no Python standard library found: using synthetic source");
            Self::Synthetic
        } else {
            Self::PythonStdlib(files)
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            Self::PythonStdlib(files) => {
                format!(
                    "the {} .py files of python3's standard library",
                    files.len()
                )
            }
            Self::Synthetic => "synthetic word salad (python_like_source)".to_owned(),
        }
    }
}

fn collect_py(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let name = entry.file_name();
        if kind.is_dir() && name != "site-packages" && name != "__pycache__" {
            collect_py(&path, out);
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "py") {
            out.push(path);
        }
    }
}

/// A project tree of about `total` bytes of which `incompressible` (a
/// fraction) is random bytes, as model weights, images or archives are, and
/// the rest source code from `source` (cycled through as often as needed,
/// in a package layout). The random part is spread over files of
/// 64 KiB–1 MiB and one file above the archive's in-memory limit (so it is
/// streamed). Returns (total bytes, random bytes).
pub(crate) fn write_mixed_tree(
    root: &Path,
    total: u64,
    incompressible: f64,
    source: &Source,
    seed: u64,
) -> (u64, u64) {
    let mut rng = Rng::new(seed);
    let random_target = (total as f64 * incompressible) as u64;
    let source_target = total - random_target;
    let mut random = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    let assets = root.join("assets");
    fs::create_dir_all(&assets).expect("mkdir");
    // One large file (streamed by the packer), then smaller ones.
    let big = (random_target / 4).min(12 << 20);
    if big > (4 << 20) {
        write_random_file(&assets.join("weights.bin"), big, rng.next_u64());
        random += big;
    }
    let mut i = 0;
    while random < random_target {
        let len = ((64 << 10) + rng.below(960 << 10)).min(random_target - random) as usize;
        rng.fill(&mut buf[..len]);
        let ext = ["npy", "png", "gz", "pt"][i % 4];
        fs::write(assets.join(format!("blob_{i:04}.{ext}")), &buf[..len]).expect("write");
        random += len as u64;
        i += 1;
    }
    let mut i = 0;
    let mut written = 0u64;
    while written < source_target {
        let dir = root.join(format!("pkg{:02}/mod{:02}", i / 500, (i / 50) % 10));
        if i % 50 == 0 {
            fs::create_dir_all(&dir).expect("mkdir");
        }
        let (name, mut src) = match source {
            Source::PythonStdlib(files) => {
                let from = &files[i % files.len()];
                let name = from
                    .file_name()
                    .expect("name")
                    .to_string_lossy()
                    .into_owned();
                (name, fs::read(from).expect("read stdlib file"))
            }
            Source::Synthetic => {
                let want = (8 << 10) + rng.below(64 << 10) as usize;
                ("gen.py".to_owned(), python_like_source(&mut rng, want))
            }
        };
        src.truncate((source_target - written) as usize);
        fs::write(dir.join(format!("f{i:05}_{name}")), &src).expect("write");
        written += src.len() as u64;
        i += 1;
    }
    (random + written, random)
}

/// Every regular file under `root`, in sorted walk order.
pub(crate) fn list_files(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = fs::read_dir(root)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            out.extend(list_files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Drops the files' pages from the page cache without privileges: `fsync`
/// (only clean pages can be dropped), then `POSIX_FADV_DONTNEED`. Inodes and
/// directory entries stay cached.
pub(crate) fn evict(paths: &[std::path::PathBuf]) {
    use nix::fcntl::{PosixFadviseAdvice, posix_fadvise};
    for path in paths {
        let file = fs::File::open(path).expect("open");
        file.sync_all().expect("fsync");
        posix_fadvise(&file, 0, 0, PosixFadviseAdvice::POSIX_FADV_DONTNEED).expect("fadvise");
    }
}

/// Bytes of `paths` resident in the page cache, from util-linux `fincore`
/// (`None` when it is not installed). Used to check that [`evict`] worked.
pub(crate) fn cached_bytes(paths: &[std::path::PathBuf]) -> Option<u64> {
    let mut total = 0;
    for chunk in paths.chunks(500) {
        let output = Command::new("fincore")
            .args(["--bytes", "--noheadings", "--output", "RES"])
            .args(chunk)
            .output()
            .ok()?;
        if !output.status.success() {
            return None;
        }
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            total += line.trim().parse::<u64>().ok()?;
        }
    }
    Some(total)
}

/// The floor of a cold read: `inflight` threads, each reading whole files
/// (taken in order from a shared counter) and doing nothing with the bytes.
/// Returns the bytes read.
pub(crate) fn plain_read(paths: &[std::path::PathBuf], inflight: usize) -> u64 {
    read_files(paths, inflight, false)
}

/// The simplest read-and-hash loop: `threads` threads, each taking whole
/// files from a shared counter, reading each to its end through one buffer
/// and hashing its bytes with SHA-256 as they come. No walk, no order, no
/// folding: the least work a hash of these files can do by `read`. Returns
/// the bytes read.
pub(crate) fn read_and_hash(paths: &[std::path::PathBuf], threads: usize) -> u64 {
    read_files(paths, threads, true)
}

fn read_files(paths: &[std::path::PathBuf], threads: usize, hash: bool) -> u64 {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let total = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut buf = vec![0u8; 256 << 10];
                let mut mine = 0u64;
                let mut digests = 0u8;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(path) = paths.get(i) else { break };
                    let mut file = fs::File::open(path).expect("open");
                    let mut hasher = Sha256::new();
                    loop {
                        let n = file.read(&mut buf).expect("read");
                        if n == 0 {
                            break;
                        }
                        if hash {
                            hasher.update(&buf[..n]);
                        }
                        mine += n as u64;
                    }
                    if hash {
                        digests ^= hasher.finalize()[0];
                    }
                }
                std::hint::black_box(digests);
                total.fetch_add(mine, Ordering::Relaxed);
            });
        }
    });
    total.into_inner()
}

/// The load averages from `/proc/loadavg` ("1-min 5-min 15-min").
pub(crate) fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}
