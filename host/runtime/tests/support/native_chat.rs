//! The guest SDK's `Chat` trait served straight from the host's bound chat:
//! `chat.search`'s own logic run natively, as the bench's baseline and the
//! tests' reference. Batches are packed by the same host code the
//! component's `chat-read.scan` uses, but cross no canonical ABI.

use std::sync::Arc;

use toolhost_capabilities::chat::{BoundChat, Role};
use toolhost_guest::ToolError;
use toolhost_guest::knowledge::{self, Chat, ChatInfo, ChatMessage, MessagePack};

fn sdk_role(role: Role) -> knowledge::Role {
    match role {
        Role::User => knowledge::Role::User,
        Role::Assistant => knowledge::Role::Assistant,
        Role::System => knowledge::Role::System,
    }
}

pub struct NativeChat(pub Arc<BoundChat>);

impl Chat for NativeChat {
    fn info(&self) -> Result<ChatInfo, ToolError> {
        let info = self.0.info();
        Ok(ChatInfo {
            user_name: info.user_name.clone(),
            character_name: info.character_name.clone(),
            group: info.group,
            message_count: info.message_count,
        })
    }

    fn messages(&self, start: u32, count: u32) -> Result<Vec<ChatMessage>, ToolError> {
        Ok(self
            .0
            .messages(start, count)
            .iter()
            .map(|message| ChatMessage {
                index: message.index(),
                role: sdk_role(message.role()),
                name: message.name().to_owned(),
                send_date: message.send_date().map(str::to_owned),
                text: message.text().to_owned(),
                swipes: message.swipes(),
            })
            .collect())
    }

    /// Packed exactly as the host packs a batch for the component.
    fn scan(&self, start: u32, count: u32) -> Result<MessagePack, ToolError> {
        let pack = self.0.pack(start, count);
        Ok(MessagePack {
            start: pack.start,
            texts: pack.packed.texts,
            text_ends: pack.packed.text_ends,
            roles: pack.roles.into_iter().map(sdk_role).collect(),
            name_ids: pack.packed.name_ids,
            names: pack.packed.names,
        })
    }
}
