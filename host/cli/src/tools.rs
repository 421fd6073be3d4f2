//! `toolhost tools list`.

use anyhow::Result;
use serde_json::{Value, json};
use toolhost_core::{AgentToolCatalogItemDto, ToolProvider, alias};

use crate::table;

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
