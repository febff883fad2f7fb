//! File-system events (inotify) that tell a waiter to look again: a job's
//! log grew, its exit code landed, a supervisor touched `slots/ended`.

use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::Path;

use kinetic_core::ports::ChangeFeed;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use tokio::io::unix::AsyncFd;

/// An inotify instance whose descriptor tokio can wait on.
struct Instance(Inotify);

impl AsRawFd for Instance {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// A watch on one file or directory, armed from its creation: every event
/// after [`Watch::new`] returned wakes the next [`Watch::changed`].
///
/// Closing an inotify instance waits until the kernel has retired its
/// watches (a grace period of its notification machinery, 10–20 ms on a
/// busy machine), so a dropped watch is closed on a thread of its own: the
/// waiter that no longer needs it goes on at once.
pub(crate) struct Watch {
    /// Always `Some` until dropped.
    fd: Option<AsyncFd<Instance>>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        let Some(fd) = self.fd.take() else { return };
        let instance = fd.into_inner();
        // When no thread can be started, the closure (and the instance in
        // it) is dropped here instead: closed inline, as before.
        let _ = std::thread::Builder::new()
            .name("kinetic-inotify-close".into())
            .spawn(move || drop(instance));
    }
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch").finish_non_exhaustive()
    }
}

impl Watch {
    /// Watch `path` for `events`. Fails when the kernel refuses (no
    /// inotify, its limits reached) or outside a tokio runtime; callers
    /// then poll.
    pub(crate) fn new(path: &Path, events: AddWatchFlags) -> std::io::Result<Self> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        inotify.add_watch(path, events)?;
        // `AsyncFd::new` is deprecated in favour of the `unsafe` `register`,
        // whose condition (the descriptor stays open and the same while
        // registered) holds here: `Instance` owns it until the `AsyncFd`
        // drops it. This crate forbids `unsafe`.
        #[allow(deprecated)]
        let fd = AsyncFd::new(Instance(inotify))?;
        Ok(Self { fd: Some(fd) })
    }

    /// A directory's entries: files appended to, closed after writing,
    /// created or renamed into it.
    pub(crate) fn directory(path: &Path) -> std::io::Result<Self> {
        Self::new(
            path,
            AddWatchFlags::IN_MODIFY
                | AddWatchFlags::IN_CLOSE_WRITE
                | AddWatchFlags::IN_CREATE
                | AddWatchFlags::IN_MOVED_TO
                | AddWatchFlags::IN_DELETE_SELF,
        )
    }

    /// Resolves once at least one event came since the last call (all
    /// events waiting are consumed: several changes wake once).
    pub(crate) async fn changed(&self) -> std::io::Result<()> {
        let Some(fd) = &self.fd else {
            return Err(std::io::ErrorKind::NotConnected.into());
        };
        loop {
            let mut guard = fd.readable().await?;
            match guard.get_inner().0.read_events() {
                Ok(_) => return Ok(()),
                Err(nix::errno::Errno::EAGAIN) => guard.clear_ready(),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The events as a stream of hints that never ends on its own (an
    /// error of the instance ends it).
    pub(crate) fn into_feed(self) -> ChangeFeed {
        Box::pin(futures_util::stream::unfold(self, |watch| async move {
            watch.changed().await.ok()?;
            Some(((), watch))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_dropped_watch_closes_its_instance() {
        let dir = tempfile::tempdir().unwrap();
        let watch = Watch::directory(dir.path()).unwrap();
        let fd = watch.fd.as_ref().unwrap().as_raw_fd();
        // The descriptor's number may be reused once closed, but not for a
        // watch on this test's directory (named by its inode).
        let info = format!("/proc/self/fdinfo/{fd}");
        let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(dir.path()).unwrap());
        let watching = || {
            std::fs::read_to_string(&info)
                .is_ok_and(|text| text.contains(&format!(" ino:{inode:x} ")))
        };
        assert!(watching(), "{info} is the instance");
        drop(watch);
        // Closed on its own thread: wait for it.
        let closed = (0..500).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            !watching()
        });
        assert!(closed, "{info} still open");
    }

    #[tokio::test]
    async fn a_file_written_in_the_directory_wakes_the_watch() {
        let dir = tempfile::tempdir().unwrap();
        let watch = Watch::directory(dir.path()).unwrap();
        let quiet = tokio::time::timeout(Duration::from_millis(50), watch.changed()).await;
        assert!(quiet.is_err(), "no event before anything changed");
        std::fs::write(dir.path().join("exit_code"), "0\n").unwrap();
        tokio::time::timeout(Duration::from_secs(5), watch.changed())
            .await
            .expect("the write was seen")
            .unwrap();
    }
}
