//! Golden JSON of every request body. Regenerate with
//! `KINETIC_UPDATE_GOLDEN=1 cargo test -p kinetic-infra-gcp --test golden`
//! and review the diff.

use std::path::PathBuf;

use kinetic_core::accelerators::AcceleratorSpec;
use kinetic_infra_gcp::model::{Binding, Desired, InfraTarget, PoolRequest, PoolSpec};
use kinetic_infra_gcp::request;
use serde_json::{Value, json};

fn golden(name: &str, value: &Value) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(value).unwrap() + "\n";
    if std::env::var_os("KINETIC_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (KINETIC_UPDATE_GOLDEN=1 writes it)",
            path.display()
        )
    });
    assert_eq!(text, want, "{name} differs from {}", path.display());
}

fn desired() -> Desired {
    Desired::new(&InfraTarget::new("my-proj", "us-central1-a", "c1", "default").unwrap())
}

fn pool(spec: &str, f: impl Fn(PoolRequest) -> PoolRequest) -> PoolSpec {
    let request = f(PoolRequest::new(AcceleratorSpec::parse(spec).unwrap()));
    PoolSpec::new(&desired().target, &request, "0a1b").unwrap()
}

#[test]
fn request_bodies() {
    let d = desired();
    golden("batch_enable", &request::batch_enable(&d.apis));
    golden(
        "service_account",
        &request::service_account(&d.service_accounts[0]),
    );
    golden("bucket_jobs", &request::bucket(&d.buckets[0]));
    golden("bucket_patch", &request::bucket_patch(&d.buckets[1]));
    golden("repository", &request::repository(&d.repository));
    golden("cluster", &request::cluster(&d.cluster));
    golden(
        "cluster_updates",
        &json!(request::cluster_updates(Some("my-proj.svc.id.goog"), true)),
    );
    let labels = &d.cluster.labels;
    golden(
        "node_pool_l4_spot",
        &request::node_pool(&pool("l4:spot", |r| r), labels),
    );
    golden(
        "node_pool_a100x4_reservation",
        &request::node_pool(
            &pool("a100x4", |r| {
                r.min_nodes(1).max_nodes(2).reservation("res-a100")
            }),
            labels,
        ),
    );
    golden(
        "node_pool_v5litepod_16",
        &request::node_pool(&pool("v5litepod-16", |r| r), labels),
    );
    golden(
        "node_pool_v6e_8_spot",
        &request::node_pool(&pool("v6e-8:spot", |r| r), labels),
    );
    golden(
        "node_pool_v5litepod_4",
        &request::node_pool(&pool("v5litepod-4", |r| r), labels),
    );
    let policy = json!({"version": 1, "etag": "BwYabc=", "bindings": [
        {"role": "roles/owner", "members": ["user:me@example.com"]}]});
    let grant = request::grant(
        &policy,
        &[
            Binding::new(
                "roles/logging.logWriter",
                "serviceAccount:kn-c1-nodes@my-proj.iam.gserviceaccount.com",
            ),
            Binding::new(
                "roles/owner",
                "serviceAccount:kn-c1-nodes@my-proj.iam.gserviceaccount.com",
            ),
        ],
    )
    .unwrap();
    golden("policy_grant", &grant);
}
