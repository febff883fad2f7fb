//! What an error advises the user to set, as data: each front end names the
//! same knob its own way (the command line `--accelerator cpu`, the Python
//! module `accelerator="cpu"`), so an error keeps its advice as
//! [`Advice`] and the front end that shows it renders it
//! ([`Advice::render`]). The `Display` of an error holding advice is the
//! command line's rendering.
//!
//! ```
//! use kinetic_core::advice::{Advice, FrontEnd, Knob};
//!
//! let advice = Advice::new()
//!     .text("use ")
//!     .set(Knob::Accelerator, "cpu")
//!     .text(" to run here");
//! assert_eq!(advice.render(FrontEnd::CommandLine), "use --accelerator cpu to run here");
//! assert_eq!(advice.render(FrontEnd::Python), "use accelerator=\"cpu\" to run here");
//! ```

use std::fmt;

use crate::settings::vars;

/// Who shows an error to the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrontEnd {
    /// The `kinetic` command: flags (`--backend gke`).
    CommandLine,
    /// The `kinetic` Python module: keyword parameters (`backend="gke"`).
    Python,
}

/// A setting of a job or of its target that advice can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Knob {
    /// The accelerator a job runs on.
    Accelerator,
    /// The backend a job goes to.
    Backend,
    /// The GCP project.
    Project,
    /// The GKE cluster.
    Cluster,
    /// The GCP zone.
    Zone,
    /// Spot (preemptible) capacity, a switch.
    Spot,
}

impl Knob {
    /// The command line's flag (`--accelerator`).
    pub fn flag(self) -> &'static str {
        match self {
            Self::Accelerator => "--accelerator",
            Self::Backend => "--backend",
            Self::Project => "--project",
            Self::Cluster => "--cluster",
            Self::Zone => "--zone",
            Self::Spot => "--spot",
        }
    }

    /// The Python module's keyword parameter (`accelerator`).
    pub fn parameter(self) -> &'static str {
        match self {
            Self::Accelerator => "accelerator",
            Self::Backend => "backend",
            Self::Project => "project",
            Self::Cluster => "cluster",
            Self::Zone => "zone",
            Self::Spot => "spot",
        }
    }

    /// The environment variable both front ends read it from, if any.
    pub fn env_var(self) -> Option<&'static str> {
        match self {
            Self::Accelerator | Self::Spot => None,
            Self::Backend => Some(vars::BACKEND),
            Self::Project => Some(vars::PROJECT),
            Self::Cluster => Some(vars::CLUSTER),
            Self::Zone => Some(vars::ZONE),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    /// The knob set to one of the values.
    Set(Knob, Vec<String>),
    /// The knob's name, to be given a value.
    Name(Knob),
    /// A switch turned on (`--spot`, `spot=True`).
    On(Knob),
}

/// A sentence of advice whose settings each front end names its own way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Advice {
    parts: Vec<Part>,
}

impl Advice {
    /// Empty advice, to be built up.
    pub fn new() -> Self {
        Self::default()
    }

    /// Words the same for every front end.
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.parts.push(Part::Text(text.into()));
        self
    }

    /// `knob` set to `value`: `--backend gke`, `backend="gke"`.
    pub fn set(self, knob: Knob, value: impl Into<String>) -> Self {
        self.set_any(knob, [value.into()])
    }

    /// `knob` set to one of `values`: `--backend gke or pathways`,
    /// `backend="gke" or "pathways"`.
    pub fn set_any<S: Into<String>>(
        mut self,
        knob: Knob,
        values: impl IntoIterator<Item = S>,
    ) -> Self {
        self.parts.push(Part::Set(
            knob,
            values.into_iter().map(Into::into).collect(),
        ));
        self
    }

    /// The knob by name: `--project`, `project=`.
    pub fn name(mut self, knob: Knob) -> Self {
        self.parts.push(Part::Name(knob));
        self
    }

    /// A switch turned on: `--spot`, `spot=True`.
    pub fn on(mut self, knob: Knob) -> Self {
        self.parts.push(Part::On(knob));
        self
    }

    /// This advice followed by `more`.
    pub fn chain(mut self, more: Advice) -> Self {
        self.parts.extend(more.parts);
        self
    }

    /// The knobs the advice names, in order.
    pub fn knobs(&self) -> impl Iterator<Item = Knob> + '_ {
        self.parts.iter().filter_map(|p| match p {
            Part::Text(_) => None,
            Part::Set(k, _) | Part::Name(k) | Part::On(k) => Some(*k),
        })
    }

    /// The advice as `front` shows it.
    pub fn render(&self, front: FrontEnd) -> String {
        let mut out = String::new();
        for part in &self.parts {
            match (part, front) {
                (Part::Text(t), _) => out.push_str(t),
                (Part::Set(knob, values), FrontEnd::CommandLine) => {
                    out.push_str(knob.flag());
                    out.push(' ');
                    out.push_str(&values.join(" or "));
                }
                (Part::Set(knob, values), FrontEnd::Python) => {
                    out.push_str(knob.parameter());
                    out.push('=');
                    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
                    out.push_str(&quoted.join(" or "));
                }
                (Part::Name(knob), FrontEnd::CommandLine) => out.push_str(knob.flag()),
                (Part::Name(knob), FrontEnd::Python) => {
                    out.push_str(knob.parameter());
                    out.push('=');
                }
                (Part::On(knob), FrontEnd::CommandLine) => out.push_str(knob.flag()),
                (Part::On(knob), FrontEnd::Python) => {
                    out.push_str(knob.parameter());
                    out.push_str("=True");
                }
            }
        }
        out
    }
}

impl fmt::Display for Advice {
    /// The command line's rendering.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(FrontEnd::CommandLine))
    }
}

/// How a message and its advice read together: `message; advice`.
pub fn with_advice(message: &str, advice: Option<&Advice>, front: FrontEnd) -> String {
    match advice {
        Some(a) => format!("{message}; {}", a.render(front)),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_front_end_names_the_knobs_its_own_way() {
        let advice = Advice::new()
            .text("drop ")
            .on(Knob::Spot)
            .text(", or set ")
            .name(Knob::Project)
            .text(" and ")
            .set_any(Knob::Backend, ["gke", "pathways"]);
        assert_eq!(
            advice.render(FrontEnd::CommandLine),
            "drop --spot, or set --project and --backend gke or pathways"
        );
        assert_eq!(
            advice.render(FrontEnd::Python),
            "drop spot=True, or set project= and backend=\"gke\" or \"pathways\""
        );
        assert_eq!(advice.to_string(), advice.render(FrontEnd::CommandLine));
        assert_eq!(
            advice.knobs().collect::<Vec<_>>(),
            [Knob::Spot, Knob::Project, Knob::Backend]
        );
    }

    #[test]
    fn knobs_read_from_the_environment_name_their_variable() {
        assert_eq!(Knob::Project.env_var(), Some("KINETIC_PROJECT"));
        assert_eq!(Knob::Cluster.env_var(), Some("KINETIC_CLUSTER"));
        assert_eq!(Knob::Accelerator.env_var(), None);
    }
}
