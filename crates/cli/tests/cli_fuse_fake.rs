//! FUSE data through the real `kinetic` binary with `--backend gke` on the
//! fake cluster and the fake GCS server: a local directory and file
//! (uploaded to the data cache, then mounted) and a `gs://` prefix
//! (mounted where it is) reach the function as read-only paths through
//! GCS FUSE CSI volumes, and the Job carries the sidecar annotation.

use serde_json::Value;

mod sandbox;

use sandbox::world::World;

const WORK_PY: &str = r#"
import os


def _try_write(directory):
    try:
        with open(os.path.join(directory, "new.txt"), "w") as f:
            f.write("x")
        return "written"
    except OSError as e:
        return e.strerror


def read(folder, config, prefix):
    import json
    volume = json.loads(os.environ["KINETIC_VOLUMES"])["/weights"]
    with open(os.path.join(folder, "sub", "a.txt")) as f:
        a = f.read()
    with open(config) as f:
        c = f.read()
    with open(os.path.join(prefix, "shard-0.txt")) as f:
        p = f.read()
    with open(os.path.join(volume, "w.bin")) as f:
        w = f.read()
    return {
        "a": a, "config": c, "prefix": p, "volume": w,
        "listing": sorted(os.listdir(prefix)),
        "write_folder": _try_write(folder),
        "write_prefix": _try_write(prefix),
    }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuse_data_is_mounted_read_only_on_the_fake_cluster() {
    let w = World::gke(WORK_PY)
        .file("data/sub/a.txt", "alpha")
        .file("config.json", "{\"lr\": 1}")
        .bucket("datasets")
        .start()
        .await;
    let gcs = w.gcs();
    gcs.put_object("datasets", "corpus/v1/shard-0.txt", b"shard zero");
    gcs.put_object("datasets", "corpus/v1/shard-1.txt", b"shard one");
    gcs.put_object("datasets", "corpus/v2/other.txt", b"elsewhere");
    gcs.put_object("datasets", "models/w.bin", b"weights");

    let o = w
        .kinetic(&[
            "--json",
            "run",
            "work:read",
            "--backend",
            "gke",
            "--no-cleanup",
            "--arg",
            "data+fuse:data",
            "--arg",
            "data+fuse:config.json",
            "--arg",
            "data+fuse:gs://datasets/corpus/v1/",
            "--volume",
            "/weights=data+fuse:gs://datasets/models/",
        ])
        .await;
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "stdout: {out}\nstderr: {err}");
    let v: Value = serde_json::from_str(&out).expect("JSON");
    let value = &v["value"];
    assert_eq!(value["a"], "alpha", "{v}");
    assert_eq!(value["config"], "{\"lr\": 1}", "{v}");
    assert_eq!(value["prefix"], "shard zero", "{v}");
    assert_eq!(value["volume"], "weights", "{v}");
    assert_eq!(
        value["listing"],
        serde_json::json!(["shard-0.txt", "shard-1.txt"]),
        "{v}"
    );
    assert_eq!(value["write_folder"], "Read-only file system", "{v}");
    assert_eq!(value["write_prefix"], "Read-only file system", "{v}");
    assert!(gcs.object("datasets", "corpus/v1/new.txt").is_none());

    // The Job: the sidecar annotation, one CSI volume per mount (volume
    // first), each mounted read-only.
    let jobs = w.cluster().objects("jobs.batch", "default");
    assert_eq!(jobs.len(), 1);
    let template = &jobs[0]["spec"]["template"];
    assert_eq!(
        template["metadata"]["annotations"]["gke-gcsfuse/volumes"],
        "true"
    );
    let volumes = template["spec"]["volumes"].as_array().unwrap();
    let options: Vec<(&str, &str)> = volumes
        .iter()
        .map(|v| {
            (
                v["csi"]["volumeAttributes"]["bucketName"].as_str().unwrap(),
                v["csi"]["volumeAttributes"]["mountOptions"]
                    .as_str()
                    .unwrap(),
            )
        })
        .collect();
    assert_eq!(options.len(), 4, "{options:?}");
    assert_eq!(options[0], ("datasets", "implicit-dirs,only-dir=models"));
    assert_eq!(options[3], ("datasets", "implicit-dirs,only-dir=corpus/v1"));
    for (bucket, opts) in &options[1..3] {
        assert_eq!(*bucket, "fake-jobs");
        assert!(
            opts.starts_with("implicit-dirs,only-dir=default/data-cache/"),
            "{opts}"
        );
    }
    let mounts = template["spec"]["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap();
    let paths: Vec<&str> = mounts
        .iter()
        .map(|m| m["mountPath"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "/weights",
            "/_kinetic/fuse-data/0",
            "/_kinetic/fuse-data/1",
            "/_kinetic/fuse-data/2"
        ]
    );
    assert!(mounts.iter().all(|m| m["readOnly"] == true));
}
