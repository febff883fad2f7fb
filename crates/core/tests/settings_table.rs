//! The table of settings is what the documentation and `kinetic config`
//! show: `docs/configuration.md` holds the table as
//! `settings::markdown_table` renders it, and names no `KINETIC_*`
//! variable the table lacks; `Settings::entries` lists the table's
//! settings, in its order.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kinetic_core::config::ProfileStore;
use kinetic_core::settings::{
    KEYS, SettingKey, Settings, SettingsArgs, SettingsInput, Source, markdown_table,
};

const BEGIN: &str = "<!-- settings table: generated from kinetic_core::settings::KEYS; KINETIC_UPDATE_DOCS=1 cargo test -p kinetic-core --test settings_table rewrites it -->\n";
const END: &str = "<!-- end of the settings table -->\n";

fn page() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md")
}

/// The page's text before, in and after the generated section.
fn split(text: &str) -> (&str, &str, &str) {
    let start = text
        .find(BEGIN)
        .unwrap_or_else(|| panic!("docs/configuration.md lacks the line {BEGIN:?}"))
        + BEGIN.len();
    let end = start
        + text[start..]
            .find(END)
            .unwrap_or_else(|| panic!("docs/configuration.md lacks the line {END:?}"));
    (&text[..start], &text[start..end], &text[end..])
}

#[test]
fn the_docs_show_the_table_as_generated() {
    let path = page();
    let text = std::fs::read_to_string(&path).expect("docs/configuration.md");
    let (before, section, after) = split(&text);
    let want = markdown_table();
    if section == want {
        return;
    }
    if std::env::var_os("KINETIC_UPDATE_DOCS").is_some() {
        std::fs::write(&path, format!("{before}{want}{after}")).expect("rewrite the page");
        return;
    }
    panic!(
        "the settings table in docs/configuration.md is not the one the table of keys gives; run `KINETIC_UPDATE_DOCS=1 cargo test -p kinetic-core --test settings_table` to rewrite it.\n--- in the page:\n{section}\n--- from the table:\n{want}"
    );
}

#[test]
fn the_docs_list_exactly_the_tables_settings_and_variables() {
    let text = std::fs::read_to_string(page()).expect("docs/configuration.md");
    let (_, section, _) = split(&text);
    // Each row of the section names one setting, in the table's order.
    let rows: Vec<&str> = section
        .lines()
        .skip(2)
        .map(|row| {
            row.trim_start_matches("| `")
                .split('`')
                .next()
                .expect("a row starts with its setting")
        })
        .collect();
    let names: Vec<&str> = KEYS.iter().map(|info| info.name).collect();
    assert_eq!(rows, names);
    // Every variable the page names anywhere is one the table reads.
    let vars: Vec<&str> = KEYS
        .iter()
        .flat_map(|info| info.vars.iter().copied())
        .collect();
    let mut named = Vec::new();
    for (at, _) in text.match_indices("KINETIC_") {
        let word: String = text[at..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if word.len() > "KINETIC_".len() && word != "KINETIC_UPDATE_DOCS" {
            named.push(word);
        }
    }
    assert!(!named.is_empty());
    for word in &named {
        assert!(
            vars.contains(&word.as_str()),
            "docs/configuration.md names {word}, which no setting of the table reads"
        );
    }
    // And every variable of the table is in the page.
    for var in vars {
        assert!(text.contains(var), "docs/configuration.md lacks {var}");
    }
}

#[test]
fn kinetic_config_lists_the_tables_settings_in_order_with_secrets_redacted() {
    let env = BTreeMap::from([
        ("HOME".to_owned(), "/h".to_owned()),
        ("KINETIC_ACCESS_TOKEN".to_owned(), "s3cret".to_owned()),
        ("KINETIC_ZONE".to_owned(), "europe-west4-b".to_owned()),
    ]);
    let profiles = ProfileStore::new();
    let settings = Settings::resolve(
        &SettingsArgs::new(),
        &SettingsInput::new(&env, &profiles, Path::new("/work")),
    )
    .expect("resolves");
    let entries = settings.entries();
    let listed: Vec<&str> = KEYS
        .iter()
        .filter(|info| info.listed)
        .map(|info| info.name)
        .collect();
    assert_eq!(entries.iter().map(|e| e.key).collect::<Vec<_>>(), listed);
    for info in KEYS {
        let entry = settings.entry(info.key);
        if info.secret && entry.value.is_some() {
            assert_eq!(entry.text().as_deref(), Some("<redacted>"), "{}", info.name);
        }
        if entry.value.is_none() {
            assert_eq!(Some(entry.unset), info.unset, "{} has no value", info.name);
        }
        // A value read from a variable names one of the setting's own.
        if let Some(Source::Env(var)) = &entry.source {
            assert!(info.vars.contains(var), "{}: {var}", info.name);
        }
    }
    let zone = settings.entry(SettingKey::Zone);
    assert_eq!(zone.text().as_deref(), Some("europe-west4-b"));
    assert_eq!(zone.source, Some(Source::Env("KINETIC_ZONE")));
    let token = settings.entry(
        "KINETIC_ACCESS_TOKEN"
            .parse()
            .expect("a variable of the table"),
    );
    assert_eq!(token.key, "access_token");
    assert!(!format!("{:?}", settings.entries()).contains("s3cret"));
}
