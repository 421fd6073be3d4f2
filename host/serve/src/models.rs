//! The operator's models (`--models FILE`): a request names one, never a
//! URL or a key variable, so no client can make the server send a key
//! where the operator did not write.
//!
//! ```json
//! {"schemaVersion": 1, "kind": "toolhost.models", "models": {
//!   "local": {"kind": "openai", "url": "http://127.0.0.1:8080/v1",
//!             "keyVariable": "LOCAL_LLM_KEY", "model": "qwen3", "tenants": ["acme"]},
//!   "demo":  {"kind": "script", "path": "demo-script.json"}}}
//! ```
//!
//! `kind` is a `--model` kind (`script`, `openai`, `openai-responses`,
//! `anthropic`, `gemini`); an HTTP model has a `url`, a script a `path`
//! (relative to the models file). `tenants` limits who may name it (absent:
//! every tenant).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use toolhost_core::profile::MIN_INPUT_CHARS;
use toolhost_model::{HttpOptions, ModelError, ModelKind, ModelSource, ModelSpec};

/// Largest models file read.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ModelsError {
    #[error("serve.models_invalid: {path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct File {
    schema_version: u32,
    kind: String,
    models: BTreeMap<String, Entry>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Entry {
    kind: String,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    path: Option<PathBuf>,
    #[serde(default)]
    key_variable: Option<String>,
    /// The provider's model name.
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    timeout_secs: Option<u64>,
    #[serde(default)]
    max_output_tokens: Option<u32>,
    /// The model's window in characters: requests are trimmed to fit.
    #[serde(default)]
    context_chars: Option<u32>,
    #[serde(default)]
    tenants: Option<Vec<String>>,
}

/// One model the operator configured.
#[derive(Debug, Clone)]
pub struct ServedModel {
    pub name: String,
    spec: ModelSpec,
    options: HttpOptions,
    /// The provider's model name (`LoopConfig::model_name`).
    pub model_name: Option<String>,
    pub max_output_tokens: Option<u32>,
    /// `contextChars` (`LoopConfig::context_chars`).
    pub context_chars: Option<u32>,
    tenants: Option<Vec<String>>,
    /// An HTTP model as opened last, with the key it was opened with.
    shared: Arc<Mutex<Option<Opened>>>,
}

/// An opened HTTP model and the key it holds.
struct Opened {
    api_key: Option<String>,
    source: Arc<dyn ModelSource>,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Opened")
            .field("source", &self.source.describe())
            .finish_non_exhaustive()
    }
}

impl ServedModel {
    /// Open it for one run. An HTTP model is one client for every run
    /// while its key stays the same, so runs reuse its connections (one
    /// TLS handshake, keep-alive) and its trust roots are loaded once; a
    /// key changed in the environment opens it afresh. A script is read
    /// for each run: each run reads it from its first reply.
    pub fn open(&self) -> Result<Arc<dyn ModelSource>, ModelError> {
        if self.spec.kind == ModelKind::Script {
            return self.spec.open(&self.options);
        }
        self.open_shared(self.spec.api_key(&self.options))
    }

    /// The shared client while `api_key` (the environment's key now) is
    /// the one it was opened with; else a new one, shared from then on.
    fn open_shared(&self, api_key: Option<String>) -> Result<Arc<dyn ModelSource>, ModelError> {
        let mut shared = self
            .shared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(opened) = shared.as_ref()
            && opened.api_key == api_key
        {
            return Ok(Arc::clone(&opened.source));
        }
        let source = self.spec.open(&self.options)?;
        *shared = Some(Opened {
            api_key,
            source: Arc::clone(&source),
        });
        Ok(source)
    }

    /// What the run's `input/loop.json` records: the name (the server
    /// opens it again by name on resume) and what it pointed at, never a key.
    pub fn record(&self) -> serde_json::Value {
        serde_json::json!({
            "served": self.name,
            "kind": self.spec.kind.prefix(),
            "keyVariable": self.options.key_variable,
        })
    }

    fn offered_to(&self, tenant: &str) -> bool {
        self.tenants
            .as_ref()
            .is_none_or(|tenants| tenants.iter().any(|allowed| allowed == tenant))
    }
}

/// Every configured model, by name.
#[derive(Debug, Clone, Default)]
pub struct ModelTable {
    models: BTreeMap<String, ServedModel>,
}

impl ModelTable {
    /// No models: runs cannot start (the catalog and calls still work).
    pub fn empty() -> Self {
        Self::default()
    }

    pub fn load(path: &Path) -> Result<Self, ModelsError> {
        let invalid = |reason: String| ModelsError::Invalid {
            path: path.to_owned(),
            reason,
        };
        let file = std::fs::File::open(path).map_err(|error| invalid(error.to_string()))?;
        let mut text = String::new();
        use std::io::Read as _;
        file.take(MAX_FILE_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|error| invalid(error.to_string()))?;
        if text.len() as u64 > MAX_FILE_BYTES {
            return Err(invalid(format!("larger than {MAX_FILE_BYTES} bytes")));
        }
        let base = path.parent().unwrap_or(Path::new("."));
        Self::from_json(&text, base).map_err(invalid)
    }

    /// Parse a models file whose relative script paths are under `base`.
    pub fn from_json(text: &str, base: &Path) -> Result<Self, String> {
        let file: File = serde_json::from_str(text).map_err(|error| error.to_string())?;
        if file.schema_version != 1 || file.kind != "toolhost.models" {
            return Err("expected schemaVersion 1 and kind `toolhost.models`".to_owned());
        }
        let mut models = BTreeMap::new();
        for (name, entry) in file.models {
            let model =
                served(&name, entry, base).map_err(|reason| format!("model `{name}`: {reason}"))?;
            models.insert(name, model);
        }
        Ok(Self { models })
    }

    /// The model `name`, if `tenant` may use it. One answer for "no such
    /// model" and "not yours": a tenant cannot learn other tenants' names.
    pub fn get(&self, tenant: &str, name: &str) -> Option<&ServedModel> {
        self.models
            .get(name)
            .filter(|model| model.offered_to(tenant))
    }

    /// The names `tenant` may use.
    pub fn names_for(&self, tenant: &str) -> Vec<&str> {
        self.models
            .values()
            .filter(|model| model.offered_to(tenant))
            .map(|model| model.name.as_str())
            .collect()
    }

    pub fn len(&self) -> usize {
        self.models.len()
    }

    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }
}

fn served(name: &str, entry: Entry, base: &Path) -> Result<ServedModel, String> {
    if !crate::tenant::is_plain_name(name) {
        return Err(
            "a model name is 1 to 64 of A-Z a-z 0-9 . _ - (not starting with .)".to_owned(),
        );
    }
    let target = match (entry.kind.as_str(), &entry.url, &entry.path) {
        ("script", None, Some(path)) => base.join(path).to_string_lossy().into_owned(),
        ("script", _, _) => return Err("a script model has a `path` and no `url`".to_owned()),
        (_, Some(url), None) => url.clone(),
        _ => return Err("an HTTP model has a `url` and no `path`".to_owned()),
    };
    let spec: ModelSpec = format!("{}:{target}", entry.kind)
        .parse()
        .map_err(|error: ModelError| error.to_string())?;
    if let Some(variable) = &entry.key_variable
        && (variable.is_empty()
            || !variable
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_'))
    {
        return Err(format!("`{variable}` is not an environment variable name"));
    }
    if spec.kind == ModelKind::Script && entry.key_variable.is_some() {
        return Err("a script model takes no key".to_owned());
    }
    if let Some(chars) = entry.context_chars
        && chars < MIN_INPUT_CHARS
    {
        return Err(format!(
            "`contextChars` is {chars}; at least {MIN_INPUT_CHARS}"
        ));
    }
    if let Some(tenants) = &entry.tenants
        && tenants.is_empty()
    {
        return Err(
            "`tenants` names no tenant (leave it out to offer the model to all)".to_owned(),
        );
    }
    Ok(ServedModel {
        name: name.to_owned(),
        spec,
        options: HttpOptions {
            key_variable: entry.key_variable,
            stream: entry.stream,
            timeout: Duration::from_secs(entry.timeout_secs.unwrap_or(120).clamp(1, 3600)),
        },
        model_name: entry.model,
        max_output_tokens: entry.max_output_tokens,
        context_chars: entry.context_chars,
        tenants: entry.tenants,
        shared: Arc::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"{"schemaVersion":1,"kind":"toolhost.models","models":{
        "local":{"kind":"openai","url":"http://127.0.0.1:9/v1","keyVariable":"LOCAL_KEY","model":"m","tenants":["acme"]},
        "demo":{"kind":"script","path":"demo.json"}}}"#;

    #[test]
    fn a_model_is_offered_by_name_to_its_tenants_only() {
        let table = ModelTable::from_json(FILE, Path::new("/etc/toolhost")).expect("models");
        assert!(table.get("acme", "local").is_some());
        assert!(table.get("globex", "local").is_none());
        assert_eq!(table.names_for("globex"), vec!["demo"]);
        let demo = table.get("globex", "demo").expect("demo");
        assert_eq!(demo.spec.target, "/etc/toolhost/demo.json");
        // Never a URL, never a spec: a name is looked up, nothing else.
        assert!(table.get("acme", "openai:http://127.0.0.1:9/v1").is_none());
    }

    #[test]
    fn a_bad_entry_is_refused_with_its_name() {
        for bad in [
            r#"{"schemaVersion":1,"kind":"toolhost.models","models":{"x":{"kind":"openai"}}}"#,
            r#"{"schemaVersion":1,"kind":"toolhost.models","models":{"x":{"kind":"openai","url":"ftp://h"}}}"#,
            r#"{"schemaVersion":1,"kind":"toolhost.models","models":{"x":{"kind":"script","path":"a","keyVariable":"K"}}}"#,
            r#"{"schemaVersion":1,"kind":"toolhost.models","models":{"x":{"kind":"openai","url":"http://h","keyVariable":"A B"}}}"#,
            r#"{"schemaVersion":1,"kind":"toolhost.models","models":{"../x":{"kind":"script","path":"a"}}}"#,
            r#"{"schemaVersion":1,"kind":"toolhost.models","models":{"x":{"kind":"script","path":"a","extra":1}}}"#,
            r#"{"schemaVersion":2,"kind":"toolhost.models","models":{}}"#,
        ] {
            assert!(ModelTable::from_json(bad, Path::new(".")).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_http_model_is_one_client_while_its_key_stays_and_a_new_one_after() {
        let table = ModelTable::from_json(FILE, Path::new("/etc/toolhost")).expect("models");
        let local = table.get("acme", "local").expect("local");
        let first = local.open_shared(Some("key-1".into())).expect("open");
        let again = local.open_shared(Some("key-1".into())).expect("open");
        assert!(Arc::ptr_eq(&first, &again), "the same key: the same client");
        let rotated = local.open_shared(Some("key-2".into())).expect("open");
        assert!(
            !Arc::ptr_eq(&first, &rotated),
            "a rotated key: a new client"
        );
        let after = local.open_shared(Some("key-2".into())).expect("open");
        assert!(Arc::ptr_eq(&rotated, &after), "shared again from then on");
        let unset = local.open_shared(None).expect("open");
        assert!(!Arc::ptr_eq(&rotated, &unset), "an unset key: a new client");
        // A run that keeps its own copy of the model shares the client.
        let copy = local.clone();
        let shared = copy.open_shared(None).expect("open");
        assert!(
            Arc::ptr_eq(&unset, &shared),
            "one client per model, not per copy"
        );
    }
}
