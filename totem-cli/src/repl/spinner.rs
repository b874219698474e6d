//! The spinner shown from a prompt until the run's first output. It lives on its own line just
//! above rustyline's prompt, drawn through the external printer like everything else: each frame
//! moves up onto that line, clears it and writes the next frame, and rustyline redraws the prompt
//! (with what is being typed) under it. Whatever is printed next first erases the spinner line, so
//! the line never stays on screen nor garbles the prompt.

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
    /// A frame is on the line above the prompt.
    shown: bool,
    color: bool,
}

impl Spinner {
    pub fn start(color: bool) -> Spinner {
        let now = Instant::now();
        Spinner {
            since: now,
            next: now + FRAME,
            frame: 0,
            shown: false,
            color,
        }
    }

    /// When the next frame is due.
    pub fn next_frame(&self) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.next)
    }

    /// The text that draws the next frame (replacing the previous one).
    pub fn frame(&mut self) -> String {
        let glyph = FRAMES[self.frame % FRAMES.len()];
        self.frame += 1;
        self.next = Instant::now() + FRAME;
        let secs = self.since.elapsed().as_secs();
        let elapsed = match secs {
            0 => String::new(),
            s => format!(" {s}s"),
        };
        let erase = if self.shown { ERASE } else { "" };
        self.shown = true;
        let text = format!("{glyph} waiting for the model…{elapsed} (Ctrl-C aborts)");
        match self.color {
            true => format!("{erase}\x1b[2m{text}\x1b[0m\n"),
            false => format!("{erase}{text}\n"),
        }
    }

    /// Whether a frame is on screen; the caller erases it before printing and the next frame
    /// starts a new line.
    pub fn take_shown(&mut self) -> bool {
        std::mem::replace(&mut self.shown, false)
    }

    /// The line above the prompt is no longer the spinner's (a line was entered): leave the
    /// frame there and draw the next one on a line of its own.
    pub fn forget_shown(&mut self) {
        self.shown = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_frame_after_the_first_replaces_the_previous_one() {
        let mut spinner = Spinner::start(false);
        let first = spinner.frame();
        assert!(
            !first.starts_with(ERASE) && first.ends_with('\n'),
            "{first:?}"
        );
        let second = spinner.frame();
        assert!(second.starts_with(ERASE), "{second:?}");
        assert!(spinner.take_shown());
        assert!(!spinner.take_shown());
        assert!(!spinner.frame().starts_with(ERASE));
    }
}
