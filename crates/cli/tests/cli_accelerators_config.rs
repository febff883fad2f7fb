//! The real `kinetic` binary: `accelerators`, `config` and `profile`, with
//! the profiles file and `HOME` in a temporary directory and no other
//! environment, checking output and exit codes.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Outcome {
    #[track_caller]
    fn ok(self) -> Self {
        assert_eq!(
            self.code, 0,
            "stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }

    #[track_caller]
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.stdout))
    }

    /// A usage error: exit 2, one `error:` line naming what was wrong, no panic.
    #[track_caller]
    fn usage_error(self, needle: &str) -> Self {
        assert_eq!(
            self.code, 2,
            "stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self.one_line_error(needle)
    }

    #[track_caller]
    fn one_line_error(self, needle: &str) -> Self {
        assert!(!self.stderr.contains("panicked"), "{}", self.stderr);
        let lines: Vec<_> = self
            .stderr
            .lines()
            .filter(|l| l.starts_with("error"))
            .collect();
        assert_eq!(lines.len(), 1, "{}", self.stderr);
        assert!(lines[0].contains(needle), "{:?} lacks {needle:?}", lines[0]);
        self
    }
}

/// A sandbox: its own HOME and profiles file, nothing else in the environment.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn profiles_file(&self) -> PathBuf {
        self.dir.path().join("cfg").join("profiles.json")
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn run(&self, args: &[&str]) -> Outcome {
        self.run_env(args, &[])
    }

    fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Outcome {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kinetic"));
        cmd.args(args)
            .env_clear()
            .env("HOME", self.home())
            .env("KINETIC_PROFILES_FILE", self.profiles_file());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("run kinetic");
        Outcome {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn write_profiles(&self, text: &str) {
        let path = self.profiles_file();
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    fn read_profiles(&self) -> String {
        std::fs::read_to_string(self.profiles_file()).expect("profiles file")
    }
}

// ---- accelerators -------------------------------------------------------

#[test]
fn accelerators_table_in_preference_order() {
    let sb = Sandbox::new();
    let out = sb.run(&["accelerators"]).ok();
    let first_col: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.split("  ").next())
        .collect();
    let pos = |name: &str| {
        first_col
            .iter()
            .position(|c| c.trim() == name)
            .unwrap_or_else(|| panic!("{name} missing from\n{}", out.stdout))
    };
    let gpus = [
        "h100",
        "a100-80gb",
        "a100",
        "l4",
        "v100",
        "t4",
        "p100",
        "p4",
    ];
    let tpus = ["v6e", "v5p", "v5litepod (v5e)", "v4", "v3"];
    for pair in gpus.windows(2).chain(tpus.windows(2)) {
        assert!(pos(pair[0]) < pos(pair[1]), "{pair:?}");
    }
    assert!(pos("GPUs") < pos("h100") && pos("p4") < pos("TPUs"));
    assert!(out.stdout.contains("a2-megagpu-16g"));
    let v5e = out
        .stdout
        .lines()
        .find(|l| l.starts_with("v5litepod (v5e)"))
        .unwrap_or_default();
    assert!(v5e.contains("1, 4, 8, 16, 32, 64, 128, 256"), "{v5e}");
    assert!(v5e.contains("1x1, 2x2, 2x4, 4x4"), "{v5e}");
    assert!(v5e.contains("1, 1, 1, 4, 8, 16, 32, 64"), "hosts: {v5e}");
    assert!(
        v5e.contains("gke, gke, gke, pathways, pathways"),
        "backends: {v5e}"
    );
    assert!(
        out.stdout.contains("multi-host TPU slices on pathways"),
        "{}",
        out.stdout
    );
    // `list` is the same as no subcommand.
    assert_eq!(sb.run(&["accelerators", "list"]).ok().stdout, out.stdout);
}

#[test]
fn accelerators_json_registry() {
    let sb = Sandbox::new();
    let v = sb.run(&["--json", "accelerators"]).ok().json();
    let names = |key: &str| -> Vec<String> {
        v[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(
        names("gpus"),
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
    assert_eq!(names("tpus"), ["v6e", "v5p", "v5litepod", "v4", "v3"]);
    assert_eq!(v["tpus"][2]["alias"], "v5e");
    assert_eq!(v["gpus"][0]["gke_label"], "nvidia-h100-80gb");
    assert_eq!(
        v["gpus"][0]["counts"][3],
        serde_json::json!({"count": 8, "machine_type": "a3-highgpu-8g"})
    );
    assert_eq!(v["tpus"][0]["slices"][0]["num_hosts"], 2);
    assert_eq!(v["backends"]["tpu_multi_host"], "pathways");
    assert_eq!(v["backends"]["gpu"], "gke");
}

#[test]
fn resolve_prints_aligned_text() {
    let sb = Sandbox::new();
    let out = sb.run(&["accelerators", "resolve", "  GPU:A100X4  "]).ok();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        lines.contains(&"spec             gpu:a100x4"),
        "{}",
        out.stdout
    );
    assert!(
        lines.contains(&"machine_type     a2-highgpu-4g"),
        "{}",
        out.stdout
    );
    assert!(
        lines.contains(&"resources        nvidia.com/gpu=4"),
        "{}",
        out.stdout
    );
    assert!(lines.contains(&"multi_host       false"), "{}", out.stdout);
    // Every value starts in the same column.
    let col = |l: &str| {
        l.find("  ")
            .map(|i| i + l[i..].len() - l[i..].trim_start().len())
    };
    let cols: Vec<_> = lines.iter().map(|l| col(l)).collect();
    assert!(cols.windows(2).all(|w| w[0] == w[1]), "{}", out.stdout);
}

#[test]
fn resolve_json_for_a_multi_host_spot_tpu() {
    let sb = Sandbox::new();
    let v = sb
        .run(&["--json", "accelerators", "resolve", "tpu-v6e-8", "--spot"])
        .ok()
        .json();
    assert_eq!(v["category"], "tpu");
    assert_eq!(v["name"], "v6e");
    assert_eq!(v["chips"], 8);
    assert_eq!(v["topology"], "2x4");
    assert_eq!(v["machine_type"], "ct6e-standard-4t");
    assert_eq!(v["num_hosts"], 2);
    assert_eq!(v["multi_host"], true);
    assert_eq!(v["spot"], true);
    assert_eq!(v["spec"], "tpu:v6e-8:spot");
    assert_eq!(v["backend"], "pathways");
    assert_eq!(v["resources"], serde_json::json!({"google.com/tpu": "4"}));
    assert_eq!(
        v["node_selector"],
        serde_json::json!({
            "cloud.google.com/gke-spot": "true",
            "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
            "cloud.google.com/gke-tpu-topology": "2x4",
        })
    );
    assert_eq!(
        v["tolerations"][1],
        serde_json::json!({"key": "cloud.google.com/gke-spot", "operator": "Equal",
            "value": "true", "effect": "NoSchedule"})
    );

    let cpu = sb
        .run(&["--json", "accelerators", "resolve", "cpu:8"])
        .ok()
        .json();
    assert_eq!(cpu["category"], "cpu");
    assert_eq!(cpu["node_selector"], serde_json::json!({}));
    assert_eq!(cpu["tolerations"], serde_json::json!([]));
    assert_eq!(cpu["multi_host"], false);
    assert_eq!(cpu["backend"], "local");
}

#[test]
fn resolve_bad_spellings_are_usage_errors() {
    let sb = Sandbox::new();
    sb.run(&["accelerators", "resolve", "tpu:v3-8"]).usage_error(
        "Invalid accelerator 'tpu:v3-8': Chip count 8 not supported for 'v3'. Supported: 4, 16, 32, 64",
    );
    sb.run(&["accelerators", "resolve", "gpu:l4x16"])
        .usage_error("GPU count 16 not supported for 'l4'. Supported: 1, 2, 4, 8.");
    sb.run(&["accelerators", "resolve", "tpu:v5litepod-3x3"])
        .usage_error("Topology '3x3' not supported for 'v5litepod'. Supported: 1x1, 2x2");
    sb.run(&["accelerators", "resolve", "gpu:32"])
        .usage_error("No GPU supports count 32. Supported counts: [1, 2, 4, 8, 16]");
    sb.run(&["accelerators", "resolve", "warp-drive"])
        .usage_error("Unknown accelerator: 'warp-drive'. GPUs: l4, t4, v100, a100");
    sb.run(&["accelerators", "resolve", "multi\nline"])
        .usage_error("Unknown accelerator");
    // clap's own usage errors are exit 2 too.
    let out = sb.run(&["accelerators", "resolve"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("<SPEC>"), "{}", out.stderr);
}

// ---- profile ------------------------------------------------------------

#[test]
fn profile_create_writes_kinetic_format() {
    let sb = Sandbox::new();
    let out = sb
        .run(&[
            "profile",
            "create",
            "dev",
            "--project",
            "my-proj",
            "--zone",
            "europe-west4-b",
        ])
        .ok();
    assert!(
        out.stdout.contains("Saved profile 'dev'."),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("Profile 'dev' is now active."),
        "{}",
        out.stdout
    );
    let out = sb
        .run_env(
            &["profile", "create", "tpu", "--cluster", "big"],
            &[("KINETIC_PROJECT", "env-proj"), ("KINETIC_NAMESPACE", "")],
        )
        .ok();
    assert!(
        out.stdout
            .contains("Run 'kinetic profile use tpu' to activate it.")
    );
    assert_eq!(
        sb.read_profiles(),
        r#"{
  "current": "dev",
  "profiles": {
    "dev": {
      "cluster": "kinetic-cluster",
      "namespace": "default",
      "project": "my-proj",
      "zone": "europe-west4-b"
    },
    "tpu": {
      "cluster": "big",
      "namespace": "default",
      "project": "env-proj",
      "zone": "us-central1-a"
    }
  }
}
"#
    );
}

#[test]
fn profile_create_refuses_bad_input() {
    let sb = Sandbox::new();
    sb.run(&["profile", "create", "dev"])
        .usage_error("missing --project");
    sb.run_env(&["profile", "create", "dev"], &[("KINETIC_PROJECT", "")])
        .usage_error("KINETIC_PROJECT");
    sb.run(&["profile", "create", "dev", "--project", ""])
        .usage_error("--project");
    for bad in ["-bad", "has space", "has/slash", &"a".repeat(65)] {
        sb.run(&["profile", "create", "--project", "p", "--", bad])
            .usage_error(&format!("Invalid profile name '{bad}'"));
    }
    assert!(!sb.profiles_file().exists(), "nothing written on bad input");

    sb.run(&["profile", "create", "dev", "--project", "p1"])
        .ok();
    sb.run(&["profile", "create", "dev", "--project", "p2"])
        .usage_error("Profile 'dev' already exists. Use --force");
    sb.run(&["profile", "create", "dev", "--project", "p2", "--force"])
        .ok();
    let v = sb.run(&["--json", "profile", "show", "dev"]).ok().json();
    assert_eq!(v["project"], "p2");
    assert_eq!(v["active"], true);
}

#[test]
fn profile_list_marks_the_effective_profile() {
    let sb = Sandbox::new();
    let out = sb.run(&["profile", "list"]).ok();
    assert!(out.stdout.contains("No profiles saved."), "{}", out.stdout);

    sb.run(&["profile", "create", "dev", "--project", "p-dev"])
        .ok();
    sb.run(&["profile", "create", "prod", "--project", "p-prod"])
        .ok();
    let marked = |out: &Outcome| -> Vec<String> {
        out.stdout
            .lines()
            .filter(|l| l.starts_with('*'))
            .filter_map(|l| l.split_whitespace().nth(1).map(str::to_owned))
            .collect()
    };
    let out = sb.run(&["profile", "ls"]).ok();
    assert_eq!(marked(&out), ["dev"], "{}", out.stdout);
    assert!(out.stdout.contains("Active profile: dev"));

    let out = sb
        .run_env(&["profile", "list"], &[("KINETIC_PROFILE", "prod")])
        .ok();
    assert_eq!(marked(&out), ["prod"], "{}", out.stdout);
    assert!(
        out.stdout
            .contains("override by KINETIC_PROFILE; stored: dev")
    );

    let v = sb.run(&["--json", "profile", "list"]).ok().json();
    assert_eq!(v["current"], "dev");
    assert_eq!(v["active"], "dev");
    assert_eq!(v["profiles"][0]["name"], "dev");
    assert_eq!(v["profiles"][0]["active"], true);
    assert_eq!(v["profiles"][1]["active"], false);
    assert_eq!(v["profiles"][1]["project"], "p-prod");
}

#[test]
fn profile_use_show_unset_delete() {
    let sb = Sandbox::new();
    sb.run(&["profile", "create", "dev", "--project", "p-dev"])
        .ok();
    sb.run(&[
        "profile",
        "create",
        "prod",
        "--project",
        "p-prod",
        "--namespace",
        "ml",
    ])
    .ok();

    let out = sb.run(&["profile", "use", "prod"]).ok();
    assert!(
        out.stdout.starts_with("Active profile: prod\n"),
        "{}",
        out.stdout
    );
    assert!(sb.read_profiles().contains("\"current\": \"prod\""));

    let out = sb.run(&["profile", "show"]).ok();
    assert!(out.stdout.contains("namespace  ml"), "{}", out.stdout);

    let out = sb.run(&["profile", "unset"]).ok();
    assert!(out.stdout.contains("Cleared active profile (was 'prod')."));
    assert!(sb.read_profiles().contains("\"current\": null"));
    let out = sb.run(&["profile", "show"]);
    assert_eq!(out.code, 1, "no active profile is not a usage error");
    out.one_line_error("No active profile");

    sb.run(&["profile", "use", "dev"]).ok();
    let out = sb.run(&["profile", "delete", "dev"]).ok();
    assert!(out.stdout.contains("Removed profile 'dev'"));
    assert!(out.stdout.contains("No profile is active now"));
    let v = sb.run(&["--json", "profile", "list"]).ok().json();
    assert_eq!(
        v["current"],
        Value::Null,
        "deleting the current never picks another"
    );
    assert_eq!(v["profiles"].as_array().map(Vec::len), Some(1));
    sb.run(&["profile", "rm", "prod", "--yes"]).ok();
}

#[test]
fn unknown_profiles_are_usage_errors() {
    let sb = Sandbox::new();
    sb.run(&["profile", "create", "dev", "--project", "p"]).ok();
    let before = sb.read_profiles();
    let msg = "Profile 'ghost' does not exist. Run 'kinetic profile ls' to see available profiles.";
    sb.run(&["profile", "use", "ghost"]).usage_error(msg);
    sb.run(&["profile", "show", "ghost"]).usage_error(msg);
    sb.run(&["profile", "delete", "ghost"]).usage_error(msg);
    sb.run(&["--profile", "ghost", "config"]).usage_error(msg);
    sb.run_env(&["config", "show"], &[("KINETIC_PROFILE", "ghost")])
        .usage_error(msg);
    assert_eq!(sb.read_profiles(), before, "failed commands change nothing");
}

#[test]
fn profiles_file_defaults_to_home() {
    let sb = Sandbox::new();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kinetic"));
    let status = cmd
        .args(["profile", "create", "dev", "--project", "p"])
        .env_clear()
        .env("HOME", sb.home())
        .output()
        .expect("run kinetic");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let path = sb.home().join(".kinetic").join("profiles.json");
    let text = std::fs::read_to_string(&path).expect("written under HOME");
    assert!(text.contains("\"dev\""));
}

#[test]
fn broken_profiles_files_are_failures() {
    let sb = Sandbox::new();
    sb.write_profiles("{\"profiles\": {\"x\": {\"zone\": \"z\", \"cluster\": \"c\"}}}");
    for args in [
        &["config"][..],
        &["profile", "list"],
        &["profile", "create", "y", "--project", "p"],
    ] {
        let out = sb.run(args);
        assert_eq!(out.code, 1, "{args:?}: {}", out.stderr);
        out.one_line_error("Malformed profile 'x': missing field 'project'");
    }
    sb.write_profiles("not json");
    let out = sb.run(&["config"]);
    assert_eq!(out.code, 1);
    out.one_line_error("Failed to read");
}

// ---- config -------------------------------------------------------------

/// A file as Kinetic writes it.
const KINETIC_FILE: &str = r#"{
  "current": "dev",
  "profiles": {
    "dev": {
      "cluster": "dev-cluster",
      "namespace": "default",
      "project": "dev-proj",
      "zone": "me-west1-a"
    },
    "prod": {
      "cluster": "prod-cluster",
      "namespace": "serving",
      "project": "prod-proj",
      "state_backend": "gcs",
      "zone": "europe-west4-b"
    }
  }
}
"#;

#[test]
fn config_show_text_names_every_source() {
    let sb = Sandbox::new();
    sb.write_profiles(KINETIC_FILE);
    let out = sb
        .run_env(
            &["config"],
            &[
                ("KINETIC_CLUSTER", "env-cluster"),
                ("KINETIC_OUTPUT_DIR", "gs://out"),
            ],
        )
        .ok();
    let row = |key: &str| -> Vec<String> {
        out.stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .map(|l| l.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default()
    };
    assert!(
        out.stdout.starts_with("Active profile: dev (stored)\n"),
        "{}",
        out.stdout
    );
    assert_eq!(row("project"), ["project", "dev-proj", "profile", "'dev'"]);
    assert_eq!(
        row("cluster"),
        ["cluster", "env-cluster", "env", "KINETIC_CLUSTER"]
    );
    assert_eq!(
        row("namespace"),
        ["namespace", "default", "profile", "'dev'"]
    );
    assert_eq!(
        row("output_dir"),
        ["output_dir", "gs://out", "env", "KINETIC_OUTPUT_DIR"]
    );
    assert_eq!(
        row("base_image_repo"),
        ["base_image_repo", "kinetic", "default"]
    );
    assert_eq!(
        row("jobs_bucket"),
        ["jobs_bucket", "dev-proj-kn-env-cluster-jobs"]
    );
    assert_eq!(row("ar_repository"), ["ar_repository", "kn-env-cluster"]);
    assert_eq!(
        row("registry_prefix"),
        [
            "registry_prefix",
            "me-west1-docker.pkg.dev/dev-proj/kn-env-cluster"
        ]
    );
    // `config show` is the same as bare `config`, and reading never rewrites the file.
    let again = sb
        .run_env(
            &["config", "show"],
            &[
                ("KINETIC_CLUSTER", "env-cluster"),
                ("KINETIC_OUTPUT_DIR", "gs://out"),
            ],
        )
        .ok();
    assert_eq!(again.stdout, out.stdout);
    assert_eq!(sb.read_profiles(), KINETIC_FILE);
}

#[test]
fn config_show_json_with_profile_override() {
    let sb = Sandbox::new();
    sb.write_profiles(KINETIC_FILE);
    let v = sb
        .run_env(
            &["--json", "--profile", "prod", "config"],
            &[("KINETIC_ZONE", "us-east4-c")],
        )
        .ok()
        .json();
    assert_eq!(
        v["profile"],
        serde_json::json!({"name": "prod", "selected_by": "argument"})
    );
    assert_eq!(
        v["project"],
        serde_json::json!({"value": "prod-proj", "source": {"kind": "profile", "name": "prod"}})
    );
    assert_eq!(
        v["zone"],
        serde_json::json!({"value": "us-east4-c", "source": {"kind": "env", "var": "KINETIC_ZONE"}})
    );
    assert_eq!(v["namespace"]["value"], "serving");
    assert_eq!(v["output_dir"], Value::Null);
    assert_eq!(
        v["derived"]["jobs_bucket"],
        "prod-proj-kn-prod-cluster-jobs"
    );
    assert_eq!(
        v["derived"]["builds_bucket"],
        "prod-proj-kn-prod-cluster-builds"
    );
    assert_eq!(v["derived"]["ar_location"], "us");
    assert_eq!(
        v["derived"]["kube_context"],
        "gke_prod-proj_us-east4-c_prod-cluster"
    );
    assert!(
        v["profiles_file"]
            .as_str()
            .is_some_and(|p| p.ends_with("profiles.json"))
    );

    let v = sb
        .run_env(&["--json", "config"], &[("KINETIC_PROFILE", "prod")])
        .ok()
        .json();
    assert_eq!(v["profile"]["selected_by"], "env");
}

#[test]
fn config_show_lists_every_setting_with_its_source() {
    let sb = Sandbox::new();
    let v = sb
        .run_env(
            &["--json", "config"],
            &[
                ("KINETIC_BACKEND", "gke"),
                ("KINETIC_LOCAL_ROOT", "/var/kinetic"),
                ("KINETIC_ACCESS_TOKEN", "s3cret-token"),
                ("KINETIC_PENDING_DEADLINE", "30"),
                ("KINETIC_NO_DEFAULT_EXCLUDES", "1"),
            ],
        )
        .ok()
        .json();
    let env = |var: &str| serde_json::json!({"kind": "env", "var": var});
    assert_eq!(v["backend"]["value"], "gke");
    assert_eq!(v["backend"]["source"], env("KINETIC_BACKEND"));
    assert_eq!(v["local_root"]["value"], "/var/kinetic");
    // gke's pods cannot read a local store, and without a project there
    // is no jobs bucket: no store for the configured backend.
    assert_eq!(v["store_url"], Value::Null);
    assert_eq!(v["cluster_store_url"], Value::Null);
    assert_eq!(v["pending_deadline"]["value"], 30.0);
    assert_eq!(v["default_excludes"]["value"], false);
    assert_eq!(v["access_token"]["value"], "<redacted>");
    assert_eq!(v["access_token"]["source"], env("KINETIC_ACCESS_TOKEN"));
    assert_eq!(v["image"], Value::Null);
    assert_eq!(
        v["kubeconfig"]["value"],
        sb.home().join(".kube/config").display().to_string()
    );
    for key in [
        "gcs_endpoint",
        "application_credentials",
        "kube_context",
        "builds_store_url",
        "cloudbuild_endpoint",
        "artifactregistry_endpoint",
        "package_root",
        "context_size_warn_bytes",
        "local_max_concurrent",
    ] {
        assert!(v.get(key).is_some(), "{key} missing from {v}");
    }
    let out = sb
        .run_env(&["config"], &[("KINETIC_ACCESS_TOKEN", "s3cret-token")])
        .ok();
    assert!(!out.stdout.contains("s3cret-token"), "{}", out.stdout);
    assert!(
        out.stdout
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["access_token", "<redacted>", "env", "KINETIC_ACCESS_TOKEN"]),
        "{}",
        out.stdout
    );
    sb.run_env(&["config"], &[("KINETIC_PENDING_DEADLINE", "soon")])
        .usage_error("KINETIC_PENDING_DEADLINE=\"soon\" is not accepted: expected a positive number of seconds");
}

/// How backend, store, image and cluster are chosen, each shown with its
/// source.
#[test]
fn config_shows_how_backend_store_image_and_cluster_are_chosen() {
    let sb = Sandbox::new();
    let v = sb
        .run_env(
            &["--json", "config"],
            &[
                ("KINETIC_PROJECT", "p"),
                ("KINETIC_LOCAL_ROOT", "/var/kinetic"),
            ],
        )
        .ok()
        .json();
    let default = serde_json::json!({"kind": "default"});
    assert_eq!(v["backend"]["value"], "local");
    assert_eq!(v["backend"]["source"], default);
    assert_eq!(v["accelerator_backend"]["value"], "gke");
    assert_eq!(v["accelerator_backend"]["source"], default);
    assert_eq!(v["store_url"]["value"], "file:///var/kinetic/store");
    assert_eq!(
        v["cluster_store_url"]["value"],
        "gs://p-kn-kinetic-cluster-jobs"
    );
    assert_eq!(
        v["kube_context"],
        serde_json::json!({"value": "gke_p_us-central1-a_kinetic-cluster", "source": default})
    );
    assert_eq!(v["image"], Value::Null);
    let v = sb
        .run_env(
            &["--json", "config"],
            &[
                ("KINETIC_PROJECT", "p"),
                ("KINETIC_BACKEND", "gke"),
                ("KINETIC_IMAGE", "us-docker.pkg.dev/p/r/img:1"),
                ("KINETIC_KUBE_CONTEXT", "my-context"),
            ],
        )
        .ok()
        .json();
    let env = |var: &str| serde_json::json!({"kind": "env", "var": var});
    assert_eq!(v["store_url"]["value"], "gs://p-kn-kinetic-cluster-jobs");
    assert_eq!(v["accelerator_backend"]["source"], env("KINETIC_BACKEND"));
    assert_eq!(v["image"]["source"], env("KINETIC_IMAGE"));
    assert_eq!(v["kube_context"]["source"], env("KINETIC_KUBE_CONTEXT"));
    // A GKE context of another cluster is refused, naming both.
    sb.run_env(
        &["config"],
        &[
            ("KINETIC_PROJECT", "p"),
            ("KINETIC_KUBE_CONTEXT", "gke_other_us-east1-b_c2"),
        ],
    )
    .usage_error("the kubeconfig context 'gke_other_us-east1-b_c2' (env KINETIC_KUBE_CONTEXT) is another GKE cluster than the configured one, whose context is 'gke_p_us-central1-a_kinetic-cluster'");
}

#[test]
fn config_without_a_project() {
    let sb = Sandbox::new();
    let out = sb.run(&["config"]).ok();
    assert!(out.stdout.contains("No active profile."), "{}", out.stdout);
    assert!(out.stdout.contains("(not set)"));
    assert!(out.stdout.contains("kinetic profile create"));
    let v = sb.run(&["--json", "config"]).ok().json();
    assert_eq!(v["project"], Value::Null);
    assert_eq!(v["derived"], Value::Null);
    assert_eq!(v["zone"]["source"]["kind"], "default");

    // GOOGLE_CLOUD_PROJECT is the last fallback.
    let v = sb
        .run_env(
            &["--json", "config"],
            &[("GOOGLE_CLOUD_PROJECT", "gcp-proj")],
        )
        .ok()
        .json();
    assert_eq!(
        v["project"],
        serde_json::json!({"value": "gcp-proj", "source": {"kind": "env", "var": "GOOGLE_CLOUD_PROJECT"}})
    );
}
