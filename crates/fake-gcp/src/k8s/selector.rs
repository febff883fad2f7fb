//! Label and field selectors, as the API server parses them.

use serde_json::Value;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector (`a=b,c!=d,e in (x,y),f notin (z),g,!h`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector {
    requirements: Vec<Requirement>,
}

/// Split on commas that are not inside parentheses.
fn split_top(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in text.chars() {
        match c {
            '(' => {
                depth += 1;
                current.push(c);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            ',' if depth == 0 => parts.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    parts.push(current);
    parts
        .into_iter()
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect()
}

fn set_values(text: &str) -> Result<Vec<String>, String> {
    let inner = text
        .trim()
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| format!("expected a parenthesised set, got '{text}'"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    /// Parse a selector; the error names the part that is not understood.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for part in split_top(text) {
            let req = if let Some(key) = part.strip_prefix('!') {
                Requirement::NotExists(key.trim().to_owned())
            } else if let Some((k, v)) = part.split_once("!=") {
                Requirement::NotEquals(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = part.split_once("==") {
                Requirement::Equals(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = part.split_once('=') {
                Requirement::Equals(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = part.split_once(" notin ") {
                Requirement::NotIn(k.trim().to_owned(), set_values(v)?)
            } else if let Some((k, v)) = part.split_once(" in ") {
                Requirement::In(k.trim().to_owned(), set_values(v)?)
            } else if part.contains(' ') || part.contains('(') {
                return Err(format!("unable to parse requirement '{part}'"));
            } else {
                Requirement::Exists(part.clone())
            };
            requirements.push(req);
        }
        Ok(Self { requirements })
    }

    /// True when the object's `metadata.labels` satisfy every requirement.
    pub(crate) fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::NotIn(k, vs) => !get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A parsed field selector (`metadata.name=x,involvedObject.uid!=y`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector {
    requirements: Vec<(String, bool, String)>,
}

impl FieldSelector {
    /// Parse a selector of `path=value` and `path!=value` terms.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for part in split_top(text) {
            let (path, equal, value) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(format!("invalid field selector term '{part}'"));
            };
            requirements.push((path.trim().to_owned(), equal, value.trim().to_owned()));
        }
        Ok(Self { requirements })
    }

    /// True when every term holds; a missing field compares as "".
    pub(crate) fn matches(&self, object: &Value) -> bool {
        self.requirements.iter().all(|(path, equal, value)| {
            let pointer = format!("/{}", path.replace('.', "/"));
            let found = match object.pointer(&pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (found == *value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors_match_as_the_api_server_does() {
        let pod =
            json!({"metadata": {"labels": {"app": "kinetic", "job-id": "job-1", "tier": "a"}}});
        for (sel, want) in [
            ("app=kinetic", true),
            ("app==kinetic,job-id=job-1", true),
            ("app=other", false),
            ("app!=other", true),
            ("tier in (a, b)", true),
            ("tier notin (a,b)", false),
            ("group-id", false),
            ("!group-id", true),
            ("app,tier in (b),job-id", false),
            ("", true),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&pod),
                want,
                "{sel}"
            );
        }
        assert!(LabelSelector::parse("a b").is_err());
    }

    #[test]
    fn field_selectors_follow_paths() {
        let ev =
            json!({"metadata": {"name": "e1"}, "involvedObject": {"name": "pod-1", "kind": "Pod"}});
        assert!(
            FieldSelector::parse("involvedObject.name=pod-1,involvedObject.kind=Pod")
                .unwrap()
                .matches(&ev)
        );
        assert!(
            !FieldSelector::parse("metadata.name!=e1")
                .unwrap()
                .matches(&ev)
        );
        assert!(FieldSelector::parse("nonsense").is_err());
    }
}
