//! The contract between `totemd` and its clients.
//!
//! Everything a client author needs is here as plain types: the method table ([`METHODS`]), the
//! params and results of every method, the events a session streams, the error codes and the rules
//! for finding the daemon's socket. No I/O lives in this crate; `protocol/README.md` is the spec in
//! prose and `protocol/schema/protocol.json` the JSON Schema generated from these types.

#![deny(missing_docs)]

mod api;
mod api_changes;
mod api_provider;
mod api_run;
mod api_terminal;
pub mod display;
mod errors;
mod events;
mod methods;
pub mod schema;
pub mod socket;
mod tool_definition;
mod types;

pub use api::*;
pub use api_changes::*;
pub use api_provider::*;
pub use api_run::*;
pub use api_terminal::*;
pub use errors::{ERROR_CODES, ErrorCode, ErrorCodeInfo};
pub use events::{
    DaemonEvent, DaemonEventKind, EventKind, NOTIFICATIONS, NotificationInfo, SessionEvent,
};
pub use methods::{METHODS, Method, MethodInfo, find as find_method, method};
pub use tool_definition::ToolDefinition;
pub use types::*;

/// The protocol major version this build speaks. Within a major version changes are additive only.
pub const PROTOCOL_VERSION: u32 = 1;

/// Every protocol major version this build can serve, oldest first.
pub const SUPPORTED_VERSIONS: &[u32] = &[1];

/// The longest line (one JSON-RPC message) either side may send, in bytes, newline excluded.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// A size as a person reads it (`512 bytes`, `312 KB`, `4.2 MB`, `1.3 GB`): how the daemon's
/// messages and the clients show `freeBytes` and backup sizes, so both say the same.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1000 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64 / 1000.0;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    let digits = if value < 10.0 { 1 } else { 0 };
    format!("{value:.digits$} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_read_like_a_person_would_say_them() {
        assert_eq!(super::human_bytes(512), "512 bytes");
        assert_eq!(super::human_bytes(312_000), "312 KB");
        assert_eq!(super::human_bytes(4_200_000), "4.2 MB");
        assert_eq!(super::human_bytes(1_300_000_000), "1.3 GB");
    }
}
