//! `kinetic pack` speed: 5,000 Python-like source files (about 200 MB).
//!
//! `cargo bench -p kinetic-core --bench packaging` — the tree is generated
//! in a temp dir and deleted afterwards. `KINETIC_BENCH_SCALE=0.05` for a
//! quick run; `KINETIC_BENCH_RUNS=N` repetitions (best reported);
//! `KINETIC_BENCH_LEVELS=1,6` deflate levels to measure (default 1).
//!
//! Target: >= 150 MB/s of input bytes with the default options.

mod common;

use common::{Row, best_of, print_table, scale};
use kinetic_core::packaging::{DEFAULT_COMPRESSION_LEVEL, PackOptions, pack};

fn main() {
    let scale = scale();
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("proj");
    let count = ((5_000.0 * scale) as usize).max(50);
    let bytes = common::write_source_tree(&root, count, 3);
    let out = dir.path().join("context.zip");

    let levels: Vec<u32> = std::env::var("KINETIC_BENCH_LEVELS")
        .ok()
        .map(|s| s.split(',').filter_map(|l| l.trim().parse().ok()).collect())
        .filter(|v: &Vec<u32>| !v.is_empty())
        .unwrap_or_else(|| vec![DEFAULT_COMPRESSION_LEVEL]);

    // Warm-up: page cache and thread start-up.
    pack(&root, &out, &PackOptions::default()).expect("pack");

    let mut rows = Vec::new();
    for level in levels {
        for threads in [0usize, 1] {
            let options = PackOptions::default()
                .compression_level(level)
                .threads(threads);
            let (secs, cpu, report) = best_of(|| pack(&root, &out, &options).expect("pack"));
            assert_eq!(report.bytes_in, bytes);
            let mb_s = bytes as f64 / secs / 1e6;
            rows.push(Row {
                case: format!(
                    "pack {count} files, level {level}, {}",
                    if threads == 0 {
                        "all cores".to_owned()
                    } else {
                        "1 thread".to_owned()
                    }
                ),
                bytes,
                files: report.files as u64,
                seconds: secs,
                cpu,
                figure: mb_s,
                unit: "MB/s",
                target: if threads == 0 && level == DEFAULT_COMPRESSION_LEVEL {
                    150.0
                } else {
                    0.0
                },
            });
            println!(
                "level {level} threads {threads}: {:.1} MB -> {:.1} MB (ratio {:.2})",
                bytes as f64 / 1e6,
                report.bytes_out as f64 / 1e6,
                bytes as f64 / report.bytes_out as f64
            );
        }
    }
    print_table(
        &format!(
            "packaging (scale {scale}, best of {} runs, {} cores, input MB/s)",
            common::runs(),
            std::thread::available_parallelism().map_or(1, |n| n.get())
        ),
        &rows,
    );
}
