//! Following a batch until every input settled, for the commands that
//! wait on one (`map`, `batch wait|results|resume`): the live bar on a
//! terminal, the timeout, and Ctrl-C, which says what the batch goes on
//! doing, which inputs were never submitted and the command that picks it
//! up ([`interrupt::Stopped::batch`]).

use std::time::Duration;

use futures_util::StreamExt;

use kinetic_engine::{BatchError, BatchHandle, BatchResultsOptions};

use crate::error::{CliError, batch_error};
use crate::interrupt::{self, Stopped};
use crate::render::progress::BatchProgress;
use crate::render::{self, Output};

/// From now on, a Ctrl-C leaves `batch` going on and says so: inputs not
/// submitted are resumed with `kinetic batch resume GROUP`, else `then
/// GROUP` picks the batch up (`kinetic batch results`, `kinetic batch wait`).
pub(crate) fn on_ctrl_c(batch: &BatchHandle, then: &'static str) {
    let batch = batch.clone();
    interrupt::stage(move || Stopped::batch(&batch, then));
}

/// Poll the counts into the bar until every input settled (or Ctrl-C).
pub(crate) async fn follow(
    batch: &BatchHandle,
    progress: &BatchProgress,
    timeout: Option<Duration>,
) -> Result<(), CliError> {
    interrupt::or_interrupt(poll(batch, progress, timeout)).await
}

async fn poll(
    batch: &BatchHandle,
    progress: &BatchProgress,
    timeout: Option<Duration>,
) -> Result<(), CliError> {
    let deadline = timeout.map(|t| std::time::Instant::now() + t);
    loop {
        let counts = batch.status_counts().await.map_err(batch_error)?;
        progress.show(&counts);
        if counts.finished() == counts.total() {
            return Ok(());
        }
        let wait = batch.wait(Some(Duration::from_secs(1)));
        match wait.await {
            Ok(()) => {}
            Err(BatchError::Timeout { .. }) => {}
            Err(e) => return Err(batch_error(e)),
        }
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            return Err(timed_out(batch));
        }
    }
}

/// Until every input is submitted (`--detach`), with the bar (or Ctrl-C).
pub(crate) async fn wait_submitted(
    batch: &BatchHandle,
    timeout: Option<Duration>,
) -> Result<(), CliError> {
    let progress = BatchProgress::new(batch);
    progress.say("submitting");
    let submitted =
        interrupt::or_interrupt(async { batch.wait_submitted(timeout).await.map_err(batch_error) })
            .await;
    progress.finish();
    submitted
}

/// Follow a batch and print every value, as `kinetic map` does: in input
/// order, each as soon as it and the inputs before it settled (a value
/// that ends early waits only for those), so the output streams and no
/// value is held once printed. The bar shows the counts meanwhile.
pub(crate) async fn follow_and_print(
    batch: &BatchHandle,
    timeout: Option<Duration>,
    no_cleanup: bool,
    out: &Output,
) -> Result<(), CliError> {
    let progress = BatchProgress::new(batch);
    let mut options = BatchResultsOptions::default()
        .return_exceptions(true)
        .cleanup(!no_cleanup);
    if let Some(t) = timeout {
        options = options.timeout(t);
    }
    let printed = interrupt::or_interrupt(async {
        let mut printer = render::BatchPrinter::new(batch, out)?;
        let mut items = batch.results_stream(options);
        while let Some(item) = items.next().await {
            let item = item.map_err(|e| match e {
                BatchError::Timeout { .. } => timed_out(batch),
                e => batch_error(e),
            })?;
            progress.above(|| printer.item(item))?;
            progress.show(&batch.counts());
        }
        Ok(printer)
    })
    .await;
    progress.finish();
    Ok(printed?.finish(batch)?)
}

fn timed_out(batch: &BatchHandle) -> CliError {
    CliError::failed(format!(
        "timed out waiting for batch {}; it goes on: `kinetic batch results {}` collects it later",
        batch.group_id(),
        batch.group_id()
    ))
}
