//! Text from outside (labels, ids read from files, a wrapper's command line, a task's name)
//! made safe to show: the one place that decides which characters a terminal or a page must
//! never receive raw. At the bottom of the layers, so the measuring layers, the analysis and every view
//! use the same rule.

/// Characters that reorder or hide text (bidirectional overrides and isolates, direction
/// marks): U+202E makes `exe.txt` read as `txt.exe`.
pub fn is_spoofing(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

/// `text` safe for a terminal: control characters (an escape sequence in a label, a carriage
/// return in an id read from a file) and bidirectional overrides are shown escaped, never sent
/// to the terminal; line breaks stay.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    escaped(text, |c| c == '\n', false)
}

/// `text` safe for a terminal as a whole view or message: as `printable`, but a tab stays, and
/// where `keep_sgr` (the view colours its own output) the colour sequences it wrote
/// (`ESC [ digits ; ... m`) stay too. Every other control character, a lone escape or another
/// escape sequence from a stored label, a host name or a file is shown escaped, whichever
/// string it came in: the sinks (`say`, `commands::print_stdout`) apply it, so no view has to
/// remember which of its strings came from outside.
pub fn terminal_safe(text: &str, keep_sgr: bool) -> std::borrow::Cow<'_, str> {
    escaped(text, |c| c == '\n' || c == '\t', keep_sgr)
}

/// `text` with every control character but those `kept` and every bidirectional override
/// shown escaped, and with `keep_sgr` its colour sequences left as they are.
fn escaped(text: &str, kept: fn(char) -> bool, keep_sgr: bool) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| (c.is_control() && !kept(c)) || is_spoofing(c);
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if keep_sgr && c == '\u{1b}' {
            let sgr = rest[1..].strip_prefix('[').and_then(|r| {
                let end = r.find(|x: char| !x.is_ascii_digit() && x != ';')?;
                (r[end..].starts_with('m')).then_some(end + 3)
            });
            if let Some(len) = sgr {
                out.push_str(&rest[..len]);
                rest = &rest[len..];
                continue;
            }
        }
        if unsafe_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    out.into()
}

/// A text field of any oscost CSV (runs, comparisons, matrices): control characters and
/// bidirectional overrides shown escaped (`text::printable`: a stored id or label may hold
/// them, and a CSV is read in terminals and spreadsheets), then RFC 4180 quoting where needed.
pub fn csv_field(s: &str) -> String {
    let s = printable(s);
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.into_owned()
    }
}

/// Write a message to standard error, dropping it when stderr cannot take it (closed, a full
/// device, a pipe whose reader left): a message is never worth a panic, and the exit status
/// still tells the truth. Used through `say!` and `say_part!`, never `eprintln!` (clippy.toml
/// forbids the panicking macros). Control characters in it are shown escaped
/// (`terminal_safe`).
pub fn say(args: std::fmt::Arguments, newline: bool) {
    use std::io::Write;
    // Messages name paths, hosts and values read from outside: escaped here, once for all.
    let text = args.to_string();
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(terminal_safe(&text, false).as_bytes());
    if newline {
        let _ = err.write_all(b"\n");
    }
    let _ = err.flush();
}

/// Write to standard output, dropping what cannot be written: for the helpers' line protocols
/// (`oscost __ftrace`, `oscost __tracefs`), whose reader leaving means the helper is done.
pub fn tell(args: std::fmt::Arguments, newline: bool) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_fmt(args);
    if newline {
        let _ = out.write_all(b"\n");
    }
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_keeps_its_colours_and_loses_everything_else() {
        let view = "\u{1b}[1mgetpid\u{1b}[0m\t1.0 us\n";
        assert_eq!(terminal_safe(view, true), view);
        assert_eq!(
            terminal_safe(view, false),
            "\\u{1b}[1mgetpid\\u{1b}[0m\t1.0 us\n"
        );
        let label = "a\u{1b}]0;title\u{7}b\u{202e}c\u{1b}[2J";
        assert_eq!(
            terminal_safe(label, true),
            "a\\u{1b}]0;title\\u{7}b\\u{202e}c\\u{1b}[2J"
        );
        assert_eq!(terminal_safe("\u{1b}", true), "\\u{1b}");
    }
}

/// `text` wrapped at word boundaries into lines of at most `width` bytes (so at most that many
/// characters too, whichever a reader counts: `awk length` counts bytes in the C locale), every
/// line after the first starting with `indent` (which counts toward `width`), the first line
/// having `first` bytes before it; a word longer than a line is kept whole on a line of its own.
pub fn wrap(text: &str, width: usize, first: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut room = width.saturating_sub(first);
    let mut line_len = 0;
    for word in text.split_whitespace() {
        let n = word.len();
        if line_len > 0 && line_len + 1 + n > room {
            out.push('\n');
            out.push_str(indent);
            room = width.saturating_sub(indent.len());
            line_len = 0;
        }
        if line_len > 0 {
            out.push(' ');
            line_len += 1;
        }
        out.push_str(word);
        line_len += n;
    }
    out
}

#[cfg(test)]
mod wrap_tests {
    use super::wrap;

    #[test]
    fn wrapped_lines_fit_their_width_with_the_indent() {
        let t = "one two three four five six seven eight nine ten eleven twelve";
        let w = wrap(t, 20, 6, "    ");
        let lines: Vec<&str> = w.lines().collect();
        assert!(lines[0].len() <= 14, "{w}");
        assert!(
            lines[1..]
                .iter()
                .all(|l| l.starts_with("    ") && l.len() <= 20),
            "{w}"
        );
        assert_eq!(w.split_whitespace().collect::<Vec<_>>().join(" "), t);
        assert_eq!(
            wrap("averyveryverylongword x", 8, 0, ""),
            "averyveryverylongword\nx"
        );
    }
}
