//! End-to-end tests of Totem: the real binaries, the provider simulators and the benchmark
//! programs.

pub mod external;
pub mod harness;
pub mod hostile;
pub mod llama;
pub mod nvim;
pub mod reliability;
pub mod setup;
pub mod sim;
