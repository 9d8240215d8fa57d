//! The operator's continuation limits, as a deployment writes them: the
//! `[limits]` table of `flowc.toml` (conversations) with its `[limits.run]`
//! sub-table (workflow runs), and the same limits given one at a time on
//! the command line. It turns text into [`ContinuationLimits`] and
//! [`RunLimits`] and says precisely what is wrong with text it refuses; it
//! reads no file (`crate::config` finds and parses `flowc.toml` and the CLI
//! hands its table here), so the runtime keeps its I/O where it was.
//!
//! These limits are the operator's; a program's `agent.limits` are its
//! author's and are read by the lowering, not here. Both apply to a turn,
//! and the first reached stops it.

#![warn(missing_docs)]

use super::engine::ContinuationLimits;
use super::events::StopReason;
use super::workflow::RunLimits;
use crate::duration::{MAX_DURATION_DAYS, parse_duration_ms};
use std::time::Duration;

/// The stop reasons of the operator's conversation limits (the others are
/// the program's own, or how a turn ends by itself).
pub const OPERATOR_STOP_REASONS: [StopReason; 4] =
    [StopReason::StepLimit, StopReason::SessionTokenLimit, StopReason::SessionTimeLimit, StopReason::ErrorLimit];

/// The table conversations' limits are written in.
const CONVERSATION_TABLE: &str = "limits";
/// The sub-table workflow runs' limits are written in.
const RUN_TABLE: &str = "limits.run";
const CONVERSATION_KEYS: &str = "max_steps_per_turn, max_session_tokens, max_session_time, max_consecutive_errors, run";
const RUN_KEYS: &str = "max_steps, max_time, max_consecutive_errors";

/// The operator's limits on conversations and on workflow runs. Each is
/// off (`None`) unless set; the default sets none and changes nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OperatorLimits {
    /// Limits on each conversation's turns (`[limits]`).
    pub conversation: ContinuationLimits,
    /// Limits on each workflow run (`[limits.run]`).
    pub run: RunLimits,
}

/// Why the `[limits]` table of a `flowc.toml` was refused. The words name
/// the table and key; the caller adds the file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LimitsError {
    /// The file is not TOML at all.
    #[error("{0}")]
    Toml(String),
    #[error("`{table}` must be a table, written [{table}]")]
    /// The table is some other value.
    NotATable {
        /// The table's name.
        table: &'static str,
    },
    #[error("unknown key `{key}` in [{table}] (known: {known})")]
    /// A key the table does not have.
    UnknownKey {
        /// The table's name.
        table: &'static str,
        /// The key given.
        key: String,
        /// The keys the table has.
        known: &'static str,
    },
    #[error("`{key}` in [{table}] must be {accepted}, not {found}")]
    /// A value the limit does not accept.
    Invalid {
        /// The table's name.
        table: &'static str,
        /// The limit's key.
        key: &'static str,
        /// What the limit accepts.
        accepted: Accepted,
        /// The value given, as written.
        found: String,
    },
}

/// What one limit accepts, in the words an error uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accepted {
    /// A count kept as `u32` (steps, errors in a row).
    Count,
    /// Tokens, kept as `u64`.
    Tokens,
    /// A duration in flowc's one grammar, longer than zero.
    Time,
}

impl std::fmt::Display for Accepted {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Accepted::Count => write!(formatter, "a whole number from 1 to {}", u32::MAX),
            Accepted::Tokens => write!(formatter, "a whole number of at least 1"),
            Accepted::Time => write!(
                formatter,
                "a duration such as \"30s\", \"10m\" or \"2h\" (a whole number and ms, s, m, h or d; \
                 more than 0, at most {MAX_DURATION_DAYS}d)"
            ),
        }
    }
}

impl OperatorLimits {
    /// The limits of a `flowc.toml`'s text: its `[limits]` table, or none
    /// when it has no such table. Other tables belong to other readers.
    pub fn from_toml(text: &str) -> Result<OperatorLimits, LimitsError> {
        let file: toml::Table = toml::from_str(text).map_err(|error| LimitsError::Toml(error.message().to_string()))?;
        OperatorLimits::from_table(&file)
    }

    /// The limits of a parsed `flowc.toml` (`crate::config` parses it once
    /// for every reader): its `[limits]` table, or none.
    pub fn from_table(file: &toml::Table) -> Result<OperatorLimits, LimitsError> {
        let mut limits = OperatorLimits::default();
        let Some(table) = file.get(CONVERSATION_TABLE) else {
            return Ok(limits);
        };
        let table = table.as_table().ok_or(LimitsError::NotATable { table: CONVERSATION_TABLE })?;
        for (key, value) in table {
            let conversation = &mut limits.conversation;
            match key.as_str() {
                "max_steps_per_turn" => {
                    conversation.max_steps_per_turn = Some(count(value, CONVERSATION_TABLE, "max_steps_per_turn")?);
                }
                "max_session_tokens" => {
                    conversation.max_session_tokens = Some(tokens(value, CONVERSATION_TABLE, "max_session_tokens")?);
                }
                "max_session_time" => {
                    conversation.max_session_time = Some(time(value, CONVERSATION_TABLE, "max_session_time")?);
                }
                "max_consecutive_errors" => {
                    conversation.max_consecutive_errors =
                        Some(count(value, CONVERSATION_TABLE, "max_consecutive_errors")?);
                }
                "run" => limits.run = run_limits(value)?,
                _ => return Err(unknown_key(CONVERSATION_TABLE, key, CONVERSATION_KEYS)),
            }
        }
        Ok(limits)
    }

    /// These limits with every limit `overrides` sets put in place of this
    /// one's (flags over the file).
    pub fn overridden_by(self, overrides: OperatorLimits) -> OperatorLimits {
        let (conversation, over) = (self.conversation, overrides.conversation);
        let (run, run_over) = (self.run, overrides.run);
        OperatorLimits {
            conversation: ContinuationLimits {
                max_steps_per_turn: over.max_steps_per_turn.or(conversation.max_steps_per_turn),
                max_session_tokens: over.max_session_tokens.or(conversation.max_session_tokens),
                max_session_time: over.max_session_time.or(conversation.max_session_time),
                max_consecutive_errors: over.max_consecutive_errors.or(conversation.max_consecutive_errors),
            },
            run: RunLimits {
                max_steps: run_over.max_steps.or(run.max_steps),
                max_time: run_over.max_time.or(run.max_time),
                max_consecutive_errors: run_over.max_consecutive_errors.or(run.max_consecutive_errors),
            },
        }
    }
}

/// The `[limits.run]` sub-table.
fn run_limits(value: &toml::Value) -> Result<RunLimits, LimitsError> {
    let table = value.as_table().ok_or(LimitsError::NotATable { table: RUN_TABLE })?;
    let mut limits = RunLimits::default();
    for (key, value) in table {
        match key.as_str() {
            "max_steps" => limits.max_steps = Some(count(value, RUN_TABLE, "max_steps")?),
            "max_time" => limits.max_time = Some(time(value, RUN_TABLE, "max_time")?),
            "max_consecutive_errors" => {
                limits.max_consecutive_errors = Some(count(value, RUN_TABLE, "max_consecutive_errors")?);
            }
            _ => return Err(unknown_key(RUN_TABLE, key, RUN_KEYS)),
        }
    }
    Ok(limits)
}

fn unknown_key(table: &'static str, key: &str, known: &'static str) -> LimitsError {
    LimitsError::UnknownKey { table, key: key.to_string(), known }
}

fn invalid(value: &toml::Value, table: &'static str, key: &'static str, accepted: Accepted) -> LimitsError {
    LimitsError::Invalid { table, key, accepted, found: value.to_string() }
}

fn count(value: &toml::Value, table: &'static str, key: &'static str) -> Result<u32, LimitsError> {
    value.as_integer().and_then(count_of).ok_or_else(|| invalid(value, table, key, Accepted::Count))
}

fn tokens(value: &toml::Value, table: &'static str, key: &'static str) -> Result<u64, LimitsError> {
    value.as_integer().and_then(tokens_of).ok_or_else(|| invalid(value, table, key, Accepted::Tokens))
}

fn time(value: &toml::Value, table: &'static str, key: &'static str) -> Result<Duration, LimitsError> {
    value.as_str().and_then(time_of).ok_or_else(|| invalid(value, table, key, Accepted::Time))
}

fn count_of(number: i64) -> Option<u32> {
    u32::try_from(number).ok().filter(|count| *count >= 1)
}

fn tokens_of(number: i64) -> Option<u64> {
    u64::try_from(number).ok().filter(|tokens| *tokens >= 1)
}

fn time_of(text: &str) -> Option<Duration> {
    parse_duration_ms(text).ok().filter(|ms| *ms > 0).map(Duration::from_millis)
}

/// A count given on the command line (`--max-steps 20`), accepted as the
/// file accepts it.
pub fn parse_count(text: &str) -> Result<u32, String> {
    text.trim().parse().ok().and_then(count_of).ok_or_else(|| format!("must be {}", Accepted::Count))
}

/// Tokens given on the command line (`--max-session-tokens 50000`).
pub fn parse_tokens(text: &str) -> Result<u64, String> {
    text.trim().parse().ok().and_then(tokens_of).ok_or_else(|| format!("must be {}", Accepted::Tokens))
}

/// A duration given on the command line (`--max-session-time 10m`).
pub fn parse_time(text: &str) -> Result<Duration, String> {
    time_of(text).ok_or_else(|| format!("must be {}", Accepted::Time))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Result<OperatorLimits, &str>) {
        let read = OperatorLimits::from_toml(text).map_err(|error| error.to_string());
        assert_eq!(read, expected.map_err(str::to_string), "{text}");
    }

    fn refused(text: &str, expected: &str) {
        check(text, Err(expected));
    }

    const COUNT: &str = "a whole number from 1 to 4294967295";
    const TIME: &str = "a duration such as \"30s\", \"10m\" or \"2h\" (a whole number and ms, s, m, h or d; more than 0, at most 3650d)";

    #[test]
    fn every_key_of_both_tables_is_read() {
        let text = "provider = \"offline\"\n[store]\nurl = \"sqlite:x.db\"\n\
                    [limits]\nmax_steps_per_turn = 20\nmax_session_tokens = 50000\n\
                    max_session_time = \"10m\"\nmax_consecutive_errors = 3\n\
                    [limits.run]\nmax_steps = 100\nmax_time = \"500ms\"\nmax_consecutive_errors = 2\n";
        let expected = OperatorLimits {
            conversation: ContinuationLimits {
                max_steps_per_turn: Some(20),
                max_session_tokens: Some(50_000),
                max_session_time: Some(Duration::from_secs(600)),
                max_consecutive_errors: Some(3),
            },
            run: RunLimits {
                max_steps: Some(100),
                max_time: Some(Duration::from_millis(500)),
                max_consecutive_errors: Some(2),
            },
        };
        check(text, Ok(expected));
    }

    #[test]
    fn no_table_or_an_empty_one_sets_no_limit() {
        check("", Ok(OperatorLimits::default()));
        check("model = \"m\"\n[store]\nurl = \"sqlite:x\"\n", Ok(OperatorLimits::default()));
        check("[limits]\n", Ok(OperatorLimits::default()));
        check("[limits.run]\n", Ok(OperatorLimits::default()));
    }

    #[test]
    fn an_inline_run_table_is_the_same_table() {
        let limits = OperatorLimits::from_toml("[limits]\nrun = { max_steps = 1 }\n");
        assert_eq!(limits.map(|limits| limits.run.max_steps), Ok(Some(1)));
    }

    #[test]
    fn text_that_is_not_toml_is_refused_with_the_parser_message() {
        let read = OperatorLimits::from_toml("[limits\n");
        assert!(matches!(read, Err(LimitsError::Toml(ref message)) if !message.is_empty()), "{read:?}");
    }

    #[test]
    fn limits_or_run_that_is_not_a_table_is_refused() {
        refused("limits = 3\n", "`limits` must be a table, written [limits]");
        refused("[limits]\nrun = 1\n", "`limits.run` must be a table, written [limits.run]");
    }

    #[test]
    fn an_unknown_key_is_refused_with_the_known_ones() {
        refused(
            "[limits]\nmax_steps = 1\n",
            "unknown key `max_steps` in [limits] (known: max_steps_per_turn, max_session_tokens, \
             max_session_time, max_consecutive_errors, run)",
        );
        refused(
            "[limits.run]\nmax_steps_per_turn = 1\n",
            "unknown key `max_steps_per_turn` in [limits.run] (known: max_steps, max_time, max_consecutive_errors)",
        );
    }

    #[test]
    fn a_count_must_be_a_whole_number_from_one_to_the_largest_u32() {
        for (value, found) in [("0", "0"), ("-3", "-3"), ("1.5", "1.5"), ("\"20\"", "\"20\""), ("true", "true")] {
            refused(
                &format!("[limits]\nmax_steps_per_turn = {value}\n"),
                &format!("`max_steps_per_turn` in [limits] must be {COUNT}, not {found}"),
            );
        }
        refused(
            "[limits]\nmax_consecutive_errors = 4294967296\n",
            &format!("`max_consecutive_errors` in [limits] must be {COUNT}, not 4294967296"),
        );
        refused("[limits.run]\nmax_steps = 0\n", &format!("`max_steps` in [limits.run] must be {COUNT}, not 0"));
        refused(
            "[limits.run]\nmax_consecutive_errors = [1]\n",
            &format!("`max_consecutive_errors` in [limits.run] must be {COUNT}, not [1]"),
        );
        let largest = OperatorLimits::from_toml("[limits]\nmax_steps_per_turn = 4294967295\n");
        assert_eq!(largest.map(|limits| limits.conversation.max_steps_per_turn), Ok(Some(u32::MAX)));
    }

    #[test]
    fn tokens_must_be_a_whole_number_of_at_least_one() {
        for value in ["0", "-1", "\"1k\"", "2.0"] {
            refused(
                &format!("[limits]\nmax_session_tokens = {value}\n"),
                &format!("`max_session_tokens` in [limits] must be a whole number of at least 1, not {value}"),
            );
        }
    }

    #[test]
    fn a_time_must_be_a_duration_string_longer_than_zero() {
        for (value, found) in
            [("600", "600"), ("\"0s\"", "\"0s\""), ("\"10 min\"", "\"10 min\""), ("\"3651d\"", "\"3651d\"")]
        {
            refused(
                &format!("[limits]\nmax_session_time = {value}\n"),
                &format!("`max_session_time` in [limits] must be {TIME}, not {found}"),
            );
        }
        refused(
            "[limits.run]\nmax_time = \"-1s\"\n",
            &format!("`max_time` in [limits.run] must be {TIME}, not \"-1s\""),
        );
    }

    #[test]
    fn flags_accept_what_the_file_accepts() {
        assert_eq!(parse_count("20"), Ok(20));
        assert_eq!(parse_count("0"), Err(format!("must be {COUNT}")));
        assert_eq!(parse_count("-2"), Err(format!("must be {COUNT}")));
        assert_eq!(parse_count("4294967296"), Err(format!("must be {COUNT}")));
        assert_eq!(parse_tokens("50000"), Ok(50_000));
        assert_eq!(parse_tokens("0"), Err("must be a whole number of at least 1".to_string()));
        assert_eq!(parse_tokens("lots"), Err("must be a whole number of at least 1".to_string()));
        assert_eq!(parse_time("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_time("0ms"), Err(format!("must be {TIME}")));
        assert_eq!(parse_time("10"), Err(format!("must be {TIME}")));
    }

    #[test]
    fn a_limit_set_by_the_overrides_wins_and_the_others_stay() {
        let file = OperatorLimits::from_toml(
            "[limits]\nmax_steps_per_turn = 5\nmax_session_tokens = 9\n[limits.run]\nmax_steps = 7\nmax_time = \"1s\"\n",
        );
        let flags = OperatorLimits {
            conversation: ContinuationLimits { max_steps_per_turn: Some(1), ..ContinuationLimits::default() },
            run: RunLimits { max_time: Some(Duration::from_secs(2)), ..RunLimits::default() },
        };
        let merged = file.map(|file| file.overridden_by(flags));
        let expected = OperatorLimits {
            conversation: ContinuationLimits {
                max_steps_per_turn: Some(1),
                max_session_tokens: Some(9),
                ..ContinuationLimits::default()
            },
            run: RunLimits { max_steps: Some(7), max_time: Some(Duration::from_secs(2)), ..RunLimits::default() },
        };
        assert_eq!(merged, Ok(expected));
    }
}
