//! Image tag hashing and image names.

use kinetic_core::image::{
    DOCKERFILE_SEPARATOR, ImageError, ImageTagInputs, RUNNER_SEPARATOR, bundled_image_uri,
    default_base_image, prebuilt_image_uri, registry_tag_resource,
};
use kinetic_core::requirements::filter_jax;
use sha2::{Digest, Sha256};

fn inputs() -> ImageTagInputs {
    ImageTagInputs {
        base_image: "python:3.11-slim".into(),
        category: "tpu".into(),
        kinetic_version: "0.1.0".into(),
        requirements: Some("numpy==1.26\n".into()),
        runner_source: "# runner v1\n".into(),
        dockerfile_template: "FROM $base_image\n".into(),
    }
}

fn tag(i: &ImageTagInputs) -> String {
    i.tag().expect("valid").as_str().to_owned()
}

#[test]
fn hash_input_follows_the_composition_rule() {
    let i = inputs();
    let expected = format!(
        "base_image=python:3.11-slim\ncategory=tpu\nkinetic=0.1.0\nnumpy==1.26\n{RUNNER_SEPARATOR}# runner v1\n{DOCKERFILE_SEPARATOR}FROM $base_image\n"
    );
    assert_eq!(i.hash_input(), expected);
    assert_eq!(RUNNER_SEPARATOR, "\n---runner---\n");
    assert_eq!(DOCKERFILE_SEPARATOR, "\n---Dockerfile---\n");
    let digest = hex::encode(Sha256::digest(expected.as_bytes()));
    assert_eq!(i.hash(), digest);
    let t = i.tag().expect("valid");
    assert_eq!(t.hash(), digest);
    assert_eq!(t.as_str(), format!("tpu-{}", &digest[..12]));
}

#[test]
fn golden_tag() {
    // Pinned so an accidental change of the composition is caught.
    let i = ImageTagInputs {
        base_image: "python:3.11-slim".into(),
        category: "cpu".into(),
        kinetic_version: "0.1.0".into(),
        requirements: None,
        runner_source: String::new(),
        dockerfile_template: String::new(),
    };
    let text = "base_image=python:3.11-slim\ncategory=cpu\nkinetic=0.1.0\n\n---runner---\n\n---Dockerfile---\n";
    assert_eq!(i.hash_input(), text);
    assert_eq!(i.hash(), hex::encode(Sha256::digest(text.as_bytes())));
}

type Change = Box<dyn Fn(&mut ImageTagInputs)>;

#[test]
fn every_input_changes_the_tag() {
    let base = tag(&inputs());
    let changes: Vec<(&str, Change)> = vec![
        ("runner", Box::new(|i| i.runner_source.push_str("# v2\n"))),
        (
            "template",
            Box::new(|i| i.dockerfile_template.push_str("RUN true\n")),
        ),
        ("version", Box::new(|i| i.kinetic_version = "0.1.1".into())),
        ("category", Box::new(|i| i.category = "gpu".into())),
        (
            "base image",
            Box::new(|i| i.base_image = "python:3.12-slim".into()),
        ),
        (
            "requirements",
            Box::new(|i| i.requirements = Some("numpy==2.0\n".into())),
        ),
    ];
    for (what, change) in changes {
        let mut i = inputs();
        change(&mut i);
        assert_ne!(tag(&i), base, "{what} must change the tag");
    }
}

#[test]
fn empty_requirements_equal_no_requirements() {
    let mut with_empty = inputs();
    with_empty.requirements = Some(String::new());
    let mut with_none = inputs();
    with_none.requirements = None;
    assert_eq!(tag(&with_empty), tag(&with_none));
    assert_eq!(with_empty.describe().expect("ok").requirements, None);
}

#[test]
fn filtered_out_jax_lines_never_change_the_tag() {
    let plain = "numpy==1.26\nscipy\n";
    for with_jax in [
        "numpy==1.26\njax[tpu]>=0.4.6\nscipy\n",
        "jaxlib\nnumpy==1.26\nscipy\nlibtpu-nightly\n",
        "numpy==1.26\njax==0.4 \\\n  --hash=sha256:abc\nscipy\n",
    ] {
        let mut a = inputs();
        a.requirements = Some(filter_jax(with_jax).text);
        let mut b = inputs();
        b.requirements = Some(filter_jax(plain).text);
        assert_eq!(tag(&a), tag(&b), "{with_jax:?}");
    }
    // All filtered: same as none.
    let mut all_jax = inputs();
    all_jax.requirements = Some(filter_jax("jax\njaxlib\n").text);
    let mut none = inputs();
    none.requirements = None;
    assert_eq!(tag(&all_jax), tag(&none));
}

#[test]
fn kept_jax_lines_change_the_tag() {
    let mut a = inputs();
    a.requirements = Some(filter_jax("numpy==1.26\njax==0.4.30  # kn:keep\n").text);
    let mut b = inputs();
    b.requirements = Some(filter_jax("numpy==1.26\n").text);
    assert_ne!(tag(&a), tag(&b));
}

#[test]
fn category_must_be_tag_safe() {
    for bad in ["", "TPU", "t p u", "tpu/x"] {
        let mut i = inputs();
        i.category = bad.into();
        let err = i.tag().expect_err("must fail");
        assert!(matches!(err, ImageError::InvalidCategory { .. }));
        assert!(err.to_string().contains(&format!("'{bad}'")));
    }
}

#[test]
fn description_lists_the_inputs() {
    let d = inputs().describe().expect("ok");
    let t = inputs().tag().expect("ok");
    assert_eq!(d.tag, t.as_str());
    assert_eq!(d.hash, t.hash());
    assert_eq!(d.requirements.as_deref(), Some("numpy==1.26\n"));
    assert_eq!(
        d.runner_sha256,
        hex::encode(Sha256::digest("# runner v1\n".as_bytes()))
    );
    let json = serde_json::to_value(&d).expect("json");
    for key in [
        "base_image",
        "category",
        "kinetic_version",
        "requirements",
        "requirements_sha256",
        "runner_sha256",
        "dockerfile_sha256",
        "hash",
        "tag",
    ] {
        assert!(json.get(key).is_some(), "{key}");
    }
}

#[test]
fn image_names() {
    let t = inputs().tag().expect("ok");
    assert_eq!(
        bundled_image_uri("europe", "my-proj", "my-cluster", &t),
        format!("europe-docker.pkg.dev/my-proj/kn-my-cluster/base:{t}")
    );
    assert_eq!(
        kinetic_core::config::registry_prefix_at("us", "p", "c"),
        "us-docker.pkg.dev/p/kn-c"
    );
    assert_eq!(
        registry_tag_resource("me-west1", "p", "c", &t),
        format!("projects/p/locations/me-west1/repositories/kn-c/packages/base/tags/{t}")
    );
    assert_eq!(
        prebuilt_image_uri("kinetic", "gpu", "0.0.4"),
        "kinetic/base-gpu:0.0.4"
    );
    assert_eq!(default_base_image(3, 11), "python:3.11-slim");
}
