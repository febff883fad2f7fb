//! What `run --dry-run` and `map --dry-run` print: the plan of a
//! submission ([`SubmitPreview`]), nothing of which was carried out.

use kinetic_engine::{EngineSettings, ImagePreview, SubmitPreview};
use serde_json::json;

use super::RenderError;
use super::{Output, key_values};

/// The batch a `map --dry-run` would make.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchShape {
    /// Inputs, one job each.
    pub(crate) inputs: usize,
    /// Jobs in flight at once (`None`: no limit).
    pub(crate) max_concurrent: Option<usize>,
}

/// Where the job would run, in words: the backend and, for a cluster,
/// which one.
fn place(preview: &SubmitPreview, settings: &EngineSettings) -> String {
    if preview.backend == "local" {
        return format!(
            "the local backend (this machine), accelerator {}",
            preview.accelerator
        );
    }
    format!(
        "the {} backend: cluster {} in {} (project {}), namespace {}, accelerator {}",
        preview.backend,
        settings.cluster,
        settings.zone,
        settings.project,
        settings.namespace,
        preview.accelerator
    )
}

fn image(preview: &SubmitPreview) -> String {
    match &preview.image {
        ImagePreview::None => "none (this backend runs the job without a container image)".into(),
        ImagePreview::Fixed { uri } => format!("{uri} (as given)"),
        ImagePreview::Resolve {
            mode,
            base_image,
            category,
            requirements,
        } => {
            let reqs = match (mode.as_str(), requirements) {
                (_, 0) => "no requirements".to_owned(),
                ("prebuilt", n) => format!("{n} requirement line(s) installed at start"),
                (_, n) => format!("{n} requirement line(s) baked in"),
            };
            format!(
                "{mode} {category} image on {base_image}, {reqs} (built at submit unless the registry has it)"
            )
        }
        _ => "(unknown)".into(),
    }
}

/// `448 B`, `3.2 kB`, `12.0 MB`.
fn size(bytes: u64) -> String {
    match bytes {
        0..1_000 => format!("{bytes} B"),
        1_000..1_000_000 => format!("{:.1} kB", bytes as f64 / 1e3),
        _ => format!("{:.1} MB", bytes as f64 / 1e6),
    }
}

/// Print the plan: JSON with `--json`, else one aligned block.
pub(crate) fn plan(
    preview: &SubmitPreview,
    settings: &EngineSettings,
    batch: Option<BatchShape>,
    out: &Output,
) -> Result<(), RenderError> {
    if out.is_json() {
        let mut value =
            json!({"dry_run": true, "plan": preview, "runs_on": place(preview, settings)});
        if let Some(b) = batch {
            value["inputs"] = json!(b.inputs);
            value["max_concurrent"] = json!(b.max_concurrent);
        }
        return out.json(&value);
    }
    let mut rows = vec![("runs on", place(preview, settings))];
    if let Some(b) = batch {
        let limit = match b.max_concurrent {
            Some(n) => format!("at most {n} at once"),
            None => "all at once".to_owned(),
        };
        rows.push(("jobs", format!("{} (one per input, {limit})", b.inputs)));
    }
    rows.push(("image", image(preview)));
    for (i, u) in preview.uploads.iter().enumerate() {
        let state = match u.present {
            Some(true) => "; in the store already, not uploaded again",
            Some(false) => "; to upload",
            None => "; to upload",
        };
        rows.push((
            if i == 0 { "uploads" } else { "" },
            format!(
                "{} {} ({}{state})",
                u.what,
                u.uri,
                u.bytes.map_or_else(|| "size unknown".to_owned(), size)
            ),
        ));
    }
    let each = if batch.is_some() {
        "each job writes"
    } else {
        "the job writes"
    };
    for (i, o) in preview.job_objects.iter().enumerate() {
        rows.push((if i == 0 { each } else { "" }, o.clone()));
    }
    let mut text =
        String::from("Plan (dry run: nothing was uploaded, built, written or submitted):\n");
    for line in key_values(&rows).lines() {
        text.push_str("  ");
        text.push_str(line);
        text.push('\n');
    }
    text.push_str(&format!(
        "  ({} stands for the id a submission draws.)\n",
        preview.job_id
    ));
    super::emit(&text)
}
