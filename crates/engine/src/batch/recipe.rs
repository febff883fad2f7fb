//! What a batch needs to be resumed by a process that did not start it:
//! the spec's options and the map's options, kept in the manifest under
//! the key `resume` (Kinetic ignores it).
//!
//! ```json
//! {"entrypoint": {"module": "work", "function": "f"},
//!  "args": [{"json": 1}, {"data": "/abs/data"}], "kwargs": [["k", {"json": 2}]],
//!  "accelerator": "cpu", "backend": null, "working_dir": "/abs/project",
//!  "env": [{"name": "API_KEY", "secret": true}, {"prefix": "WANDB_"}],
//!  "volumes": [["/mnt/data", "/abs/data"]], "output_dir": null,
//!  "image": {"bundled": true}, "run_deadline_s": null, "pending_deadline_s": null,
//!  "max_concurrent": 64, "retries": 0, "fail_fast": false,
//!  "cancel_running_on_fail": false, "poll_interval_s": 1.0,
//!  "isolation": "workers", "indexed": true}
//! ```
//!
//! `indexed` (only when true) says the batch went to its backend in one
//! call (`Backend::submit_batch`).
//!
//! The environment keeps **names only, never values**: a literal `NAME=VALUE`
//! entry becomes a required `NAME` that the resuming process supplies
//! again, from its own environment. Local data keeps its absolute path and
//! is hashed again on resume (it must still be there; the data cache makes
//! that cheap).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value, json};

use kinetic_core::env::{EnvEntry, EnvName};
use kinetic_core::ports::{Deadlines, ImageMode};
use kinetic_core::spec::{Arg, Data, DataSource, Entrypoint, JobSpec};

use super::BatchConfig;

/// The `resume` key saying the batch was submitted in one call (one
/// Indexed Job): a resume follows it from the backend's group status and
/// never submits its inputs one by one.
pub(super) const INDEXED_KEY: &str = "indexed";

/// Whether a `resume` value says the batch was submitted in one call.
pub(super) fn is_indexed(value: &Value) -> bool {
    value.get(INDEXED_KEY).and_then(Value::as_bool) == Some(true)
}

/// The manifest's `resume` value for a batch of `spec` run with `options`;
/// `working_dir` is the absolute directory the project was packed from.
pub(super) fn encode(spec: &JobSpec, options: &BatchConfig, working_dir: &Path) -> Value {
    let entrypoint = match &spec.entrypoint {
        Entrypoint::Module { module, function } => json!({"module": module, "function": function}),
        Entrypoint::File { path, function } => {
            json!({"file": path.to_string_lossy(), "function": function})
        }
        Entrypoint::Command { argv } => json!({"command": argv}),
    };
    let env: Vec<Value> = spec
        .env
        .iter()
        .map(|e| match e {
            EnvEntry::Exact(name) => json!({"name": name.as_str(), "optional": true}),
            EnvEntry::Prefix(prefix) => json!({"prefix": prefix}),
            EnvEntry::Required { name, secret } => json!({"name": name.as_str(), "secret": secret}),
            // Never the value: the resuming process supplies it again.
            EnvEntry::Literal(name, _) => json!({"name": name.as_str(), "secret": false}),
        })
        .collect();
    let image = match &spec.image {
        ImageMode::Prebuilt { repo } => json!({"prebuilt": repo}),
        ImageMode::Custom { uri } => json!({"custom": uri}),
        _ => json!({"bundled": true}),
    };
    let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
    json!({
        "entrypoint": entrypoint,
        "args": spec.args.iter().map(encode_arg).collect::<Vec<_>>(),
        "kwargs": spec.kwargs.iter().map(|(k, a)| json!([k, encode_arg(a)])).collect::<Vec<_>>(),
        "accelerator": spec.accelerator,
        "backend": spec.backend,
        "working_dir": working_dir.to_string_lossy(),
        "env": env,
        "volumes": spec.volumes.iter().map(|(m, d)| json!([m, encode_volume(d)])).collect::<Vec<_>>(),
        "output_dir": spec.output_dir,
        "image": image,
        "run_deadline_s": secs(spec.deadlines.run),
        "pending_deadline_s": secs(spec.deadlines.pending),
        "max_concurrent": options.max_concurrent,
        "retries": options.retries,
        "fail_fast": options.fail_fast,
        "cancel_running_on_fail": options.cancel_running_on_fail,
        "poll_interval_s": options.poll_interval.as_secs_f64(),
        "isolation": options.isolation.as_str(),
    })
}

fn data_text(data: &Data) -> String {
    kinetic_core::spec::data_source_text(data.source())
}

/// Whether `data` is an `hf://` dataset allowed to run its own code (kept
/// in the recipe as its own kind, `hf_trusted`).
fn trusted(data: &Data) -> bool {
    matches!(
        data.source(),
        DataSource::HuggingFace {
            trust_remote_code: true,
            ..
        }
    )
}

/// A volume's data: its text, or `{"hf_trusted": uri}`.
fn encode_volume(data: &Data) -> Value {
    if trusted(data) || data.is_fuse() {
        encode_data(data)
    } else {
        json!(data_text(data))
    }
}

fn encode_data(data: &Data) -> Value {
    if trusted(data) {
        json!({"hf_trusted": data_text(data)})
    } else if data.is_fuse() {
        json!({"fuse": data_text(data)})
    } else {
        json!({"data": data_text(data)})
    }
}

fn encode_arg(arg: &Arg) -> Value {
    match arg {
        Arg::Json(v) => json!({"json": v}),
        Arg::Data(d) => encode_data(d),
        Arg::List(items) => json!({"list": items.iter().map(encode_arg).collect::<Vec<_>>()}),
        Arg::Object(items) => {
            json!({"object": items.iter().map(|(k, a)| json!([k, encode_arg(a)])).collect::<Vec<_>>()})
        }
    }
}

/// The key that marks, in a batch's stored inputs (`inputs.jsonl`), an
/// input holding data: `{"__kinetic_input__": ARG}`, `ARG` in the form of
/// the recipe's arguments. An input without data is stored as it is.
const INPUT_WITH_DATA: &str = "__kinetic_input__";

/// `input` as a line of the batch's stored inputs.
pub(super) fn encode_input(input: &Arg) -> Value {
    let mut data = Vec::new();
    input.collect_data(&mut data);
    if data.is_empty() {
        input.to_json(&|_| Value::Null)
    } else {
        json!({ INPUT_WITH_DATA: encode_arg(input) })
    }
}

/// An input read back from the batch's stored inputs; its local data must
/// still be there (it is hashed again).
pub(super) fn decode_input(value: Value, cwd: &Path) -> Result<Arg, String> {
    match value {
        Value::Object(m) if m.len() == 1 && m.contains_key(INPUT_WITH_DATA) => {
            decode_arg(&m[INPUT_WITH_DATA], cwd)
        }
        other => Ok(Arg::Json(other)),
    }
}

/// The spec and options a `resume` value records; the error says what is
/// wrong with it (a key missing, data no longer there, a bad name).
pub(super) fn decode(value: &Value) -> Result<(JobSpec, BatchConfig), String> {
    let obj = value.as_object().ok_or("it is not an object")?;
    let text = |key: &str| -> Result<Option<String>, String> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(format!("{key} is {other}, not a string")),
        }
    };
    let working_dir = PathBuf::from(text("working_dir")?.ok_or("working_dir is missing")?);
    let entrypoint = decode_entrypoint(obj.get("entrypoint").ok_or("entrypoint is missing")?)?;
    let mut spec = JobSpec::new(entrypoint).working_dir(&working_dir);
    for a in list(obj, "args")? {
        spec.args.push(decode_arg(a, &working_dir)?);
    }
    for kv in list(obj, "kwargs")? {
        let (k, a) = pair(kv, "kwargs")?;
        spec.kwargs.push((k, decode_arg(a, &working_dir)?));
    }
    spec.accelerator = text("accelerator")?;
    spec.backend = text("backend")?;
    spec.output_dir = text("output_dir")?;
    for e in list(obj, "env")? {
        spec.env.push(decode_env(e)?);
    }
    for v in list(obj, "volumes")? {
        let (mount, data) = pair(v, "volumes")?;
        let data = match data {
            Value::String(text) => load_data(text, &working_dir)?,
            other => match decode_arg(other, &working_dir)? {
                Arg::Data(data) => data,
                _ => return Err(format!("a volume's data is {other}, not a path or URI")),
            },
        };
        spec.volumes.push((mount, data));
    }
    spec.image = match obj.get("image") {
        Some(Value::Object(m)) if m.contains_key("prebuilt") => ImageMode::Prebuilt {
            repo: str_of(m, "prebuilt")?,
        },
        Some(Value::Object(m)) if m.contains_key("custom") => ImageMode::Custom {
            uri: str_of(m, "custom")?,
        },
        _ => ImageMode::Bundled,
    };
    spec.deadlines = Deadlines {
        run: duration(obj, "run_deadline_s")?,
        pending: duration(obj, "pending_deadline_s")?,
    };
    let max_concurrent = match obj.get("max_concurrent") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("max_concurrent is {v}, not a positive integer"))?,
        ),
    };
    let retries = obj
        .get("retries")
        .map_or(Some(0), |v| v.as_u64().and_then(|n| u32::try_from(n).ok()))
        .ok_or("retries is not a small non-negative integer")?;
    let flag = |key: &str| obj.get(key).and_then(Value::as_bool).unwrap_or(false);
    let mut options = BatchConfig::default()
        .max_concurrent(max_concurrent)
        .retries(retries)
        .fail_fast(flag("fail_fast"), flag("cancel_running_on_fail"));
    if let Some(poll) = duration(obj, "poll_interval_s")? {
        options = options.poll_interval(poll);
    }
    // Recipes written before batches had workers name none: the default.
    match obj.get("isolation") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => {
            options = options.isolation(
                text.parse()
                    .map_err(|e: kinetic_core::batch::BatchConfigError| e.message)?,
            );
        }
        Some(v) => return Err(format!("isolation is {v}, not \"workers\" or \"process\"")),
    }
    Ok((spec, options))
}

fn list<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<&'a [Value], String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(format!("{key} is {other}, not a list")),
    }
}

fn pair<'a>(v: &'a Value, what: &str) -> Result<(String, &'a Value), String> {
    match v.as_array().map(Vec::as_slice) {
        Some([Value::String(k), a]) => Ok((k.clone(), a)),
        _ => Err(format!("an entry of {what} is {v}, not [name, value]")),
    }
}

fn str_of(m: &Map<String, Value>, key: &str) -> Result<String, String> {
    m.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("{key} is not a string"))
}

fn duration(obj: &Map<String, Value>, key: &str) -> Result<Option<Duration>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .filter(|d| !d.is_zero())
            .map(Some)
            .ok_or_else(|| format!("{key} is {v}, not a positive number of seconds")),
    }
}

fn decode_entrypoint(v: &Value) -> Result<Entrypoint, String> {
    let m = v.as_object().ok_or("entrypoint is not an object")?;
    if let Some(argv) = m.get("command") {
        let argv: Vec<String> = argv
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .ok_or("the command is not a list of strings")?;
        return Entrypoint::command(argv).map_err(|e| e.to_string());
    }
    let function = str_of(m, "function")?;
    let target = match (m.get("module"), m.get("file")) {
        (Some(Value::String(module)), _) => module.clone(),
        (_, Some(Value::String(file))) => file.clone(),
        _ => return Err("the entrypoint names no module, file or command".into()),
    };
    Entrypoint::parse(&format!("{target}:{function}")).map_err(|e| e.to_string())
}

fn decode_env(v: &Value) -> Result<EnvEntry, String> {
    let m = v.as_object().ok_or("an env entry is not an object")?;
    if let Some(prefix) = m.get("prefix").and_then(Value::as_str) {
        return EnvEntry::parse_capture(&format!("{prefix}*")).map_err(|e| e.to_string());
    }
    let name: EnvName = str_of(m, "name")?.parse().map_err(|e| format!("{e}"))?;
    if m.get("optional").and_then(Value::as_bool) == Some(true) {
        return Ok(EnvEntry::Exact(name));
    }
    Ok(EnvEntry::Required {
        name,
        secret: m.get("secret").and_then(Value::as_bool).unwrap_or(false),
    })
}

fn load_data(text: &str, cwd: &Path) -> Result<Data, String> {
    Data::new(text, cwd).map_err(|e| format!("{e}"))
}

fn decode_arg(v: &Value, cwd: &Path) -> Result<Arg, String> {
    let m = v.as_object().filter(|m| m.len() == 1).ok_or_else(|| {
        format!("an argument is {v}, not one of {{json}}, {{data}}, {{list}}, {{object}}")
    })?;
    let (kind, inner) = m.iter().next().ok_or("an argument is empty")?;
    match kind.as_str() {
        "json" => Ok(Arg::Json(inner.clone())),
        "data" => load_data(inner.as_str().ok_or("data is not a string")?, cwd).map(Arg::Data),
        "hf_trusted" => load_data(inner.as_str().ok_or("hf_trusted is not a string")?, cwd)
            .and_then(|d| d.trust_remote_code(true).map_err(|e| e.to_string()))
            .map(Arg::Data),
        "fuse" => load_data(inner.as_str().ok_or("fuse is not a string")?, cwd)
            .and_then(|d| d.fuse(true).map_err(|e| e.to_string()))
            .map(Arg::Data),
        "list" => inner
            .as_array()
            .ok_or("list is not a list")?
            .iter()
            .map(|a| decode_arg(a, cwd))
            .collect::<Result<_, _>>()
            .map(Arg::List),
        "object" => inner
            .as_array()
            .ok_or("object is not a list of pairs")?
            .iter()
            .map(|kv| {
                let (k, a) = pair(kv, "an object argument")?;
                Ok((k, decode_arg(a, cwd)?))
            })
            .collect::<Result<_, String>>()
            .map(Arg::Object),
        other => Err(format!("an argument of kind {other:?} is not known")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recipe_round_trips_without_env_values() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("d.txt"), "x").unwrap();
        let data = Data::new("d.txt", dir.path()).unwrap();
        let spec = JobSpec::new(Entrypoint::parse("work:f").unwrap())
            .arg(json!(1267650600228229401496703205376_u128.to_string()))
            .arg(Arg::List(vec![
                Arg::Data(data.clone()),
                Arg::Json(json!(2)),
            ]))
            .kwarg(
                "k",
                Arg::Object(vec![("d".into(), Arg::Data(data.clone()))]),
            )
            .accelerator("cpu")
            .env(EnvEntry::parse_cli("LIT=top-secret-value").unwrap())
            .env(EnvEntry::parse_secret("TOKEN").unwrap())
            .env(EnvEntry::parse_cli("WANDB_*").unwrap())
            .env(EnvEntry::parse_capture("OPT").unwrap())
            .volume("/mnt/d", data.clone())
            .volume("/mnt/f", data.clone().fuse(true).unwrap())
            .arg(data.fuse(true).unwrap())
            .deadlines(Deadlines {
                run: Some(Duration::from_secs(90)),
                pending: None,
            });
        let options = BatchConfig::default()
            .max_concurrent(Some(3))
            .retries(2)
            .fail_fast(true, true)
            .isolation(kinetic_core::batch::Isolation::Process);
        let value = encode(&spec, &options, dir.path());
        let text = value.to_string();
        assert!(!text.contains("top-secret-value"), "{text}");
        assert!(text.contains("\"LIT\""));
        let (back, opts) = decode(&value).unwrap();
        assert_eq!(back.args, spec.args);
        assert_eq!(back.kwargs, spec.kwargs);
        assert_eq!(back.volumes, spec.volumes);
        assert_eq!(back.accelerator, spec.accelerator);
        assert_eq!(back.deadlines, spec.deadlines);
        assert_eq!(back.working_dir.as_deref(), Some(dir.path()));
        assert_eq!(back.env[0], EnvEntry::parse_cli("LIT").unwrap());
        assert_eq!(&back.env[1..], &spec.env[1..]);
        assert_eq!(
            (
                opts.max_concurrent,
                opts.retries,
                opts.fail_fast,
                opts.cancel_running_on_fail
            ),
            (Some(3), 2, true, true)
        );
        assert_eq!(opts.isolation, kinetic_core::batch::Isolation::Process);
        // A recipe from before workers runs on them; a wrong one is named.
        let mut old = value.clone();
        old.as_object_mut().unwrap().remove("isolation");
        assert_eq!(
            decode(&old).unwrap().1.isolation,
            kinetic_core::batch::Isolation::Workers
        );
        old["isolation"] = json!("threads");
        let err = decode(&old).unwrap_err();
        assert!(
            err.contains("workers or process") && err.contains("threads"),
            "{err}"
        );
        // Data that is gone is named.
        std::fs::remove_file(dir.path().join("d.txt")).unwrap();
        let err = decode(&value).unwrap_err();
        assert!(err.contains("d.txt"), "{err}");
        assert!(decode(&json!({"entrypoint": {}})).is_err());
    }
}
