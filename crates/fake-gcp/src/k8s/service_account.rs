//! What a pod gets to call the cluster's own API server, as the kubelet
//! and the `ServiceAccount` admission plugin give it:
//!
//! - the variables `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT`
//!   (the `kubernetes` Service in `default`), which the kubelet sets in
//!   every container whatever `enableServiceLinks` says;
//! - unless `automountServiceAccountToken` is `false` on the pod (or, when
//!   the pod does not say, on its service account), the projected volume
//!   `kube-api-access-*` at `/var/run/secrets/kubernetes.io/serviceaccount`:
//!   `token` (a token bound to the pod, which the API server authenticates
//!   as `system:serviceaccount:{namespace}:{account}`, groups
//!   `system:serviceaccounts`, `system:serviceaccounts:{namespace}` and
//!   `system:authenticated`, and refuses once the pod is gone) and
//!   `namespace`.
//!
//! Where the fake differs, and why: its pods are processes of this host,
//! so the volume is written under the pod's mount root (the directory the
//! kubelet gives the runner as `--mount-root`), as its other volumes are;
//! and its API server speaks plain HTTP on loopback, so the volume has no
//! `ca.crt` (a client finding none talks HTTP to the host and port above;
//! on a real cluster `ca.crt` is there and the API is HTTPS).
//! A token's rights are RBAC's: what the Roles bound to the account allow.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::auth::Users;
use super::meta::str_at;
use super::store::Store;

/// Where the token volume is mounted in each container.
pub(crate) const TOKEN_MOUNT: &str = "var/run/secrets/kubernetes.io/serviceaccount";

/// The API server as pods reach it.
#[derive(Debug, Clone)]
pub(crate) struct InClusterApi {
    /// `KUBERNETES_SERVICE_HOST`.
    pub(crate) host: String,
    /// `KUBERNETES_SERVICE_PORT`.
    pub(crate) port: u16,
    /// The API server's tokens: a pod's is registered here.
    pub(crate) users: Arc<Users>,
}

impl InClusterApi {
    /// The variables every container gets.
    pub(crate) fn env(&self) -> [(String, String); 2] {
        [
            ("KUBERNETES_SERVICE_HOST".to_owned(), self.host.clone()),
            ("KUBERNETES_SERVICE_PORT".to_owned(), self.port.to_string()),
        ]
    }

    /// Mount the token volume of `pod` (uid `uid`, in `namespace`) under
    /// `mount_root`, unless the pod or its account opts out. An error names
    /// the file that could not be written.
    pub(crate) fn mount_token(
        &self,
        store: &Store,
        namespace: &str,
        uid: &str,
        pod: &Value,
        mount_root: &Path,
    ) -> Result<(), String> {
        let account = str_at(pod, "/spec/serviceAccountName")
            .filter(|a| !a.is_empty())
            .unwrap_or("default");
        let automount = match pod
            .pointer("/spec/automountServiceAccountToken")
            .and_then(Value::as_bool)
        {
            Some(pod_says) => pod_says,
            None => store
                .get("serviceaccounts", namespace, account)
                .ok()
                .and_then(|sa| sa.get("automountServiceAccountToken")?.as_bool())
                .unwrap_or(true),
        };
        if !automount {
            return Ok(());
        }
        let token = token_of(uid);
        self.users.add_service_account(&token, namespace, account);
        let dir = mount_root.join(TOKEN_MOUNT);
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
        };
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        write("token", &token)?;
        write("namespace", namespace)
    }

    /// The pod `uid` is gone: its bound token is refused from now on.
    pub(crate) fn forget(&self, uid: &str) {
        self.users.revoke(&token_of(uid));
    }
}

/// The token bound to pod `uid`.
fn token_of(uid: &str) -> String {
    format!("fake-bound-token.{uid}")
}
