//! The fake log server: `GET …/pods/{name}/log` with `container`,
//! `previous`, `follow` and `tailLines`, as the kubelet serves it. The
//! kubelet records each container start in the [`LogBook`] (its log file
//! and the cell its exit code lands in); the API server streams from it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use futures_util::Stream;
use serde_json::Value;

use super::meta::uid_of;
use super::runtime::{ExitCell, exit_code};
use super::store::{ApiError, Store};

/// A log request, from the API's query parameters.
#[derive(Debug)]
pub(crate) struct LogRequest {
    pub(crate) namespace: String,
    pub(crate) pod: String,
    pub(crate) container: Option<String>,
    pub(crate) previous: bool,
    pub(crate) follow: bool,
    pub(crate) tail: Option<usize>,
}

/// What the log server knows of one pod's container.
#[derive(Debug, Clone, Default)]
struct ContainerLogs {
    /// One log file per start, oldest first.
    files: Vec<PathBuf>,
    /// The exit of the current start.
    exit: ExitCell,
    /// A process writes the current file (a scripted outcome writes nothing).
    live: bool,
}

/// The log files of every pod, by pod uid.
#[derive(Debug, Default)]
pub(crate) struct LogBook {
    pods: Mutex<BTreeMap<String, ContainerLogs>>,
}

impl LogBook {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, ContainerLogs>> {
        self.pods.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The container of pod `uid` (re)started, writing to `file`; `live`
    /// when a process writes it, whose exit lands in `exit`.
    pub(crate) fn started(&self, uid: &str, file: PathBuf, exit: ExitCell, live: bool) {
        let mut pods = self.lock();
        let logs = pods.entry(uid.to_owned()).or_default();
        logs.files.push(file);
        logs.exit = exit;
        logs.live = live;
    }

    /// How many times the container of pod `uid` started.
    pub(crate) fn starts(&self, uid: &str) -> usize {
        self.lock().get(uid).map_or(0, |l| l.files.len())
    }

    /// The pod is gone.
    pub(crate) fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// What the current start of pod `uid`'s container wrote so far.
    pub(crate) fn current(&self, uid: &str) -> Option<String> {
        let file = self.lock().get(uid)?.files.last().cloned()?;
        std::fs::read(file)
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// The log of a pod's container, whole or followed.
    pub(crate) fn stream(
        &self,
        store: &Arc<Store>,
        req: LogRequest,
    ) -> Result<impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static, ApiError> {
        let pod = store.get("pods", &req.namespace, &req.pod)?;
        let cname = req
            .container
            .clone()
            .unwrap_or_else(|| container_name(&pod));
        let logs = self.lock().get(uid_of(&pod)).cloned().unwrap_or_default();
        let path = if req.previous {
            logs.files
                .len()
                .checked_sub(2)
                .and_then(|i| logs.files.get(i))
                .cloned()
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "previous terminated container \"{cname}\" in pod \"{}\" not found",
                        req.pod
                    ))
                })?
        } else {
            logs.files.last().cloned().ok_or_else(|| {
                let reason = pod
                    .pointer("/status/containerStatuses/0/state/waiting/reason")
                    .and_then(Value::as_str)
                    .unwrap_or("ContainerCreating");
                ApiError::bad_request(format!(
                    "container \"{cname}\" in pod \"{}\" is waiting to start: {reason}",
                    req.pod
                ))
            })?
        };
        let ended = req.previous || !logs.live;
        Ok(follow_file(
            path,
            req.tail,
            req.follow && !ended,
            logs.exit,
            store.clone(),
            (req.namespace, req.pod),
        ))
    }
}

/// The name of a pod's (first) container.
pub(crate) fn container_name(pod: &Value) -> String {
    pod.pointer("/spec/containers/0/name")
        .and_then(Value::as_str)
        .unwrap_or("main")
        .to_owned()
}

fn tail_text(text: &[u8], n: usize) -> Vec<u8> {
    if n == 0 {
        return Vec::new();
    }
    let trimmed = text.strip_suffix(b"\n").unwrap_or(text);
    let mut count = 0;
    for (i, b) in trimmed.iter().enumerate().rev() {
        if *b == b'\n' {
            count += 1;
            if count == n {
                return text[i + 1..].to_vec();
            }
        }
    }
    text.to_vec()
}

/// Stream a log file: what is there (or its tail), then, when following,
/// what is appended until the process ended or the pod went away.
fn follow_file(
    path: PathBuf,
    tail: Option<usize>,
    follow: bool,
    exit: ExitCell,
    store: Arc<Store>,
    pod: (String, String),
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    struct State {
        path: PathBuf,
        offset: u64,
        first: bool,
        done: bool,
    }
    let start = State {
        path,
        offset: 0,
        first: true,
        done: false,
    };
    futures_util::stream::unfold(start, move |mut st| {
        let exit = exit.clone();
        let store = store.clone();
        let pod = pod.clone();
        async move {
            if st.done {
                return None;
            }
            loop {
                let ended =
                    exit_code(&exit).is_some() || store.get("pods", &pod.0, &pod.1).is_err();
                let chunk = read_from(&st.path, st.offset);
                if st.first {
                    st.first = false;
                    st.offset += chunk.len() as u64;
                    let body = match tail {
                        Some(n) => tail_text(&chunk, n),
                        None => chunk,
                    };
                    if !follow {
                        st.done = true;
                    }
                    return Some((Ok(Bytes::from(body)), st));
                }
                if !chunk.is_empty() {
                    st.offset += chunk.len() as u64;
                    return Some((Ok(Bytes::from(chunk)), st));
                }
                if ended {
                    // One last read after the end was seen: nothing is lost.
                    let rest = read_from(&st.path, st.offset);
                    st.done = true;
                    return if rest.is_empty() {
                        None
                    } else {
                        st.offset += rest.len() as u64;
                        Some((Ok(Bytes::from(rest)), st))
                    };
                }
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
        }
    })
}

fn read_from(path: &Path, offset: u64) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    if f.seek(SeekFrom::Start(offset)).is_err() {
        return Vec::new();
    }
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    buf
}

#[cfg(test)]
mod tests {
    use super::tail_text;

    #[test]
    fn tail_keeps_last_lines() {
        assert_eq!(tail_text(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(tail_text(b"a\nb", 5), b"a\nb");
        assert_eq!(tail_text(b"a\n", 0), b"");
    }
}
