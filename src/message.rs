//! A message of a conversation: who said it and what. A session's history
//! and transcript are made of these, and the model is shown them, so the
//! type belongs to neither the runtime nor the providers: both (and the
//! stores) import it from here.
#![warn(missing_docs)]

use serde::{Deserialize, Serialize};

/// One message of a conversation, as the session keeps it and a model is
/// shown it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What was said, as written.
    pub text: String,
}

/// Who said a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The person talking to the agent.
    User,
    /// The agent (the model's reply, or what the program said).
    Assistant,
}
