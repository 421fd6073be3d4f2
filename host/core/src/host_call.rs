//! The one error a host capability answers a guest's call with, whatever
//! the capability: the crates behind capabilities (workspace, skills, chat,
//! world info) convert their own errors into it, and the sandbox turns it
//! into what the guest sees in exactly one place
//! (`toolhost_sandbox::CallCore::answer`): a recoverable error is handed to
//! the tool, which reports it to the model; a system failure stops the
//! call as the call's host fault and fails the run; a passed deadline stops
//! the call like a guest running late.

/// How a host capability's work ended, when it did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostCallError {
    /// The model's request cannot be served as asked; it reads why.
    #[error("{code}: {message}")]
    Recoverable { code: String, message: String },
    /// Something is wrong on the host (an I/O error, a planted symlink).
    #[error("{code}: {message}")]
    System { code: String, message: String },
    /// The call's deadline passed while the host worked for it.
    #[error("the call's deadline passed")]
    DeadlinePassed,
}

impl HostCallError {
    pub fn recoverable(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Recoverable {
            code: code.into(),
            message: message.into(),
        }
    }

    pub fn system(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::System {
            code: code.into(),
            message: message.into(),
        }
    }
}
