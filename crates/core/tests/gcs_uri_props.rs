//! Properties of `gs://` data URIs (`kinetic_core::spec::GcsUri`), as the
//! reference reads them: without a trailing slash a single object, with one
//! a directory; the warning comes exactly when a single object's last
//! segment has no `.` (`plan_props` checks that the runner is sent the same).

use kinetic_core::spec::{Data, GcsUri};
use proptest::prelude::*;

fn segment() -> impl Strategy<Value = String> {
    "[a-z0-9_-]{1,8}(\\.[a-z0-9]{1,4})?"
}

proptest! {
    #[test]
    fn a_trailing_slash_and_nothing_else_makes_a_directory(
        bucket in "[a-z0-9][a-z0-9_-]{2,10}",
        segments in prop::collection::vec(segment(), 1..4),
        slash in any::<bool>(),
    ) {
        let name = segments.join("/");
        let uri = format!("gs://{bucket}/{name}{}", if slash { "/" } else { "" });
        let parsed = GcsUri::parse(&uri).unwrap();
        prop_assert_eq!(&parsed.bucket, &bucket);
        prop_assert_eq!(&parsed.name, &name);
        prop_assert_eq!(parsed.is_dir, slash);
        prop_assert_eq!(parsed.trimmed(), format!("gs://{bucket}/{name}"));
        let last = segments.last().unwrap();
        let hint = parsed.slash_hint();
        prop_assert_eq!(hint.is_some(), !slash && !last.contains('.'));
        if let Some(hint) = hint {
            prop_assert!(hint.contains(&format!("gs://{bucket}/{name}/")), "{}", hint);
            prop_assert!(hint.contains("single object"), "{}", hint);
        }
        // `Data` gives the same warning, and no other data warns.
        let data = Data::new(&uri, std::path::Path::new("/")).unwrap();
        prop_assert_eq!(data.warning(), parsed.slash_hint());
    }

    #[test]
    fn anything_else_is_refused_naming_the_input(text in "[a-z:/]{0,12}") {
        prop_assume!(!text.starts_with("gs://") || text.starts_with("gs:///") || text == "gs://");
        let err = GcsUri::parse(&text).unwrap_err().to_string();
        prop_assert!(err.contains(&format!("'{text}'")), "{}", err);
        prop_assert!(err.contains("expected gs://bucket/path"), "{}", err);
    }
}

#[test]
fn a_bucket_alone_is_the_whole_bucket() {
    for uri in ["gs://b", "gs://b/"] {
        let parsed = GcsUri::parse(uri).unwrap();
        assert!(parsed.is_dir && parsed.name.is_empty(), "{parsed:?}");
        assert_eq!(parsed.slash_hint(), None);
    }
}

#[test]
fn local_data_never_warns() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("weights"), "w").unwrap();
    assert_eq!(Data::new("weights", dir.path()).unwrap().warning(), None);
}
