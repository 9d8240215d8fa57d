//! A conversation's (or workflow run's) whole state, serializable so any
//! store can keep it: position, data, context, history, the pending
//! directive, signal records, step records and the version a store uses
//! for compare-and-swap.

use super::directive::Emission;
use crate::ir::{FlowId, StepId};
use crate::llm::{Message, Usage};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub type Data = BTreeMap<String, serde_json::Value>;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Session {
    pub id: String,
    /// Hash of the program the session runs; a session is refused by a
    /// different program (its ids would mean other things).
    pub program_hash: String,
    pub flow: Option<FlowId>,
    /// The current step: the one that asked and waits for an answer, or
    /// where an interrupted auto chain resumes.
    pub step: Option<StepId>,
    /// How many times the current step has asked.
    pub asks: u32,
    /// Set fields only; an absent field is unset (null).
    pub data: Data,
    /// What the current step showed when it last asked, if it collects a
    /// confirmation: the values its consent is about ([`Step::confirms`]).
    ///
    /// [`Step::confirms`]: crate::ir::Step::confirms
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered: Option<Offered>,
    pub context: Data,
    pub history: Vec<Message>,
    /// Armed by a post-phase signal; applied first thing next turn.
    pub pending: Option<Emission>,
    pub signals: BTreeMap<String, SignalRecord>,
    pub turns: u32,
    pub usage: Usage,
    /// Incremented on every saved turn (stores compare-and-swap on it).
    pub version: u64,
}

/// The values a confirming step asked about, keyed by field name (an unset
/// field is `null`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Offered {
    pub flow: FlowId,
    pub step: StepId,
    pub values: BTreeMap<String, serde_json::Value>,
}

/// What a signal's `behavior` needs to remember.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalRecord {
    pub fired: u32,
    /// RFC 3339.
    pub last_fired_at: Option<String>,
}

impl Session {
    pub fn new(id: impl Into<String>, program_hash: impl Into<String>) -> Session {
        Session { id: id.into(), program_hash: program_hash.into(), ..Session::default() }
    }
}

/// A stable hash of a program's IR, for [`Session::program_hash`].
pub fn program_hash(program: &crate::ir::Program) -> String {
    // FNV-1a over the IR's compact JSON without spans: stable across Rust
    // versions and platforms, unlike `DefaultHasher`, and unchanged by edits
    // that only move code around.
    struct Fnv1a(u64);
    impl std::io::Write for Fnv1a {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            for byte in bytes {
                self.0 ^= u64::from(*byte);
                self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
            }
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut hasher = Fnv1a(0xcbf2_9ce4_8422_2325);
    // Writing into the hasher cannot fail, and the IR has no map with
    // non-string keys.
    let _ = crate::source::write_json(program, false, false, &mut hasher);
    let hash = hasher.0;
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sessions stored before `offered` existed still load.
    #[test]
    fn a_session_without_an_offer_loads() {
        let stored = serde_json::to_value(Session::new("s1", "hash")).unwrap_or_default();
        assert!(stored.get("offered").is_none(), "nothing stored when nothing was offered");
        let loaded: Result<Session, _> = serde_json::from_value(stored);
        assert!(loaded.is_ok_and(|session| session.offered.is_none()));
    }
}
