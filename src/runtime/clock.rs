//! The clock and id source the runtime reads, injectable so tests and
//! snapshots never drift (`FLOWC_NOW=2026-01-05T10:00:00Z` freezes the clock;
//! `FLOWC_SEED` makes ids deterministic).
//!
//! The two variables are independent: a frozen clock does not imply
//! deterministic ids, so a snapshot test sets both.

#![warn(missing_docs)]

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The time a run reads: the system's, or a fixed one for tests and replays.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> DateTime<Utc>;
}

/// Where new session and run ids come from.
pub trait IdSource: Send + Sync {
    /// A fresh UUID-formatted id.
    fn next_id(&self) -> String;
}

/// The clock and id source a run uses.
pub type ClockAndIds = (Arc<dyn Clock>, Arc<dyn IdSource>);

/// Why the environment does not describe a clock.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClockError {
    #[error("FLOWC_NOW=`{value}` is not a time; write RFC 3339 (2026-01-05T10:00:00Z) or a date (2026-01-05)")]
    /// `FLOWC_NOW` holds no time.
    InvalidNow {
        /// The variable's value.
        value: String,
    },
}

/// The time a `wait` of `wait_ms` started at `now` ends, or `None` when it
/// is past the latest time a timestamp can hold (about the year 262,000): the
/// compiler bounds `wait`, but a program built by other means is not
/// checked, and an overflow must fail the run, not crash it.
pub fn resume_time(now: DateTime<Utc>, wait_ms: u64) -> Option<DateTime<Utc>> {
    let wait = chrono::TimeDelta::try_milliseconds(i64::try_from(wait_ms).ok()?)?;
    now.checked_add_signed(wait)
}

/// Why a `wait` whose [`resume_time`] is `None` stops the run.
pub fn wait_out_of_range(wait_ms: u64) -> String {
    format!("a wait of {wait_ms} ms ends past the latest time flowc can record; wait less")
}

/// The real time.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A frozen time: every reading is the same instant, so durations are 0.
#[derive(Clone, Copy, Debug)]
pub struct FixedClock(pub DateTime<Utc>);

impl FixedClock {
    /// Reads RFC 3339 (`2026-01-05T10:00:00Z`, any offset), a datetime with
    /// no offset (UTC), or a bare date (midnight UTC).
    pub fn parse(text: &str) -> Result<FixedClock, ClockError> {
        let trimmed = text.trim();
        let instant = DateTime::parse_from_rfc3339(trimmed)
            .map(|datetime| datetime.to_utc())
            .ok()
            .or_else(|| {
                NaiveDateTime::parse_from_str(trimmed, "%Y-%m-%dT%H:%M:%S%.f").ok().map(|datetime| datetime.and_utc())
            })
            .or_else(|| {
                NaiveDate::parse_from_str(trimmed, "%Y-%m-%d")
                    .ok()
                    .and_then(|date| date.and_hms_opt(0, 0, 0))
                    .map(|datetime| datetime.and_utc())
            });
        instant.map(FixedClock).ok_or_else(|| ClockError::InvalidNow { value: text.to_string() })
    }
}

impl Clock for FixedClock {
    fn now(&self) -> DateTime<Utc> {
        self.0
    }
}

/// UUID v4 from the operating system's random source.
#[derive(Debug, Default)]
pub struct RandomIds {
    /// Only used if the OS source fails, which `getrandom` reports for
    /// broken sandboxes: ids must still be unique within the process.
    fallback: AtomicU64,
}

impl IdSource for RandomIds {
    fn next_id(&self) -> String {
        let mut bytes = [0u8; 16];
        if getrandom::fill(&mut bytes).is_err() {
            let nanos = Utc::now().timestamp_nanos_opt().unwrap_or_default();
            let count = self.fallback.fetch_add(1, Ordering::Relaxed);
            let mut state = nanos.unsigned_abs() ^ u64::from(std::process::id()).rotate_left(32) ^ count;
            bytes = random_bytes(&mut state);
        }
        format_uuid_v4(bytes)
    }
}

/// Deterministic UUID-formatted ids (version 4 bits set) from a seed: the
/// same seed gives the same sequence in every run.
#[derive(Debug)]
pub struct SeededIds {
    state: AtomicU64,
}

impl SeededIds {
    /// Ids from `seed`, the same sequence every time.
    pub fn new(seed: u64) -> SeededIds {
        SeededIds { state: AtomicU64::new(seed) }
    }

    /// A seed from `FLOWC_SEED`: a decimal number as is, any other text
    /// hashed (FNV-1a), so `FLOWC_SEED=test` works too.
    pub fn from_text(text: &str) -> SeededIds {
        let trimmed = text.trim();
        let seed = trimmed.parse::<u64>().unwrap_or_else(|_| fnv1a(trimmed));
        SeededIds::new(seed)
    }
}

impl IdSource for SeededIds {
    fn next_id(&self) -> String {
        // Each id takes two splitmix64 steps; reserving both at once keeps
        // the sequence deterministic per id even across threads.
        let start = self.state.fetch_add(SPLITMIX_GAMMA.wrapping_mul(2), Ordering::Relaxed);
        let mut state = start;
        format_uuid_v4(random_bytes(&mut state))
    }
}

const SPLITMIX_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// One splitmix64 step: advances `state` and returns a well-mixed output.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(SPLITMIX_GAMMA);
    let mut mixed = *state;
    mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    mixed ^ (mixed >> 31)
}

fn random_bytes(state: &mut u64) -> [u8; 16] {
    let high = splitmix64(state).to_be_bytes();
    let low = splitmix64(state).to_be_bytes();
    let mut bytes = [0u8; 16];
    for (slot, byte) in bytes.iter_mut().zip(high.iter().chain(low.iter())) {
        *slot = *byte;
    }
    bytes
}

fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}

/// `xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx` with the RFC 9562 version and
/// variant bits set.
fn format_uuid_v4(mut bytes: [u8; 16]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    // Written digit by digit: a `format!` per byte made every new session
    // id cost seventeen allocations.
    let mut text = String::with_capacity(36);
    for (index, byte) in bytes.iter().enumerate() {
        if matches!(index, 4 | 6 | 8 | 10) {
            text.push('-');
        }
        text.push(char::from(HEX[usize::from(byte >> 4)]));
        text.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    text
}

/// The clock and id source the environment asks for: `FLOWC_NOW` freezes
/// the clock (a bad value is an error to report), `FLOWC_SEED` seeds the
/// ids. Unset or empty variables mean the real clock and random ids.
pub fn from_env() -> Result<ClockAndIds, ClockError> {
    let read = |name: &str| std::env::var(name).ok().filter(|value| !value.trim().is_empty());
    from_values(read("FLOWC_NOW").as_deref(), read("FLOWC_SEED").as_deref())
}

/// [`from_env`] without the environment, for tests and embedders.
pub fn from_values(now: Option<&str>, seed: Option<&str>) -> Result<ClockAndIds, ClockError> {
    let clock: Arc<dyn Clock> = match now {
        Some(text) => Arc::new(FixedClock::parse(text)?),
        None => Arc::new(SystemClock),
    };
    let ids: Arc<dyn IdSource> = match seed {
        Some(text) => Arc::new(SeededIds::from_text(text)),
        None => Arc::new(RandomIds::default()),
    };
    Ok((clock, ids))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_past_the_latest_time_has_no_resume_time() {
        let now = FixedClock::parse("2026-01-05T10:00:00Z").map(|clock| clock.0).unwrap_or_default();
        assert_eq!(
            resume_time(now, 86_400_000).map(|time| time.to_rfc3339()),
            Some("2026-01-06T10:00:00+00:00".to_string())
        );
        assert_eq!(resume_time(now, 100_000_000 * 86_400_000), None);
        assert_eq!(resume_time(now, u64::MAX), None);
    }

    fn is_uuid_v4(id: &str) -> bool {
        let groups: Vec<&str> = id.split('-').collect();
        let lengths: Vec<usize> = groups.iter().map(|group| group.len()).collect();
        lengths == [8, 4, 4, 4, 12]
            && id.chars().all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c))
            && groups.get(2).is_some_and(|group| group.starts_with('4'))
            && groups.get(3).is_some_and(|group| group.starts_with(['8', '9', 'a', 'b']))
    }

    #[test]
    fn fixed_clock_reads_rfc3339_naive_and_dates() {
        for (text, expected) in [
            ("2026-01-05T10:00:00Z", "2026-01-05T10:00:00+00:00"),
            ("2026-01-05T11:00:00+01:00", "2026-01-05T10:00:00+00:00"),
            ("2026-01-05T10:00:00", "2026-01-05T10:00:00+00:00"),
            (" 2026-01-05 ", "2026-01-05T00:00:00+00:00"),
        ] {
            let clock = FixedClock::parse(text).map(|clock| clock.now().to_rfc3339());
            assert_eq!(clock, Ok(expected.to_string()), "{text}");
        }
        assert_eq!(
            FixedClock::parse("yesterday").err(),
            Some(ClockError::InvalidNow { value: "yesterday".to_string() })
        );
    }

    #[test]
    fn from_values_picks_fixed_and_seeded() {
        let Ok((clock, ids)) = from_values(Some("2026-01-05T10:00:00Z"), Some("42")) else {
            panic!("valid values were refused");
        };
        assert_eq!(clock.now().to_rfc3339(), "2026-01-05T10:00:00+00:00");
        let Ok((_, again)) = from_values(None, Some("42")) else {
            panic!("valid values were refused");
        };
        assert_eq!(ids.next_id(), again.next_id());
        assert!(from_values(Some("not a time"), None).is_err());
    }

    #[test]
    fn seeded_ids_are_deterministic_distinct_uuids() {
        let first = SeededIds::new(7);
        let second = SeededIds::new(7);
        let sequence: Vec<String> = (0..50).map(|_| first.next_id()).collect();
        let replay: Vec<String> = (0..50).map(|_| second.next_id()).collect();
        assert_eq!(sequence, replay);
        let mut unique = sequence.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 50);
        assert!(sequence.iter().all(|id| is_uuid_v4(id)), "{sequence:?}");
        assert_ne!(SeededIds::new(8).next_id(), SeededIds::new(7).next_id());
        assert_eq!(SeededIds::from_text("test").next_id(), SeededIds::from_text("test").next_id());
    }

    #[test]
    fn a_uuid_is_written_as_its_bytes_in_hex_with_version_and_variant() {
        let bytes: [u8; 16] = std::array::from_fn(|index| u8::try_from(index).unwrap_or(0));
        assert_eq!(format_uuid_v4(bytes), "00010203-0405-4607-8809-0a0b0c0d0e0f");
        assert_eq!(format_uuid_v4([0xff; 16]), "ffffffff-ffff-4fff-bfff-ffffffffffff");
    }

    #[test]
    fn random_ids_are_distinct_uuids() {
        let ids = RandomIds::default();
        let first = ids.next_id();
        let second = ids.next_id();
        assert!(is_uuid_v4(&first) && is_uuid_v4(&second), "{first} {second}");
        assert_ne!(first, second);
    }
}
