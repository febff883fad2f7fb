//! FUSE data in a plan: which mounts a job gets and how its arguments
//! refer to them (volumes at their paths first, then the arguments' data at
//! `/_kinetic/fuse-data/{n}`; an uploaded file is read by its name inside
//! the cache entry's mount; `hf://` cannot be mounted).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kinetic_core::hashing::ContentHash;
use kinetic_core::plan::{
    self, ContextFacts, DataFacts, JobFacts, ProjectFacts, UploadSource, UploadTarget,
};
use kinetic_core::ports::{FuseMount, ObjectPath};
use kinetic_core::protocol::{RunnerEntrypoint, RunnerPlan, RunnerSpec};
use kinetic_core::record::UtcTimestamp;
use kinetic_core::settings::EngineSettings;
use kinetic_core::spec::{Arg, Data, Entrypoint, JobSpec};
use proptest::prelude::*;
use serde_json::{Value, json};

fn uri_of(p: &ObjectPath) -> String {
    format!("gs://bkt/{p}")
}

fn facts_for(spec: &JobSpec) -> BTreeMap<PathBuf, DataFacts> {
    plan::local_data(spec)
        .into_iter()
        .map(|p| {
            let hash = ContentHash::from_bytes([p.as_os_str().len() as u8; 32]);
            (p.clone(), DataFacts::new(hash, p.is_dir()))
        })
        .collect()
}

fn planned(spec: &JobSpec) -> (RunnerSpec, Vec<FuseMount>) {
    let job_id = "job-0a1b2c3d".parse().unwrap();
    let context = ContextFacts::new([1; 32], 10, 1, UploadSource::File("/tmp/c.zip".into()));
    let shared = plan::shared(
        spec,
        &UploadTarget::Job(&job_id),
        &facts_for(spec),
        context,
        None,
        &uri_of,
    )
    .unwrap();
    let settings = EngineSettings::for_cluster("p", "us-central1-a", "c", "default");
    let (text, accel) = plan::accelerator(spec, &settings).unwrap();
    let facts = JobFacts::new(
        job_id,
        "gke",
        &text,
        &accel,
        UtcTimestamp::from_unix_seconds(0),
    );
    let project = ProjectFacts {
        plan: RunnerPlan {
            package_root: "/src".into(),
            entry_rel: String::new(),
            client_cwd_rel: Some(String::new()),
            sys_path_rel: vec![String::new()],
        },
        entrypoint: RunnerEntrypoint::Function {
            module: Some("work".into()),
            path: None,
            function: "f".into(),
        },
    };
    let job = plan::job(spec, &settings, &project, &shared, &facts, &uri_of).unwrap();
    (job.runner_spec, job.fuse_mounts)
}

fn entry() -> JobSpec {
    JobSpec::new(Entrypoint::parse("work:f").unwrap())
}

#[test]
fn volumes_mount_first_then_arguments_in_order() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.json"), "{}").unwrap();
    std::fs::create_dir(dir.path().join("set")).unwrap();
    let file = Data::new("config.json", dir.path())
        .unwrap()
        .fuse(true)
        .unwrap();
    let set = Data::new("set", dir.path()).unwrap().fuse(true).unwrap();
    let bucket = Data::new("gs://data/imagenet/", dir.path())
        .unwrap()
        .fuse(true)
        .unwrap();
    let downloaded = Data::new("gs://data/small/", dir.path()).unwrap();
    let spec = entry()
        .arg(file.clone())
        .arg(Arg::List(vec![downloaded.into(), bucket.clone().into()]))
        .kwarg("again", file.clone())
        .volume("/data", set.clone());
    let (runner, mounts) = planned(&spec);
    let hash = |len: usize| ContentHash::from_bytes([len as u8; 32]);
    let set_path = dir.path().join("set");
    let file_path = dir.path().join("config.json");
    let entry_uri = |p: &Path| format!("gs://bkt/default/data-cache/{}", hash(p.as_os_str().len()));
    assert_eq!(
        mounts,
        vec![
            FuseMount {
                uri: entry_uri(&set_path),
                mount_path: "/data".into(),
                is_dir: true
            },
            FuseMount {
                uri: format!("{}/config.json", entry_uri(&file_path)),
                mount_path: "/_kinetic/fuse-data/0".into(),
                is_dir: false
            },
            FuseMount {
                uri: "gs://data/imagenet".into(),
                mount_path: "/_kinetic/fuse-data/1".into(),
                is_dir: true
            },
        ]
    );
    // The argument refs name their mounts; a downloaded one has none.
    assert_eq!(runner.args[0]["mount_path"], json!("/_kinetic/fuse-data/0"));
    assert_eq!(runner.args[0]["fuse"], json!(true));
    assert!(
        runner.args[0].get("cache_marker").is_none(),
        "mounted, not fetched"
    );
    assert_eq!(runner.args[1][0]["fuse"], json!(false));
    assert_eq!(runner.args[1][0]["mount_path"], Value::Null);
    assert_eq!(
        runner.args[1][1]["mount_path"],
        json!("/_kinetic/fuse-data/1")
    );
    assert_eq!(runner.kwargs["again"], runner.args[0], "one mount per data");
    assert_eq!(runner.volumes[0].data.mount_path.as_deref(), Some("/data"));
    assert!(runner.volumes[0].data.fuse);
}

#[test]
fn the_same_data_mounted_and_downloaded_gets_two_refs() {
    let spec = entry()
        .arg(Data::new("gs://d/x/", Path::new("/")).unwrap())
        .arg(
            Data::new("gs://d/x/", Path::new("/"))
                .unwrap()
                .fuse(true)
                .unwrap(),
        );
    let (runner, mounts) = planned(&spec);
    assert_eq!(runner.args[0]["fuse"], json!(false));
    assert_eq!(runner.args[1]["fuse"], json!(true));
    assert_eq!(mounts.len(), 1);
}

#[test]
fn hugging_face_data_cannot_be_mounted() {
    let err = Data::new("hf://imdb", Path::new("/"))
        .unwrap()
        .fuse(true)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("fuse=True is not supported for Hugging Face"),
        "{err}"
    );
}

fn fuse_data() -> impl Strategy<Value = Data> {
    (0usize..4, any::<bool>(), any::<bool>()).prop_map(|(i, dir, fuse)| {
        let uri = format!("gs://b/p{i}{}", if dir { "/" } else { "" });
        Data::new(&uri, Path::new("/")).unwrap().fuse(fuse).unwrap()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Whatever the arguments and volumes: every FUSE ref of the runner
    /// spec has a mount the backend is told to make with the same URI,
    /// mount paths are distinct, the arguments' are numbered from 0 without
    /// a gap, and no downloaded ref has a mount.
    #[test]
    fn every_fuse_ref_has_its_mount(
        args in prop::collection::vec(fuse_data(), 0..6),
        kwargs in prop::collection::vec(fuse_data(), 0..3),
        volumes in prop::collection::vec(fuse_data(), 0..3),
    ) {
        let mut spec = entry();
        for a in args { spec = spec.arg(a); }
        for (i, a) in kwargs.into_iter().enumerate() { spec = spec.kwarg(&format!("k{i}"), a); }
        for (i, d) in volumes.into_iter().enumerate() { spec = spec.volume(&format!("/v{i}"), d); }
        let (runner, mounts) = planned(&spec);
        let by_path: BTreeMap<&str, &FuseMount> =
            mounts.iter().map(|m| (m.mount_path.as_str(), m)).collect();
        prop_assert_eq!(by_path.len(), mounts.len());
        let generated: Vec<&str> = mounts
            .iter()
            .filter_map(|m| m.mount_path.strip_prefix(plan::FUSE_ARG_MOUNT_PREFIX))
            .collect();
        let expected: Vec<String> = (0..generated.len()).map(|n| n.to_string()).collect();
        prop_assert_eq!(generated, expected);
        let refs = runner.args.iter().chain(runner.kwargs.values()).cloned();
        for v in &runner.volumes {
            if v.data.fuse {
                prop_assert_eq!(&by_path[v.mount_path.as_str()].uri, &v.data.uri);
            }
        }
        for r in refs {
            if r["fuse"] == json!(true) {
                let mount = by_path.get(r["mount_path"].as_str().unwrap());
                prop_assert!(mount.is_some(), "{}", r);
                prop_assert_eq!(json!(mount.unwrap().uri), r["uri"].clone());
            } else {
                prop_assert_eq!(r["mount_path"].clone(), Value::Null);
            }
        }
    }
}
