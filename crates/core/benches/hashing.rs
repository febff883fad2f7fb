//! Content-hash speed against openssl's single-core SHA-256, same run.
//!
//! `cargo bench -p kinetic-core --bench hashing` — data sets are generated in
//! a temp dir and deleted afterwards. `KINETIC_BENCH_SCALE=0.05` for a quick
//! run; `KINETIC_BENCH_RUNS=N` repetitions (best reported).
//!
//! Targets: one 2 GiB file at >= 0.95 x openssl (one core); 20,000 files of
//! 4-100 KiB at >= 1.5 x openssl (all cores).

mod common;

use common::{Row, best_of, openssl_sha256_bytes_per_sec, print_table, scale};
use kinetic_core::hashing::{HashOptions, content_hash_with};

fn main() {
    // `cargo bench` passes `--bench`; there is nothing to filter.
    let scale = scale();
    let dir = tempfile::tempdir().expect("tempdir");

    let big_len = ((2u64 << 30) as f64 * scale) as u64;
    let big = dir.path().join("big.bin");
    common::write_random_file(&big, big_len, 7);
    let many_root = dir.path().join("many");
    let many_count = ((20_000.0 * scale) as usize).max(50);
    let many_bytes = common::write_many_files(&many_root, many_count, 11);

    let openssl = openssl_sha256_bytes_per_sec(3);
    let Some(openssl) = openssl else {
        eprintln!("openssl speed did not give a figure; is openssl installed?");
        std::process::exit(1);
    };
    println!(
        "openssl speed -evp sha256 -bytes 16384 (one core): {:.1} MB/s",
        openssl / 1e6
    );

    let all = HashOptions::default();
    let one = HashOptions::default().threads(1);
    // Warm-up (page cache, thread start-up) outside the measurement.
    let reference = content_hash_with(&many_root, &one).expect("hash");

    let (t_big, c_big, r_big) = best_of(|| content_hash_with(&big, &all).expect("hash"));
    let (t_many, c_many, r_many) = best_of(|| content_hash_with(&many_root, &all).expect("hash"));
    let (t_many1, c_many1, r_many1) =
        best_of(|| content_hash_with(&many_root, &one).expect("hash"));
    assert_eq!(r_many.hash, reference.hash, "thread count changed the hash");
    assert_eq!(r_many1.hash, reference.hash);
    assert_eq!(r_many.bytes, many_bytes);

    let ratio = |bytes: u64, secs: f64| bytes as f64 / secs / openssl;
    let rows = [
        Row {
            case: format!(
                "hash 1 file ({:.2} GiB)",
                big_len as f64 / (1u64 << 30) as f64
            ),
            bytes: r_big.bytes,
            files: 1,
            seconds: t_big,
            cpu: c_big,
            figure: ratio(r_big.bytes, t_big),
            unit: "x ssl",
            target: 0.95,
        },
        Row {
            case: format!("hash {many_count} files, all cores"),
            bytes: r_many.bytes,
            files: r_many.files,
            seconds: t_many,
            cpu: c_many,
            figure: ratio(r_many.bytes, t_many),
            unit: "x ssl",
            target: 1.5,
        },
        Row {
            case: format!("hash {many_count} files, 1 thread (info)"),
            bytes: r_many1.bytes,
            files: r_many1.files,
            seconds: t_many1,
            cpu: c_many1,
            figure: ratio(r_many1.bytes, t_many1),
            unit: "x ssl",
            target: 0.0,
        },
    ];
    // Other load on the machine shows up as a gap between the two figures.
    if let Some(after) = openssl_sha256_bytes_per_sec(3) {
        println!(
            "openssl again after the measurements: {:.1} MB/s (ratios use the first figure)",
            after / 1e6
        );
    }
    print_table(
        &format!(
            "content hash (scale {scale}, best of {} runs, {} cores)",
            common::runs(),
            std::thread::available_parallelism().map_or(1, |n| n.get())
        ),
        &rows,
    );
}
