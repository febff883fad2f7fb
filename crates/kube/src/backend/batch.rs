//! A whole batch from one object ([`Backend::submit_batch`]): its create
//! (idempotent, then its one Secret), and its end (stop starting inputs,
//! cancel, cleanup). Its children's states are read by `group_status`
//! (`status.rs`) with the objects of one-job children.
//!
//! [`Backend::submit_batch`]: kinetic_core::ports::Backend::submit_batch

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kinetic_core::batch::{BlockMarker, parse_markers};
use kinetic_core::layout;
use kinetic_core::ports::Backend;
use kinetic_core::ports::{
    BackendCapabilities, BackendError, BatchEnd, CleanupWait, GroupQuery, ObjectStoreExt,
    PreparedBatch,
};
use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

use super::{KubeBackend, Named, submit::other_spec};
use crate::error::{self, Context};
use crate::pod;
use crate::workload::{BlockReads, Workload, WorkloadTraits, batch_object_name};

impl<W: Workload> KubeBackend<W> {
    fn batch_named(&self, query: &GroupQuery) -> Named {
        Named {
            namespace: query.namespace.clone(),
            k8s_name: batch_object_name(&query.group_id),
            job_id: query.group_id.to_string(),
        }
    }

    /// [`Backend::submit_batch`](kinetic_core::ports::Backend::submit_batch):
    /// the object the kind builds for the batch (an existing one of the
    /// same batch spec is the batch's), then its Secret, owned by it.
    pub(super) async fn submit_batch_object(
        &self,
        batch: &PreparedBatch,
    ) -> Result<(), BackendError> {
        let Some(manifest) = self
            .workload
            .build_batch(batch, &self.options.manifest)
            .filter(|_| self.traits.capabilities.indexed_batches)
        else {
            return Err(BackendCapabilities::undeclared(
                self.name(),
                "indexed_batches",
            ));
        };
        if batch.block_size > 1 && !self.capabilities().batch_blocks {
            return Err(BackendCapabilities::undeclared(self.name(), "batch_blocks"));
        }
        let namespace = &batch.job.record.namespace;
        let name = batch_object_name(&batch.group_id);
        let api = self.objects(namespace).await?;
        self.check_service_account(namespace).await?;
        let created = match api.create(&PostParams::default(), &manifest).await {
            Ok(created) => created,
            Err(e) if error::code(&e) == Some(409) => {
                let existing = api
                    .get(&name)
                    .await
                    .map_err(|e| error::map(e, self.cx("get", Some(&name), namespace)))?;
                if let Some(other) = other_spec(existing.meta(), batch.spec_uri()) {
                    return Err(BackendError::AlreadyExists {
                        backend: self.name().to_owned(),
                        job_id: batch.group_id.to_string(),
                        message: format!(
                            "{} {name} in namespace {namespace} runs batch spec {other}, not {}",
                            self.traits.kind,
                            batch.spec_uri()
                        ),
                    });
                }
                existing
            }
            Err(e) => return Err(error::map(e, self.cx("create", None, namespace))),
        };
        let mut shared = batch.job.clone();
        shared.record.k8s_name = name.clone();
        if let Some(secret) =
            pod::env_secret(&shared, self.traits.app, self.workload.owner(&created))
        {
            let secrets: Api<Secret> = Api::namespaced(self.client.get().await?, namespace);
            match secrets.create(&PostParams::default(), &secret).await {
                Ok(_) => {}
                Err(e) if error::code(&e) == Some(409) => {}
                Err(e) => {
                    // Without its Secret no pod can start: take the object back.
                    let _ = api.delete(&name, &DeleteParams::background()).await;
                    return Err(error::map(
                        e,
                        Context {
                            verb: "create",
                            resource: "secrets",
                            name: None,
                            namespace,
                        },
                    ));
                }
            }
        }
        tracing::debug!(group_id = %batch.group_id, name = %name, namespace = %namespace, inputs = batch.inputs, "batch submitted");
        Ok(())
    }

    /// The markers of the blocks `reads` names, by block: listed from the
    /// store (16 listings at a time), those of a block whose index ended
    /// once per batch object, then kept until the batch ends here
    /// ([`KubeBackend::forget_final_blocks`]).
    pub(super) async fn block_markers(
        &self,
        object: &W::Object,
        reads: &BlockReads,
    ) -> Result<BTreeMap<usize, Vec<BlockMarker>>, BackendError> {
        use futures_util::stream::{self, StreamExt, TryStreamExt};
        let Some(store) = self.options.store.clone() else {
            return Err(BackendError::invalid_input(format!(
                "batch {} runs in blocks, whose states are in the store, and this {} backend was given no store (KubeOptions::store)",
                reads.group_id,
                self.name()
            )));
        };
        let group = reads.group_id.to_string();
        let uid = object.meta().uid.clone().unwrap_or_default();
        let mut out = BTreeMap::new();
        let mut to_list = Vec::new();
        {
            let kept = self
                .final_blocks
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for &(block, is_final) in &reads.blocks {
                match kept.get(&(group.clone(), uid.clone(), block)) {
                    Some(markers) => {
                        out.insert(block, markers.clone());
                    }
                    None => to_list.push((block, is_final)),
                }
            }
        }
        let listed: Vec<(usize, bool, Vec<BlockMarker>)> = stream::iter(to_list)
            .map(|(block, is_final)| {
                let store = store.clone();
                let folder = layout::group_block(&reads.group_id, block);
                async move {
                    let metas = store.list(Some(&folder)).await?;
                    let markers = parse_markers(metas.iter().map(|m| m.path.file_name()));
                    Ok::<_, kinetic_core::ports::StoreError>((block, is_final, markers))
                }
            })
            .buffer_unordered(16)
            .try_collect()
            .await
            .map_err(|e| {
                BackendError::from_store(
                    &format!(
                        "cannot list the markers of batch {}'s blocks",
                        reads.group_id
                    ),
                    e,
                )
            })?;
        let mut kept = self
            .final_blocks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (block, is_final, markers) in listed {
            if is_final {
                kept.insert((group.clone(), uid.clone(), block), markers.clone());
            }
            out.insert(block, markers);
        }
        Ok(out)
    }

    /// Let go of the kept markers of batch `group_id`'s blocks (it is
    /// cancelled or cleaned up): a long-lived process that follows batch
    /// after batch keeps no finished batch's.
    fn forget_final_blocks(&self, group_id: &kinetic_core::ids::GroupId) {
        let group = group_id.to_string();
        self.final_blocks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|(g, _, _), _| *g != group);
    }

    /// [`Backend::end_batch`](kinetic_core::ports::Backend::end_batch).
    pub(super) async fn end_batch_object(
        &self,
        query: &GroupQuery,
        end: BatchEnd,
        wait: CleanupWait,
    ) -> Result<(), BackendError> {
        if !self.traits.capabilities.indexed_batches {
            return Err(BackendCapabilities::undeclared(
                self.name(),
                "indexed_batches",
            ));
        }
        let named = self.batch_named(query);
        match end {
            BatchEnd::StopStarting => {
                let Some(object) = self.get_object(&named).await? else {
                    return Ok(());
                };
                let pods = self
                    .list_pods(
                        &named.namespace,
                        &WorkloadTraits::pods_selector(&named.k8s_name),
                    )
                    .await?;
                if let Some(patch) = self.workload.batch_stop_patch(&object, &pods) {
                    self.patch_batch(&named, &patch).await?;
                }
                if self.workload.batch_block_reads(&object, &pods).is_some() {
                    // A block's pod runs input after input: the stop marker
                    // keeps it from starting the next.
                    self.write_stop_marker(query).await?;
                }
                Ok(())
            }
            // Cancel and Cleanup (and any end added later: removing the
            // batch is the most a backend can do).
            _ => {
                self.forget_final_blocks(&query.group_id);
                let api = self.objects(&named.namespace).await?;
                match api
                    .delete(&named.k8s_name, &DeleteParams::foreground())
                    .await
                {
                    Ok(_) => {}
                    Err(e) if error::code(&e) == Some(404) => {}
                    Err(e) => {
                        return Err(error::map(
                            e,
                            self.cx("delete", Some(&named.k8s_name), &named.namespace),
                        ));
                    }
                }
                let secrets: Api<Secret> =
                    Api::namespaced(self.client.get().await?, &named.namespace);
                match secrets
                    .delete(
                        &pod::secret_name(&named.k8s_name),
                        &DeleteParams::background(),
                    )
                    .await
                {
                    Ok(_) => {}
                    Err(e) if error::code(&e) == Some(404) => {}
                    Err(e) => {
                        tracing::warn!(group_id = %query.group_id, "could not delete the batch's Secret: {e}")
                    }
                }
                if end == BatchEnd::Cleanup {
                    self.wait_deleted(&named, wait).await
                } else {
                    Ok(())
                }
            }
        }
    }

    /// The stop marker of a batch in blocks (`_groups/{group_id}/stopping`).
    async fn write_stop_marker(&self, query: &GroupQuery) -> Result<(), BackendError> {
        let Some(store) = &self.options.store else {
            return Err(BackendError::invalid_input(format!(
                "batch {} runs in blocks, whose pods read their stop marker from the store, and this {} backend was given no store (KubeOptions::store)",
                query.group_id,
                self.name()
            )));
        };
        let body = serde_json::json!({"by": "client"}).to_string();
        store
            .put_json(&layout::group_stop(&query.group_id), body)
            .await
            .map_err(|e| {
                BackendError::from_store(
                    &format!("cannot write the stop marker of batch {}", query.group_id),
                    e,
                )
            })
    }

    async fn patch_batch(
        &self,
        named: &Named,
        patch: &serde_json::Value,
    ) -> Result<(), BackendError> {
        let api = self.objects(&named.namespace).await?;
        match api
            .patch(
                &named.k8s_name,
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if error::code(&e) == Some(404) => Ok(()),
            Err(e) => Err(error::map(
                e,
                self.cx("patch", Some(&named.k8s_name), &named.namespace),
            )),
        }
    }

    /// While a stopping batch's object still allows more inputs than run,
    /// lower it again (a `group_status` of the batch does, once per
    /// poll): see [`Workload::batch_stop_patch`].
    pub(super) async fn keep_batch_stopped(
        &self,
        namespace: &str,
        object: &W::Object,
        pods: &[k8s_openapi::api::core::v1::Pod],
    ) {
        let stopping = object
            .meta()
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(pod::ANNOTATION_BATCH_STOPPING));
        if !stopping {
            return;
        }
        if let Some(patch) = self.workload.batch_stop_patch(object, pods) {
            let named = Named {
                namespace: namespace.to_owned(),
                k8s_name: object.meta().name.clone().unwrap_or_default(),
                job_id: String::new(),
            };
            if let Err(e) = self.patch_batch(&named, &patch).await {
                tracing::warn!(
                    "could not keep the batch {} from starting inputs: {e}",
                    named.k8s_name
                );
            }
        }
    }
}
