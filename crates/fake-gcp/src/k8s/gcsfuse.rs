//! The fake GCS FUSE CSI driver, as the kubelet meets it.
//!
//! On GKE a pod's `gcsfuse.csi.storage.gke.io` volumes are served by a
//! sidecar that the driver's webhook injects only into pods annotated
//! `gke-gcsfuse/volumes: "true"`. Without the annotation there is no
//! sidecar: the pod stays `ContainerCreating` and the kubelet reports
//! `FailedMount` ("failed to find the sidecar container in Pod spec"),
//! which this fake reproduces.
//!
//! With it, the container is started through a small mounter
//! (`gcsfuse_mounter.py`) in a user and mount namespace of its own
//! (`unshare --map-root-user --mount`, no privilege needed, the same as
//! root and not): it copies the bucket's objects under the volume's
//! `only-dir` from the fake GCS server into the pod's directory, then
//! bind-mounts that copy read-only where the container's runner looks for
//! the mount path (its `--mount-root`), so the kernel refuses every write
//! (`EROFS`), root's included.
//!
//! Where the fake differs from the driver: the objects are copied when the
//! container starts, not read on demand, so objects written afterwards are
//! not seen; the mount is shown under the runner's mount root (a directory
//! of the pod on this host), not at the container's absolute path; a mount
//! failure fails the container with the driver's message in its log rather
//! than leaving the pod `ContainerCreating`; no sidecar container appears
//! in the pod's status; mount options other than `only-dir` are ignored.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The driver's name.
pub(crate) const DRIVER: &str = "gcsfuse.csi.storage.gke.io";
/// The annotation that makes the webhook inject the sidecar.
pub(crate) const ANNOTATION: &str = "gke-gcsfuse/volumes";
/// The mounter, written into each pod's directory that needs it.
const MOUNTER_SOURCE: &str = include_str!("gcsfuse_mounter.py");

/// One GCS FUSE volume mounted into the pod's container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CsiMount {
    /// The volume's name.
    pub(crate) volume: String,
    /// `volumeAttributes.bucketName`.
    pub(crate) bucket: String,
    /// `only-dir` of `volumeAttributes.mountOptions` (`""`: the bucket).
    pub(crate) only_dir: String,
    /// Where the container mounts it.
    pub(crate) mount_path: String,
}

/// The GCS FUSE volumes the container mounts, in its `volumeMounts` order.
pub(crate) fn mounts(pod: &Value, container: &Value) -> Vec<CsiMount> {
    let volumes = pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mounted = container
        .get("volumeMounts")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    mounted
        .iter()
        .filter_map(|m| {
            let name = m.get("name")?.as_str()?;
            let volume = volumes
                .iter()
                .find(|v| v.get("name").and_then(Value::as_str) == Some(name))?;
            let csi = volume.get("csi")?;
            if csi.get("driver").and_then(Value::as_str) != Some(DRIVER) {
                return None;
            }
            let attrs = csi.get("volumeAttributes");
            let attr = |k: &str| {
                attrs
                    .and_then(|a| a.get(k))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            Some(CsiMount {
                volume: name.to_owned(),
                bucket: attr("bucketName"),
                only_dir: only_dir(&attr("mountOptions")),
                mount_path: m.get("mountPath")?.as_str()?.to_owned(),
            })
        })
        .collect()
}

/// `only-dir` of comma-separated mount options (`\,` is a comma of a value).
fn only_dir(options: &str) -> String {
    let mut parts = vec![String::new()];
    let mut chars = options.chars().peekable();
    while let Some(c) = chars.next() {
        let c = match c {
            '\\' if chars.peek() == Some(&',') => chars.next().unwrap_or(','),
            ',' => {
                parts.push(String::new());
                continue;
            }
            c => c,
        };
        if let Some(p) = parts.last_mut() {
            p.push(c);
        }
    }
    parts
        .iter()
        .find_map(|p| p.strip_prefix("only-dir=").map(str::to_owned))
        .unwrap_or_default()
}

/// Why the pod's GCS FUSE volumes cannot be mounted, as the kubelet's
/// `FailedMount` event says it, or `None` when they can.
pub(crate) fn mount_failure(pod: &Value, mounts: &[CsiMount]) -> Option<String> {
    let first = mounts.first()?;
    let annotated = pod
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(ANNOTATION))
        .and_then(Value::as_str)
        == Some("true");
    (!annotated).then(|| {
        format!(
            "MountVolume.SetUp failed for volume \"{}\" : rpc error: code = FailedPrecondition desc = failed to find the sidecar container in Pod spec",
            first.volume
        )
    })
}

/// `argv` started through the mounter with `mounts` shown under
/// `mount_root`, their copies under `{pod_dir}/gcsfuse/`.
pub(crate) fn wrap(
    argv: Vec<String>,
    mounts: &[CsiMount],
    endpoint: &str,
    python: &Path,
    pod_dir: &Path,
    mount_root: &Path,
) -> Result<Vec<String>, String> {
    let mounter = pod_dir.join("gcsfuse_mounter.py");
    std::fs::write(&mounter, MOUNTER_SOURCE).map_err(|e| format!("{}: {e}", mounter.display()))?;
    let text = |p: &Path| p.to_string_lossy().into_owned();
    let mut out: Vec<String> = [
        "unshare",
        "--map-root-user",
        "--mount",
        "--",
        &text(python),
        &text(&mounter),
        "--endpoint",
        endpoint,
    ]
    .map(str::to_owned)
    .to_vec();
    for m in mounts {
        let cache: PathBuf = pod_dir.join("gcsfuse").join(&m.volume);
        let target = mount_root.join(m.mount_path.trim_start_matches('/'));
        out.extend([
            "--volume".to_owned(),
            m.volume.clone(),
            m.bucket.clone(),
            m.only_dir.clone(),
            text(&cache),
            text(&target),
        ]);
    }
    out.push("--".to_owned());
    out.extend(argv);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn volumes_are_read_as_the_driver_reads_them() {
        let pod = json!({"metadata": {"annotations": {ANNOTATION: "true"}}, "spec": {"volumes": [
            {"name": "gcs-fuse-0", "csi": {"driver": DRIVER, "volumeAttributes": {
                "bucketName": "b", "mountOptions": "implicit-dirs,only-dir=a\\,b/c"}}},
            {"name": "other", "emptyDir": {}},
            {"name": "gcs-fuse-1", "csi": {"driver": DRIVER, "volumeAttributes": {
                "bucketName": "whole", "mountOptions": "implicit-dirs"}}},
        ]}});
        let container = json!({"volumeMounts": [
            {"name": "gcs-fuse-1", "mountPath": "/w", "readOnly": true},
            {"name": "other", "mountPath": "/o"},
            {"name": "gcs-fuse-0", "mountPath": "/_kinetic/fuse-data/0", "readOnly": true},
        ]});
        let found = mounts(&pod, &container);
        assert_eq!(found.len(), 2);
        assert_eq!(
            (found[0].bucket.as_str(), found[0].only_dir.as_str()),
            ("whole", "")
        );
        assert_eq!(found[1].only_dir, "a,b/c");
        assert_eq!(found[1].mount_path, "/_kinetic/fuse-data/0");
        assert_eq!(mount_failure(&pod, &found), None);
        let bare = json!({"spec": pod["spec"].clone()});
        let why = mount_failure(&bare, &found).unwrap();
        assert!(
            why.contains("\"gcs-fuse-1\"") && why.contains("failed to find the sidecar container"),
            "{why}"
        );
        assert_eq!(mount_failure(&bare, &[]), None);
    }
}
