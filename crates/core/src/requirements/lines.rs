//! Lines as pip sees them: comments and backslash continuations grouped
//! into logical lines (Python's own line rules are in `crate::pytext`).

pub(crate) use crate::pytext::{content, is_py_space, py_rstrip, py_strip, split_lines_keep_ends};

/// True when `s` holds a pip comment: a `#` at the start or after whitespace.
pub(crate) fn comment_start(s: &str) -> Option<usize> {
    let mut prev_space = true;
    for (i, c) in s.char_indices() {
        if c == '#' && prev_space {
            return Some(i);
        }
        prev_space = is_py_space(c);
    }
    None
}

/// True when a physical line continues onto the next one: it ends with `\`
/// (ignoring trailing whitespace) and is not a comment line or a line with
/// a trailing comment (pip reads `# note \` as a comment, not a continuation).
fn continues(content: &str) -> bool {
    py_rstrip(content).ends_with('\\') && comment_start(content).is_none()
}

/// Physical lines joined by backslash continuations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogicalLine<'a> {
    /// 1-based number of the first physical line.
    pub(crate) first_line: usize,
    /// The physical lines, terminators included.
    pub(crate) physical: Vec<&'a str>,
    /// The joined text, Kinetic's way: a continued line contributes its text
    /// without the `\`, right-stripped, plus a space; the last line is
    /// appended stripped; a joined line is right-stripped. A single line is
    /// its content unchanged.
    pub(crate) joined: String,
}

/// Groups `text` into logical lines.
pub(crate) fn logical_lines(text: &str) -> Vec<LogicalLine<'_>> {
    let mut out = Vec::new();
    let mut current: Option<LogicalLine<'_>> = None;
    for (idx, line) in split_lines_keep_ends(text).into_iter().enumerate() {
        let body = content(line);
        let cont = continues(body);
        let logical = match current.take() {
            Some(mut logical) => {
                logical.physical.push(line);
                if cont {
                    logical.joined.push_str(&continued_part(body));
                } else {
                    logical.joined.push_str(py_strip(body));
                    logical.joined = py_rstrip(&logical.joined).to_owned();
                }
                logical
            }
            None => LogicalLine {
                first_line: idx + 1,
                physical: vec![line],
                joined: if cont {
                    continued_part(body)
                } else {
                    body.to_owned()
                },
            },
        };
        if cont {
            current = Some(logical);
        } else {
            out.push(logical);
        }
    }
    if let Some(mut done) = current {
        done.joined = py_rstrip(&done.joined).to_owned();
        out.push(done);
    }
    out
}

/// What a continued line contributes to the joined text.
fn continued_part(body: &str) -> String {
    let r = py_rstrip(body);
    let without = r.strip_suffix('\\').unwrap_or(r);
    let mut part = py_rstrip(without).to_owned();
    part.push(' ');
    part
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitlines_like_python() {
        assert_eq!(split_lines_keep_ends(""), Vec::<&str>::new());
        assert_eq!(split_lines_keep_ends("a"), vec!["a"]);
        assert_eq!(split_lines_keep_ends("a\nb"), vec!["a\n", "b"]);
        assert_eq!(
            split_lines_keep_ends("a\r\nb\rc\n"),
            vec!["a\r\n", "b\r", "c\n"]
        );
        assert_eq!(split_lines_keep_ends("\n\n"), vec!["\n", "\n"]);
        assert_eq!(split_lines_keep_ends("a\u{2028}b"), vec!["a\u{2028}", "b"]);
        assert_eq!(split_lines_keep_ends("a\r\r\n"), vec!["a\r", "\r\n"]);
    }

    #[test]
    fn content_strips_terminator() {
        assert_eq!(content("a\r\n"), "a");
        assert_eq!(content("a"), "a");
        assert_eq!(content("\n"), "");
    }

    #[test]
    fn strip_like_python() {
        assert_eq!(py_strip(" \t\u{1c}x\u{a0} "), "x");
    }

    #[test]
    fn comment_detection() {
        assert_eq!(comment_start("# x"), Some(0));
        assert_eq!(comment_start("numpy  # x"), Some(7));
        assert_eq!(comment_start("git+https://x#egg=jax"), None);
    }

    #[test]
    fn logical_grouping() {
        let l = logical_lines("numpy \\\n  --hash=a \\\n  --hash=b\nscipy\n");
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].first_line, 1);
        assert_eq!(l[0].physical.len(), 3);
        assert_eq!(l[0].joined, "numpy   --hash=a --hash=b");
        assert_eq!(l[1].first_line, 4);
        assert_eq!(l[1].joined, "scipy");
    }

    #[test]
    fn comment_line_does_not_continue() {
        let l = logical_lines("# note \\\njax\n");
        assert_eq!(l.len(), 2);
        assert_eq!(l[1].joined, "jax");
    }

    #[test]
    fn continuation_at_eof() {
        let l = logical_lines("numpy \\");
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].joined, "numpy");
    }
}
