//! The output of a multi-host job (a Pathways slice), host by host: each
//! host's runner copies its own output to the store
//! (`{job_id}/logs/host-{N}/…`, see [`layout::log_chunks`]), which outlives
//! its pod (a lost host's pod, deleted and made again, has no log left on
//! the cluster). Once the store holds any host's output, the job is shown
//! as every host's log (or tail), each under a header naming the host (one
//! that stored nothing says so), the failing hosts first: the host the job's status names as lost,
//! then those whose runner wrote a failure (`result-worker-{N}.json`, or a
//! failed `result.json` for the leader), then the others in host order.

use std::collections::{BTreeMap, BTreeSet};

use kinetic_core::ids::JobId;
use kinetic_core::layout;
use kinetic_core::ports::{GetOptions, ObjectPath, ObjectStore, StoreError, tail_lines};
use kinetic_core::protocol::{RunnerResult, worker_results_in_order};

use crate::stored_log;

/// One host's part of a slice's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostSection {
    /// The host's index (0 is the leader).
    pub(crate) host: u32,
    /// Why it is shown first (`failed: ValueError: …`, `lost: …`), if it is.
    pub(crate) failure: Option<String>,
    /// Its output (or the tail asked for).
    pub(crate) text: String,
}

/// The hosts whose output is stored under the job's folder, from a
/// listing of it.
fn stored_hosts(job_id: &JobId, listed: &[ObjectPath]) -> BTreeSet<u32> {
    let logs = format!("{job_id}/{}/host-", layout::LOGS_DIR);
    listed
        .iter()
        .filter_map(|p| {
            let rest = p.as_str().strip_prefix(&logs)?;
            let (n, _) = rest.split_once('/')?;
            let host: u32 = n.parse().ok()?;
            layout::log_chunk(&layout::log_chunks(job_id, host), p).map(|_| host)
        })
        .collect()
}

/// The sections in the order they are shown: failing hosts first (in the
/// order of `failures`), then the others by host.
pub(crate) fn ordered(
    hosts: &BTreeSet<u32>,
    failures: &[(u32, String)],
    mut texts: BTreeMap<u32, String>,
) -> Vec<HostSection> {
    let mut out = Vec::new();
    let mut shown = BTreeSet::new();
    for (host, why) in failures {
        if shown.insert(*host) {
            out.push(HostSection {
                host: *host,
                failure: Some(why.clone()),
                text: texts.remove(host).unwrap_or_default(),
            });
        }
    }
    for host in hosts {
        if shown.insert(*host) {
            out.push(HostSection {
                host: *host,
                failure: None,
                text: texts.remove(host).unwrap_or_default(),
            });
        }
    }
    out
}

/// The sections as text: `==> host 2 (worker 2, failed: …) <==` before
/// each host's output, a blank line between hosts.
pub(crate) fn render(sections: &[HostSection]) -> String {
    let mut out = String::new();
    for (i, s) in sections.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let role = if s.host == 0 {
            "leader".to_owned()
        } else {
            format!("worker {}", s.host)
        };
        match &s.failure {
            Some(why) => out.push_str(&format!("==> host {} ({role}, {why}) <==\n", s.host)),
            None => out.push_str(&format!("==> host {} ({role}) <==\n", s.host)),
        }
        out.push_str(&s.text);
        if !s.text.is_empty() && !s.text.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// The failures the runners wrote: a failed `result.json` (the leader's),
/// then each `result-worker-{N}.json`, in host order.
async fn runner_failures(
    store: &dyn ObjectStore,
    job_id: &JobId,
    listed: &[ObjectPath],
) -> Result<Vec<(u32, String)>, StoreError> {
    let mut out = Vec::new();
    let read = |path: ObjectPath| async move {
        match store.get(&path, GetOptions::default()).await {
            Ok(bytes) => Ok(RunnerResult::from_json(&bytes).ok()),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    };
    let described = |r: &RunnerResult| match &r.error {
        Some(e) => format!("failed: {}: {}", e.type_name, e.message),
        None => "failed".to_owned(),
    };
    let result = layout::result(job_id);
    if listed.contains(&result)
        && let Some(r) = read(result).await?
        && !r.success
    {
        out.push((r.host_index, described(&r)));
    }
    let names: Vec<&str> = listed.iter().map(|p| p.file_name()).collect();
    for (host, _) in worker_results_in_order(names) {
        if let Some(r) = read(layout::host_result(job_id, host)).await?
            && !r.success
        {
            out.push((host, described(&r)));
        }
    }
    Ok(out)
}

/// What a host whose runner stored no output shows.
pub(crate) const NO_OUTPUT: &str =
    "(no output stored: its runner had not started, or had copied nothing yet)\n";

/// The output of the `hosts` hosts of `job_id` as stored, once any host's
/// is (`None` before): every host's log, or its last `tail` lines, under
/// a header, `lost` (the host a job status names as lost, and why) and
/// the runners' failures first.
pub(crate) async fn read(
    store: &dyn ObjectStore,
    job_id: &JobId,
    hosts: u32,
    tail: Option<usize>,
    lost: Option<(u32, String)>,
) -> Result<Option<String>, StoreError> {
    let folder = ObjectPath::parse(job_id.as_str())?;
    let listed: Vec<ObjectPath> = store
        .list(Some(&folder))
        .await?
        .into_iter()
        .map(|m| m.path)
        .collect();
    let stored = stored_hosts(job_id, &listed);
    if stored.is_empty() {
        return Ok(None);
    }
    let all: BTreeSet<u32> = (0..hosts).chain(stored.iter().copied()).collect();
    let mut texts = BTreeMap::new();
    for host in &all {
        if !stored.contains(host) {
            texts.insert(*host, NO_OUTPUT.to_owned());
            continue;
        }
        let log = stored_log::read(store, &layout::log_chunks(job_id, *host), 0).await?;
        let text = String::from_utf8_lossy(&log.bytes).into_owned();
        texts.insert(
            *host,
            match tail {
                Some(n) => tail_lines(&text, n),
                None => text,
            },
        );
    }
    let hosts = all;
    let mut failures: Vec<(u32, String)> = lost.into_iter().collect();
    failures.extend(runner_failures(store, job_id, &listed).await?);
    Ok(Some(render(&ordered(&hosts, &failures, texts))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failing_hosts_come_first_then_the_others_in_order() {
        let hosts: BTreeSet<u32> = [0, 1, 2, 3].into();
        let texts: BTreeMap<u32, String> = (0..4).map(|h| (h, format!("out {h}\n"))).collect();
        let failures = vec![
            (2, "lost: failed: evicted".to_owned()),
            (3, "failed: ValueError: x".to_owned()),
            (2, "failed: ValueError: y".to_owned()),
        ];
        let sections = ordered(&hosts, &failures, texts);
        let order: Vec<u32> = sections.iter().map(|s| s.host).collect();
        assert_eq!(order, [2, 3, 0, 1]);
        assert_eq!(
            render(&sections),
            "==> host 2 (worker 2, lost: failed: evicted) <==\nout 2\n\n\
             ==> host 3 (worker 3, failed: ValueError: x) <==\nout 3\n\n\
             ==> host 0 (leader) <==\nout 0\n\n\
             ==> host 1 (worker 1) <==\nout 1\n"
        );
    }

    #[test]
    fn only_the_chunks_of_each_hosts_folder_count() {
        let job: JobId = "job-0a1b2c3d".parse().unwrap();
        let paths: Vec<ObjectPath> = [
            "job-0a1b2c3d/logs/host-0/00000000",
            "job-0a1b2c3d/logs/host-3/00000001.end",
            "job-0a1b2c3d/logs/host-5/notes.txt",
            "job-0a1b2c3d/logs/output.log",
            "job-0a1b2c3d/result-worker-2.json",
        ]
        .iter()
        .map(|p| ObjectPath::parse(*p).unwrap())
        .collect();
        assert_eq!(stored_hosts(&job, &paths), [0, 3].into());
    }
}
