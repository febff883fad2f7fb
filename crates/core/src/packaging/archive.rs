//! Writing `context.zip` with the entries Python's `zipfile` would write.
//!
//! Kinetic writes each file with `ZipFile.write` (so `ZipInfo.from_file`:
//! name relative to the root, `date_time` from the mtime in local time,
//! `external_attr = (st_mode & 0xFFFF) << 16`, `create_system = 3` (Unix),
//! deflate), each empty directory with `writestr(ZipInfo("rel/"))` (stored,
//! 1980-01-01, `external_attr = (0o40755 << 16) | 0x10`), and the plan with
//! `writestr(".kinetic/plan.json", …)` (deflate, current local time,
//! `external_attr = 0o600 << 16`). We produce the same fields with the
//! `zip` crate: its `external_attributes` and `system` options set them
//! verbatim, and `ZipFileBuilder` / `add_prepared_file` let the files be
//! compressed in parallel and copied into the archive in walk order. So no
//! hand-written ZIP writer is needed.
//!
//! One field differs on purpose: a file that deflate cannot shrink (model
//! weights, images, archives) is *stored*, where Python deflates it and the
//! entry grows a little. Every other field (name, sizes, CRC, mode, creator
//! system, time) stays Python's, and any ZIP reader, Python's included,
//! extracts the same bytes. Deflate runs at Python's level 6 by default
//! (zlib-rs, which compresses source code as well as zlib and faster); the
//! compressed bytes themselves differ from Python's.
//!
//! Whether a file is worth deflating is decided cheaply, from three samples
//! of [`PROBE_SAMPLE`] bytes (its start, middle and end): one with a low
//! byte entropy (text, code, most data formats) means deflate; when all look
//! random, the first is deflated at a fast level and must shrink by
//! [`PROBE_MIN_GAIN`]. A file deflated in memory whose output is still not
//! smaller than its input is stored as well (tiny and empty files, mostly).
//!
//! Files up to [`SMALL_FILE_MAX`] are read whole by a worker and compressed
//! there; larger ones are streamed into the archive by the writing thread
//! with a fixed buffer, never loaded whole.

use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::FileExt;

use chrono::{Datelike, Local, TimeZone, Timelike};
use flate2::{Compress, Compression, FlushCompress};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, PreparedZipFile, System, ZipWriter};

use super::PackWarning;
use super::walk::{FileEntry, Step};
use crate::hashing::{batched_by_weight, ordered_map};

/// Files up to this size are compressed in parallel in memory.
pub(crate) const SMALL_FILE_MAX: u64 = 4 << 20;
/// Streamed files at least this large get ZIP64 headers up front.
const ZIP64_STREAM_THRESHOLD: u64 = 0xF000_0000;
/// Files handed to a compression thread at once…
const BATCH: usize = 8;
/// …unless they add up to this many bytes first. With the window below,
/// this bounds the compressed data held in memory to a few tens of MiB.
const BATCH_BYTES: u64 = 1 << 20;
/// Batches in flight per thread.
const WINDOW_PER_THREAD: usize = 4;
/// Buffer for streaming large files (it also holds the samples).
const STREAM_BUFFER: usize = 1 << 20;
/// Bytes in each of the samples that decide whether a file is deflated.
pub(crate) const PROBE_SAMPLE: usize = 16 << 10;
/// A sample must shrink at least this much (as a fraction of its size) for
/// its file to be deflated.
const PROBE_MIN_GAIN: f64 = 0.02;
/// Deflate level of the sample.
const PROBE_LEVEL: u32 = 2;
/// Bits per byte below which a sample is taken as compressible without
/// trying (text is at 4–6; compressed or random data near 8).
const PROBE_ENTROPY: f64 = 7.0;
/// `external_attr` of an empty-directory entry (`drwxr-xr-x` + MS-DOS dir).
const DIR_EXTERNAL_ATTR: u32 = (0o40755 << 16) | 0x10;
/// `external_attr` Python's `writestr` gives a file named by a string.
const WRITESTR_EXTERNAL_ATTR: u32 = 0o600 << 16;

/// What was written.
#[derive(Debug, Default)]
pub(crate) struct Written {
    pub(crate) entries: usize,
    pub(crate) files: usize,
    pub(crate) dirs: usize,
    /// Files stored rather than deflated.
    pub(crate) stored: usize,
    pub(crate) bytes_in: u64,
    /// (uncompressed size, archive name) of every archived file.
    pub(crate) archived: Vec<(u64, String)>,
    /// Archive names of credential-shaped files.
    pub(crate) secrets: Vec<String>,
    pub(crate) warnings: Vec<PackWarning>,
}

enum Outcome {
    Prepared {
        entry: FileEntry,
        prepared: PreparedZipFile,
        stored: bool,
    },
    Stream(FileEntry),
    Failed(FileEntry, String),
    DirDone {
        arcname: String,
        keeps_subdirs: bool,
        is_root: bool,
    },
}

/// Writes the steps (and the plan, last) as a ZIP archive into `writer`.
pub(crate) fn write_archive<W: Write + Seek>(
    writer: W,
    steps: Vec<Step>,
    plan_json: Option<&str>,
    level: u32,
    threads: usize,
) -> io::Result<(W, Written)> {
    let level = i64::from(level.clamp(1, 9));
    let mut zip = ZipWriter::new(writer);
    let mut out = Written::default();
    let mut wrote_in_dir = false;
    let mut stream_buf = Vec::new();
    let mut stream_probe = Probe::new();

    ordered_map(
        threads,
        threads * WINDOW_PER_THREAD,
        batched_by_weight(
            steps.into_iter().map(Ok::<Step, io::Error>),
            BATCH,
            BATCH_BYTES,
            |step| match step {
                // Streamed files are read by the writing thread, not held.
                Step::File(entry) if entry.size <= SMALL_FILE_MAX => entry.size,
                _ => 0,
            },
        ),
        || (Vec::new(), Probe::new()),
        |(buf, probe): &mut (Vec<u8>, Probe), batch: Vec<Step>| {
            batch
                .into_iter()
                .map(|step| prepare(buf, probe, step, level))
                .collect::<Vec<_>>()
        },
        |outcomes| {
            for outcome in outcomes {
                match outcome {
                    Outcome::Prepared {
                        entry,
                        prepared,
                        stored,
                    } => {
                        zip.add_prepared_file(prepared)?;
                        record(&mut out, &entry, entry.size, stored);
                        wrote_in_dir = true;
                    }
                    Outcome::Stream(entry) => {
                        if stream_buf.is_empty() {
                            stream_buf = vec![0u8; STREAM_BUFFER];
                        }
                        match stream(&mut zip, &entry, level, &mut stream_buf, &mut stream_probe)? {
                            Ok((size, stored)) => {
                                record(&mut out, &entry, size, stored);
                                wrote_in_dir = true;
                            }
                            Err(reason) => out.warnings.push(PackWarning::UnreadableFile {
                                path: entry.path,
                                reason,
                            }),
                        }
                    }
                    Outcome::Failed(entry, reason) => {
                        out.warnings.push(PackWarning::UnreadableFile {
                            path: entry.path,
                            reason,
                        });
                    }
                    Outcome::DirDone {
                        arcname,
                        keeps_subdirs,
                        is_root,
                    } => {
                        if !wrote_in_dir && !keeps_subdirs && !is_root {
                            let options = SimpleFileOptions::default()
                                .compression_method(CompressionMethod::Stored)
                                .system(System::Unix)
                                .external_attributes(DIR_EXTERNAL_ATTR)
                                .last_modified_time(DateTime::default());
                            zip.add_directory(format!("{arcname}/"), options)?;
                            out.entries += 1;
                            out.dirs += 1;
                        }
                        wrote_in_dir = false;
                    }
                }
            }
            Ok(())
        },
    )?;

    if let Some(json) = plan_json {
        let options = SimpleFileOptions::default()
            .compression_method(CompressionMethod::Deflated)
            .compression_level(Some(level))
            .system(System::Unix)
            .external_attributes(WRITESTR_EXTERNAL_ATTR)
            .last_modified_time(now_local());
        zip.start_file(super::plan::PLAN_ARCHIVE_NAME, options)?;
        zip.write_all(json.as_bytes())?;
        out.entries += 1;
    }
    let writer = zip.finish()?;
    Ok((writer, out))
}

fn record(out: &mut Written, entry: &FileEntry, size: u64, stored: bool) {
    out.entries += 1;
    out.files += 1;
    out.stored += usize::from(stored);
    out.bytes_in += size;
    out.archived.push((size, entry.arcname.clone()));
    if entry.secret {
        out.secrets.push(entry.arcname.clone());
    }
}

fn file_options(entry: &FileEntry, method: CompressionMethod, level: i64) -> SimpleFileOptions {
    let level = (method == CompressionMethod::Deflated).then_some(level);
    SimpleFileOptions::default()
        .compression_method(method)
        .compression_level(level)
        .system(System::Unix)
        .external_attributes((entry.mode & 0xFFFF) << 16)
        .last_modified_time(zip_time(entry.mtime_sec, entry.mtime_nsec))
}

/// The deflate test of a sample, with its state kept between files.
struct Probe {
    deflate: Compress,
    out: Vec<u8>,
}

impl Probe {
    fn new() -> Self {
        Self {
            deflate: Compress::new(Compression::new(PROBE_LEVEL), false),
            out: Vec::with_capacity(PROBE_SAMPLE + PROBE_SAMPLE / 8 + 64),
        }
    }

    /// The method for a file, judged from samples of it (its start first):
    /// deflated as soon as one sample looks compressible (low byte
    /// entropy); stored when none does and the first one does not shrink
    /// when deflated either. A file too short to sample is deflated (and
    /// then compared whole).
    fn method(&mut self, samples: &[&[u8]]) -> CompressionMethod {
        let Some(first) = samples.first().filter(|s| s.len() >= PROBE_SAMPLE) else {
            return CompressionMethod::Deflated;
        };
        if samples.iter().any(|s| order0_entropy(s) < PROBE_ENTROPY) {
            // Huffman coding alone shrinks it: no need to try.
            return CompressionMethod::Deflated;
        }
        self.deflate.reset();
        self.out.clear();
        let done = self
            .deflate
            .compress_vec(first, &mut self.out, FlushCompress::Finish);
        let shrunk = matches!(done, Ok(flate2::Status::StreamEnd))
            && (self.out.len() as f64) < first.len() as f64 * (1.0 - PROBE_MIN_GAIN);
        if shrunk {
            CompressionMethod::Deflated
        } else {
            CompressionMethod::Stored
        }
    }

    /// [`Probe::method`] for a file held whole in memory.
    fn method_of(&mut self, data: &[u8]) -> CompressionMethod {
        let [start, middle, end] = sample_offsets(data.len() as u64);
        let at = |offset: u64| {
            let offset = offset as usize;
            &data[offset..data.len().min(offset + PROBE_SAMPLE)]
        };
        self.method(&[at(start), at(middle), at(end)])
    }
}

/// Where the samples of a file of `len` bytes start: its start, middle and
/// end (overlapping for a short file).
fn sample_offsets(len: u64) -> [u64; 3] {
    let last = len.saturating_sub(PROBE_SAMPLE as u64);
    [0, last / 2, last]
}

/// The order-0 entropy of `data` in bits per byte (8 for uniform bytes).
fn order0_entropy(data: &[u8]) -> f64 {
    let mut counts = [0u32; 256];
    for &b in data {
        counts[usize::from(b)] += 1;
    }
    let n = data.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

/// Worker side: read and compress a small file, or pass the step on.
fn prepare(buf: &mut Vec<u8>, probe: &mut Probe, step: Step, level: i64) -> Outcome {
    let entry = match step {
        Step::File(entry) => entry,
        Step::DirDone {
            arcname,
            keeps_subdirs,
            is_root,
        } => {
            return Outcome::DirDone {
                arcname,
                keeps_subdirs,
                is_root,
            };
        }
    };
    if entry.size > SMALL_FILE_MAX {
        return Outcome::Stream(entry);
    }
    let file = match File::open(&entry.path) {
        Ok(file) => file,
        Err(e) => return Outcome::Failed(entry, e.to_string()),
    };
    buf.clear();
    // One byte past the limit tells a file that grew since the walk.
    if let Err(e) = file.take(SMALL_FILE_MAX + 1).read_to_end(buf) {
        return Outcome::Failed(entry, e.to_string());
    }
    if buf.len() as u64 > SMALL_FILE_MAX {
        return Outcome::Stream(entry);
    }
    let method = probe.method_of(buf);
    let mut stored = method == CompressionMethod::Stored;
    let prepared =
        PreparedZipFile::from_data(&entry.arcname, file_options(&entry, method, level), buf)
            .and_then(|prepared| {
                if !stored && prepared.compressed_size() >= prepared.uncompressed_size() {
                    stored = true;
                    let options = file_options(&entry, CompressionMethod::Stored, level);
                    PreparedZipFile::from_data(&entry.arcname, options, buf)
                } else {
                    Ok(prepared)
                }
            });
    match prepared {
        Ok(prepared) => Outcome::Prepared {
            entry,
            prepared,
            stored,
        },
        Err(e) => Outcome::Failed(entry, e.to_string()),
    }
}

/// Writer side: stream a large file into the archive; returns its size and
/// whether it was stored. The outer error is a failure of the archive; the
/// inner one a failure to read the file, after which the partial entry is
/// removed.
fn stream<W: Write + Seek>(
    zip: &mut ZipWriter<W>,
    entry: &FileEntry,
    level: i64,
    buf: &mut [u8],
    probe: &mut Probe,
) -> io::Result<Result<(u64, bool), String>> {
    let mut file = match File::open(&entry.path) {
        Ok(file) => file,
        Err(e) => return Ok(Err(e.to_string())),
    };
    // Samples decide the method; the first block then goes in first.
    let mut head = 0;
    while head < PROBE_SAMPLE {
        match file.read(&mut buf[head..PROBE_SAMPLE]) {
            Ok(0) => break,
            Ok(n) => head += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Ok(Err(e.to_string())),
        }
    }
    let [_, middle, end] = sample_offsets(entry.size);
    let (first, rest) = buf.split_at_mut(PROBE_SAMPLE);
    let (mid_buf, end_buf) = rest[..2 * PROBE_SAMPLE].split_at_mut(PROBE_SAMPLE);
    let method = match (
        file.read_exact_at(mid_buf, middle),
        file.read_exact_at(end_buf, end),
    ) {
        (Ok(()), Ok(())) => probe.method(&[&first[..head], mid_buf, end_buf]),
        // The file shrank since the walk: let deflate judge it.
        _ => CompressionMethod::Deflated,
    };
    let options =
        file_options(entry, method, level).large_file(entry.size >= ZIP64_STREAM_THRESHOLD);
    zip.start_file(entry.arcname.as_str(), options)?;
    zip.write_all(&buf[..head])?;
    let mut total = head as u64;
    loop {
        match file.read(buf) {
            Ok(0) => return Ok(Ok((total, method == CompressionMethod::Stored))),
            Ok(n) => {
                zip.write_all(&buf[..n])?;
                total += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                zip.abort_file()?;
                return Ok(Err(e.to_string()));
            }
        }
    }
}

/// The ZIP timestamp Python's `ZipInfo.from_file` records for an mtime:
/// `time.localtime(st_mtime)` (the float, floored to whole seconds), clamped
/// to 1980-01-01 00:00:00 ..= 2107-12-31 23:59:59 (`strict_timestamps=False`).
pub(crate) fn zip_time(sec: i64, nsec: i64) -> DateTime {
    // `st_mtime` is the double `sec + nsec * 1e-9`; rounding can carry it
    // into the next second, and Python floors that double.
    let float = sec as f64 + nsec as f64 * 1e-9;
    let whole = float.floor() as i64;
    let Some(local) = Local.timestamp_opt(whole, 0).earliest() else {
        return DateTime::default();
    };
    let parts = if local.year() < 1980 {
        (1980, 1, 1, 0, 0, 0)
    } else if local.year() > 2107 {
        (2107, 12, 31, 23, 59, 59)
    } else {
        (
            local.year(),
            local.month(),
            local.day(),
            local.hour(),
            local.minute(),
            local.second(),
        )
    };
    dos_time(parts)
}

fn now_local() -> DateTime {
    let now = Local::now();
    dos_time((
        now.year(),
        now.month(),
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
    ))
}

fn dos_time((y, mo, d, h, mi, s): (i32, u32, u32, u32, u32, u32)) -> DateTime {
    let narrow = |v: u32| u8::try_from(v).unwrap_or(u8::MAX);
    u16::try_from(y)
        .ok()
        .and_then(|y| {
            DateTime::from_date_and_time(y, narrow(mo), narrow(d), narrow(h), narrow(mi), narrow(s))
                .ok()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_before_1980_and_after_2107_are_clamped() {
        let t = zip_time(0, 0);
        assert_eq!(
            (
                t.year(),
                t.month(),
                t.day(),
                t.hour(),
                t.minute(),
                t.second()
            ),
            (1980, 1, 1, 0, 0, 0)
        );
        let t = zip_time(5_000_000_000, 0); // year 2128
        assert_eq!(
            (
                t.year(),
                t.month(),
                t.day(),
                t.hour(),
                t.minute(),
                t.second()
            ),
            (2107, 12, 31, 23, 59, 58)
        );
    }
}
