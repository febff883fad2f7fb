//! Conformance suites: one per port. Each checks every sentence of the
//! port's contract; every adapter and every fake runs it.
//!
//! Each suite lists its cases (`CASES`) and runs one by name
//! (`run_case`); a macro per suite makes each case its own named test in
//! the adapter's test file, as OpenDAL's behaviour tests do, so the first
//! failure does not hide the rest and a skipped case is asserted, not
//! thrown away:
//!
//! ```ignore
//! kinetic_testkit::backend_conformance_tests! {
//!     #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//!     harness = MyHarness::new().await;
//!     skips = ["cancel_stops_a_running_job"];
//! }
//! ```
//!
//! Each generated test builds its own harness (the expression is evaluated
//! once per case), and one more test checks that the macro names every
//! case of the suite.

pub mod backend;
pub mod image_builder;
pub mod object_store;

/// One named test per case of the [`backend`] suite, each over a fresh
/// harness, plus a test that every case of [`backend::CASES`] is named.
/// `skips` lists the cases the backend's capabilities exclude; a skip not
/// listed, or a listed case that runs, fails its test.
#[macro_export]
macro_rules! backend_conformance_tests {
    (
        $(#[$attr:meta])*
        harness = $make:expr;
        skips = [$($skip:literal),* $(,)?] $(;)?
    ) => {
        $crate::backend_conformance_tests!(@suite [$(#[$attr])*] ($make) [$($skip),*]
            checks_follow_the_capabilities
            runs_a_job_to_its_value
            reports_a_failed_job
            submit_is_idempotent
            unknown_jobs_are_not_found
            cleanup_forgets_the_job
            cleanup_waits_no_longer_than_asked
            a_job_ending_is_announced_by_its_changes
            env_reaches_the_job_and_nowhere_else
            logs_hold_the_output_and_tail_the_end
            follow_logs_streams_every_line_and_ends
            cancel_stops_a_running_job
            group_status_reports_the_group_in_one_call
            submit_batch_runs_every_input_as_its_child
            a_cancelled_batch_reports_no_input_running
            a_batch_in_blocks_runs_and_retries_each_input_as_its_child
            undeclared_capabilities_are_unsupported
        );
    };
    (@suite [$($attr:tt)*] ($make:expr) [$($skip:literal),*] $($case:ident)*) => {
        $crate::backend_conformance_tests!(@cases [$($attr)*] ($make) [$($skip),*] $($case)*);
        #[test]
        fn conformance_names_every_backend_case() {
            $crate::conformance::assert_names_every_case(
                &[$(stringify!($case)),*],
                $crate::conformance::backend::CASES.iter().map(|(name, _)| *name),
            );
        }
    };
    (@cases [$($attr:tt)*] ($make:expr) [$($skip:literal),*]) => {};
    (@cases [$($attr:tt)*] ($make:expr) [$($skip:literal),*] $case:ident $($rest:ident)*) => {
        $($attr)*
        async fn $case() {
            let harness = $make;
            $crate::conformance::backend::run_case(&harness, stringify!($case), &[$($skip),*]).await;
        }
        $crate::backend_conformance_tests!(@cases [$($attr)*] ($make) [$($skip),*] $($rest)*);
    };
}

/// One named test per case of the [`object_store`] suite, each over a
/// fresh store (the expression is evaluated once per case), plus a test
/// that every case of [`object_store::CASES`] is named. A store that needs
/// something kept alive beside it (a fake server, a temporary directory)
/// is given as `store_with_guard = (guard, store)`.
#[macro_export]
macro_rules! object_store_conformance_tests {
    (
        $(#[$attr:meta])*
        store = $make:expr $(;)?
    ) => {
        $crate::object_store_conformance_tests! {
            $(#[$attr])*
            store_with_guard = ((), $make);
        }
    };
    (
        $(#[$attr:meta])*
        store_with_guard = $make:expr $(;)?
    ) => {
        $crate::object_store_conformance_tests!(@suite [$(#[$attr])*] ($make)
            put_then_get_round_trips
            overwrite_replaces
            create_if_absent
            missing_objects_are_not_found
            ranges
            head_reports_size
            version_tags_change_on_rewrite
            list_is_segment_wise_sorted_and_deep
            delete_is_idempotent
            delete_prefix_counts_and_spares_siblings
            put_file_streams_a_local_file
            get_to_file_writes_whole_files_only
            get_to_file_never_replaces_what_is_not_a_file
            concurrent_puts_are_all_visible
        );
    };
    (@suite [$($attr:tt)*] ($make:expr) $($case:ident)*) => {
        $crate::object_store_conformance_tests!(@cases [$($attr)*] ($make) $($case)*);
        #[test]
        fn conformance_names_every_object_store_case() {
            $crate::conformance::assert_names_every_case(
                &[$(stringify!($case)),*],
                $crate::conformance::object_store::CASES.iter().copied(),
            );
        }
    };
    (@cases [$($attr:tt)*] ($make:expr)) => {};
    (@cases [$($attr:tt)*] ($make:expr) $case:ident $($rest:ident)*) => {
        $($attr)*
        async fn $case() {
            let (_guard, store) = $make;
            $crate::conformance::object_store::run_case(&store, stringify!($case)).await;
        }
        $crate::object_store_conformance_tests!(@cases [$($attr)*] ($make) $($rest)*);
    };
}

/// One named test per case of the [`image_builder`] suite, each over a
/// fresh harness, plus a test that every case of [`image_builder::CASES`]
/// is named. A builder runs the cases for what its capabilities say (one
/// that builds, or one that cannot); `skips` lists the others, asserted as
/// for the backend suite.
#[macro_export]
macro_rules! image_builder_conformance_tests {
    (
        $(#[$attr:meta])*
        harness = $make:expr;
        skips = [$($skip:literal),* $(,)?] $(;)?
    ) => {
        $crate::image_builder_conformance_tests!(@suite [$(#[$attr])*] ($make) [$($skip),*]
            custom_images_need_no_build
            equal_requests_give_one_uri
            an_existing_image_is_not_rebuilt
            inputs_change_the_image
            concurrent_equal_requests_build_once
            a_builder_that_cannot_build_never_builds
            requirements_it_cannot_bake_in_are_refused
        );
    };
    (@suite [$($attr:tt)*] ($make:expr) [$($skip:literal),*] $($case:ident)*) => {
        $crate::image_builder_conformance_tests!(@cases [$($attr)*] ($make) [$($skip),*] $($case)*);
        #[test]
        fn conformance_names_every_image_builder_case() {
            $crate::conformance::assert_names_every_case(
                &[$(stringify!($case)),*],
                $crate::conformance::image_builder::CASES.iter().map(|(name, _)| *name),
            );
        }
    };
    (@cases [$($attr:tt)*] ($make:expr) [$($skip:literal),*]) => {};
    (@cases [$($attr:tt)*] ($make:expr) [$($skip:literal),*] $case:ident $($rest:ident)*) => {
        $($attr)*
        async fn $case() {
            let harness = $make;
            $crate::conformance::image_builder::run_case(&harness, stringify!($case), &[$($skip),*]).await;
        }
        $crate::image_builder_conformance_tests!(@cases [$($attr)*] ($make) [$($skip),*] $($rest)*);
    };
}

/// Panics unless `named` (a macro's list) is exactly the suite's cases, in
/// order: a case added to a suite but not to its macro would never run.
pub fn assert_names_every_case<'a>(named: &[&str], cases: impl Iterator<Item = &'a str>) {
    let cases: Vec<&str> = cases.collect();
    assert_eq!(
        named,
        cases.as_slice(),
        "the conformance macro must name every case of its suite, in order"
    );
}
