//! `toolhost tools list` and `toolhost tools load`.

use std::time::Instant;

use anyhow::Result;
use serde_json::{Value, json};
use toolhost_core::{AgentToolCatalogItemDto, ToolProvider, alias};
use toolhost_runtime::ToolHost;
use toolhost_sandbox::{LoadEvent, LoadedFrom};

use crate::load::Progress;
use crate::table;

/// Load every builtin at once and print where each came from; `false` when
/// one failed (its error is printed).
pub async fn load(host: &ToolHost) -> Result<bool> {
    let ids = host.builtin_ids();
    let progress = Progress::new();
    let observe = |event: LoadEvent<'_>| progress.observe(event);
    let started = Instant::now();
    let outcomes = host.preload(&ids, &observe).await;
    progress.finish();
    let mut all_loaded = true;
    let rows: Vec<[String; 3]> = outcomes
        .into_iter()
        .map(|(id, outcome)| match outcome {
            Ok(component) => [
                id.to_string(),
                match component.loaded_from() {
                    LoadedFrom::Cache => "cache",
                    LoadedFrom::Compiled => "compiled",
                }
                .into(),
                component.load_time().as_millis().to_string(),
            ],
            Err(error) => {
                all_loaded = false;
                eprintln!("error: {id}: {error}");
                [id.to_string(), "failed".into(), String::new()]
            }
        })
        .collect();
    table::print(["ID", "FROM", "MS"], &rows);
    eprintln!(
        "{} builtins loaded in {} ms",
        rows.len(),
        started.elapsed().as_millis()
    );
    Ok(all_loaded)
}

pub fn list(items: &[AgentToolCatalogItemDto], json: bool) -> Result<()> {
    if json {
        let rows: Vec<_> = items
            .iter()
            .map(|item| {
                let mut row = serde_json::to_value(item)?;
                row["alias"] = json!(alias_of(item));
                Ok(row)
            })
            .collect::<Result<_, serde_json::Error>>()?;
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let rows: Vec<[String; 5]> = items
        .iter()
        .map(|item| {
            [
                item.id.to_string(),
                alias_of(item),
                item.title.clone().unwrap_or_default(),
                annotation_summary(&item.annotations),
                format!(
                    "{} {} ({})",
                    item.source.kind,
                    item.source.name,
                    item.source.capabilities.join(", ")
                ),
            ]
        })
        .collect();
    table::print(["ID", "ALIAS", "TITLE", "ANNOTATIONS", "SOURCE"], &rows);
    Ok(())
}

/// The alias a snapshot gives the tool before collisions are resolved.
fn alias_of(item: &AgentToolCatalogItemDto) -> String {
    match item.id.provider() {
        ToolProvider::Mcp(_) => alias::mcp_alias_base(&item.source.name, item.id.native_name()),
        ToolProvider::Extension(id) => alias::extension_alias_base(id, item.id.native_name()),
        ToolProvider::Builtin => alias::builtin_alias(item.id.native_name()),
    }
}

/// The flags that are set, then the source kind: `readOnly, sourceKind=random`.
fn annotation_summary(annotations: &Value) -> String {
    let Some(map) = annotations.as_object() else {
        return String::new();
    };
    let mut parts: Vec<String> = map
        .iter()
        .filter(|(_, value)| value.as_bool() == Some(true))
        .map(|(key, _)| key.clone())
        .collect();
    if let Some(kind) = map.get("sourceKind").and_then(Value::as_str) {
        parts.push(format!("sourceKind={kind}"));
    }
    parts.join(", ")
}
