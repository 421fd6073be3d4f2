//! The host side of the read-only capabilities added in 0.1.2: the run's
//! chat (`chat-read`), its activated world info (`worldinfo-read`) and the
//! installed skills an agent may see (`skill-read`).
//!
//! A run without a chat, world info or skills is normal: the tool gets the
//! recoverable error the model reads (`chat.not_found`,
//! `worldinfo.activation_unavailable`, `skill.not_visible`). A system failure
//! in a host crate (an I/O error, a planted link the kernel refused) stops
//! the call as the call's [`HostFault`], like the workspace.

use std::sync::Arc;

use toolhost_chat::Role;
use toolhost_skills::{SkillBudget, SkillError, SkillLibrary, SkillPolicy};
use toolhost_worldinfo::Activation;

use crate::state::CallState;
use crate::state::bindings::toolhost::host::{
    capability_types as types, chat_read as chat, skill_read as skills, worldinfo_read as worldinfo,
};
use crate::workspace::HostFault;

/// Most messages one `messages` call returns, whatever the tool asks.
const MAX_CHAT_BATCH: u32 = 1_000;

/// What a call may read of the installed skills: the library, the profile's
/// visibility, and the invocation's budget (shared by all its calls).
#[derive(Debug, Clone)]
pub struct SkillAccess {
    pub library: Arc<SkillLibrary>,
    pub policy: SkillPolicy,
    pub budget: Arc<SkillBudget>,
}

fn recoverable(code: &str, message: impl Into<String>) -> types::CapabilityError {
    types::CapabilityError {
        code: code.to_owned(),
        message: message.into(),
    }
}

impl CallState {
    /// A recoverable error goes to the tool; a system one stops the call.
    fn answer_capability<T>(
        &mut self,
        result: Result<T, (bool, &'static str, String)>,
    ) -> wasmtime::Result<Result<T, types::CapabilityError>> {
        match result {
            Ok(value) => Ok(Ok(value)),
            Err((false, code, message)) => Ok(Err(recoverable(
                code,
                crate::workspace::model_text(&message),
            ))),
            Err((true, code, message)) => {
                let fault = HostFault {
                    code: code.to_owned(),
                    message,
                };
                let error = wasmtime::Error::new(fault.clone());
                self.host_fault.get_or_insert(fault);
                Err(error)
            }
        }
    }
}

fn skill_error(error: SkillError) -> (bool, &'static str, String) {
    (error.is_system(), error.code(), error.message().to_owned())
}

fn not_bound() -> (bool, &'static str, String) {
    (
        false,
        "chat.not_found",
        "this run is not bound to a chat, so there is nothing to search or read".to_owned(),
    )
}

impl types::Host for CallState {}

impl chat::Host for CallState {
    fn info(&mut self) -> wasmtime::Result<Result<chat::ChatInfo, types::CapabilityError>> {
        let result = match self.context.chat.clone() {
            None => Err(not_bound()),
            Some(bound) => {
                let info = bound.info();
                Ok(chat::ChatInfo {
                    user_name: info.user_name.clone(),
                    character_name: info.character_name.clone(),
                    group: info.group,
                    message_count: info.message_count,
                })
            }
        };
        self.answer_capability(result)
    }

    fn messages(
        &mut self,
        start: u32,
        count: u32,
    ) -> wasmtime::Result<Result<Vec<chat::ChatMessage>, types::CapabilityError>> {
        let result = match self.context.chat.clone() {
            None => Err(not_bound()),
            Some(bound) => Ok(bound
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
                .collect()),
        };
        self.answer_capability(result)
    }

    fn scan(
        &mut self,
        start: u32,
        count: u32,
    ) -> wasmtime::Result<Result<chat::MessagePack, types::CapabilityError>> {
        let result = match self.context.chat.clone() {
            None => Err(not_bound()),
            Some(bound) => {
                let pack = bound.pack(start, count.min(MAX_CHAT_BATCH));
                Ok(chat::MessagePack {
                    start: pack.start,
                    texts: pack.packed.texts,
                    text_ends: pack.packed.text_ends,
                    roles: pack.roles.into_iter().map(wit_role).collect(),
                    name_ids: pack.packed.name_ids,
                    names: pack.packed.names,
                })
            }
        };
        self.answer_capability(result)
    }
}

fn wit_role(role: Role) -> chat::Role {
    match role {
        Role::User => chat::Role::User,
        Role::Assistant => chat::Role::Assistant,
        Role::System => chat::Role::System,
    }
}

impl worldinfo::Host for CallState {
    fn activated(
        &mut self,
    ) -> wasmtime::Result<Result<worldinfo::Activation, types::CapabilityError>> {
        let result = match self.context.worldinfo.clone() {
            None => Err((
                false,
                "worldinfo.activation_unavailable",
                "no world info was activated for this run".to_owned(),
            )),
            Some(activation) => Ok(activation_record(&activation)),
        };
        self.answer_capability(result)
    }
}

fn activation_record(activation: &Activation) -> worldinfo::Activation {
    worldinfo::Activation {
        entries: activation
            .entries()
            .iter()
            .map(|entry| worldinfo::Entry {
                index: u32::try_from(entry.index).unwrap_or(u32::MAX),
                world: entry.world.clone(),
                uid: entry.uid.clone(),
                display_name: entry.display_name.clone(),
                constant: entry.constant,
                position: entry.position.clone(),
                content: entry.content.clone(),
                reference: entry.reference.clone(),
            })
            .collect(),
        timestamp_ms: activation.timestamp_ms(),
        trigger: activation.trigger().map(str::to_owned),
    }
}

impl skills::Host for CallState {
    fn list_skills(&mut self) -> wasmtime::Result<Vec<skills::Skill>> {
        Ok(match &self.context.skills {
            None => Vec::new(),
            Some(access) => access
                .library
                .visible(&access.policy)
                .into_iter()
                .map(|skill| skills::Skill {
                    name: skill.name,
                    description: skill.description,
                    scope: skill.scope.as_str().to_owned(),
                })
                .collect(),
        })
    }

    fn files(
        &mut self,
        name: String,
    ) -> wasmtime::Result<Result<Vec<skills::SkillFile>, types::CapabilityError>> {
        let result = match self.context.skills.clone() {
            None => Err(no_skills(&name)),
            Some(access) => access
                .library
                .files(&access.policy, &name)
                .map(|files| {
                    files
                        .into_iter()
                        .map(|file| skills::SkillFile {
                            path: file.path,
                            bytes: file.bytes,
                        })
                        .collect()
                })
                .map_err(skill_error),
        };
        self.answer_capability(result)
    }

    fn read_text(
        &mut self,
        name: String,
        path: String,
    ) -> wasmtime::Result<Result<skills::SkillText, types::CapabilityError>> {
        let result = match self.context.skills.clone() {
            None => Err(no_skills(&name)),
            Some(access) => access
                .library
                .read_text(&access.policy, &name, &path)
                .map_err(skill_error)
                .and_then(|text| {
                    // An extension is charged for everything it reads, when
                    // it reads it: it is not trusted to charge what it shows.
                    if self.trust == crate::Trust::Extension {
                        let chars = text.text.chars().count() as u64;
                        access.budget.charge(chars).map_err(skill_error)?;
                    }
                    Ok(skills::SkillText {
                        path: text.path,
                        text: text.text,
                        sha256: text.sha256,
                    })
                }),
        };
        self.answer_capability(result)
    }

    fn read_budget(&mut self) -> wasmtime::Result<skills::Budget> {
        Ok(match &self.context.skills {
            None => skills::Budget {
                per_call: 0,
                remaining: 0,
            },
            Some(access) => skills::Budget {
                per_call: access.budget.call_allowance(),
                remaining: access.budget.remaining(),
            },
        })
    }

    fn charge(&mut self, chars: u64) -> wasmtime::Result<Result<(), types::CapabilityError>> {
        let result = match self.context.skills.clone() {
            None if chars == 0 => Ok(()),
            None => Err((
                false,
                "skill.read_budget_exhausted",
                "this run has no skill read budget".to_owned(),
            )),
            // Already charged when it read (see `read_text`).
            Some(_) if self.trust == crate::Trust::Extension => Ok(()),
            Some(access) => access.budget.charge(chars).map_err(skill_error),
        };
        self.answer_capability(result)
    }
}

fn no_skills(name: &str) -> (bool, &'static str, String) {
    (
        false,
        "skill.not_visible",
        format!("no skill `{name}` is installed for this run"),
    )
}
