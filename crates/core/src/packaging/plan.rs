//! The packaging plan: where the package root is and how the pod rebuilds
//! the client's layout. Shipped inside
//! `context.zip` at [`PLAN_ARCHIVE_NAME`].

use serde::{Deserialize, Serialize};

/// Archive path of the plan (a real file at this path is replaced).
pub const PLAN_ARCHIVE_NAME: &str = ".kinetic/plan.json";

/// The JSON shape `{package_root, entry_rel, client_cwd_rel, sys_path_rel}`
/// that Kinetic writes to `.kinetic/plan.json` and its runner applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackagingPlan {
    /// Absolute path of the directory that is archived.
    pub package_root: String,
    /// The entry directory relative to the root (`""` when the same).
    pub entry_rel: String,
    /// The client's working directory relative to the root (`""` when the
    /// same, `None` when outside the root).
    pub client_cwd_rel: Option<String>,
    /// `""` followed by the sorted relative paths of the client's `sys.path`
    /// entries under the root.
    pub sys_path_rel: Vec<String>,
}

/// Why a JSON text is not a [`PackagingPlan`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "expected a JSON object {{\"package_root\": string, \"entry_rel\": string, \
     \"client_cwd_rel\": string or null, \"sys_path_rel\": [string, ...]}}: {reason}"
)]
#[non_exhaustive]
pub struct PlanJsonError {
    /// What is wrong with the input.
    pub reason: String,
}

impl PackagingPlan {
    /// Parses the plan from JSON. All four keys are required
    /// (`client_cwd_rel` may be `null`); other keys are ignored.
    pub fn from_json(text: &str) -> Result<Self, PlanJsonError> {
        let err = |reason: String| PlanJsonError { reason };
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| err(format!("not valid JSON ({e})")))?;
        let object = value
            .as_object()
            .ok_or_else(|| err("the value is not an object".to_owned()))?;
        let string = |key: &str| -> Result<String, PlanJsonError> {
            match object.get(key) {
                Some(serde_json::Value::String(s)) => Ok(s.clone()),
                Some(_) => Err(err(format!("\"{key}\" is not a string"))),
                None => Err(err(format!("\"{key}\" is missing"))),
            }
        };
        let package_root = string("package_root")?;
        let entry_rel = string("entry_rel")?;
        let client_cwd_rel = match object.get("client_cwd_rel") {
            Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(_) => {
                return Err(err(
                    "\"client_cwd_rel\" is neither a string nor null".to_owned()
                ));
            }
            None => return Err(err("\"client_cwd_rel\" is missing".to_owned())),
        };
        let sys_path_rel = match object.get("sys_path_rel") {
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| err("\"sys_path_rel\" holds a non-string item".to_owned()))
                })
                .collect::<Result<Vec<_>, _>>()?,
            Some(_) => return Err(err("\"sys_path_rel\" is not a list".to_owned())),
            None => return Err(err("\"sys_path_rel\" is missing".to_owned())),
        };
        if !package_root.starts_with('/') {
            return Err(err(format!(
                "\"package_root\" is {package_root:?}, which is not an absolute path"
            )));
        }
        // The runner applies these inside the job's workspace: a path that
        // leaves it is refused here, not found out in the job.
        let inside = |key: &str, rel: &str| -> Result<(), PlanJsonError> {
            if rel.starts_with('/') || rel.split(['/', '\\']).any(|part| part == "..") {
                return Err(err(format!(
                    "\"{key}\" holds {rel:?}, which leaves the package root: expected a path relative to it, without '..' and not absolute"
                )));
            }
            Ok(())
        };
        inside("entry_rel", &entry_rel)?;
        if let Some(cwd) = &client_cwd_rel {
            inside("client_cwd_rel", cwd)?;
        }
        for rel in &sys_path_rel {
            inside("sys_path_rel", rel)?;
        }
        Ok(Self {
            package_root,
            entry_rel,
            client_cwd_rel,
            sys_path_rel,
        })
    }

    /// The plan as Python's `json.dumps(plan, indent=2)` writes it (keys in
    /// the order above, non-ASCII escaped as `\uXXXX`), byte for byte.
    pub fn to_python_json(&self) -> String {
        // Field order is key order: serde_json keeps insertion order here.
        let value = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        crate::pyjson::to_string_unsorted(&value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> PackagingPlan {
        PackagingPlan {
            package_root: "/h/\u{e9}".to_owned(),
            entry_rel: String::new(),
            client_cwd_rel: None,
            sys_path_rel: vec![
                String::new(),
                "src".to_owned(),
                "\u{1F600}\"\\\n\u{7f}\u{1}".to_owned(),
            ],
        }
    }

    #[test]
    fn python_json_is_byte_identical() {
        // Output of CPython 3.11 `json.dumps(plan, indent=2)` for the same dict.
        let want = "{\n  \"package_root\": \"/h/\\u00e9\",\n  \"entry_rel\": \"\",\n  \"client_cwd_rel\": null,\n  \"sys_path_rel\": [\n    \"\",\n    \"src\",\n    \"\\ud83d\\ude00\\\"\\\\\\n\\u007f\\u0001\"\n  ]\n}";
        assert_eq!(plan().to_python_json(), want);
        let empty = PackagingPlan {
            sys_path_rel: vec![],
            client_cwd_rel: Some("a".to_owned()),
            ..plan()
        };
        assert!(
            empty
                .to_python_json()
                .ends_with("\"client_cwd_rel\": \"a\",\n  \"sys_path_rel\": []\n}")
        );
    }

    #[test]
    fn round_trips_through_its_own_json() {
        let p = plan();
        assert_eq!(PackagingPlan::from_json(&p.to_python_json()), Ok(p));
    }

    #[test]
    fn from_json_requires_every_key() {
        let ok = r#"{"package_root": "/r", "entry_rel": "", "client_cwd_rel": null, "sys_path_rel": [""], "extra": 1}"#;
        assert!(PackagingPlan::from_json(ok).is_ok());
        for bad in [
            "not json",
            "[]",
            r#"{"entry_rel": "", "client_cwd_rel": null, "sys_path_rel": []}"#,
            r#"{"package_root": "/r", "entry_rel": "", "sys_path_rel": []}"#,
            r#"{"package_root": "/r", "entry_rel": 1, "client_cwd_rel": null, "sys_path_rel": []}"#,
            r#"{"package_root": "/r", "entry_rel": "", "client_cwd_rel": null, "sys_path_rel": [1]}"#,
            r#"{"package_root": "/r", "entry_rel": "", "client_cwd_rel": null, "sys_path_rel": "x"}"#,
        ] {
            let err = PackagingPlan::from_json(bad).expect_err(bad);
            assert!(err.to_string().contains("package_root"), "{err}");
        }
    }

    #[test]
    fn from_json_refuses_paths_that_escape_the_root() {
        // Issue 25.9: `pack --plan-json` stored these as given.
        let with = |entry: &str, cwd: &str, sys: &str| {
            format!(
                r#"{{"package_root": "/r", "entry_rel": {entry}, "client_cwd_rel": {cwd}, "sys_path_rel": ["", {sys}]}}"#
            )
        };
        for (bad, key) in [
            (with(r#""../x""#, "null", r#""src""#), "entry_rel"),
            (with(r#""a/../../x""#, "null", r#""src""#), "entry_rel"),
            (with(r#""""#, r#""/etc""#, r#""src""#), "client_cwd_rel"),
            (with(r#""""#, r#""..""#, r#""src""#), "client_cwd_rel"),
            (with(r#""""#, "null", r#""../../lib""#), "sys_path_rel"),
            (with(r#""""#, "null", r#""/usr/lib""#), "sys_path_rel"),
            (with(r#""""#, "null", r#""a\\..\\..""#), "sys_path_rel"),
        ] {
            let err = PackagingPlan::from_json(&bad).expect_err(&bad).to_string();
            assert!(
                err.contains(key) && err.contains("leaves the package root"),
                "{err}"
            );
        }
        let relative_root =
            r#"{"package_root": "r", "entry_rel": "", "client_cwd_rel": null, "sys_path_rel": []}"#;
        let err = PackagingPlan::from_json(relative_root)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not an absolute path"), "{err}");
        // Names that merely contain dots stay inside.
        assert!(
            PackagingPlan::from_json(&with(r#""a..b/.x""#, r#""..c""#, r#""src/...""#)).is_ok()
        );
    }
}
