//! The crate's examples run to their end (each asserts what it shows), so
//! that they stay true.

#[path = "../examples/plugin_backend.rs"]
mod plugin_backend;

#[path = "../examples/testing.rs"]
mod testing;

#[test]
fn the_plugin_backend_example_runs() {
    plugin_backend::main().expect("the example succeeds");
}

#[test]
fn the_testing_example_runs() {
    testing::main().expect("the example succeeds");
}
