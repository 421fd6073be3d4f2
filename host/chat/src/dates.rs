//! The `send_date` form of a committed reply: the one the chat already
//! uses.
//!
//! SillyTavern has written two forms of `send_date` over the years: its
//! `getMessageTimeStamp()` (`May 15, 2024 5:42pm`, "humanized") and ISO 8601
//! (`2024-05-15T17:42:51.561Z`, what `new Date().toISOString()` gives and
//! what `gen_started`/`gen_finished` always are). A commit writes the form of
//! the latest message that has a `send_date`; ISO 8601 when none has one or
//! it is another form (old TavernAI numbers, `2023-5-1 @12h 34m 39s 770ms`).
//! The humanized form carries no time zone; toolhost writes it in UTC (the
//! host does not know the reader's zone, SillyTavern reads it as local time).

use std::time::{SystemTime, UNIX_EPOCH};

use crate::commit::{civil_from_days, format_send_date};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// Which form a committed message's `send_date` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SendDateStyle {
    /// `2024-05-15T17:42:51.561Z`.
    #[default]
    Iso,
    /// `May 15, 2024 5:42pm` (SillyTavern's `getMessageTimeStamp`), in UTC.
    Humanized,
}

impl SendDateStyle {
    /// The form of the last `send_date` of `dates` (in message order; a
    /// message without one is `None` and skipped).
    pub fn detect<'a>(dates: impl DoubleEndedIterator<Item = Option<&'a str>>) -> Self {
        match dates.rev().flatten().next() {
            Some(date) if is_humanized(date) => SendDateStyle::Humanized,
            _ => SendDateStyle::Iso,
        }
    }

    /// `time` in this form.
    pub fn format(self, time: SystemTime) -> String {
        match self {
            SendDateStyle::Iso => format_send_date(time),
            SendDateStyle::Humanized => format_humanized(time),
        }
    }
}

/// `time` as SillyTavern's `getMessageTimeStamp` writes it, in UTC.
pub fn format_humanized(time: SystemTime) -> String {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    let rest = secs % 86_400;
    let (hour, minute) = (rest / 3600, rest % 3600 / 60);
    let meridiem = if hour >= 12 { "pm" } else { "am" };
    let hour12 = match hour % 12 {
        0 => 12,
        h => h,
    };
    // `month` is 1..=12.
    let name = MONTHS[(month as usize - 1) % 12];
    format!("{name} {day}, {year} {hour12}:{minute:02}{meridiem}")
}

/// `Month D, YYYY H:MMam` / `…pm`, as `getMessageTimeStamp` writes it.
fn is_humanized(date: &str) -> bool {
    let digits = |s: &str, min: usize, max: usize| {
        (min..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
    };
    let Some((month, rest)) = date.split_once(' ') else {
        return false;
    };
    let Some((day, rest)) = rest.split_once(", ") else {
        return false;
    };
    let Some((year, time)) = rest.split_once(' ') else {
        return false;
    };
    let Some(clock) = time.strip_suffix("am").or_else(|| time.strip_suffix("pm")) else {
        return false;
    };
    let Some((hour, minute)) = clock.split_once(':') else {
        return false;
    };
    MONTHS.contains(&month)
        && digits(day, 1, 2)
        && digits(year, 4, 4)
        && digits(hour, 1, 2)
        && digits(minute, 2, 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn humanized_is_get_message_time_stamp_in_utc() {
        // 2024-05-15T17:42:51Z
        let t = UNIX_EPOCH + Duration::from_secs(1_715_794_971);
        assert_eq!(format_humanized(t), "May 15, 2024 5:42pm");
        assert_eq!(format_humanized(UNIX_EPOCH), "January 1, 1970 12:00am");
        // Noon is pm, 12 o'clock.
        let noon = UNIX_EPOCH + Duration::from_secs(1_709_985_600);
        assert_eq!(format_humanized(noon), "March 9, 2024 12:00pm");
        assert!(is_humanized(&format_humanized(t)));
    }

    #[test]
    fn the_last_dated_message_decides() {
        let detect = |dates: &[Option<&str>]| SendDateStyle::detect(dates.iter().copied());
        assert_eq!(detect(&[]), SendDateStyle::Iso);
        assert_eq!(
            detect(&[
                Some("2024-03-09T20:45:02.039Z"),
                Some("March 9, 2024 8:25pm"),
                None
            ]),
            SendDateStyle::Humanized
        );
        assert_eq!(
            detect(&[
                Some("March 9, 2024 8:25pm"),
                Some("2024-03-09T20:45:02.039Z")
            ]),
            SendDateStyle::Iso
        );
        // Other forms: ISO.
        assert_eq!(detect(&[Some("1682936100000")]), SendDateStyle::Iso);
        assert_eq!(
            detect(&[Some("2023-5-1 @12h 34m 39s 770ms")]),
            SendDateStyle::Iso
        );
        for near_miss in [
            "Mayo 15, 2024 5:42pm",
            "May 15, 2024 5:42",
            "May 15 2024 5:42pm",
            "May 155, 2024 5:42pm",
            "May 15, 24 5:42pm",
            "May 15, 2024 5:4pm",
        ] {
            assert!(!is_humanized(near_miss), "{near_miss}");
        }
    }
}
