//! [`ModelSpec`]: which model a run talks to, as the CLI's `--model` gives
//! it: `KIND:WHERE`.
//!
//! | spec | model |
//! |---|---|
//! | `script:FILE` | a [`ScriptBook`] reading FILE (one scripted model per agent) |
//! | `openai:URL` | OpenAI Chat Completions at URL (`https://api.openai.com/v1`, or any compatible server) |
//! | `openai-responses:URL` | OpenAI Responses at URL |
//! | `anthropic:URL` | Anthropic Messages at URL (`https://api.anthropic.com/v1`) |
//! | `gemini:URL` | Gemini `generateContent` at URL (`https://generativelanguage.googleapis.com/v1beta`) |
//!
//! HTTP models read their key from an environment variable (by default
//! `OPENAI_API_KEY`, `ANTHROPIC_API_KEY` or `GEMINI_API_KEY`); when it is
//! not set no key is sent, which suits a local server.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use toolhost_providers::{GeminiSchemaMode, Provider};

use crate::{HttpModel, HttpModelConfig, ModelError, ModelSource, SameModel, ScriptBook};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    Script,
    Http(Provider),
}

impl ModelKind {
    /// The spec prefix of this kind.
    pub fn prefix(self) -> &'static str {
        match self {
            ModelKind::Script => "script",
            ModelKind::Http(Provider::OpenaiChat) => "openai",
            ModelKind::Http(Provider::OpenaiResponses) => "openai-responses",
            ModelKind::Http(Provider::Anthropic) => "anthropic",
            ModelKind::Http(Provider::Gemini { .. }) => "gemini",
        }
    }

    /// The environment variable an HTTP model's key is read from by default.
    pub fn default_key_variable(self) -> Option<&'static str> {
        match self {
            ModelKind::Script => None,
            ModelKind::Http(Provider::OpenaiChat | Provider::OpenaiResponses) => {
                Some("OPENAI_API_KEY")
            }
            ModelKind::Http(Provider::Anthropic) => Some("ANTHROPIC_API_KEY"),
            ModelKind::Http(Provider::Gemini { .. }) => Some("GEMINI_API_KEY"),
        }
    }
}

const KINDS: [ModelKind; 5] = [
    ModelKind::Script,
    ModelKind::Http(Provider::OpenaiChat),
    ModelKind::Http(Provider::OpenaiResponses),
    ModelKind::Http(Provider::Anthropic),
    ModelKind::Http(Provider::Gemini {
        schema: GeminiSchemaMode::JsonSchema,
    }),
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpec {
    pub kind: ModelKind,
    /// The script's path or the API root URL.
    pub target: String,
}

/// What an HTTP model needs beyond its spec.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Overrides the kind's default key variable.
    pub key_variable: Option<String>,
    pub stream: bool,
    pub timeout: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            key_variable: None,
            stream: false,
            timeout: Duration::from_secs(120),
        }
    }
}

impl FromStr for ModelSpec {
    type Err = ModelError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let known = || {
            KINDS
                .iter()
                .map(|kind| format!("{}:", kind.prefix()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let Some((prefix, target)) = text.split_once(':') else {
            return Err(ModelError::Configuration(format!(
                "`{text}` is not a model spec; write KIND:WHERE with KIND one of {}",
                known()
            )));
        };
        let kind = KINDS
            .into_iter()
            .find(|kind| kind.prefix() == prefix)
            .ok_or_else(|| {
                ModelError::Configuration(format!(
                    "unknown model kind `{prefix}`; known kinds: {}",
                    known()
                ))
            })?;
        if target.trim().is_empty() {
            return Err(ModelError::Configuration(format!(
                "`{text}` names no {}",
                if kind == ModelKind::Script {
                    "script file"
                } else {
                    "URL"
                }
            )));
        }
        if kind != ModelKind::Script
            && !(target.starts_with("http://") || target.starts_with("https://"))
        {
            return Err(ModelError::Configuration(format!(
                "`{target}` is not an http:// or https:// URL"
            )));
        }
        Ok(Self {
            kind,
            target: target.to_owned(),
        })
    }
}

impl ModelSpec {
    /// The environment variable an HTTP model's key is read from: the one
    /// `options` names, else the kind's default one.
    fn key_variable<'a>(&'a self, options: &'a HttpOptions) -> Option<&'a str> {
        options
            .key_variable
            .as_deref()
            .or(self.kind.default_key_variable())
    }

    /// The key an HTTP model would be opened with now (from
    /// [`key_variable`](Self::key_variable)); `None` when it is unset or
    /// empty (and for a script).
    pub fn api_key(&self, options: &HttpOptions) -> Option<String> {
        if self.kind == ModelKind::Script {
            return None;
        }
        self.key_variable(options)
            .and_then(|name| std::env::var(name).ok())
            .filter(|key| !key.is_empty())
    }

    /// Open the model(s) this spec names.
    pub fn open(&self, options: &HttpOptions) -> Result<Arc<dyn ModelSource>, ModelError> {
        match self.kind {
            ModelKind::Script => Ok(Arc::new(ScriptBook::load(&PathBuf::from(&self.target))?)),
            ModelKind::Http(provider) => {
                let variable = self.key_variable(options);
                let api_key = self.api_key(options);
                if api_key.is_none() {
                    tracing::info!(
                        variable = variable.unwrap_or("-"),
                        "no API key in the environment; sending requests without one"
                    );
                }
                Ok(Arc::new(SameModel(Arc::new(HttpModel::new(
                    HttpModelConfig {
                        provider,
                        base_url: self.target.clone(),
                        api_key,
                        stream: options.stream,
                        timeout: options.timeout,
                    },
                )?))))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_core::Classified;

    #[test]
    fn specs_parse_by_kind_and_keep_colons_in_the_target() {
        let spec: ModelSpec = "openai:http://127.0.0.1:8080/v1".parse().expect("spec");
        assert_eq!(spec.kind, ModelKind::Http(Provider::OpenaiChat));
        assert_eq!(spec.target, "http://127.0.0.1:8080/v1");
        let spec: ModelSpec = "openai-responses:https://api.openai.com/v1"
            .parse()
            .expect("spec");
        assert_eq!(spec.kind, ModelKind::Http(Provider::OpenaiResponses));
        let spec: ModelSpec = "script:examples/demo.json".parse().expect("spec");
        assert_eq!(spec.kind, ModelKind::Script);
        assert_eq!(spec.target, "examples/demo.json");
    }

    #[test]
    fn bad_specs_say_what_is_accepted() {
        for bad in ["gpt-4o", "mistral:http://x", "anthropic:", "gemini:ftp://x"] {
            let error = bad.parse::<ModelSpec>().expect_err(bad);
            assert_eq!(error.code(), "model.configuration_invalid", "{bad}");
        }
        let error = "mistral:http://x".parse::<ModelSpec>().expect_err("kind");
        assert!(error.to_string().contains("openai-responses:"), "{error}");
    }
}
