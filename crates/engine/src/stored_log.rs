//! The job's output as its runner copied it to the store
//! (`{job_id}/logs/host-0/…`, see [`layout::log_chunks`]): what a handle
//! shows once the backend has no log left (the pod is gone, the Kubernetes
//! objects or the local process directory were cleaned up).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use kinetic_core::layout::{self, LogChunk};
use kinetic_core::ports::{
    Backend, BackendError, GetOptions, LogStream, ObjectPath, ObjectStore, StoreError,
};
use kinetic_core::record::JobRecord;
use kinetic_core::status::JobStatus;

/// How often a followed stored log looks for new chunks.
pub(crate) const FOLLOW_POLL: Duration = Duration::from_millis(500);

/// The chunks of a stored log read so far.
#[derive(Debug, Default)]
pub(crate) struct StoredLog {
    /// Their bytes, joined in order.
    pub(crate) bytes: Vec<u8>,
    /// How many chunks were found.
    pub(crate) chunks: usize,
    /// The number the next chunk to read has (one past the last read).
    pub(crate) next_seq: u64,
}

/// Where host 0 of `record`'s job copies its output.
pub(crate) fn prefix(record: &JobRecord) -> ObjectPath {
    layout::log_chunks(&record.job_id, 0)
}

/// The chunks under `prefix` numbered `from` or more, in order.
async fn chunks_from(
    store: &dyn ObjectStore,
    prefix: &ObjectPath,
    from: u64,
) -> Result<Vec<(LogChunk, ObjectPath)>, StoreError> {
    let mut chunks: Vec<(LogChunk, ObjectPath)> = store
        .list(Some(prefix))
        .await?
        .into_iter()
        .filter_map(|meta| Some((layout::log_chunk(prefix, &meta.path)?, meta.path)))
        .filter(|(chunk, _)| chunk.seq >= from)
        .collect();
    chunks.sort();
    Ok(chunks)
}

/// True when the store holds at least one chunk under `prefix`.
pub(crate) async fn chunks_exist(
    store: &dyn ObjectStore,
    prefix: &ObjectPath,
) -> Result<bool, StoreError> {
    Ok(!chunks_from(store, prefix, 0).await?.is_empty())
}

/// Read the chunks numbered `from` or more; a chunk deleted between the
/// listing and its read (the job's objects being cleaned up) ends the read
/// there.
pub(crate) async fn read(
    store: &dyn ObjectStore,
    prefix: &ObjectPath,
    from: u64,
) -> Result<StoredLog, StoreError> {
    let mut log = StoredLog {
        next_seq: from,
        ..StoredLog::default()
    };
    for (chunk, path) in chunks_from(store, prefix, from).await? {
        match store.get(&path, GetOptions::default()).await {
            Ok(bytes) => log.bytes.extend_from_slice(&bytes),
            Err(e) if e.is_not_found() => break,
            Err(e) => return Err(e),
        }
        log.chunks += 1;
        log.next_seq = chunk.seq + 1;
    }
    Ok(log)
}

/// A follower of a stored log: new chunks as they land, until the job is
/// over and every chunk was read.
struct Follower {
    store: Arc<dyn ObjectStore>,
    backend: Arc<dyn Backend>,
    record: JobRecord,
    prefix: ObjectPath,
    next_seq: u64,
    /// Bytes after the last newline read so far.
    partial: Vec<u8>,
    lines: VecDeque<String>,
    done: bool,
    poll: Duration,
}

impl Follower {
    fn take_lines(&mut self, bytes: &[u8]) {
        self.partial.extend_from_slice(bytes);
        if let Some(end) = self.partial.iter().rposition(|&b| b == b'\n') {
            let rest = self.partial.split_off(end + 1);
            let text = String::from_utf8_lossy(&self.partial[..end]).into_owned();
            self.lines.extend(text.split('\n').map(str::to_owned));
            self.partial = rest;
        }
    }

    async fn next_line(&mut self) -> Option<Result<String, BackendError>> {
        let mut first = true;
        loop {
            if let Some(line) = self.lines.pop_front() {
                return Some(Ok(line));
            }
            if self.done {
                if self.partial.is_empty() {
                    return None;
                }
                let rest = std::mem::take(&mut self.partial);
                return Some(Ok(String::from_utf8_lossy(&rest).into_owned()));
            }
            if !first {
                tokio::time::sleep(self.poll).await;
            }
            first = false;
            // The state is asked before the listing: a job over by then
            // wrote every chunk it will, so the listing sees them all.
            let over = match self.backend.status(&self.record).await {
                Ok(state) => state.status.is_terminal() || state.status == JobStatus::NotFound,
                Err(e) if e.is_not_found() => true,
                Err(e) => return Some(Err(e)),
            };
            let read = match read(&*self.store, &self.prefix, self.next_seq).await {
                Ok(read) => read,
                Err(e) => {
                    self.done = true;
                    return Some(Err(BackendError::from_store(
                        "reading the job's stored log",
                        e,
                    )));
                }
            };
            self.next_seq = read.next_seq;
            self.take_lines(&read.bytes);
            if over && read.chunks == 0 {
                self.done = true;
            }
        }
    }
}

/// The stored log of `record`'s job as a stream of lines: what is stored,
/// then each chunk as it lands, ending once the job is over (or gone) and
/// nothing more was copied.
pub(crate) fn follow(
    store: Arc<dyn ObjectStore>,
    backend: Arc<dyn Backend>,
    record: JobRecord,
    poll: Duration,
) -> LogStream {
    let follower = Follower {
        store,
        backend,
        prefix: prefix(&record),
        record,
        next_seq: 0,
        partial: Vec::new(),
        lines: VecDeque::new(),
        done: false,
        poll,
    };
    Box::pin(futures_util::stream::unfold(follower, |mut f| async move {
        let item = f.next_line().await?;
        Some((item, f))
    }))
}
