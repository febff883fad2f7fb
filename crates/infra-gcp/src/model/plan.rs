//! Observed → desired: the ordered [`Action`]s that finish the
//! infrastructure (`up`, `pool add`) or take it down (`pool remove`,
//! `down`). Pure: the adapter executes the plan; running the planner again
//! on what the adapter observes afterwards gives an empty plan.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::{
    BucketSpec, ClusterSpec, DEFAULT_POOL, Desired, Grant, InfraError, ManifestBundle, Observed,
    PoolSpec, RepositorySpec, Resource, ResourceStatus, RoleSpec, ServiceAccountSpec, cluster_url,
};
use kinetic_core::accelerators::AcceleratorSpec;

/// One IAM binding in an action.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[non_exhaustive]
pub struct Binding {
    /// The role.
    pub role: String,
    /// The member.
    pub member: String,
}

impl Binding {
    /// `member` holds `role`.
    pub fn new(role: &str, member: &str) -> Self {
        Self {
            role: role.to_owned(),
            member: member.to_owned(),
        }
    }
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Action {
    /// Enable these APIs in the project.
    EnableApis {
        /// Service names (`container.googleapis.com`).
        apis: Vec<String>,
    },
    /// Create a Google service account.
    CreateServiceAccount {
        /// The account.
        account: ServiceAccountSpec,
    },
    /// Create a bucket (location, 30-day rule, labels, uniform access).
    CreateBucket {
        /// The bucket.
        bucket: BucketSpec,
    },
    /// Set an existing bucket's delete rule and labels.
    UpdateBucket {
        /// The bucket as it should be.
        bucket: BucketSpec,
    },
    /// Create the Artifact Registry repository.
    CreateRepository {
        /// The repository.
        repository: RepositorySpec,
    },
    /// Add bindings to a resource's IAM policy (read, modify, write).
    Grant {
        /// Where.
        resource: Resource,
        /// What to add.
        bindings: Vec<Binding>,
    },
    /// Remove bindings from a resource's IAM policy.
    Revoke {
        /// Where.
        resource: Resource,
        /// What to remove.
        bindings: Vec<Binding>,
    },
    /// Create the GKE cluster and wait until it runs.
    CreateCluster {
        /// The cluster.
        cluster: ClusterSpec,
    },
    /// Turn on what an existing cluster lacks.
    UpdateCluster {
        /// Enable Workload Identity with this pool.
        workload_pool: Option<String>,
        /// Enable the GCS FUSE CSI driver.
        gcs_fuse_csi: bool,
    },
    /// Wait for an operation started earlier to finish changing the cluster.
    WaitCluster,
    /// Wait until the cluster is gone (it is being deleted).
    WaitClusterDeleted,
    /// Create a node pool and wait until it runs.
    CreatePool {
        /// The pool.
        pool: PoolSpec,
    },
    /// Wait for an operation started earlier to finish changing a pool.
    WaitPool {
        /// The pool.
        name: String,
    },
    /// Delete a node pool and wait until it is gone.
    DeletePool {
        /// The pool.
        name: String,
    },
    /// Create (or annotate) the Kubernetes service account jobs run as,
    /// in its namespace (created if missing).
    ApplyServiceAccount {
        /// Namespace.
        namespace: String,
        /// Name (`kinetic`).
        name: String,
        /// The Google service account it acts as.
        google_service_account: String,
    },
    /// Create (or replace the rules of) the Role job submitters need
    /// besides `edit`, in the jobs' namespace.
    ApplyRole {
        /// Namespace.
        namespace: String,
        /// The Role.
        role: RoleSpec,
    },
    /// Install a published set of manifests (objects that exist are kept;
    /// missing ones, a deleted controller's Deployment say, are made), then
    /// wait for its controller to be available and its webhook to answer.
    InstallManifests {
        /// What and from where.
        bundle: ManifestBundle,
    },
    /// Write the cluster's context into the kubeconfig and make it current,
    /// as `gcloud container clusters get-credentials` does.
    WriteKubeconfig {
        /// The context (`gke_{project}_{zone}_{cluster}`).
        context: String,
    },
    /// Delete the cluster (its pools and nodes with it) and wait.
    DeleteCluster {
        /// The cluster.
        name: String,
    },
    /// Delete the image repository and its images.
    DeleteRepository {
        /// The repository.
        name: String,
    },
    /// Delete a bucket and every object in it.
    DeleteBucket {
        /// The bucket.
        name: String,
    },
    /// Delete a Google service account.
    DeleteServiceAccount {
        /// Its e-mail.
        email: String,
    },
    /// Remove the cluster's context from the kubeconfig.
    RemoveKubeconfig {
        /// The context.
        context: String,
    },
}

impl Action {
    /// One line saying what the action does, for the printed plan.
    pub fn describe(&self) -> String {
        // "grant R to M", "revoke R from M".
        let roles = |bindings: &[Binding], to: &str| {
            let mut by_member: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for b in bindings {
                by_member.entry(&b.member).or_default().push(&b.role);
            }
            by_member
                .iter()
                .map(|(m, r)| format!("{} {to} {m}", r.join(", ")))
                .collect::<Vec<_>>()
                .join("; ")
        };
        match self {
            Self::EnableApis { apis } => format!("enable APIs {}", apis.join(", ")),
            Self::CreateServiceAccount { account } => {
                format!("create service account {}", account.email)
            }
            Self::CreateBucket { bucket } => format!(
                "create bucket gs://{} in {} (objects deleted after {} days)",
                bucket.name, bucket.location, bucket.ttl_days
            ),
            Self::UpdateBucket { bucket } => format!(
                "set bucket gs://{}'s rule (delete objects after {} days) and labels",
                bucket.name, bucket.ttl_days
            ),
            Self::CreateRepository { repository } => format!(
                "create Artifact Registry repository {} in {}",
                repository.name, repository.location
            ),
            Self::Grant { resource, bindings } => {
                format!("grant {} on {resource}", roles(bindings, "to"))
            }
            Self::Revoke { resource, bindings } => {
                format!("revoke {} on {resource}", roles(bindings, "from"))
            }
            Self::CreateCluster { cluster } => format!(
                "create GKE cluster {} in {} (Workload Identity, GCS FUSE CSI driver, {} {}× {})",
                cluster.name,
                cluster.zone,
                cluster.default_pool.name,
                cluster.default_pool.node_count,
                cluster.default_pool.machine_type
            ),
            Self::UpdateCluster {
                workload_pool,
                gcs_fuse_csi,
            } => {
                let mut what = Vec::new();
                if let Some(pool) = workload_pool {
                    what.push(format!("Workload Identity ({pool})"));
                }
                if *gcs_fuse_csi {
                    what.push("the GCS FUSE CSI driver".to_owned());
                }
                format!("enable {} on the cluster", what.join(" and "))
            }
            Self::WaitCluster => {
                "wait for the cluster's operation in progress to finish".to_owned()
            }
            Self::WaitClusterDeleted => "wait for the cluster's deletion to finish".to_owned(),
            Self::CreatePool { pool } => {
                let what = match pool.gpu() {
                    Some((kind, n)) => format!("{n}× {kind} GPU on {}", pool.machine_type()),
                    None => match pool.accelerator.topology() {
                        Some(t) => format!(
                            "TPU {} {t} on {}",
                            pool.accelerator.name(),
                            pool.machine_type()
                        ),
                        None => pool.machine_type().to_owned(),
                    },
                };
                let mut s = format!(
                    "create node pool {} for {} ({what}, {}–{} nodes",
                    pool.name, pool.accelerator, pool.min_nodes, pool.max_nodes
                );
                if pool.spot() {
                    s.push_str(", Spot");
                }
                if let Some(r) = &pool.reservation {
                    s.push_str(&format!(", reservation {r}"));
                }
                s.push(')');
                s
            }
            Self::WaitPool { name } => {
                format!("wait for node pool {name}'s operation in progress to finish")
            }
            Self::DeletePool { name } => format!("delete node pool {name}"),
            Self::ApplyServiceAccount {
                namespace,
                name,
                google_service_account,
            } => format!(
                "create Kubernetes service account {namespace}/{name} acting as {google_service_account} (Workload Identity)"
            ),
            Self::ApplyRole { namespace, role } => match &role.bound_to {
                Some(account) => format!(
                    "create Role {namespace}/{} bound to service account {account} (a slice's hosts end their LeaderWorkerSet, freeing its nodes)",
                    role.name
                ),
                None => format!(
                    "create Role {namespace}/{} (LeaderWorkerSets, for pathways jobs; bind it with `edit`)",
                    role.name
                ),
            },
            Self::InstallManifests { bundle } => {
                format!("install {} from {}", bundle.name, bundle.url)
            }
            Self::WriteKubeconfig { context } => {
                format!("write kubeconfig context {context} and make it current")
            }
            Self::DeleteCluster { name } => {
                format!("delete GKE cluster {name} with its node pools")
            }
            Self::DeleteRepository { name } => {
                format!("delete Artifact Registry repository {name} and its images")
            }
            Self::DeleteBucket { name } => format!("delete bucket gs://{name} and its objects"),
            Self::DeleteServiceAccount { email } => format!("delete service account {email}"),
            Self::RemoveKubeconfig { context } => {
                format!("remove kubeconfig context {context}")
            }
        }
    }
}

/// What to do, in order, and what the user should know about it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Plan {
    /// The actions, in the order they must run.
    pub actions: Vec<Action>,
    /// Remarks (what is kept, what was ignored).
    pub notes: Vec<String>,
}

impl Plan {
    /// True when there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }
}

fn missing_grants<'a>(observed: &Observed, grants: impl Iterator<Item = &'a Grant>) -> Vec<Action> {
    let mut by_resource: BTreeMap<Resource, BTreeSet<Binding>> = BTreeMap::new();
    for g in grants {
        if !observed.has_binding(&g.resource, &g.role, &g.member) {
            by_resource
                .entry(g.resource.clone())
                .or_default()
                .insert(Binding {
                    role: g.role.clone(),
                    member: g.member.clone(),
                });
        }
    }
    by_resource
        .into_iter()
        .map(|(resource, bindings)| Action::Grant {
            resource,
            bindings: bindings.into_iter().collect(),
        })
        .collect()
}

fn is_gpu(a: Option<&AcceleratorSpec>) -> bool {
    matches!(a, Some(AcceleratorSpec::Gpu(_)))
}

/// What the cluster's state asks for before anything can go in it.
fn cluster_steps(desired: &Desired, observed: &Observed) -> Result<Vec<Action>, InfraError> {
    let target = &desired.target;
    Ok(match observed.cluster.as_ref().map(|c| (&c.status, c)) {
        None => vec![Action::CreateCluster {
            cluster: desired.cluster.clone(),
        }],
        Some((ResourceStatus::Stopping, _)) => vec![
            Action::WaitClusterDeleted,
            Action::CreateCluster {
                cluster: desired.cluster.clone(),
            },
        ],
        Some((ResourceStatus::Error, c)) => {
            return Err(InfraError::ClusterUnusable {
                message: format!(
                    "{target} is in state ERROR ({}): delete it with `kinetic down`, then run `kinetic up` again",
                    if c.status_message.is_empty() {
                        "no message"
                    } else {
                        &c.status_message
                    }
                ),
            });
        }
        Some((status, c)) => {
            let mut steps = Vec::new();
            if status.is_settling() {
                steps.push(Action::WaitCluster);
            }
            let workload_pool = (c.workload_pool.as_deref()
                != Some(&desired.cluster.workload_pool))
            .then(|| desired.cluster.workload_pool.clone());
            if workload_pool.is_some() || !c.gcs_fuse_csi {
                steps.push(Action::UpdateCluster {
                    workload_pool,
                    gcs_fuse_csi: !c.gcs_fuse_csi,
                });
            }
            steps
        }
    })
}

/// Pools an earlier run left changing: wait for them.
fn settling_pools(observed: &Observed) -> Vec<Action> {
    observed
        .cluster
        .iter()
        .flat_map(|c| &c.pools)
        .filter(|p| p.status.is_settling())
        .map(|p| Action::WaitPool {
            name: p.name.clone(),
        })
        .collect()
}

/// What goes inside the cluster: the jobs' service account, the
/// LeaderWorkerSet controller, the NVIDIA driver installer when a GPU pool
/// is or will be there, and the kubeconfig context.
fn kube_steps(desired: &Desired, observed: &Observed, gpu_pool: bool) -> Vec<Action> {
    let kube = observed.kube.clone().unwrap_or_default();
    let spec = &desired.kube;
    let mut steps = Vec::new();
    if !kube.namespace || kube.service_account.as_deref() != Some(&spec.google_service_account) {
        steps.push(Action::ApplyServiceAccount {
            namespace: spec.namespace.clone(),
            name: spec.service_account.clone(),
            google_service_account: spec.google_service_account.clone(),
        });
    }
    if kube.jobs_role.as_ref() != Some(&spec.jobs_role.rules) {
        steps.push(Action::ApplyRole {
            namespace: spec.namespace.clone(),
            role: spec.jobs_role.clone(),
        });
    }
    if kube.hosts_role.as_ref() != Some(&spec.hosts_role.rules) || !kube.hosts_role_bound {
        steps.push(Action::ApplyRole {
            namespace: spec.namespace.clone(),
            role: spec.hosts_role.clone(),
        });
    }
    if !kube.lws || kube.lws_not_ready.is_some() {
        steps.push(Action::InstallManifests {
            bundle: spec.lws.clone(),
        });
    }
    if gpu_pool && !kube.nvidia_driver {
        steps.push(Action::InstallManifests {
            bundle: spec.nvidia_driver.clone(),
        });
    }
    let server = observed.cluster.as_ref().map(|c| cluster_url(&c.endpoint));
    let kubeconfig_ok = observed.kubeconfig.as_ref().is_some_and(|k| {
        k.current_context.as_deref() == Some(&spec.context)
            && server.is_some()
            && k.context_server == server
    });
    if !kubeconfig_ok {
        steps.push(Action::WriteKubeconfig {
            context: spec.context.clone(),
        });
    }
    steps
}

/// The plan that finishes `desired` from `observed`: APIs, service
/// accounts, buckets, the repository and their roles, the cluster, then
/// what lives in it. `first_pool` is created when the cluster has no
/// accelerator pool yet (`up --accelerator`).
///
/// # Errors
/// [`InfraError::ClusterUnusable`] when the cluster is in `ERROR`.
pub fn plan_up(
    desired: &Desired,
    observed: &Observed,
    first_pool: Option<&PoolSpec>,
) -> Result<Plan, InfraError> {
    let mut plan = Plan::default();
    let actions = &mut plan.actions;
    let apis: Vec<String> = desired
        .apis
        .iter()
        .filter(|a| !observed.apis.contains(*a))
        .cloned()
        .collect();
    if !apis.is_empty() {
        actions.push(Action::EnableApis { apis });
    }
    for account in &desired.service_accounts {
        if !observed.service_accounts.contains(&account.email) {
            actions.push(Action::CreateServiceAccount {
                account: account.clone(),
            });
        }
    }
    for bucket in &desired.buckets {
        match observed.buckets.get(&bucket.name) {
            None => actions.push(Action::CreateBucket {
                bucket: bucket.clone(),
            }),
            Some(b) => {
                let labelled = bucket
                    .labels
                    .iter()
                    .all(|(k, v)| b.labels.get(k) == Some(v));
                if b.ttl_days != Some(bucket.ttl_days) || !labelled {
                    actions.push(Action::UpdateBucket {
                        bucket: bucket.clone(),
                    });
                }
            }
        }
    }
    if !observed.repository {
        actions.push(Action::CreateRepository {
            repository: desired.repository.clone(),
        });
    }
    let (identity, others): (Vec<&Grant>, Vec<&Grant>) = desired
        .grants
        .iter()
        .partition(|g| matches!(g.resource, Resource::ServiceAccount(_)));
    actions.extend(missing_grants(observed, others.into_iter()));
    actions.extend(cluster_steps(desired, observed)?);
    actions.extend(settling_pools(observed));

    let pools = observed.cluster.as_ref().map_or(&[][..], |c| &c.pools[..]);
    let has_accelerator_pool = pools.iter().any(|p| p.accelerator.is_some());
    let mut gpu_pool = pools.iter().any(|p| is_gpu(p.accelerator.as_ref()));
    if let Some(pool) = first_pool {
        if has_accelerator_pool {
            plan.notes.push(format!(
                "the cluster has accelerator pools already: no pool for {} added (use `kinetic pool add`)",
                pool.accelerator
            ));
        } else {
            gpu_pool |= is_gpu(Some(&pool.accelerator));
            plan.actions.push(Action::CreatePool { pool: pool.clone() });
        }
    }
    // Workload Identity's binding needs the cluster's identity pool.
    plan.actions
        .extend(missing_grants(observed, identity.into_iter()));
    plan.actions.extend(kube_steps(desired, observed, gpu_pool));
    Ok(plan)
}

fn usable_cluster<'a>(
    desired: &Desired,
    observed: &'a Observed,
) -> Result<(&'a super::ObservedCluster, Vec<Action>), InfraError> {
    let target = &desired.target;
    let cluster = observed
        .cluster
        .as_ref()
        .ok_or_else(|| InfraError::NoCluster {
            cluster: target.cluster.clone(),
            zone: target.zone.clone(),
        })?;
    match cluster.status {
        ResourceStatus::Stopping => Err(InfraError::ClusterUnusable {
            message: format!("{target} is being deleted: run `kinetic up` once it is gone"),
        }),
        ResourceStatus::Error => Err(InfraError::ClusterUnusable {
            message: format!(
                "{target} is in state ERROR ({}): delete it with `kinetic down`, then run `kinetic up` again",
                cluster.status_message
            ),
        }),
        ref s if s.is_settling() => Ok((cluster, vec![Action::WaitCluster])),
        _ => Ok((cluster, Vec::new())),
    }
}

/// The plan that adds `pool` to the cluster — nothing when a pool for the
/// same accelerator (Spot and reservation included) is already there —
/// and installs the NVIDIA driver with the first GPU pool.
///
/// # Errors
/// [`InfraError::NoCluster`] without a cluster,
/// [`InfraError::ClusterUnusable`] when it is being deleted or broken.
pub fn plan_pool_add(
    desired: &Desired,
    observed: &Observed,
    pool: &PoolSpec,
) -> Result<Plan, InfraError> {
    let (cluster, mut actions) = usable_cluster(desired, observed)?;
    let mut plan = Plan::default();
    let same = cluster.pools.iter().find(|p| {
        p.accelerator.as_ref() == Some(&pool.accelerator)
            && p.reservation == pool.reservation
            && p.status != ResourceStatus::Stopping
    });
    match same {
        Some(p) if p.status.is_settling() => actions.push(Action::WaitPool {
            name: p.name.clone(),
        }),
        Some(p) => {
            let bounds = p
                .autoscaling
                .map(|(min, max)| format!(" ({min}–{max} nodes)"))
                .unwrap_or_default();
            plan.notes.push(format!(
                "node pool {}{bounds} already serves {}: nothing to add (to resize it, `kinetic pool remove {}` then add it again)",
                p.name, pool.accelerator, p.name
            ));
        }
        None => {
            let mut pool = pool.clone();
            // A cluster `kinetic up` did not make has no kn-…-nodes
            // account: its new pool's nodes run as its other nodes do.
            if !observed.service_accounts.contains(&pool.service_account) {
                let theirs = cluster
                    .pool(DEFAULT_POOL)
                    .into_iter()
                    .chain(&cluster.pools)
                    .find_map(|p| p.service_account.clone().map(|sa| (p.name.clone(), sa)));
                let Some((from, account)) = theirs else {
                    return Err(InfraError::NotAdopted {
                        cluster: desired.target.cluster.clone(),
                        account: pool.service_account.clone(),
                    });
                };
                plan.notes.push(format!(
                    "service account {} does not exist (`kinetic up` did not make this cluster): the pool's nodes run as {account}, as those of node pool {from} do; `kinetic up` adopts the cluster and makes the account",
                    pool.service_account
                ));
                pool.service_account = account;
            }
            actions.push(Action::CreatePool { pool });
        }
    }
    let nvidia = observed.kube.as_ref().is_some_and(|k| k.nvidia_driver);
    if is_gpu(Some(&pool.accelerator)) && !nvidia {
        actions.push(Action::InstallManifests {
            bundle: desired.kube.nvidia_driver.clone(),
        });
    }
    plan.actions = actions;
    Ok(plan)
}

/// The plan that removes the pool `name`.
///
/// # Errors
/// [`InfraError::NoCluster`], [`InfraError::PoolNotFound`] (naming the
/// pools there are), [`InfraError::Invalid`] for the default pool.
pub fn plan_pool_remove(
    desired: &Desired,
    observed: &Observed,
    name: &str,
) -> Result<Plan, InfraError> {
    super::check_pool_name(name)?;
    let (cluster, mut actions) = usable_cluster(desired, observed)?;
    if name == DEFAULT_POOL {
        return Err(super::invalid(
            "pool",
            name,
            "an accelerator pool: the default pool runs the cluster's system and CPU jobs (`kinetic down` removes the cluster)",
        ));
    }
    let mut plan = Plan::default();
    match cluster.pool(name) {
        None => {
            let names: Vec<&str> = cluster.pools.iter().map(|p| p.name.as_str()).collect();
            return Err(InfraError::PoolNotFound {
                name: name.to_owned(),
                cluster: desired.target.cluster.clone(),
                existing: if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                },
            });
        }
        Some(p) if p.status == ResourceStatus::Stopping => {
            plan.notes
                .push(format!("node pool {name} is being deleted already"));
            actions.push(Action::WaitPool {
                name: name.to_owned(),
            });
        }
        Some(_) => actions.push(Action::DeletePool {
            name: name.to_owned(),
        }),
    }
    plan.actions = actions;
    Ok(plan)
}

/// The plan that removes what `up` created: the cluster (its pools with
/// it), the kubeconfig context, the repository, the roles granted to the
/// cluster's service accounts and the accounts themselves; the buckets
/// only with `delete_buckets` (else they are kept, with their data, and
/// the accounts' roles on them removed). APIs stay enabled.
pub fn plan_down(desired: &Desired, observed: &Observed, delete_buckets: bool) -> Plan {
    let mut plan = Plan::default();
    let actions = &mut plan.actions;
    match observed.cluster.as_ref().map(|c| &c.status) {
        None => {}
        Some(ResourceStatus::Stopping) => actions.push(Action::WaitClusterDeleted),
        Some(_) => actions.push(Action::DeleteCluster {
            name: desired.target.cluster.clone(),
        }),
    }
    if observed
        .kubeconfig
        .as_ref()
        .is_some_and(|k| k.context_server.is_some())
    {
        actions.push(Action::RemoveKubeconfig {
            context: desired.kube.context.clone(),
        });
    }
    if observed.repository {
        actions.push(Action::DeleteRepository {
            name: desired.repository.name.clone(),
        });
    }
    let members: BTreeSet<String> = desired.own_members().into_iter().collect();
    let revoke = |resource: &Resource| -> Option<Action> {
        let bindings: Vec<Binding> = observed
            .policies
            .get(resource)?
            .iter()
            .flat_map(|(role, ms)| {
                ms.iter().filter(|m| members.contains(*m)).map(|m| Binding {
                    role: role.clone(),
                    member: m.clone(),
                })
            })
            .collect();
        (!bindings.is_empty()).then(|| Action::Revoke {
            resource: resource.clone(),
            bindings,
        })
    };
    for bucket in &desired.buckets {
        if !observed.buckets.contains_key(&bucket.name) {
            continue;
        }
        if delete_buckets {
            actions.push(Action::DeleteBucket {
                name: bucket.name.clone(),
            });
        } else {
            actions.extend(revoke(&Resource::Bucket(bucket.name.clone())));
            plan.notes.push(format!(
                "bucket gs://{} is kept with its objects (--delete-buckets deletes it)",
                bucket.name
            ));
        }
    }
    actions.extend(revoke(&Resource::Project));
    for account in &desired.service_accounts {
        if observed.service_accounts.contains(&account.email) {
            actions.push(Action::DeleteServiceAccount {
                email: account.email.clone(),
            });
        }
    }
    plan.notes
        .push("APIs stay enabled (other resources of the project may use them)".to_owned());
    plan
}
