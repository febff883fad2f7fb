//! The job each input of a batch follows, kept compact: a batch of
//! 100,000 inputs must not cost 100,000 job handles (about 1 kB each with
//! the record) when most of them can be made again from what the batch
//! holds once.
//!
//! - An input submitted on its own keeps its job's handle, boxed: an input
//!   with no job costs a pointer's worth, not a handle's.
//! - A child of a batch submitted in one call (an Indexed Job) keeps only
//!   its job id's 32 bits: its handle is the batch spec's record template
//!   with that id ([`IndexedChildren::handle`]), made when asked for.

use kinetic_core::ids::JobId;

use super::indexed::IndexedChildren;
use crate::JobHandle;

/// What one input follows.
#[derive(Debug, Clone)]
enum Followed {
    None,
    /// A job submitted (or loaded) on its own.
    Handle(Box<JobHandle>),
    /// A child of an indexed batch: the 8 hex digits of its id.
    Child(u32),
}

/// The job each input follows, by index.
#[derive(Debug)]
pub(super) struct Jobs {
    slots: Vec<Followed>,
}

/// The 32 bits of a job id (`job-` and 8 hex digits).
fn id_bits(id: &JobId) -> Option<u32> {
    u32::from_str_radix(id.hex(), 16).ok()
}

/// The job id of 32 bits.
fn id_of(bits: u32) -> JobId {
    // `job-` and 8 lower-case hex digits is always a valid job id.
    format!("job-{bits:08x}")
        .parse()
        .expect("job- and 8 hex digits is a job id")
}

impl Jobs {
    /// `total` inputs, none following a job.
    pub(super) fn new(total: usize) -> Self {
        Self {
            slots: vec![Followed::None; total],
        }
    }

    /// How many inputs.
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Input `index` follows `handle`.
    pub(super) fn set(&mut self, index: usize, handle: JobHandle) {
        if let Some(slot) = self.slots.get_mut(index) {
            *slot = Followed::Handle(Box::new(handle));
        }
    }

    /// Input `index` follows the indexed batch's child `job_id`, whose
    /// handle [`Jobs::get`] makes from the batch spec.
    pub(super) fn set_child(&mut self, index: usize, job_id: &JobId) {
        if let (Some(slot), Some(bits)) = (self.slots.get_mut(index), id_bits(job_id)) {
            *slot = Followed::Child(bits);
        }
    }

    /// Whether input `index` follows a job.
    pub(super) fn has(&self, index: usize) -> bool {
        !matches!(self.slots.get(index), None | Some(Followed::None))
    }

    /// The id of input `index`'s job, without making its handle.
    pub(super) fn id(&self, index: usize) -> Option<JobId> {
        match self.slots.get(index)? {
            Followed::None => None,
            Followed::Handle(h) => Some(h.id().clone()),
            Followed::Child(bits) => Some(id_of(*bits)),
        }
    }

    /// Whether input `index` follows `job_id`.
    pub(super) fn is(&self, index: usize, job_id: &JobId) -> bool {
        match self.slots.get(index) {
            Some(Followed::Handle(h)) => h.id() == job_id,
            Some(Followed::Child(bits)) => id_bits(job_id) == Some(*bits),
            _ => false,
        }
    }

    /// The handle of input `index`'s job: an indexed child's is made from
    /// `children`, the batch spec (`None` without one: such a child cannot
    /// have been followed).
    pub(super) fn get(
        &self,
        index: usize,
        children: Option<&IndexedChildren>,
    ) -> Option<JobHandle> {
        match self.slots.get(index)? {
            Followed::None => None,
            Followed::Handle(h) => Some((**h).clone()),
            Followed::Child(bits) => {
                let id = id_of(*bits);
                match children?.handle(index, &id) {
                    Ok(handle) => Some(handle),
                    Err(e) => {
                        tracing::warn!(job_id = %id, "batch child {index}: {e}");
                        None
                    }
                }
            }
        }
    }

    /// A handle's record for input `index` without cloning it, when the
    /// input follows a handle of its own (not an indexed child).
    pub(super) fn own_record(&self, index: usize) -> Option<&kinetic_core::record::JobRecord> {
        match self.slots.get(index)? {
            Followed::Handle(h) => Some(h.record()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_keeps_its_id_in_32_bits() {
        let mut jobs = Jobs::new(3);
        let id: JobId = "job-00a1b2c3".parse().unwrap();
        assert!(!jobs.has(1));
        jobs.set_child(1, &id);
        assert!(jobs.has(1) && jobs.own_record(1).is_none());
        assert_eq!(jobs.id(1), Some(id.clone()));
        assert!(jobs.is(1, &id));
        assert!(!jobs.is(1, &"job-00a1b2c4".parse().unwrap()));
        assert!(!jobs.is(0, &id));
        // Without the batch spec no handle can be made for it.
        assert!(jobs.get(1, None).is_none());
        assert_eq!(jobs.len(), 3);
        assert!(std::mem::size_of::<Followed>() <= 16);
    }
}
