//! Decorators that implement a port around another and need a timer or an
//! async cell, so they live here rather than beside their port in
//! `kinetic-core` (which has no async runtime): fault injection for each
//! port ([`FaultyStore`], [`FaultyBackend`], [`FaultyImageBuilder`], over
//! one [`FaultPlan`]), retries for backends ([`RetryBackend`], under
//! [`kinetic_core::retry::RetryPolicy`] and the loop of [`crate::retry`]),
//! and the image builder made on first use ([`LazyImageBuilder`]). Each
//! forwards every method and passes its port's conformance suite.

mod faulty_backend;
mod faulty_image;
mod faulty_store;
mod lazy_image;
mod retry_backend;

pub use kinetic_core::ports::FaultPlan;

/// Waits what a call drew from a [`FaultPlan`], then fails with its error
/// if one was due: what each fault-injecting decorator does at the start
/// of every call.
pub(crate) async fn check<E>(plan: &FaultPlan<E>, op: &'static str) -> Result<(), E> {
    let fault = plan.draw(op);
    if !fault.latency.is_zero() {
        tokio::time::sleep(fault.latency).await;
    }
    fault.into_result()
}
pub use faulty_backend::FaultyBackend;
pub use faulty_image::FaultyImageBuilder;
pub use faulty_store::FaultyStore;
pub use lazy_image::LazyImageBuilder;
pub use retry_backend::RetryBackend;
