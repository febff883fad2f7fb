//! Properties of the JAX filter and the prebuilt preparation.

use std::path::PathBuf;

use kinetic_core::requirements::{
    DependencyFile, DependencyFileKind, JAX_PACKAGES, KEEP_MARKER, RequirementsMode, filter_jax,
    join_continuations, normalize_name, prepare,
};
use proptest::prelude::*;

/// Line bodies that exercise every rule: JAX spellings, near misses,
/// comments, options, markers, continuations, odd whitespace.
fn line_body() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "jax", "JAX", "Jax[tpu]>=0.4", "jaxlib>=0.4.6", "libtpu", "libtpu_nightly",
            "LibTPU-Nightly", "jax ; python_version>'3.9'", "  jax  ", "jax>=0.4 \\",
            "jax==0.4.30 # kn:keep", "jax==0.4.30 #kn:keep", "jax-metal", "jaxtyping", "flax",
            "numpy==1.26", "scipy", "-e git+https://x#egg=jax", "--find-links https://x jax",
            "# jax", "", "   ", "\\", "  --hash=sha256:abc \\", "  --hash=sha256:def",
            "# note \\", "numpy \\", "keras  # comment", "\u{a0}jax", "\u{1c}",
        ]).prop_map(str::to_owned),
        1 => "[ -~]{0,20}",
        1 => any::<String>().prop_map(|s| s.chars().filter(|c| !is_break(*c)).take(20).collect()),
    ]
}

fn is_break(c: char) -> bool {
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

fn ending() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["\n", "\n", "\n", "\r\n", "\r"])
}

/// A requirements text and its physical lines.
fn requirements_text() -> impl Strategy<Value = (String, Vec<String>)> {
    (
        prop::collection::vec((line_body(), ending()), 0..12),
        any::<bool>(),
    )
        .prop_map(|(lines, final_newline)| {
            let n = lines.len();
            let physical: Vec<String> = lines
                .into_iter()
                .enumerate()
                .map(|(i, (body, end))| {
                    if i + 1 == n && !final_newline {
                        body
                    } else {
                        format!("{body}{end}")
                    }
                })
                .filter(|l| !l.is_empty())
                .collect();
            (physical.concat(), physical)
        })
}

/// Python-style line split (same breaks as the filter).
fn physical_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        cur.push(c);
        if is_break(c) {
            if c == '\r' && chars.peek() == Some(&'\n') {
                cur.push('\n');
                chars.next();
            }
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn is_bare_jax(logical: &str) -> bool {
    let s = logical.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c));
    if s.is_empty() || s.starts_with('#') || s.starts_with('-') || logical.contains(KEEP_MARKER) {
        return false;
    }
    if !s.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return false;
    }
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        .unwrap_or(s.len());
    let name = s[..end].trim_end_matches(['.', '_', '-']);
    JAX_PACKAGES.contains(&normalize_name(name).as_str())
}

fn req_file() -> DependencyFile {
    DependencyFile {
        path: PathBuf::from("/p/requirements.txt"),
        kind: DependencyFileKind::RequirementsTxt,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Never panics; the output is the concatenation of some of the
    /// input's physical lines, in order, byte for byte.
    #[test]
    fn output_is_an_ordered_subsequence_of_input_lines((text, _lines) in requirements_text()) {
        let out = filter_jax(&text);
        // Offsets of the output that a concatenation of some of the input
        // lines, in order, can reach (a greedy match would be fooled by a
        // line that is a prefix of the next one in the output).
        let mut reachable = std::collections::BTreeSet::from([0usize]);
        for line in physical_lines(&text) {
            let next: Vec<usize> = reachable
                .iter()
                .filter(|&&at| out.text[at..].starts_with(line.as_str()))
                .map(|&at| at + line.len())
                .collect();
            reachable.extend(next);
        }
        prop_assert!(
            reachable.contains(&out.text.len()),
            "{:?} is not made of input lines of {text:?}",
            out.text
        );
    }

    /// Every line that is not part of a JAX requirement is kept: the
    /// number of dropped logical lines equals the number of warnings, and
    /// texts without JAX names pass unchanged.
    #[test]
    fn non_jax_text_is_unchanged((text, _lines) in requirements_text()) {
        let out = filter_jax(&text);
        let joined = join_continuations(&text);
        let any_jax = joined.lines().any(is_bare_jax);
        if !any_jax {
            prop_assert_eq!(&out.text, &text);
            prop_assert!(out.warnings.is_empty());
        } else {
            prop_assert!(!out.warnings.is_empty());
        }
    }

    /// Without continuations, the output is exactly the input lines that
    /// are not JAX requirements, in order, byte for byte.
    #[test]
    fn keeps_every_non_jax_line_verbatim((text, _lines) in requirements_text()) {
        prop_assume!(!text.contains('\\'));
        let expected: String = physical_lines(&text)
            .into_iter()
            .filter(|l| !is_bare_jax(l.trim_end_matches(is_break)))
            .collect();
        prop_assert_eq!(filter_jax(&text).text, expected);
    }

    /// Filtering twice changes nothing.
    #[test]
    fn idempotent((text, _lines) in requirements_text()) {
        let once = filter_jax(&text);
        let twice = filter_jax(&once.text);
        prop_assert_eq!(&twice.text, &once.text);
        prop_assert!(twice.warnings.is_empty());
    }

    /// No logical line of the output installs a JAX package without the marker.
    #[test]
    fn never_keeps_a_bare_jax_line((text, _lines) in requirements_text()) {
        let out = filter_jax(&text);
        for logical in join_continuations(&out.text).lines() {
            prop_assert!(!is_bare_jax(logical), "kept {logical:?}");
        }
    }

    /// Prebuilt preparation never panics; when it succeeds its output has
    /// no continuation left, ends with a newline, and holds no bare JAX line.
    #[test]
    fn prebuilt_output_is_joined_and_clean((text, _lines) in requirements_text()) {
        if let Ok(out) = prepare(&text, RequirementsMode::Prebuilt, &req_file()) {
            prop_assert!(out.text.is_empty() || out.text.ends_with('\n'));
            for line in out.text.lines() {
                prop_assert!(!is_bare_jax(line), "kept {line:?}");
            }
        }
    }

    /// Bundled preparation is the filter when nothing is refused.
    #[test]
    fn bundled_equals_filter((text, _lines) in requirements_text()) {
        if let Ok(out) = prepare(&text, RequirementsMode::Bundled, &req_file()) {
            prop_assert_eq!(out.text, filter_jax(&text).text);
        }
    }
}

/// The case that fooled a greedy check: a kept `\\\r` line is a prefix of
/// the kept `\\\r\n` line that follows in the output.
#[test]
fn carriage_return_continuations_keep_whole_lines() {
    let text = "\\\rjax>=0.4 \\\njax\n\\\r\njax-metal";
    assert_eq!(filter_jax(text).text, "\\\r\njax-metal");
}
