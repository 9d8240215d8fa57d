//! The clock and id source the runtime reads, injectable so tests and
//! snapshots never drift (`FLOWC_NOW=2026-01-05T10:00:00Z` freezes the clock;
//! `FLOWC_SEED` makes ids deterministic).

use chrono::{DateTime, Utc};

pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
}

pub trait IdSource: Send + Sync {
    /// A fresh UUID-formatted id.
    fn next_id(&self) -> String;
}
