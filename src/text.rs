//! Text from outside (labels, ids read from files, a wrapper's command line, a task's name)
//! made safe to show: the one place that decides which characters a terminal or a page must
//! never receive raw. At the bottom of the layers, so the harness, the analysis and every view
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
    let unsafe_char = |c: char| (c.is_control() && c != '\n') || is_spoofing(c);
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    text.chars()
        .map(|c| {
            if unsafe_char(c) {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

/// Write a message to standard error, dropping it when stderr cannot take it (closed, a full
/// device, a pipe whose reader left): a message is never worth a panic, and the exit status
/// still tells the truth. Used through `say!` and `say_part!`, never `eprintln!` (clippy.toml
/// forbids the panicking macros).
pub fn say(args: std::fmt::Arguments, newline: bool) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(args);
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
