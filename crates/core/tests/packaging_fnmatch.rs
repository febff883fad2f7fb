//! `fnmatch`: Python semantics, checked two ways. A proptest compares simple
//! patterns (`*`, `?`, literals) with a naive backtracking model; a
//! differential test runs thousands of random patterns with sets, ranges,
//! negation and unclosed brackets through CPython's own `fnmatch` and
//! requires the same answer (it fails without `python3`).

use std::io::Write;
use std::process::{Command, Stdio};

use kinetic_core::packaging::{FnPattern, fnmatch};
use proptest::prelude::*;

/// `*` any run (including `/`), `?` one character, others literal.
fn model(pattern: &[char], name: &[char]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some(('*', rest)) => (0..=name.len()).any(|k| model(rest, &name[k..])),
        Some(('?', rest)) => !name.is_empty() && model(rest, &name[1..]),
        Some((c, rest)) => name.first() == Some(c) && model(rest, &name[1..]),
    }
}

fn simple_pattern() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop::sample::select(vec!['a', 'b', '/', '.', '*', '?', 'é']),
        0..8,
    )
    .prop_map(|v| v.into_iter().collect())
}

fn name() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop::sample::select(vec!['a', 'b', '/', '.', 'é', '\n']),
        0..8,
    )
    .prop_map(|v| v.into_iter().collect())
}

proptest! {
    #[test]
    fn simple_patterns_match_like_the_model(p in simple_pattern(), n in name()) {
        let pc: Vec<char> = p.chars().collect();
        let nc: Vec<char> = n.chars().collect();
        prop_assert_eq!(fnmatch(&n, &p), model(&pc, &nc), "pattern {:?} name {:?}", p, n);
    }

    #[test]
    fn a_literal_pattern_matches_only_itself(n in name(), m in name()) {
        // No metacharacters in `name()` except via `simple_pattern`.
        prop_assert!(fnmatch(&n, &n));
        prop_assert_eq!(fnmatch(&m, &n), m == n);
    }

    #[test]
    fn star_suffix_is_a_prefix_test(n in name(), prefix in name()) {
        let pattern = format!("{prefix}*");
        prop_assert_eq!(fnmatch(&n, &pattern), n.starts_with(&prefix));
    }
}

#[test]
fn pinned_cases_from_cpython() {
    // (pattern, name, CPython 3.11 fnmatchcase)
    let cases = [
        ("*.py", "a/b.py", true),
        ("[!a]", "/", true),
        ("[a-c]", "b", true),
        ("[c-a]", "b", false),
        ("[c-a]", "c", false),
        ("[!c-a]", "c", true),
        ("[ac-b]", "a", true),
        ("[ac-b]", "c", false),
        ("[!c-a]", "b", true),
        ("[]a]", "]", true),
        ("[!]a]", "]", false),
        ("[a-]", "-", true),
        ("[-a]", "-", true),
        ("[a-c-e]", "d", false),
        ("[a-c-e]", "-", true),
        ("[\\]", "\\", true),
        ("[", "[", true),
        ("[a", "[a", true),
        ("a[", "a[", true),
        ("[[]", "[", true),
        ("[^a]", "^", true),
        ("[^a]", "b", false),
        ("[&&]", "&", true),
        ("[z-a-c]", "b", false),
        ("*[!/]", "a/", false),
        ("**", "", true),
        ("a*b*c", "aXbYbZc", true),
        ("a*b*c", "aXbYbZ", false),
    ];
    for (pattern, name, want) in cases {
        assert_eq!(
            FnPattern::new(pattern).matches(name),
            want,
            "pattern {pattern:?} name {name:?}"
        );
    }
}

/// xorshift64*, so the random cases are the same on every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }

    fn string(&mut self, alphabet: &[char], max_len: usize) -> String {
        let len = self.below(max_len + 1);
        (0..len)
            .map(|_| alphabet[self.below(alphabet.len())])
            .collect()
    }
}

#[test]
fn random_patterns_agree_with_cpython() {
    let pattern_chars = [
        'a', 'b', 'c', 'z', 'A', '-', '!', '[', ']', '*', '?', '/', '\\', '^', 'é', '&',
    ];
    let name_chars = [
        'a', 'b', 'c', 'z', 'A', '-', '!', '[', ']', '/', '\\', '^', 'é', '*',
    ];
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut cases: Vec<(String, String)> = (0..4000)
        .map(|_| (rng.string(&pattern_chars, 9), rng.string(&name_chars, 6)))
        .collect();
    // Bracket-heavy cases: one set with ranges (often reversed), negation,
    // `]`, `^` and backslashes, against one or two characters.
    let set_chars = ['a', 'b', 'c', '-', '-', '!', ']', '^', '\\', '['];
    let short_names = ['a', 'b', 'c', '-', '!', ']', '^', '\\', '['];
    for _ in 0..6000 {
        let pattern = format!(
            "{}[{}]{}",
            rng.string(&['a', '*', '?'], 1),
            rng.string(&set_chars, 6),
            rng.string(&['a', '*', ']'], 1)
        );
        cases.push((pattern, rng.string(&short_names, 3)));
    }
    let program = "import fnmatch, json, sys\n\
                   cases = json.load(sys.stdin)\n\
                   print(json.dumps([fnmatch.fnmatchcase(n, p) for p, n in cases]))\n";
    let mut child = Command::new("python3")
        .args(["-c", program])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let input = serde_json::to_vec(&cases).expect("json");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&input)
        .expect("write");
    let output = child.wait_with_output().expect("python3");
    assert!(output.status.success());
    let want: Vec<bool> = serde_json::from_slice(&output.stdout).expect("json");
    let mut mismatches = Vec::new();
    for ((pattern, name), want) in cases.iter().zip(want) {
        if FnPattern::new(pattern).matches(name) != want {
            mismatches.push(format!("pattern {pattern:?} name {name:?}: python {want}"));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches, e.g. {:?}",
        mismatches.len(),
        &mismatches[..mismatches.len().min(10)]
    );
}
