//! Property tests of the accelerator parser: the canonical spelling of every
//! registry entry parses back to the same spec, and no input panics.

use kinetic_core::accelerators::{AcceleratorSpec, GPU_TYPES, TPU_TYPES};
use proptest::prelude::*;

/// Every accelerator the registry can express, without spot.
fn every_spec() -> Vec<AcceleratorSpec> {
    let mut all = vec![AcceleratorSpec::CPU];
    for g in GPU_TYPES {
        for shape in g.counts {
            all.push(AcceleratorSpec::gpu(g.name, shape.count).expect("registry GPU"));
        }
    }
    for t in TPU_TYPES {
        for slice in t.slices {
            all.push(AcceleratorSpec::tpu(t.name, slice.chips).expect("registry TPU"));
        }
    }
    all
}

#[test]
fn every_registry_entry_round_trips_with_and_without_spot() {
    let all = every_spec();
    assert_eq!(all.len(), 1 + 31 + 33, "registry size changed");
    for spec in all {
        for spot in [false, true] {
            let spec = spec.clone().with_spot(spot);
            let text = spec.to_string();
            assert_eq!(AcceleratorSpec::parse(&text).as_ref(), Ok(&spec), "{text}");
        }
    }
}

/// Spellings a user might type for a spec, all meaning the same thing.
fn spellings(spec: &AcceleratorSpec) -> Vec<String> {
    let mut v = vec![spec.to_string()];
    let spot = if spec.spot() { ":spot" } else { "" };
    match spec {
        AcceleratorSpec::Gpu(g) => {
            v.push(format!("gpu-{}x{}{spot}", g.name(), g.count()));
            v.push(format!("{}x{}{spot}", g.gke_label(), g.count()));
            v.push(format!("gpu:{}x{}{spot}", g.gke_label(), g.count()));
        }
        AcceleratorSpec::Tpu(t) => {
            v.push(format!("tpu-{}-{}{spot}", t.name(), t.chips()));
            v.push(format!("{}-{}{spot}", t.name(), t.topology()));
            v.push(format!("tpu:{}-{}{spot}", t.name(), t.topology()));
            if let Some(alias) = t.tpu_type().alias {
                v.push(format!("{alias}-{}{spot}", t.chips()));
            }
        }
        _ => v.push(format!("cpu:4{spot}")),
    }
    v
}

/// A string built from the pieces accelerator spellings are made of, so the
/// parser's deeper branches get exercised, not just the "unknown" one.
fn near_spelling() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("gpu".to_owned()),
        Just("tpu".to_owned()),
        Just("cpu".to_owned()),
        Just(":".to_owned()),
        Just("-".to_owned()),
        Just("x".to_owned()),
        Just(":spot".to_owned()),
        Just(" ".to_owned()),
        Just("nvidia-".to_owned()),
        prop::sample::select(vec![
            "l4",
            "a100",
            "a100-80gb",
            "v3",
            "v4",
            "v5e",
            "v5p",
            "v6e",
            "v5litepod"
        ])
        .prop_map(str::to_owned),
        "[0-9]{1,25}",
        "[A-Za-z_]{1,3}",
    ];
    prop::collection::vec(piece, 0..7).prop_map(|v| v.concat())
}

proptest! {
    #[test]
    fn display_parse_round_trip(
        spec in prop::sample::select(every_spec()),
        spot in any::<bool>(),
    ) {
        let spec = spec.with_spot(spot);
        for s in spellings(&spec) {
            prop_assert_eq!(AcceleratorSpec::parse(&s), Ok(spec.clone()), "{}", s);
            let shouted = format!("  {}\t", s.to_uppercase());
            prop_assert_eq!(AcceleratorSpec::parse(&shouted), Ok(spec.clone()), "{}", shouted);
        }
    }

    #[test]
    fn arbitrary_strings_never_panic(s in any::<String>()) {
        if let Err(e) = AcceleratorSpec::parse(&s) {
            prop_assert_eq!(e.input(), s.as_str());
            prop_assert!(!e.to_string().is_empty());
        }
    }

    #[test]
    fn near_spellings_never_panic_and_resolve_consistently(s in near_spelling()) {
        match AcceleratorSpec::parse(&s) {
            Ok(spec) => {
                // Whatever was accepted has a canonical form meaning the same.
                let again = AcceleratorSpec::parse(&spec.to_string());
                prop_assert_eq!(again, Ok(spec.clone()));
                prop_assert_eq!(spec.num_hosts() > 1, spec.is_multi_host());
            }
            Err(e) => prop_assert_eq!(e.input(), s.as_str()),
        }
    }
}
