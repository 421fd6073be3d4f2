//! The sandbox: tool components under wasmtime, each call in a fresh store
//! with fuel, an epoch deadline, an outer timeout, a total memory cap, table
//! and instance caps, and argument/output size caps.
//!
//! Lifecycle: [`Sandbox::new`] builds the shared engine (pooling allocator
//! when the machine allows it), the linker with WASI p2 (empty context),
//! `log` and `random`, and the capability layer the embedder names
//! ([`SandboxConfig::capabilities`]; the others live in
//! `toolhost-capabilities`, one module each, projecting the store onto their
//! own per-call state: [`CallState::project`]), and the epoch ticker. [`Sandbox::load`] checks a
//! component's integrity and imports, compiles it or reads it from the
//! [`cache`], links it once into an `InstancePre` and reads its descriptor.
//! [`Sandbox::call`] runs it.

pub mod cache;
mod call;
pub mod capability;
mod component;
mod engine;
mod failure;
mod host_state;
pub mod limits;
mod state;
mod ticker;

pub use call::CallReport;
pub use capability::{Capability, CapabilitySet, HostVersion};
pub use component::{ComponentSpec, LoadError, LoadEvent, LoadedFrom, ToolComponent, Trust};
pub use engine::{
    Allocator, AllocatorChoice, LinkCapabilities, Sandbox, SandboxConfig, SandboxError,
};
pub use failure::SandboxFailure;
pub use host_state::{CallCapabilities, CallCore, HostFault, RequestedEffect};
pub use limits::{Clamped, HostPolicy, LimitError, LimitOverrides, Limits};
pub use state::{CallEntropy, CallState, GuestLog, bindings};
