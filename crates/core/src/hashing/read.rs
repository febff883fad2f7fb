//! Streaming a file into a sink with bounded memory.
//!
//! Two ways: [`read_inline`] reads and feeds on the calling thread with one
//! reusable buffer (the right choice for the many small files of a
//! directory, where every core is already busy); [`read_pipelined`] reads on
//! a helper thread into a small pool of reused buffers while the calling
//! thread feeds the previous ones to the sink, so a single large file is
//! hashed at the speed of the hash alone instead of read time + hash time.

use std::fs::File;
use std::io::{self, Read};
use std::sync::mpsc;
use std::thread;

/// Size of each buffer of the pipelined reader.
pub(crate) const PIPE_BUFFER: usize = 2 << 20;
/// Number of buffers the pipelined reader cycles through.
const PIPE_BUFFERS: usize = 4;
/// Files at least this large (by `fstat`) are read pipelined.
pub(crate) const PIPELINE_THRESHOLD: u64 = 8 << 20;

/// Reads `file` to its end through `buf`, handing each chunk to `sink`.
/// Returns the number of bytes read.
pub(crate) fn read_inline(
    file: &mut File,
    buf: &mut [u8],
    mut sink: impl FnMut(&[u8]),
) -> io::Result<u64> {
    let mut total = 0u64;
    loop {
        match file.read(buf) {
            Ok(0) => return Ok(total),
            Ok(n) => {
                sink(&buf[..n]);
                total += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// One read into `buf` (retried when interrupted); 0 at the end of the file.
pub(crate) fn read_some(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match file.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// Fills `buf` as far as the file allows; returns the number of bytes read
/// (less than `buf.len()` only at end of file).
fn fill(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Reads `file` to its end on a helper thread, handing each chunk to `sink`
/// on the calling thread. At most [`PIPE_BUFFERS`] buffers of
/// [`PIPE_BUFFER`] bytes exist at any time. Returns the number of bytes read.
pub(crate) fn read_pipelined(file: &mut File, mut sink: impl FnMut(&[u8])) -> io::Result<u64> {
    let (full_tx, full_rx) = mpsc::sync_channel::<io::Result<(Vec<u8>, usize)>>(PIPE_BUFFERS);
    let (free_tx, free_rx) = mpsc::channel::<Vec<u8>>();
    for _ in 0..PIPE_BUFFERS {
        // Cannot fail: the receiver is alive.
        let _ = free_tx.send(vec![0u8; PIPE_BUFFER]);
    }
    thread::scope(|scope| {
        scope.spawn(move || {
            // Stops when the file ends, on an error, or when the consumer
            // hangs up (its side of `free_tx` is dropped).
            while let Ok(mut buf) = free_rx.recv() {
                match fill(file, &mut buf) {
                    Ok(n) => {
                        let end = n < buf.len();
                        if full_tx.send(Ok((buf, n))).is_err() || end {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = full_tx.send(Err(e));
                        return;
                    }
                }
            }
        });
        let mut total = 0u64;
        let outcome = loop {
            match full_rx.recv() {
                Ok(Ok((buf, n))) => {
                    if n > 0 {
                        sink(&buf[..n]);
                        total += n as u64;
                    }
                    if n < buf.len() {
                        break Ok(total);
                    }
                    // The reader may already have stopped (never before
                    // the end it reported); a failed send is harmless.
                    let _ = free_tx.send(buf);
                }
                Ok(Err(e)) => break Err(e),
                Err(_) => break Err(io::Error::other("the reader thread stopped unexpectedly")),
            }
        };
        drop(free_tx);
        drop(full_rx);
        outcome
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 % 251) as u8).collect()
    }

    #[test]
    fn pipelined_and_inline_see_the_same_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        for len in [
            0,
            1,
            PIPE_BUFFER - 1,
            PIPE_BUFFER,
            PIPE_BUFFER + 1,
            3 * PIPE_BUFFER + 17,
        ] {
            let path = dir.path().join(format!("f{len}"));
            let data = pattern(len);
            File::create(&path)
                .and_then(|mut f| f.write_all(&data))
                .expect("write");

            let mut got = Vec::new();
            let mut f = File::open(&path).expect("open");
            let n = read_pipelined(&mut f, |c| got.extend_from_slice(c)).expect("read");
            assert_eq!(n, len as u64);
            assert_eq!(got, data, "pipelined len={len}");

            let mut got = Vec::new();
            let mut f = File::open(&path).expect("open");
            let mut buf = vec![0u8; 4096];
            let n = read_inline(&mut f, &mut buf, |c| got.extend_from_slice(c)).expect("read");
            assert_eq!(n, len as u64);
            assert_eq!(got, data, "inline len={len}");
        }
    }
}
