//! User values as JSON text, read the way the runner protocol carries them.
//!
//! A job's arguments, a batch's inputs and a job's result are the user's
//! values; reading them loses nothing the runner can write:
//!
//! - **Numbers are kept as written.** `serde_json` is built with its
//!   `arbitrary_precision` feature, so `2**100` stays
//!   `1267650600228229401496703205376` both ways (a `Number` holds its
//!   text; `as_u64`, `as_f64`… still work). This is a workspace-wide
//!   feature of `serde_json`: programs that link this crate get it too.
//! - **Nesting up to [`MAX_DEPTH`] levels** (serde_json stops at 128 by
//!   default). The runner refuses to write a deeper value, as a
//!   `ResultNotJSON` error, so what it writes as a success is always read.
//!   The depth is checked on the text, before any parsing, so a hostile
//!   document cannot exhaust the stack.
//! - **Numbers a float cannot hold are refused** in a user value ([`parse`]):
//!   `1e999` would be read by Python as `inf`, `1e-999` as `0.0`, so they
//!   are an error ([`JsonError::OutOfRange`]), as the runner's is for an
//!   argument that reaches it. Integers without a fraction or exponent are
//!   Python `int`s of any size and stay valid.
//! - **Strings JSON text can carry but UTF-8 cannot** (Python strings with
//!   lone surrogates) travel as `{"__kinetic_str__": [...]}` objects the
//!   runner writes and reads back (`docs/runner-protocol.md`); they are
//!   plain JSON here.
//!
//! ```
//! use kinetic_core::json;
//! let value = json::parse(b"[1267650600228229401496703205376, 0.1]")?;
//! assert_eq!(value.to_string(), "[1267650600228229401496703205376,0.1]");
//! let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
//! assert!(json::parse(deep.as_bytes()).is_ok());
//! let too_deep = format!("{}{}", "[".repeat(513), "]".repeat(513));
//! assert!(json::parse(too_deep.as_bytes()).unwrap_err().to_string().contains("512"));
//! # Ok::<(), kinetic_core::json::JsonError>(())
//! ```

use serde_json::Value;

/// The deepest nesting of lists and objects a user value may have (the
/// runner protocol's limit, in both directions).
pub const MAX_DEPTH: usize = 512;

/// Why a text is not a usable JSON value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JsonError {
    /// Not JSON, or not the document expected.
    #[error("{message}")]
    Invalid {
        /// What is wrong (serde_json's message, with line and column).
        message: String,
    },
    /// Nested deeper than allowed.
    #[error("it is nested {depth} levels deep; values are limited to {limit} levels")]
    TooDeep {
        /// How deep it goes (at least; the scan stops past the limit).
        depth: usize,
        /// The limit.
        limit: usize,
    },
    /// A number with a fraction or exponent beyond the range of a 64-bit
    /// float, which Python reads as `inf` (or, too small, as `0.0`).
    #[error(
        "the number {number} is out of the range of a float (Python would read it as {read_as}); \
         pass a number a float can hold, or a string"
    )]
    OutOfRange {
        /// The number as written.
        number: String,
        /// What Python would read instead (`inf`, `-inf`, `0.0`).
        read_as: String,
    },
}

/// Parse one user value (an argument, an input, a result's value), at
/// most [`MAX_DEPTH`] levels deep.
/// A number a float cannot hold is an error ([`JsonError::OutOfRange`]).
pub fn parse(text: &[u8]) -> Result<Value, JsonError> {
    let value = parse_document(text, 0)?;
    check_numbers(&value)?;
    Ok(value)
}

/// Refuse a number with a fraction or exponent (a Python `float`) that a
/// 64-bit float cannot hold: one that overflows to infinity, or a non-zero
/// one that underflows to zero.
pub fn check_numbers(value: &Value) -> Result<(), JsonError> {
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Number(n) => {
                let text = n.to_string();
                if !text.contains(['.', 'e', 'E']) {
                    continue;
                }
                let Ok(float) = text.parse::<f64>() else {
                    continue;
                };
                let mantissa = text.split(['e', 'E']).next().unwrap_or_default();
                let underflow =
                    float == 0.0 && mantissa.contains(|c: char| ('1'..='9').contains(&c));
                if float.is_infinite() || underflow {
                    let read_as = if float.is_infinite() {
                        if float > 0.0 { "inf" } else { "-inf" }
                    } else if float.is_sign_negative() {
                        "-0.0"
                    } else {
                        "0.0"
                    };
                    return Err(JsonError::OutOfRange {
                        number: text,
                        read_as: read_as.to_owned(),
                    });
                }
            }
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    Ok(())
}

/// Parse a document that wraps user values `envelope` levels down (a
/// `result.json` holds its value one level down): the document may be
/// `MAX_DEPTH + envelope` levels deep.
pub fn parse_document(text: &[u8], envelope: usize) -> Result<Value, JsonError> {
    parse_document_as(text, envelope)
}

/// [`parse_document`] into `T` (a reader that keeps less than the whole
/// document as a [`Value`]), with the same bound on nesting.
pub fn parse_document_as<T: serde::de::DeserializeOwned>(
    text: &[u8],
    envelope: usize,
) -> Result<T, JsonError> {
    let limit = MAX_DEPTH + envelope;
    let depth = nesting_depth(text, limit);
    if depth > limit {
        return Err(JsonError::TooDeep {
            depth: depth - envelope,
            limit: MAX_DEPTH,
        });
    }
    let mut de = serde_json::Deserializer::from_slice(text);
    // The depth was bounded above; serde_json's own limit (128) is lower.
    de.disable_recursion_limit();
    let value = T::deserialize(&mut de).map_err(syntax)?;
    de.end().map_err(syntax)?;
    Ok(value)
}

fn syntax(e: serde_json::Error) -> JsonError {
    JsonError::Invalid {
        message: e.to_string(),
    }
}

/// The deepest nesting of `[` and `{` outside strings, scanning the text
/// without parsing it; stops counting once past `stop`.
fn nesting_depth(text: &[u8], stop: usize) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut in_string = false;
    let mut escaped = false;
    for &b in text {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > deepest {
                    deepest = depth;
                    if deepest > stop {
                        return deepest;
                    }
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// How deeply `value` nests lists and objects (a scalar is 0 deep).
pub fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((v, d)) = stack.pop() {
        match v {
            Value::Array(items) => {
                deepest = deepest.max(d + 1);
                stack.extend(items.iter().map(|i| (i, d + 1)));
            }
            Value::Object(map) => {
                deepest = deepest.max(d + 1);
                stack.extend(map.values().map(|i| (i, d + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// Check a value built in memory (not parsed) against [`MAX_DEPTH`].
pub fn check_depth(value: &Value) -> Result<(), JsonError> {
    let found = depth(value);
    if found > MAX_DEPTH {
        return Err(JsonError::TooDeep {
            depth: found,
            limit: MAX_DEPTH,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(n: usize) -> String {
        format!("{}7{}", "[".repeat(n), "]".repeat(n))
    }

    #[test]
    fn numbers_keep_their_text() {
        for text in [
            "1267650600228229401496703205376",
            "-98765432109876543210987654321",
            "0.1",
            "1e+100",
            "18446744073709551616",
        ] {
            assert_eq!(parse(text.as_bytes()).unwrap().to_string(), text);
        }
        let v = parse(b"{\"a\": 12}").unwrap();
        assert_eq!(v["a"].as_u64(), Some(12));
        assert_eq!(v, serde_json::json!({"a": 12}));
    }

    #[test]
    fn depth_is_bounded_before_parsing() {
        assert_eq!(depth(&parse(nested(512).as_bytes()).unwrap()), 512);
        let err = parse(nested(513).as_bytes()).unwrap_err();
        assert!(
            matches!(err, JsonError::TooDeep { limit: 512, .. }),
            "{err}"
        );
        // A hostile document is refused on its text, whatever its depth.
        assert!(parse(nested(1_000_000).as_bytes()).is_err());
        // Brackets inside strings do not count.
        let text = format!("[\"{}\\\"{}\"]", "[".repeat(1000), "{".repeat(1000));
        assert_eq!(depth(&parse(text.as_bytes()).unwrap()), 1);
        // A document wrapping a value one level down.
        let doc = format!("{{\"value\": {}}}", nested(512));
        assert!(parse_document(doc.as_bytes(), 1).is_ok());
        assert!(parse(doc.as_bytes()).is_err());
    }

    #[test]
    fn numbers_beyond_a_float_are_refused() {
        for (text, read_as) in [
            ("1e999", "inf"),
            ("[1, {\"a\": -1E400}]", "-inf"),
            ("1.5e-999", "0.0"),
        ] {
            let err = parse(text.as_bytes()).unwrap_err();
            assert!(
                matches!(&err, JsonError::OutOfRange { read_as: r, .. } if r == read_as),
                "{text}: {err}"
            );
            assert!(err.to_string().contains("out of the range"), "{err}");
        }
        let long_int = format!("1{}", "0".repeat(400));
        for ok in [
            "1e300",
            "5e-324",
            "0.0",
            "-0e5",
            "0e-999",
            long_int.as_str(),
        ] {
            assert!(parse(ok.as_bytes()).is_ok(), "{ok}");
        }
    }

    #[test]
    fn syntax_errors_and_trailing_text_are_errors() {
        assert!(matches!(parse(b"[1,"), Err(JsonError::Invalid { .. })));
        assert!(matches!(parse(b"1 2"), Err(JsonError::Invalid { .. })));
        assert!(parse(b"\"\\ud800\"").is_err(), "UTF-8 cannot hold it");
    }

    #[test]
    fn deep_values_survive_a_small_stack() {
        // Tokio's worker threads have 2 MiB stacks: parsing, printing,
        // cloning and dropping a value at the limit must fit.
        let text = nested(MAX_DEPTH);
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let v = parse(text.as_bytes()).unwrap();
                let copy = v.clone();
                assert_eq!(copy.to_string(), text);
                assert!(check_depth(&copy).is_ok());
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
