//! JSON text exactly as Python's `json.dump(obj, f, indent=2[, sort_keys=True])`
//! writes it, so the files Kinetic reads and writes (`profiles.json`,
//! `.kinetic/plan.json`) come out byte-identical.
//!
//! The differences from `serde_json::to_string_pretty` that matter:
//! keys sorted by code point, non-ASCII and DEL escaped as lowercase
//! `\uXXXX` (Python's default `ensure_ascii=True`, surrogate pairs above the
//! BMP), and floats in Python's `repr` form (`1e+16`, `1.5e-07`).

use serde_json::Value;

/// Python's `json.dumps(value, indent=2, sort_keys=True)`.
pub(crate) fn to_string(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, 0, true);
    out
}

/// Python's `json.dumps(value, indent=2)`: keys in the value's own order.
pub(crate) fn to_string_unsorted(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, 0, false);
    out
}

fn write_value(out: &mut String, value: &Value, depth: usize, sort_keys: bool) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => {
            if n.is_f64() {
                out.push_str(&float_repr(n.as_f64().unwrap_or(0.0)));
            } else {
                out.push_str(&n.to_string());
            }
        }
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                write_value(out, item, depth + 1, sort_keys);
            }
            newline(out, depth);
            out.push(']');
        }
        Value::Object(map) => {
            if map.is_empty() {
                out.push_str("{}");
                return;
            }
            let mut entries: Vec<_> = map.iter().collect();
            if sort_keys {
                // Rust's `str` order is byte order, which for UTF-8 is code
                // point order: the order of Python's `sorted()` on `str` keys.
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                write_string(out, key);
                out.push_str(": ");
                write_value(out, item, depth + 1, sort_keys);
            }
            newline(out, depth);
            out.push('}');
        }
    }
}

fn newline(out: &mut String, depth: usize) {
    out.push('\n');
    for _ in 0..depth {
        out.push_str("  ");
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

/// Python's `repr(float)`: the shortest round-tripping digits, positional
/// when the decimal exponent is in `-4..16`, otherwise scientific with a
/// signed, at least two-digit exponent.
fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    // `{:e}` gives the shortest round-tripping digits: "-1.5e-7", "1e16", "0e0".
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if (-4..16).contains(&exp) {
        let n = digits.len() as i32;
        let body = if exp < 0 {
            format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
        } else if exp + 1 >= n {
            format!("{digits}{}.0", "0".repeat((exp + 1 - n) as usize))
        } else {
            let (int, frac) = digits.split_at((exp + 1) as usize);
            format!("{int}.{frac}")
        };
        format!("{sign}{body}")
    } else {
        let exp_sign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{exp_sign}{:02}", exp.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn layout_matches_python_indent_2_sort_keys() {
        let v = json!({"b": [1, {"y": null, "x": true}], "a": {}, "c": [], "d": "s"});
        // python3 -c 'import json; print(json.dumps({"b": [1, {"y": None, "x": True}],
        //   "a": {}, "c": [], "d": "s"}, indent=2, sort_keys=True))'
        let expected = "{\n  \"a\": {},\n  \"b\": [\n    1,\n    {\n      \"x\": true,\n      \"y\": null\n    }\n  ],\n  \"c\": [],\n  \"d\": \"s\"\n}";
        assert_eq!(to_string(&v), expected);
    }

    #[test]
    fn strings_are_escaped_like_ensure_ascii() {
        let v = json!("q\"b\\n\n\r\t\u{08}\u{0c}\u{01}\u{7f}é€😀/");
        assert_eq!(
            to_string(&v),
            "\"q\\\"b\\\\n\\n\\r\\t\\b\\f\\u0001\\u007f\\u00e9\\u20ac\\ud83d\\ude00/\""
        );
    }

    #[test]
    fn floats_follow_python_repr() {
        let cases = [
            (1.0, "1.0"),
            (-0.0, "-0.0"),
            (0.5, "0.5"),
            (123.456, "123.456"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1e15, "1000000000000000.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e100, "1e+100"),
        ];
        for (x, repr) in cases {
            assert_eq!(float_repr(x), repr, "{x}");
        }
    }

    #[test]
    fn keys_sort_by_code_point() {
        let v = json!({"é": 1, "z": 2, "Z": 3, "a": 4});
        assert_eq!(
            to_string(&v),
            "{\n  \"Z\": 3,\n  \"a\": 4,\n  \"z\": 2,\n  \"\\u00e9\": 1\n}"
        );
    }
}
