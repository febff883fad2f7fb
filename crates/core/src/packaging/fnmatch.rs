//! Python's `fnmatch.fnmatchcase`, exactly.
//!
//! `.kineticignore` patterns and the secret-file names are matched with
//! Python's `fnmatch` on POSIX (where `fnmatch` is `fnmatchcase`): `*`
//! matches any run of characters **including `/`**, `?` any one character,
//! `[seq]` / `[!seq]` a character set or its complement with `a-z` ranges;
//! there is no escape character, and matching is case-sensitive and against
//! the whole name.
//!
//! The pattern is translated once into a list of tokens, following
//! `fnmatch.translate` of CPython 3.11 step by step, including its corner
//! cases: an unclosed `[` is a literal `[`; `]` right after `[` or `[!` is a
//! member; a hyphen at either end of a set is literal; a reversed range such
//! as `z-a` is dropped (and a set left empty by that never matches, while
//! `[!z-a]` matches any character). Matching is the classic linear-time
//! wildcard algorithm: `*` backtracks to one position, which is enough
//! because every other token matches exactly one character.

/// A compiled `fnmatch` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FnPattern {
    source: String,
    tokens: Vec<Token>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// `*`: any run of characters (consecutive stars are merged).
    Star,
    /// `?`: any one character.
    Any,
    /// One literal character.
    Literal(char),
    /// `[...]`: one character in (or, negated, not in) the ranges.
    Set {
        ranges: Vec<(char, char)>,
        negated: bool,
    },
    /// A set that can match nothing (e.g. `[z-a]`).
    Never,
}

impl Token {
    fn matches(&self, c: char) -> bool {
        match self {
            Token::Star | Token::Any => true,
            Token::Literal(l) => *l == c,
            Token::Set { ranges, negated } => {
                ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
            }
            Token::Never => false,
        }
    }
}

impl FnPattern {
    /// Compiles a pattern. Every string is a valid pattern.
    pub fn new(pattern: &str) -> Self {
        Self {
            source: pattern.to_owned(),
            tokens: translate(pattern),
        }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the whole of `name` matches (`fnmatch.fnmatchcase`).
    pub fn matches(&self, name: &str) -> bool {
        let text: Vec<char> = name.chars().collect();
        let tokens = &self.tokens;
        let (mut t, mut s) = (0usize, 0usize);
        // Where to resume after the last `*`: (token after it, text position).
        let mut resume: Option<(usize, usize)> = None;
        while s < text.len() {
            match tokens.get(t) {
                Some(Token::Star) => {
                    resume = Some((t + 1, s));
                    t += 1;
                }
                Some(token) if token.matches(text[s]) => {
                    t += 1;
                    s += 1;
                }
                _ => match resume {
                    Some((after_star, start)) => {
                        // Let the star swallow one more character and retry.
                        t = after_star;
                        s = start + 1;
                        resume = Some((after_star, start + 1));
                    }
                    None => return false,
                },
            }
        }
        tokens[t..].iter().all(|token| *token == Token::Star)
    }
}

/// `fnmatch.fnmatchcase(name, pattern)`.
pub fn fnmatch(name: &str, pattern: &str) -> bool {
    FnPattern::new(pattern).matches(name)
}

/// CPython 3.11 `fnmatch.translate`, producing tokens instead of a regex.
fn translate(pattern: &str) -> Vec<Token> {
    let pat: Vec<char> = pattern.chars().collect();
    let n = pat.len();
    let mut out = Vec::new();
    let mut i = 0;
    while i < n {
        let c = pat[i];
        i += 1;
        match c {
            '*' => {
                if out.last() != Some(&Token::Star) {
                    out.push(Token::Star);
                }
            }
            '?' => out.push(Token::Any),
            '[' => {
                let mut j = i;
                if j < n && pat[j] == '!' {
                    j += 1;
                }
                if j < n && pat[j] == ']' {
                    j += 1;
                }
                while j < n && pat[j] != ']' {
                    j += 1;
                }
                if j >= n {
                    out.push(Token::Literal('['));
                } else {
                    out.push(set_token(&pat, i, j));
                    i = j + 1;
                }
            }
            other => out.push(Token::Literal(other)),
        }
    }
    out
}

/// The set `pat[i..j]` (between `[` and `]`).
fn set_token(pat: &[char], mut i: usize, j: usize) -> Token {
    let stuff = &pat[i..j];
    // Chunks of literal characters; consecutive chunks are joined by a
    // range hyphen (last char of one chunk .. first char of the next).
    let chunks: Vec<Vec<char>> = if !stuff.contains(&'-') {
        vec![stuff.to_vec()]
    } else {
        let mut chunks: Vec<Vec<char>> = Vec::new();
        let mut k = if pat[i] == '!' { i + 2 } else { i + 1 };
        while let Some(found) = (k..j).find(|&x| pat[x] == '-') {
            chunks.push(pat[i..found].to_vec());
            i = found + 1;
            k = found + 3;
        }
        let tail = pat[i..j].to_vec();
        if tail.is_empty() {
            if let Some(last) = chunks.last_mut() {
                last.push('-');
            }
        } else {
            chunks.push(tail);
        }
        // Remove empty (reversed) ranges, from the end as CPython does.
        let mut k = chunks.len().saturating_sub(1);
        while k > 0 {
            let (prev_last, first) = (chunks[k - 1].last().copied(), chunks[k].first().copied());
            if let (Some(a), Some(b)) = (prev_last, first)
                && a > b
            {
                let next = chunks.remove(k);
                let prev = &mut chunks[k - 1];
                prev.pop();
                prev.extend_from_slice(&next[1..]);
            }
            k -= 1;
        }
        chunks
    };

    // The class body as CPython's regex would see it: literal characters
    // with range operators between chunks.
    #[derive(Clone, Copy, PartialEq)]
    enum Item {
        Char(char),
        RangeOp,
    }
    let mut items = Vec::new();
    for (index, chunk) in chunks.iter().enumerate() {
        if index > 0 {
            items.push(Item::RangeOp);
        }
        items.extend(chunk.iter().map(|&c| Item::Char(c)));
    }
    if items.is_empty() {
        return Token::Never;
    }
    if items == [Item::Char('!')] {
        return Token::Any;
    }
    let negated = items[0] == Item::Char('!');
    if negated {
        items.remove(0);
    }
    // Parse like `sre_parse`: `a-b` is a range; a hyphen that cannot form
    // one is a literal.
    let mut ranges = Vec::new();
    let mut p = 0;
    while p < items.len() {
        match (items[p], items.get(p + 1), items.get(p + 2)) {
            (Item::Char(a), Some(Item::RangeOp), Some(Item::Char(b))) => {
                ranges.push((a, *b));
                p += 3;
            }
            (Item::Char(a), _, _) => {
                ranges.push((a, a));
                p += 1;
            }
            (Item::RangeOp, _, _) => {
                ranges.push(('-', '-'));
                p += 1;
            }
        }
    }
    Token::Set { ranges, negated }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basics() {
        assert!(fnmatch("a/b/c.py", "*.py"));
        assert!(fnmatch("data", "data"));
        assert!(!fnmatch("Data", "data"));
        assert!(fnmatch("x", "?"));
        assert!(!fnmatch("", "?"));
        assert!(fnmatch("", "*"));
        assert!(fnmatch("abc", "a*c"));
        assert!(!fnmatch("abcd", "a*c"));
        assert!(fnmatch("a.ckpt", "*.ckpt"));
        assert!(fnmatch("b", "[abc]"));
        assert!(!fnmatch("d", "[abc]"));
        assert!(fnmatch("d", "[!abc]"));
        assert!(fnmatch("[", "["));
        assert!(fnmatch("[a", "[a"));
        assert!(fnmatch("]", "[]]"));
        assert!(fnmatch("-", "[a-]"));
        assert!(fnmatch("\\", "[\\]"));
        assert!(!fnmatch("m", "[z-a]"));
        assert!(fnmatch("m", "[!z-a]"));
        assert!(fnmatch("*", "[*]"));
        assert!(fnmatch("\n", "*"));
    }
}
