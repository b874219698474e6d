//! Markdown for the terminal: headings, lists, emphasis, quotes, code blocks and inline code, with
//! ANSI styles. The model's text streams in; [`complete_blocks`] says how much of it is made of
//! finished blocks, so a paragraph is drawn once, whole, and never redrawn.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use super::Style;

/// The byte length of the leading part of `text` made of finished blocks: up to the last blank line
/// outside a code fence, or the end of the last closed fence.
pub fn complete_blocks(text: &str) -> usize {
    let mut open_fence: Option<(char, usize)> = None;
    let mut boundary = 0;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        if !line.ends_with('\n') {
            break;
        }
        pos += line.len();
        if let Some((ch, len, rest)) = fence(line) {
            match open_fence {
                None => open_fence = Some((ch, len)),
                Some((open_ch, open_len))
                    if ch == open_ch && len >= open_len && rest.is_empty() =>
                {
                    open_fence = None;
                    boundary = pos;
                }
                Some(_) => {}
            }
            continue;
        }
        if open_fence.is_none() && line.trim().is_empty() {
            boundary = pos;
        }
    }
    boundary
}

/// A fence line: its character, its length and what follows it (the info string).
fn fence(line: &str) -> Option<(char, usize, &str)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let body = line.trim();
    let ch = body.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = body.chars().take_while(|c| *c == ch).count();
    (len >= 3).then(|| (ch, len, body[len..].trim()))
}

/// Renders `source` for a terminal. With colour off the source is returned as it is: Markdown
/// reads well as plain text.
pub fn render(source: &str, style: Style) -> String {
    if !style.color {
        let mut out = source.to_string();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        return out;
    }
    let mut md = Terminal {
        at_line_start: true,
        ..Terminal::default()
    };
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    for event in Parser::new_ext(source, options) {
        md.event(event);
    }
    md.finish()
}

const RESET: &str = "\x1b[0m";
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const ITALIC: &str = "\x1b[3m";
const UNDERLINE: &str = "\x1b[4m";
const STRIKE: &str = "\x1b[9m";
const CODE: &str = "\x1b[36m";
const HEADING: &str = "\x1b[1;35m";
const CODE_BLOCK: &str = "\x1b[33m";

#[derive(Default)]
struct Terminal {
    out: String,
    /// Inline styles in force, re-applied after each reset.
    styles: Vec<&'static str>,
    /// One entry per open list: the next number of an ordered list, None for bullets.
    lists: Vec<Option<u64>>,
    quote_depth: usize,
    in_code_block: bool,
    /// The open fenced block's info string and text, drawn (highlighted) when it closes.
    code_lang: String,
    code: String,
    at_line_start: bool,
    table_cell: usize,
    link_url: Vec<String>,
}

impl Terminal {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => {
                self.push_style(CODE);
                self.text(&code);
                self.pop_style();
            }
            Event::InlineMath(m) | Event::DisplayMath(m) => self.text(&m),
            Event::Html(html) | Event::InlineHtml(html) => self.text(&html),
            Event::SoftBreak | Event::HardBreak => self.newline(),
            Event::Rule => {
                self.block_gap();
                self.write_prefix();
                self.out.push_str(DIM);
                self.out.push_str(&"─".repeat(40));
                self.out.push_str(RESET);
                self.newline();
            }
            Event::TaskListMarker(done) => self.text(if done { "[x] " } else { "[ ] " }),
            Event::FootnoteReference(r) => self.text(&format!("[{r}]")),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => self.block_gap(),
            Tag::Heading { level, .. } => {
                self.block_gap();
                self.push_style(HEADING);
                if level == HeadingLevel::H1 {
                    self.push_style(UNDERLINE);
                }
            }
            Tag::BlockQuote(_) => {
                self.block_gap();
                self.quote_depth += 1;
            }
            Tag::CodeBlock(kind) => {
                self.block_gap();
                self.in_code_block = true;
                self.code.clear();
                self.code_lang.clear();
                if let CodeBlockKind::Fenced(lang) = kind
                    && !lang.is_empty()
                {
                    self.write_prefix();
                    self.out.push_str(&format!("{DIM}  {lang}{RESET}"));
                    self.newline();
                    self.code_lang = lang.to_string();
                }
            }
            Tag::List(start) => {
                if self.lists.is_empty() {
                    self.block_gap();
                } else if !self.at_line_start {
                    self.newline();
                }
                self.lists.push(start);
            }
            Tag::Item => {
                if !self.at_line_start {
                    self.newline();
                }
                self.write_prefix();
                let depth = self.lists.len().saturating_sub(1);
                self.out.push_str(&"  ".repeat(depth));
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let m = format!("{n}. ");
                        *n += 1;
                        m
                    }
                    _ => "• ".to_string(),
                };
                self.out.push_str(&marker);
                self.at_line_start = false;
            }
            Tag::Emphasis => self.push_style(ITALIC),
            Tag::Strong => self.push_style(BOLD),
            Tag::Strikethrough => self.push_style(STRIKE),
            Tag::Link { dest_url, .. } => {
                self.push_style(UNDERLINE);
                self.link_url.push(dest_url.to_string());
            }
            Tag::Image { dest_url, .. } => self.text(&format!("[image {dest_url}] ")),
            Tag::Table(_) => self.block_gap(),
            Tag::TableHead | Tag::TableRow => self.table_cell = 0,
            Tag::TableCell => {
                if self.table_cell > 0 {
                    self.text(" │ ");
                }
                self.table_cell += 1;
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => self.newline(),
            TagEnd::Heading(level) => {
                if level == HeadingLevel::H1 {
                    self.pop_style();
                }
                self.pop_style();
                self.newline();
            }
            TagEnd::BlockQuote(_) => self.quote_depth = self.quote_depth.saturating_sub(1),
            TagEnd::CodeBlock => self.code_block(),
            TagEnd::List(_) => {
                self.lists.pop();
            }
            TagEnd::Item if !self.at_line_start => self.newline(),
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => self.pop_style(),
            TagEnd::Link => {
                self.pop_style();
                if let Some(url) = self.link_url.pop() {
                    self.out.push_str(&format!("{DIM} ({url}){RESET}"));
                    self.reapply();
                }
            }
            TagEnd::TableHead => {
                self.newline();
                self.write_prefix();
                self.out
                    .push_str(&format!("{DIM}{}{RESET}", "─".repeat(24)));
                self.newline();
            }
            TagEnd::TableRow => self.newline(),
            _ => {}
        }
    }

    /// Draws the closed code block: highlighted when its language is known, else in one colour.
    fn code_block(&mut self) {
        let code = std::mem::take(&mut self.code);
        let highlighted = match self.code_lang.is_empty() {
            true => None,
            false => super::highlight::highlight(&self.code_lang, &code),
        };
        match highlighted {
            Some(lines) => {
                for line in lines {
                    self.write_prefix();
                    self.out.push_str("    ");
                    self.out.push_str(&line);
                    self.out.push_str(RESET);
                    self.newline();
                }
            }
            None => {
                for line in code.lines() {
                    self.write_prefix();
                    self.out.push_str("    ");
                    self.out.push_str(CODE_BLOCK);
                    self.out.push_str(line);
                    self.out.push_str(RESET);
                    self.newline();
                }
            }
        }
        self.in_code_block = false;
    }

    fn text(&mut self, text: &str) {
        if self.in_code_block {
            self.code.push_str(text);
            return;
        }
        let mut lines = text.split('\n').peekable();
        while let Some(line) = lines.next() {
            let last = lines.peek().is_none();
            if last && line.is_empty() {
                break;
            }
            if self.at_line_start {
                self.write_prefix();
                if !self.lists.is_empty() {
                    // Continuation lines of an item line up with its text.
                    self.out.push_str(&"  ".repeat(self.lists.len()));
                }
            }
            self.out.push_str(line);
            self.at_line_start = false;
            if !last {
                self.newline();
            }
        }
    }

    fn write_prefix(&mut self) {
        for _ in 0..self.quote_depth {
            self.out.push_str(DIM);
            self.out.push_str("│ ");
            self.out.push_str(RESET);
        }
        self.reapply();
    }

    fn newline(&mut self) {
        if !self.styles.is_empty() {
            self.out.push_str(RESET);
        }
        self.out.push('\n');
        self.at_line_start = true;
    }

    /// Blocks are separated by one blank line, except inside lists, which stay tight.
    fn block_gap(&mut self) {
        if !self.at_line_start && !self.out.is_empty() {
            self.newline();
        }
        if self.out.is_empty() || self.out.ends_with("\n\n") || !self.lists.is_empty() {
            return;
        }
        self.out.push('\n');
        self.at_line_start = true;
    }

    fn push_style(&mut self, code: &'static str) {
        self.styles.push(code);
        self.out.push_str(code);
    }

    fn pop_style(&mut self) {
        self.styles.pop();
        self.out.push_str(RESET);
        self.reapply();
    }

    fn reapply(&mut self) {
        for code in &self.styles {
            self.out.push_str(code);
        }
    }

    fn finish(mut self) -> String {
        if !self.at_line_start && !self.out.is_empty() {
            self.newline();
        }
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strip_ansi(s: &str) -> String {
        let mut out = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn blocks_end_at_blank_lines_outside_fences() {
        assert_eq!(complete_blocks("one\n\ntwo"), 5);
        assert_eq!(complete_blocks("```\ncode\n\nmore"), 0);
        assert_eq!(complete_blocks("```\ncode\n\n```\nafter"), 14);
        assert_eq!(complete_blocks("no boundary yet\n"), 0);
    }

    #[test]
    fn markdown_is_drawn_without_its_markup() {
        let color = Style { color: true };
        let out = render(
            "# Title\n\nSome *emphasis* and `code`.\n\n- one\n- two\n\n```rust\nfn main() {}\n```\n",
            color,
        );
        let plain = strip_ansi(&out);
        assert!(plain.contains("Title\n"), "{plain:?}");
        assert!(plain.contains("Some emphasis and code."), "{plain:?}");
        assert!(plain.contains("• one\n• two\n"), "{plain:?}");
        assert!(plain.contains("    fn main() {}"), "{plain:?}");
        assert!(out.contains(ITALIC) && out.contains(CODE) && out.contains(HEADING));
    }

    #[test]
    fn fenced_code_is_highlighted_by_language() {
        let color = Style { color: true };
        let rust = render("```rust\nlet x = \"hi\";\n```\n", color);
        assert!(rust.contains("\x1b[38;2;"), "{rust:?}");
        assert!(
            strip_ansi(&rust).contains("    let x = \"hi\";\n"),
            "{rust:?}"
        );
        let unknown = render("```nosuchlang\nplain\n```\n", color);
        assert!(
            unknown.contains(&format!("{CODE_BLOCK}plain{RESET}")),
            "{unknown:?}"
        );
        let plain = render("```rust\nlet x = 1;\n```\n", Style { color: false });
        assert!(!plain.contains('\x1b'), "{plain:?}");
    }

    #[test]
    fn ordered_lists_keep_their_numbers() {
        let out = strip_ansi(&render("3. three\n4. four\n", Style { color: true }));
        assert_eq!(out, "3. three\n4. four\n");
    }

    #[test]
    fn plain_style_leaves_the_source_alone() {
        assert_eq!(render("# T\n*x*", Style { color: false }), "# T\n*x*\n");
    }
}
