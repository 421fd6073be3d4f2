//! A model source that records every request its models are sent, with
//! the agent each was for, and answers from a script book.

use std::sync::{Arc, Mutex};

use toolhost_core::AgentModelRequest;
use toolhost_model::{AgentModel, ModelFuture, ModelSource, ScriptBook};

/// Every request the models were sent, with the agent it was for.
#[derive(Default)]
pub struct Seen(Mutex<Vec<(String, AgentModelRequest)>>);

impl Seen {
    pub fn of(&self, agent: &str) -> Vec<AgentModelRequest> {
        self.0
            .lock()
            .expect("seen")
            .iter()
            .filter(|(seen, _)| seen == agent)
            .map(|(_, request)| request.clone())
            .collect()
    }

    pub fn system_of(&self, agent: &str) -> String {
        self.of(agent)
            .first()
            .and_then(|request| request.system.clone())
            .unwrap_or_else(|| panic!("{agent} was asked with a system prompt"))
    }
}

pub struct Recording {
    agent: String,
    inner: Arc<dyn AgentModel>,
    seen: Arc<Seen>,
}

impl AgentModel for Recording {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn complete<'a>(&'a self, request: &'a AgentModelRequest) -> ModelFuture<'a> {
        self.seen
            .0
            .lock()
            .expect("seen")
            .push((self.agent.clone(), request.clone()));
        self.inner.complete(request)
    }

    fn skip_reply(&self) {
        self.inner.skip_reply();
    }
}

pub struct RecordingSource {
    pub book: Arc<ScriptBook>,
    pub seen: Arc<Seen>,
}

impl ModelSource for RecordingSource {
    fn model_for(&self, agent_id: &str) -> Arc<dyn AgentModel> {
        Arc::new(Recording {
            agent: agent_id.to_owned(),
            inner: self.book.model_for(agent_id),
            seen: Arc::clone(&self.seen),
        })
    }

    fn describe(&self) -> String {
        self.book.describe()
    }
}
