//! Properties of submission planning (`kinetic_core::plan`): whatever the
//! spec, target, data, accelerator and store, every key the plan writes is
//! the job's, the batch's or the data cache's; every URI in the runner spec
//! is the store's URI of a layout key; and what is written reads back as
//! what was planned.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use kinetic_core::hashing::ContentHash;
use kinetic_core::ids::{GroupId, JobId};
use kinetic_core::layout;
use kinetic_core::plan::{
    self, ContextFacts, DataFacts, GroupPlace, JobFacts, ProjectFacts, UploadSource, UploadTarget,
};
use kinetic_core::ports::ObjectPath;
use kinetic_core::protocol::{DataRef, RunnerEntrypoint, RunnerPlan, RunnerSpec};
use kinetic_core::record::{JobRecord, UtcTimestamp};
use kinetic_core::settings::EngineSettings;
use kinetic_core::spec::{Arg, Data, DataSource, Entrypoint, JobSpec};
use proptest::prelude::*;
use serde_json::Value;
use sha2::Digest;

/// Local data paths the specs draw from: two files and two directories.
static DATA: LazyLock<(tempfile::TempDir, Vec<PathBuf>)> = LazyLock::new(|| {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut paths = Vec::new();
    for name in ["a.txt", "b.bin"] {
        let p = dir.path().join(name);
        std::fs::write(&p, name).expect("write");
        paths.push(p);
    }
    for name in ["set1", "set2"] {
        let p = dir.path().join(name);
        std::fs::create_dir_all(&p).expect("mkdir");
        std::fs::write(p.join("x"), name).expect("write");
        paths.push(p);
    }
    (dir, paths)
});

fn local(i: usize) -> Data {
    let (dir, paths) = &*DATA;
    Data::new(paths[i % paths.len()].to_str().expect("utf-8"), dir.path()).expect("exists")
}

fn remote(i: usize, dir: bool) -> Data {
    let uri = format!("gs://other-bucket/data/{i}{}", if dir { "/" } else { "" });
    Data::new(&uri, Path::new("/")).expect("gs uri")
}

fn data() -> impl Strategy<Value = Data> {
    prop_oneof![
        (0usize..4).prop_map(local),
        (0usize..3, any::<bool>()).prop_map(|(i, d)| remote(i, d)),
    ]
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        "[a-z ]{0,8}".prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        Just(Value::Null),
    ]
}

fn arg() -> impl Strategy<Value = Arg> {
    let leaf = prop_oneof![json_leaf().prop_map(Arg::Json), data().prop_map(Arg::Data)];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Arg::List),
            prop::collection::vec(("[a-z]{1,4}", inner), 0..4).prop_map(Arg::Object),
        ]
    })
}

fn spec() -> impl Strategy<Value = JobSpec> {
    (
        prop::collection::vec(arg(), 0..4),
        prop::collection::btree_map("[a-z][a-z_]{0,5}", arg(), 0..3),
        prop::collection::vec(data(), 0..3),
        prop::option::of("gs://out/[a-z]{1,6}"),
    )
        .prop_map(|(args, kwargs, volumes, output_dir)| {
            let mut spec = JobSpec::new(Entrypoint::parse("work:f").expect("entry"));
            for a in args {
                spec = spec.arg(a);
            }
            for (k, a) in kwargs {
                spec = spec.kwarg(&k, a);
            }
            for (i, d) in volumes.into_iter().enumerate() {
                spec = spec.volume(&format!("/mnt/v{i}"), d);
            }
            if let Some(dir) = output_dir {
                spec = spec.output_dir(&dir);
            }
            spec
        })
}

fn job_id() -> impl Strategy<Value = JobId> {
    "[0-9a-f]{8}".prop_map(|h| format!("job-{h}").parse().expect("job id"))
}

fn group_id() -> impl Strategy<Value = Option<GroupId>> {
    prop::option::of("[0-9a-f]{8}".prop_map(|h| format!("grp-{h}").parse().expect("group id")))
}

/// Stores as their URIs show them.
fn store_base() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "gs://bkt",
        "gs://bkt/some/prefix",
        "file:///tmp/store",
        "memory://",
    ])
}

fn accelerator() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "cpu",
        "l4",
        "a100x4",
        "v5litepod-8",
        "v5litepod-16",
        "v5litepod-256",
    ])
}

fn project() -> ProjectFacts {
    ProjectFacts {
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
    }
}

/// The reference the runner spec must carry for `data`.
fn expected_ref(
    data: &Data,
    facts: &BTreeMap<PathBuf, DataFacts>,
    uri_of: &dyn Fn(&ObjectPath) -> String,
) -> DataRef {
    match data.source() {
        DataSource::Remote(uri) => DataRef::new(uri.trim_end_matches('/'), uri.ends_with('/')),
        DataSource::HuggingFace {
            uri,
            trust_remote_code,
        } => DataRef::new(uri.clone(), true).with_trust_remote_code(*trust_remote_code),
        DataSource::Local(path) => {
            let f = &facts[path];
            DataRef::new(uri_of(&layout::data_entry(&f.hash)), f.is_dir)
                .with_marker(uri_of(&layout::data_marker(&f.hash)))
        }
    }
}

fn expected_json(
    arg: &Arg,
    facts: &BTreeMap<PathBuf, DataFacts>,
    uri_of: &dyn Fn(&ObjectPath) -> String,
) -> Value {
    match arg {
        Arg::Json(v) => v.clone(),
        Arg::Data(d) => expected_ref(d, facts, uri_of).to_value(),
        Arg::List(items) => Value::Array(
            items
                .iter()
                .map(|a| expected_json(a, facts, uri_of))
                .collect(),
        ),
        Arg::Object(items) => Value::Object(
            items
                .iter()
                .map(|(k, a)| (k.clone(), expected_json(a, facts, uri_of)))
                .collect(),
        ),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn plans_write_only_layout_keys_and_name_them_by_the_stores_uris(
        spec in spec(),
        job_id in job_id(),
        group in group_id(),
        base in store_base(),
        accelerator_text in accelerator(),
        hashes in prop::collection::vec(any::<[u8; 32]>(), 4),
        dirs in prop::collection::vec(any::<bool>(), 4),
        context_sha in any::<[u8; 32]>(),
        install in prop::option::of("[a-z]{1,8}(==[0-9]\\.[0-9])?\n"),
        settings_output in prop::option::of("gs://settings-out/[a-z]{1,4}"),
        bucket_name in prop::option::of("[a-z]{3,8}"),
        extra_args in prop::collection::vec(json_leaf(), 0..3),
    ) {
        let uri_of = |p: &ObjectPath| format!("{base}/{p}");
        let (_, paths) = &*DATA;
        let facts: BTreeMap<PathBuf, DataFacts> = paths
            .iter()
            .enumerate()
            .map(|(i, p)| (p.clone(), DataFacts::new(ContentHash::from_bytes(hashes[i]), dirs[i])))
            .collect();
        let mut settings = EngineSettings::for_cluster("p", "us-central1-a", "c", "ns");
        settings.output_dir.clone_from(&settings_output);
        settings.bucket_name = bucket_name.clone().unwrap_or_default();
        let spec = spec.accelerator(accelerator_text);
        let target = match &group {
            Some(g) => UploadTarget::Group(g),
            None => UploadTarget::Job(&job_id),
        };
        let context = ContextFacts::new(context_sha, 10, 2, UploadSource::File("/tmp/context.zip".into()));
        let shared = plan::shared(&spec, &target, &facts, context, install.as_deref(), &uri_of).unwrap();

        // Every shared key is the job's (or the batch's) or the data cache's,
        // but a single job's context, which is content-addressed.
        let owner = match &group {
            Some(g) => layout::group_prefix(g),
            None => layout::job_prefix(&job_id),
        };
        for key in shared.keys() {
            prop_assert!(
                key.is_under(&owner)
                    || layout::is_data_cache(key)
                    || (group.is_none() && *key == layout::shared_context(&context_sha)),
                "{key} is neither under {owner} nor in the data cache"
            );
        }
        // Each local data path once, at its hash's entry and marker.
        let local: Vec<PathBuf> = plan::local_data(&spec);
        prop_assert_eq!(shared.data.len(), local.len());
        for (upload, path) in shared.data.iter().zip(&local) {
            let hash = facts[path].hash;
            prop_assert_eq!(&upload.local, path);
            prop_assert_eq!(&upload.entry, &layout::data_entry(&hash));
            prop_assert_eq!(&upload.marker, &layout::data_marker(&hash));
        }
        // The artifacts are the store's URIs of the planned keys, with their digests.
        prop_assert_eq!(&shared.context_artifact.uri, &uri_of(&shared.context.key));
        prop_assert_eq!(&shared.context_artifact.sha256, &hex::encode(context_sha));
        match (&shared.requirements, &shared.requirements_artifact, &install) {
            (Some(upload), Some(artifact), Some(text)) => {
                prop_assert_eq!(&artifact.uri, &uri_of(&upload.key));
                prop_assert_eq!(&artifact.sha256, &hex::encode(sha2::Sha256::digest(text.as_bytes())));
                prop_assert_eq!(&upload.source, &UploadSource::Bytes(text.clone().into()));
            }
            (None, None, None) => {}
            other => prop_assert!(false, "requirements planned inconsistently: {other:?}"),
        }

        let accelerator = kinetic_core::accelerators::AcceleratorSpec::parse(accelerator_text).unwrap();
        let mut facts_job = JobFacts::new(job_id.clone(), "gke", accelerator_text, &accelerator, UtcTimestamp::from_unix_seconds(1_700_000_000));
        facts_job.extra_args.clone_from(&extra_args);
        facts_job.group = group.clone().map(|g| GroupPlace::new(g, "map", 3));
        let job = plan::job(&spec, &settings, &project(), &shared, &facts_job, &uri_of).unwrap();

        // The job's own keys are under its folder, and are the layout's.
        for key in job.keys() {
            prop_assert!(key.is_under(&layout::job_prefix(&job_id)), "{key}");
        }
        prop_assert_eq!(&job.spec.key, &layout::spec(&job_id));
        prop_assert_eq!(&job.record_upload.key, &layout::record(&job_id));
        prop_assert_eq!(&job.spec_uri, &uri_of(&layout::spec(&job_id)));

        // Every URI in the runner spec is the store's URI of a layout key.
        let r = &job.runner_spec;
        prop_assert_eq!(&r.result_uri, &uri_of(&layout::result(&job_id)));
        let hosts = accelerator.num_hosts();
        prop_assert_eq!(r.worker_result_uris.len() as u32, hosts - 1);
        for (i, uri) in r.worker_result_uris.iter().enumerate() {
            prop_assert_eq!(uri, &uri_of(&layout::host_result(&job_id, i as u32 + 1)));
        }
        // Only a single-host job counts its runs (a slice is run once).
        let starts = (hosts == 1).then(|| uri_of(&layout::starts(&job_id)));
        prop_assert_eq!(&r.starts_uri, &starts);
        prop_assert_eq!(r.cluster.num_nodes, hosts);
        prop_assert_eq!(&r.context, &shared.context_artifact);
        prop_assert_eq!(&r.requirements, &shared.requirements_artifact);
        let mut args: Vec<Value> = spec.args.iter().map(|a| expected_json(a, &facts, &uri_of)).collect();
        args.extend(extra_args.iter().cloned());
        prop_assert_eq!(&r.args, &args);
        for (name, a) in &spec.kwargs {
            prop_assert_eq!(&r.kwargs[name], &expected_json(a, &facts, &uri_of));
        }
        prop_assert_eq!(r.volumes.len(), spec.volumes.len());
        for (volume, (mount, d)) in r.volumes.iter().zip(&spec.volumes) {
            let mut want = expected_ref(d, &facts, &uri_of);
            want.mount_path = Some(mount.clone());
            prop_assert_eq!(&volume.mount_path, mount);
            prop_assert_eq!(&volume.data, &want);
        }
        let want_output = spec.output_dir.clone().or(settings_output).unwrap_or_else(|| {
            let uri = uri_of(&layout::outputs(&job_id));
            uri.strip_prefix("file://").map(str::to_owned).unwrap_or(uri)
        });
        prop_assert_eq!(&r.output_dir, &want_output);

        // What is written reads back as what was planned.
        let UploadSource::Bytes(spec_bytes) = &job.spec.source else { panic!("spec.json is bytes") };
        let back: RunnerSpec = serde_json::from_slice(spec_bytes).unwrap();
        prop_assert_eq!(&back, r);
        let UploadSource::Bytes(record_bytes) = &job.record_upload.source else { panic!("handle.json is bytes") };
        let record = JobRecord::from_json_bytes(record_bytes).unwrap();
        prop_assert_eq!(&record, &job.record);
        prop_assert_eq!(&record.job_id, &job_id);
        prop_assert_eq!(record.group_id.as_ref(), group.as_ref());
        let want_bucket = match bucket_name {
            Some(b) => b,
            None => base.trim_end_matches('/').to_owned(),
        };
        prop_assert_eq!(&record.bucket_name, &want_bucket);
    }
}

#[test]
fn a_local_data_path_without_facts_is_an_error_naming_it() {
    let spec = JobSpec::new(Entrypoint::parse("work:f").unwrap()).arg(local(0));
    let job: JobId = "job-00000001".parse().unwrap();
    let uri_of = |p: &ObjectPath| format!("gs://b/{p}");
    let context = ContextFacts::new([0; 32], 0, 0, UploadSource::Bytes(Vec::new().into()));
    let err = plan::shared(
        &spec,
        &UploadTarget::Job(&job),
        &BTreeMap::new(),
        context,
        None,
        &uri_of,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("a.txt"), "{err}");
}

#[test]
fn the_image_plan_follows_the_mode() {
    use kinetic_core::plan::ImageChoice;
    use kinetic_core::ports::ImageMode;
    use kinetic_core::requirements::{RequirementsMode, ResolvedRequirements};

    let deps = |mode| ResolvedRequirements {
        entry_dir: PathBuf::from("/src"),
        mode,
        file: None,
        requirements: Some("numpy\n".into()),
        warnings: Vec::new(),
    };
    let cpu = kinetic_core::accelerators::AcceleratorSpec::parse("cpu").unwrap();
    let bundled = plan::image(
        &ImageMode::Bundled,
        "3.12",
        &cpu,
        Ok(deps(RequirementsMode::Bundled)),
    )
    .unwrap();
    let ImageChoice::Resolve(request) = bundled.image else {
        panic!("bundled resolves")
    };
    assert_eq!(request.base_image, "python:3.12-slim");
    assert_eq!(request.requirements.as_deref(), Some("numpy\n"));
    assert_eq!(bundled.install_requirements, None);

    let prebuilt = ImageMode::Prebuilt {
        repo: "kinetic".into(),
    };
    let plan = plan::image(
        &prebuilt,
        "3.11",
        &cpu,
        Ok(deps(RequirementsMode::Prebuilt)),
    )
    .unwrap();
    let ImageChoice::Resolve(request) = plan.image else {
        panic!("prebuilt resolves")
    };
    assert_eq!(
        request.requirements, None,
        "installed at start, not baked in"
    );
    assert_eq!(plan.install_requirements.as_deref(), Some("numpy\n"));

    let custom = ImageMode::Custom {
        uri: "img:1".into(),
    };
    let bad =
        Err(kinetic_core::requirements::RequirementsError::NotADirectory { path: "/x".into() });
    let plan = plan::image(&custom, "3.11", &cpu, bad).unwrap();
    assert_eq!(
        plan.image,
        ImageChoice::Fixed("img:1".into()),
        "a custom image ignores the requirements"
    );
    assert_eq!(plan::requirements_mode(&custom), RequirementsMode::Bundled);
}
