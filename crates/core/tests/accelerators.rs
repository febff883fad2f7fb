//! Accelerator parsing against Kinetic's pinned table, scheduling fields
//! and registry integrity.

use kinetic_core::accelerators::{
    AcceleratorError, AcceleratorSpec, Category, GPU_PREFERENCE, GPU_TYPES, TPU_PREFERENCE,
    TPU_TYPES, gpu_type, gpus_by_preference, tpu_type, tpus_by_preference,
};

fn parse(s: &str) -> AcceleratorSpec {
    AcceleratorSpec::parse(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
}

fn parse_err(s: &str) -> AcceleratorError {
    match AcceleratorSpec::parse(s) {
        Ok(spec) => panic!("{s:?} should fail, got {spec}"),
        Err(e) => e,
    }
}

#[track_caller]
fn assert_gpu(input: &str, name: &str, count: u32) {
    let spec = parse(input);
    assert_eq!(spec.category(), Category::Gpu, "{input}");
    assert_eq!((spec.name(), spec.count()), (name, Some(count)), "{input}");
    assert_eq!(spec.num_hosts(), 1, "{input}: GPU jobs are single-node");
}

#[track_caller]
fn assert_tpu(input: &str, name: &str, chips: u32, topology: &str) {
    let spec = parse(input);
    assert_eq!(spec.category(), Category::Tpu, "{input}");
    assert_eq!(
        (spec.name(), spec.chips(), spec.topology()),
        (name, Some(chips), Some(topology)),
        "{input}"
    );
}

#[track_caller]
fn assert_err_contains(input: &str, needle: &str) {
    let msg = parse_err(input).to_string();
    assert!(msg.contains(needle), "{input:?}: {msg:?} lacks {needle:?}");
}

#[test]
fn cpu_spellings() {
    for s in ["cpu", "cpu:8", "CPU", " cpu "] {
        let spec = parse(s);
        assert_eq!(spec, AcceleratorSpec::CPU, "{s}");
        assert_eq!(spec.category(), Category::Cpu);
        assert!(!spec.spot(), "{s}");
    }
    // Spot is asked for on CPU as on any accelerator, and scheduled as such.
    for spot in [
        parse("cpu:spot"),
        AcceleratorSpec::parse_with_spot("cpu", true).unwrap(),
    ] {
        assert_eq!(spot, AcceleratorSpec::Cpu { spot: true });
        assert!(spot.spot());
        assert_eq!(spot.to_string(), "cpu:spot");
        assert_eq!(
            spot.node_selector()
                .get("cloud.google.com/gke-spot")
                .map(String::as_str),
            Some("true")
        );
        assert!(
            spot.tolerations()
                .iter()
                .any(|t| t.key == "cloud.google.com/gke-spot" && t.value.as_deref() == Some("true")),
            "{:?}",
            spot.tolerations()
        );
        assert!(spot.resources().is_empty());
    }
    assert_err_contains("cpu:", "Unknown accelerator: 'cpu:'");
    assert_err_contains("cpu:x", "Unknown accelerator");
}

#[test]
fn family_defaults() {
    assert_gpu("gpu", "l4", 1);
    assert_tpu("tpu", "v5litepod", 4, "2x2");
}

#[test]
fn gpu_names_aliases_and_prefixes() {
    for s in ["gpu:l4", "gpu-l4", "l4", "gpu:nvidia-l4"] {
        assert_gpu(s, "l4", 1);
        let spec = parse(s);
        assert_eq!(spec.gke_accelerator(), Some("nvidia-l4"));
        assert_eq!(spec.machine_type(), Some("g2-standard-4"));
    }
    for s in ["gpu:a100x4", "gpu-a100x4", "a100x4", "  GPU:A100X4  "] {
        assert_gpu(s, "a100", 4);
    }
    assert_gpu("gpu:a100-80gbx4", "a100-80gb", 4);
    assert_gpu("gpu-a100-80gb", "a100-80gb", 1);
    assert_gpu("gpu:l4x2", "l4", 2);
    assert_gpu("gpu:nvidia-tesla-t4", "t4", 1);
    assert_gpu("gpu:nvidia-tesla-v100x4", "v100", 4);
    assert_eq!(parse("gpu:a100x4").machine_type(), Some("a2-highgpu-4g"));
}

#[test]
fn gpu_count_only_uses_preference_order() {
    assert_gpu("gpu:4", "h100", 4);
    assert_gpu("gpu-4", "h100", 4);
    assert_gpu("gpu:16", "a100-80gb", 16);
    assert_gpu("gpu:1", "h100", 1);
    // Bare digits: GPU is tried first.
    assert_gpu("8", "h100", 8);
}

#[test]
fn gpu_errors() {
    let e = parse_err("gpu:32");
    assert_eq!(
        e,
        AcceleratorError::NoGpuForCount {
            input: "gpu:32".into(),
            count: "32".into(),
            supported: vec![1, 2, 4, 8, 16],
        }
    );
    assert!(
        e.to_string()
            .contains("No GPU supports count 32. Supported counts: [1, 2, 4, 8, 16]")
    );

    let e = parse_err("gpu:l4x16");
    assert!(matches!(
        &e,
        AcceleratorError::GpuCountNotSupported { name: "l4", count, supported, .. }
            if count == "16" && supported == &[1, 2, 4, 8]
    ));
    assert!(
        e.to_string()
            .contains("GPU count 16 not supported for 'l4'. Supported: 1, 2, 4, 8.")
    );

    // Kinetic's docstring spelling `gpu:l4-2` is not actually accepted.
    let e = parse_err("gpu:l4-2");
    assert_eq!(
        e,
        AcceleratorError::UnknownGpu {
            input: "gpu:l4-2".into()
        }
    );
    assert!(
        e.to_string()
            .contains("Unknown GPU accelerator: 'gpu:l4-2'")
    );
    assert!(
        e.to_string()
            .contains("l4, t4, v100, a100, a100-80gb, h100, p4, p100")
    );
}

#[test]
fn tpu_names_and_chips() {
    assert_tpu("tpu:v5litepod", "v5litepod", 4, "2x2");
    assert_tpu("tpu-v5litepod", "v5litepod", 4, "2x2");
    for s in ["tpu:v3-4", "tpu-v3-4", "v3-4"] {
        assert_tpu(s, "v3", 4, "2x2");
        let spec = parse(s);
        assert_eq!(spec.gke_accelerator(), Some("tpu-v3-device"));
        assert_eq!(spec.machine_type(), Some("ct3-hightpu-4t"));
        assert_eq!(spec.num_hosts(), 1);
        assert!(!spec.is_multi_host());
    }
    assert_tpu("tpu:v3-32", "v3", 32, "4x8");
    assert_tpu("tpu:v5litepod-1", "v5litepod", 1, "1x1");
    assert_tpu("tpu:v5litepod-1x1", "v5litepod", 1, "1x1");
    assert_tpu("tpu:v5litepod-2x2", "v5litepod", 4, "2x2");
    assert_tpu("tpu-v5litepod-2x2", "v5litepod", 4, "2x2");
    assert_tpu("tpu-v5litepod-2x4", "v5litepod", 8, "2x4");
    for s in ["tpu:v5p", "tpu:v5p-2x2x2"] {
        assert_tpu(s, "v5p", 8, "2x2x2");
        assert_eq!(parse(s).num_hosts(), 2);
    }
    assert_tpu("tpu:4096", "v4", 4096, "16x16x16");
    assert_tpu("tpu:v5e-8", "v5litepod", 8, "2x4");
    assert_tpu("tpu-v5e-8", "v5litepod", 8, "2x4");
    assert_tpu("tpu-v5e-1", "v5litepod", 1, "1x1");
    assert_tpu("v5e", "v5litepod", 4, "2x2");
}

#[test]
fn tpu_chip_count_only_uses_preference_order() {
    for s in ["tpu:8", "tpu-8"] {
        assert_tpu(s, "v6e", 8, "2x4");
        assert!(parse(s).is_multi_host(), "v6e-8 spans 2 hosts");
    }
    // No GPU has 32 and the digits are not prefixed: the TPU reading wins.
    assert_tpu("32", "v5p", 32, "2x4x4");
}

#[test]
fn tpu_errors() {
    // The `run` docstring example: v3 has no 8-chip slice.
    let e = parse_err("tpu:v3-8");
    assert_eq!(
        e,
        AcceleratorError::ChipCountNotSupported {
            input: "tpu:v3-8".into(),
            name: "v3",
            chips: "8".into(),
            supported: vec![4, 16, 32, 64, 128, 256, 512, 1024, 2048],
        }
    );
    assert!(e.to_string().contains(
        "Chip count 8 not supported for 'v3'. Supported: 4, 16, 32, 64, 128, 256, 512, 1024, 2048."
    ));

    let e = parse_err("tpu:v5litepod-3x3");
    assert!(
        matches!(&e, AcceleratorError::TopologyNotSupported { name: "v5litepod", topology, .. } if topology == "3x3")
    );
    assert!(e.to_string().contains(
        "Topology '3x3' not supported for 'v5litepod'. Supported: 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16."
    ));

    let e = parse_err("tpu:8192");
    assert!(matches!(&e, AcceleratorError::NoTpuForChips { chips, .. } if chips == "8192"));
    assert!(
        e.to_string()
            .contains("No TPU supports 8192 chips. Supported chip counts: [1, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]")
    );
}

#[test]
fn unknown_spellings() {
    for s in ["", "unknown", "   ", "gpux", "tpu:v9", "v3-", "3", "0"] {
        let e = parse_err(s);
        assert_eq!(e, AcceleratorError::Unknown { input: s.into() }, "{s:?}");
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("Unknown accelerator: '{s}'")),
            "{msg}"
        );
        assert!(
            msg.contains("GPUs: l4, t4, v100, a100, a100-80gb, h100, p4, p100"),
            "{msg}"
        );
        assert!(
            msg.contains("TPUs: v3, v4, v5litepod (v5e), v5p, v6e"),
            "{msg}"
        );
    }
}

#[test]
fn errors_keep_the_original_input() {
    let e = parse_err("  TPU:V3-8  ");
    assert_eq!(e.input(), "  TPU:V3-8  ");
    assert!(e.to_string().contains("'  TPU:V3-8  '"));
}

#[test]
fn leading_zeros_and_huge_counts() {
    assert_tpu("tpu:v3-04", "v3", 4, "2x2");
    assert_gpu("gpu:a100x04", "a100", 4);
    let e = parse_err("gpu:l4x99999999999999999999");
    assert!(
        e.to_string()
            .contains("GPU count 99999999999999999999 not supported for 'l4'")
    );
    let e = parse_err("tpu:99999999999999999999");
    assert!(
        e.to_string()
            .contains("No TPU supports 99999999999999999999 chips")
    );
    let e = parse_err("gpu:007");
    assert!(e.to_string().contains("No GPU supports count 7."));
}

#[test]
fn spot_suffix_and_flag() {
    for s in ["l4:spot", "gpu-l4:spot", "L4:SPOT"] {
        let spec = parse(s);
        assert_gpu(s, "l4", 1);
        assert!(spec.spot(), "{s}");
    }
    for s in ["v6e-8:spot", "tpu-v6e-8:spot"] {
        let spec = parse(s);
        assert_tpu(s, "v6e", 8, "2x4");
        assert!(spec.spot(), "{s}");
    }
    assert!(!parse("l4").spot());
    assert!(AcceleratorSpec::parse_with_spot("l4", true).is_ok_and(|s| s.spot()));
    assert!(AcceleratorSpec::parse_with_spot("l4:spot", false).is_ok_and(|s| s.spot()));
    assert!(AcceleratorSpec::parse_with_spot("cpu", true).is_ok_and(|s| s.spot()));
    // The suffix is taken once, and only at the very end.
    assert_err_contains("l4:spot:spot", "Unknown accelerator");
    // `:spot` on a bare family name keeps the family default.
    assert!(parse("gpu:spot").spot());
    assert_gpu("gpu:spot", "l4", 1);
    assert_tpu("tpu:spot", "v5litepod", 4, "2x2");
}

#[test]
fn scheduling_cpu() {
    let spec = AcceleratorSpec::CPU;
    assert!(spec.node_selector().is_empty());
    assert!(spec.resources().is_empty());
    assert!(spec.tolerations().is_empty());
    assert_eq!(spec.jax_platform(), "cpu");
    assert_eq!(spec.machine_type(), None);
    assert_eq!(spec.pool_name("abcd"), None);
}

#[test]
fn scheduling_gpu() {
    let spec = parse("gpu:a100x4");
    let v = serde_json::to_value(spec.details()).unwrap_or_default();
    assert_eq!(
        v["node_selector"],
        serde_json::json!({"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"})
    );
    assert_eq!(v["resources"], serde_json::json!({"nvidia.com/gpu": "4"}));
    assert_eq!(
        v["tolerations"],
        serde_json::json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    );
    assert_eq!(v["jax_platform"], "cuda");
    assert_eq!(spec.pool_name("1a2b").as_deref(), Some("gpu-a100-1a2b"));
}

#[test]
fn scheduling_tpu_is_per_host() {
    let spec = parse("tpu:v3-16");
    assert_eq!(spec.resources()["google.com/tpu"], "4");
    assert_eq!(spec.num_hosts(), 4);
    assert!(spec.is_multi_host());
    let v = serde_json::to_value(spec.details()).unwrap_or_default();
    assert_eq!(
        v["node_selector"],
        serde_json::json!({
            "cloud.google.com/gke-tpu-accelerator": "tpu-v3-slice",
            "cloud.google.com/gke-tpu-topology": "4x4",
        })
    );
    assert_eq!(
        v["tolerations"],
        serde_json::json!([{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}])
    );
    assert_eq!(v["jax_platform"], "tpu");
    assert_eq!(parse("v5litepod-8").resources()["google.com/tpu"], "8");
    assert_eq!(spec.pool_name("ffff").as_deref(), Some("tpu-v3-ffff"));
}

#[test]
fn scheduling_spot_keeps_toleration_value() {
    let spec = parse("tpu-v6e-8:spot");
    assert_eq!(spec.node_selector()["cloud.google.com/gke-spot"], "true");
    let v = serde_json::to_value(spec.tolerations()).unwrap_or_default();
    assert_eq!(
        v,
        serde_json::json!([
            {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        ])
    );
    assert_eq!(spec.resources()["google.com/tpu"], "4");
    assert!(
        !parse("l4")
            .node_selector()
            .contains_key("cloud.google.com/gke-spot")
    );
}

#[test]
fn details_have_one_shape_for_every_category() {
    let keys = |s: &str| {
        let v = serde_json::to_value(parse(s).details()).unwrap_or_default();
        v.as_object()
            .map(|o| o.keys().cloned().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    assert_eq!(keys("cpu"), keys("l4"));
    assert_eq!(keys("l4"), keys("v6e-8"));
    assert!(keys("cpu").contains(&"multi_host".to_owned()));
}

#[test]
fn canonical_spelling() {
    let cases = [
        ("cpu:8", "cpu"),
        ("gpu", "gpu:l4"),
        ("  GPU:A100X4  ", "gpu:a100x4"),
        ("gpu:nvidia-a100-80gb", "gpu:a100-80gb"),
        ("tpu", "tpu:v5litepod-4"),
        ("v5e-2x4", "tpu:v5litepod-8"),
        ("tpu-v6e-8:spot", "tpu:v6e-8:spot"),
        ("l4x2:spot", "gpu:l4x2:spot"),
    ];
    for (input, canonical) in cases {
        let spec = parse(input);
        assert_eq!(spec.to_string(), canonical, "{input}");
        assert_eq!(parse(canonical), spec, "{canonical}");
    }
}

#[test]
fn serde_uses_the_canonical_string() {
    let spec = parse("tpu-v5e-8:spot");
    let json = serde_json::to_string(&spec).unwrap_or_default();
    assert_eq!(json, "\"tpu:v5litepod-8:spot\"");
    let back: AcceleratorSpec =
        serde_json::from_str("\"v5litepod-8:spot\"").unwrap_or(AcceleratorSpec::CPU);
    assert_eq!(back, spec);
    let bad = serde_json::from_str::<AcceleratorSpec>("\"tpu:v3-8\"");
    assert!(bad.is_err_and(|e| e.to_string().contains("Chip count 8")));
}

#[test]
fn typed_constructors_check_the_registry() {
    assert_eq!(
        AcceleratorSpec::gpu("nvidia-l4", 2).ok(),
        Some(parse("l4x2"))
    );
    assert_eq!(
        AcceleratorSpec::tpu("v5e", 8).ok(),
        Some(parse("v5litepod-8"))
    );
    assert!(matches!(
        AcceleratorSpec::gpu("rtx", 1),
        Err(AcceleratorError::UnknownGpu { .. })
    ));
    assert!(matches!(
        AcceleratorSpec::tpu("v9", 4),
        Err(AcceleratorError::UnknownTpu { .. })
    ));
    assert!(matches!(
        AcceleratorSpec::tpu("v6e", 4),
        Err(AcceleratorError::ChipCountNotSupported { name: "v6e", .. })
    ));
}

#[test]
fn category_parses_and_prints() {
    for (s, c) in [
        ("cpu", Category::Cpu),
        ("GPU", Category::Gpu),
        (" tpu", Category::Tpu),
    ] {
        assert_eq!(s.parse::<Category>().ok(), Some(c));
    }
    assert!(
        "npu"
            .parse::<Category>()
            .is_err_and(|e| e.to_string().contains("cpu, gpu, tpu"))
    );
    assert_eq!(Category::Tpu.to_string(), "tpu");
}

// ---- registry integrity -------------------------------------------------

#[test]
fn preference_orders_cover_the_registry_exactly_once() {
    let mut gpu_names: Vec<_> = GPU_TYPES.iter().map(|g| g.name).collect();
    let mut preferred: Vec<_> = GPU_PREFERENCE.to_vec();
    gpu_names.sort_unstable();
    preferred.sort_unstable();
    assert_eq!(gpu_names, preferred);

    let mut tpu_names: Vec<_> = TPU_TYPES.iter().map(|t| t.name).collect();
    let mut preferred: Vec<_> = TPU_PREFERENCE.to_vec();
    tpu_names.sort_unstable();
    preferred.sort_unstable();
    assert_eq!(tpu_names, preferred);

    let order: Vec<_> = gpus_by_preference().map(|g| g.name).collect();
    assert_eq!(
        order,
        [
            "h100",
            "a100-80gb",
            "a100",
            "l4",
            "v100",
            "t4",
            "p100",
            "p4"
        ]
    );
    let order: Vec<_> = tpus_by_preference().map(|t| t.name).collect();
    assert_eq!(order, ["v6e", "v5p", "v5litepod", "v4", "v3"]);
}

#[test]
fn gpu_entries_are_consistent() {
    let expected_counts: [(&str, &[u32]); 8] = [
        ("l4", &[1, 2, 4, 8]),
        ("t4", &[1, 2, 4]),
        ("v100", &[1, 2, 4, 8]),
        ("a100", &[1, 2, 4, 8, 16]),
        ("a100-80gb", &[1, 2, 4, 8, 16]),
        ("h100", &[1, 2, 4, 8]),
        ("p4", &[1, 2, 4]),
        ("p100", &[1, 2, 4]),
    ];
    for (name, counts) in expected_counts {
        let g = gpu_type(name).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(g.supported_counts(), counts, "{name}");
        assert!(
            g.counts.windows(2).all(|w| w[0].count < w[1].count),
            "{name} ascending"
        );
        for shape in g.counts {
            assert!(!shape.machine_type.is_empty());
            assert_eq!(g.machine_type(shape.count), Some(shape.machine_type));
        }
        // The label is an alias, and no name can be misread as "NAMExN".
        assert_eq!(gpu_type(g.gke_label).map(|x| x.name), Some(name));
        assert!(!name.contains('x'), "{name} would confuse the NAMExN form");
        assert!(g.shape(1).is_some(), "{name}: a bare name means one GPU");
    }
    let a100_80 = gpu_type("a100-80gb").map(|g| g.machine_type(16));
    assert_eq!(a100_80, Some(Some("a2-ultragpu-16g")));
    assert_eq!(
        gpu_type("h100").map(|g| g.gke_label),
        Some("nvidia-h100-80gb")
    );
}

#[test]
fn tpu_entries_are_consistent() {
    for t in TPU_TYPES {
        assert!(t.slice(t.default_chips).is_some(), "{} default", t.name);
        assert!(
            t.slices.windows(2).all(|w| w[0].chips < w[1].chips),
            "{} ascending",
            t.name
        );
        for s in t.slices {
            // chips = product of the topology's dimensions
            let product: u32 = s
                .topology
                .split('x')
                .map(|d| d.parse::<u32>().unwrap_or(0))
                .product();
            assert_eq!(product, s.chips, "{} {}", t.name, s.topology);
            // hosts × chips per host = chips; the machine type's "-Nt" suffix
            // is the chips per host.
            assert_eq!(
                s.num_hosts * s.chips_per_host(),
                s.chips,
                "{} {}",
                t.name,
                s.chips
            );
            let per_vm: u32 = s
                .machine_type
                .rsplit('-')
                .next()
                .and_then(|x| x.strip_suffix('t'))
                .and_then(|x| x.parse().ok())
                .unwrap_or(0);
            assert_eq!(per_vm, s.chips_per_host(), "{} {}", t.name, s.machine_type);
            assert_eq!(
                t.slice_with_topology(s.topology).map(|x| x.chips),
                Some(s.chips)
            );
        }
        if let Some(alias) = t.alias {
            assert_eq!(tpu_type(alias).map(|x| x.name), Some(t.name));
        }
    }
    let multi = |s: &str| parse(s).is_multi_host();
    assert!(
        multi("v6e-8")
            && multi("v5p-8")
            && multi("v5litepod-16")
            && multi("v4-8")
            && multi("v3-16")
    );
    assert!(!multi("v5litepod-8") && !multi("v4-4") && !multi("v3-4"));
}

#[test]
fn registry_json_shape() {
    let v5e = tpu_type("v5e").map(serde_json::to_value);
    let Some(Ok(v)) = v5e else {
        panic!("v5e must serialise")
    };
    assert_eq!(v["name"], "v5litepod");
    assert_eq!(v["alias"], "v5e");
    assert_eq!(
        v["slices"][3],
        serde_json::json!({"chips": 16, "topology": "4x4", "machine_type": "ct5lp-hightpu-4t",
            "num_hosts": 4, "chips_per_host": 4, "multi_host": true})
    );
    let l4 = gpu_type("l4").map(serde_json::to_value);
    let Some(Ok(v)) = l4 else {
        panic!("l4 must serialise")
    };
    assert_eq!(
        v["counts"][0],
        serde_json::json!({"count": 1, "machine_type": "g2-standard-4"})
    );
}
