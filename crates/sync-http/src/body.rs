//! The bounded channel between a round on the blocking pool and the HTTP
//! response body.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::Frame;
use sync_wire::WireFailure;
use tokio::runtime::Handle;
use tokio::sync::mpsc;

/// What the round hands to the response.
#[derive(Debug)]
pub(crate) enum Piece {
    /// Response bytes.
    Data(Bytes),
    /// The last response bytes: the response is complete after them. A
    /// response that fits one chunk (most rounds) is this one piece, so the
    /// task serving it is woken once.
    Last(Bytes),
    /// The round was refused before any byte: answer with this instead.
    Failure(WireFailure),
    /// The response broke off; the body ends with an error so the client
    /// sees a cut connection, not a clean end.
    Abort,
    /// The response is complete. A channel closed without it (the round
    /// gave up while the channel was full) is a broken-off response too.
    End,
}

/// The blocking side: an [`io::Write`] gathering bytes into chunks and
/// handing each to the channel, waiting at most `timeout` for room.
pub(crate) struct ChannelWriter {
    tx: mpsc::Sender<Piece>,
    buf: Vec<u8>,
    chunk_bytes: usize,
    timeout: Duration,
    runtime: Handle,
}

impl ChannelWriter {
    pub(crate) fn new(
        tx: mpsc::Sender<Piece>,
        chunk_bytes: usize,
        timeout: Duration,
        runtime: Handle,
    ) -> Self {
        Self {
            tx,
            buf: Vec::with_capacity(chunk_bytes.min(1 << 20)),
            chunk_bytes: chunk_bytes.max(1),
            timeout,
            runtime,
        }
    }

    fn send(&self, piece: Piece) -> io::Result<()> {
        // Room in the channel (every piece of a small response): hand it
        // over at once, without entering the runtime or arming a timer.
        let piece = match self.tx.try_send(piece) {
            Ok(()) => return Ok(()),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                return Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "the client went away",
                ))
            }
            Err(mpsc::error::TrySendError::Full(piece)) => piece,
        };
        let sent = self
            .runtime
            .block_on(tokio::time::timeout(self.timeout, self.tx.send(piece)));
        match sent {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the client went away",
            )),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped reading",
            )),
        }
    }

    fn send_buffered(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::take(&mut self.buf));
        self.send(Piece::Data(chunk))
    }

    /// Hands a refusal to the response (nothing was written).
    pub(crate) fn refuse(&self, failure: WireFailure) {
        // The receiver may already be gone; nothing is left to tell then.
        let _ = self.send(Piece::Failure(failure));
    }

    /// Marks the response as broken off (when the channel has room; a
    /// channel closed without [`Piece::End`] reads as broken off anyway).
    pub(crate) fn abort(&self) {
        let _ = self.tx.try_send(Piece::Abort);
    }

    /// Marks the response as complete, handing over what is still
    /// buffered with the mark.
    pub(crate) fn end(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return self.send(Piece::End);
        }
        let chunk = Bytes::from(std::mem::take(&mut self.buf));
        self.send(Piece::Last(chunk))
    }
}

impl io::Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= self.chunk_bytes {
            self.send_buffered()?;
        }
        Ok(data.len())
    }

    /// Keeps the bytes for the next full chunk or [`ChannelWriter::end`]:
    /// the encoder flushes only once, as it writes `END`, just before the
    /// round ends the response, and the two travel as one piece.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The async side: the response body, fed by the channel after the chunks
/// already taken from it.
pub(crate) struct ResponseStream {
    taken: std::collections::VecDeque<Bytes>,
    rx: mpsc::Receiver<Piece>,
    /// The channel said the response broke off while its first chunks were
    /// taken: the body ends with an error after them.
    broken: bool,
    ended: bool,
}

impl ResponseStream {
    pub(crate) fn new(taken: Vec<Bytes>, rx: mpsc::Receiver<Piece>, broken: bool) -> Self {
        Self {
            taken: taken.into(),
            rx,
            broken,
            ended: false,
        }
    }
}

impl http_body::Body for ResponseStream {
    type Data = Bytes;
    type Error = io::Error;

    fn is_end_stream(&self) -> bool {
        self.ended && self.taken.is_empty()
    }

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        if let Some(chunk) = self.taken.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        if self.ended {
            return Poll::Ready(None);
        }
        let piece = if self.broken {
            Poll::Ready(Some(Piece::Abort))
        } else {
            self.rx.poll_recv(cx)
        };
        match piece {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Piece::Data(bytes))) => Poll::Ready(Some(Ok(Frame::data(bytes)))),
            Poll::Ready(Some(Piece::Last(bytes))) => {
                self.ended = true;
                self.rx.close();
                Poll::Ready(Some(Ok(Frame::data(bytes))))
            }
            Poll::Ready(Some(Piece::End)) => {
                self.ended = true;
                self.rx.close();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Piece::Failure(_) | Piece::Abort) | None) => {
                self.ended = true;
                Poll::Ready(Some(Err(io::Error::other(
                    "the round's response broke off",
                ))))
            }
        }
    }
}
