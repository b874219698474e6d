//! File descriptors: how many connections the daemon can hold, and what a client is told when it
//! cannot be taken. Without this, a daemon out of descriptors leaves new clients hanging in the
//! listen queue until they time out; now the newest are accepted just long enough to read one
//! line saying why, and the log says so once per burst.

use std::time::{Duration, Instant};

use tokio::net::{UnixListener, UnixStream};
use totem_protocol::ErrorCode;

/// A burst of refusals ends after this long without one; the next refusal is logged again.
const BURST_QUIET: Duration = Duration::from_secs(5);

/// The soft open-file limit, from `/proc/self/limits` (None when it cannot be read, or is
/// unlimited).
fn open_file_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.trim_start_matches("Max open files")
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// How many connections fit in the open-file limit, keeping room for the store, logs, providers
/// and the commands runs start. The service unit raises the limit (`LimitNOFILE=`); a shell's is
/// often 1024.
pub fn connection_capacity() -> u64 {
    let Some(limit) = open_file_limit() else {
        return u64::MAX;
    };
    let open_now = std::fs::read_dir("/proc/self/fd").map_or(16, |d| d.count() as u64);
    let reserve = open_now + (limit / 4).min(64);
    let capacity = limit.saturating_sub(reserve).max(1);
    tracing::info!(limit, open_now, connections = capacity, "open-file limit");
    capacity
}

/// Whether an accept failed because the process or the system ran out of descriptors.
pub fn out_of_descriptors(error: &std::io::Error) -> bool {
    use nix::errno::Errno;
    matches!(error.raw_os_error(), Some(code) if code == Errno::EMFILE as i32 || code == Errno::ENFILE as i32)
}

/// The one line a refused client reads before its connection closes: the daemon holds all the
/// connections it allows, or (`out_of_descriptors`) the process has no descriptor left for another.
pub fn refusal_line(open: u64, capacity: u64, out_of_descriptors: bool) -> String {
    let message = if out_of_descriptors {
        format!(
            "totemd has no file descriptors left ({open} connections open); close some Totem clients (editors, terminals, scripts) and try again, or raise its open-file limit (LimitNOFILE in its service unit)"
        )
    } else {
        format!(
            "totemd is holding all the connections it can ({open} open, limit {capacity}); close some Totem clients (editors, terminals, scripts) and try again"
        )
    };
    let line = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": ErrorCode::TOO_MANY_CONNECTIONS.0, "message": message},
    });
    format!("{line}\n")
}

/// Writes the refusal without waiting (it fits in a new socket's buffer) and closes.
pub fn refuse(stream: UnixStream, line: &str) {
    let _ = stream.try_write(line.as_bytes());
}

/// A descriptor held in reserve: when accept fails for lack of descriptors, it is let go so the
/// newest waiting connection can be accepted and told why, then taken back.
pub struct Spare(Option<std::fs::File>);

/// What became of the connection waiting when accept failed for lack of descriptors.
pub enum Waiting {
    /// None came (accept can fail before it looks at the queue).
    Nothing,
    /// It was told why and closed.
    Refused,
    /// There was room after all (descriptors were freed or the limit raised): serve it.
    Room(UnixStream),
}

fn spare_file() -> Option<std::fs::File> {
    std::fs::File::open("/dev/null").ok()
}

impl Default for Spare {
    fn default() -> Spare {
        Spare(spare_file())
    }
}

impl Spare {
    /// Takes the connection waiting at the head of the queue using the spare descriptor, and
    /// refuses it unless the spare can be taken back beside it.
    pub async fn take_waiting(&mut self, listener: &UnixListener, line: &str) -> Waiting {
        self.0 = None;
        let waiting = tokio::time::timeout(Duration::from_millis(50), listener.accept()).await;
        self.0 = spare_file();
        match waiting {
            Ok(Ok((stream, _))) if self.0.is_some() => Waiting::Room(stream),
            Ok(Ok((stream, _))) => {
                refuse(stream, line);
                self.0 = spare_file();
                Waiting::Refused
            }
            _ => Waiting::Nothing,
        }
    }
}

/// Logs refusals once per burst: the first one, then how many there were when it ends.
#[derive(Default)]
pub struct Refusals {
    since: Option<Instant>,
    last: Option<Instant>,
    count: u64,
}

impl Refusals {
    /// Counts a refused connection; the first of a streak is logged with `why`, `open` and
    /// `capacity`.
    pub fn note(&mut self, why: &str, open: u64, capacity: u64) {
        let now = Instant::now();
        if self.since.is_none() {
            tracing::warn!(
                open,
                capacity,
                why,
                "refusing new connections: out of connections; each is told why and closed"
            );
            self.since = Some(now);
        }
        self.last = Some(now);
        self.count += 1;
    }

    /// Ends the burst when none came for a while (called on every accepted connection).
    pub fn settle(&mut self) {
        if let (Some(since), Some(last)) = (self.since, self.last)
            && last.elapsed() >= BURST_QUIET
        {
            tracing::info!(
                refused = self.count,
                secs = since.elapsed().as_secs(),
                "accepting connections again"
            );
            *self = Refusals::default();
        }
    }
}
