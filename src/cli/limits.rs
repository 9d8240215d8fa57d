//! The limits a command runs under: the `[limits]` table of the command's
//! `flowc.toml` (`crate::config`), each overridden by its flag. `flowc run` takes the
//! flags of both kinds of run; `flowc resume` and `flowc worker` only run
//! workflows and take those of workflow runs.

use crate::config::Config;
use crate::runtime::engine::ContinuationLimits;
use crate::runtime::limits_config::{OperatorLimits, parse_count, parse_time, parse_tokens};
use crate::runtime::workflow::RunLimits;
use std::time::Duration;

/// The limit flags of `flowc run`.
#[derive(Debug, Default, clap::Args)]
#[command(next_help_heading = "Limits (each overrides its key in [limits] or [limits.run] of flowc.toml)")]
pub struct LimitFlags {
    /// Conversations: steps one turn may execute (the next message goes on from there)
    #[arg(long, value_name = "N", value_parser = parse_count, allow_negative_numbers = true)]
    pub max_steps_per_turn: Option<u32>,
    /// Conversations: tokens a session may spend over all its turns
    #[arg(long, value_name = "N", value_parser = parse_tokens, allow_negative_numbers = true)]
    pub max_session_tokens: Option<u64>,
    /// Conversations: time a session may spend running turns, e.g. 10m
    #[arg(long, value_name = "DURATION", value_parser = parse_time, allow_negative_numbers = true)]
    pub max_session_time: Option<Duration>,
    /// Conversations and workflow runs: failures in a row before the turn or the run stops
    #[arg(long, value_name = "N", value_parser = parse_count, allow_negative_numbers = true)]
    pub max_consecutive_errors: Option<u32>,
    /// Workflow runs: steps this command runs (the run is then `paused`; `flowc resume` goes on)
    #[arg(long, value_name = "N", value_parser = parse_count, allow_negative_numbers = true)]
    pub max_steps: Option<u32>,
    /// Workflow runs: time this command runs the run for, e.g. 10m
    #[arg(long, value_name = "DURATION", value_parser = parse_time, allow_negative_numbers = true)]
    pub max_time: Option<Duration>,
}

/// The limit flags of `flowc resume` and `flowc worker`, which run workflows.
#[derive(Debug, Default, clap::Args)]
#[command(next_help_heading = "Limits (each overrides its key in the [limits.run] table of flowc.toml)")]
pub struct RunLimitFlags {
    /// Steps one resume runs (the run is then `paused`; a later resume goes on)
    #[arg(long, value_name = "N", value_parser = parse_count, allow_negative_numbers = true)]
    pub max_steps: Option<u32>,
    /// Time one resume runs the run for, e.g. 10m
    #[arg(long, value_name = "DURATION", value_parser = parse_time, allow_negative_numbers = true)]
    pub max_time: Option<Duration>,
    /// Steps failed in a row (gone on by `on_error: continue`) before the run stops
    #[arg(long, value_name = "N", value_parser = parse_count, allow_negative_numbers = true)]
    pub max_consecutive_errors: Option<u32>,
}

impl LimitFlags {
    /// The limits the flags set. `--max-consecutive-errors` sets the limit
    /// of both kinds of run: only one kind runs.
    fn overrides(&self) -> OperatorLimits {
        OperatorLimits {
            conversation: ContinuationLimits {
                max_steps_per_turn: self.max_steps_per_turn,
                max_session_tokens: self.max_session_tokens,
                max_session_time: self.max_session_time,
                max_consecutive_errors: self.max_consecutive_errors,
            },
            run: RunLimits {
                max_steps: self.max_steps,
                max_time: self.max_time,
                max_consecutive_errors: self.max_consecutive_errors,
            },
        }
    }

    /// The flags given that do not limit a workflow run.
    pub fn conversation_only(&self) -> Vec<&'static str> {
        let given = [
            (self.max_steps_per_turn.is_some(), "--max-steps-per-turn"),
            (self.max_session_tokens.is_some(), "--max-session-tokens"),
            (self.max_session_time.is_some(), "--max-session-time"),
        ];
        given.into_iter().filter_map(|(given, flag)| given.then_some(flag)).collect()
    }

    /// The flags given that do not limit a conversation.
    pub fn workflow_only(&self) -> Vec<&'static str> {
        let given = [(self.max_steps.is_some(), "--max-steps"), (self.max_time.is_some(), "--max-time")];
        given.into_iter().filter_map(|(given, flag)| given.then_some(flag)).collect()
    }

    /// The limits of `flowc run FILE`, whose `flowc.toml` is `config`.
    pub fn resolve(&self, config: &Config) -> Result<OperatorLimits, String> {
        Ok(configured(config)?.overridden_by(self.overrides()))
    }
}

impl RunLimitFlags {
    /// The limits of a command that names no program, whose `flowc.toml`
    /// (`config`) is the working directory's.
    pub fn resolve(&self, config: &Config) -> Result<RunLimits, String> {
        let overrides = OperatorLimits {
            conversation: ContinuationLimits::default(),
            run: RunLimits {
                max_steps: self.max_steps,
                max_time: self.max_time,
                max_consecutive_errors: self.max_consecutive_errors,
            },
        };
        Ok(configured(config)?.overridden_by(overrides).run)
    }
}

/// The `[limits]` of the `flowc.toml` this process reads, if there is one.
fn configured(config: &Config) -> Result<OperatorLimits, String> {
    OperatorLimits::from_table(config.table())
        .map_err(|refused| format!("cannot read the [limits] table of {}: {refused}", config.shown()))
}
