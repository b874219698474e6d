//! The per-connection writer: the only task that writes to the socket. Responses and
//! notifications arrive on a bounded queue; each goes out as one line, and the socket is flushed
//! once per burst rather than per message.
//!
//! What waits for a client is bounded in bytes too ([`Outbox`]): answers and events queued may
//! add up to [`MAX_QUEUED_BYTES`]; more wait for room. A client that reads nothing for [`STALL`]
//! while its budget is full is dropped: the log says why, what waited for it is freed, and the
//! client is told when its socket has room for one more line. A slow client that reads is never
//! dropped: it only makes its subscriptions lag.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::value::RawValue;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use totem_protocol::ErrorCode;

/// Messages a connection may have queued before its subscriptions are told they lagged.
pub const QUEUE_CAPACITY: usize = 1024;
/// Bytes of answers and events that may wait for one client before it is dropped.
pub const MAX_QUEUED_BYTES: usize = 4 << 20;
/// How long a client may read nothing while its budget is full before it is dropped.
pub const STALL: Duration = Duration::from_secs(5);
/// Messages written before a flush when a burst keeps coming.
const BURST: usize = 64;

/// The sending side of a connection's queue, counting the bytes that wait in it.
#[derive(Clone)]
pub struct Outbox {
    queue: mpsc::Sender<Box<RawValue>>,
    budget: Arc<Budget>,
}

/// The bytes waiting for one client, and whether it was dropped for letting too many pile up.
#[derive(Default)]
pub struct Budget {
    bytes: AtomicUsize,
    /// Messages written so far: a client that reads makes this move.
    written: AtomicU64,
    /// Pinged after every write: room may have come.
    room: Notify,
    over: CancellationToken,
}

impl Budget {
    /// Fires once the client was dropped for not reading.
    pub fn over(&self) -> &CancellationToken {
        &self.over
    }

    /// Waits while the budget is full: the connection reads no new request meanwhile, so a
    /// client that does not read cannot make the daemon compute more answers for it.
    pub async fn room(&self) {
        loop {
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            if self.bytes.load(Ordering::Acquire) < MAX_QUEUED_BYTES || self.over.is_cancelled() {
                return;
            }
            tokio::select! {
                _ = &mut room => {}
                _ = self.over.cancelled() => return,
            }
        }
    }

    fn release(&self, bytes: usize) {
        self.bytes.fetch_sub(bytes, Ordering::AcqRel);
        self.written.fetch_add(1, Ordering::AcqRel);
        self.room.notify_waiters();
    }

    /// Takes room for `bytes`, waiting while [`MAX_QUEUED_BYTES`] already wait (a message larger
    /// than that goes alone). False when the client was dropped: it read nothing for
    /// [`STALL`] while the queue was full.
    async fn take(&self, bytes: usize, conn_id: usize) -> bool {
        loop {
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            let waiting = self.bytes.load(Ordering::Acquire);
            if waiting == 0 || waiting + bytes <= MAX_QUEUED_BYTES {
                if self
                    .bytes
                    .compare_exchange(
                        waiting,
                        waiting + bytes,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    )
                    .is_ok()
                {
                    return true;
                }
                continue;
            }
            let written = self.written.load(Ordering::Acquire);
            tokio::select! {
                _ = &mut room => {}
                _ = self.over.cancelled() => return false,
                _ = tokio::time::sleep(STALL) => {
                    if self.written.load(Ordering::Acquire) == written {
                        if !self.over.is_cancelled() {
                            tracing::warn!(
                                conn = conn_id,
                                waiting,
                                limit = MAX_QUEUED_BYTES,
                                stalled_s = STALL.as_secs(),
                                "dropping a connection: its client does not read (the answers and events waiting for it reached the limit and none was read meanwhile)"
                            );
                        }
                        self.over.cancel();
                        return false;
                    }
                }
            }
        }
    }
}

/// The bytes a message takes in the queue and on the socket.
fn size(message: &RawValue) -> usize {
    message.get().len() + 1
}

impl Outbox {
    /// A queue of [`QUEUE_CAPACITY`] messages and its receiving end.
    pub fn new() -> (Outbox, mpsc::Receiver<Box<RawValue>>, Arc<Budget>) {
        let (queue, rx) = mpsc::channel(QUEUE_CAPACITY);
        let budget = Arc::new(Budget::default());
        (
            Outbox {
                queue,
                budget: budget.clone(),
            },
            rx,
            budget,
        )
    }

    /// Queues a message, waiting for room in the queue and in the byte budget; the connection is
    /// dropped instead when its client reads nothing for [`STALL`] while the budget is full.
    /// False when the message was not queued (the client is gone or dropped).
    pub async fn send(&self, message: Box<RawValue>, conn_id: usize) -> bool {
        let bytes = size(&message);
        if !self.budget.take(bytes, conn_id).await {
            return false;
        }
        let sent = tokio::select! {
            sent = self.queue.send(message) => sent.is_ok(),
            _ = self.budget.over.cancelled() => false,
        };
        if !sent {
            self.budget.bytes.fetch_sub(bytes, Ordering::AcqRel);
        }
        sent
    }
}

/// The line a client dropped for not reading is sent, when its socket has room for it.
fn dropped_line() -> String {
    let message = format!(
        "totemd closed this connection: more than {} MiB of answers and events waited for this client, which was not reading them; reconnect and read the socket as you go",
        MAX_QUEUED_BYTES >> 20
    );
    let line = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": ErrorCode::NOT_READING.0, "message": message},
    });
    // A newline first ends a line the client may have been given half of.
    format!("\n{line}\n")
}

/// Writes queued messages until the queue closes, the socket fails, or `finish` fires (then it
/// drains what is already queued and stops). When the budget runs over, what waits is thrown
/// away and the client is told why, if its socket takes the line at once.
pub async fn run(
    half: OwnedWriteHalf,
    mut queue: mpsc::Receiver<Box<RawValue>>,
    mut finish: oneshot::Receiver<()>,
    budget: Arc<Budget>,
) {
    let mut out = BufWriter::new(half);
    // A failed write ends the writer; one that failed because the client was dropped goes on to
    // tell it why.
    macro_rules! write_or_stop {
        ($written:expr) => {
            if $written.is_err() {
                if budget.over.is_cancelled() {
                    break;
                }
                return;
            }
        };
    }
    loop {
        let first = tokio::select! {
            message = queue.recv() => message,
            _ = budget.over.cancelled() => break,
            _ = &mut finish => {
                while let Ok(message) = queue.try_recv() {
                    if write_line(&mut out, &message, &budget).await.is_err() {
                        return;
                    }
                }
                let _ = out.flush().await;
                return;
            }
        };
        let Some(first) = first else {
            let _ = out.flush().await;
            return;
        };
        write_or_stop!(write_line(&mut out, &first, &budget).await);
        for _ in 0..BURST {
            match queue.try_recv() {
                Ok(message) => write_or_stop!(write_line(&mut out, &message, &budget).await),
                Err(_) => break,
            }
        }
        let flushed = tokio::select! {
            flushed = out.flush() => flushed,
            _ = budget.over.cancelled() => break,
        };
        write_or_stop!(flushed);
    }
    // Dropped: free what waits now, not when the client goes.
    queue.close();
    while queue.try_recv().is_ok() {}
    let half = out.into_inner();
    let _ = half.try_write(dropped_line().as_bytes());
}

async fn write_line(
    out: &mut BufWriter<OwnedWriteHalf>,
    message: &RawValue,
    budget: &Budget,
) -> std::io::Result<()> {
    // Everything queued is compact JSON (serde_json never pretty-prints unless asked), so one
    // message is one line. A write the client does not make room for waits until it is dropped.
    let written = tokio::select! {
        written = async {
            out.write_all(message.get().as_bytes()).await?;
            out.write_all(b"\n").await
        } => written,
        _ = budget.over.cancelled() => Err(std::io::Error::other("dropped")),
    };
    budget.release(size(message));
    written
}
