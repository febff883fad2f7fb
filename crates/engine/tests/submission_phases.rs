//! A submission passes through gather, plan and execute once each, in
//! that order, and hands the backend one job.

use std::sync::{Arc, Mutex};

use kinetic_core::layout;
use kinetic_core::ports::ObjectStoreExt as _;
use kinetic_engine::{Engine, EngineSettings, Entrypoint, JobSpec};
use kinetic_testkit::{FakeBackend, MemoryStore};
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::{Layer, Registry};

/// Records the names of the phase spans as they open.
#[derive(Clone, Default)]
struct Phases(Arc<Mutex<Vec<&'static str>>>);

impl<S: tracing::Subscriber> Layer<S> for Phases {
    fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: Context<'_, S>) {
        let name = attrs.metadata().name();
        if matches!(name, "submit" | "gather" | "plan" | "execute") {
            self.0.lock().unwrap().push(name);
        }
    }
}

#[tokio::test]
async fn a_submission_gathers_plans_and_executes_once_each() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let proj = home.join("proj");
    std::fs::create_dir_all(proj.join("data")).unwrap();
    std::fs::write(proj.join("pyproject.toml"), "[project]\nname = \"p\"\n").unwrap();
    std::fs::write(proj.join("work.py"), "def f(x):\n    return 1\n").unwrap();
    std::fs::write(proj.join("data/a.txt"), "alpha").unwrap();
    let store = MemoryStore::new();
    let fake = FakeBackend::new("fake", Arc::new(store.clone()));
    let engine = Engine::builder()
        .store(Arc::new(store.clone()))
        .backend(Arc::new(fake.clone()))
        .default_backend("fake")
        .settings(EngineSettings::default().with_home(&home))
        .build()
        .unwrap();
    let spec = JobSpec::new(Entrypoint::parse("work:f").unwrap())
        .working_dir(&proj)
        .arg(kinetic_engine::Arg::Data(
            kinetic_engine::Data::new("data", &proj).unwrap(),
        ));

    let phases = Phases::default();
    // The test runs on one thread, where every phase span opens.
    let _guard = tracing::subscriber::set_default(Registry::default().with(phases.clone()));
    let handle = engine.submit(spec).await.unwrap();

    assert_eq!(
        *phases.0.lock().unwrap(),
        ["submit", "gather", "plan", "execute"]
    );
    assert_eq!(fake.submits(), 1, "the backend is handed one job");
    // What the plan said was written before the job was handed over.
    assert!(store.exists(&layout::spec(handle.id())).await.unwrap());
    assert!(store.exists(&layout::record(handle.id())).await.unwrap());
}
