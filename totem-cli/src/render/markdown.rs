//! Markdown for the terminal: headings, lists, emphasis, quotes, code blocks and inline code, with
//! ANSI styles. A whole text (a replay) is drawn by [`render`]; the model's text as it streams, by
//! [`Lines`], one finished line at a time, so each line is drawn once and never redrawn.

use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use super::Style;

/// Streamed Markdown drawn line by line as each line is finished: a line is certain once its
/// newline came. Code lines are highlighted as they come (the highlighter keeps its state from
/// line to line); table rows wait for the table's end, which they need to be laid out.
#[derive(Default)]
pub struct Lines {
    /// The open fence: its character and length, and the highlighter of its language.
    fence: Option<(char, usize, Option<super::highlight::LineHighlighter>)>,
    table: String,
    /// The last line drawn was blank (or none was drawn yet): blank lines are not repeated.
    after_blank: bool,
    started: bool,
}

impl Lines {
    /// Draws one finished line (without its newline).
    pub fn line(&mut self, line: &str, style: Style) -> String {
        if !style.color {
            return format!("{line}\n");
        }
        let mut out = String::new();
        if self.fence.is_none() && !self.table.is_empty() && !line.trim_start().starts_with('|') {
            out.push_str(&render(&std::mem::take(&mut self.table), style));
        }
        if let Some((ch, len, highlighter)) = &mut self.fence {
            if let Some((c, l, rest)) = fence(line)
                && c == *ch
                && l >= *len
                && rest.is_empty()
            {
                self.fence = None;
                return out;
            }
            let drawn = highlighter.as_mut().and_then(|h| h.line(line));
            match drawn {
                Some(drawn) => out.push_str(&format!("    {drawn}{RESET}\n")),
                None => out.push_str(&format!("    {CODE_BLOCK}{line}{RESET}\n")),
            }
            return out;
        }
        if let Some((ch, len, lang)) = fence(line) {
            if !lang.is_empty() {
                out.push_str(&format!("{DIM}  {lang}{RESET}\n"));
            }
            self.fence = Some((ch, len, super::highlight::LineHighlighter::new(lang)));
            self.after_blank = false;
            return out;
        }
        if line.trim().is_empty() {
            if self.started && !self.after_blank {
                out.push('\n');
            }
            self.after_blank = true;
            return out;
        }
        if line.trim_start().starts_with('|') {
            self.table.push_str(line);
            self.table.push('\n');
            return out;
        }
        self.started = true;
        self.after_blank = false;
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        out.push_str(indent);
        out.push_str(&render(body, style));
        out
    }

    /// What is still held when the text ends: a table's rows.
    pub fn finish(&mut self, style: Style) -> String {
        match self.table.is_empty() {
            true => String::new(),
            false => render(&std::mem::take(&mut self.table), style),
        }
    }

    /// The unfinished line being streamed (without a newline), drawn as it will be once done:
    /// emphasis, inline code and headings styled and their markup hidden, a span still open
    /// drawn as if it closed here. Code and table rows are shown as written.
    pub fn live(&self, line: &str, style: Style) -> String {
        if self.fence.is_some() {
            return format!("    {line}");
        }
        let body = line.trim_start();
        if !style.color || body.is_empty() || body.starts_with('|') || fence(line).is_some() {
            return line.to_string();
        }
        let indent = &line[..line.len() - body.len()];
        let closers = closers(body);
        let closed = render(&format!("{body}{closers}"), style);
        let drawn = match closers.is_empty() || !plain(&closed).trim_end().ends_with(&closers) {
            true => closed,
            // The closing markup did not close anything: the text as it renders alone.
            false => render(body, style),
        };
        let drawn = drawn.trim_end_matches('\n');
        match drawn.contains('\n') || plain(drawn).trim().is_empty() {
            true => line.to_string(),
            false => format!("{indent}{drawn}"),
        }
    }
}

/// The markup that closes the inline spans left open at the end of `text`, innermost first:
/// `**wh` needs `**`, `` `GET / `` a backtick.
fn closers(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut open: Vec<String> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            i += 2;
            continue;
        }
        if !matches!(c, '`' | '*' | '_' | '~') {
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|&&d| d == c).count();
        let before = i.checked_sub(1).map(|j| chars[j]);
        let after = chars.get(i + run).copied();
        i += run;
        let delimiter: String = std::iter::repeat_n(c, run).collect();
        if c == '`' {
            // Inside a code span only its own closing run counts.
            match open.last() {
                Some(top) if *top == delimiter => {
                    open.pop();
                }
                Some(top) if top.starts_with('`') => {}
                _ => open.push(delimiter),
            }
            continue;
        }
        if open.last().is_some_and(|top| top.starts_with('`')) {
            continue;
        }
        if c == '~' && run != 2 {
            continue;
        }
        if let Some(k) = open.iter().rposition(|d| *d == delimiter) {
            // A closing run: it closes this span (and any opened inside it).
            if before.is_some_and(|b| !b.is_whitespace()) {
                open.truncate(k);
                continue;
            }
        }
        // An opening run: followed by a word, and (for `_`) not inside one.
        let opens = after.is_some_and(|a| !a.is_whitespace())
            && !(c == '_' && before.is_some_and(char::is_alphanumeric));
        if opens && run <= 3 {
            open.push(delimiter);
        }
    }
    open.iter().rev().map(String::as_str).collect()
}

/// The columns `text` takes on a terminal (ANSI escapes left out).
fn width(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(plain(text).as_str())
}

/// `text` without its ANSI escapes.
fn plain(text: &str) -> String {
    visible_chars(text).collect()
}

/// The characters of `text` a terminal shows: its ANSI escapes (ESC up to the first letter) left
/// out.
pub(super) fn visible_chars(text: &str) -> impl Iterator<Item = char> + '_ {
    let mut chars = text.chars();
    std::iter::from_fn(move || {
        while let Some(c) = chars.next() {
            if c != '\x1b' {
                return Some(c);
            }
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        }
        None
    })
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
    /// The table being read: drawn when it ends, its columns padded to line up.
    table: Option<Table>,
    link_url: Vec<String>,
}

/// A table's cells as drawn (styles and all), row by row.
#[derive(Default)]
struct Table {
    aligns: Vec<Alignment>,
    rows: Vec<Vec<String>>,
    /// Rows of the head.
    head: usize,
    /// Where the open cell's text starts in the output.
    cell_start: usize,
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
            Tag::Table(aligns) => {
                self.block_gap();
                self.table = Some(Table {
                    aligns,
                    ..Table::default()
                });
            }
            Tag::TableHead | Tag::TableRow => {
                if let Some(table) = &mut self.table {
                    table.rows.push(Vec::new());
                }
            }
            Tag::TableCell => {
                if let Some(table) = &mut self.table {
                    table.cell_start = self.out.len();
                    self.at_line_start = false;
                }
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
            TagEnd::TableCell => {
                if let Some(table) = &mut self.table {
                    let cell = self.out.split_off(table.cell_start.min(self.out.len()));
                    if let Some(row) = table.rows.last_mut() {
                        row.push(cell);
                    }
                }
            }
            TagEnd::TableHead => {
                if let Some(table) = &mut self.table {
                    table.head = table.rows.len();
                }
            }
            TagEnd::Table => {
                if let Some(table) = self.table.take() {
                    self.draw_table(table);
                }
            }
            _ => {}
        }
    }

    /// Draws a table, each column as wide as its widest cell, a rule under the head.
    fn draw_table(&mut self, table: Table) {
        let columns = table.rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0; columns];
        for row in &table.rows {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(width(cell));
            }
        }
        for (r, row) in table.rows.iter().enumerate() {
            self.at_line_start = false;
            self.write_prefix();
            for (i, wide) in widths.iter().enumerate() {
                let cell = row.get(i).map_or("", String::as_str);
                let pad = wide.saturating_sub(width(cell));
                let (left, right) = match table.aligns.get(i) {
                    Some(Alignment::Right) => (pad, 0),
                    Some(Alignment::Center) => (pad / 2, pad - pad / 2),
                    _ => (0, pad),
                };
                if i > 0 {
                    self.out.push_str(&format!("{DIM} │ {RESET}"));
                }
                self.out.push_str(&" ".repeat(left));
                self.out.push_str(cell);
                if i + 1 < columns {
                    self.out.push_str(&" ".repeat(right));
                }
            }
            self.newline();
            if r + 1 == table.head {
                self.write_prefix();
                let rules: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
                self.out
                    .push_str(&format!("{DIM}{}{RESET}", rules.join("─┼─")));
                self.newline();
            }
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

    #[test]
    fn streamed_lines_are_drawn_one_by_one_code_highlighted_as_it_comes() {
        let color = Style { color: true };
        let mut lines = Lines::default();
        let mut draw = |line: &str| plain(&lines.line(line, color));
        assert_eq!(draw("# Title"), "Title\n");
        assert_eq!(draw(""), "\n");
        assert_eq!(draw(""), "");
        assert_eq!(draw("Some *emphasis*."), "Some emphasis.\n");
        assert_eq!(draw("  - nested"), "  • nested\n");
        assert_eq!(draw("```rust"), "  rust\n");
        let mut lines2 = Lines::default();
        lines2.line("```rust", color);
        let code = lines2.line("let x = 1;", color);
        assert!(code.contains("\x1b[38;"), "{code:?}");
        assert_eq!(plain(&code), "    let x = 1;\n");
        assert!(lines2.fence.is_some());
        assert_eq!(lines2.line("```", color), "");
        assert!(lines2.fence.is_none());
        assert_eq!(lines2.line("| a | b |", color), "");
        assert_eq!(lines2.line("|---|---|", color), "");
        let table = plain(&lines2.line("after", color));
        assert!(
            table.contains("a │ b") && table.ends_with("after\n"),
            "{table:?}"
        );
    }

    #[test]
    fn an_unfinished_line_is_drawn_styled_its_open_spans_closed() {
        let color = Style { color: true };
        let lines = Lines::default();
        let live = |text: &str| lines.live(text, color);
        assert_eq!(live("The **wh"), format!("The {BOLD}wh{RESET}"));
        assert_eq!(live("uses `GET /"), format!("uses {CODE}GET /{RESET}"));
        assert!(live("## Ro").starts_with(HEADING) && plain(&live("## Ro")) == "Ro");
        assert_eq!(plain(&live("a *b **c")), "a b c");
        assert_eq!(plain(&live("closed **x** and `y` z")), "closed x and y z");
        // Markup that opens nothing stays as written; snake_case is no emphasis.
        assert_eq!(plain(&live("2 * 3 = 6")), "2 * 3 = 6");
        assert_eq!(plain(&live("call snake_case")), "call snake_case");
        assert_eq!(plain(&live("  - item *it")), "  • item it");
        assert_eq!(live("| a | b"), "| a | b");
        assert_eq!(lines.live("**x", Style { color: false }), "**x");
    }

    #[test]
    fn markdown_is_drawn_without_its_markup() {
        let color = Style { color: true };
        let out = render(
            "# Title\n\nSome *emphasis* and `code`.\n\n- one\n- two\n\n```rust\nfn main() {}\n```\n",
            color,
        );
        let plain = plain(&out);
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
        assert!(rust.contains("\x1b[38;"), "{rust:?}");
        assert!(plain(&rust).contains("    let x = \"hi\";\n"), "{rust:?}");
        let unknown = render("```nosuchlang\nplain\n```\n", color);
        assert!(
            unknown.contains(&format!("{CODE_BLOCK}plain{RESET}")),
            "{unknown:?}"
        );
        let plain = render("```rust\nlet x = 1;\n```\n", Style { color: false });
        assert!(!plain.contains('\x1b'), "{plain:?}");
    }

    #[test]
    fn table_columns_line_up() {
        let out = plain(&render(
            "| name | n |\n|---|--:|\n| a long name | 1 |\n| **b** | 22 |\n",
            Style { color: true },
        ));
        assert_eq!(
            out, "name        │  n\n────────────┼───\na long name │  1\nb           │ 22\n",
            "{out}"
        );
    }

    #[test]
    fn ordered_lists_keep_their_numbers() {
        let out = plain(&render("3. three\n4. four\n", Style { color: true }));
        assert_eq!(out, "3. three\n4. four\n");
    }

    #[test]
    fn plain_style_leaves_the_source_alone() {
        assert_eq!(render("# T\n*x*", Style { color: false }), "# T\n*x*\n");
    }
}
