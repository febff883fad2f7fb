//! A client profile for the fake's own tests: names of its own, so a test
//! shows the fake takes them from the profile and guesses none.

use std::collections::BTreeMap;

use kinetic_fake_gcp::{ClientProfile, ClientVars, ProjectNames};

fn naming(project: &str, zone: &str, cluster: &str) -> ProjectNames {
    let region = zone.rsplit_once('-').map_or(zone, |(r, _)| r).to_owned();
    ProjectNames {
        jobs_bucket: format!("{project}-t-{cluster}-jobs"),
        builds_bucket: format!("{project}-t-{cluster}-builds"),
        ar_location: "us".to_owned(),
        ar_repository: format!("t-{cluster}"),
        node_service_account: format!("t-{cluster}-nodes@{project}.iam.gserviceaccount.com"),
        build_service_account: format!("t-{cluster}-builds@{project}.iam.gserviceaccount.com"),
        k8s_service_account: "t-jobs".to_owned(),
        kube_context: format!("t_{project}_{zone}_{cluster}"),
        region,
    }
}

/// The test client: variables `T_…`, buckets `{project}-t-{cluster}-…`,
/// zone `europe-west4-a`, namespace `jobs`, and a file `/app/hello.py`
/// in every image that prints `T_GCS_ENDPOINT`, then a greeting.
pub(crate) fn profile() -> ClientProfile {
    let var = |name: &str| format!("T_{name}");
    ClientProfile {
        image_files: vec![(
            "/app/hello.py".to_owned(),
            "import os\nprint(os.environ.get('T_GCS_ENDPOINT'))\nprint('hello from the image')\n"
                .to_owned(),
        )],
        image_packages: BTreeMap::from([
            (
                "cpu".to_owned(),
                vec![
                    "jax".to_owned(),
                    "keras".to_owned(),
                    "cloudpickle".to_owned(),
                ],
            ),
            ("gpu".to_owned(), vec!["jax[cuda12]".to_owned()]),
            ("tpu".to_owned(), vec!["jax[tpu]>=0.4.6".to_owned()]),
        ]),
        vars: ClientVars {
            kubeconfig: "KUBECONFIG".to_owned(),
            project: var("PROJECT"),
            zone: var("ZONE"),
            cluster: var("CLUSTER"),
            namespace: var("NAMESPACE"),
            store_url: var("STORE_URL"),
            gcs_endpoint: var("GCS_ENDPOINT"),
            cloudbuild_endpoint: var("CLOUDBUILD_ENDPOINT"),
            artifactregistry_endpoint: var("ARTIFACTREGISTRY_ENDPOINT"),
            container_endpoint: var("CONTAINER_ENDPOINT"),
            iam_endpoint: var("IAM_ENDPOINT"),
            resourcemanager_endpoint: var("RESOURCEMANAGER_ENDPOINT"),
            serviceusage_endpoint: var("SERVICEUSAGE_ENDPOINT"),
            lws_manifests_url: var("LWS_MANIFESTS_URL"),
            nvidia_driver_manifest_url: var("NVIDIA_DRIVER_MANIFEST_URL"),
            access_token: var("ACCESS_TOKEN"),
        },
        naming,
        zone: "europe-west4-a".to_owned(),
        namespace: "jobs".to_owned(),
    }
}
