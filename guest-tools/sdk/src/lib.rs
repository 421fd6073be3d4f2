//! `toolhost-guest`: write a toolhost tool component in Rust.
//!
//! The shortest way is a [`TypedTool`]: an argument struct deriving serde's
//! `Deserialize` and schemars' `JsonSchema` gives the input schema and the
//! parsing (see [`typed`]). The general way is a type implementing [`Tool`],
//! exported with [`export_tool!`]:
//!
//! ```ignore
//! use toolhost_guest::{Arguments, Descriptor, Output, Tool, ToolError};
//!
//! struct Echo;
//!
//! impl Tool for Echo {
//!     fn describe() -> Descriptor {
//!         Descriptor::new("demo.echo", "Repeat the text back.")
//!             .input_schema(serde_json::json!({
//!                 "type": "object",
//!                 "properties": { "text": { "type": "string" } },
//!                 "required": ["text"],
//!                 "additionalProperties": false
//!             }))
//!     }
//!
//!     fn call(args: Arguments) -> Result<Output, ToolError> {
//!         args.only(&["text"])?;
//!         Ok(Output::text(args.raw_str("text")?))
//!     }
//! }
//!
//! toolhost_guest::export_tool!(Echo);
//! ```
//!
//! A builtin (a crate with a `tool.json`) whose call is one function writes
//! one line instead: [`builtin_tool!`] (or [`builtin_control_tool!`]).
//!
//! Build with `cargo build --target wasm32-wasip2`; the resulting `.wasm` is a
//! component. Everything except the host capability calls also compiles
//! natively, so tool logic is unit-tested with a plain `cargo test`.

pub mod agents;
pub mod args;
pub mod catalog;
pub mod clock;
pub mod control;
pub mod http;
pub mod knowledge;
pub mod line_read;
pub mod log;
pub mod markdown;
pub mod output;
pub mod random;
pub mod search_result;
// The SDK's own tests use the doubles too.
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod typed;
pub mod workspace;

/// The text rules shared by every reading and searching tool (line windows,
/// metrics, search scoring): `toolhost-text`.
pub use toolhost_text as text;

pub use args::Arguments;
pub use output::{Annotations, Descriptor, Output, ToolError};
pub use typed::TypedTool;

/// Raw bindings of `toolhost:host/all-capabilities@0.1.4`. Tool code normally
/// uses the safe wrappers ([`log`], [`random`]) instead.
///
/// Only the capabilities a tool actually calls end up as imports of its
/// component; the host checks them against the tool's grant at load.
pub mod bindings {
    wit_bindgen::generate!({
        world: "toolhost:host/all-capabilities@0.1.4",
        path: ["../../wit/tool", "../../wit/host-0.1.4"],
        generate_all,
        pub_export_macro: true,
        export_macro_name: "__export_raw",
        default_bindings_module: "toolhost_guest::bindings",
    });
}

pub use bindings::toolhost::tool::types::{
    AwaitMode, AwaitRequest, CommitMode, CommitRequest, DelegateRequest, Effect, FinishRequest,
    HandoffRequest, TaskReturnRequest,
};

/// A tool: a description and one call. Every call runs in a fresh instance,
/// so a tool keeps no state between calls.
pub trait Tool {
    /// The descriptor the host reads once at load.
    fn describe() -> Descriptor;
    /// Run once on the model's arguments (already checked to be a JSON object).
    fn call(args: Arguments) -> Result<Output, ToolError>;
}

/// The descriptor of a builtin, read from the `tool.json` beside its
/// `Cargo.toml` — the one place its name, title, flags and descriptor are
/// written (the host's table of builtins is generated from the same file).
#[macro_export]
macro_rules! builtin_descriptor {
    () => {
        $crate::Descriptor::from_tool_json(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tool.json"
        )))
    };
}

/// A builtin whose call is one function, whole: declares the unit struct
/// `$tool`, implements [`Tool`] for it — the descriptor from its `tool.json`
/// ([`builtin_descriptor!`]), the call `$call` — and exports it
/// ([`export_tool!`]). `$call` is a function or a closure capturing nothing,
/// from [`Arguments`] to `Result<Output, ToolError>`:
///
/// ```ignore
/// toolhost_guest::builtin_tool!(ChatSearch, |args| search_chat(&args, &knowledge::Host));
/// ```
///
/// Every builtin has the same preamble, so it is written once here; the
/// tool's crate keeps only its logic, which takes its host capability as a
/// parameter and is tested natively against the SDK's doubles.
#[macro_export]
macro_rules! builtin_tool {
    ($tool:ident, $call:expr $(,)?) => {
        $crate::__one_function_tool!($tool, $crate::builtin_descriptor!(), $call, call);
    };
}

/// [`builtin_tool!`] for a builtin control tool: exported with
/// [`export_control_tool!`], so the effect on its [`Output`] is requested
/// from the host.
#[macro_export]
macro_rules! builtin_control_tool {
    ($tool:ident, $call:expr $(,)?) => {
        $crate::__one_function_tool!($tool, $crate::builtin_descriptor!(), $call, call_control);
    };
}

/// The expansion of [`builtin_tool!`] and [`builtin_control_tool!`], the
/// descriptor given (so the SDK's own tests can name one without a
/// `tool.json`).
#[doc(hidden)]
#[macro_export]
macro_rules! __one_function_tool {
    ($tool:ident, $describe:expr, $call:expr, $export:ident) => {
        pub struct $tool;

        impl $crate::Tool for $tool {
            fn describe() -> $crate::Descriptor {
                $describe
            }

            fn call(
                args: $crate::Arguments,
            ) -> ::std::result::Result<$crate::Output, $crate::ToolError> {
                // Typed here, so a closure's parameter needs no annotation.
                let call: fn(
                    $crate::Arguments,
                ) -> ::std::result::Result<$crate::Output, $crate::ToolError> = $call;
                call(args)
            }
        }

        $crate::__export_tool_with!($tool, $export);
    };
}

/// Export a [`Tool`] as this component's `toolhost:tool/tool@0.1.0`.
///
/// Expands to nothing when not compiling for wasm, so the tool's crate can
/// also be linked natively (tests, benchmarks) next to other tools.
#[macro_export]
macro_rules! export_tool {
    ($tool:ty) => {
        $crate::__export_tool_with!($tool, call);
    };
}

/// Export a builtin control tool: like [`export_tool!`], and the effect on
/// its [`Output`] is requested from the host through `toolhost:control`
/// (world `control-tool`; never granted to an extension).
#[macro_export]
macro_rules! export_control_tool {
    ($tool:ty) => {
        $crate::__export_tool_with!($tool, call_control);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __export_tool_with {
    ($tool:ty, $call:ident) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct __ToolhostExport;

            impl $crate::bindings::exports::toolhost::tool::tool::Guest for __ToolhostExport {
                fn describe() -> $crate::bindings::toolhost::tool::types::Descriptor {
                    $crate::__private::describe::<$tool>()
                }

                fn call(
                    arguments: ::std::string::String,
                ) -> ::std::result::Result<
                    $crate::bindings::toolhost::tool::types::ToolOutput,
                    $crate::bindings::toolhost::tool::types::ToolError,
                > {
                    $crate::__private::$call::<$tool>(&arguments)
                }
            }

    $crate::bindings::__export_raw!(__ToolhostExport with_types_in $crate::bindings);
        };
        // Natively nothing is exported; still name the tool so the compiler
        // checks it implements `Tool` and does not call it unused.
        #[cfg(not(target_arch = "wasm32"))]
        const _: fn($crate::Arguments) -> ::std::result::Result<$crate::Output, $crate::ToolError> =
            <$tool as $crate::Tool>::call;
    };
}

#[doc(hidden)]
pub mod __private {
    use crate::bindings::toolhost::tool::types as wit;
    use crate::{Arguments, Tool};

    pub fn describe<T: Tool>() -> wit::Descriptor {
        T::describe().into_wit()
    }

    pub fn call<T: Tool>(arguments: &str) -> Result<wit::ToolOutput, wit::ToolError> {
        match Arguments::parse(arguments).and_then(T::call) {
            Ok(output) if output.effect.is_some() => Err(crate::ToolError::new(
                "tool.effect_refused",
                "this tool is not a control tool: only the builtin control tools change the run",
            )
            .into_wit()),
            Ok(output) => Ok(output.into_wit()),
            Err(error) => Err(error.into_wit()),
        }
    }

    /// A control tool's call: its effect is requested from the host through
    /// `toolhost:control`, and the output the host reads carries none.
    pub fn call_control<T: Tool>(arguments: &str) -> Result<wit::ToolOutput, wit::ToolError> {
        let requested = Arguments::parse(arguments)
            .and_then(T::call)
            .and_then(|mut output| {
                if let Some(effect) = output.effect.take() {
                    crate::control::request(&effect)?;
                }
                Ok(output)
            });
        match requested {
            Ok(output) => Ok(output.into_wit()),
            Err(error) => Err(error.into_wit()),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Arguments, Descriptor, Output, Tool, ToolError};

    fn echo(args: Arguments) -> Result<Output, ToolError> {
        args.only(&["text"])?;
        Ok(Output::text(args.raw_str("text")?))
    }

    crate::__one_function_tool!(
        Echo,
        Descriptor::new("demo.echo", "Repeat the text back."),
        echo,
        call
    );

    crate::__one_function_tool!(
        Shout,
        Descriptor::new("demo.shout", "Repeat the text louder."),
        |args| echo(args).map(|output| Output::text(output.content.to_uppercase())),
        call_control
    );

    fn call<T: Tool>(value: serde_json::Value) -> Result<Output, ToolError> {
        T::call(Arguments::from_value(value).expect("object"))
    }

    #[test]
    fn a_one_function_tool_describes_itself_and_calls_its_function() {
        assert_eq!(Echo::describe().native_name, "demo.echo");
        let output = call::<Echo>(serde_json::json!({"text": "hi"})).expect("echo");
        assert_eq!(output.content, "hi");
        let refused = call::<Echo>(serde_json::json!({"other": 1})).expect_err("refused");
        assert_eq!(refused.code, "tool.invalid_arguments");
    }

    #[test]
    fn a_closure_is_a_tool_function_too() {
        assert_eq!(Shout::describe().native_name, "demo.shout");
        let output = call::<Shout>(serde_json::json!({"text": "hi"})).expect("shout");
        assert_eq!(output.content, "HI");
    }
}
