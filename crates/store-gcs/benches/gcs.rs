//! Benchmarks of the GCS store (placeholder).
fn main() {}
