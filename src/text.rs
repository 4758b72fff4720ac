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
