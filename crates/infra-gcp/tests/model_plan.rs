//! Planning the infrastructure: the order of a fresh `up`, that a plan
//! carried out leaves nothing to do (whatever an earlier run left behind),
//! that nothing is planned twice, and the plans of `pool add`, `pool
//! remove` and `down`.

use std::collections::BTreeSet;

use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_infra_gcp::model::{
    self, Action, Desired, InfraError, InfraTarget, KubeconfigState, Observed, ObservedBucket,
    ObservedCluster, ObservedKube, ObservedPool, PoolRequest, PoolSpec, Resource, ResourceStatus,
    cluster_url,
};
use proptest::prelude::*;

fn target() -> InfraTarget {
    InfraTarget::new("my-proj", "us-central1-a", "c1", "default").unwrap()
}

fn pool(spec: &str) -> PoolSpec {
    PoolSpec::new(
        &target(),
        &PoolRequest::new(AcceleratorSpec::parse(spec).unwrap()),
        "00ff",
    )
    .unwrap()
}

const ENDPOINT: &str = "34.1.2.3";

/// What the cloud looks like after `action` succeeded: the adapter's
/// contract, as the planner relies on it.
fn apply(desired: &Desired, observed: &mut Observed, action: &Action) {
    match action {
        Action::EnableApis { apis } => observed.apis.extend(apis.iter().cloned()),
        Action::CreateServiceAccount { account } => {
            assert!(
                observed.service_accounts.insert(account.email.clone()),
                "created twice: {}",
                account.email
            );
        }
        Action::CreateBucket { bucket } => {
            let b = ObservedBucket::new(
                &bucket.location,
                Some(bucket.ttl_days),
                bucket.labels.clone(),
            );
            assert!(
                observed.buckets.insert(bucket.name.clone(), b).is_none(),
                "created twice: {}",
                bucket.name
            );
        }
        Action::UpdateBucket { bucket } => {
            let b = observed.buckets.get_mut(&bucket.name).unwrap();
            b.ttl_days = Some(bucket.ttl_days);
            b.labels.extend(bucket.labels.clone());
        }
        Action::CreateRepository { .. } => {
            assert!(!observed.repository, "repository created twice");
            observed.repository = true;
        }
        Action::Grant { resource, bindings } => {
            for b in bindings {
                observed.add_binding(resource.clone(), &b.role, &b.member);
            }
        }
        Action::CreateCluster { cluster } => {
            assert!(observed.cluster.is_none(), "cluster created twice");
            let default = ObservedPool::new(
                &cluster.default_pool.name,
                &cluster.default_pool.machine_type,
                None,
            );
            observed.cluster = Some(ObservedCluster::new(
                ENDPOINT,
                Some(&cluster.workload_pool),
                true,
                vec![default],
            ));
            observed.kube = Some(ObservedKube::default());
        }
        Action::UpdateCluster {
            workload_pool,
            gcs_fuse_csi,
        } => {
            let c = observed.cluster.as_mut().unwrap();
            if let Some(p) = workload_pool {
                c.workload_pool = Some(p.clone());
            }
            c.gcs_fuse_csi |= gcs_fuse_csi;
        }
        Action::WaitCluster => observed.cluster.as_mut().unwrap().status = ResourceStatus::Running,
        Action::WaitClusterDeleted => {
            observed.cluster = None;
            observed.kube = None;
        }
        Action::CreatePool { pool } => {
            let c = observed.cluster.as_mut().unwrap();
            assert!(c.pool(&pool.name).is_none(), "pool created twice");
            let mut p = ObservedPool::new(
                &pool.name,
                pool.machine_type(),
                Some(pool.accelerator.clone()),
            );
            p.autoscaling = Some((pool.min_nodes, pool.max_nodes));
            p.reservation = pool.reservation.clone();
            c.pools.push(p);
        }
        Action::WaitPool { name } => {
            let c = observed.cluster.as_mut().unwrap();
            let i = c.pools.iter().position(|p| &p.name == name).unwrap();
            if c.pools[i].status == ResourceStatus::Stopping {
                c.pools.remove(i);
            } else {
                c.pools[i].status = ResourceStatus::Running;
            }
        }
        Action::DeletePool { name } => observed
            .cluster
            .as_mut()
            .unwrap()
            .pools
            .retain(|p| &p.name != name),
        Action::ApplyServiceAccount {
            google_service_account,
            ..
        } => {
            let k = observed.kube.get_or_insert_with(ObservedKube::default);
            k.namespace = true;
            k.service_account = Some(google_service_account.clone());
        }
        Action::ApplyRole { role, .. } => {
            let k = observed.kube.get_or_insert_with(ObservedKube::default);
            if role.bound_to.is_some() {
                k.hosts_role = Some(role.rules.clone());
                k.hosts_role_bound = true;
            } else {
                k.jobs_role = Some(role.rules.clone());
            }
        }
        Action::InstallManifests { bundle } => {
            let k = observed.kube.get_or_insert_with(ObservedKube::default);
            if bundle.marker_kind == "CustomResourceDefinition" {
                assert!(!k.lws, "LWS installed twice");
                k.lws = true;
            } else {
                assert!(!k.nvidia_driver, "NVIDIA driver installed twice");
                k.nvidia_driver = true;
            }
        }
        Action::WriteKubeconfig { context } => {
            let server = cluster_url(&observed.cluster.as_ref().unwrap().endpoint);
            observed.kubeconfig = Some(KubeconfigState::new(
                "/home/me/.kube/config",
                Some(&server),
                Some(context),
            ));
        }
        Action::DeleteCluster { .. } => {
            observed.cluster = None;
            observed.kube = None;
        }
        Action::DeleteRepository { .. } => {
            observed.repository = false;
            observed.policies.remove(&Resource::Repository);
        }
        Action::DeleteBucket { name } => {
            observed.buckets.remove(name);
            observed.policies.remove(&Resource::Bucket(name.clone()));
        }
        Action::Revoke { resource, bindings } => {
            let p = observed.policies.get_mut(resource).unwrap();
            for b in bindings {
                p.get_mut(&b.role).unwrap().remove(&b.member);
            }
            p.retain(|_, m| !m.is_empty());
        }
        Action::DeleteServiceAccount { email } => {
            observed.service_accounts.remove(email);
            observed
                .policies
                .remove(&Resource::ServiceAccount(email.clone()));
        }
        Action::RemoveKubeconfig { .. } => observed.kubeconfig = None,
        other => panic!("unexpected action {other:?}"),
    }
    let _ = desired;
}

fn run(desired: &Desired, observed: &mut Observed, plan: &model::Plan) {
    for a in &plan.actions {
        apply(desired, observed, a);
    }
}

#[test]
fn a_fresh_project_gets_everything_in_order() {
    let desired = Desired::new(&target());
    let plan = model::plan_up(&desired, &Observed::default(), Some(&pool("l4"))).unwrap();
    let lines: Vec<String> = plan.actions.iter().map(Action::describe).collect();
    let expected = [
        "enable APIs compute.googleapis.com, container.googleapis.com, storage.googleapis.com, artifactregistry.googleapis.com, cloudbuild.googleapis.com, iam.googleapis.com, cloudresourcemanager.googleapis.com",
        "create service account kn-c1-nodes@my-proj.iam.gserviceaccount.com",
        "create service account kn-c1-builds@my-proj.iam.gserviceaccount.com",
        "create bucket gs://my-proj-kn-c1-jobs in us-central1 (objects deleted after 30 days)",
        "create bucket gs://my-proj-kn-c1-builds in us (objects deleted after 30 days)",
        "create Artifact Registry repository kn-c1 in us",
        "grant roles/logging.logWriter to serviceAccount:kn-c1-builds@my-proj.iam.gserviceaccount.com; roles/container.defaultNodeServiceAccount, roles/logging.logWriter, roles/monitoring.metricWriter to serviceAccount:kn-c1-nodes@my-proj.iam.gserviceaccount.com on the project",
        "grant roles/storage.legacyBucketReader, roles/storage.objectAdmin to serviceAccount:kn-c1-builds@my-proj.iam.gserviceaccount.com; roles/storage.legacyBucketReader, roles/storage.objectAdmin to serviceAccount:kn-c1-nodes@my-proj.iam.gserviceaccount.com on bucket gs://my-proj-kn-c1-builds",
        "grant roles/storage.legacyBucketReader, roles/storage.objectAdmin to serviceAccount:kn-c1-builds@my-proj.iam.gserviceaccount.com; roles/storage.legacyBucketReader, roles/storage.objectAdmin to serviceAccount:kn-c1-nodes@my-proj.iam.gserviceaccount.com on bucket gs://my-proj-kn-c1-jobs",
        "grant roles/artifactregistry.writer to serviceAccount:kn-c1-builds@my-proj.iam.gserviceaccount.com; roles/artifactregistry.reader to serviceAccount:kn-c1-nodes@my-proj.iam.gserviceaccount.com on the image repository",
        "create GKE cluster c1 in us-central1-a (Workload Identity, GCS FUSE CSI driver, default-pool 1× e2-standard-4)",
        "create node pool gpu-l4-00ff for gpu:l4 (1× nvidia-l4 GPU on g2-standard-4, 0–10 nodes)",
        "grant roles/iam.workloadIdentityUser to serviceAccount:my-proj.svc.id.goog[default/kinetic] on service account kn-c1-nodes@my-proj.iam.gserviceaccount.com",
        "create Kubernetes service account default/kinetic acting as kn-c1-nodes@my-proj.iam.gserviceaccount.com (Workload Identity)",
        "create Role default/kinetic-jobs (LeaderWorkerSets, for pathways jobs; bind it with `edit`)",
        "create Role default/kinetic-slice-hosts bound to service account kinetic (a slice's hosts end their LeaderWorkerSet, freeing its nodes)",
        "install LeaderWorkerSet v0.5.1 (CRD and controller) from https://github.com/kubernetes-sigs/lws/releases/download/v0.5.1/manifests.yaml",
        "install the NVIDIA driver installer DaemonSet from https://raw.githubusercontent.com/GoogleCloudPlatform/container-engine-accelerators/master/nvidia-driver-installer/cos/daemonset-preloaded.yaml",
        "write kubeconfig context gke_my-proj_us-central1-a_c1 and make it current",
    ];
    assert_eq!(lines, expected);

    let mut observed = Observed::default();
    run(&desired, &mut observed, &plan);
    let again = model::plan_up(&desired, &observed, Some(&pool("l4"))).unwrap();
    assert!(again.is_empty(), "{:?}", again.actions);
    assert_eq!(
        again.notes.len(),
        1,
        "the first pool is not added again: {:?}",
        again.notes
    );
    // The plan is also JSON, one object per action.
    let json = serde_json::to_value(&plan).unwrap();
    assert_eq!(json["actions"][0]["action"], "enable_apis");
    assert_eq!(
        json["actions"][10]["cluster"]["workload_pool"],
        "my-proj.svc.id.goog"
    );
}

/// Everything `up` would have made, piece by piece, so a property can
/// start from any subset (what an interrupted run left behind).
fn finished(desired: &Desired) -> Observed {
    let mut observed = Observed::default();
    let plan = model::plan_up(desired, &observed, Some(&pool("l4"))).unwrap();
    run(desired, &mut observed, &plan);
    observed
}

fn partial(desired: &Desired, keep: &[bool]) -> Observed {
    let full = finished(desired);
    let mut o = Observed::default();
    let mut k = keep.iter().copied().cycle();
    for api in &full.apis {
        if k.next().unwrap() {
            o.apis.insert(api.clone());
        }
    }
    for sa in &full.service_accounts {
        if k.next().unwrap() {
            o.service_accounts.insert(sa.clone());
        }
    }
    for (name, b) in &full.buckets {
        if k.next().unwrap() {
            let mut b = b.clone();
            if k.next().unwrap() {
                b.ttl_days = None; // a bucket made by hand, without the rule
            }
            o.buckets.insert(name.clone(), b);
        }
    }
    o.repository = k.next().unwrap() && full.repository;
    for (resource, roles) in &full.policies {
        for (role, members) in roles {
            for m in members {
                if k.next().unwrap() {
                    o.add_binding(resource.clone(), role, m);
                }
            }
        }
    }
    if k.next().unwrap() {
        let mut c = full.cluster.clone().unwrap();
        if k.next().unwrap() {
            c.status = ResourceStatus::Provisioning;
        }
        if !k.next().unwrap() {
            c.pools.truncate(1);
        } else if k.next().unwrap() {
            c.pools[1].status = ResourceStatus::Provisioning;
        }
        o.cluster = Some(c);
        if k.next().unwrap() {
            let mut kube = full.kube.clone().unwrap();
            kube.lws = k.next().unwrap();
            kube.nvidia_driver = k.next().unwrap() && c_has_gpu(&o);
            if k.next().unwrap() {
                kube.service_account = Some(String::new());
            }
            o.kube = Some(kube);
        }
        if k.next().unwrap() {
            o.kubeconfig = full.kubeconfig.clone();
        }
    }
    o
}

fn c_has_gpu(o: &Observed) -> bool {
    o.cluster
        .iter()
        .flat_map(|c| &c.pools)
        .any(|p| p.accelerator.is_some())
}

proptest! {
    /// Whatever an earlier run left behind, the plan finishes the job,
    /// creates nothing that exists, and a second plan is empty.
    #[test]
    fn up_finishes_what_any_earlier_run_left(keep in proptest::collection::vec(any::<bool>(), 1..64)) {
        let desired = Desired::new(&target());
        let mut observed = partial(&desired, &keep);
        let plan = model::plan_up(&desired, &observed, Some(&pool("l4"))).unwrap();
        let kinds: Vec<String> = plan.actions.iter().map(|a| format!("{a:?}")).collect();
        let unique: BTreeSet<&String> = kinds.iter().collect();
        prop_assert_eq!(unique.len(), kinds.len(), "an action planned twice");
        run(&desired, &mut observed, &plan);
        let again = model::plan_up(&desired, &observed, Some(&pool("l4"))).unwrap();
        prop_assert!(again.is_empty(), "left to do: {:?}", again.actions);
        let report = model::status(&desired, &observed);
        prop_assert!(report.complete(), "{:?}", report.fixes);
        // And down removes everything up made, but the buckets when asked to keep them.
        let down = model::plan_down(&desired, &observed, false);
        run(&desired, &mut observed, &down);
        prop_assert!(observed.cluster.is_none() && !observed.repository && observed.service_accounts.is_empty());
        prop_assert_eq!(observed.buckets.len(), 2);
        prop_assert!(observed.policies.values().flat_map(|r| r.values()).flatten()
            .all(|m| !m.contains("kn-c1-")), "{:?}", observed.policies);
    }
}

#[test]
fn an_earlier_operation_is_waited_for_not_repeated() {
    let desired = Desired::new(&target());
    let mut observed = finished(&desired);
    observed.cluster.as_mut().unwrap().status = ResourceStatus::Provisioning;
    observed.cluster.as_mut().unwrap().pools[1].status = ResourceStatus::Provisioning;
    let plan = model::plan_up(&desired, &observed, None).unwrap();
    assert_eq!(
        plan.actions,
        vec![
            Action::WaitCluster,
            Action::WaitPool {
                name: "gpu-l4-00ff".into()
            }
        ]
    );

    observed.cluster.as_mut().unwrap().status = ResourceStatus::Stopping;
    let plan = model::plan_up(&desired, &observed, None).unwrap();
    assert!(matches!(
        plan.actions[..2],
        [Action::WaitClusterDeleted, Action::CreateCluster { .. }]
    ));

    observed.cluster.as_mut().unwrap().status = ResourceStatus::Error;
    observed.cluster.as_mut().unwrap().status_message = "quota exceeded".into();
    let e = model::plan_up(&desired, &observed, None).unwrap_err();
    assert!(matches!(e, InfraError::ClusterUnusable { .. }));
    assert!(
        e.to_string().contains("quota exceeded") && e.to_string().contains("kinetic down"),
        "{e}"
    );
}

#[test]
fn a_cluster_made_by_hand_is_completed() {
    let desired = Desired::new(&target());
    let mut observed = finished(&desired);
    let c = observed.cluster.as_mut().unwrap();
    c.workload_pool = None;
    c.gcs_fuse_csi = false;
    let plan = model::plan_up(&desired, &observed, None).unwrap();
    assert_eq!(
        plan.actions,
        vec![Action::UpdateCluster {
            workload_pool: Some("my-proj.svc.id.goog".into()),
            gcs_fuse_csi: true
        }]
    );
}

#[test]
fn pool_add_adds_once_and_brings_the_gpu_driver() {
    let desired = Desired::new(&target());
    let e = model::plan_pool_add(&desired, &Observed::default(), &pool("l4")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "cluster 'c1' does not exist in us-central1-a: create it with `kinetic up`"
    );

    let mut observed = finished(&desired);
    observed.cluster.as_mut().unwrap().pools.truncate(1);
    observed.kube.as_mut().unwrap().nvidia_driver = false;
    let plan = model::plan_pool_add(&desired, &observed, &pool("l4:spot")).unwrap();
    assert!(matches!(
        &plan.actions[..],
        [Action::CreatePool { .. }, Action::InstallManifests { .. }]
    ));
    run(&desired, &mut observed, &plan);
    // The same request again: nothing to do, and it says which pool serves it.
    let plan = model::plan_pool_add(&desired, &observed, &pool("l4:spot")).unwrap();
    assert!(plan.is_empty());
    assert!(
        plan.notes[0].contains("gpu-l4-00ff (0–10 nodes) already serves gpu:l4:spot"),
        "{:?}",
        plan.notes
    );
    // A TPU pool needs no GPU driver.
    let plan = model::plan_pool_add(&desired, &observed, &pool("v5litepod-4")).unwrap();
    assert!(matches!(&plan.actions[..], [Action::CreatePool { .. }]));
}

#[test]
fn pool_remove_names_the_pools_there_are() {
    let desired = Desired::new(&target());
    let observed = finished(&desired);
    let plan = model::plan_pool_remove(&desired, &observed, "gpu-l4-00ff").unwrap();
    assert_eq!(
        plan.actions,
        vec![Action::DeletePool {
            name: "gpu-l4-00ff".into()
        }]
    );
    let e = model::plan_pool_remove(&desired, &observed, "gpu-l4-ffff").unwrap_err();
    assert_eq!(
        e.to_string(),
        "no node pool 'gpu-l4-ffff' in cluster 'c1'; its pools: default-pool, gpu-l4-00ff"
    );
    assert!(e.is_invalid_input());
    let e = model::plan_pool_remove(&desired, &observed, "default-pool").unwrap_err();
    assert!(e.to_string().contains("kinetic down"), "{e}");
}

#[test]
fn down_keeps_buckets_unless_asked() {
    let desired = Desired::new(&target());
    let observed = finished(&desired);
    let plan = model::plan_down(&desired, &observed, false);
    let lines: Vec<String> = plan.actions.iter().map(Action::describe).collect();
    assert_eq!(lines[0], "delete GKE cluster c1 with its node pools");
    assert_eq!(
        lines[1],
        "remove kubeconfig context gke_my-proj_us-central1-a_c1"
    );
    assert_eq!(
        lines[2],
        "delete Artifact Registry repository kn-c1 and its images"
    );
    assert!(
        lines.iter().all(|l| !l.starts_with("delete bucket")),
        "{lines:?}"
    );
    assert!(
        plan.notes
            .iter()
            .any(|n| n.contains("gs://my-proj-kn-c1-jobs is kept"))
    );
    assert!(lines.last().unwrap().starts_with("delete service account"));
    let plan = model::plan_down(&desired, &observed, true);
    let deleted: Vec<&Action> = plan
        .actions
        .iter()
        .filter(|a| matches!(a, Action::DeleteBucket { .. }))
        .collect();
    assert_eq!(deleted.len(), 2);
    // Nothing there: nothing to do but say the APIs stay.
    let plan = model::plan_down(&desired, &Observed::default(), true);
    assert!(plan.is_empty());
}

#[test]
fn status_says_what_is_missing_and_how_to_add_it() {
    let desired = Desired::new(&target());
    let report = model::status(&desired, &Observed::default());
    assert_eq!(report.cluster, None);
    assert!(
        report.fixes[0].starts_with("kinetic up"),
        "{:?}",
        report.fixes
    );
    let mut observed = finished(&desired);
    observed.cluster.as_mut().unwrap().pools.truncate(1);
    let report = model::status(&desired, &observed);
    assert_eq!(
        report.fixes,
        vec!["kinetic pool add --accelerator ACCELERATOR (l4, a100x4, v5litepod-4, …)".to_owned()]
    );
    observed
        .buckets
        .get_mut("my-proj-kn-c1-jobs")
        .unwrap()
        .ttl_days = None;
    let report = model::status(&desired, &observed);
    let jobs = report
        .checks
        .iter()
        .find(|c| c.what == "bucket gs://my-proj-kn-c1-jobs")
        .unwrap();
    // A warning: jobs run without the rule, its old objects just stay.
    assert!(
        jobs.ok
            && jobs.state == model::CheckState::Warn
            && jobs.detail.contains("without the 30-day delete rule"),
        "{jobs:?}"
    );
}

#[test]
fn pool_add_on_a_cluster_up_did_not_make_runs_as_its_nodes_account() {
    let desired = Desired::new(&target());
    let mut observed = finished(&desired);
    let nodes = desired.target.names.node_service_account.clone();
    observed.service_accounts.remove(&nodes);
    let cluster = observed.cluster.as_mut().unwrap();
    cluster.pools.truncate(1);
    cluster.pools[0].service_account = Some("default".into());
    let plan = model::plan_pool_add(&desired, &observed, &pool("l4")).unwrap();
    match &plan.actions[0] {
        Action::CreatePool { pool } => assert_eq!(pool.service_account, "default"),
        other => panic!("{other:?}"),
    }
    assert!(
        plan.notes[0].contains(&format!(
            "service account {nodes} does not exist (`kinetic up` did not make this cluster): the pool's nodes run as default, as those of node pool default-pool do"
        )),
        "{:?}",
        plan.notes
    );
    // Its pools name no account: `kinetic up` adopts it.
    observed.cluster.as_mut().unwrap().pools[0].service_account = None;
    let e = model::plan_pool_add(&desired, &observed, &pool("l4")).unwrap_err();
    assert!(matches!(e, InfraError::NotAdopted { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("run `kinetic up`, which adopts the cluster"),
        "{e}"
    );
}

#[test]
fn a_cluster_still_provisioning_has_no_endpoint_yet() {
    let desired = Desired::new(&target());
    let mut observed = finished(&desired);
    let cluster = observed.cluster.as_mut().unwrap();
    cluster.status = ResourceStatus::Provisioning;
    cluster.endpoint = String::new();
    let report = model::status(&desired, &observed);
    assert_eq!(report.endpoint, None);
    assert_eq!(report.cluster.as_deref(), Some("PROVISIONING"));
}
