//! How one input of a map becomes the call's arguments (Kinetic's
//! `input_mode`), for JSON inputs and for any input shaped like JSON
//! ([`MapInput`]: the engine's arguments, which may hold data).

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

/// How each input is passed to the function.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InputMode {
    /// An object whose keys are all Python identifiers (and not keywords)
    /// is keyword arguments (`{}` calls with none); an array is positional
    /// arguments; anything else is the one positional argument.
    #[default]
    Auto,
    /// The input is the one positional argument, whatever it is.
    Single,
    /// The input must be an array: its items are the positional arguments.
    Args,
    /// The input must be an object of identifier keys: keyword arguments.
    Kwargs,
}

impl InputMode {
    /// `auto`, `single`, `args` or `kwargs`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Single => "single",
            Self::Args => "args",
            Self::Kwargs => "kwargs",
        }
    }
}

impl fmt::Display for InputMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for InputMode {
    type Err = InputError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "single" => Ok(Self::Single),
            "args" => Ok(Self::Args),
            "kwargs" => Ok(Self::Kwargs),
            other => Err(InputError::UnknownMode {
                input: other.to_owned(),
            }),
        }
    }
}

/// An input that does not fit its mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// Not one of the four modes.
    #[error("unknown input mode '{input}': expected auto, single, args or kwargs")]
    UnknownMode {
        /// The text given.
        input: String,
    },
    /// `args` mode with an input that is not an array.
    #[error("input {index} must be a JSON array for input mode 'args', got {found}")]
    NotAnArray {
        /// The input's index.
        index: usize,
        /// The JSON type found.
        found: &'static str,
    },
    /// `kwargs` mode with an input that is not an object.
    #[error("input {index} must be a JSON object for input mode 'kwargs', got {found}")]
    NotAnObject {
        /// The input's index.
        index: usize,
        /// The JSON type found.
        found: &'static str,
    },
    /// `kwargs` mode with a key Python cannot take as a keyword.
    #[error(
        "input {index} has the key '{key}', which is not a Python identifier (input mode 'kwargs' needs identifier keys; use 'single' to pass the object as one argument)"
    )]
    BadKeyword {
        /// The input's index.
        index: usize,
        /// The key.
        key: String,
    },
}

/// The arguments one input adds to the call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallArgs<T = Value> {
    /// Positional arguments, after the spec's own.
    pub args: Vec<T>,
    /// Keyword arguments, after (and over) the spec's own.
    pub kwargs: Vec<(String, T)>,
}

impl<T> Default for CallArgs<T> {
    fn default() -> Self {
        Self {
            args: Vec::new(),
            kwargs: Vec::new(),
        }
    }
}

/// What [`dispatch_input`] needs to see of an input: whether it is an
/// array (its items) or an object (its members, in order), and what to
/// call it in an error. JSON is one; the engine's arguments, which may
/// hold data, are another.
pub trait MapInput: Clone {
    /// The items, when the input is an array.
    fn items(&self) -> Option<Vec<Self>>;
    /// The members in order, when the input is an object.
    fn members(&self) -> Option<Vec<(String, Self)>>;
    /// What the input is, for errors ("an array", "a string", …).
    fn kind(&self) -> &'static str;
}

impl MapInput for Value {
    fn items(&self) -> Option<Vec<Self>> {
        self.as_array().cloned()
    }

    fn members(&self) -> Option<Vec<(String, Self)>> {
        self.as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
    }

    fn kind(&self) -> &'static str {
        json_type(self)
    }
}

const PYTHON_KEYWORDS: [&str; 35] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// True for a Python identifier that is not a keyword (`str.isidentifier()
/// and not keyword.iskeyword()`, for the characters Rust calls alphabetic).
pub fn is_keyword_name(s: &str) -> bool {
    let mut chars = s.chars();
    let ident = matches!(chars.next(), Some(c) if c == '_' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric());
    ident && !PYTHON_KEYWORDS.contains(&s)
}

/// What a JSON value is, for errors ("an array", "a string", …).
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The call arguments of input `index` under `mode`.
///
/// ```
/// use kinetic_core::batch::{InputMode, dispatch_input};
/// use serde_json::json;
/// let call = dispatch_input(InputMode::Auto, 0, &json!({"lr": 0.1})).unwrap();
/// assert_eq!(call.kwargs, vec![("lr".to_owned(), json!(0.1))]);
/// let call = dispatch_input(InputMode::Auto, 1, &json!([1, 2])).unwrap();
/// assert_eq!(call.args, vec![json!(1), json!(2)]);
/// let call = dispatch_input(InputMode::Auto, 2, &json!({"not-id": 1})).unwrap();
/// assert_eq!(call.args, vec![json!({"not-id": 1})]);
/// ```
pub fn dispatch_input<T: MapInput>(
    mode: InputMode,
    index: usize,
    input: &T,
) -> Result<CallArgs<T>, InputError> {
    let single = || CallArgs {
        args: vec![input.clone()],
        kwargs: Vec::new(),
    };
    let kwargs = |members: Vec<(String, T)>| CallArgs {
        args: Vec::new(),
        kwargs: members,
    };
    match mode {
        InputMode::Single => Ok(single()),
        InputMode::Args | InputMode::Auto if let Some(items) = input.items() => Ok(CallArgs {
            args: items,
            kwargs: Vec::new(),
        }),
        InputMode::Args => Err(InputError::NotAnArray {
            index,
            found: input.kind(),
        }),
        InputMode::Kwargs => {
            let members = input.members().ok_or(InputError::NotAnObject {
                index,
                found: input.kind(),
            })?;
            if let Some((key, _)) = members.iter().find(|(k, _)| !is_keyword_name(k)) {
                return Err(InputError::BadKeyword {
                    index,
                    key: key.clone(),
                });
            }
            Ok(kwargs(members))
        }
        InputMode::Auto => match input.members() {
            Some(members) if members.iter().all(|(k, _)| is_keyword_name(k)) => Ok(kwargs(members)),
            _ => Ok(single()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinetics_pinned_dispatch_cases() {
        let auto = |v: Value| dispatch_input(InputMode::Auto, 0, &v).unwrap();
        assert_eq!(auto(json!({"a": 1, "b": 2})).kwargs.len(), 2);
        assert_eq!(auto(json!({})), CallArgs::default(), "{{}} calls f()");
        assert_eq!(auto(json!({"not-id": 1})).args, vec![json!({"not-id": 1})]);
        assert_eq!(auto(json!({"class": 1})).args, vec![json!({"class": 1})]);
        assert_eq!(
            auto(json!([1, 2, 3])).args,
            vec![json!(1), json!(2), json!(3)]
        );
        assert_eq!(auto(json!(42)).args, vec![json!(42)]);
        let single = dispatch_input(InputMode::Single, 0, &json!([1, 2])).unwrap();
        assert_eq!(single.args, vec![json!([1, 2])]);
        let kw = dispatch_input(InputMode::Kwargs, 0, &json!({"x": 1})).unwrap();
        assert_eq!(kw.kwargs, vec![("x".to_owned(), json!(1))]);
        assert!(matches!(
            dispatch_input(InputMode::Args, 3, &json!(42)),
            Err(InputError::NotAnArray { index: 3, .. })
        ));
        assert!(matches!(
            dispatch_input(InputMode::Kwargs, 0, &json!([1, 2])),
            Err(InputError::NotAnObject { .. })
        ));
        assert!(matches!(
            dispatch_input(InputMode::Kwargs, 0, &json!({"class": 1})),
            Err(InputError::BadKeyword { .. })
        ));
        assert!("bogus".parse::<InputMode>().is_err());
        for m in ["auto", "single", "args", "kwargs"] {
            assert_eq!(m.parse::<InputMode>().unwrap().as_str(), m);
        }
    }
}
