//! The LeaderWorkerSet API (`leaderworkerset.x-k8s.io`), as far as this
//! backend writes and reads it: the fields, condition types, labels and
//! variables of the upstream `api/leaderworkerset/v1` types.
//!
//! The version is the cluster's (API discovery), so [`LeaderWorkerSet`]
//! is a [`kube::Resource`] whose dynamic type is the discovered
//! [`ApiResource`].

use std::borrow::Cow;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube::core::{ApiResource, GroupVersionKind};
use serde::{Deserialize, Serialize};

/// The API group.
pub const GROUP: &str = "leaderworkerset.x-k8s.io";
/// The kind.
pub const KIND: &str = "LeaderWorkerSet";
/// The resource, plural.
pub const PLURAL: &str = "leaderworkersets";
/// The version used when discovery cannot tell.
pub const DEFAULT_VERSION: &str = "v1";

/// Label the controller puts on every pod: the LeaderWorkerSet's name.
pub const LABEL_SET_NAME: &str = "leaderworkerset.sigs.k8s.io/name";
/// Label with the pod's group (replica) index.
pub const LABEL_GROUP_INDEX: &str = "leaderworkerset.sigs.k8s.io/group-index";
/// Label with the pod's index in its group: 0 is the leader.
pub const LABEL_WORKER_INDEX: &str = "leaderworkerset.sigs.k8s.io/worker-index";
/// Annotation with the group's size, on every pod.
pub const ANNOTATION_SIZE: &str = "leaderworkerset.sigs.k8s.io/size";

/// Variable the controller sets in every container: the leader's address.
pub const ENV_LEADER_ADDRESS: &str = "LWS_LEADER_ADDRESS";
/// Variable the controller sets in every container: the group's size.
pub const ENV_GROUP_SIZE: &str = "LWS_GROUP_SIZE";
/// Variable the controller sets in every container: the pod's worker index.
pub const ENV_WORKER_INDEX: &str = "LWS_WORKER_INDEX";

/// `restartPolicy`: recreate the whole group when one of its pods
/// restarts (or is deleted).
pub const RECREATE_GROUP_ON_POD_RESTART: &str = "RecreateGroupOnPodRestart";

/// Condition type: the LeaderWorkerSet has its replicas available.
pub const CONDITION_AVAILABLE: &str = "Available";
/// Condition type: groups are being created or updated.
pub const CONDITION_PROGRESSING: &str = "Progressing";
/// Condition type: a rolling update is under way.
pub const CONDITION_UPDATE_IN_PROGRESS: &str = "UpdateInProgress";

/// A LeaderWorkerSet: `replicas` groups of `size` pods, a leader and
/// workers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerSet {
    /// `leaderworkerset.x-k8s.io/{version}`.
    pub api_version: String,
    /// `LeaderWorkerSet`.
    pub kind: String,
    /// Name, namespace, labels, annotations.
    pub metadata: ObjectMeta,
    /// What is wanted.
    #[serde(default)]
    pub spec: LeaderWorkerSetSpec,
    /// What the controller observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<LeaderWorkerSetStatus>,
}

/// `spec` of a [`LeaderWorkerSet`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerSetSpec {
    /// Number of groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The template of a group.
    #[serde(default)]
    pub leader_worker_template: LeaderWorkerTemplate,
    /// `LeaderCreated` (default) or `LeaderReady`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_policy: Option<String>,
}

/// `spec.leaderWorkerTemplate` of a [`LeaderWorkerSet`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerTemplate {
    /// The leader's pod template (the worker's when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_template: Option<PodTemplateSpec>,
    /// The workers' pod template.
    #[serde(default)]
    pub worker_template: PodTemplateSpec,
    /// Pods per group, the leader included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i32>,
    /// `RecreateGroupOnPodRestart`, `RecreateGroupAfterStart` or `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
}

/// `status` of a [`LeaderWorkerSet`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerSetStatus {
    /// `Available`, `Progressing`, `UpdateInProgress`, `Failed`…
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Groups whose pods are all ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Groups at the current template.
    #[serde(default)]
    pub updated_replicas: i32,
    /// Groups created.
    #[serde(default)]
    pub replicas: i32,
}

impl LeaderWorkerSet {
    /// The condition of type `kind` whose status is `True`, if any.
    pub fn condition(&self, kind: &str) -> Option<&Condition> {
        self.status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == kind && c.status == "True")
    }
}

/// The resource at `version` of the group.
pub fn api_resource(version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, version, KIND), PLURAL)
}

impl kube::Resource for LeaderWorkerSet {
    type DynamicType = ApiResource;
    type Scope = kube::core::DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.kind)
    }

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.group)
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.version)
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.api_version)
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.plural)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;

    #[test]
    fn the_url_follows_the_discovered_version() {
        let ar = api_resource("v1beta1");
        assert_eq!(
            LeaderWorkerSet::url_path(&ar, Some("ns")),
            "/apis/leaderworkerset.x-k8s.io/v1beta1/namespaces/ns/leaderworkersets"
        );
    }

    #[test]
    fn an_object_as_the_controller_returns_it_reads() {
        let lws: LeaderWorkerSet = serde_json::from_value(serde_json::json!({
            "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "x", "namespace": "ns"},
            "spec": {"replicas": 1, "startupPolicy": "LeaderCreated",
                     "rolloutStrategy": {"type": "RollingUpdate"},
                     "leaderWorkerTemplate": {"size": 4, "restartPolicy": "RecreateGroupOnPodRestart",
                                              "workerTemplate": {"spec": {"containers": []}}}},
            "status": {"conditions": [{"type": "Available", "status": "True", "reason": "AllGroupsReady",
                                       "message": "", "lastTransitionTime": "2026-03-25T10:00:00Z"}],
                       "readyReplicas": 1, "replicas": 1, "hpaPodSelector": "x"}
        }))
        .unwrap();
        assert_eq!(lws.spec.leader_worker_template.size, Some(4));
        assert!(lws.condition(CONDITION_AVAILABLE).is_some());
        assert!(lws.condition(CONDITION_PROGRESSING).is_none());
    }
}
