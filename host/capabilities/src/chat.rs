//! `chat-read`: the run's chat, frozen at its input prefix. A run without a
//! chat is normal: the tool gets the recoverable `chat.not_found`.

use std::sync::Arc;

// The chat types a host application or a test of the runtime reads a
// chat with, so neither names the chat crate.
pub use toolhost_chat::{BoundChat, ChatFile, Role, generate_chat};
use toolhost_core::{Capability, HostCallError};
use toolhost_sandbox::{CallState, HostFault};
use wasmtime::component::Linker;

use crate::CallGrant;
use crate::bindings::toolhost::host::{capability_types as types, chat_read as chat};
use crate::lifecycle::{BindInputs, HostCapability};
use crate::view::{Projected, View, project};

/// Most messages one `messages` or `scan` call returns, whatever the tool asks.
const MAX_CHAT_BATCH: u32 = 1_000;

/// `chat-read`.
pub struct ChatRead;

impl HostCapability for ChatRead {
    const KEY: &'static str = "chat-read";
    type Bound = Arc<BoundChat>;
    type State = Arc<BoundChat>;

    /// The run's chat, if it is bound to one.
    fn bind(inputs: &BindInputs) -> Option<Self::Bound> {
        inputs.run.as_ref()?.chat.clone()
    }

    fn prepare(
        bound: Option<&Self::Bound>,
        grant: &CallGrant<'_>,
    ) -> Result<Option<Self::State>, HostFault> {
        Ok(bound.filter(|_| grant.has(Capability::ChatRead)).cloned())
    }

    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        chat::add_to_linker::<_, Projected<Self>>(linker, project::<Self>)
    }
}

type ChatView<'a> = View<'a, Arc<BoundChat>>;

impl ChatView<'_> {
    fn bound(&self) -> Result<Arc<BoundChat>, HostCallError> {
        self.state.clone().ok_or_else(|| {
            HostCallError::recoverable(
                "chat.not_found",
                "this run is not bound to a chat, so there is nothing to search or read",
            )
        })
    }
}

impl chat::Host for ChatView<'_> {
    fn info(&mut self) -> wasmtime::Result<Result<chat::ChatInfo, types::CapabilityError>> {
        let result = self.bound().map(|bound| {
            let info = bound.info();
            chat::ChatInfo {
                user_name: info.user_name.clone(),
                character_name: info.character_name.clone(),
                group: info.group,
                message_count: info.message_count,
            }
        });
        self.answer(result)
    }

    fn messages(
        &mut self,
        start: u32,
        count: u32,
    ) -> wasmtime::Result<Result<Vec<chat::ChatMessage>, types::CapabilityError>> {
        let result = self.bound().map(|bound| {
            bound
                .messages(start, count.min(MAX_CHAT_BATCH))
                .iter()
                .map(|message| chat::ChatMessage {
                    index: message.index(),
                    role: wit_role(message.role()),
                    name: message.name().to_owned(),
                    send_date: message.send_date().map(str::to_owned),
                    text: message.text().to_owned(),
                    swipes: message.swipes(),
                })
                .collect()
        });
        self.answer(result)
    }

    fn scan(
        &mut self,
        start: u32,
        count: u32,
    ) -> wasmtime::Result<Result<chat::MessagePack, types::CapabilityError>> {
        let result = self.bound().map(|bound| {
            let pack = bound.pack(start, count.min(MAX_CHAT_BATCH));
            chat::MessagePack {
                start: pack.start,
                texts: pack.packed.texts,
                text_ends: pack.packed.text_ends,
                roles: pack.roles.into_iter().map(wit_role).collect(),
                name_ids: pack.packed.name_ids,
                names: pack.packed.names,
            }
        });
        self.answer(result)
    }
}

fn wit_role(role: Role) -> chat::Role {
    match role {
        Role::User => chat::Role::User,
        Role::Assistant => chat::Role::Assistant,
        Role::System => chat::Role::System,
    }
}
