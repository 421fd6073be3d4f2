//! What a tool returns: its descriptor, a successful output, or a recoverable error.

use serde::Serialize;
use serde_json::Value;

use crate::Effect;
use crate::bindings::toolhost::tool::types as wit;

/// Behaviour hints (see `annotations` in `wit/tool/tool.wit`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Annotations {
    pub read_only: bool,
    pub mutating: bool,
    pub control: bool,
    pub idempotent: bool,
    pub open_world: bool,
    pub source_kind: Option<String>,
}

impl Annotations {
    /// Reads and changes nothing; the same arguments give the same answer.
    pub fn read_only() -> Self {
        Self {
            read_only: true,
            idempotent: true,
            ..Self::default()
        }
    }

    /// Returns an effect for the host to apply (commit, finish, delegate,
    /// ...); the call itself changes nothing. Only builtins may.
    pub fn control() -> Self {
        Self {
            control: true,
            ..Self::default()
        }
    }

    /// What the tool (or its effect) changes lives on after the run.
    pub fn mutating(mut self) -> Self {
        self.mutating = true;
        self
    }

    pub fn not_idempotent(mut self) -> Self {
        self.idempotent = false;
        self
    }

    pub fn source_kind(mut self, kind: &str) -> Self {
        self.source_kind = Some(kind.to_owned());
        self
    }
}

/// A tool's self-description.
#[derive(Debug, Clone, PartialEq)]
pub struct Descriptor {
    pub native_name: String,
    pub title: Option<String>,
    pub description: String,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    pub annotations: Annotations,
}

impl Descriptor {
    /// A tool taking no arguments; refine with the builder methods.
    pub fn new(native_name: &str, description: &str) -> Self {
        Self {
            native_name: native_name.to_owned(),
            title: None,
            description: description.to_owned(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {},
                "additionalProperties": false
            }),
            output_schema: None,
            annotations: Annotations::default(),
        }
    }

    pub fn title(mut self, title: &str) -> Self {
        self.title = Some(title.to_owned());
        self
    }

    pub fn input_schema(mut self, schema: Value) -> Self {
        self.input_schema = schema;
        self
    }

    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    pub fn annotations(mut self, annotations: Annotations) -> Self {
        self.annotations = annotations;
        self
    }

    /// The descriptor a builtin's `tool.json` declares (see
    /// [`builtin_descriptor!`](crate::builtin_descriptor)): `name`,
    /// `title`, `description`, `annotations` (each boolean `false` when
    /// absent), `inputSchema` and `outputSchema`. The host's build reads
    /// the same file into its table of builtins and checks it there, so a
    /// file that does not load here never reaches a build.
    ///
    /// # Panics
    /// On a file that is not such a descriptor: it is compiled in, so this
    /// is a broken build, not input.
    pub fn from_tool_json(text: &str) -> Self {
        let file: Value = serde_json::from_str(text).expect("tool.json is JSON");
        let string = |key: &str| file.get(key).and_then(Value::as_str).map(str::to_owned);
        let notes = file.get("annotations").cloned().unwrap_or(Value::Null);
        let flag = |key: &str| notes.get(key).and_then(Value::as_bool).unwrap_or(false);
        Self {
            native_name: string("name").expect("tool.json has a name"),
            title: string("title"),
            description: string("description").expect("tool.json has a description"),
            input_schema: file
                .get("inputSchema")
                .cloned()
                .expect("tool.json has an inputSchema"),
            output_schema: file.get("outputSchema").cloned(),
            annotations: Annotations {
                read_only: flag("readOnly"),
                mutating: flag("mutating"),
                control: flag("control"),
                idempotent: flag("idempotent"),
                open_world: flag("openWorld"),
                source_kind: notes
                    .get("sourceKind")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            },
        }
    }

    pub(crate) fn into_wit(self) -> wit::Descriptor {
        wit::Descriptor {
            native_name: self.native_name,
            title: self.title,
            description: self.description,
            input_schema: to_json(&self.input_schema),
            output_schema: self.output_schema.as_ref().map(to_json),
            annotations: wit::Annotations {
                read_only: self.annotations.read_only,
                mutating: self.annotations.mutating,
                control: self.annotations.control,
                idempotent: self.annotations.idempotent,
                open_world: self.annotations.open_world,
                source_kind: self.annotations.source_kind,
            },
        }
    }
}

/// A successful call: Markdown for the model plus facts for audit and UIs.
#[derive(Debug, Clone)]
pub struct Output {
    pub content: String,
    /// Serialized once, when set: JSON text ready for the host.
    pub structured: Option<String>,
    pub resource_refs: Vec<String>,
    pub effect: Option<Effect>,
}

impl Output {
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            structured: None,
            resource_refs: Vec::new(),
            effect: None,
        }
    }

    /// Attach audit/UI facts. Serialize a typed struct rather than building a
    /// `serde_json::Value`: it is the cheaper path inside a call.
    pub fn structured(mut self, structured: impl Serialize) -> Self {
        self.structured = Some(to_json(&structured));
        self
    }

    /// The structured facts parsed back (for tests and native callers).
    pub fn structured_value(&self) -> Option<Value> {
        self.structured
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
    }

    pub fn resource_ref(mut self, reference: impl Into<String>) -> Self {
        self.resource_refs.push(reference.into());
        self
    }

    /// [`resource_ref`](Self::resource_ref) for each of `references`, in
    /// order: a search's or a read's one reference per hit or message.
    pub fn resource_refs_from<I>(mut self, references: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.resource_refs
            .extend(references.into_iter().map(Into::into));
        self
    }

    pub fn effect(mut self, effect: Effect) -> Self {
        self.effect = Some(effect);
        self
    }

    pub(crate) fn into_wit(self) -> wit::ToolOutput {
        wit::ToolOutput {
            content: self.content,
            structured: self.structured,
            resource_refs: self.resource_refs,
            effect: self.effect,
        }
    }
}

/// A recoverable failure the model reads (`code: message`) before it tries again.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    pub code: String,
    pub message: String,
    /// JSON text, like [`Output::structured`].
    pub structured: Option<String>,
}

impl ToolError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            structured: None,
        }
    }

    /// `tool.invalid_arguments`: the arguments break the tool's schema.
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        Self::new("tool.invalid_arguments", message)
    }

    pub fn structured(mut self, structured: impl Serialize) -> Self {
        self.structured = Some(to_json(&structured));
        self
    }

    pub(crate) fn into_wit(self) -> wit::ToolError {
        wit::ToolError {
            code: self.code,
            message: self.message,
            structured: self.structured,
        }
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ToolError {}

/// JSON text of `value`. Serializing plain data cannot fail; should a type
/// with a failing `Serialize` slip in, the host gets an explicit marker
/// instead of the guest trapping.
fn to_json(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|error| {
        serde_json::json!({ "serializationError": error.to_string() }).to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_kept_in_the_order_they_are_given() {
        let output = Output::text("x")
            .resource_ref("a")
            .resource_refs_from(["b", "c"])
            .resource_refs_from(Vec::<String>::new());
        assert_eq!(output.resource_refs, ["a", "b", "c"]);
    }
}
