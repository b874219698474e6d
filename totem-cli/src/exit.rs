//! Exit codes and the errors that choose them. Commands return `anyhow::Result<Exit>`; an error
//! carrying [`Unreachable`] or [`UsageError`] somewhere in its chain picks that code, any other
//! error 1.

use std::fmt;

/// How `totem` ends; the numbers are documented in `--help` ([`crate::cli::EXIT_CODES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Success = 0,
    Failed = 1,
    Usage = 2,
    Unreachable = 3,
    PermissionDenied = 4,
}

impl Exit {
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// The daemon could not be reached, started or stopped.
#[derive(Debug)]
pub struct Unreachable(pub String);

impl fmt::Display for Unreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unreachable {}

/// The command line asked for something that cannot be done as asked.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The exit code an error stands for.
pub fn exit_for(error: &anyhow::Error) -> Exit {
    for cause in error.chain() {
        if cause.is::<Unreachable>() {
            return Exit::Unreachable;
        }
        if cause.is::<UsageError>() {
            return Exit::Usage;
        }
    }
    Exit::Failed
}
