//! Pacemaker's timestamp spellings. crm_mon prints two families:
//!
//! * ISO-like, `YYYY-MM-DD HH:MM:SS`, optionally with `.uuuuuu` and a zone
//!   designator (`Z`, `±hh:mm`, `±hhmm`, `±hh`, possibly after a space), used for
//!   fence events, failures and pacemakerd;
//! * ctime-like, `Mon Nov 30 07:36:40 2026` (day padded with a space), used for
//!   node history and `last_update`. It has no zone: it is the local time of
//!   the host that ran crm_mon, which we take as UTC unless told otherwise
//!   (see `Options::local_offset` in the report).

use time::format_description::BorrowedFormatItem;
use time::macros::format_description;
use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset};

/// Parse any timestamp crm_mon prints. `local` is the offset assumed for
/// spellings that carry no zone.
pub fn parse_pacemaker_time(s: &str, local: UtcOffset) -> Option<OffsetDateTime> {
    let s = s.trim();
    if s.as_bytes().first().is_some_and(u8::is_ascii_digit) {
        parse_iso(s, local)
    } else {
        parse_ctime(s, local)
    }
}

fn num<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn parse_iso(s: &str, local: UtcOffset) -> Option<OffsetDateTime> {
    // Date and time may be separated by a space or a `T`.
    let (date, rest) = s.split_at_checked(10)?;
    let mut parts = date.split('-');
    let year: i32 = num(parts.next()?)?;
    let month: u8 = num(parts.next()?)?;
    let day: u8 = num(parts.next()?)?;
    if parts.next().is_some() {
        return None;
    }
    let rest = rest.strip_prefix([' ', 'T'])?;
    let (hms, rest) = rest.split_at_checked(8)?;
    let mut parts = hms.split(':');
    let h: u8 = num(parts.next()?)?;
    let m: u8 = num(parts.next()?)?;
    let sec: u8 = num(parts.next()?)?;
    if parts.next().is_some() {
        return None;
    }
    let (micro, zone) = match rest.strip_prefix('.') {
        Some(frac) => {
            let end = frac
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(frac.len());
            let (digits, zone) = frac.split_at(end);
            if digits.is_empty() || digits.len() > 9 {
                return None;
            }
            // Scale to microseconds whatever the number of digits.
            let mut padded = digits.to_owned();
            while padded.len() < 9 {
                padded.push('0');
            }
            let nanos: u32 = num(&padded)?;
            (nanos / 1000, zone)
        }
        None => (0, rest),
    };
    let offset = parse_zone(zone.trim_start(), local)?;
    let date = Date::from_calendar_date(year, Month::try_from(month).ok()?, day).ok()?;
    let time = Time::from_hms_micro(h, m, sec, micro).ok()?;
    Some(PrimitiveDateTime::new(date, time).assume_offset(offset))
}

fn parse_zone(z: &str, local: UtcOffset) -> Option<UtcOffset> {
    if z.is_empty() {
        return Some(local);
    }
    if z == "Z" || z == "z" || z.eq_ignore_ascii_case("UTC") || z.eq_ignore_ascii_case("GMT") {
        return Some(UtcOffset::UTC);
    }
    let (sign, digits) = match z.as_bytes().first()? {
        b'+' => (1i8, &z[1..]),
        b'-' => (-1i8, &z[1..]),
        _ => return None,
    };
    let digits: String = digits.chars().filter(|c| *c != ':').collect();
    let (h, m): (i8, i8) = match digits.len() {
        2 => (num(&digits)?, 0),
        4 => (num(digits.get(..2)?)?, num(digits.get(2..)?)?),
        _ => return None,
    };
    UtcOffset::from_hms(sign * h, sign * m, 0).ok()
}

fn parse_ctime(s: &str, local: UtcOffset) -> Option<OffsetDateTime> {
    let mut it = s.split_ascii_whitespace();
    let _weekday = it.next()?;
    let month = match it.next()? {
        "Jan" => Month::January,
        "Feb" => Month::February,
        "Mar" => Month::March,
        "Apr" => Month::April,
        "May" => Month::May,
        "Jun" => Month::June,
        "Jul" => Month::July,
        "Aug" => Month::August,
        "Sep" => Month::September,
        "Oct" => Month::October,
        "Nov" => Month::November,
        "Dec" => Month::December,
        _ => return None,
    };
    let day: u8 = num(it.next()?)?;
    let hms = it.next()?;
    let year: i32 = num(it.next()?)?;
    if it.next().is_some() {
        return None;
    }
    let mut parts = hms.split(':');
    let h: u8 = num(parts.next()?)?;
    let m: u8 = num(parts.next()?)?;
    let sec: u8 = num(parts.next()?)?;
    if parts.next().is_some() {
        return None;
    }
    let date = Date::from_calendar_date(year, month, day).ok()?;
    let time = Time::from_hms(h, m, sec).ok()?;
    Some(PrimitiveDateTime::new(date, time).assume_offset(local))
}

/// Kubernetes `metav1.Time`: RFC 3339, UTC, whole seconds.
const K8S: &[BorrowedFormatItem<'_>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");

/// RFC 3339, UTC, six fraction digits: fence events keep Pacemaker's
/// microseconds, so two events in one second stay ordered.
const MICRO: &[BorrowedFormatItem<'_>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z");

/// Format as Kubernetes `metav1.Time` (RFC 3339, UTC, whole seconds).
pub fn format_k8s(t: OffsetDateTime) -> String {
    format_utc(t, K8S)
}

/// Format as RFC 3339 in UTC with microseconds.
pub fn format_rfc3339_micro(t: OffsetDateTime) -> String {
    format_utc(t, MICRO)
}

fn format_utc(t: OffsetDateTime, fmt: &[BorrowedFormatItem<'_>]) -> String {
    // Cannot fail: an OffsetDateTime has every component these descriptions
    // name, and a String accepts any output.
    t.to_offset(UtcOffset::UTC).format(fmt).unwrap_or_default()
}

/// Parse an RFC 3339 timestamp as written by [`format_k8s`] (or by Kubernetes).
pub fn parse_k8s(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn iso_variants() {
        let u = UtcOffset::UTC;
        let want = datetime!(2026-11-30 07:36:38 UTC);
        assert_eq!(parse_pacemaker_time("2026-11-30 07:36:38Z", u), Some(want));
        assert_eq!(parse_pacemaker_time("2026-11-30 07:36:38 Z", u), Some(want));
        assert_eq!(parse_pacemaker_time("2026-11-30 07:36:38", u), Some(want));
        assert_eq!(parse_pacemaker_time("2026-11-30T07:36:38Z", u), Some(want));
        assert_eq!(
            parse_pacemaker_time("2026-11-30 07:36:38.123456Z", u),
            Some(datetime!(2026-11-30 07:36:38.123456 UTC))
        );
        assert_eq!(
            parse_pacemaker_time("2026-11-30 08:36:38.000001 +01:00", u),
            Some(datetime!(2026-11-30 07:36:38.000001 UTC))
        );
        assert_eq!(
            parse_pacemaker_time("2026-11-30 02:36:38-0500", u),
            Some(want)
        );
        assert_eq!(
            parse_pacemaker_time("2026-11-30 09:36:38+02", u),
            Some(want)
        );
    }

    #[test]
    fn ctime_variants() {
        let u = UtcOffset::UTC;
        assert_eq!(
            parse_pacemaker_time("Mon Nov 30 07:36:40 2026", u),
            Some(datetime!(2026-11-30 07:36:40 UTC))
        );
        assert_eq!(
            parse_pacemaker_time("Wed Oct  2 22:58:49 2013", u),
            Some(datetime!(2013-10-02 22:58:49 UTC))
        );
    }

    #[test]
    fn garbage_is_none() {
        let u = UtcOffset::UTC;
        for s in [
            "",
            "x",
            "2026-13-30 07:36:38Z",
            "2026-11-30 25:00:00",
            "2026-11-30 07:36:38 +99:00",
            "Mon Foo 30 07:36:40 2026",
            "2026-11-30",
            "2026-11-30 07:36:38.Z",
            "é2026",
        ] {
            assert_eq!(parse_pacemaker_time(s, u), None, "{s}");
        }
    }

    #[test]
    fn k8s_round_trip() {
        let t = datetime!(2026-08-01 10:00:00.5 UTC);
        assert_eq!(format_k8s(t), "2026-08-01T10:00:00Z");
        assert_eq!(format_rfc3339_micro(t), "2026-08-01T10:00:00.500000Z");
        let t = datetime!(0987-01-02 03:04:05.000007 +02:00);
        assert_eq!(format_k8s(t), "0987-01-02T01:04:05Z");
        assert_eq!(format_rfc3339_micro(t), "0987-01-02T01:04:05.000007Z");
        assert_eq!(
            parse_k8s("2026-08-01T10:00:00Z"),
            Some(datetime!(2026-08-01 10:00:00 UTC))
        );
    }
}
