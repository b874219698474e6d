//! The Totem protocol.
