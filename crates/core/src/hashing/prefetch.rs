//! Keeping a cold disk busy while hashing stays on a few threads.
//!
//! The hashing threads (one per core) read and hash each file inline, the
//! cheapest way when the files are in the page cache. When they are not,
//! those threads alone would have one read in flight each, far too few for
//! an SSD or a network disk. So the first read of every file is a probe that
//! never waits for the disk (`preadv2` with `RWF_NOWAIT`). A miss tells the
//! walk that the data is cold; from then on every file the walk hands out
//! is also queued to a pool of reader threads, which open it and ask the
//! kernel to read it in (`POSIX_FADV_WILLNEED`). Those reads proceed
//! asynchronously, so every file between the hashing threads and the walk
//! (a few hundred) is in flight at once; the hashing threads then find their
//! files cached, or wait for reads already under way. The readers only open
//! files and post requests, so they cost little CPU; there are more of them
//! than cores so that opens waiting on cold metadata do not hold the others
//! up.
//!
//! The readers also probe: while they keep finding files uncached, the
//! read-ahead stays on; once nothing has missed for [`HORIZON`] files it
//! stops. A warm tree never starts the pool, and its probe is simply its
//! first read, so it costs nothing.
//!
//! Only the first [`READ_AHEAD_MAX`] bytes of a file are requested (the
//! kernel may cap a request at its read-ahead window); the kernel's
//! sequential read-ahead serves the rest of a large file as it is hashed.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::Scope;

/// Bytes from the start of each file the readers ask the kernel for.
const READ_AHEAD_MAX: u64 = 1 << 20;
/// Read-ahead stays on for this many files after the last miss.
const HORIZON: u64 = 1024;

/// What the hashing threads and the readers learn about the page cache,
/// shared with the walk. Files are numbered in walk order from 1 (`seq`).
#[derive(Debug, Default)]
pub(crate) struct CacheState {
    /// `seq` of the newest file found uncached (0: none yet).
    last_miss: AtomicU64,
    /// Every file up to this `seq` has been hashed.
    hashed: AtomicU64,
    /// The run is over (finished or failed): readers stop.
    done: AtomicBool,
    /// Files queued for reading ahead.
    queued: AtomicU64,
    /// A probe could not tell (the file system does not support it): the
    /// hashing threads stop probing.
    unprobed: AtomicBool,
}

impl CacheState {
    /// File `seq` was not in the page cache.
    pub(crate) fn miss(&self, seq: u64) {
        self.last_miss.fetch_max(seq, Ordering::Relaxed);
    }

    /// Every file up to `seq` has been hashed: reading it ahead is too late.
    pub(crate) fn hashed_up_to(&self, seq: u64) {
        self.hashed.fetch_max(seq, Ordering::Relaxed);
    }

    /// Whether the hashing threads should still probe.
    pub(crate) fn probing(&self) -> bool {
        !self.unprobed.load(Ordering::Relaxed)
    }

    /// A probe could not tell cached from uncached.
    pub(crate) fn cannot_probe(&self) {
        self.unprobed.store(true, Ordering::Relaxed);
    }

    /// Files queued for reading ahead so far.
    pub(crate) fn queued(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
    }

    /// Whether file `seq`, handed out now, should be read ahead.
    fn cold_near(&self, seq: u64) -> bool {
        let miss = self.last_miss.load(Ordering::Relaxed);
        miss > 0 && seq < miss + HORIZON
    }
}

/// The reader pool, started on first need inside a thread scope. Dropping
/// it stops the readers.
pub(crate) struct Prefetcher<'scope, 'env> {
    scope: &'scope Scope<'scope, 'env>,
    state: &'env CacheState,
    readers: usize,
    queue: Option<mpsc::Sender<(u64, PathBuf)>>,
}

impl<'scope, 'env> Prefetcher<'scope, 'env> {
    pub(crate) fn new(
        scope: &'scope Scope<'scope, 'env>,
        state: &'env CacheState,
        readers: usize,
    ) -> Self {
        Self {
            scope,
            state,
            readers,
            queue: None,
        }
    }

    /// Called by the walk for each file it hands out: queues the file for
    /// reading ahead while the tree is cold.
    pub(crate) fn offer(&mut self, seq: u64, path: &Path) {
        if self.readers == 0 || !self.state.cold_near(seq) {
            return;
        }
        let queue = self.queue.get_or_insert_with(|| {
            let (tx, rx) = mpsc::channel();
            let rx = Arc::new(Mutex::new(rx));
            for _ in 0..self.readers {
                let (rx, state) = (Arc::clone(&rx), self.state);
                self.scope.spawn(move || read_ahead(&rx, state));
            }
            tx
        });
        // Fails only if every reader has stopped; reading ahead is an
        // optimisation, so that is no error.
        if queue.send((seq, path.to_path_buf())).is_ok() {
            self.state.queued.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Prefetcher<'_, '_> {
    fn drop(&mut self) {
        // Readers still holding queued files skip them; dropping the queue
        // then ends their loop.
        self.state.done.store(true, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for Prefetcher<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prefetcher")
            .field("readers", &self.readers)
            .field("started", &self.queue.is_some())
            .finish()
    }
}

/// One reader: takes files off the queue, asks the kernel to read them in,
/// and reports whether they were cached.
fn read_ahead(rx: &Mutex<mpsc::Receiver<(u64, PathBuf)>>, state: &CacheState) {
    let mut byte = [0u8; 1];
    loop {
        let next = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok((seq, path)) = next else { return };
        if state.done.load(Ordering::Relaxed) {
            return;
        }
        if seq <= state.hashed.load(Ordering::Relaxed) {
            continue;
        }
        // Errors are left for the hashing thread to meet and report.
        let Ok(file) = File::open(&path) else {
            continue;
        };
        will_need(&file);
        // After the request the first page is cached, or on its way (a
        // miss: the tree is still cold).
        if let Probe::Missed = probe_at(&file, &mut byte, 0) {
            state.miss(seq);
        }
    }
}

/// What a read that may not wait for the disk found.
#[derive(Debug)]
pub(crate) enum Probe {
    /// This many bytes were in the page cache and are now in the buffer
    /// (0 at the end of the file).
    Cached(usize),
    /// Nothing is cached there: reading would wait for the disk.
    Missed,
    /// The platform or file system cannot tell; nothing was read.
    Unknown,
}

/// Reads from the current position of `file` into `buf` only what the page
/// cache holds, advancing the position past it.
pub(crate) fn probe(file: &File, buf: &mut [u8]) -> Probe {
    // `u64::MAX`: read at, and advance, the file position.
    probe_at(file, buf, u64::MAX)
}

#[cfg(target_os = "linux")]
fn probe_at(file: &File, buf: &mut [u8], offset: u64) -> Probe {
    use rustix::io::{Errno, ReadWriteFlags, preadv2};
    let mut slices = [std::io::IoSliceMut::new(buf)];
    match preadv2(file, &mut slices, offset, ReadWriteFlags::NOWAIT) {
        Ok(n) => Probe::Cached(n),
        Err(Errno::AGAIN) => Probe::Missed,
        // Not supported here (an old kernel, some file systems), or a real
        // error, which the ordinary read that follows reports.
        Err(_) => Probe::Unknown,
    }
}

/// Elsewhere nothing tells a cached file from a cold one, so the read-ahead
/// never starts.
#[cfg(not(target_os = "linux"))]
fn probe_at(_file: &File, _buf: &mut [u8], _offset: u64) -> Probe {
    Probe::Unknown
}

/// Asks the kernel to start reading the start of `file` into the page
/// cache, without waiting for it.
#[cfg(target_os = "linux")]
fn will_need(file: &File) {
    use rustix::fs::{Advice, fadvise};
    // Advice only: a failure changes nothing but speed.
    let _ = fadvise(
        file,
        0,
        std::num::NonZeroU64::new(READ_AHEAD_MAX),
        Advice::WillNeed,
    );
}

#[cfg(not(target_os = "linux"))]
fn will_need(_file: &File) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_ahead_runs_from_a_miss_until_the_horizon() {
        let state = CacheState::default();
        assert!(!state.cold_near(1), "nothing missed yet");
        state.miss(10);
        assert!(state.cold_near(11));
        assert!(state.cold_near(10 + HORIZON - 1));
        assert!(!state.cold_near(10 + HORIZON));
        state.miss(5); // an older miss does not move the horizon back
        assert!(!state.cold_near(10 + HORIZON));
        state.miss(2000);
        assert!(state.cold_near(2500));
    }

    #[test]
    fn probe_reads_what_is_cached_and_moves_the_position() {
        use std::io::{Read, Write};
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        File::create(&path)
            .and_then(|mut f| f.write_all(b"hello world"))
            .expect("write");
        let mut file = File::open(&path).expect("open");
        let mut buf = [0u8; 5];
        match probe(&file, &mut buf) {
            // Just written, so in the page cache.
            #[cfg(target_os = "linux")]
            Probe::Cached(n) => assert_eq!(&buf[..n], b"hello"),
            #[cfg(not(target_os = "linux"))]
            Probe::Unknown => {}
            other => panic!("unexpected {other:?}"),
        }
        let mut rest = String::new();
        file.read_to_string(&mut rest).expect("read");
        #[cfg(target_os = "linux")]
        assert_eq!(rest, " world");
    }
}
