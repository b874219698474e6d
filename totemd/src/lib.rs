//! totemd library.
