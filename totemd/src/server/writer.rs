//! The per-connection writer: the only task that writes to the socket. Responses and
//! notifications arrive on a bounded queue; each goes out as one line, and the socket is flushed
//! once per burst rather than per message.

use serde_json::value::RawValue;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{mpsc, oneshot};

/// Messages a connection may have queued before its subscriptions are told they lagged.
pub const QUEUE_CAPACITY: usize = 1024;
/// Messages written before a flush when a burst keeps coming.
const BURST: usize = 64;

/// Writes queued messages until the queue closes, the socket fails, or `finish` fires (then it
/// drains what is already queued and stops).
pub async fn run(
    half: OwnedWriteHalf,
    mut queue: mpsc::Receiver<Box<RawValue>>,
    mut finish: oneshot::Receiver<()>,
) {
    let mut out = BufWriter::new(half);
    loop {
        let first = tokio::select! {
            message = queue.recv() => message,
            _ = &mut finish => {
                while let Ok(message) = queue.try_recv() {
                    if write_line(&mut out, &message).await.is_err() {
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
        if write_line(&mut out, &first).await.is_err() {
            return;
        }
        for _ in 0..BURST {
            match queue.try_recv() {
                Ok(message) => {
                    if write_line(&mut out, &message).await.is_err() {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        if out.flush().await.is_err() {
            return;
        }
    }
}

async fn write_line(
    out: &mut BufWriter<OwnedWriteHalf>,
    message: &RawValue,
) -> std::io::Result<()> {
    // Everything queued is compact JSON (serde_json never pretty-prints unless asked), so one
    // message is one line.
    out.write_all(message.get().as_bytes()).await?;
    out.write_all(b"\n").await
}
