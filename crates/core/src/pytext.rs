//! Text as Python's `str` methods see it (`isspace`, `strip`,
//! `splitlines`), for the files Kinetic reads with them: requirements and
//! `.kineticignore`.

/// True for the characters Python's `str.isspace()` accepts (Rust's
/// White_Space plus the separators U+001C..U+001F).
pub(crate) fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `s.strip()`.
pub(crate) fn py_strip(s: &str) -> &str {
    s.trim_matches(is_py_space)
}

/// Python's `s.rstrip()`.
pub(crate) fn py_rstrip(s: &str) -> &str {
    s.trim_end_matches(is_py_space)
}

/// True for the characters that end a line in Python's `str.splitlines`.
pub(crate) fn is_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r'
            | '\u{0b}'
            | '\u{0c}'
            | '\u{1c}'
            | '\u{1d}'
            | '\u{1e}'
            | '\u{85}'
            | '\u{2028}'
            | '\u{2029}'
    )
}

/// Python's `text.splitlines(keepends=True)`: each line with its terminator
/// (`\r\n` counts as one).
pub(crate) fn split_lines_keep_ends(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if !is_line_break(c) {
            continue;
        }
        let mut end = i + c.len_utf8();
        if c == '\r'
            && let Some(&(j, '\n')) = chars.peek()
        {
            end = j + 1;
            chars.next();
        }
        lines.push(&text[start..end]);
        start = end;
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

/// A line without its terminator.
pub(crate) fn content(line: &str) -> &str {
    // splitlines leaves at most one terminator (`\r\n` counting as one).
    line.trim_end_matches(is_line_break)
}

/// Python's `text.splitlines()`: the lines without their terminators.
pub(crate) fn splitlines(text: &str) -> Vec<&str> {
    split_lines_keep_ends(text)
        .into_iter()
        .map(content)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitlines_matches_python() {
        assert_eq!(
            splitlines("a\nb\r\nc\rd\u{2028}e\x0cf"),
            vec!["a", "b", "c", "d", "e", "f"]
        );
        assert_eq!(splitlines("a\n\nb\n"), vec!["a", "", "b"]);
        assert_eq!(splitlines(""), Vec::<&str>::new());
        assert_eq!(split_lines_keep_ends("a\r\nb"), vec!["a\r\n", "b"]);
        assert_eq!(py_strip("\u{1c} x \t"), "x");
    }
}
