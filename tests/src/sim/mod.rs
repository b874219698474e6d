//! Provider simulators.
