//! The host's GPUs as whole devices handed out to local jobs.
//!
//! A job that asks for N GPUs is given N devices of this host: its
//! supervisor takes N of the file locks `{root}/slots/gpu-{id}.lock`
//! (`flock`, so the devices are shared by every process using the same
//! local root, and a device held by a process that died is free again),
//! then sets `CUDA_VISIBLE_DEVICES` to their ids. Supervisors waiting for
//! GPUs line up on `gpu-queue.lock`, first come first served, and leave
//! `waiting_gpus` in their job directory, which [`waiting_reason`] turns
//! into the job's pending reason. The parts here are pure: reading
//! `nvidia-smi -L`, the waiting file, and the reason.

use std::path::Path;
use std::process::{Command, Stdio};

use kinetic_core::advice::Advice;
use kinetic_core::settings::vars;
use kinetic_core::status::StatusReason;

/// The file in a job's directory while its supervisor waits for GPUs.
pub(crate) const WAITING_FILE: &str = "waiting_gpus";

/// The lock file of GPU `id` under `{root}/slots/`; its content is the id
/// of the job that last took it.
pub(crate) fn lock_name(id: u32) -> String {
    format!("gpu-{id}.lock")
}

/// The GPUs of this host the local backend hands out, and how it learned
/// of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HostGpus {
    /// Declared (`KINETIC_LOCAL_GPUS`, [`crate::LocalOptions::gpus`]):
    /// devices `0..n`.
    Declared(Vec<u32>),
    /// The devices `nvidia-smi -L` listed.
    Counted(Vec<u32>),
    /// `nvidia-smi` could not be run or failed: why.
    Unknown(String),
}

impl HostGpus {
    /// `n` declared GPUs: devices `0..n`.
    pub(crate) fn declared(n: u32) -> Self {
        Self::Declared((0..n).collect())
    }

    /// The device ids (none when unknown).
    pub(crate) fn ids(&self) -> &[u32] {
        match self {
            Self::Declared(ids) | Self::Counted(ids) => ids,
            Self::Unknown(_) => &[],
        }
    }

    /// Why a request for `wanted` GPUs of `accelerator` cannot be served
    /// here, with what to set instead; `None` when it can.
    pub(crate) fn refusal(&self, wanted: u32, accelerator: &str) -> Option<(String, Advice)> {
        let gpus = if wanted == 1 { "GPU" } else { "GPUs" };
        let (have, how) = match self {
            Self::Unknown(why) => {
                return Some((
                    format!(
                        "the local backend runs jobs on this host, and accelerator '{accelerator}' needs {wanted} {gpus}, but this host's GPUs could not be counted: {why}"
                    ),
                    Advice::new()
                        .text(format!(
                            "set {}=N to the number of NVIDIA GPUs this host has, or ",
                            vars::LOCAL_GPUS
                        ))
                        .chain(crate::elsewhere("GPUs", &["gke"])),
                ));
            }
            Self::Declared(ids) => (ids.len(), format!("declared with {}", vars::LOCAL_GPUS)),
            Self::Counted(ids) => (ids.len(), "listed by nvidia-smi -L".to_owned()),
        };
        (wanted as usize > have).then(|| {
            (
                format!(
                    "the local backend runs jobs on this host, and accelerator '{accelerator}' needs {wanted} {gpus} but this host has {have} ({how})"
                ),
                crate::elsewhere("GPUs", &["gke"]),
            )
        })
    }
}

/// The GPUs `nvidia-smi -L` lists on this host.
pub(crate) fn detect() -> HostGpus {
    match Command::new("nvidia-smi")
        .arg("-L")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
    {
        Err(e) => HostGpus::Unknown(format!("cannot run nvidia-smi: {e}")),
        Ok(out) if !out.status.success() => HostGpus::Unknown(format!(
            "nvidia-smi -L failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Ok(out) => HostGpus::Counted(parse_list(&String::from_utf8_lossy(&out.stdout))),
    }
}

/// The device ids of `nvidia-smi -L` output (`GPU 0: NVIDIA L4 (UUID:
/// GPU-…)`), in the order listed. Anything else (MIG instances listed
/// under their GPU, blank lines, warnings) is skipped: jobs get whole
/// devices.
pub(crate) fn parse_list(text: &str) -> Vec<u32> {
    let mut ids: Vec<u32> = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("GPU ") else {
            continue;
        };
        let Some((index, _)) = rest.split_once(':') else {
            continue;
        };
        if let Ok(id) = index.trim().parse::<u32>()
            && !ids.contains(&id)
        {
            ids.push(id);
        }
    }
    ids
}

/// The content of [`WAITING_FILE`] as the supervisor writes it: how many
/// GPUs the job waits for, and the devices it may get.
#[cfg(test)]
pub(crate) fn waiting_text(wanted: u32, ids: &[u32]) -> String {
    serde_json::json!({ "wanted": wanted, "ids": ids }).to_string()
}

/// [`waiting_text`] read back; `None` for anything else.
pub(crate) fn parse_waiting(text: &str) -> Option<(u32, Vec<u32>)> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let wanted = u32::try_from(v["wanted"].as_u64()?).ok()?;
    let ids = v["ids"]
        .as_array()?
        .iter()
        .map(|id| id.as_u64().and_then(|id| u32::try_from(id).ok()))
        .collect::<Option<Vec<u32>>>()?;
    Some((wanted, ids))
}

/// The pending reason of a job waiting for `wanted` of the devices `ids`,
/// where `holder(id)` is the job holding that device now, if any.
pub(crate) fn waiting_reason(
    wanted: u32,
    ids: &[u32],
    holder: impl Fn(u32) -> Option<String>,
) -> StatusReason {
    let mut held = 0;
    let mut held_by: Vec<String> = Vec::new();
    for &id in ids {
        if let Some(job) = holder(id) {
            held += 1;
            if !held_by.contains(&job) {
                held_by.push(job);
            }
        }
    }
    StatusReason::WaitingForGpus {
        wanted,
        total: u32::try_from(ids.len()).unwrap_or(u32::MAX),
        held,
        held_by,
    }
}

/// The job named in GPU `id`'s lock file under `slots`, if any.
pub(crate) fn last_holder(slots: &Path, id: u32) -> Option<String> {
    let text = std::fs::read_to_string(slots.join(lock_name(id))).ok()?;
    let job = text.trim();
    (!job.is_empty()).then(|| job.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn nvidia_smi_lists_whole_devices() {
        let text = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-6f1c0000-0000-0000-0000-000000000000)\n\
                    GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-aa)\n\
                    \x20 MIG 1g.5gb     Device  0: (UUID: MIG-bb)\n\
                    \n\
                    Failed to initialize NVML: Driver/library version mismatch\n";
        assert_eq!(parse_list(text), vec![0, 1]);
        assert_eq!(parse_list(""), Vec::<u32>::new());
        assert_eq!(parse_list("No devices were found\n"), Vec::<u32>::new());
    }

    proptest! {
        #[test]
        fn the_listed_ids_are_read_back_in_order(
            ids in proptest::collection::btree_set(0u32..64, 0..9),
            noise in "[ -~]{0,40}",
        ) {
            let ids: Vec<u32> = ids.into_iter().collect();
            let mut text = String::new();
            for id in &ids {
                text.push_str(&format!("GPU {id}: NVIDIA L4 (UUID: GPU-{id:08x})\n"));
                if !noise.starts_with("GPU ") {
                    text.push_str(&noise);
                    text.push('\n');
                }
            }
            prop_assert_eq!(parse_list(&text), ids);
        }

        #[test]
        fn the_waiting_file_round_trips(
            wanted in 1u32..16,
            ids in proptest::collection::vec(0u32..1024, 0..16),
        ) {
            prop_assert_eq!(parse_waiting(&waiting_text(wanted, &ids)), Some((wanted, ids)));
        }

        #[test]
        fn the_reason_counts_every_held_device_and_names_each_holder_once(
            holders in proptest::collection::vec(proptest::option::of(0u8..4), 1..9),
            wanted in 1u32..4,
        ) {
            let ids: Vec<u32> = (0..holders.len() as u32).collect();
            let reason = waiting_reason(wanted, &ids, |id| {
                holders[id as usize].map(|j| format!("job-{j:08x}"))
            });
            let StatusReason::WaitingForGpus { wanted: w, total, held, held_by } = reason else {
                panic!("{reason:?}");
            };
            prop_assert_eq!(w, wanted);
            prop_assert_eq!(total as usize, ids.len());
            prop_assert_eq!(held as usize, holders.iter().flatten().count());
            let mut unique: Vec<u8> = holders.iter().flatten().copied().collect();
            unique.sort_unstable();
            unique.dedup();
            prop_assert_eq!(held_by.len(), unique.len());
        }
    }

    #[test]
    fn a_request_beyond_the_host_names_the_count_and_the_accelerator() {
        let counted = HostGpus::Counted(vec![0, 1]);
        assert_eq!(counted.refusal(2, "l4x2"), None);
        let text =
            |r: Option<(String, Advice)>| r.map(|(m, a)| format!("{m}; {a}")).unwrap_or_default();
        let msg = text(counted.refusal(4, "a100x4"));
        assert!(
            msg.contains("'a100x4' needs 4 GPUs but this host has 2 (listed by nvidia-smi -L)"),
            "{msg}"
        );
        let msg = text(HostGpus::declared(0).refusal(1, "l4"));
        assert!(
            msg.contains("needs 1 GPU but this host has 0 (declared with KINETIC_LOCAL_GPUS)"),
            "{msg}"
        );
        let msg = text(
            HostGpus::Unknown("cannot run nvidia-smi: No such file or directory".into())
                .refusal(1, "l4"),
        );
        assert!(msg.contains("cannot run nvidia-smi"), "{msg}");
        assert!(msg.contains("set KINETIC_LOCAL_GPUS=N"), "{msg}");
    }
}
