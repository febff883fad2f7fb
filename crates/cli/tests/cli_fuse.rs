//! FUSE data through the real `kinetic` binary on the local backend:
//! `--arg data+fuse:PATH` and `--volume MOUNT=data+fuse:PATH` give the
//! function a read-only path (the store's cache entry, bind-mounted in the
//! job's namespace, never copied), one file is read by its name, writing
//! fails even as root, and what cannot be mounted here is refused clearly.

mod sandbox;

use sandbox::{Sandbox, stderr, stdout};

const WORK_PY: &str = r#"
import json
import os


def _try_write(directory):
    try:
        with open(os.path.join(directory, "new.txt"), "w") as f:
            f.write("x")
        return "written"
    except OSError as e:
        return e.strerror


def read(folder, config):
    volume = json.loads(os.environ["KINETIC_VOLUMES"])["/data"]
    with open(os.path.join(folder, "sub", "a.txt")) as f:
        a = f.read()
    with open(config) as f:
        c = f.read()
    with open(os.path.join(volume, "sub", "a.txt")) as f:
        v = f.read()
    try:
        with open(config, "a") as f:
            f.write("more")
        appended = "appended"
    except OSError as e:
        appended = e.strerror
    return {
        "a": a,
        "config": c,
        "config_name": os.path.basename(config),
        "volume": v,
        "uid": os.getuid(),
        "write_folder": _try_write(folder),
        "write_volume": _try_write(volume),
        "append_config": appended,
        "mounted_under_fuse_data": "/_kinetic/fuse-data/" in folder,
    }
"#;

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_str(&stdout(o))
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", stdout(o), stderr(o)))
}

#[test]
fn fuse_data_is_a_read_only_path_on_the_local_backend() {
    let sb = Sandbox::new(WORK_PY);
    let project = sb.path("home/project");
    std::fs::create_dir_all(project.join("data/sub")).unwrap();
    std::fs::write(project.join("data/sub/a.txt"), "alpha").unwrap();
    std::fs::write(project.join("config.json"), "{\"lr\": 1}").unwrap();
    let o = sb.kinetic(&[
        "--json",
        "run",
        "work:read",
        "--arg",
        "data+fuse:data",
        "--arg",
        "data+fuse:config.json",
        "--volume",
        "/data=data+fuse:./data",
    ]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let v = json(&o)["value"].clone();
    assert_eq!(v["a"], "alpha", "{v}");
    assert_eq!(v["config"], "{\"lr\": 1}", "{v}");
    assert_eq!(v["config_name"], "config.json", "{v}");
    assert_eq!(v["volume"], "alpha", "{v}");
    assert_eq!(v["mounted_under_fuse_data"], true, "{v}");
    // Refused by the kernel, whoever the job runs as (it is root in its
    // namespace: permission bits would not stop it).
    assert_eq!(v["uid"], 0, "{v}");
    for key in ["write_folder", "write_volume", "append_config"] {
        assert_eq!(v[key], "Read-only file system", "{key}: {v}");
    }
    // Nothing the job tried landed in the store's cache entry.
    let store = sb.path("local");
    let written = walk(&store)
        .into_iter()
        .filter(|p| p.ends_with("new.txt"))
        .count();
    assert_eq!(written, 0);
    assert_eq!(
        std::fs::read_to_string(project.join("config.json")).unwrap(),
        "{\"lr\": 1}"
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = entry.path();
        if p.is_dir() && !p.is_symlink() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn what_cannot_be_mounted_here_is_refused_clearly() {
    let sb = Sandbox::new(WORK_PY);
    let o = sb.kinetic(&[
        "run",
        "work:read",
        "--arg",
        "data+fuse:gs://bucket/data/",
        "--arg",
        "1",
    ]);
    assert_ne!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert!(
        err.contains("gs://bucket/data") && err.contains("no GCS FUSE driver"),
        "{err}"
    );
    for (arg, part) in [
        (
            "data+fuse:hf://imdb",
            "fuse=True is not supported for Hugging Face",
        ),
        (
            "data+fuze:x",
            "unknown data option \"fuze\" (accepted: fuse",
        ),
    ] {
        let o = sb.kinetic(&["run", "work:read", "--arg", arg]);
        assert_eq!(o.status.code(), Some(2), "{arg}: {}", stderr(&o));
        assert!(stderr(&o).contains(part), "{arg}: {}", stderr(&o));
    }
    let o = sb.kinetic(&[
        "run",
        "work:read",
        "--volume",
        "/_kinetic/fuse-data/3=data+fuse:gs://b/x/",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("'/_kinetic/fuse-data/' is reserved"),
        "{}",
        stderr(&o)
    );
    // Issue 25.9: a volume at the job's root was accepted.
    for mount in ["/", "//"] {
        let o = sb.kinetic(&["run", "work:read", "--volume", &format!("{mount}=./")]);
        assert_eq!(o.status.code(), Some(2), "{mount}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("cannot be mounted at '/'"),
            "{mount}: {}",
            stderr(&o)
        );
    }
}
