//! # kinetic-fake-gcp-server
//!
//! [`kinetic_fake_gcp`] set up for Kinetic. The fake cloud depends on no
//! Kinetic crate; what it must know of Kinetic comes in as configuration,
//! and this crate fills it from `kinetic-core`:
//!
//! - [`profile`]: the runner every image holds (at
//!   [`RUNNER_IMAGE_PATH`], the source Kinetic ships), the base images'
//!   packages, Kinetic's settings variables, how Kinetic names a project's
//!   buckets, registry and accounts, and its default zone and namespace.
//! - [`fake_gcp_config`] and [`fake_cluster_config`]: the fakes' settings
//!   with that profile; [`cluster_cli_env`]: the variables that point the
//!   `kinetic` CLI at a lone fake cluster.
//! - [`build_bucket`]: a Kinetic object store as a bucket of the fake Cloud
//!   Build.
//! - The `kinetic-fake-gcp` binary, which serves a fake project until
//!   stopped.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use kinetic_fake_gcp::FakeGcp;
//!
//! let cloud = FakeGcp::start(kinetic_fake_gcp_server::fake_gcp_config()).await?;
//! let kubeconfig = std::env::temp_dir().join("fake-kubeconfig");
//! cloud.write_kubeconfig(&kubeconfig)?;
//! for (name, value) in cloud.cli_env(&kubeconfig) {
//!     println!("export {name}={value}");
//! }
//! # Ok(()) }
//! ```

use std::path::Path;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use kinetic_core::config::{DEFAULT_NAMESPACE, DEFAULT_ZONE, DerivedNames};
use kinetic_core::image::IMAGE_PACKAGES;
pub use kinetic_core::image::RUNNER_IMAGE_PATH;
use kinetic_core::ports::{ObjectPath, ObjectStore, PutOptions};
use kinetic_core::protocol::RUNNER_SOURCE;
use kinetic_core::settings::vars;
use kinetic_fake_gcp::cloudbuild::BuildBucket;
use kinetic_fake_gcp::k8s::{FAKE_IMAGE, FakeCluster, FakeClusterConfig};
use kinetic_fake_gcp::{ClientProfile, ClientVars, FAKE_K8S_URL, FakeGcpConfig, ProjectNames};

/// The names Kinetic gives the resources of `(project, zone, cluster)`.
fn kinetic_names(project: &str, zone: &str, cluster: &str) -> ProjectNames {
    let n = DerivedNames::new(project, zone, cluster);
    ProjectNames {
        region: n.region,
        jobs_bucket: n.jobs_bucket,
        builds_bucket: n.builds_bucket,
        ar_location: n.ar_location,
        ar_repository: n.ar_repository,
        node_service_account: n.node_service_account,
        build_service_account: n.build_service_account,
        k8s_service_account: n.k8s_service_account,
        kube_context: n.kube_context,
    }
}

/// What the fake cloud knows of Kinetic, from `kinetic-core`.
pub fn profile() -> ClientProfile {
    ClientProfile {
        image_files: vec![(RUNNER_IMAGE_PATH.to_owned(), RUNNER_SOURCE.to_owned())],
        image_packages: IMAGE_PACKAGES
            .iter()
            .map(|(category, packages)| {
                (
                    (*category).to_owned(),
                    packages.iter().map(|p| (*p).to_owned()).collect(),
                )
            })
            .collect(),
        vars: ClientVars {
            kubeconfig: vars::KUBECONFIG.to_owned(),
            project: vars::PROJECT.to_owned(),
            zone: vars::ZONE.to_owned(),
            cluster: vars::CLUSTER.to_owned(),
            namespace: vars::NAMESPACE.to_owned(),
            store_url: vars::STORE_URL.to_owned(),
            gcs_endpoint: vars::GCS_ENDPOINT.to_owned(),
            cloudbuild_endpoint: vars::CLOUDBUILD_ENDPOINT.to_owned(),
            artifactregistry_endpoint: vars::ARTIFACTREGISTRY_ENDPOINT.to_owned(),
            container_endpoint: vars::CONTAINER_ENDPOINT.to_owned(),
            iam_endpoint: vars::IAM_ENDPOINT.to_owned(),
            resourcemanager_endpoint: vars::RESOURCEMANAGER_ENDPOINT.to_owned(),
            serviceusage_endpoint: vars::SERVICEUSAGE_ENDPOINT.to_owned(),
            lws_manifests_url: vars::LWS_MANIFESTS_URL.to_owned(),
            nvidia_driver_manifest_url: vars::NVIDIA_DRIVER_MANIFEST_URL.to_owned(),
            access_token: vars::ACCESS_TOKEN.to_owned(),
        },
        naming: kinetic_names,
        zone: DEFAULT_ZONE.to_owned(),
        namespace: DEFAULT_NAMESPACE.to_owned(),
    }
}

/// A fake project for Kinetic ([`FakeGcpConfig::new`] with [`profile`]).
pub fn fake_gcp_config() -> FakeGcpConfig {
    FakeGcpConfig::new(profile())
}

/// A fake cluster whose images hold Kinetic's runner at
/// [`RUNNER_IMAGE_PATH`].
pub fn fake_cluster_config() -> FakeClusterConfig {
    FakeClusterConfig::default().image_file(RUNNER_IMAGE_PATH, RUNNER_SOURCE)
}

/// The environment that points the `kinetic` CLI at `cluster`
/// (`KUBECONFIG`, `KINETIC_IMAGE`, `KINETIC_NAMESPACE`) and at the jobs
/// store `store_url`, given the kubeconfig written at `kubeconfig`.
pub fn cluster_cli_env(
    cluster: &FakeCluster,
    kubeconfig: &Path,
    store_url: &str,
    namespace: &str,
) -> Vec<(String, String)> {
    [
        (vars::KUBECONFIG, kubeconfig.display().to_string()),
        (vars::STORE_URL, store_url.to_owned()),
        (vars::IMAGE, FAKE_IMAGE.to_owned()),
        (vars::NAMESPACE, namespace.to_owned()),
        (FAKE_K8S_URL, cluster.url().to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// A Kinetic object store as a bucket of the fake Cloud Build
/// ([`kinetic_fake_gcp::FakeCloudBuild::attach_bucket`]).
#[derive(Debug)]
struct StoreBucket(Arc<dyn ObjectStore>);

impl BuildBucket for StoreBucket {
    fn read<'a>(&'a self, object: &'a str) -> BoxFuture<'a, Result<Vec<u8>, String>> {
        Box::pin(async move {
            let path = ObjectPath::parse(object).map_err(|e| e.to_string())?;
            self.0
                .get(&path, Default::default())
                .await
                .map(|b| b.to_vec())
                .map_err(|e| e.to_string())
        })
    }

    fn write_text<'a>(
        &'a self,
        object: &'a str,
        text: String,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let path = ObjectPath::parse(object).map_err(|e| e.to_string())?;
            self.0
                .put(
                    &path,
                    text.into(),
                    PutOptions::default().with_content_type("text/plain"),
                )
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// `store` as a bucket the fake Cloud Build reads build sources from and
/// writes build logs to.
pub fn build_bucket(store: Arc<dyn ObjectStore>) -> Arc<dyn BuildBucket> {
    Arc::new(StoreBucket(store))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_is_kinetics() {
        let p = profile();
        assert_eq!(
            p.image_files,
            [(RUNNER_IMAGE_PATH.to_owned(), RUNNER_SOURCE.to_owned())]
        );
        let names = (p.naming)("proj", "europe-west4-b", "c1");
        let kinetic = DerivedNames::new("proj", "europe-west4-b", "c1");
        assert_eq!(names.jobs_bucket, kinetic.jobs_bucket);
        assert_eq!(names.builds_bucket, kinetic.builds_bucket);
        assert_eq!(names.region, kinetic.region);
        assert_eq!(names.ar_location, kinetic.ar_location);
        assert_eq!(names.ar_repository, kinetic.ar_repository);
        assert_eq!(names.node_service_account, kinetic.node_service_account);
        assert_eq!(names.build_service_account, kinetic.build_service_account);
        assert_eq!(names.k8s_service_account, kinetic.k8s_service_account);
        assert_eq!(names.kube_context, kinetic.kube_context);
        assert_eq!(p.vars.store_url, vars::STORE_URL);
        assert_eq!(p.vars.gcs_endpoint, vars::GCS_ENDPOINT);
        assert_eq!(
            (p.zone.as_str(), p.namespace.as_str()),
            (DEFAULT_ZONE, DEFAULT_NAMESPACE)
        );
        for (category, packages) in IMAGE_PACKAGES {
            assert_eq!(
                p.image_packages.get(*category).map(Vec::len),
                Some(packages.len()),
                "{category}"
            );
        }
    }
}
