//! The spinner shown from a prompt until the run's first output. It is drawn in the REPL's live
//! line just above rustyline's prompt (see `Repl::draw_live`): each frame replaces the one
//! before, and whatever is printed next first erases it, so it never stays on screen nor garbles
//! the prompt.

use std::time::{Duration, Instant};

const FRAMES: &[&str] = &["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
/// Time between frames. The first frame waits as long, so an answer that starts at once never
/// shows a spinner at all.
pub const FRAME: Duration = Duration::from_millis(100);
/// Moves up onto the spinner line and clears it.
pub const ERASE: &str = "\x1b[1A\r\x1b[2K";

/// A spinner waiting for a run's first output.
#[derive(Debug)]
pub struct Spinner {
    since: Instant,
    next: Instant,
    frame: usize,
    color: bool,
}

impl Spinner {
    pub fn start(color: bool) -> Spinner {
        let now = Instant::now();
        Spinner {
            since: now,
            next: now + FRAME,
            frame: 0,
            color,
        }
    }

    /// When the next frame is due.
    pub fn next_frame(&self) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.next)
    }

    /// The next frame's line (without its newline).
    pub fn frame(&mut self) -> String {
        let glyph = FRAMES[self.frame % FRAMES.len()];
        self.frame += 1;
        self.next = Instant::now() + FRAME;
        let secs = self.since.elapsed().as_secs();
        let elapsed = match secs {
            0 => String::new(),
            s => format!(" {s}s"),
        };
        let text = format!("{glyph} waiting for the model…{elapsed} (Esc aborts)");
        match self.color {
            true => format!("\x1b[2m{text}\x1b[0m"),
            false => text,
        }
    }
}

/// Moves up onto the `rows` rows of a live line and clears them (and what is below, the prompt,
/// which rustyline draws again).
pub fn erase(rows: usize) -> String {
    match rows {
        0 => String::new(),
        1 => ERASE.to_string(),
        n => format!("\x1b[{n}A\r\x1b[J"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_turn_and_erasing_covers_the_rows_drawn() {
        let mut spinner = Spinner::start(false);
        let first = spinner.frame();
        assert!(first.starts_with("⠋ waiting for the model"), "{first:?}");
        assert!(spinner.frame().starts_with("⠙"));
        assert_eq!(erase(0), "");
        assert_eq!(erase(1), ERASE);
        assert_eq!(erase(3), "\x1b[3A\r\x1b[J");
    }
}
