//! Generated extension manifests: whatever TOML (or not-TOML) a manifest
//! holds, loading it never panics and either checks it or says what is
//! wrong (`ext.manifest_invalid`, or the component's own error). `make
//! fuzz` runs more cases (`PROPTEST_CASES`).

use proptest::prelude::*;
use toolhost_extensions::{MANIFEST_FILE, Manifest};

const KEYS: &[&str] = &[
    "id",
    "version",
    "description",
    "author",
    "component",
    "sha256",
    "tools",
    "capabilities",
    "extra",
];

fn toml_value() -> impl Strategy<Value = String> {
    let string = "\\PC{0,20}".prop_map(|text: String| format!("{text:?}"));
    prop_oneof![
        string.clone(),
        Just("\"acme-tool\"".to_owned()),
        Just("\"1.2.3\"".to_owned()),
        Just("\"c.wasm\"".to_owned()),
        Just("\"../../etc/passwd\"".to_owned()),
        Just(format!("\"{}\"", "a".repeat(64))),
        Just("[\"log\", \"workspace-read\"]".to_owned()),
        Just("[\"workspace-write\"]".to_owned()),
        Just("[\"hostile.tool\"]".to_owned()),
        any::<i64>().prop_map(|n| n.to_string()),
        Just("1e400".to_owned()),
        prop::collection::vec(string, 0..3).prop_map(|items| format!("[{}]", items.join(", "))),
    ]
}

fn manifest_text() -> impl Strategy<Value = String> {
    let pair = (prop::sample::select(KEYS), toml_value());
    let wit = prop::option::of((toml_value(), toml_value()));
    let limits = prop::option::of(prop::collection::vec(
        (
            prop::sample::select(&["fuel", "deadline-ms", "memory-bytes", "instances", "x"][..]),
            toml_value(),
        ),
        0..4,
    ));
    (
        prop::collection::vec(pair, 0..10),
        wit,
        limits,
        "\\PC{0,10}",
    )
        .prop_map(|(pairs, wit, limits, noise)| {
            let mut text = String::new();
            for (key, value) in pairs {
                text.push_str(&format!("{key} = {value}\n"));
            }
            if let Some((tool, host)) = wit {
                text.push_str(&format!("[wit]\ntool = {tool}\nhost = {host}\n"));
            }
            if let Some(limits) = limits {
                text.push_str("[limits]\n");
                for (key, value) in limits {
                    text.push_str(&format!("{key} = {value}\n"));
                }
            }
            text.push_str(&noise);
            text
        })
}

proptest! {
    #[test]
    fn any_manifest_checks_or_says_what_is_wrong(text in manifest_text()) {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(MANIFEST_FILE), &text).expect("manifest");
        std::fs::write(dir.path().join("c.wasm"), b"\0asm").expect("component");
        match Manifest::load(dir.path()) {
            Ok(checked) => {
                prop_assert!(
                    !checked.requested.contains(toolhost_core::Capability::WorkspaceWrite),
                    "a checked manifest never requests workspace-write"
                );
                // Only the component inside the manifest's directory is
                // ever read (`../../etc/passwd` is refused).
                match checked.read_component() {
                    Ok(bytes) => prop_assert_eq!(bytes, b"\0asm".to_vec()),
                    Err(error) => prop_assert!(error.code().starts_with("ext."), "{}", error),
                }
            }
            Err(error) => prop_assert!(error.code().starts_with("ext."), "{}", error),
        }
    }
}
