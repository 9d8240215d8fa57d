//! The one duration grammar of flowc, shared by the language (`wait`,
//! `timeout`, `turn_timeout`, `cooldown`, `backoff`) and `flowc.toml`
//! (`timeout`, `connect_timeout`): a whole number and a unit, with no space
//! between them: `500ms`, `30s`, `10m`, `2h`, `1d`. It sits at the root of
//! the crate so that both the lowering and the provider configuration can
//! use it without one depending on the other.
#![warn(missing_docs)]

/// The longest duration flowc accepts: about ten years. A time this far
/// ahead still fits every clock and date type the runtime adds it to, so a
/// program that checks can never overflow one.
pub const MAX_DURATION_MS: u64 = MAX_DURATION_DAYS * 86_400_000;

/// [`MAX_DURATION_MS`] in the unit a user would write it in.
pub const MAX_DURATION_DAYS: u64 = 3_650;

/// Why a text is not a duration flowc accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DurationError {
    /// Not a whole number followed by `ms`, `s`, `m`, `h` or `d`.
    Malformed,
    /// Well formed, but longer than [`MAX_DURATION_MS`].
    TooLong,
}

/// A duration in milliseconds.
pub fn parse_duration_ms(text: &str) -> Result<u64, DurationError> {
    let text = text.trim();
    let unit_at = text.find(|character: char| !character.is_ascii_digit()).ok_or(DurationError::Malformed)?;
    let (digits, unit) = text.split_at(unit_at);
    if digits.is_empty() {
        return Err(DurationError::Malformed);
    }
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(DurationError::Malformed),
    };
    // Digits that overflow u64 are a well-formed duration that is too long.
    let amount: u64 = digits.parse().map_err(|_| DurationError::TooLong)?;
    amount.checked_mul(unit_ms).filter(|ms| *ms <= MAX_DURATION_MS).ok_or(DurationError::TooLong)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_is_a_whole_number_and_a_unit() {
        assert_eq!(parse_duration_ms("500ms"), Ok(500));
        assert_eq!(parse_duration_ms("30s"), Ok(30_000));
        assert_eq!(parse_duration_ms("2m"), Ok(120_000));
        assert_eq!(parse_duration_ms("2d"), Ok(172_800_000));
        assert_eq!(parse_duration_ms(" 0s "), Ok(0));
        for malformed in ["10", "s", "1.5s", "1.5", "5 m", "5min", "-3s", "", "3S"] {
            assert_eq!(parse_duration_ms(malformed), Err(DurationError::Malformed), "{malformed:?}");
        }
    }

    #[test]
    fn durations_past_the_maximum_are_too_long() {
        assert_eq!(parse_duration_ms("3650d"), Ok(MAX_DURATION_MS));
        assert_eq!(parse_duration_ms("3651d"), Err(DurationError::TooLong));
        assert_eq!(parse_duration_ms("100000000d"), Err(DurationError::TooLong));
        assert_eq!(parse_duration_ms("99999999999999999999d"), Err(DurationError::TooLong));
        assert_eq!(parse_duration_ms("18446744073709551615ms"), Err(DurationError::TooLong));
    }

    #[test]
    fn the_longest_duration_fits_the_runtime_clock() {
        let far = chrono::DateTime::<chrono::Utc>::MAX_UTC - chrono::TimeDelta::days(365 * 100_000);
        let longest = chrono::TimeDelta::try_milliseconds(i64::try_from(MAX_DURATION_MS).unwrap_or(i64::MAX));
        assert!(longest.and_then(|delta| far.checked_add_signed(delta)).is_some());
    }
}
