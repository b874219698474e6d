//! totemd: the daemon that owns every Totem session. `main.rs` parses the command line; this
//! library holds the parts so tests and benchmarks can reach them.

#![deny(missing_docs)]

pub mod agent;
pub mod boot;
pub mod changes;
pub mod config;
pub mod daemon;
pub mod disk;
pub mod error;
pub mod mcp_client;
pub mod memory;
pub mod redact;
pub mod sandbox;
pub mod server;
pub mod session;
pub mod store;
pub mod terminal;
pub mod util;
