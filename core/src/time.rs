//! Time is UTC everywhere. Input may be RFC 3339 with any offset, or a naive
//! `YYYY-MM-DD HH:MM:SS[.fff]` / `YYYY-MM-DDTHH:MM:SS[.fff]`, which is taken as UTC; output is
//! RFC 3339 in UTC with millisecond precision.

use chrono::{DateTime, NaiveDateTime, SecondsFormat, Utc};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected an RFC 3339 timestamp or YYYY-MM-DD HH:MM:SS")]
pub struct TimeFormatError;

/// Parses a timestamp, normalising it to UTC.
pub fn parse_utc(text: &str) -> Result<DateTime<Utc>, TimeFormatError> {
    let text = text.trim();
    if let Ok(aware) = DateTime::parse_from_rfc3339(text) {
        return Ok(aware.with_timezone(&Utc));
    }
    ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"]
        .iter()
        .find_map(|format| NaiveDateTime::parse_from_str(text, format).ok())
        .map(|naive| naive.and_utc())
        .ok_or(TimeFormatError)
}

/// `2026-11-21T14:00:00.123Z`.
pub fn format_utc(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn naive_input_is_taken_as_utc() {
        let expected = DateTime::parse_from_rfc3339("2026-11-21T14:00:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(parse_utc("2026-11-21 14:00:00"), Ok(expected));
        assert_eq!(parse_utc("2026-11-21T14:00:00"), Ok(expected));
    }

    #[test]
    fn offsets_are_normalised_to_utc() {
        let at = parse_utc("2026-11-21T16:00:00.250+02:00").unwrap();
        assert_eq!(format_utc(at), "2026-11-21T14:00:00.250Z");
    }

    #[test]
    fn garbage_is_rejected() {
        for bad in ["", "yesterday", "2026-13-01 00:00:00", "2026-11-21", "1700000000", "2026-11-21 25:00:00"] {
            assert_eq!(parse_utc(bad), Err(TimeFormatError), "{bad:?}");
        }
    }
}
