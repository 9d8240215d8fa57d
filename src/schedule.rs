//! Workflow schedules: a five-field cron expression read in an IANA time
//! zone, and the next time it fires. Shared by the checker (which refuses
//! an expression or zone this cannot read, or one that never fires) and
//! the worker (which starts the runs), so both read a schedule the same
//! way. It sits at the root of the crate, as [`crate::duration`] does, so
//! that neither has to depend on the other. No I/O: the time is handed in.
//!
//! Cron fields are `minute hour day-of-month month day-of-week`, with
//! lists, ranges, steps, month and weekday names (`MON`, `JAN`) and the
//! `@daily`-style nicknames; a restricted day of month and a restricted
//! day of week fire on either, as in Vixie cron. Times are wall-clock
//! times of the zone: a time skipped by a daylight-saving change fires at
//! the first instant after the change, and a time that happens twice
//! fires once, the first time (croner's rules, the OCPS ones).
#![warn(missing_docs)]

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

/// The zone a schedule is read in when it names none.
pub const DEFAULT_ZONE: &str = "UTC";

/// A schedule that reads: its expression and its zone.
#[derive(Clone, Debug)]
pub struct Schedule {
    cron: Cron,
    zone: Tz,
}

/// Why a schedule does not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScheduleError {
    /// The cron expression is malformed; `reason` is the parser's words.
    Cron {
        /// What the parser found wrong.
        reason: String,
    },
    /// The zone is not one of the IANA time zone database.
    Zone,
    /// The expression reads but names no time that exists (`0 0 30 2 *`).
    Never,
}

/// The first instant the checker asks a schedule about: any fixed time
/// will do, since an expression that fires at all fires within the few
/// years the parser searches from any start.
const PROBE: i64 = 946_684_800; // 2000-01-01T00:00:00Z

impl Schedule {
    /// Reads `cron` (five fields, no seconds, no year) in `zone` (IANA,
    /// UTC when `None`), and makes sure it fires at least once.
    pub fn parse(cron: &str, zone: Option<&str>) -> Result<Schedule, ScheduleError> {
        let fields = cron.split_whitespace().count();
        if fields != 5 && !cron.trim_start().starts_with('@') {
            let reason = format!("it has {fields} field{}, not 5", if fields == 1 { "" } else { "s" });
            return Err(ScheduleError::Cron { reason });
        }
        let parser = CronParser::builder().seconds(Seconds::Disallowed).year(Year::Disallowed).build();
        let cron = parser.parse(cron.trim()).map_err(|error| ScheduleError::Cron { reason: reason(&error) })?;
        let zone = zone.unwrap_or(DEFAULT_ZONE).parse::<Tz>().map_err(|_| ScheduleError::Zone)?;
        let schedule = Schedule { cron, zone };
        match schedule.next_after(PROBE) {
            Some(_) => Ok(schedule),
            None => Err(ScheduleError::Never),
        }
    }

    /// The first time the schedule fires strictly after `after` (seconds
    /// since the epoch), in seconds since the epoch; `None` when it never
    /// does again.
    pub fn next_after(&self, after: i64) -> Option<i64> {
        let start: DateTime<Tz> = Utc.timestamp_opt(after, 0).single()?.with_timezone(&self.zone);
        self.cron.find_next_occurrence(&start, false).ok().map(|next| next.timestamp())
    }

    /// The zone's IANA name.
    pub fn zone(&self) -> &'static str {
        self.zone.name()
    }
}

/// Every zone name the schedule accepts, for suggestions.
pub fn zone_names() -> impl Iterator<Item = &'static str> {
    chrono_tz::TZ_VARIANTS.iter().map(|zone| zone.name())
}

/// The parser's message without its own prefixes.
fn reason(error: &croner::errors::CronError) -> String {
    use croner::errors::CronError;
    match error {
        CronError::EmptyPattern => "it is empty".to_string(),
        CronError::InvalidPattern(message)
        | CronError::IllegalCharacters(message)
        | CronError::ComponentError(message) => message.trim_end_matches('.').to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> i64 {
        DateTime::parse_from_rfc3339(text).unwrap().timestamp()
    }

    fn next(cron: &str, zone: &str, after: &str) -> String {
        let schedule = Schedule::parse(cron, Some(zone)).unwrap();
        let next = schedule.next_after(at(after)).unwrap();
        DateTime::from_timestamp(next, 0).unwrap().to_rfc3339()
    }

    #[test]
    fn monday_nine_in_paris_is_eight_utc_in_winter_and_seven_in_summer() {
        assert_eq!(next("0 9 * * MON", "Europe/Paris", "2026-11-27T12:00:00Z"), "2026-11-30T08:00:00+00:00");
        assert_eq!(next("0 9 * * MON", "Europe/Paris", "2026-06-01T07:00:00Z"), "2026-06-08T07:00:00+00:00");
        // Strictly after: the tick itself is not "next".
        assert_eq!(next("0 9 * * MON", "Europe/Paris", "2026-11-30T08:00:00Z"), "2026-12-07T08:00:00+00:00");
    }

    #[test]
    fn the_tick_after_the_spring_change_moves_an_hour_in_utc() {
        // Paris goes from UTC+1 to UTC+2 on 2026-03-29 at 02:00 local.
        assert_eq!(next("30 8 * * *", "Europe/Paris", "2026-03-28T07:30:00Z"), "2026-03-29T06:30:00+00:00");
    }

    #[test]
    fn a_time_the_spring_change_skips_fires_just_after_it_and_a_repeated_one_once() {
        // 02:30 does not exist in Paris on 2026-03-29: it fires at 03:00 local (01:00 UTC).
        assert_eq!(next("30 2 * * *", "Europe/Paris", "2026-03-28T12:00:00Z"), "2026-03-29T01:00:00+00:00");
        // 02:30 happens twice on 2026-10-25: once, the first time (UTC+2), then the next day.
        assert_eq!(next("30 2 * * *", "Europe/Paris", "2026-10-24T12:00:00Z"), "2026-10-25T00:30:00+00:00");
        assert_eq!(next("30 2 * * *", "Europe/Paris", "2026-10-25T00:30:00Z"), "2026-10-26T01:30:00+00:00");
    }

    #[test]
    fn no_zone_is_utc() {
        let schedule = Schedule::parse("*/15 * * * *", None).unwrap();
        assert_eq!(schedule.zone(), "UTC");
        assert_eq!(schedule.next_after(at("2026-01-01T10:07:00Z")), Some(at("2026-01-01T10:15:00Z")));
    }

    #[test]
    fn malformed_expressions_unknown_zones_and_impossible_dates_are_refused() {
        assert!(matches!(Schedule::parse("0 9 * *", None), Err(ScheduleError::Cron { .. })));
        assert!(matches!(Schedule::parse("0 25 * * *", None), Err(ScheduleError::Cron { .. })));
        assert!(matches!(Schedule::parse("0 9 * * FUNDAY", None), Err(ScheduleError::Cron { .. })));
        assert!(matches!(Schedule::parse("0 0 9 * * MON", None), Err(ScheduleError::Cron { .. })), "no seconds");
        assert_eq!(Schedule::parse("0 9 * * MON", Some("Europe/Pariss")).err(), Some(ScheduleError::Zone));
        assert_eq!(Schedule::parse("0 0 30 2 *", None).err(), Some(ScheduleError::Never));
    }
}
