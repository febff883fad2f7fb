//! One port-forwarded connection to a pod ([`kube::api::Portforwarder`]),
//! as a byte stream whose reads and writes fail with the error the API
//! server sent on the port's error channel (nothing listening in the pod,
//! the pod gone), instead of hanging on a stream that will never carry
//! data.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use kube::api::Portforwarder;
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};

type ErrorFuture = Pin<Box<dyn Future<Output = Option<String>> + Send>>;

/// A forwarded port: the data stream, the error channel, and the
/// forwarder, stopped when this is dropped.
pub(crate) struct ForwardedPort {
    stream: DuplexStream,
    error: Option<ErrorFuture>,
    failed: Option<String>,
    forwarder: Portforwarder,
    what: String,
}

impl ForwardedPort {
    pub(crate) fn new(
        stream: DuplexStream,
        error: ErrorFuture,
        forwarder: Portforwarder,
        what: String,
    ) -> Self {
        Self {
            stream,
            error: Some(error),
            failed: None,
            forwarder,
            what,
        }
    }

    /// The error the server reported for the port, if any by now.
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if let Some(future) = self.error.as_mut()
            && let Poll::Ready(outcome) = future.as_mut().poll(cx)
        {
            self.error = None;
            self.failed = outcome;
        }
        match &self.failed {
            Some(message) => Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!("{}: {message}", self.what),
            )),
            None => Ok(()),
        }
    }
}

impl Drop for ForwardedPort {
    fn drop(&mut self) {
        self.forwarder.abort();
    }
}

impl AsyncRead for ForwardedPort {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            // Data already received is delivered before an error after it.
            Poll::Ready(Ok(())) if buf.filled().len() > before => Poll::Ready(Ok(())),
            Poll::Ready(Ok(())) => Poll::Ready(this.check(cx)),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match this.check(cx) {
                Err(e) => Poll::Ready(Err(e)),
                Ok(()) => Poll::Pending,
            },
        }
    }
}

impl AsyncWrite for ForwardedPort {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.stream).poll_write(cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
