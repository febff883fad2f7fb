//! Kinetic's accelerator parser, step for step.
//!
//! The order of attempts matters and is Kinetic's: `cpu`, the bare family
//! names, then a GPU reading (so bare `8` is eight H100s), then a TPU reading
//! (so bare `32`, which no GPU offers, is a v5p slice).

use std::sync::LazyLock;

use regex::Regex;

use super::registry::{
    self, DEFAULT_GPU, DEFAULT_TPU, gpu_type, gpus_by_preference, tpu_type, tpus_by_preference,
};
use super::{AcceleratorError, AcceleratorSpec, GpuSpec, TpuSpec};

/// `a100x4`: a GPU name (no `x` in it) and a count.
static MULTI_GPU: LazyLock<Regex> = LazyLock::new(|| compile(r"^([^x]+)x([0-9]+)$"));
/// `v5litepod-2x2`, `v4-2x2x4`: a TPU name and a topology.
static TPU_TOPOLOGY: LazyLock<Regex> =
    LazyLock::new(|| compile(r"^([a-z0-9_]+)-([0-9]+x[0-9]+(?:x[0-9]+)?)$"));
/// `v3-32`: a TPU name and a chip count.
static TPU_CHIPS: LazyLock<Regex> = LazyLock::new(|| compile(r"^([a-z0-9_]+)-([0-9]+)$"));

fn compile(pattern: &str) -> Regex {
    // The patterns are constants; a failure here is a bug caught by every test.
    Regex::new(pattern).unwrap_or_else(|e| panic!("invalid built-in pattern {pattern}: {e}"))
}

/// A count written in ASCII digits: its value if it fits, and its text
/// without leading zeros (what error messages show, as Python's `int()` would).
struct Count {
    value: Option<u32>,
    text: String,
}

impl Count {
    fn new(digits: &str) -> Self {
        let trimmed = digits.trim_start_matches('0');
        let text = if trimmed.is_empty() { "0" } else { trimmed }.to_owned();
        Self {
            value: text.parse().ok(),
            text,
        }
    }
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Parse `input` into an [`AcceleratorSpec`]; see [`AcceleratorSpec::parse`].
pub(super) fn parse(input: &str) -> Result<AcceleratorSpec, AcceleratorError> {
    // 1. Trim, lowercase, take off `:spot`.
    let mut s = input.trim().to_lowercase();
    let mut spot = false;
    if let Some(rest) = s.strip_suffix(":spot") {
        s = rest.to_owned();
        spot = true;
    }
    // 2. `gpu-X` / `tpu-X` are `gpu:X` / `tpu:X`.
    if let Some(rest) = s.strip_prefix("gpu-") {
        s = format!("gpu:{rest}");
    } else if let Some(rest) = s.strip_prefix("tpu-") {
        s = format!("tpu:{rest}");
    }
    parse_normalised(&s, input).map(|spec| spec.with_spot(spot))
}

fn parse_normalised(s: &str, input: &str) -> Result<AcceleratorSpec, AcceleratorError> {
    // 3. CPU.
    if s == "cpu" || s.strip_prefix("cpu:").is_some_and(is_digits) {
        return Ok(AcceleratorSpec::CPU);
    }
    // 4. Family defaults.
    if s == "gpu" {
        return GpuSpec::new(DEFAULT_GPU, 1).map(AcceleratorSpec::Gpu);
    }
    if s == "tpu" {
        return TpuSpec::default_for(DEFAULT_TPU).map(AcceleratorSpec::Tpu);
    }
    if let Some(spec) = parse_gpu(s, input)? {
        return Ok(AcceleratorSpec::Gpu(spec));
    }
    if let Some(spec) = parse_tpu(s, input)? {
        return Ok(AcceleratorSpec::Tpu(spec));
    }
    // 7. Nothing matched.
    Err(AcceleratorError::Unknown {
        input: input.to_owned(),
    })
}

/// 5. The GPU reading: `Ok(None)` lets the TPU reading try.
fn parse_gpu(s: &str, input: &str) -> Result<Option<GpuSpec>, AcceleratorError> {
    let explicit = s.starts_with("gpu:");
    let g = s.strip_prefix("gpu:").unwrap_or(s);

    if is_digits(g) {
        let count = Count::new(g);
        if let Some(n) = count.value
            && let Some(t) = gpus_by_preference().find(|t| t.shape(n).is_some())
        {
            return GpuSpec::build(t, n, input).map(Some);
        }
        if explicit {
            return Err(AcceleratorError::NoGpuForCount {
                input: input.to_owned(),
                count: count.text,
                supported: registry::all_gpu_counts(),
            });
        }
    }

    if let Some(t) = gpu_type(g) {
        return GpuSpec::build(t, 1, input).map(Some);
    }

    if let Some(caps) = MULTI_GPU.captures(g)
        && let Some(t) = gpu_type(&caps[1])
    {
        let count = Count::new(&caps[2]);
        return match count.value {
            Some(n) => GpuSpec::build(t, n, input).map(Some),
            None => Err(GpuSpec::count_error(t, count.text, input)),
        };
    }

    if explicit {
        return Err(AcceleratorError::UnknownGpu {
            input: input.to_owned(),
        });
    }
    Ok(None)
}

/// 6. The TPU reading: `Ok(None)` means "unknown accelerator".
fn parse_tpu(s: &str, input: &str) -> Result<Option<TpuSpec>, AcceleratorError> {
    let explicit = s.starts_with("tpu:");
    let t = s.strip_prefix("tpu:").unwrap_or(s);

    if is_digits(t) {
        let chips = Count::new(t);
        if let Some(n) = chips.value
            && let Some(ty) = tpus_by_preference().find(|ty| ty.slice(n).is_some())
        {
            return TpuSpec::build(ty, n, input).map(Some);
        }
        if explicit {
            return Err(AcceleratorError::NoTpuForChips {
                input: input.to_owned(),
                chips: chips.text,
                supported: registry::all_tpu_chips(),
            });
        }
    }

    if let Some(ty) = tpu_type(t) {
        return TpuSpec::build(ty, ty.default_chips, input).map(Some);
    }

    if let Some(caps) = TPU_TOPOLOGY.captures(t)
        && let Some(ty) = tpu_type(&caps[1])
    {
        let topology = &caps[2];
        return match ty.slice_with_topology(topology) {
            Some(slice) => TpuSpec::build(ty, slice.chips, input).map(Some),
            None => Err(AcceleratorError::TopologyNotSupported {
                input: input.to_owned(),
                name: ty.name,
                topology: topology.to_owned(),
                supported: ty.supported_topologies(),
            }),
        };
    }

    if let Some(caps) = TPU_CHIPS.captures(t)
        && let Some(ty) = tpu_type(&caps[1])
    {
        let chips = Count::new(&caps[2]);
        return match chips.value {
            Some(n) => TpuSpec::build(ty, n, input).map(Some),
            None => Err(TpuSpec::chips_error(ty, chips.text, input)),
        };
    }

    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_drops_leading_zeros_and_survives_overflow() {
        let c = Count::new("0004");
        assert_eq!((c.value, c.text.as_str()), (Some(4), "4"));
        let c = Count::new("000");
        assert_eq!((c.value, c.text.as_str()), (Some(0), "0"));
        let c = Count::new("99999999999999999999999");
        assert_eq!(c.value, None);
        assert_eq!(c.text, "99999999999999999999999");
    }

    #[test]
    fn digits_are_ascii_only() {
        assert!(is_digits("0123"));
        assert!(!is_digits(""));
        assert!(!is_digits("１２"));
        assert!(!is_digits("1a"));
    }

    #[test]
    fn patterns_match_kinetic_shapes() {
        assert!(MULTI_GPU.is_match("a100x4"));
        assert!(!MULTI_GPU.is_match("x4"));
        assert!(TPU_TOPOLOGY.is_match("v4-2x2x4"));
        assert!(!TPU_TOPOLOGY.is_match("v4-2x2x4x1"));
        assert!(TPU_CHIPS.is_match("v3-32"));
        assert!(!TPU_CHIPS.is_match("v3-"));
    }
}
