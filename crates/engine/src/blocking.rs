//! Running blocking work (hashing, packaging, directory walks) off the
//! async executor without tokio's runtime features: a plain thread does the
//! work and a oneshot channel brings the value back.

use super::EngineError;

/// Run `work` on its own thread and await its value. A panic in `work`
/// becomes [`EngineError::Internal`] instead of tearing down the caller.
pub(crate) async fn blocking<T, F>(work: F) -> Result<T, EngineError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("kinetic-blocking".into())
        .spawn(move || {
            let _ = tx.send(work());
        })
        .map_err(|e| EngineError::internal(format!("cannot start a worker thread: {e}")))?;
    rx.await
        .map_err(|_| EngineError::internal("a worker thread panicked"))
}
