//! # kinetic-e2e
//!
//! End-to-end tests of Kinetic for Rust, apart from the adapter crates so
//! that no adapter depends on another, even for its tests: each adapter
//! tests itself against `kinetic-testkit`'s in-memory fakes and
//! `kinetic-fake-gcp`'s servers of the real protocols; the tests here put
//! several adapters together, as a program embedding the engine does.
//!
//! - `tests/local.rs`, `tests/local_conformance.rs`: the local backend with
//!   a directory store (`kinetic-store-gcs`), running real Python through
//!   the real runner; the `Backend` conformance suite.
//! - `tests/gcs_runner.rs`: the local backend with its store on the fake
//!   GCS server: the runner reads and writes `gs://` objects.
//! - `tests/gke.rs`, `tests/gke_conformance.rs`, `tests/gke_fake_cluster.rs`:
//!   the GKE backend over the fake Kubernetes cluster, whose kubelet runs
//!   the runner against the fake GCS server or a directory store.
//! - `tests/pool_scheduling.rs`: for every accelerator of the registry, a
//!   job's pod (the GKE backend's manifest) schedules onto the node pool
//!   `kinetic pool add` makes for it (the infrastructure adapter's request,
//!   turned into a node as the fake GKE makes one), and onto no other.
//! - `benches/engine.rs`: client-side submit overhead and the round trip of
//!   a trivial Python job (`cargo bench -p kinetic-e2e --bench engine`).
//!
//! The library itself is empty.
