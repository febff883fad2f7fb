//! A slice ended by its own hosts: each host, once its command ended,
//! reports it on its LeaderWorkerSet through the cluster's API, with its
//! pod's Kubernetes service account token, so that the slice's TPU nodes
//! are released when its function ends, whether or not a client polls.
//!
//! The rule is the one the backend reads in the hosts' logs
//! ([`crate::status::slice_end`]): a host whose command failed fails the
//! slice with its exit code at once; a host that succeeded adds its index
//! to the set [`ANNOTATION_HOSTS_FINISHED`] on the LeaderWorkerSet, and the
//! host that completes the set (every host of the group, the leader
//! included) ends the slice as succeeded. Ending it is the backend's own
//! end: the final state in `kinetic.dev/final-state` and `replicas: 0`, in
//! one merge patch at the object's `resourceVersion` (a concurrent write,
//! another host's, makes it conflict, and it is read and tried again), so
//! the LeaderWorkerSet controller deletes the group's pods and status,
//! result and logs read as when a client ended it.
//!
//! The host that ends a slice of a node pool then admits the next queued
//! slice of that pool ([`crate::admission`]), so a detached map runs its
//! slices one after another with no client. Ending the slice deletes the
//! host's own pod: the host's shell waits for this program on the pod's
//! SIGTERM ([`crate::manifest::HOLD_WORKERS`]), so the admission has the
//! pod's grace period, and a busy API server is asked again within it.
//!
//! What it needs on the cluster: the API server's address in the pod
//! (`KUBERNETES_SERVICE_HOST`/`PORT`, which every pod has), the
//! service account token mounted at
//! `/var/run/secrets/kubernetes.io/serviceaccount` (the default), and for
//! the jobs' service account `get`, `list` and `patch` on
//! `leaderworkersets` and `get`, `create`, `update` on `configmaps`: the
//! Role `kinetic-slice-hosts` and its RoleBinding, which `kinetic up`
//! makes. Without them the host says why in its log and holds as before,
//! and the slice is ended by the next client that polls it.

use kinetic_core::status::{JobState, JobStatus, StatusReason};

use crate::admission::{ENV_SLICE_POOL, HOLDER_KEY, LABEL_SLICE_POOL, queue_map_name};
use kinetic_kube::pod::ANNOTATION_FINAL_STATE;

/// Annotation on a LeaderWorkerSet: the JSON list of the indices of the
/// hosts whose command succeeded, as they reported it.
pub const ANNOTATION_HOSTS_FINISHED: &str = "kinetic.dev/hosts-finished";

/// Variable every host gets: the name of its LeaderWorkerSet.
pub const ENV_SLICE_NAME: &str = "KINETIC_SLICE_NAME";

/// The Python program (standard library only; every image of a job has
/// Python) a host runs once its command ended, as
/// `python3 -c PROGRAM MOUNT_ROOT EXIT_CODE WORKER_INDEX`, for a slice
/// served at API version `api_version` (`leaderworkerset.x-k8s.io/v1`).
/// `MOUNT_ROOT` is where volumes are mounted (`/` in a real container).
/// It always exits 0; what it did or could not do is one line on stderr.
pub fn end_program(api_version: &str) -> String {
    let succeeded = state_text(&JobState::new(JobStatus::Succeeded));
    let failed = state_text(
        &JobState::new(JobStatus::Failed).with_reason(StatusReason::ExitCode { code: 1 }),
    );
    PROGRAM
        .replace("@API_VERSION@", &py_str(api_version))
        .replace("@FINAL@", &py_str(ANNOTATION_FINAL_STATE))
        .replace("@FINISHED@", &py_str(ANNOTATION_HOSTS_FINISHED))
        .replace("@SLICE@", &py_str(ENV_SLICE_NAME))
        .replace("@SUCCEEDED@", &py_str(&succeeded))
        .replace("@FAILED@", &py_str(&failed))
        .replace("@POOL_ENV@", &py_str(ENV_SLICE_POOL))
        .replace("@POOL_LABEL@", &py_str(LABEL_SLICE_POOL))
        .replace("@QUEUE@", &py_str(&queue_map_name("")))
        .replace("@HOLDER@", &py_str(HOLDER_KEY))
}

fn state_text(state: &JobState) -> String {
    serde_json::to_string(state).unwrap_or_default()
}

/// `text` as a Python string literal (a JSON string is one).
fn py_str(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// [`end_program`] before its constants are filled in. No single quote
/// and no `$(` in it: it travels in a container's arguments, where the
/// kubelet expands `$(VAR)`.
const PROGRAM: &str = r#"import json, os, ssl, sys, time, urllib.error, urllib.parse, urllib.request
root, code, index = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def say(text):
    sys.stderr.write("[kinetic] host %d: %s\n" % (index, text))
    sys.stderr.flush()
account = os.path.join(root, "var/run/secrets/kubernetes.io/serviceaccount")
host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
port = os.environ.get("KUBERNETES_SERVICE_PORT", "")
name = os.environ.get(@SLICE@, "")
size = int(os.environ.get("LWS_GROUP_SIZE") or "1")
if not (host and port and name and os.path.isfile(os.path.join(account, "token"))):
    say("cannot end the slice itself (no API server address or service account token in the pod); the client ends it")
    sys.exit(0)
with open(os.path.join(account, "token")) as f:
    token = f.read().strip()
with open(os.path.join(account, "namespace")) as f:
    namespace = f.read().strip()
ca = os.path.join(account, "ca.crt")
scheme, context = "http", None
if os.path.isfile(ca):
    scheme, context = "https", ssl.create_default_context(cafile=ca)
if ":" in host:
    host = "[" + host + "]"
base = "%s://%s:%s" % (scheme, host, port)
sets_url = "%s/apis/%s/namespaces/%s/leaderworkersets" % (base, @API_VERSION@, namespace)
url = sets_url + "/" + name
def call(method, body=None, at=None, kind="application/merge-patch+json"):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(at or url, data=data, method=method, headers={
        "Authorization": "Bearer " + token, "Accept": "application/json",
        "Content-Type": kind, "User-Agent": "kinetic-slice-host"})
    with urllib.request.urlopen(request, timeout=10, context=context) as response:
        return json.load(response)
def live(s):
    meta = s.get("metadata") or {}
    return @FINAL@ not in (meta.get("annotations") or {}) and not meta.get("deletionTimestamp")
def queued(s):
    return live(s) and (s.get("spec") or {}).get("replicas") == 0
def set_name(s):
    return s["metadata"]["name"]
def admit_once(pool):
    maps_url = "%s/api/v1/namespaces/%s/configmaps" % (base, namespace)
    map_name = @QUEUE@ + pool
    selector = urllib.parse.quote(@POOL_LABEL@ + "=" + pool)
    sets = call("GET", at=sets_url + "?labelSelector=" + selector).get("items") or []
    try:
        queue_map = call("GET", at=maps_url + "/" + map_name)
    except urllib.error.HTTPError as e:
        if e.code != 404:
            raise
        queue_map = None
    holder = ((queue_map or {}).get("data") or {}).get(@HOLDER@)
    held = [s for s in sets if set_name(s) == holder and live(s)]
    in_use = held + [s for s in sets if live(s) and not queued(s) and set_name(s) != holder]
    waiting = sorted((s for s in sets if queued(s)),
                     key=lambda s: (s["metadata"].get("creationTimestamp") or "", set_name(s)))
    if in_use:
        if held and queued(held[0]):
            call("PATCH", {"spec": {"replicas": 1}}, at=sets_url + "/" + holder)
        return
    if not waiting:
        return
    chosen = set_name(waiting[0])
    if queue_map is None:
        call("POST", {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": map_name, "labels": {"app.kubernetes.io/managed-by": "kinetic"}},
                      "data": {@HOLDER@: chosen}}, at=maps_url, kind="application/json")
    else:
        queue_map.setdefault("data", {})[@HOLDER@] = chosen
        call("PUT", queue_map, at=maps_url + "/" + map_name, kind="application/json")
    call("PATCH", {"spec": {"replicas": 1}}, at=sets_url + "/" + chosen)
    say("admitted the next slice of pool %s: %s" % (pool, chosen))
def admit_next():
    # With no client, nobody else admits the next slice: a busy or
    # unreachable API server (a timeout, 429, 5xx) is tried again for
    # about 15 s (the pod, deleted by the end of its slice, has its grace
    # period: 30 s by default) before the host gives up and says so.
    pool = os.environ.get(@POOL_ENV@, "")
    if not pool:
        return
    error = None
    for attempt in range(8):
        try:
            admit_once(pool)
            return
        except urllib.error.HTTPError as e:
            error = e
            if e.code == 409:
                continue
            if e.code != 429 and e.code < 500:
                break
        except (OSError, ValueError) as e:
            error = e
        time.sleep(min(0.25 * 2 ** attempt, 4))
    say("cannot admit the next slice of pool %s (%s); a client polling it will" % (pool, error))
for attempt in range(30):
    try:
        lws = call("GET")
        meta = lws.get("metadata") or {}
        notes = meta.get("annotations") or {}
        if @FINAL@ in notes:
            say("the slice had already ended")
            break
        finished = set(json.loads(notes.get(@FINISHED@) or "[]"))
        state = None
        if code != 0:
            state = json.loads(@FAILED@)
            state["reason"]["code"] = code
        else:
            finished.add(index)
            if len(finished) >= size:
                state = json.loads(@SUCCEEDED@)
        notes = {@FINISHED@: json.dumps(sorted(finished))}
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion"), "annotations": notes}}
        if state is not None:
            notes[@FINAL@] = json.dumps(state, separators=(",", ":"))
            patch["spec"] = {"replicas": 0}
        call("PATCH", patch)
        if state is None:
            say("finished; %d of %d hosts have" % (len(finished), size))
        else:
            say("ended the slice (%s); its nodes are released" % state["status"])
            admit_next()
        break
    except urllib.error.HTTPError as e:
        if e.code == 409:
            continue
        say("cannot end the slice itself (%d %s from the API server); the client ends it" % (e.code, e.reason))
        break
    except (OSError, ValueError) as e:
        if attempt >= 5:
            say("cannot end the slice itself (%s); the client ends it" % e)
            break
        time.sleep(1)
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_carries_the_states_the_backend_reads() {
        let program = end_program("leaderworkerset.x-k8s.io/v1");
        assert!(!program.contains('@'), "{program}");
        assert!(!program.contains('\''), "a single quote");
        assert!(!program.contains("$("), "the kubelet would expand it");
        assert!(
            program.contains(r#""{\"status\":\"SUCCEEDED\"}""#),
            "{program}"
        );
        let failed: JobState =
            serde_json::from_str(r#"{"status":"FAILED","reason":{"kind":"exit_code","code":3}}"#)
                .unwrap();
        assert_eq!(
            failed,
            JobState::new(JobStatus::Failed).with_reason(StatusReason::ExitCode { code: 3 })
        );
        assert!(
            program.contains(
                r#""{\"status\":\"FAILED\",\"reason\":{\"kind\":\"exit_code\",\"code\":1}}""#
            ),
            "{program}"
        );
    }
}
